//! Provider and engine variants judged by which implementation ran, end to end, with
//! the counting test provider (`testdata/provider/counting.c`) and the counting
//! test engine (`testdata/engine/cbcount.c`), which these tests build with the
//! system's C compiler against libssl-dev's headers: a real OpenSSL 3 provider and a
//! real ENGINE that serve AES-128-GCM and AES-256-GCM through the library's own
//! implementations and count their calls. Asked for AES-128-GCM the variant must show
//! "ran" and a non-zero count; asked for ChaCha20-Poly1305, which they lack,
//! "fallback"; both in the terminal, summary.md and report.html, for the speed
//! workers and for a real nginx. What the engine seals opens without it, and back. A
//! configuration whose provider does not load, a file that is not there, an engine
//! that is not there, are refused in one line before anything starts.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use cipherbench_model::variant::Verdict;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The repository's testdata/provider.
fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/provider")
}

/// The directory holding counting.so, built once per test binary.
fn module_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("counting-provider");
        std::fs::create_dir_all(&dir).unwrap();
        let out = Command::new("cc")
            .args([
                "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", "-o",
            ])
            .arg(dir.join("counting.so"))
            .arg(source_dir().join("counting.c"))
            .arg("-lcrypto")
            .output()
            .expect("running cc (scripts/install-deps.sh installs build-essential and libssl-dev)");
        assert!(
            out.status.success(),
            "building the counting provider failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        dir
    })
}

/// Builds `source` (a C file of testdata/) into `dir/name`, once per test binary
/// and file.
fn build_module(source: &str, dir: &Path, name: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let out = Command::new("cc")
        .args([
            "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", "-o",
        ])
        .arg(dir.join(name))
        .arg(source_dir().join("..").join(source))
        .arg("-lcrypto")
        .output()
        .expect("running cc (scripts/install-deps.sh installs build-essential and libssl-dev)");
    assert!(
        out.status.success(),
        "building {source} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The directory holding cbcount.so, the counting test engine, built once.
fn engine_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("counting-engine");
        build_module("engine/cbcount.c", &dir, "cbcount.so");
        dir
    })
}

fn conf() -> String {
    source_dir()
        .join("counting.cnf")
        .canonicalize()
        .unwrap()
        .display()
        .to_string()
}

/// cipherbench with the counting provider findable (OPENSSL_MODULES) and its own
/// temp root under `dir`.
fn bin(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cipherbench"));
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    c.env_remove("OPENSSL_ia32cap")
        .env_remove("OPENSSL_CONF")
        .env_remove("LD_LIBRARY_PATH")
        .env("OPENSSL_MODULES", module_dir())
        .env("OPENSSL_ENGINES", engine_dir())
        .env("TMPDIR", dir.join("tmp"));
    c
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cb-provider-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn speed(mut cmd: Command, ciphers: &str, variants: &str, results: &Path) -> Output {
    cmd.args(["speed", "--cipher", ciphers])
        .args(crate::common::ONE_SPEED_POINT)
        .args(["--samples", "3", "--sample-ms", "50"])
        .args(["--variants", variants, "--results"])
        .arg(results)
        .output()
        .unwrap()
}

use crate::schema::record;

/// Nothing of the run stays in its temp root.
fn nothing_left(dir: &Path) {
    let tmp = dir.join("tmp");
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left in {}: {left:?}", tmp.display());
}

#[test]
fn the_counting_provider_runs_aes_gcm_with_its_calls_counted_and_chacha_falls_back() {
    let _turn = crate::turn!();
    let dir = scratch("ran");
    let results = dir.join("results");
    let variant = format!("provider:{}", conf());
    let out = speed(
        bin(&dir),
        "aes-128-gcm,chacha20-poly1305",
        &format!("accel,{variant}"),
        &results,
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");

    let r = record(&results);
    let speed = r.speed.as_ref().unwrap();
    let v = speed.variants.iter().find(|v| v.name == variant).unwrap();
    assert!(v.took_effect, "{v:?}");
    let calls = v.provider_calls.as_ref().expect("the provider's tally");
    assert!(
        calls.calls > 0 && calls.contexts > 0 && calls.bytes > 0,
        "{calls:?}"
    );
    assert_eq!(v.fallback("aes-128-gcm"), None);
    assert_eq!(
        v.fallback("chacha20-poly1305").as_deref(),
        Some("fallback: default provider served chacha20-poly1305")
    );
    let imp = v.probes.as_ref().unwrap().implementation.as_ref().unwrap();
    assert!(imp.providers.contains(&"counting".to_string()), "{imp:?}");
    assert!(!imp.cpu_vendor.is_empty());
    // accel is served by the default provider, as always.
    let accel = speed.variants.iter().find(|v| v.name == "accel").unwrap();
    let served = &accel
        .probes
        .as_ref()
        .unwrap()
        .implementation
        .as_ref()
        .unwrap()
        .served;
    assert!(served
        .iter()
        .all(|s| s.provider.as_deref() == Some("default")));

    // Terminal: the variant/accel row has a ratio for AES-GCM and none for ChaCha20.
    let row = |cipher_line: &str| -> String {
        let lines: Vec<&str> = stdout.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with(cipher_line) && l.contains(&variant))
            .unwrap_or_else(|| panic!("no {cipher_line} row in\n{stdout}"));
        lines[at + 1].to_string()
    };
    let gcm_row = row("aes-128-gcm");
    assert!(
        gcm_row.contains("/accel") && gcm_row.contains('x'),
        "{gcm_row}"
    );
    assert!(!gcm_row.contains("n/a"), "{gcm_row}");
    let chacha_row = row("chacha20-poly1305");
    assert!(
        chacha_row.contains("n/a: fallback: default provider served chacha20-poly1305"),
        "{chacha_row}"
    );
    assert!(
        stdout.contains("ran: counting provider served aes-128-gcm"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("{} provider calls", calls.calls)),
        "{stdout}"
    );

    let summary = std::fs::read_to_string(results.join("summary.md")).unwrap();
    assert!(
        summary.contains("ran: counting provider served aes-128-gcm"),
        "{summary}"
    );
    assert!(summary.contains("chacha20-poly1305**"), "{summary}");
    assert!(
        summary.contains(&format!("{} provider calls", calls.calls)),
        "{summary}"
    );

    let html = std::fs::read_to_string(results.join("report.html")).unwrap();
    assert!(html.contains("Provider and engine variants"));
    assert!(html.contains("ran: counting provider served aes-128-gcm"));
    assert!(html.contains("n/a: fallback: default provider served chacha20-poly1305"));
    assert!(html.contains(&format!("{} provider calls", calls.calls)));
    nothing_left(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_provider_variant_asked_only_for_what_it_lacks_is_a_fallback_everywhere() {
    let _turn = crate::turn!();
    let dir = scratch("fallback");
    let results = dir.join("results");
    let variant = format!("provider:{}", conf());
    let out = speed(
        bin(&dir),
        "chacha20-poly1305",
        &format!("accel,{variant}"),
        &results,
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let r = record(&results);
    let v = r
        .speed
        .as_ref()
        .unwrap()
        .variants
        .iter()
        .find(|v| v.name == variant)
        .unwrap()
        .clone();
    assert!(!v.took_effect);
    assert_eq!(v.effect.as_ref().unwrap().verdict, Verdict::Fallback);
    let fallback = "fallback: default provider served chacha20-poly1305";
    assert!(
        stdout.contains(&format!("DID NOT TAKE EFFECT: {fallback}")),
        "{stdout}"
    );
    assert!(
        !stdout.contains("/accel      "),
        "a ratio was drawn: {stdout}"
    );
    let summary = std::fs::read_to_string(results.join("summary.md")).unwrap();
    assert!(
        summary.contains(&format!("**{variant} did not take effect**: {fallback}")),
        "{summary}"
    );
    let html = std::fs::read_to_string(results.join("report.html")).unwrap();
    assert!(html.contains(fallback));
    assert!(r
        .warnings
        .iter()
        .any(|w| w.kind == "variant_fallback" && w.message.contains(fallback)));
    nothing_left(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_provider_that_does_not_load_is_refused_in_one_line_before_anything_starts() {
    let _turn = crate::turn!();
    let dir = scratch("noload");
    let results = dir.join("results");
    let mut cmd = bin(&dir);
    // Without OPENSSL_MODULES, `module = counting.so` is looked for in OpenSSL's
    // own modules directory, where it is not.
    cmd.env_remove("OPENSSL_MODULES");
    let out = speed(
        cmd,
        "aes-128-gcm",
        &format!("accel,provider:{}", conf()),
        &results,
    );
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    let line = stderr.trim();
    assert_eq!(line.lines().count(), 1, "{stderr}");
    assert!(line.contains("provider 'counting' did not load"), "{line}");
    assert!(line.contains("counting.so"), "{line}");
    assert!(line.contains("OPENSSL_MODULES"), "{line}");
    assert!(!results.exists());
    nothing_left(&dir);

    let out = speed(
        bin(&dir),
        "aes-128-gcm",
        "provider:/nonexistent/openssl.cnf",
        &results,
    );
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("provider:/nonexistent/openssl.cnf: no such OpenSSL configuration file"),
        "{stderr}"
    );
    assert!(!results.exists());
    nothing_left(&dir);

    // An engine that is not there.
    let out = speed(bin(&dir), "aes-128-gcm", "accel,engine:nosuch", &results);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("engine:nosuch: the engine does not load or initialise here")
            && stderr.contains("nosuch.so")
            && stderr.contains("OPENSSL_ENGINES"),
        "{stderr}"
    );
    assert!(!results.exists());
    nothing_left(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A sweep of nginx under `variant` over an AES-GCM and a ChaCha20 suite: the GCM
/// server ran in the variant (`ran`, as the terminal words it) with nginx's workers'
/// contexts in its tally, far more than the effect probe's few; the ChaCha20 server
/// fell back; both in the terminal, summary.md and report.html.
fn nginx_runs_aes_gcm_under_and_chacha20_falls_back(name: &str, variant: &str, ran: &str) {
    let dir = scratch(name);
    let results = dir.join("results");
    let out = bin(&dir)
        .args([
            "tls",
            "sweep",
            "--suites",
            "ECDHE-RSA-AES128-GCM-SHA256,ECDHE-RSA-CHACHA20-POLY1305",
            "--sizes",
            "256KiB",
            "--variants",
            &format!("accel,{variant}"),
            "--window",
            "600ms",
            "--probe",
            "250ms",
            "--warmup",
            "100ms",
            "--max-concurrency",
            "2",
            "--results",
        ])
        .arg(&results)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let r = record(&results);
    let servers = &r.tls.as_ref().unwrap().servers;
    let of = |suite: &str| {
        servers
            .iter()
            .find(|s| s.suite == suite && s.variant.name == variant)
            .unwrap_or_else(|| panic!("no {suite} server under {variant}"))
            .variant
            .clone()
    };
    let gcm = of("ECDHE-RSA-AES128-GCM-SHA256");
    assert!(gcm.took_effect, "{gcm:?}");
    assert_eq!(gcm.fallback("aes-128-gcm"), None);
    let calls = gcm.provider_calls.as_ref().expect("the variant's tally");
    assert!(calls.contexts > 10, "{calls:?}");
    let chacha = of("ECDHE-RSA-CHACHA20-POLY1305");
    assert!(!chacha.took_effect);
    let fallback = "fallback: default provider served chacha20-poly1305";
    assert_eq!(
        chacha.fallback("chacha20-poly1305").as_deref(),
        Some(fallback)
    );
    assert!(
        stdout.contains(ran) && stdout.contains(fallback),
        "{stdout}"
    );
    let summary = std::fs::read_to_string(results.join("summary.md")).unwrap();
    assert!(summary.contains(ran), "{summary}");
    assert!(summary.contains(&format!("**{fallback}**")), "{summary}");
    let html = std::fs::read_to_string(results.join("report.html")).unwrap();
    assert!(html.contains(ran) && html.contains(fallback));
    nothing_left(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nginx_under_the_counting_provider_runs_aes_gcm_and_falls_back_for_chacha20() {
    let _turn = crate::turn!();
    nginx_runs_aes_gcm_under_and_chacha20_falls_back(
        "nginx",
        &format!("provider:{}", conf()),
        "ran: counting provider served aes-128-gcm",
    );
}

#[test]
fn seal_under_the_counting_provider_runs_aes_256_gcm_and_chacha20_falls_back() {
    let _turn = crate::turn!();
    let dir = scratch("file");
    let results = dir.join("results");
    let variant = format!("provider:{}", conf());
    let out = bin(&dir)
        .args([
            "file",
            "--size",
            "4MiB",
            "--tools",
            "cipherbench,cipherbench-chacha20",
            "--variants",
            &format!("accel,{variant}"),
            "--cache",
            "warm",
            "--sync",
            "none",
            "--direction",
            "encrypt",
            "--repetitions",
            "1",
            "--results",
        ])
        .arg(&results)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let r = record(&results);
    let v = r
        .file
        .as_ref()
        .unwrap()
        .variants
        .iter()
        .find(|v| v.name == variant)
        .unwrap()
        .clone();
    assert!(v.took_effect, "{v:?}");
    assert_eq!(v.fallback("aes-256-gcm"), None);
    let fallback = "fallback: default provider served chacha20-poly1305";
    assert_eq!(v.fallback("chacha20-poly1305").as_deref(), Some(fallback));
    assert!(
        v.provider_calls.as_ref().is_some_and(|c| c.calls > 0),
        "{v:?}"
    );
    // The seal row has a ratio, the ChaCha20 row says why it has none.
    assert!(stdout.contains(&format!("n/a: {fallback}")), "{stdout}");
    assert!(
        stdout.contains("ran: counting provider served aes-256-gcm"),
        "{stdout}"
    );
    let summary = std::fs::read_to_string(results.join("summary.md")).unwrap();
    assert!(summary.contains(&format!("**{fallback}**")), "{summary}");
    nothing_left(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_counting_engine_runs_aes_gcm_with_its_calls_counted_and_chacha_falls_back() {
    let _turn = crate::turn!();
    let dir = scratch("engine");
    let results = dir.join("results");
    let variant = "engine:cbcount";
    let out = speed(
        bin(&dir),
        "aes-128-gcm,chacha20-poly1305",
        &format!("accel,{variant}"),
        &results,
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");

    let r = record(&results);
    let v = r
        .speed
        .as_ref()
        .unwrap()
        .variants
        .iter()
        .find(|v| v.name == variant)
        .unwrap()
        .clone();
    assert!(v.took_effect, "{v:?}");
    // The engine's own tally: it took the work, not only the name.
    let calls = v.provider_calls.as_ref().expect("the engine's tally");
    assert!(
        calls.calls > 0 && calls.contexts > 0 && calls.bytes > 0,
        "{calls:?}"
    );
    assert_eq!(v.fallback("aes-128-gcm"), None);
    let fallback = "fallback: default provider served chacha20-poly1305";
    assert_eq!(v.fallback("chacha20-poly1305").as_deref(), Some(fallback));
    let imp = v.probes.as_ref().unwrap().implementation.as_ref().unwrap();
    let gcm = imp
        .served
        .iter()
        .find(|s| s.cipher == "aes-128-gcm")
        .unwrap();
    assert_eq!(gcm.engine.as_deref(), Some("cbcount"), "{imp:?}");

    let ran = "ran: engine cbcount served aes-128-gcm";
    let tally = format!("{} engine calls", calls.calls);
    assert!(stdout.contains(ran) && stdout.contains(&tally), "{stdout}");
    assert!(stdout.contains(&format!("n/a: {fallback}")), "{stdout}");
    let summary = std::fs::read_to_string(results.join("summary.md")).unwrap();
    assert!(
        summary.contains(ran) && summary.contains(&tally),
        "{summary}"
    );
    let html = std::fs::read_to_string(results.join("report.html")).unwrap();
    assert!(html.contains(ran) && html.contains(&tally));
    assert!(html.contains(&format!("n/a: {fallback}")));
    nothing_left(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nginx_under_the_counting_engine_runs_aes_gcm_and_falls_back_for_chacha20() {
    let _turn = crate::turn!();
    // libssl routes nginx's record cipher to the engine bound to its NID.
    nginx_runs_aes_gcm_under_and_chacha20_falls_back(
        "engine-nginx",
        "engine:cbcount",
        "ran: engine cbcount served aes-128-gcm",
    );
}

#[test]
fn what_the_engine_seals_opens_without_it_and_back_and_a_flipped_byte_fails_under_it() {
    let _turn = crate::turn!();
    let dir = scratch("engine-seal");
    let plain = dir.join("plain");
    let data: Vec<u8> = (0..3_000_000u32)
        .map(|i| i.wrapping_mul(2_654_435_761) as u8)
        .collect();
    std::fs::write(&plain, &data).unwrap();
    let key = dir.join("key");
    let counter = dir.join("engine.count");
    let conf = source_dir().join("../engine/cbcount.cnf");
    // `cipherbench VERB -q -k KEY FILE...`, through the engine or not.
    let run = |engine: bool, verb: &str, files: &[&Path]| -> Output {
        let mut c = bin(&dir);
        if engine {
            c.env("OPENSSL_CONF", &conf)
                .env("CIPHERBENCH_PROVIDER_COUNTER", &counter);
        }
        c.args([verb, "-q", "-k"])
            .arg(&key)
            .args(files)
            .output()
            .unwrap()
    };
    let ok = |out: Output| assert!(out.status.success(), "{}", text(&out).1);
    let gen = bin(&dir)
        .arg("seal")
        .arg("--gen-key")
        .arg(&key)
        .output()
        .unwrap();
    ok(gen);
    // The tally's bytes word (magic, contexts, calls, bytes).
    let tally = || {
        let bytes = std::fs::read(&counter).unwrap();
        u64::from_ne_bytes(bytes[24..32].try_into().unwrap())
    };

    // Sealed through the engine (AES-256-GCM, the seal's default), opened by the
    // default provider.
    let sealed = dir.join("sealed");
    ok(run(true, "seal", &[&plain, &sealed]));
    assert!(
        tally() >= data.len() as u64,
        "the engine took {} bytes",
        tally()
    );
    let opened = dir.join("opened");
    ok(run(false, "open", &[&sealed, &opened]));
    assert!(std::fs::read(&opened).unwrap() == data);

    // Sealed by the default provider, opened through the engine (its tag check).
    std::fs::remove_file(&counter).unwrap();
    let sealed2 = dir.join("sealed2");
    ok(run(false, "seal", &[&plain, &sealed2]));
    let opened2 = dir.join("opened2");
    ok(run(true, "open", &[&sealed2, &opened2]));
    assert!(
        tally() >= data.len() as u64,
        "the engine took {} bytes",
        tally()
    );
    assert!(std::fs::read(&opened2).unwrap() == data);

    // One flipped ciphertext byte: the engine's tag check refuses the chunk.
    let mut bad = std::fs::read(&sealed2).unwrap();
    bad[1000] ^= 1;
    std::fs::write(&sealed2, &bad).unwrap();
    let refused = dir.join("refused");
    let out = run(true, "open", &[&sealed2, &refused]);
    assert!(!out.status.success());
    assert!(text(&out).1.contains("did not verify"), "{}", text(&out).1);
    assert!(!refused.exists());
    nothing_left(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_provider_variant_is_refused_for_the_two_host_tunnel_before_any_ssh() {
    let _turn = crate::turn!();
    let dir = scratch("peer");
    let variant = format!("provider:{}", conf());
    let out = bin(&dir)
        .args([
            "tunnel",
            "--peer",
            "nosuchhost.invalid",
            "--variants",
            &format!("accel,{variant}"),
        ])
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("tunnel --peer runs mask variants only") && stderr.contains(&variant),
        "{stderr}"
    );
    nothing_left(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}
