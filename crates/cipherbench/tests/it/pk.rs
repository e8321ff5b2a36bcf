//! `speed --pk`, end to end: the public-key operations measured in worker children
//! under each variant, the variants judged, a mask's effect on each operation said
//! (and agreeing with the judge's own probe), an algorithm the library lacks refused
//! in one line naming what it has, and, on the upstream 3.6.3 build, ML-KEM and
//! ML-DSA measured and checked against `openssl speed` of the same library.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use crate::common::{
    assert_nothing_left, assert_one_line_error, bin_in, run_ok, scratch, stderr, upstream_build,
};
use cipherbench_crypto::pk::{self, PkAlgorithm};
use cipherbench_model::speed::pk::{effect, MaskEffect};
use cipherbench_model::speed::SpeedResults;
use cipherbench_model::variant::Verdict;
use std::path::Path;

fn speed(record: &Path) -> SpeedResults {
    crate::schema::record(record)
        .speed
        .expect("a speed section")
}

const QUICK: [&str; 8] = [
    "--threads",
    "1",
    "--samples",
    "3",
    "--sample-ms",
    "40",
    "--warmup-ms",
    "10",
];

/// Every operation of every algorithm the system library has, in accel and noifma:
/// points in both, the variants judged, ML-KEM and ML-DSA recorded as missing where
/// the library lacks them, and noifma's effect on RSA signing agreeing with the
/// judge's verdict on its own RSA probe.
#[test]
fn every_operation_is_measured_in_each_variant_and_the_mask_s_effect_is_said() {
    let _alone = crate::turns::alone();
    let dir = scratch("pk", "all");
    let results = dir.join("results");
    let out = run_ok(
        bin_in(&dir)
            .args(["-q", "speed", "--pk", "--variants", "accel,noifma"])
            // Five 60 ms samples a point, not QUICK's three of 40 ms: the judge's
            // probe and the table are held to agree, and three short samples on a
            // busy host gave RSA signing an interval too wide to show the move the
            // probe saw.
            .args(["--threads", "1", "--samples", "5", "--sample-ms", "60"])
            .args(["--warmup-ms", "10"])
            .arg("--results")
            .arg(&results),
    );
    let s = speed(&results);
    let lacks_ml_kem = pk::available(PkAlgorithm::MlKem768).is_err();
    for a in pk::ALL {
        let missing = s
            .unavailable
            .iter()
            .filter(|u| u.cipher == a.name())
            .count();
        if pk::available(a).is_err() {
            assert_eq!(
                missing,
                2,
                "{} is recorded missing in both variants",
                a.name()
            );
            continue;
        }
        for op in a.ops() {
            for v in ["accel", "noifma"] {
                let p =
                    cipherbench_model::speed::pk::point(&s.pk_points, a.name(), op.name(), v, 1)
                        .unwrap_or_else(|| panic!("no point for {} {} {v}", a.name(), op.name()));
                assert_eq!(p.samples.len(), 5);
                assert!(p.ops_per_sec.median > 10.0 && p.ops_per_cpu_sec.median > 10.0);
            }
        }
    }
    assert_eq!(s.variants.len(), 2, "both variants judged");
    let noifma = s.variants.iter().find(|v| v.name == "noifma").unwrap();
    let sign = effect(&s.pk_points, "rsa-2048", "sign", ("noifma", "accel"), 1).unwrap();
    // The judge's probe and the table measure the same RSA-2048 signing in
    // different processes: a mask that took effect moved it in both.
    if noifma.effect.as_ref().map(|e| e.verdict) == Some(Verdict::TookEffect) {
        assert!(
            matches!(sign, MaskEffect::Moved(r) if r.point < 0.8),
            "noifma took effect by its probe but the table says {sign:?}"
        );
    }
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("public-key operations per second"),
        "{table}"
    );
    assert!(table.contains("noifma/accel"), "{table}");
    if lacks_ml_kem {
        assert!(
            table.contains("ml-kem-768   unavailable in accel"),
            "{table}"
        );
    }
    let html = std::fs::read_to_string(results.join("report.html")).unwrap();
    assert!(html.contains("Public-key operations"));
    assert_nothing_left(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Named on a library without it, an algorithm is refused before anything is
/// measured, in one line that names the library and what it has.
#[test]
fn an_algorithm_the_library_lacks_is_refused_in_one_line_naming_what_it_has() {
    if pk::available(PkAlgorithm::MlKem768).is_ok() {
        // A system library with ML-KEM (3.5 and later) has nothing to refuse here;
        // the upstream test below covers the measuring side.
        return;
    }
    let dir = scratch("pk", "lacks");
    let results = dir.join("results");
    let out = bin_in(&dir)
        .args(["speed", "--pk", "x25519,ML-KEM-768"])
        .arg("--results")
        .arg(&results)
        .output()
        .unwrap();
    assert_one_line_error(&out, "--pk ml-kem-768: not in OpenSSL 3.");
    let err = stderr(&out);
    assert!(
        err.contains("--openssl DIR") && err.contains("it has x25519, p-256"),
        "{err}"
    );
    assert!(!results.exists(), "nothing written for a refused run");
    let out = bin_in(&dir)
        .args(["speed", "--pk", "rsa-1024"])
        .output()
        .unwrap();
    assert_one_line_error(&out, "unknown public-key algorithm 'rsa-1024'");
    assert_nothing_left(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}

/// On upstream 3.6.3: ML-KEM-768 and ML-DSA-65 measured, each operation checked
/// against `openssl speed` of the same build (ours measured just before and after
/// it), and no public-key mask moving ML-KEM (it has no assembler path there).
#[test]
fn ml_kem_and_ml_dsa_on_upstream_agree_with_openssl_speed() {
    let _alone = crate::turns::alone();
    let dir = scratch("pk", "upstream");
    let results = dir.join("results");
    run_ok(
        bin_in(&dir)
            .args([
                "-q",
                "speed",
                "--pk",
                "ml-kem-768,ml-dsa-65",
                "--check-openssl",
                "--check-rounds",
                "2",
            ])
            .arg("--openssl")
            .arg(upstream_build())
            .args(QUICK)
            .arg("--results")
            .arg(&results),
    );
    let s = speed(&results);
    for (a, ops) in [
        ("ml-kem-768", ["keygen", "encaps", "decaps"].as_slice()),
        ("ml-dsa-65", ["sign", "verify"].as_slice()),
    ] {
        for op in ops {
            for v in ["accel", "nopkaccel"] {
                let c = s
                    .pk_checks
                    .iter()
                    .find(|c| c.algorithm == a && &c.operation == op && c.variant == v)
                    .unwrap_or_else(|| panic!("no openssl check for {a} {op} {v}"));
                // Two runs, each paired with ours around it.
                assert_eq!(c.ratios.len(), 2, "{c:?}");
                // Wide: on a shared VM one second of `openssl speed` moves by up to
                // 30 % between runs (BENCHMARKS.md); the columns themselves are
                // unit-tested on captured output. A figure of the wrong operation
                // (keygen for encaps, sign for verify) is off by 2.7x to 5x.
                assert!(
                    (0.5..2.0).contains(&c.ratio),
                    "{a} {op} {v}: ours/openssl {:.2} ({} vs {})",
                    c.ratio,
                    c.ours_ops_per_cpu_sec,
                    c.openssl_ops_per_sec
                );
            }
        }
    }
    let kem = effect(
        &s.pk_points,
        "ml-kem-768",
        "encaps",
        ("nopkaccel", "accel"),
        1,
    );
    assert!(
        !matches!(kem, Some(MaskEffect::Moved(r)) if r.point < 0.7),
        "{kem:?}"
    );
    assert_nothing_left(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}
