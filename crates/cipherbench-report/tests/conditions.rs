//! The machine's conditions in the renderings: a ratio whose interval holds 1.0 is
//! marked "no clear difference" and not shown as a gain, and a point measured while
//! the machine was busy is marked beside it.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use cipherbench_model::noise::{ForeignProcess, Noise};
use cipherbench_model::speed::Direction;
use cipherbench_model::RunRecord;

fn load() -> RunRecord {
    let path = format!(
        "{}/tests/fixtures/run-quick.json",
        env!("CARGO_MANIFEST_DIR")
    );
    RunRecord::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Makes noaesni's aes-128-gcm encrypt points at 16 KiB, one thread, take accel's
/// samples in another order, nudged: the two variants are then indistinguishable.
fn indistinguishable(record: &mut RunRecord) {
    let speed = record.speed.as_mut().unwrap();
    let accel = speed
        .point("aes-128-gcm", "accel", Direction::Encrypt, 16384, 1)
        .unwrap()
        .clone();
    let p = speed
        .points
        .iter_mut()
        .find(|p| {
            p.cipher == "aes-128-gcm"
                && p.variant == "noaesni"
                && p.direction == Direction::Encrypt
                && p.size_bytes == 16384
                && p.threads == 1
        })
        .unwrap();
    p.samples = accel.samples.iter().rev().copied().collect();
    p.samples[0].bytes += p.samples[0].bytes / 50;
    let rates: Vec<f64> = p
        .samples
        .iter()
        .map(|s| s.throughput_bytes_per_sec())
        .collect();
    p.throughput_bytes_per_sec = cipherbench_model::Summary::of(&rates).unwrap();
}

#[test]
fn a_ratio_whose_interval_holds_one_is_no_clear_difference() {
    let mut record = load();
    // The ratio row under aes-128-gcm in the first table (encrypt, one thread); its
    // last cell is 16 KiB.
    let gcm_ratio = |text: &str| -> String {
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("aes-128-gcm") && l.contains(" noaesni "))
            .unwrap();
        lines[at + 1].to_string()
    };
    let before = gcm_ratio(&cipherbench_report::text::speed(
        record.speed.as_ref().unwrap(),
    ));
    assert!(
        before.trim_start().starts_with("ratio") && before.ends_with("x"),
        "{before}"
    );
    indistinguishable(&mut record);
    let speed = record.speed.as_ref().unwrap();
    let r = speed
        .ratio_interval(
            "aes-128-gcm",
            "accel",
            "noaesni",
            Direction::Encrypt,
            16384,
            1,
        )
        .unwrap();
    assert!(r.low < 1.0 && r.high > 1.0, "{r:?}");
    let text = cipherbench_report::text::speed(speed);
    let after = gcm_ratio(&text);
    assert!(after.ends_with("x?"), "{after}");
    // Same width: the columns stay aligned.
    assert_eq!(after.len(), before.len());
    assert!(
        text.contains("(? marks a ratio whose 95 % bootstrap interval over the samples holds 1.0: no clear difference)"),
        "{text}"
    );
    let summary = cipherbench_report::markdown::summary(&record);
    let line = summary
        .lines()
        .find(|l| l.starts_with("- aes-128-gcm at 16 KiB:"))
        .unwrap();
    assert!(line.ends_with(", no clear difference)"), "{line}");
    let html = cipherbench_report::html::render(&record);
    assert!(
        html.contains("<span class=\"bad\">no clear difference</span>"),
        "report.html does not say it"
    );
}

#[test]
fn a_point_measured_beside_a_busy_process_is_marked_in_the_table_and_the_report() {
    let mut record = load();
    let speed = record.speed.as_mut().unwrap();
    let p = &mut speed.points[0];
    p.noise = Some(Box::new(Noise {
        window_ns: 300_000_000,
        cpus: vec![0],
        capacity_ticks: 30,
        run_ticks: 15,
        foreign_share: 0.5,
        steal_share: 0.0,
        iowait_share: 0.0,
        irq_share: 0.0,
        busiest: vec![ForeignProcess {
            pid: 4321,
            name: "stress-ng".into(),
            cpu_share: 0.5,
        }],
        governors: vec![],
        boost: None,
        throttle_events: None,
    }));
    let text = cipherbench_report::text::speed(speed);
    assert!(text.contains("MB/s!"), "{text}");
    assert!(text.contains("(! marks a point measured while other processes took more than 10 %"));
    let html = cipherbench_report::html::render(&record);
    assert!(
        html.contains("busy machine</span>"),
        "no mark in report.html"
    );
    assert!(html.contains("stress-ng (pid 4321) at 0.50 CPU"));
}
