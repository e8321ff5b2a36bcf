//! strongSwan beside the own gateways: a real strongSwan section
//! (`fixtures/tunnel-strongswan.json`) put into the real quick run
//! (`fixtures/run-quick.json`) is drawn in the report's chart next to the gateways'
//! bars, with its table, CSV, ladder rung and summary lines, labelled as a userspace
//! reference everywhere; a record without it renders as before.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use cipherbench_model::tunnel::{Protocol, StrongswanResults};
use cipherbench_model::RunRecord;
use cipherbench_report::{html, ladder, markdown, strongswan, tunnel};

fn record() -> RunRecord {
    let mut record = RunRecord::from_json(include_str!("fixtures/run-quick.json")).unwrap();
    let s: StrongswanResults =
        serde_json::from_str(include_str!("fixtures/tunnel-strongswan.json")).unwrap();
    record.tunnel.as_mut().unwrap().strongswan = Some(s);
    record
}

#[test]
fn the_report_draws_strongswan_beside_the_own_gateways() {
    let record = record();
    let page = html::render(&record);
    let at = page
        .find("id=\"tunnel-strongswan\"")
        .expect("a strongSwan subsection");
    let section = &page[at..];
    assert!(section.contains("fig-tunnel-strongswan"), "a chart");
    // Both stacks' series in the one chart, per variant.
    for series in [
        "own gateways accel",
        "own gateways noaesni",
        "strongSwan openssl accel",
        "strongSwan openssl noaesni",
    ] {
        assert!(section.contains(series), "{series} missing");
    }
    assert!(section.contains("userspace reference stack, not kernel IPsec"));
    assert!(section.contains("this kernel has no xfrm ESP"));
    // The ratio against the own gateways' same point is shown.
    let t = record.tunnel.as_ref().unwrap();
    let s = t.strongswan.as_ref().unwrap();
    let mine = strongswan::point(s, "openssl", "aes128-gcm", "accel", Protocol::Tcp).unwrap();
    let own = t.point("aes128-gcm", "accel", Protocol::Tcp).unwrap();
    let ratio = mine.point.throughput_bits_per_sec.median / own.throughput_bits_per_sec.median;
    // One run a side: no interval, and it says so.
    assert!(
        section.contains(&format!(
            "{ratio:.2}× <span class=\"muted\">(1 round: no interval)</span>"
        )),
        "vs own {ratio:.2}x"
    );
    // strongSwan's own accel/noaesni ratio, in its table.
    assert!(
        section.contains("strongSwan's openssl backend: throughput of one variant over another"),
        "the ratio table"
    );
    assert!(section.contains("AES_GCM_16[openssl]"), "what served it");
}

#[test]
fn the_terminal_csv_summary_and_ladder_carry_strongswan() {
    let record = record();
    let t = record.tunnel.as_ref().unwrap();
    let text = tunnel::text(t);
    assert!(text.contains(strongswan::LABEL), "{text}");
    assert!(text.contains("openssl  aes128-gcm         accel"), "{text}");
    let s = t.strongswan.as_ref().unwrap();
    let csv = strongswan::csv(s);
    let runs: usize = s.points.iter().map(|p| p.point.runs.len()).sum();
    assert_eq!(csv.lines().count(), 1 + runs);
    assert!(cipherbench_report::render_all(&record)
        .iter()
        .any(|f| f.name == "tunnel-strongswan.csv"));
    let summary = markdown::summary(&record);
    assert!(summary.contains("strongSwan/openssl (userspace reference) aes128-gcm"));
    let l = ladder::build(&record);
    let rung = l
        .steps
        .iter()
        .find(|s| s.layer == ladder::STRONGSWAN_RUNG)
        .unwrap_or_else(|| panic!("no strongSwan rung: {:?}", l.missing));
    assert!(
        rung.gain > 1.0 && rung.what.contains("userspace reference"),
        "{rung:?}"
    );
    assert!(rung.survives.is_some());
}

#[test]
fn a_strongswan_tcp_run_shows_its_mid_run_connection_state() {
    let mut record = record();
    let t = record.tunnel.as_mut().unwrap();
    assert!(!strongswan::text(t).contains("tcp run"));
    let s = t.strongswan.as_mut().unwrap();
    let p = s
        .points
        .iter_mut()
        .find(|p| p.point.protocol == Protocol::Tcp)
        .expect("a TCP point");
    p.point.runs[0].tcp = Some(Box::new(cipherbench_model::tunnel::TcpSample {
        at_seconds: 2.0,
        connections: 2,
        cwnd: Some(240),
        rtt_ms: Some(1.5),
        raw: "cubic cwnd:240".into(),
        ..Default::default()
    }));
    let text = strongswan::text(t);
    assert!(text.contains("    tcp run 1 ("), "{text}");
    assert!(text.contains("cwnd 240 rtt 1.50 ms"), "{text}");
}

#[test]
fn a_record_without_strongswan_has_no_trace_of_it() {
    let record = RunRecord::from_json(include_str!("fixtures/run-quick.json")).unwrap();
    assert!(!html::render(&record).contains("tunnel-strongswan"));
    assert!(!tunnel::text(record.tunnel.as_ref().unwrap()).contains("strongSwan"));
    assert!(ladder::build(&record)
        .steps
        .iter()
        .all(|s| s.layer != ladder::STRONGSWAN_RUNG));
}
