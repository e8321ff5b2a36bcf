//! A sweep as a person reads it in summary.md: a core count the machine could not
//! split is said there, not only counted among the warnings.

use cipherbench_model::tls::SkippedCores;
use cipherbench_model::RunRecord;
use cipherbench_report::markdown;

fn fixture() -> RunRecord {
    let path = format!(
        "{}/tests/fixtures/run-quick.json",
        env!("CARGO_MANIFEST_DIR")
    );
    RunRecord::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn summary_md_says_a_skipped_core_count() {
    let mut r = fixture();
    let reason = "nginx on 2 core(s) leaves none of this machine's 2 CPU(s) for the load generator";
    r.tls
        .as_mut()
        .unwrap()
        .sweep
        .as_mut()
        .unwrap()
        .skipped_cores
        .push(SkippedCores {
            cores: 2,
            reason: reason.into(),
        });
    let md = markdown::summary(&r);
    assert!(
        md.contains(&format!("- TLS x2: not measured: {reason}")),
        "{md}"
    );
}
