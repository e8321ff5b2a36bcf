//! A sweep at a fixed rate (`--rate`) as a person reads it: every point's throughput
//! is the rate by construction, so no throughput ratio is offered as a finding in the
//! terminal, summary.md or report.html; what the same load cost nginx (its CPU, and
//! per response) is compared instead, and the capacity line says the rate was given.
//! Also: a core count the machine could not split is said in summary.md.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use cipherbench_model::tls::{SkippedCores, WindowRound};
use cipherbench_model::RunRecord;
use cipherbench_report::{html, markdown, tls};

fn fixture() -> RunRecord {
    let path = format!(
        "{}/tests/fixtures/run-quick.json",
        env!("CARGO_MANIFEST_DIR")
    );
    RunRecord::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The fixture as if measured at 200 req/s: every point at the rate, AES128-GCM's
/// nginx at 0.17 of a core with accel and 0.75 with noaesni, over three rounds in
/// turn.
fn at_rate() -> RunRecord {
    let mut r = fixture();
    let sweep = r.tls.as_mut().unwrap().sweep.as_mut().unwrap();
    sweep.config.open_loop_rate = Some(200.0);
    for p in &mut sweep.points {
        p.open_loop_rate = Some(200.0);
        p.requests_per_sec = 200.0;
        p.throughput_bytes_per_sec = 200.0 * p.size_bytes as f64;
        let cpu = match (p.suite.as_str(), p.variant.as_str()) {
            ("AES128-GCM-SHA256", "accel") => 0.17,
            ("AES128-GCM-SHA256", _) => 0.75,
            _ => 0.5,
        };
        p.server_cpu.as_mut().unwrap().total = cpu;
        p.interleave_group = Some(1);
        p.rounds = [0.98, 1.0, 1.02]
            .iter()
            .enumerate()
            .map(|(k, f)| WindowRound {
                round: k,
                sequence: k,
                window_ns: 1_000_000_000,
                throughput_bytes_per_sec: p.throughput_bytes_per_sec,
                requests: 200,
                max_first_byte_ns: 1_000_000,
                server_cpu: Some(cpu * f),
            })
            .collect();
    }
    r
}

const SENTENCE: &str =
    "at 200 req/s nginx used 0.17 of a core with accel, 0.75 with noaesni: 4.41x [";

#[test]
fn a_sweep_at_a_fixed_rate_compares_nginx_cpu_not_throughput() {
    let r = at_rate();
    let t = tls::text(r.tls.as_ref().unwrap(), None);
    assert!(!t.contains("ratios (throughput"), "{t}");
    // A verdict only on CPU (the AES128-SHA pair used the same), never on throughput.
    assert!(
        t.lines()
            .filter(|l| l.contains("no clear difference"))
            .all(|l| l.contains("nginx used")),
        "{t}"
    );
    let row = t
        .lines()
        .find(|l| l.contains("accel / noaesni AES128-GCM-SHA256 16 MiB x1"))
        .unwrap();
    assert!(row.contains(SENTENCE), "{row}");
    // CPU per response: 0.17 core-s/s over 200 responses/s = 0.85 ms.
    assert!(row.contains("(CPU per response 0.85 ms, 3.75 ms)"), "{row}");
    assert!(t.contains(tls::CPU_AT_RATE_HEADER), "{t}");

    let md = markdown::summary(&r);
    assert!(
        md.contains(&format!(
            "- TLS nginx CPU, accel / noaesni AES128-GCM-SHA256 16 MiB x1: {SENTENCE}"
        )),
        "{md}"
    );
    assert!(!md.contains("- TLS accel / noaesni"), "{md}");
    assert!(!md.contains("- TLS GCM / CBC-SHA1"), "{md}");
    // Nor does the ladder draw an AES-NI gain at the TLS layer from it.
    assert!(!md.contains("| tls | nginx"), "{md}");
    assert!(
        md.lines()
            .filter(|l| l.contains("no clear difference"))
            .all(|l| l.starts_with("- TLS nginx CPU, ")),
        "{md}"
    );

    let h = html::render(&r);
    assert!(h.contains("table-tls-cpu-at-rate"), "table missing");
    assert!(!h.contains("table-tls-ratios"), "a throughput ratio table");
    assert!(!h.contains("fig-tls-ratios"), "a throughput ratio chart");

    // The searched sweep keeps its throughput ratios and has no CPU comparison.
    let searched = fixture();
    let t = tls::text(searched.tls.as_ref().unwrap(), None);
    assert!(t.contains("ratios (throughput"), "{t}");
    assert!(!t.contains(tls::CPU_AT_RATE_HEADER), "{t}");
}

#[test]
fn the_capacity_line_of_a_fixed_rate_says_the_rate_was_given() {
    let r = at_rate();
    let sweep = r.tls.as_ref().unwrap().sweep.as_ref().unwrap();
    let lines = tls::capacity(sweep, 10.0);
    assert!(!lines.is_empty());
    for c in &lines {
        let s = c.sentence();
        assert!(
            s.contains("the load was the rate given (--rate 200)"),
            "{s}"
        );
        assert!(!s.contains("the load generator or the sockets"), "{s}");
    }
    let mut searched = fixture();
    let sweep = searched.tls.as_mut().unwrap().sweep.as_mut().unwrap();
    for p in &mut sweep.points {
        p.server_cpu.as_mut().unwrap().total = 0.5;
    }
    let s = tls::capacity(sweep, 10.0)[0].sentence();
    assert!(
        s.contains("the load generator or the sockets limited it"),
        "{s}"
    );
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
