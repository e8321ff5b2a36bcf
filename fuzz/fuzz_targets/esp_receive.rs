//! libFuzzer entry for target `esp_receive`: the check and its properties live in
//! `cipherbench_fuzz::esp_receive` (crates/cipherbench-fuzz), shared with the stable driver.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cipherbench_fuzz::esp_receive::check(data));
