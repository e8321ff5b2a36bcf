//! A run over two libraries (`--openssl system,DIR`): the library step and which
//! library each part loaded are rendered wherever the run is read (summary.md,
//! report.html, the terminal's speed table), and a run over one library renders as
//! before.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use cipherbench_model::env::{LibraryUnderTest, PartLibrary};
use cipherbench_model::RunRecord;
use cipherbench_report::{html, markdown, text};

fn fixture() -> RunRecord {
    let path = format!(
        "{}/tests/fixtures/run-quick.json",
        env!("CARGO_MANIFEST_DIR")
    );
    RunRecord::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The fixture as if its speed layer had also run accel and noaesni on OpenSSL 3.6.3,
/// accel there twice as fast as on the system's.
fn two_libraries() -> RunRecord {
    let mut r = fixture();
    r.environment.libraries = vec![
        LibraryUnderTest {
            name: "system".into(),
            tag: None,
            version: "OpenSSL 3.0.19 27 Jan 2026".into(),
            libcrypto: Some("/usr/lib/x86_64-linux-gnu/libcrypto.so.3".into()),
            libssl: None,
            cli: None,
        },
        LibraryUnderTest {
            name: "target/openssl-upstream/3.6.3".into(),
            tag: Some("3.6.3".into()),
            version: "OpenSSL 3.6.3 9 Jun 2026".into(),
            libcrypto: Some("/opt/up/lib/libcrypto.so.3".into()),
            libssl: None,
            cli: Some("/opt/up/bin/openssl".into()),
        },
    ];
    r.environment.loaded = vec![PartLibrary {
        layer: "speed".into(),
        part: "speed worker".into(),
        asked: "target/openssl-upstream/3.6.3".into(),
        version: Some("OpenSSL 3.6.3 9 Jun 2026".into()),
        libcrypto: Some("/opt/up/lib/libcrypto.so.3".into()),
        libssl: None,
        source: "its own report".into(),
        checked: true,
    }];
    let speed = r.speed.as_mut().unwrap();
    for mut p in speed.points.clone() {
        let factor = match p.variant.as_str() {
            "accel" => 2.0,
            "noaesni" => 1.0,
            _ => continue,
        };
        p.variant = format!("{}@3.6.3", p.variant);
        p.throughput_bytes_per_sec.median *= factor;
        speed.points.push(p);
    }
    speed.config.variants = ["accel", "noaesni", "accel@3.6.3", "noaesni@3.6.3"]
        .map(String::from)
        .to_vec();
    r
}

#[test]
fn summary_md_has_the_library_step_and_what_each_part_loaded() {
    let md = markdown::summary(&two_libraries());
    assert!(
        md.contains("OpenSSL 3.0.19 27 Jan 2026 (system) vs OpenSSL 3.6.3 9 Jun 2026"),
        "{md}"
    );
    assert!(
        md.contains("## The library step: accel on OpenSSL 3.6.3 9 Jun 2026 (--openssl target/openssl-upstream/3.6.3) over accel on OpenSSL 3.0.19 27 Jan 2026 (system)"),
        "{md}"
    );
    let row = md
        .lines()
        .skip_while(|l| !l.starts_with("## The library step"))
        .find(|l| l.starts_with("| primitive |"))
        .expect("a primitive library row");
    assert!(row.contains("**2.00x ["), "{row}");
    assert!(md.contains("## OpenSSL under test"), "{md}");
    assert!(
        md.contains("speed worker") && md.contains("/opt/up/lib/libcrypto.so.3"),
        "{md}"
    );
}

#[test]
fn report_html_has_the_library_step_and_the_loaded_table() {
    let page = html::render(&two_libraries());
    assert!(page.contains("id=\"library-step-3.6.3\""));
    assert!(page.contains("<b class=\"nw\">2.00×</b>"));
    assert!(page.contains("id=\"libraries\""));
    assert!(page.contains("its own report"));
}

#[test]
fn the_speed_table_gets_a_ratio_per_library_and_the_library_row() {
    let t = text::speed(two_libraries().speed.as_ref().unwrap());
    let library_row = t
        .lines()
        .find(|l| l.contains("@3.6.3/base"))
        .expect("a library row");
    assert!(library_row.contains("2.00x"), "{library_row}");
    assert!(t.lines().any(|l| l.contains("ratio@3.6.3")), "{t}");
    // The variant column fits the longest name.
    assert!(t.lines().any(|l| l.contains("noaesni@3.6.3 ")), "{t}");
}

#[test]
fn a_run_over_one_library_renders_as_before() {
    let r = fixture();
    let md = markdown::summary(&r);
    assert!(!md.contains("library step") && !md.contains("OpenSSL under test"));
    assert!(!html::render(&r).contains("id=\"library-step"));
    assert!(text::libraries(&r.environment).is_empty());
}
