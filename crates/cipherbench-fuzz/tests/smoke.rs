//! The smoke run of every fuzz target on stable Rust (part of `make test`): each
//! committed seed in `fuzz/seeds/<target>/`, then seeded mutants of them, up to
//! 10,000 inputs, through the target's property checks. The deep runs (10^7 inputs,
//! libFuzzer) are `scripts/fuzz.sh`'s; this catches a property broken by a change
//! to the code under test, or a seed corpus that no longer fits its target.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use cipherbench_fuzz::driver;
use std::path::Path;

const RUNS: u64 = 10_000;

fn smoke(name: &str) {
    let target = cipherbench_fuzz::target(name).expect("a known target");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds")
        .join(name);
    let seeds = driver::load_seeds(&dir).expect("the committed seeds");
    assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
    if let Err(f) = driver::run(target, &seeds, RUNS, 1) {
        let hex: String = f.input.iter().map(|b| format!("{b:02x}")).collect();
        panic!(
            "{name}: input {} broke a property (message above): {hex}",
            f.run
        );
    }
}

#[test]
fn esp_open_refuses_every_forgery_on_seeds_and_mutants() {
    smoke("esp_open");
}

#[test]
fn esp_receive_gives_every_datagram_one_outcome_on_seeds_and_mutants() {
    smoke("esp_receive");
}

#[test]
fn stream_open_never_yields_unverified_plaintext_on_seeds_and_mutants() {
    smoke("stream_open");
}

#[test]
fn report_renders_every_record_that_loads_on_seeds_and_mutants() {
    smoke("report");
}

#[test]
fn sizes_parse_back_what_they_print_on_seeds_and_mutants() {
    smoke("sizes");
}

#[test]
fn ia32cap_settings_parse_back_what_they_print_on_seeds_and_mutants() {
    smoke("ia32cap");
}

#[test]
fn every_target_has_a_seed_folder() {
    for t in cipherbench_fuzz::TARGETS {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/seeds")
            .join(t.name);
        assert!(dir.is_dir(), "{} has no seeds", t.name);
    }
}

#[test]
fn mask_accepts_only_what_openssl_reads_as_written_on_seeds_and_mutants() {
    smoke("mask");
}
