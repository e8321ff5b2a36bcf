//! `tls handshake` end to end against the real nginx on loopback: full and resumed
//! handshakes counted by the client (a "resumed" point resumed, a "full" one did
//! not), the group asked for is the group nginx was told to offer, the key in a
//! PKCS#11 token (SoftHSM2 through the pkcs11 engine, token and configs in the run's
//! directory, nginx as one process) beside the key in a file, and the public-key
//! mask judged by effect on nginx's environment. Nothing is left behind: each test
//! runs cipherbench with its own `TMPDIR`, which must end empty, with no process
//! working in it.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use crate::common::{assert_nothing_left, bin_in as bin, scratch};
use cipherbench::tls::handshake::Group;
use cipherbench_model::variant::Verdict;
use std::path::Path;
use std::sync::MutexGuard;

/// The tests that measure take turns: a variant is judged by rates per CPU second,
/// and on a 2-vCPU machine (whose vCPUs may be SMT siblings) one test's nginx and
/// probes beside another's move the other's figures (make test once saw the AES-GCM
/// control at 0.79x of accel with two of these running at once). The tool measures
/// alone on its CPUs; so do its tests.
fn measuring() -> MutexGuard<'static, ()> {
    crate::turns::alone()
}

use crate::schema::record;

const SHORT: &[&str] = &[
    "--window",
    "500ms",
    "--probe",
    "200ms",
    "--warmup",
    "100ms",
    "--concurrency",
    "4",
];

/// `cipherbench --quiet tls handshake ARGS` with the short windows, results into
/// `results`; asserts it succeeded.
fn handshake(dir: &Path, results: &Path, args: &[&str]) -> std::process::Output {
    let out = bin(dir)
        .args(["--quiet", "tls", "handshake"])
        .args(args)
        .args(SHORT)
        .arg("--results")
        .arg(results)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn full_handshakes_do_not_resume_and_resumed_ones_do() {
    let _turn = crate::turn!();
    let _turn = measuring();
    let dir = scratch("hs", "sessions");
    let results = dir.join("results");
    let out = handshake(
        &dir,
        &results,
        &[
            "--keys",
            "ecdsa-p256",
            "--groups",
            "p-256",
            "--sessions",
            "full,resumed",
            "--variants",
            "accel",
        ],
    );
    let tls = record(&results).tls.expect("tls results");
    let h = tls.handshake.expect("handshake results");
    assert_eq!(h.points.len(), 2);
    let full = h
        .point("ecdsa-p256", "P-256", "full", "file", "accel")
        .unwrap();
    let resumed = h
        .point("ecdsa-p256", "P-256", "resumed", "file", "accel")
        .unwrap();
    for p in [full, resumed] {
        assert_eq!(p.point.errors, 0, "{:?}", p.point.errors_by_reason);
        assert_eq!(
            p.point.negotiated_suite.as_deref(),
            Some("TLS_AES_128_GCM_SHA256")
        );
        assert!(p.handshakes_per_sec > 0.0);
        assert!(p.handshakes_per_core_sec.is_some_and(|c| c > 0.0), "{p:?}");
        // The group is read back from the client's connection: P-256 is secp256r1
        // to the library.
        assert_eq!(
            p.point.negotiated_group.as_deref(),
            Some("secp256r1"),
            "{p:?}"
        );
    }
    assert_eq!(full.point.requests_resumed_total, 0);
    assert_eq!(full.resumed_fraction, 0.0);
    // Four clients on one thread: only the first connections start without a session.
    assert!(resumed.resumed_fraction > 0.75, "{resumed:?}");
    // nginx was told to offer exactly the one group, and tickets only when resuming.
    let configs: Vec<&str> = tls.servers.iter().map(|s| s.config.as_str()).collect();
    assert!(configs.iter().all(|c| c.contains("ssl_ecdh_curve P-256;")));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("TLS handshakes"), "{stdout}");
    let summary = std::fs::read_to_string(results.join("summary.md")).unwrap();
    assert!(summary.contains("TLS handshakes ecdsa-p256 P-256 resumed file accel"));
    let html = std::fs::read_to_string(results.join("report.html")).unwrap();
    assert!(html.contains("table-tls-handshake"));
    assert_nothing_left(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_key_in_a_pkcs11_token_serves_beside_the_key_in_a_file() {
    let _turn = crate::turn!();
    let _turn = measuring();
    let dir = scratch("hs", "pkcs11");
    let results = dir.join("results");
    let out = handshake(
        &dir,
        &results,
        &[
            "--keys",
            "rsa2048",
            "--groups",
            "x25519",
            "--sessions",
            "full",
            "--key-store",
            "file,pkcs11",
            "--variants",
            "accel",
        ],
    );
    let tls = record(&results).tls.expect("tls results");
    let h = tls.handshake.expect("handshake results");
    for store in ["file", "pkcs11"] {
        let p = h
            .point("rsa2048", "X25519", "full", store, "accel")
            .unwrap_or_else(|| panic!("no {store} point"));
        assert_eq!(p.point.errors, 0, "{store}: {:?}", p.point.errors_by_reason);
        assert!(p.handshakes_per_sec > 0.0, "{store}");
    }
    // The PKCS#11 nginx ran as one process, its key named by its URI (through the
    // engine on Debian 12, which has no pkcs11-provider), with the run's own OpenSSL
    // and SoftHSM2 configs (nothing system-wide).
    let engine = tls
        .servers
        .iter()
        .find(|s| s.key_store == "pkcs11")
        .expect("an nginx with the key in the token");
    assert!(engine.config.contains("master_process off;"));
    let check = engine.key_store_check.as_ref().expect("checked by effect");
    assert!(check.served, "{}", check.explanation);
    let provider = cipherbench::tls::keystore::PKCS11_PROVIDERS
        .iter()
        .any(|p| Path::new(p).is_file());
    if provider {
        assert_eq!(check.through, "provider", "{}", check.explanation);
        assert!(engine.config.contains("key-uri.pem"));
    } else {
        assert_eq!(check.through, "engine", "{}", check.explanation);
        assert!(engine.config.contains("engine:pkcs11:"));
    }
    assert!(engine.config.contains("env SOFTHSM2_CONF;"));
    assert!(engine.config.contains("env OPENSSL_CONF;"));
    assert!(!engine.config.contains("key.pem"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("file / pkcs11"), "{stdout}");
    let through = format!("served nginx's key, through the {}", check.through);
    assert!(stdout.contains(&through), "{stdout}");
    assert_nothing_left(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_ifma_mask_slows_rsa_signing_in_nginxs_environment_where_the_cpu_has_ifma() {
    let _turn = crate::turn!();
    let _turn = measuring();
    let has_ifma = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "avx512ifma"));
    // The judge says "a control moved" when the machine's speed shifted between
    // accel's probes and the variant's, even after its paired re-measure (seen on a
    // KVM guest whose host was busy: AES-GCM at 0.75x of accel, both ways in turn).
    // That is the tool being honest about a noisy machine, not the mask failing: the
    // run is measured again, up to twice, before the test judges it.
    let mut attempt = 0;
    let (dir, noifma) = loop {
        attempt += 1;
        let dir = scratch("hs", &format!("noifma{attempt}"));
        let results = dir.join("results");
        handshake(
            &dir,
            &results,
            &[
                "--keys",
                "rsa2048",
                "--groups",
                "x25519",
                "--sessions",
                "full",
                "--variants",
                "accel,noifma",
            ],
        );
        let tls = record(&results).tls.expect("tls results");
        let noifma = tls
            .servers
            .into_iter()
            .find(|s| s.variant.name == "noifma")
            .expect("the noifma nginx");
        let moved = noifma
            .variant
            .effect
            .as_ref()
            .is_some_and(|e| e.verdict == Verdict::ControlMoved);
        if moved && attempt < 3 {
            eprintln!(
                "a control moved (noisy machine), measuring again: {:?}",
                noifma.variant.effect.as_ref().map(|e| &e.reason)
            );
            let _ = std::fs::remove_dir_all(&dir);
            continue;
        }
        break (dir, noifma);
    };
    let effect = noifma.variant.effect.as_ref().expect("judged");
    let sign = effect
        .ratios
        .iter()
        .find(|r| r.cipher == "rsa2048-sign")
        .expect("the RSA-sign probe ran");
    let aes = effect
        .ratios
        .iter()
        .find(|r| r.cipher == "aes-128-gcm")
        .expect("the AES control ran");
    assert!(!aes.moved, "{effect:?}");
    if has_ifma {
        assert!(noifma.variant.took_effect, "{effect:?}");
        assert!(sign.slowdown >= 1.5, "{effect:?}");
    } else {
        assert!(!noifma.variant.took_effect, "{effect:?}");
        assert!(effect.reason.contains("no such path"), "{effect:?}");
    }
    assert!(noifma
        .variant
        .ia32cap_env
        .as_deref()
        .is_some_and(|m| m.starts_with("~0:~0x200000")));
    assert_nothing_left(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_handshake_flags_are_one_line() {
    let _turn = crate::turn!();
    let dir = scratch("hs", "bad");
    for (args, needle) in [
        (&["--groups", "NoSuchGroup"][..], "it offers X25519"),
        (&["--groups", "p 256"][..], "not a group name"),
        (&["--sessions", "half"][..], "full, resumed"),
        (&["--key-store", "hsm"][..], "file, pkcs11"),
        (&["--key-store", "pkcs11", "--cores", "2"][..], "--cores 1"),
        (
            &[
                "--key-store",
                "pkcs11",
                "--pkcs11-module",
                "/nonexistent.so",
            ][..],
            "/nonexistent.so",
        ),
        (&["--variants", "nopk"][..], "nopkaccel"),
        (
            &["--keys", "ml-dsa-65", "--protocol", "tls1.2"][..],
            "TLS 1.3 only",
        ),
        (
            &["--keys", "ml-dsa-65", "--key-store", "pkcs11"][..],
            // The certificate is made with the library linked here too.
            if cipherbench_crypto::pk::available(cipherbench_crypto::pk::PkAlgorithm::MlDsa65)
                .is_ok()
            {
                "imports RSA and EC keys only"
            } else {
                "has no ML-DSA (unsupported; OpenSSL has it since 3.5)"
            },
        ),
        (
            &["--groups", "X25519MLKEM768", "--protocol", "tls1.2"][..],
            // The load generator's library is the one linked here too.
            if Group::offered_here().contains(&"X25519MLKEM768") {
                "a TLS 1.3 group"
            } else {
                "need OpenSSL 3.5 or later"
            },
        ),
    ] {
        let out = bin(&dir)
            .args(["tls", "handshake"])
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
        assert!(lines[0].contains(needle), "{args:?}: {err}");
    }
    assert_nothing_left(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
}
