//! `cipherbench seal`, `open` and `file` as a user meets them: every boundary size
//! round-trips with either cipher, a key file or a passphrase, files or pipes;
//! every kind of tampering is refused with a non-zero exit, the failing chunk named
//! and no output file (or temporary file) left; existing outputs and loose key files
//! are refused; and the file benchmark runs end to end into a results directory.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use crate::common::{bin, data, run_ok, stderr, Scratch};
use cipherbench_model::file::{Cache, SyncMode};
use cipherbench_model::speed::Direction;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

const C: usize = 64 * 1024;

#[test]
fn round_trips_every_boundary_size_with_both_ciphers_and_both_kinds_of_key() {
    let _turn = crate::turn!();
    let s = Scratch::new("file", "sizes");
    let key = s.key();
    let pass = s.passphrase();
    for (size_index, n) in [0, 1, C - 1, C, C + 1, 37 * C + 11].into_iter().enumerate() {
        let plain = s.path("plain");
        std::fs::write(&plain, data(n)).unwrap();
        for cipher in ["aes-256-gcm", "chacha20-poly1305"] {
            // A passphrase for some sizes (scrypt at its cheapest setting, to keep the
            // test fast), the key file for the others; one or three threads.
            let secret: Vec<String> = if size_index % 2 == 0 {
                vec!["-k".into(), key.display().to_string()]
            } else {
                vec!["--passphrase-file".into(), pass.display().to_string()]
            };
            let threads = if size_index % 3 == 0 { "1" } else { "3" };
            run_ok(
                bin()
                    .arg("seal")
                    .args(&secret)
                    .args([
                        "--cipher",
                        cipher,
                        "--scrypt-log-n",
                        "10",
                        "--threads",
                        threads,
                    ])
                    .arg(&plain)
                    .arg(s.path("sealed")),
            );
            let sealed_len = std::fs::metadata(s.path("sealed")).unwrap().len() as usize;
            assert_eq!(
                sealed_len,
                70 + n + 16 * n.div_ceil(C).max(1),
                "{n} {cipher}"
            );
            run_ok(
                bin()
                    .arg("open")
                    .args(&secret)
                    .args(["--threads", threads])
                    .arg(s.path("sealed"))
                    .arg(s.path("back")),
            );
            assert!(
                std::fs::read(s.path("back")).unwrap() == data(n),
                "{n} bytes, {cipher}"
            );
            std::fs::remove_file(s.path("sealed")).unwrap();
            std::fs::remove_file(s.path("back")).unwrap();
        }
    }
    assert_eq!(
        s.entries(),
        vec!["key", "passphrase", "plain"],
        "temporary files left"
    );
}

#[test]
fn round_trips_through_pipes_with_small_chunks() {
    let _turn = crate::turn!();
    let s = Scratch::new("file", "pipes");
    let key = s.key();
    let input = data(300 * 1024 + 5);
    let mut seal = bin()
        .args(["seal", "-k"])
        .arg(&key)
        .args(["--chunk-size", "4KiB", "-", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = seal.stdin.take().unwrap();
    let feed = input.clone();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        stdin.write_all(&feed).unwrap();
    });
    let sealed = seal.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(sealed.status.success(), "{}", stderr(&sealed));
    assert_eq!(
        sealed.stdout.len(),
        70 + input.len() + 16 * input.len().div_ceil(4096)
    );
    std::fs::write(s.path("sealed"), &sealed.stdout).unwrap();
    let opened = run_ok(
        bin()
            .args(["open", "-k"])
            .arg(&key)
            .arg(s.path("sealed"))
            .arg("-"),
    );
    assert!(opened.stdout == input);
}

/// A sealed file of six 4 KiB chunks (the last one short) and its layout.
struct Sample {
    s: Scratch,
    key: PathBuf,
    sealed: Vec<u8>,
}

const SMALL: usize = 4096;
const UNIT: usize = SMALL + 16;
const HEADER: usize = 70;

impl Sample {
    fn new(name: &str) -> Sample {
        let s = Scratch::new("file", name);
        let key = s.key();
        std::fs::write(s.path("plain"), data(5 * SMALL + 100)).unwrap();
        run_ok(
            bin()
                .args(["seal", "-k"])
                .arg(&key)
                .args(["--chunk-size", "4KiB"])
                .arg(s.path("plain"))
                .arg(s.path("sealed")),
        );
        let sealed = std::fs::read(s.path("sealed")).unwrap();
        Sample { s, key, sealed }
    }

    fn chunk(&self, i: usize) -> Vec<u8> {
        let start = HEADER + i * UNIT;
        self.sealed[start..(start + UNIT).min(self.sealed.len())].to_vec()
    }

    /// Opens `bytes` into a new file; asserts refusal and no output; returns stderr.
    fn refused(&self, what: &str, bytes: &[u8], key: &Path) -> String {
        let bad = self.s.path("bad");
        std::fs::write(&bad, bytes).unwrap();
        let out = bin()
            .args(["open", "-k"])
            .arg(key)
            .arg(&bad)
            .arg(self.s.path("out"))
            .output()
            .unwrap();
        assert!(!out.status.success(), "{what}: opened");
        assert!(
            !self.s.path("out").exists(),
            "{what}: an output file was left"
        );
        assert!(
            !self.s.entries().iter().any(|e| e.starts_with('.')),
            "{what}: a temporary file was left: {:?}",
            self.s.entries()
        );
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{what}: {err}");
        err
    }
}

#[test]
fn every_kind_of_tampering_is_refused_with_no_output_left() {
    let _turn = crate::turn!();
    let t = Sample::new("tamper");
    let flip = |at: usize| {
        let mut b = t.sealed.clone();
        b[at] ^= 0x10;
        b
    };
    let err = t.refused("header bit", &flip(20), &t.key);
    assert!(err.contains("header does not authenticate"), "{err}");
    let err = t.refused("magic", &flip(0), &t.key);
    assert!(err.contains("not a cipherbench sealed file"), "{err}");
    for chunk in 0..6 {
        let err = t.refused("chunk bit", &flip(HEADER + chunk * UNIT + 7), &t.key);
        assert!(
            err.contains(&format!("chunk {chunk} did not verify")),
            "{err}"
        );
    }
    let err = t.refused("tag bit", &flip(HEADER + 2 * UNIT + UNIT - 1), &t.key);
    assert!(err.contains("chunk 2 did not verify"), "{err}");
    let err = t.refused("last tag bit", &flip(t.sealed.len() - 1), &t.key);
    assert!(err.contains("chunk 5 did not verify"), "{err}");

    let err = t.refused(
        "truncated at a boundary",
        &t.sealed[..HEADER + 3 * UNIT],
        &t.key,
    );
    assert!(
        err.contains("chunk 2 is not the final chunk") && err.contains("truncated"),
        "{err}"
    );
    let err = t.refused(
        "truncated inside a chunk",
        &t.sealed[..HEADER + 3 * UNIT + 1000],
        &t.key,
    );
    assert!(err.contains("chunk 3 did not verify"), "{err}");
    let err = t.refused("header only", &t.sealed[..HEADER], &t.key);
    assert!(err.contains("chunk 0 is missing"), "{err}");
    let err = t.refused("half a header", &t.sealed[..40], &t.key);
    assert!(err.contains("too short"), "{err}");

    let mut swapped = t.sealed[..HEADER].to_vec();
    for i in [0, 1, 3, 2, 4, 5] {
        swapped.extend(t.chunk(i));
    }
    let err = t.refused("chunks swapped", &swapped, &t.key);
    assert!(err.contains("chunk 2 did not verify"), "{err}");

    let mut appended = t.sealed.clone();
    appended.extend(t.chunk(1));
    let err = t.refused("chunk appended", &appended, &t.key);
    // The short final chunk and the bytes after it no longer frame a chunk.
    assert!(err.contains("chunk 5 did not verify"), "{err}");

    let other = t.s.path("other.key");
    run_ok(bin().arg("seal").arg("--gen-key").arg(&other));
    let err = t.refused("wrong key", &t.sealed, &other);
    assert!(err.contains("wrong key"), "{err}");
    std::fs::remove_file(&other).unwrap();

    // And the untouched file still opens.
    run_ok(
        bin()
            .args(["open", "-k"])
            .arg(&t.key)
            .arg(t.s.path("sealed"))
            .arg(t.s.path("out")),
    );
    assert!(std::fs::read(t.s.path("out")).unwrap() == data(5 * SMALL + 100));
}

#[test]
fn a_failure_on_stdout_stops_after_the_verified_chunks() {
    let _turn = crate::turn!();
    let t = Sample::new("stdout-tamper");
    let mut bad = t.sealed.clone();
    bad[HEADER + 3 * UNIT + 5] ^= 1;
    std::fs::write(t.s.path("bad"), &bad).unwrap();
    let out = bin()
        .args(["open", "-k"])
        .arg(&t.key)
        .arg(t.s.path("bad"))
        .arg("-")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("chunk 3 did not verify"),
        "{}",
        stderr(&out)
    );
    // Only whole verified chunks before the failure, never a byte of chunk 3.
    assert!(
        out.stdout.len() <= 3 * SMALL,
        "{} bytes released",
        out.stdout.len()
    );
    assert!(out.stdout[..] == data(5 * SMALL + 100)[..out.stdout.len()]);
}

#[test]
fn existing_outputs_need_force_and_key_files_must_be_private() {
    let _turn = crate::turn!();
    let t = Sample::new("force");
    std::fs::write(t.s.path("out"), b"precious").unwrap();
    let out = bin()
        .args(["open", "-k"])
        .arg(&t.key)
        .arg(t.s.path("sealed"))
        .arg(t.s.path("out"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--force"), "{}", stderr(&out));
    assert_eq!(std::fs::read(t.s.path("out")).unwrap(), b"precious");
    let out = bin()
        .args(["seal", "-k"])
        .arg(&t.key)
        .arg(t.s.path("plain"))
        .arg(t.s.path("out"))
        .output()
        .unwrap();
    assert!(!out.status.success() && stderr(&out).contains("--force"));
    run_ok(
        bin()
            .args(["open", "--force", "-k"])
            .arg(&t.key)
            .arg(t.s.path("sealed"))
            .arg(t.s.path("out")),
    );
    assert!(std::fs::read(t.s.path("out")).unwrap() == data(5 * SMALL + 100));
    // Plaintext comes out private.
    assert_eq!(
        std::fs::metadata(t.s.path("out"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );

    // Sealing a file onto itself is refused even with --force.
    let out = bin()
        .args(["seal", "--force", "-k"])
        .arg(&t.key)
        .arg(t.s.path("plain"))
        .arg(t.s.path("plain"))
        .output()
        .unwrap();
    assert!(
        !out.status.success() && stderr(&out).contains("same file"),
        "{}",
        stderr(&out)
    );

    // Key files: made 0600, never overwritten, refused when others can read them.
    assert_eq!(
        std::fs::metadata(&t.key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let out = bin()
        .arg("seal")
        .arg("--gen-key")
        .arg(&t.key)
        .output()
        .unwrap();
    assert!(
        !out.status.success() && stderr(&out).contains("never overwritten"),
        "{}",
        stderr(&out)
    );
    std::fs::set_permissions(&t.key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = bin()
        .args(["open", "--force", "-k"])
        .arg(&t.key)
        .arg(t.s.path("sealed"))
        .arg(t.s.path("out"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("mode 0644") && stderr(&out).contains("chmod 600"),
        "{}",
        stderr(&out)
    );

    // A key never goes on the command line: there is no flag that takes one.
    let out = bin().args(["seal", "--key", "00112233"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_file_benchmark_runs_end_to_end_with_openssl_and_seal() {
    let _turn = crate::turn!();
    let s = Scratch::new("file", "bench");
    let results = s.path("results");
    let out = run_ok(
        bin()
            .args([
                "file",
                "--quiet",
                "--size",
                "1MiB",
                "--tools",
                "cp,openssl-aes-256-cbc,cipherbench",
                "--cache",
                "warm,cold",
                "--sync",
                "fsync,none",
                "--direction",
                "encrypt,decrypt",
                "--repetitions",
                "2",
                "--results",
            ])
            .arg(&results),
    );
    let record = crate::schema::record(&results);
    let file = record.file.expect("file results");
    assert_eq!(file.config.input.size_bytes, 1 << 20);
    // cp: 1 variant; openssl and cipherbench: 2; x 2 caches x 2 syncs x 2 directions.
    assert_eq!(
        file.points.len(),
        5 * 2 * 2 * 2,
        "{:?}",
        file.points
            .iter()
            .map(|p| (&p.tool, &p.variant))
            .collect::<Vec<_>>()
    );
    for p in &file.points {
        assert_eq!(p.samples.len(), 2);
        assert!(p.elapsed_seconds.median > 0.0);
        assert!(p.user_seconds.median + p.system_seconds.median > 0.0 || p.tool == "cp");
        assert!(p.max_rss_bytes > 0);
        assert!(!p.command.is_empty());
    }
    for tool in ["cp", "openssl-aes-256-cbc", "cipherbench"] {
        assert!(
            file.verified(tool),
            "{tool} not verified: {:?}",
            file.checks
        );
    }
    let noaesni = file
        .point(
            "cipherbench",
            "noaesni",
            Direction::Encrypt,
            Cache::Warm,
            SyncMode::Fsync,
        )
        .unwrap();
    assert!(
        noaesni.command[0].starts_with("OPENSSL_ia32cap="),
        "{:?}",
        noaesni.command
    );
    assert!(
        file.variants
            .iter()
            .any(|v| v.name == "noaesni" && v.took_effect && !v.aesni),
        "{:?}",
        file.variants
    );
    let csv = std::fs::read_to_string(results.join("file.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + file.points.len());
    let html = std::fs::read_to_string(results.join("report.html")).unwrap();
    assert!(html.contains("id=\"fig-file-encrypt-warm-fsync\""));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("encrypt, warm cache, until the output is fsynced"),
        "{stdout}"
    );
    // The big files are gone; only results remain.
    let mut left: Vec<String> = std::fs::read_dir(&results)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        vec!["file.csv", "report.html", "run.json", "summary.md"]
    );
}
