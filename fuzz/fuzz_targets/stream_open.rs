//! libFuzzer entry for target `stream_open`: the check and its properties live in
//! `cipherbench_fuzz::stream_open` (crates/cipherbench-fuzz), shared with the stable driver.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cipherbench_fuzz::stream_open::check(data));
