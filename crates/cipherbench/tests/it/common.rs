//! Helpers every module would otherwise write again.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `speed`'s flags for one point per cipher: 16 KiB, one thread, encrypt.
pub const ONE_SPEED_POINT: [&str; 6] = [
    "--sizes",
    "16KiB",
    "--threads",
    "1",
    "--direction",
    "encrypt",
];

/// The binary under test.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cipherbench"))
}

/// The binary under test with its `TMPDIR` in `dir`, so "nothing left behind" is
/// checked exactly: that directory must end empty.
pub fn bin_in(dir: &Path) -> Command {
    let mut c = bin();
    c.env("TMPDIR", dir.join("tmp"));
    c
}

/// A fresh directory for one test (`cb-<module>-<name>-<pid>` under the system's
/// temporary directory) with an empty `tmp/` inside.
pub fn scratch(module: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cb-{module}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("tmp")).expect("a scratch directory for the test");
    dir
}

/// A finished command's standard error.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A directory of files for `seal` and `open` (`cb-<module>-<name>-<pid>`), removed
/// when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(module: &str, name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("cb-{module}-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch directory for the test");
        Scratch(dir)
    }

    pub fn dir(&self) -> &Path {
        &self.0
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Names in the directory, sorted (temporary files included: they start with '.').
    pub fn entries(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .expect("the scratch directory")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// A key made by `seal --gen-key`, once.
    pub fn key(&self) -> PathBuf {
        let k = self.path("key");
        if !k.exists() {
            let out = bin()
                .arg("seal")
                .arg("--gen-key")
                .arg(&k)
                .output()
                .expect("seal runs");
            assert!(out.status.success(), "seal --gen-key: {}", stderr(&out));
        }
        k
    }

    /// A passphrase file, private to its owner, once.
    pub fn passphrase(&self) -> PathBuf {
        let p = self.path("passphrase");
        if !p.exists() {
            std::fs::write(&p, "correct horse battery staple\n").expect("writing the passphrase");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))
                .expect("making the passphrase private");
        }
        p
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The same pseudo-random bytes every time (xorshift64): data for `seal` that does
/// not compress and that a test can make again to compare.
pub fn data(n: usize) -> Vec<u8> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// Processes whose working directory is under `dir` (nginx runs in its temporary
/// directory, inside cipherbench's `TMPDIR`), each as its pid and command line.
pub fn processes_in(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if entry.file_name().to_string_lossy().parse::<u32>().is_err() {
            continue;
        }
        if let Ok(cwd) = std::fs::read_link(entry.path().join("cwd")) {
            if cwd.starts_with(dir) {
                let cmd = std::fs::read_to_string(entry.path().join("cmdline")).unwrap_or_default();
                out.push(format!(
                    "{} {}",
                    entry.file_name().to_string_lossy(),
                    cmd.replace('\0', " ")
                ));
            }
        }
    }
    out
}

/// Nothing left of a run in scratch directory `dir`: no process working under it
/// (given 10 s to exit), an empty TMPDIR (`dir/tmp`).
pub fn assert_nothing_left(dir: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let procs = processes_in(dir);
        if procs.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "left running: {procs:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let left: Vec<_> = std::fs::read_dir(dir.join("tmp"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A refusal: a failure other than Ctrl-C's 130, and one stderr line, starting with
/// "cipherbench: ", that holds `needle`.
pub fn assert_one_line_error(out: &Output, needle: &str) {
    assert!(!out.status.success(), "expected failure: {}", stderr(out));
    assert_ne!(out.status.code(), Some(130));
    let err = stderr(out);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line, got:\n{err}");
    assert!(lines[0].starts_with("cipherbench: "), "{:?}", lines[0]);
    assert!(
        lines[0].contains(needle),
        "{needle:?} not in {:?}",
        lines[0]
    );
}

/// Runs `cmd`, asserting it succeeded (its stdout and stderr in the failure).
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("the command starts");
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        stderr(&out)
    );
    out
}

/// The newest build under `target/openssl-upstream/` holding every one of `files`, or
/// a failure saying `how` to make one.
fn newest_build(files: &[&str], how: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let base = target.join("openssl-upstream");
    let mut builds: Vec<PathBuf> = std::fs::read_dir(&base)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    builds.retain(|p| files.iter().all(|f| p.join(f).is_file()));
    builds.sort();
    match builds.pop() {
        Some(p) => p.canonicalize().expect("the build's directory"),
        None => panic!("no such build in {}: {how}", base.display()),
    }
}

/// The newest upstream OpenSSL 3 build under `target/openssl-upstream/`, or a failure
/// saying how to make it.
pub fn upstream_build() -> PathBuf {
    newest_build(
        &["lib/libcrypto.so.3", "bin/openssl"],
        "run `make openssl-upstream` (scripts/build-openssl.sh) first; `make test` does",
    )
}

/// The OpenSSL 4 build under `target/openssl-upstream/` with a cipherbench built
/// against it and an nginx (`make test-openssl4` makes them), or a failure saying how
/// to make them.
pub fn openssl4_build() -> PathBuf {
    newest_build(
        &[
            "lib/libcrypto.so.4",
            "libexec/cipherbench/cipherbench",
            "libexec/cipherbench/nginx",
        ],
        "run `make test-openssl4` (or make openssl4-cipherbench openssl4-nginx) first",
    )
}
