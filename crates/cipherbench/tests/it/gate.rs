//! Issue 32's regression gate, `compare BASELINE NEW --fail-above`, on real runs of
//! layer 1. A module of its own so that nothing else measures beside it.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use crate::common::{assert_one_line_error, bin, stderr, ONE_SPEED_POINT};
use std::path::Path;

/// Issue 32's gate: `compare BASELINE NEW --fail-above 10%` passes two runs of this
/// build made one after the other, and fails (exit 4, the figure named) a run whose
/// "accel" was measured with AES-NI masked: the `noaesni` points of a real run,
/// relabelled `accel` in its run.json. Bad gate flags are refused in one line.
#[test]
fn the_gate_passes_two_runs_of_one_build_and_fails_one_with_aes_ni_masked() {
    // A module of its own: no other module's tests run beside it (turns.rs), and
    // alone: layer-1 figures measured beside another test move by 2x (seen in CI
    // when this test lived in cli.rs).
    let _turn = crate::turn!();
    let _alone = crate::turns::alone();
    let dir = crate::common::scratch("gate", "runs");
    let speed = |name: &str, variants: &str| {
        let out = bin()
            .args(["-q", "speed", "--cipher", "aes-128-gcm,chacha20-poly1305"])
            .args(ONE_SPEED_POINT)
            .args(["--samples", "9", "--variants", variants, "--results"])
            .arg(dir.join(name))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        dir.join(name)
    };
    let (a, b) = (speed("a", "accel"), speed("b", "accel"));
    let masked = speed("masked", "accel,noaesni");
    // The masked run's noaesni, passed off as accel: its points and its variant record.
    let path = masked.join("run.json");
    let mut run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let s = &mut run["speed"];
    for list in ["points", "variants"] {
        let items = s[list].as_array_mut().unwrap();
        let key = if list == "points" { "variant" } else { "name" };
        items.retain(|x| x[key] != "accel");
        for x in items.iter_mut() {
            assert_eq!(x[key], "noaesni");
            x[key] = "accel".into();
        }
    }
    std::fs::write(&path, serde_json::to_vec_pretty(&run).unwrap()).unwrap();

    let gate_with = |base: &Path, new: &Path, args: &[&str]| {
        bin()
            .arg("compare")
            .arg(base)
            .arg(new)
            .args(args)
            .output()
            .unwrap()
    };
    let gate = |new: &Path, extra: &[&str]| {
        gate_with(&a, new, &[&["--fail-above", "10%"][..], extra].concat())
    };
    let quiet = gate(&b, &[]);
    let text = String::from_utf8_lossy(&quiet.stdout);
    assert_eq!(quiet.status.code(), Some(0), "{text}{}", stderr(&quiet));
    assert!(
        text.contains("gate: b against a, 2 figures compared"),
        "{text}"
    );
    assert!(text.trim_end().ends_with(": pass"), "{text}");

    let slow = gate(&masked, &["--json"]);
    assert_eq!(slow.status.code(), Some(4), "{}", stderr(&slow));
    let j: serde_json::Value = serde_json::from_slice(&slow.stdout).unwrap();
    assert_eq!(j["passed"], false, "{j}");
    let first = &j["findings"][0];
    assert_eq!(first["outcome"], "regressed", "{j}");
    assert_eq!(first["what"], "aes-128-gcm accel encrypt 16 KiB x1", "{j}");
    assert!(first["ratio"].as_f64().unwrap() < 0.5, "{j}");
    assert!(first["interval"][1].as_f64().unwrap() < 1.0, "{j}");

    let bad = gate_with(&a, &b, &["--fail-above", "5 percent"]);
    assert_one_line_error(&bad, "--fail-above: '5 percent' is not a percentage");
    // clap's own refusal: usage error, exit 2, naming the flag needed.
    let json_alone = gate_with(&a, &b, &["--json"]);
    assert_eq!(json_alone.status.code(), Some(2), "{}", stderr(&json_alone));
    assert!(stderr(&json_alone).contains("--fail-above"));
    let three = bin()
        .arg("compare")
        .args([&a, &b, &masked])
        .args(["--fail-above", "5%"])
        .output()
        .unwrap();
    assert_one_line_error(
        &three,
        "give two results directories, BASELINE then NEW, not 3",
    );
    let _ = std::fs::remove_dir_all(&dir);
}
