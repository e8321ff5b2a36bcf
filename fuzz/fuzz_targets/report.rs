//! libFuzzer entry for target `report`: the check and its properties live in
//! `cipherbench_fuzz::report` (crates/cipherbench-fuzz), shared with the stable driver.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cipherbench_fuzz::report::check(data));
