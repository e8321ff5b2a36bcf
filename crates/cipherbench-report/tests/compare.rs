//! `compare` on the two machines of the EC2 AES-NI blog post (seed 001): the control
//! must separate "faster CPU" from "has AES-NI".

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

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

#[test]
fn layers_two_to_four_and_the_ladder_are_compared_too() {
    // The full fixture has every layer; "after" is the same machine with TLS twice
    // as fast and the tunnel's aes128-gcm at half: the rows must say exactly that.
    let path = format!(
        "{}/tests/fixtures/run-quick.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let before = RunRecord::from_json(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut after = before.clone();
    let sweep = after.tls.as_mut().unwrap().sweep.as_mut().unwrap();
    for p in &mut sweep.points {
        p.throughput_bytes_per_sec *= 2.0;
    }
    for p in &mut after.tunnel.as_mut().unwrap().points {
        if p.transform == "aes128-gcm" {
            p.throughput_bits_per_sec.median /= 2.0;
        }
    }
    let labels = vec!["before".to_string(), "after".to_string()];
    let c = compare::analyze(&[before.clone(), after], &labels);
    let ratio = |row: &compare::LayerRow| row.values[1].unwrap() / row.values[0].unwrap();
    let tls: Vec<_> = c.layers.iter().filter(|r| r.layer == "tls").collect();
    assert!(!tls.is_empty());
    for r in &tls {
        assert!((ratio(r) - 2.0).abs() < 1e-9, "{r:?}");
    }
    let tunnel: Vec<_> = c.layers.iter().filter(|r| r.layer == "tunnel").collect();
    assert!(tunnel.iter().any(|r| r.what.starts_with("underlay")));
    for r in &tunnel {
        let want = if r.what.starts_with("aes128-gcm") {
            0.5
        } else {
            1.0
        };
        assert!((ratio(r) - want).abs() < 1e-9, "{r:?}");
    }
    assert!(c.layers.iter().any(|r| r.layer == "file"));
    // The ladder's gains are rows too, in every layer the fixture measured.
    let ladder: Vec<_> = c.layers.iter().filter(|r| r.layer == "ladder").collect();
    assert!(ladder.len() >= 3, "{ladder:?}");
    assert!(ladder.iter().all(|r| r.unit == compare::Unit::Gain));
    // All three renderings carry them.
    assert!(compare::text(&c).contains("the ladder and layers 2-4"));
    assert!(compare::markdown(&c).contains("## The ladder and layers 2 to 4"));
    assert!(compare::html(&c).contains("id=\"table-compare-layers\""));
    // A record compared with one that has only layer 1 has no layer rows to show.
    let speed_only = load("compare-knight.json");
    let c = compare::analyze(&[speed_only, before], &labels);
    assert!(
        c.layers.iter().all(|r| r.layer == "ladder"),
        "{:?}",
        c.layers
    );
}

#[test]
fn without_3des_the_verdict_names_the_control_it_used() {
    let mut records = [load("compare-knight.json"), load("compare-padawan.json")];
    // The fixtures' control measured under the other control's name: 3DES absent.
    for r in &mut records {
        for p in &mut r.speed.as_mut().unwrap().points {
            if p.cipher == "des-ede3-cbc" {
                p.cipher = "chacha20-poly1305".into();
            }
        }
    }
    let labels = vec!["knight".to_string(), "padawan".to_string()];
    let v = &compare::analyze(&records, &labels).verdicts[0];
    assert!(v.control_ratio.is_some());
    assert!(
        v.sentence.contains("control (ChaCha20-Poly1305,") && !v.sentence.contains("3DES"),
        "{}",
        v.sentence
    );
}

#[test]
fn two_runs_on_different_libraries_name_them_in_the_differences() {
    use cipherbench_model::env::LibraryUnderTest;
    let lib = |name: &str, version: &str| LibraryUnderTest {
        name: name.into(),
        tag: None,
        version: version.into(),
        libcrypto: None,
        libssl: None,
        cli: None,
    };
    let (mut debian, mut upstream) = (load("compare-knight.json"), load("compare-knight.json"));
    debian.environment.libraries = vec![lib("system", "OpenSSL 3.0.19 27 Jan 2026")];
    upstream.environment.libraries = vec![lib(
        "target/openssl-upstream/3.6.3",
        "OpenSSL 3.6.3 9 Jun 2026",
    )];
    let c = compare::analyze(
        &[debian, upstream],
        &["debian".to_string(), "upstream".to_string()],
    );
    let d = c
        .differences
        .iter()
        .find(|d| d.field == "OpenSSL under test")
        .expect("the libraries differ");
    assert_eq!(
        d.values,
        [
            "OpenSSL 3.0.19 27 Jan 2026 (system)",
            "OpenSSL 3.6.3 9 Jun 2026 (--openssl target/openssl-upstream/3.6.3)"
        ]
    );
    // The same machine otherwise: nothing else differs.
    assert_eq!(c.differences.len(), 1, "{:?}", c.differences);
}

#[test]
fn ratios_carry_intervals_and_a_factor_within_noise_is_no_difference() {
    let records = [load("compare-knight.json"), load("compare-padawan.json")];
    let labels = vec!["knight".to_string(), "padawan".to_string()];
    let v = compare::analyze(&records, &labels).verdicts[0].clone();
    let factor = v.factor_interval.expect("samples enough for an interval");
    assert!(factor.low <= v.acceleration_factor.unwrap());
    assert!(factor.high >= v.acceleration_factor.unwrap());
    assert!(factor.is_clear(), "{factor:?}");
    assert!(v.sentence.contains(" (95 % interval "), "{}", v.sentence);

    // padawan again, with its 3DES samples scattered so widely that the factor's
    // interval holds 1.0: not presented as a difference in acceleration.
    let mut wide = records[0].clone();
    let same = records[0].clone();
    let speed = wide.speed.as_mut().unwrap();
    for p in speed.points.iter_mut().filter(|p| {
        p.cipher == "des-ede3-cbc" && p.variant == "accel" && p.direction == Direction::Encrypt
    }) {
        for (i, s) in p.samples.iter_mut().enumerate() {
            // x0.5, x1.5, x3, x0.5, ... of the recorded bytes: the median moves by
            // half, past the tolerance, and the spread swamps it.
            s.bytes = match i % 3 {
                0 => s.bytes / 2,
                1 => s.bytes * 3 / 2,
                _ => s.bytes * 3,
            };
        }
    }
    let c = compare::analyze(&[same, wide], &["a".to_string(), "b".to_string()]);
    let v = &c.verdicts[0];
    let f = v.factor_interval.expect("an interval");
    assert!(f.low < 1.0 && f.high > 1.0, "{f:?}");
    // Not the tolerance: the point alone would be read as a difference.
    assert!(
        (f.point - 1.0).abs() > compare::SAME_ACCEL_TOLERANCE,
        "{f:?}"
    );
    assert!(
        v.sentence.contains("no difference in acceleration"),
        "{}",
        v.sentence
    );
}

#[test]
fn every_machine_to_machine_ratio_carries_its_interval() {
    // The same run twice: every ratio is 1.00 and its interval holds 1.0.
    let path = format!(
        "{}/tests/fixtures/run-quick.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let run = RunRecord::from_json(&std::fs::read_to_string(path).unwrap()).unwrap();
    let labels = vec!["before".to_string(), "after".to_string()];
    let c = compare::analyze(&[run.clone(), run.clone()], &labels);
    let speed = c
        .speed
        .iter()
        .find(|r| r.cipher == "aes-128-gcm" && r.variant == "accel")
        .unwrap();
    let i = speed.interval(1).unwrap();
    assert_eq!(i.point, 1.0);
    assert!(!i.is_clear(), "{i:?}");
    // Layer rows: file (3 runs), tunnel (per-second intervals), and the ladder's
    // gains (a ratio of two gains, four sets resampled) have intervals; the sweep's
    // points, from a record that kept no per-interval throughputs, have none.
    for prefix in [
        "cipherbench accel encrypt",
        "aes128-gcm accel tcp",
        "AES-NI gain, file",
    ] {
        let row = c
            .layers
            .iter()
            .find(|r| r.what.starts_with(prefix))
            .unwrap_or_else(|| panic!("{prefix}"));
        let i = row
            .interval(1)
            .unwrap_or_else(|| panic!("{prefix}: no interval"));
        assert!(!i.is_clear(), "{prefix}: {i:?}");
    }
    assert!(c
        .layers
        .iter()
        .filter(|r| r.layer == "tls")
        .all(|r| r.interval(1).is_none()));
    let md = compare::markdown(&c);
    assert!(md.contains("1.00x ["), "{md}");
    assert!(md.contains(", no clear difference"), "{md}");
    assert!(compare::html(&c).contains("no clear difference"));
    let text = compare::text(&c);
    assert!(text.contains("1.00x?"), "{text}");
    assert!(text.contains("? marks a ratio whose 95 % bootstrap interval holds 1.0"));

    // Knight against padawan: AES-256-CBC is several times slower on padawan, and
    // clearly so.
    let records = [load("compare-knight.json"), load("compare-padawan.json")];
    let c = compare::analyze(&records, &["knight".into(), "padawan".into()]);
    let row = c
        .speed
        .iter()
        .find(|r| r.cipher == "aes-256-cbc" && r.variant == "accel")
        .unwrap();
    let i = row.interval(1).unwrap();
    assert!(i.is_clear() && i.high < 0.5, "{i:?}");
    assert!((i.point - row.values[1].unwrap() / row.values[0].unwrap()).abs() < 1e-12);
}

#[test]
fn tls_runs_whose_handshakes_used_other_groups_say_so() {
    let path = format!(
        "{}/tests/fixtures/run-quick.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut classic = RunRecord::from_json(&std::fs::read_to_string(path).unwrap()).unwrap();
    let set = |r: &mut RunRecord, group: &str| {
        for p in &mut r.tls.as_mut().unwrap().sweep.as_mut().unwrap().points {
            p.negotiated_group = Some(group.into());
        }
    };
    set(&mut classic, "x25519");
    let mut hybrid = classic.clone();
    let labels = ["3.0".to_string(), "3.6".to_string()];
    // The same group on both sides: no difference.
    let c = compare::analyze(&[classic.clone(), hybrid.clone()], &labels);
    assert!(c.differences.is_empty(), "{:?}", c.differences);
    set(&mut hybrid, "X25519MLKEM768");
    let c = compare::analyze(&[classic.clone(), hybrid], &labels);
    let d = c
        .differences
        .iter()
        .find(|d| d.field.starts_with("TLS key exchange"))
        .expect("the groups differ");
    assert_eq!(d.values, ["x25519", "X25519MLKEM768"]);
    // A record with no group read back (older, or no TLS) says nothing either way.
    let mut unread = classic.clone();
    for p in &mut unread.tls.as_mut().unwrap().sweep.as_mut().unwrap().points {
        p.negotiated_group = None;
    }
    let c = compare::analyze(&[classic, unread], &labels);
    assert!(c.differences.is_empty(), "{:?}", c.differences);
}
