//! libFuzzer entry for target `sizes`: the check and its properties live in
//! `cipherbench_fuzz::sizes` (crates/cipherbench-fuzz), shared with the stable driver.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cipherbench_fuzz::sizes::check(data));
