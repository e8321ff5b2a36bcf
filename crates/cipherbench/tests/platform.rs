//! What must hold on every stack our users run, whatever its OpenSSL. `make test`
//! runs this file on three stacks:
//!
//! - the system's OpenSSL (Debian 12: 3.0), as part of `cargo test`: only the probe
//!   test, as the other suites (tunnel_root, tls, variants, library) measure that
//!   library already and the rest here would repeat them (2.4 min of `make test`);
//! - the upstream build `make test` makes (3.6.3), with every command given
//!   `--openssl DIR` (`CIPHERBENCH_TEST_OPENSSL=DIR`);
//! - a Debian 13 root (OpenSSL 3.5), where the project is built against that
//!   library (`scripts/debian-root.sh run ...`, which sets `CIPHERBENCH_PLATFORM`).
//!   There a missing prerequisite fails the test instead of skipping it, and the
//!   quick preset runs end to end.
//!
//! `make test-dist` runs it once more in bare Debian 13 and 12 roots, against the
//! package installed there (`CIPHERBENCH_TEST_BIN=/usr/bin/cipherbench`).
//!
//! Each test names the library it expects in the record (`CIPHERBENCH_EXPECT_OPENSSL`,
//! or the upstream build's version), so a stack that silently measured another
//! library fails.
//!
//! In a root the quick preset measures what the speed, sweep and tunnel tests would
//! (noaesni judged, an nginx sweep in both variants, every transform's TCP runs in
//! both variants from fresh gateway pairs), so there it carries their checks and
//! they stand aside: 2.5 min of `make test`. The handshakes, which the preset does
//! not run, stay.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use cipherbench::tls::handshake::Group;
use cipherbench_model::speed::Direction;
use cipherbench_model::tunnel::Protocol;
use cipherbench_model::tunnel::TunnelPoint;

/// A run under this share of the median of its point's other runs collapsed: issue
/// 27's first-run collapse put runs at 0.07-0.12x. The tool's own stall mark
/// (`cipherbench_model::tunnel::STALLED_SHARE`, 0.5: "lower bound") is wider: on the
/// 2-vCPU AMD guest, the quick preset's two null-transform runs once read 3292 and
/// 1458 Mbit/s (0.44x; the other stacks' null runs 1140-1910 in the same CI run), a
/// fast first run rather than a stalled second.
const COLLAPSED_SHARE: f64 = 0.25;
use cipherbench_model::RunRecord;
#[path = "support/schema.rs"]
mod schema;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};

/// The cipherbench under test: this build's, or an installed one
/// (`CIPHERBENCH_TEST_BIN`, as `make test-dist` sets to the package's
/// /usr/bin/cipherbench in a bare root).
fn bin() -> PathBuf {
    std::env::var_os("CIPHERBENCH_TEST_BIN")
        .filter(|s| !s.is_empty())
        .map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_cipherbench")),
            PathBuf::from,
        )
}

/// The tests measure one at a time: two cores, and their figures are compared.
static MEASURING: Mutex<()> = Mutex::new(());

/// The measuring turn of a test that runs only on a stack beyond the system's
/// library (an upstream build or a platform root); None, with a line saying so, on
/// the plain host, whose library the other suites measure.
fn on_a_stack(test: &str) -> Option<MutexGuard<'static, ()>> {
    if platform().is_none() && openssl_dir().is_none() {
        eprintln!(
            "skipping {test}: on the system's library the other suites measure this; set CIPHERBENCH_TEST_OPENSSL=DIR or run it in a root (make test-platforms)"
        );
        return None;
    }
    Some(measuring())
}

/// As [`on_a_stack`], for a test whose checks the quick preset carries where it
/// runs (in a root): None there, with a line saying so.
fn on_a_stack_without_the_preset(test: &str) -> Option<MutexGuard<'static, ()>> {
    if let Some(name) = platform() {
        eprintln!("skipping {test} on {name}: the quick preset's test makes its checks");
        return None;
    }
    on_a_stack(test)
}

fn measuring() -> MutexGuard<'static, ()> {
    MEASURING.lock().unwrap_or_else(|p| p.into_inner())
}

/// The stack's name where this runs as a platform test (inside a root).
fn platform() -> Option<String> {
    std::env::var("CIPHERBENCH_PLATFORM")
        .ok()
        .filter(|s| !s.is_empty())
}

/// The upstream library every command is pointed at, if any.
fn openssl_dir() -> Option<PathBuf> {
    std::env::var_os("CIPHERBENCH_TEST_OPENSSL")
        .filter(|s| !s.is_empty())
        .map(|d| {
            Path::new(&d)
                .canonicalize()
                .expect("CIPHERBENCH_TEST_OPENSSL exists")
        })
}

/// The OpenSSL version the record must name ("3.6.3"), where one is expected.
fn expected_version() -> Option<String> {
    if let Some(dir) = openssl_dir() {
        // target/openssl-upstream/<version>.
        return Some(dir.file_name().unwrap().to_string_lossy().into_owned());
    }
    std::env::var("CIPHERBENCH_EXPECT_OPENSSL")
        .ok()
        .filter(|s| !s.is_empty())
}

/// Whether the test can run here: root and the programs it drives. Where it cannot,
/// it says why and skips, except on a platform, where everything must be there.
fn can_run(test: &str, programs: &[&str]) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let missing: Vec<&str> = programs
        .iter()
        .copied()
        .filter(|p| {
            !std::env::var_os("PATH")
                .map(|paths| std::env::split_paths(&paths).any(|d| d.join(p).is_file()))
                .unwrap_or(false)
        })
        .collect();
    let why = match (root, missing.is_empty()) {
        (true, true) => return true,
        (false, _) => "not root".to_string(),
        (true, false) => format!("missing {}", missing.join(", ")),
    };
    if let Some(name) = platform() {
        panic!("{test} cannot run on the {name} platform: {why}");
    }
    eprintln!("skipping {test}: {why}");
    false
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cb-platform-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    dir
}

/// `cipherbench -q ARGS [--openssl DIR] --results DIR/results` with its own TMPDIR;
/// asserts it succeeded and returns its output and record.
fn measure(dir: &Path, args: &[&str]) -> (Output, RunRecord) {
    let results = dir.join("results");
    let mut cmd = Command::new(bin());
    cmd.env("TMPDIR", dir.join("tmp")).arg("-q").args(args);
    if let Some(lib) = openssl_dir() {
        cmd.arg("--openssl").arg(lib);
    }
    let out = cmd.arg("--results").arg(&results).output().unwrap();
    assert!(
        out.status.success(),
        "cipherbench {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(results.join("run.json")).unwrap();
    if let Some(v) = expected_version() {
        assert!(
            text.contains(&format!("OpenSSL {v}")),
            "the record of {args:?} does not name OpenSSL {v}"
        );
    }
    schema::validate(&text);
    let record = RunRecord::from_json(&text).expect("run.json reads under the schema");
    (out, record)
}

/// The end of a test: nothing left in its TMPDIR, the scratch directory removed.
fn finish(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir.join("tmp"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn probe_names_this_library_and_the_path_its_aes_gcm_takes() {
    if openssl_dir().is_some() {
        // probe describes the library cipherbench is linked with; --openssl is the
        // measuring commands'.
        eprintln!("skipping probe: it reports the linked library, not --openssl");
        return;
    }
    let out = Command::new(bin()).arg("probe").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = |key: &str| {
        text.lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("no {key} line in:\n{text}"))
            .to_string()
    };
    if let Some(v) = expected_version() {
        assert!(line("OpenSSL").contains(&format!("OpenSSL {v}")), "{text}");
    }
    // The path is judged by effect: a figure with AES-NI and one without.
    assert!(line("AES-GCM").contains("GB/s"), "{text}");
}

#[test]
fn speed_judges_noaesni_by_effect_on_this_library() {
    let Some(_turn) = on_a_stack_without_the_preset("the speed platform test") else {
        return;
    };
    let dir = scratch("speed");
    let (_, r) = measure(
        &dir,
        &[
            "speed",
            "--cipher",
            "aes-128-gcm,chacha20-poly1305",
            "--variants",
            "accel,noaesni",
            "--sizes",
            "16KiB",
            "--threads",
            "1",
            "--direction",
            "encrypt",
            "--samples",
            "3",
            "--sample-ms",
            "150",
        ],
    );
    check_speed(&r);
    finish(&dir);
}

/// `speed --pk` on this stack's library: on 3.5 and later, ML-KEM-768's three
/// operations and ML-DSA-65's two measured beside X25519 from the library itself;
/// before 3.5 (the bare Debian 12 root of `make test-dist`), ML-KEM refused in one
/// line naming what the library has.
#[test]
fn public_key_operations_run_on_this_library() {
    let Some(_turn) = on_a_stack("the public-key platform test") else {
        return;
    };
    if !at_least_3_5() {
        let out = Command::new(bin())
            .args(["-q", "speed", "--pk", "ml-kem-768,x25519", "--no-save"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "ML-KEM measured on a library before 3.5"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains("ml-kem-768: not in OpenSSL") && err.contains("it has x25519"),
            "{err}"
        );
        return;
    }
    let dir = scratch("pk");
    let (_, r) = measure(
        &dir,
        &[
            "speed",
            "--pk",
            "ml-kem-768,ml-dsa-65,x25519",
            "--variants",
            "accel",
            "--threads",
            "1",
            "--samples",
            "3",
            "--sample-ms",
            "40",
            "--warmup-ms",
            "10",
        ],
    );
    let speed = r.speed.expect("speed results");
    for (algorithm, operation) in [
        ("ml-kem-768", "keygen"),
        ("ml-kem-768", "encaps"),
        ("ml-kem-768", "decaps"),
        ("ml-dsa-65", "sign"),
        ("ml-dsa-65", "verify"),
        ("x25519", "derive"),
    ] {
        let p =
            cipherbench_model::speed::pk::point(&speed.pk_points, algorithm, operation, "accel", 1)
                .unwrap_or_else(|| panic!("no {algorithm} {operation} point"));
        assert!(
            p.samples.len() == 3 && p.ops_per_sec.median > 100.0,
            "{algorithm} {operation}: {:?}",
            p.ops_per_sec
        );
    }
    assert!(speed.unavailable.is_empty(), "{:?}", speed.unavailable);
    finish(&dir);
}

/// `--key-store pkcs11` on this stack: the key in a SoftHSM2 token served nginx's
/// handshakes, checked by effect, through pkcs11-provider where it is installed (the
/// Debian 13 root) and the engine elsewhere (Debian 12, upstream builds on it).
#[test]
fn a_key_in_a_pkcs11_token_serves_through_the_provider_where_installed() {
    let Some(_turn) = on_a_stack("the PKCS#11 platform test") else {
        return;
    };
    if !can_run("the PKCS#11 platform test", &["nginx", "softhsm2-util"]) {
        return;
    }
    let dir = scratch("pkcs11");
    let (_, r) = measure(
        &dir,
        &[
            "tls",
            "handshake",
            "--keys",
            "rsa2048",
            "--groups",
            "x25519",
            "--sessions",
            "full",
            "--key-store",
            "pkcs11",
            "--variants",
            "accel",
            "--window",
            "500ms",
            "--probe",
            "200ms",
            "--warmup",
            "100ms",
        ],
    );
    let tls = r.tls.expect("tls results");
    let server = tls
        .servers
        .iter()
        .find(|s| s.key_store == "pkcs11")
        .expect("an nginx with its key in the token");
    let check = server.key_store_check.as_ref().expect("checked by effect");
    assert!(check.served, "{}", check.explanation);
    let provider = cipherbench::tls::keystore::PKCS11_PROVIDERS
        .iter()
        .any(|p| Path::new(p).is_file());
    // Debian packages pkcs11-provider from 13 on: a root of 13 or later has it
    // (install-deps.sh, or the package's recommends), Debian 12's has the engine.
    if platform().is_some() && debian_release().is_some_and(|r| r >= 13) {
        assert!(
            provider,
            "a Debian 13 root has pkcs11-provider (install-deps.sh, the package's recommends)"
        );
    }
    let expected = if provider { "provider" } else { "engine" };
    assert_eq!(check.through, expected, "{}", check.explanation);
    let h = tls.handshake.expect("handshakes");
    let p = h
        .point("rsa2048", "X25519", "full", "pkcs11", "accel")
        .expect("the pkcs11 point");
    assert!(
        p.handshakes_per_sec > 0.0 && p.point.errors == 0,
        "{:?}",
        p.point.errors_by_reason
    );
    finish(&dir);
}

/// noaesni took effect, and AES-128-GCM at 16 KiB, one thread, encrypt gains more
/// than 2x from AES-NI.
fn check_speed(r: &RunRecord) {
    let speed = r.speed.as_ref().expect("speed results");
    let noaesni = speed.variants.iter().find(|v| v.name == "noaesni").unwrap();
    assert!(noaesni.took_effect, "{noaesni:?}");
    let median = |variant: &str| {
        speed
            .points
            .iter()
            .find(|p| {
                p.cipher == "aes-128-gcm"
                    && p.variant == variant
                    && p.size_bytes == 16384
                    && p.threads == 1
                    && p.direction == Direction::Encrypt
            })
            .unwrap_or_else(|| panic!("no aes-128-gcm {variant} 16 KiB encrypt point"))
            .throughput_bytes_per_sec
            .median
    };
    let gain = median("accel") / median("noaesni");
    assert!(gain > 2.0, "AES-GCM gains only {gain:.2}x from AES-NI");
}

#[test]
fn a_tls_sweep_and_handshakes_run_on_this_library() {
    let Some(_turn) = on_a_stack("the TLS platform test") else {
        return;
    };
    if !can_run("the TLS platform test", &["nginx"]) {
        return;
    }
    let dir = scratch("tls");
    if platform().is_some() {
        eprintln!("the sweep is left to the quick preset's test here; handshakes only");
    } else {
        sweep_both_variants(&dir);
    }
    // Handshakes: on a library of 3.5 or later (the root's, whose library is also
    // the load generator's, and the upstream build, under which cipherbench starts
    // itself again), the hybrid post-quantum group beside X25519.
    let mut args = vec![
        "tls",
        "handshake",
        "--window",
        "500ms",
        "--probe",
        "200ms",
        "--warmup",
        "100ms",
        "--concurrency",
        "4",
    ];
    let hybrid = at_least_3_5();
    if hybrid {
        // And an ML-DSA certificate beside ECDSA: post-quantum signatures too.
        args.extend([
            "--groups",
            "X25519MLKEM768,x25519",
            "--keys",
            "ecdsa-p256,ml-dsa-65",
        ]);
    }
    let (_, r) = measure(&dir, &args);
    let tls = r.tls.expect("tls results");
    check_default_groups(&tls);
    let hs = tls.handshake.expect("handshakes");
    assert!(!hs.points.is_empty());
    for p in &hs.points {
        assert!(p.handshakes_per_sec > 0.0, "{p:?}");
        // The group is read back from the connections, in the library's spelling
        // (P-256 as secp256r1).
        let read = p.point.negotiated_group.as_deref().unwrap_or_default();
        assert!(
            Group::parse(&p.group).unwrap().is(read),
            "{} read back as {read:?}",
            p.group
        );
    }
    if hybrid {
        assert!(
            hs.points.iter().any(|p| p.group == "X25519MLKEM768"),
            "{:?}",
            hs.points
        );
        assert!(
            hs.points
                .iter()
                .any(|p| p.key == "ml-dsa-65" && p.handshakes_per_sec > 0.0 && p.point.errors == 0),
            "no ML-DSA-65 handshakes: {:?}",
            hs.points
        );
    }
    finish(&dir);
}

/// Whether the library under test is OpenSSL 3.5 or later (ML-KEM groups).
/// The Debian release this runs on (`VERSION_ID` of /etc/os-release: 12, 13), if
/// it is Debian.
fn debian_release() -> Option<u32> {
    let text = std::fs::read_to_string("/etc/os-release").ok()?;
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim_matches('"').to_string())
    };
    (field("ID=")? == "debian")
        .then(|| field("VERSION_ID=")?.parse().ok())
        .flatten()
}

fn at_least_3_5() -> bool {
    let version = expected_version().expect("a platform run names its OpenSSL");
    let n: Vec<u32> = version
        .split('.')
        .take(2)
        .map(|n| n.parse().unwrap())
        .collect();
    n[0] > 3 || n[1] >= 5
}

/// nginx's library at its defaults, read by a handshake of its own: OpenSSL 3.5 and
/// later agree on the hybrid X25519MLKEM768, with key shares for it and x25519;
/// earlier ones on x25519 with one share. The load generator's side is recorded too.
fn check_default_groups(tls: &cipherbench_model::tls::TlsResults) {
    let version = expected_version().expect("a platform run names its OpenSSL");
    let nginx = tls
        .default_groups
        .iter()
        .find(|s| s.side == "nginx")
        .unwrap_or_else(|| panic!("no nginx side in {:?}", tls.default_groups));
    assert!(nginx.library.contains(&version), "{nginx:?}");
    let (negotiated, shares): (&str, &[&str]) = if at_least_3_5() {
        ("X25519MLKEM768", &["X25519MLKEM768", "x25519"])
    } else {
        ("x25519", &["x25519"])
    };
    assert_eq!(
        nginx.groups.negotiated.as_deref(),
        Some(negotiated),
        "{nginx:?}"
    );
    assert_eq!(nginx.groups.key_shares, shares, "{nginx:?}");
    assert_eq!(
        nginx.groups.offered.first().map(String::as_str),
        Some(negotiated)
    );
    assert!(
        tls.default_groups
            .iter()
            .any(|s| s.side == "load generator"),
        "{:?}",
        tls.default_groups
    );
}

/// A short sweep of AES128-GCM-SHA256 over 1 MiB in both variants; its results are
/// removed after the check.
fn sweep_both_variants(dir: &Path) {
    let (_, r) = measure(
        dir,
        &[
            "tls",
            "sweep",
            "--suites",
            "AES128-GCM-SHA256",
            "--sizes",
            "1MiB",
            "--variants",
            "accel,noaesni",
            "--window",
            "1500ms",
            "--probe",
            "300ms",
            "--warmup",
            "100ms",
            "--max-concurrency",
            "2",
        ],
    );
    check_sweep(&r, Some(2));
    std::fs::remove_dir_all(dir.join("results")).unwrap();
}

/// The sweep has points (`points` of them, where given), each of which served
/// requests over the suite it asked for.
fn check_sweep(r: &RunRecord, points: Option<usize>) {
    let tls = r.tls.as_ref().expect("tls results");
    let sweep = tls.sweep.as_ref().expect("sweep results");
    assert!(!sweep.points.is_empty());
    if let Some(n) = points {
        assert_eq!(sweep.points.len(), n, "{:?}", sweep.points);
    }
    for p in &sweep.points {
        assert!(p.requests > 0, "{p:?}");
        assert_eq!(p.negotiated_suite.as_deref(), Some(p.suite.as_str()));
    }
}

/// The throughput of each run of a point against the median of its other runs.
fn shares_of_siblings(p: &TunnelPoint) -> Vec<f64> {
    let rates: Vec<f64> = p
        .runs
        .iter()
        .map(|r| r.iperf.receiver_bits_per_sec)
        .collect();
    (0..rates.len())
        .map(|i| {
            let mut others: Vec<f64> = rates
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .map(|(_, r)| *r)
                .collect();
            others.sort_by(f64::total_cmp);
            let median = if others.len() % 2 == 1 {
                others[others.len() / 2]
            } else {
                (others[others.len() / 2 - 1] + others[others.len() / 2]) / 2.0
            };
            rates[i] / median
        })
        .collect()
}

/// Every transform, both variants, TCP, in interleaved rounds: each run's bytes
/// match what the gateways opened, and no run falls under [`COLLAPSED_SHARE`] of its
/// siblings. A fresh gateway pair starts at every change of variant, so 3 rounds of
/// 2 variants start 4 pairs per transform (null, one variant: 1): 17 first runs after a start per stack,
/// where the first-run collapse of issue 27 (a run at 0.07-0.12x of its siblings)
/// was seen 1 time in 2 to 1 in 12.
#[test]
fn every_tunnel_transform_carries_tcp_checked_byte_for_byte_and_no_run_stalls() {
    let Some(_turn) = on_a_stack_without_the_preset("the tunnel platform test") else {
        return;
    };
    if !can_run("the tunnel platform test", &["ip", "iperf3", "tc"]) {
        return;
    }
    let dir = scratch("tunnel");
    let (out, r) = measure(
        &dir,
        &[
            "tunnel",
            "--variants",
            "accel,noaesni",
            "--protocols",
            "tcp",
            "--seconds",
            "2",
            // A stall lasts the whole run (issue 27: 366, 348, 369 Mbit/s per
            // interval); the first second need not be left out to see it.
            "--omit",
            "0",
            "--repeats",
            "3",
            "--no-underlay",
        ],
    );
    check_tunnel(&r, 3, &String::from_utf8_lossy(&out.stderr));
    finish(&dir);
}

/// Every transform in both variants (null in one), each TCP point with `runs` runs:
/// every run's bytes match what the gateways opened, and none falls under
/// [`COLLAPSED_SHARE`] of its siblings. `stderr` is the run's, shown on failure.
fn check_tunnel(r: &RunRecord, runs: usize, stderr: &str) {
    let tunnel = r.tunnel.as_ref().expect("tunnel results");
    let tcp: Vec<&TunnelPoint> = tunnel
        .points
        .iter()
        .filter(|p| p.protocol == Protocol::Tcp)
        .collect();
    let mut transforms: Vec<&str> = tcp.iter().map(|p| p.transform.as_str()).collect();
    transforms.dedup();
    // Every transform, each in both variants but null (no AES to mask).
    assert_eq!(transforms.len(), 5, "{transforms:?}");
    assert_eq!(tcp.len(), 9, "{transforms:?}");
    let mut report = Vec::new();
    let mut stalled = Vec::new();
    for p in tcp {
        assert_eq!(p.runs.len(), runs, "{} {}", p.transform, p.variant);
        for run in &p.runs {
            assert!(
                run.byte_check.ok,
                "{} {}: {:?}",
                p.transform, p.variant, run.byte_check
            );
        }
        let shares = shares_of_siblings(p);
        let line = format!(
            "{} {}: {} Mbit/s",
            p.transform,
            p.variant,
            p.runs
                .iter()
                .zip(&shares)
                .map(|(r, s)| format!("{:.0} ({s:.2}x)", r.iperf.receiver_bits_per_sec / 1e6))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if shares.iter().any(|&s| s < COLLAPSED_SHARE) {
            stalled.push(line.clone());
        }
        report.push(line);
    }
    eprintln!(
        "runs against the median of their siblings:\n{}",
        report.join("\n")
    );
    assert!(
        stalled.is_empty(),
        "runs under {COLLAPSED_SHARE}x of their siblings:\n{}\n{}",
        stalled.join("\n"),
        stderr
    );
}

/// The main job on this stack: `run --preset quick` gives every rung of the ladder,
/// each an AES-NI gain above 1 (or marked as a bound its instrument set), or says in
/// the ladder why a rung is missing (never the primitive's). Only on a platform (the
/// host's own suite runs the tiny preset), as it takes a few minutes. It also makes
/// the speed, sweep and tunnel tests' checks on its record: the tunnel's 2 rounds of
/// 2 variants start 3 gateway pairs per transform (null: 1), 13 fresh first runs.
#[test]
fn the_quick_preset_gives_every_rung_with_a_sane_gain() {
    let Some(_turn) = on_a_stack("the quick preset") else {
        return;
    };
    if platform().is_none() {
        eprintln!("skipping the quick preset: only on a platform (CIPHERBENCH_PLATFORM)");
        return;
    }
    if !can_run("the quick preset", &["nginx", "ip", "iperf3", "tc"]) {
        return;
    }
    let dir = scratch("quick");
    let (out, r) = measure(&dir, &["run", "--preset", "quick"]);
    let ladder = cipherbench_report::ladder::build(&r);
    let mut problems = Vec::new();
    for layer in ["primitive", "file", "tls", "tunnel"] {
        match ladder.steps.iter().find(|s| s.layer == layer) {
            Some(step) if step.gain > 1.0 || step.lower_bound.is_some() => {}
            Some(step) => problems.push(format!(
                "{layer}: gain {:.2}x ({} with AES-NI, {} without) and no reason given",
                step.gain, step.accel, step.noaesni
            )),
            // A rung may be missing where the ladder says why (a variant the judge
            // could not confirm on a busy machine, say), but never the primitive's,
            // and never without a reason.
            None => match ladder.missing.iter().find(|(l, _)| *l == layer) {
                Some((_, why)) if layer != "primitive" && !why.trim().is_empty() => {
                    eprintln!("the {layer} rung is left out, and says why: {why}");
                }
                found => problems.push(format!(
                    "{layer}: no rung ({})",
                    found.map_or("no reason given", |(_, why)| why.as_str())
                )),
            },
        }
    }
    // Each rung's ceiling, measured in the same run: cp for the file, plain HTTP
    // for TLS, the null transform for the tunnel; the primitive's cycles per byte at the clock the run
    // measured (against a published figure only on a core OpenSSL's tables name).
    for step in &ladder.steps {
        match (step.layer, &step.ceiling) {
            ("file" | "tunnel" | "tls", Ok(c)) if c.share > 0.0 && c.share.is_finite() => {}
            ("primitive", Ok(c)) if c.share > 0.0 && c.share.is_finite() => {}
            ("primitive", Err(why)) if why.contains("cycles per byte") => {}
            ("file" | "tunnel" | "tls" | "primitive", c) => {
                problems.push(format!("{}: ceiling {c:?}", step.layer));
            }
            _ => {}
        }
    }
    eprintln!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // What the speed, sweep and tunnel tests check elsewhere, on the preset's record.
    check_speed(&r);
    check_sweep(&r, None);
    check_tunnel(&r, 2, &String::from_utf8_lossy(&out.stderr));
    for f in ["run.json", "summary.md", "report.html"] {
        assert!(dir.join("results").join(f).is_file(), "no {f}");
    }
    finish(&dir);
}
