//! A variant that did not take effect, in every rendering: each layer's terminal
//! table, summary.md, report.html, the ladder and compare name it as such, with the
//! reason and the mask that works, and present no ratio from it.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use cipherbench_model::variant::{Effect, VariantRecord, Verdict};
use cipherbench_model::RunRecord;
use cipherbench_report::{compare, file, html, ladder, markdown, text, tls, tunnel};

const WORKING: &str = "~0x200000200000000:~0x60000000000:~0:~0:~0";
const REASON: &str =
    "aes-128-gcm ran at 1.04x of accel's speed (it must fall 3x or more): the mask missed the AES-GCM path this library takes";

fn load() -> RunRecord {
    let path = format!(
        "{}/tests/fixtures/run-quick.json",
        env!("CARGO_MANIFEST_DIR")
    );
    RunRecord::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The record's noaesni, as the judge writes one whose treatment did not move.
fn spoil(v: &mut VariantRecord) {
    if v.name != "noaesni" {
        return;
    }
    v.took_effect = false;
    v.effect = Some(Effect {
        verdict: Verdict::TreatmentDidNotMove,
        reason: REASON.into(),
        ratios: Vec::new(),
        treatment_factor: 3.0,
        control_tolerance: 0.25,
        working_mask: Some(WORKING.into()),
        first_judgement: None,
    });
}

/// The fixture with noaesni not taking effect in the layers named.
fn with_noaesni_not_effective(layers: &[&str]) -> RunRecord {
    let mut r = load();
    if layers.contains(&"speed") {
        r.speed
            .as_mut()
            .unwrap()
            .variants
            .iter_mut()
            .for_each(spoil);
    }
    if layers.contains(&"file") {
        r.file.as_mut().unwrap().variants.iter_mut().for_each(spoil);
    }
    if layers.contains(&"tls") {
        for s in &mut r.tls.as_mut().unwrap().servers {
            spoil(&mut s.variant);
        }
    }
    if layers.contains(&"tunnel") {
        r.tunnel
            .as_mut()
            .unwrap()
            .variants
            .iter_mut()
            .for_each(spoil);
    }
    r
}

const NA: &str = "n/a: noaesni did not take effect";
const ALL: [&str; 4] = ["speed", "file", "tls", "tunnel"];

#[test]
fn every_terminal_table_marks_the_variant_and_shows_no_ratio_from_it() {
    let good = load();
    let bad = with_noaesni_not_effective(&ALL);

    let speed_good = text::speed(good.speed.as_ref().unwrap());
    let speed = text::speed(bad.speed.as_ref().unwrap());
    assert!(speed_good.contains("24.46x"), "{speed_good}");
    assert!(!speed.contains("24.46x"), "{speed}");
    assert!(speed.contains(NA), "{speed}");
    assert!(speed.contains("noaesni!"), "{speed}");
    assert!(speed.contains("DID NOT TAKE EFFECT"), "{speed}");
    assert!(speed.contains(&format!("ia32cap:{WORKING}")), "{speed}");

    let file_good = file::text(good.file.as_ref().unwrap());
    let file = file::text(bad.file.as_ref().unwrap());
    assert!(file_good.contains("noaesni takes"), "{file_good}");
    assert!(!file.contains("noaesni takes"), "{file}");
    assert!(
        file.contains(NA) && file.contains("DID NOT TAKE EFFECT"),
        "{file}"
    );

    let tls_good = tls::text(good.tls.as_ref().unwrap(), None);
    let tls = tls::text(bad.tls.as_ref().unwrap(), None);
    let ratio_line = |t: &str| {
        t.lines()
            .find(|l| l.contains("accel / noaesni AES128-GCM-SHA256"))
            .unwrap_or_default()
            .to_string()
    };
    assert!(ratio_line(&tls_good).contains("x ±"), "{tls_good}");
    assert!(ratio_line(&tls).ends_with(NA), "{tls}");
    assert!(tls.contains("noaesni!") && tls.contains(REASON), "{tls}");

    let tunnel = tunnel::text(bad.tunnel.as_ref().unwrap());
    assert!(tunnel.contains("noaesni!") && tunnel.contains("DID NOT TAKE EFFECT"));
}

#[test]
fn the_ladder_leaves_out_each_layer_where_noaesni_did_not_take_effect() {
    let full = ladder::build(&load());
    assert_eq!(full.steps.len(), 4);

    let tls_only = ladder::build(&with_noaesni_not_effective(&["tls"]));
    let layers: Vec<&str> = tls_only.steps.iter().map(|s| s.layer).collect();
    assert_eq!(layers, ["primitive", "file", "tunnel"]);
    let (layer, why) = &tls_only.missing[0];
    assert_eq!(*layer, "tls");
    assert!(
        why.starts_with("n/a: noaesni did not take effect at this layer"),
        "{why}"
    );
    assert!(why.contains(WORKING), "{why}");

    // Without the primitive's gain there is no ladder at all.
    let none = ladder::build(&with_noaesni_not_effective(&["speed"]));
    assert!(none.steps.is_empty());
    assert_eq!(none.missing[0].0, "primitive");
}

#[test]
fn summary_and_report_say_so_with_the_reason_and_the_mask_that_works() {
    let bad = with_noaesni_not_effective(&ALL);
    let md = markdown::summary(&bad);
    assert!(md.contains("**noaesni did not take effect**"), "{md}");
    assert!(md.contains(REASON) && md.contains(WORKING), "{md}");
    assert!(md.contains(&format!("without ({NA})")), "{md}");
    assert!(!md.contains("24.46x"), "{md}");
    assert!(!md.contains("| **"), "no ladder row: {md}");

    let page = html::render(&bad);
    assert!(page.contains("did not take effect"), "report.html");
    assert!(page.contains(NA));
    assert!(page.contains(WORKING));
    // The EC2 AES-NI post's table (seed 001) and the GCM ratio table carry n/a, not a figure.
    assert!(!page.contains("<b>24.5×</b>"));
    let good = html::render(&load());
    assert!(!good.contains(NA));
}

#[test]
fn compare_shows_n_a_for_the_variant_and_draws_no_ratio_from_it() {
    let records = [load(), with_noaesni_not_effective(&ALL)];
    let labels = vec!["before".to_string(), "after".to_string()];
    let c = compare::analyze(&records, &labels);
    let row = c
        .speed
        .iter()
        .find(|r| r.variant == "noaesni")
        .expect("a noaesni row");
    assert_eq!(row.not_effective, [false, true]);
    assert_eq!(row.values[1], None);
    let accel = c.speed.iter().find(|r| r.variant == "accel").unwrap();
    assert_eq!(accel.not_effective, [false, false]);
    assert!(c
        .layers
        .iter()
        .all(|r| r.layer != "ladder" || r.values[1].is_none()));

    let text = compare::text(&c);
    assert!(
        text.contains("after, speed: noaesni did not take effect"),
        "{text}"
    );
    let noaesni_line = text
        .lines()
        .find(|l| l.trim_start().starts_with("aes-128-gcm") && l.contains(" noaesni "))
        .unwrap();
    assert!(noaesni_line.trim_end().ends_with("n/a"), "{noaesni_line}");
    assert!(compare::markdown(&c).contains("| n/a |"));
    assert!(compare::html(&c).contains("<td>n/a</td>"));
}
