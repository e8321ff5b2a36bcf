//! libFuzzer entry for target `ia32cap`: the check and its properties live in
//! `cipherbench_fuzz::ia32cap` (crates/cipherbench-fuzz), shared with the stable driver.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cipherbench_fuzz::ia32cap::check(data));
