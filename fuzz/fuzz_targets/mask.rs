//! libFuzzer entry for target `mask`: the check and its properties live in
//! `cipherbench_fuzz::mask` (crates/cipherbench-fuzz), shared with the stable driver.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cipherbench_fuzz::mask::check(data));
