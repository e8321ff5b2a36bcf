//! Helpers every module would otherwise write again.

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
