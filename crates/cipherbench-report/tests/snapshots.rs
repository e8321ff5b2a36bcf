//! Snapshot tests: every file `cipherbench report` writes (report.html, summary.md,
//! the CSV of each layer), rendered from a fixed run.json, must match the copy kept
//! in `tests/snapshots/`. A renderer change shows up as a diff to review; when it is
//! intended, regenerate with
//!
//! ```text
//! UPDATE_SNAPSHOTS=1 cargo test -p cipherbench-report --test snapshots
//! ```
//!
//! and commit the new snapshots with the change.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use cipherbench_model::RunRecord;
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests")
}

fn fixture() -> RunRecord {
    let text = std::fs::read_to_string(dir().join("fixtures/run-quick.json")).unwrap();
    RunRecord::from_json(&text).unwrap()
}

/// The first line where `got` and `want` differ, for a readable failure.
fn first_difference(got: &str, want: &str) -> String {
    for (n, (g, w)) in got.lines().zip(want.lines()).enumerate() {
        if g != w {
            let cut = |s: &str| s.chars().take(300).collect::<String>();
            return format!("line {}:\n  got:  {}\n  want: {}", n + 1, cut(g), cut(w));
        }
    }
    format!(
        "{} lines rendered, {} in the snapshot",
        got.lines().count(),
        want.lines().count()
    )
}

#[test]
fn every_rendered_file_matches_its_snapshot() {
    let record = fixture();
    let files = cipherbench_report::render_all(&record);
    let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
    // The fixture has all four layers: every file is there.
    for expected in [
        "speed.csv",
        "file.csv",
        "tls.csv",
        "tls-ramp.csv",
        "tunnel.csv",
        "summary.md",
        "report.html",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} not rendered: {names:?}"
        );
    }
    let update = std::env::var_os("UPDATE_SNAPSHOTS").is_some();
    let mut stale = Vec::new();
    for file in &files {
        let path = dir().join("snapshots").join(&file.name);
        if update {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &file.contents).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_else(|_| {
            panic!(
                "no snapshot {}: run with UPDATE_SNAPSHOTS=1 to create it",
                path.display()
            )
        });
        if file.contents != want {
            stale.push(format!(
                "{}: {}",
                file.name,
                first_difference(&file.contents, &want)
            ));
        }
    }
    assert!(
        stale.is_empty(),
        "rendered files differ from tests/snapshots (UPDATE_SNAPSHOTS=1 to accept):\n{}",
        stale.join("\n")
    );
}

#[test]
fn rendering_is_deterministic() {
    // Same record, same bytes: a snapshot can only change with the code or the data.
    let record = fixture();
    assert_eq!(
        cipherbench_report::render_all(&record),
        cipherbench_report::render_all(&record)
    );
}

#[test]
fn the_snapshots_carry_what_the_issue_asks_for() {
    // Read from the snapshots themselves, so that accepting a bad snapshot fails here.
    let html = std::fs::read_to_string(dir().join("snapshots/report.html")).unwrap();
    let md = std::fs::read_to_string(dir().join("snapshots/summary.md")).unwrap();
    // Self-contained: no external fetches.
    for external in [
        "<script src=",
        "<link rel=\"stylesheet\" href=\"http",
        "url(http",
    ] {
        assert!(!html.contains(external), "external resource: {external}");
    }
    // The summary (with the ladder) comes before the first layer.
    let summary = html.find("id=\"summary\"").expect("a summary section");
    let speed = html.find("id=\"speed\"").expect("a speed section");
    assert!(summary < speed);
    for id in [
        "fig-ladder",
        "table-tls-capacity",
        "table-tls-ramp",
        "m-tls-capacity",
    ] {
        assert!(html.contains(&format!("id=\"{id}\"")), "{id} missing");
    }
    // Warnings sit beside the layer they concern, grouped by kind.
    for layer in ["speed", "file", "tunnel"] {
        assert!(
            html.contains(&format!("id=\"warnings-{layer}\"")),
            "{layer}"
        );
    }
    assert!(html.contains("<b>tunnel above underlay</b>"));
    // Every chart has a title and a text equivalent.
    let charts = html.matches("<svg ").count();
    assert!(charts >= 8, "only {charts} charts");
    assert!(html.matches("<title").count() >= charts);
    assert!(md.contains("TLS capacity") && md.contains("ladder"), "{md}");
}
