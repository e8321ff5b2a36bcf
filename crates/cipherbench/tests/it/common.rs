//! Helpers every module would otherwise write again.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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
