//! Embeds the git commit this binary is built from as `CIPHERBENCH_COMMIT` (with
//! `-dirty.HASH` when tracked files had changes, HASH a hash of `git diff HEAD`;
//! `unknown` outside a git checkout, as from a source tarball). It is part of the build identity agents are checked
//! against (`agent::build`), which is decided by the executable's own bytes: the
//! commit only says, in a refusal, where each build came from.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn changes_hash() -> u32 {
    let diff = git(&["diff", "HEAD"]).unwrap_or_default();
    diff.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]);
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    let value = match commit {
        // Two builds of one dirty tree match only with the same changes: the mark
        // carries a hash of them (FNV-1a of `git diff HEAD`).
        Some(c) if dirty => format!("{c}-dirty.{:08x}", changes_hash()),
        Some(c) => c,
        None => "unknown".into(),
    };
    println!("cargo:rustc-env=CIPHERBENCH_COMMIT={value}");
    // Again when HEAD moves (a checkout, a commit), the index changes, or any
    // source of the workspace's crates does (the dirty mark).
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        for f in ["HEAD", "index"] {
            println!(
                "cargo:rerun-if-changed={}",
                Path::new(&dir).join(f).display()
            );
        }
    }
    if let Some(common) = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]) {
        for f in ["refs/heads", "packed-refs"] {
            println!(
                "cargo:rerun-if-changed={}",
                Path::new(&common).join(f).display()
            );
        }
    }
    println!("cargo:rerun-if-changed=..");
    println!("cargo:rerun-if-changed=build.rs");
}
