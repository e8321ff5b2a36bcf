//! `compare` on seed 001's two machines: the control must separate "faster CPU" from
//! "has AES-NI".

use cipherbench_model::speed::Direction;
use cipherbench_model::RunRecord;
use cipherbench_report::compare;

fn load(name: &str) -> RunRecord {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    RunRecord::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn the_control_separates_cpu_speed_from_acceleration() {
    let records = [load("compare-knight.json"), load("compare-padawan.json")];
    let labels = vec!["knight".to_string(), "padawan".to_string()];
    let c = compare::analyze(&records, &labels);

    // Environment differences come first and name the flags.
    let fields: Vec<&str> = c.differences.iter().map(|d| d.field.as_str()).collect();
    assert!(
        fields.contains(&"CPU model") && fields.contains(&"crypto flags"),
        "{fields:?}"
    );

    let v = &c.verdicts[0];
    let control = v.control_ratio.unwrap();
    let factor = v.acceleration_factor.unwrap();
    assert!(
        control > 1.0 && control < 1.0 + compare::SAME_CPU_TOLERANCE,
        "{control}"
    );
    // Dividing out the clock leaves knight's own AES-NI gain on AES-256-CBC (to within
    // the noise of knight's two 3DES measurements, which the fixture inherits).
    let knight = records[0].speed.as_ref().unwrap();
    let point = |variant| {
        knight
            .point("aes-256-cbc", variant, Direction::Encrypt, v.size_bytes, 1)
            .unwrap()
            .throughput_bytes_per_sec
            .median
    };
    let gain = point("accel") / point("noaesni");
    assert!(
        (1.0 / factor - gain).abs() / gain < 0.10,
        "{factor} vs {gain}"
    );
    assert!(v.aes_ratio.unwrap() < 0.5);
    assert!(
        v.sentence.contains("about equally fast otherwise"),
        "{}",
        v.sentence
    );
    assert!(v.sentence.contains("in knight's favour"), "{}", v.sentence);
    assert!(
        v.sentence
            .contains("knight has AES-NI and padawan does not"),
        "{}",
        v.sentence
    );
}

#[test]
fn the_same_machine_twice_shows_no_acceleration_difference() {
    let records = [load("compare-knight.json"), load("compare-knight.json")];
    let labels = vec!["before".to_string(), "after".to_string()];
    let c = compare::analyze(&records, &labels);
    assert!(c.differences.is_empty());
    let v = &c.verdicts[0];
    assert_eq!(v.acceleration_factor, Some(1.0));
    assert!(
        v.sentence.contains("no difference in acceleration"),
        "{}",
        v.sentence
    );
    assert!(c.speed.iter().all(|r| r.values[0] == r.values[1]));
}

#[test]
fn renders_text_markdown_and_html() {
    let records = [load("compare-knight.json"), load("compare-padawan.json")];
    let labels = vec!["knight".to_string(), "padawan".to_string()];
    let c = compare::analyze(&records, &labels);
    let text = compare::text(&c);
    assert!(text.contains("environment differences") && text.contains("aes-256-cbc"));
    let md = compare::markdown(&c);
    assert!(md.contains("| crypto flags |") && md.contains("padawan / knight"));
    let html = compare::html(&c);
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<h2>Verdict</h2>"));
}
