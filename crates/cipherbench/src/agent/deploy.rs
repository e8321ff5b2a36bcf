//! `cipherbench deploy --agents HOSTS`: puts this very build on each host over the
//! ssh the agents are launched with, so a user with the package on one machine can
//! drive several without copying by hand.
//!
//! **Where.** `${XDG_CACHE_HOME:-$HOME/.cache}/cipherbench/<SHA-256>/cipherbench` on
//! the host: named by the digest of this executable's bytes, so builds never
//! overwrite one another and the launcher ([`remote_launch`]) finds the copy that
//! is this build, before any `cipherbench` on the host's PATH.
//!
//! **Checked.** The bytes are streamed on ssh's stdin into a temporary file beside
//! the destination; the host computes their SHA-256 (`sha256sum`) and only a copy
//! whose digest is this build's is renamed into place, so a truncated or altered
//! transfer is never used (the temporary file is removed however the transfer
//! ends). A copy already there is hashed again rather than trusted. Then the copy
//! is run (`--version`): one that does not load there (no libssl.so.3, an older
//! glibc) is removed and the host named with the loader's words. When an agent
//! starts, its hello carries the digest of the bytes it runs, which the
//! coordinator compares with its own (`Hello::check`) as for any agent.
//!
//! **Bounded.** Each ssh has a deadline ([`PROBE_LIMIT`], [`UPLOAD_LIMIT`]) and runs
//! under the supervisor's keeper: a killed deploy closes its connections, and the
//! host's script then sees a short file and removes it.

use crate::supervisor::Spawn;
use anyhow::{anyhow, bail, Context, Result};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long asking a host what it has may take (connecting, hashing a copy there).
pub const PROBE_LIMIT: Duration = Duration::from_secs(60);
/// How long one transfer may take: the release binary with its debug info is 55 MB
/// and the test profile's 49 MB (2026-11-30); 10 minutes is 0.1 MB/s.
pub const UPLOAD_LIMIT: Duration = Duration::from_secs(600);

/// The host-side script: `probe` says whether this build is there (and runs it),
/// `upload` takes the bytes on stdin, checks and installs them, and runs the copy.
/// Its lines on stdout: `path P`, then `present`, `absent`, `copied`, or
/// `mismatch DIGEST`, then `runs VERSION` or `fails WORDS`. `SHA` is replaced.
const SCRIPT: &str = r#"set -u
sha=SHA
d="${XDG_CACHE_HOME:-$HOME/.cache}/cipherbench/$sha"
p="$d/cipherbench"
echo "path $p"
digest() { sha256sum < "$1" | cut -c1-64; }
runs() {
  if v=$("$p" --version 2>&1); then
    echo "runs $v"
  else
    echo "fails $(printf '%s\n' "$v" | tail -n 1)"
    rm -rf "$d"
    exit 4
  fi
}
case "$1" in
probe)
  if [ -x "$p" ] && [ "$(digest "$p")" = "$sha" ]; then echo present; runs; else echo absent; fi
  ;;
upload)
  mkdir -p "$d" || exit 5
  t=$(mktemp "$d/.upload.XXXXXX") || exit 5
  trap 'rm -f "$t"' EXIT
  trap 'exit 6' HUP INT TERM PIPE
  cat > "$t" || exit 5
  got=$(digest "$t")
  if [ "$got" != "$sha" ]; then echo "mismatch $got"; exit 3; fi
  chmod 755 "$t" && mv -f "$t" "$p" || exit 5
  trap - EXIT
  echo copied
  runs
  ;;
*) echo "unknown mode $1" >&2; exit 2 ;;
esac
"#;

/// The script for the build whose digest is `sha` (64 hex digits).
fn script(sha: &str) -> String {
    SCRIPT.replace("SHA", sha)
}

/// `text` as one word of a POSIX shell (the remote login shell parses ssh's command).
fn shell_word(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The remote command ssh runs for the launcher's default (no `--agent-path`): this
/// build where `deploy` put it, else `cipherbench` on the host's PATH, else a line
/// that [`crate::agent::fleet::ssh_failure`] turns into "run deploy".
pub fn remote_launch(sha: &str) -> String {
    let script = format!(
        r#"p="${{XDG_CACHE_HOME:-$HOME/.cache}}/cipherbench/{sha}/cipherbench"; [ -x "$p" ] || p=$(command -v cipherbench) || {{ echo "{NO_AGENT}" >&2; exit 127; }}; exec "$p" agent"#
    );
    format!("sh -c {}", shell_word(&script))
}

/// What the launcher's command says on a host with neither a deployed build nor a
/// `cipherbench` on its PATH.
pub const NO_AGENT: &str = "cipherbench-agent: no cipherbench on this host";

/// What happened on one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// As named in `--agents`.
    pub host: String,
    /// The copy's path there.
    pub path: String,
    /// Whether it was copied now (false: it was there, its digest checked).
    pub copied: bool,
    /// What the copy's `--version` printed there.
    pub version: String,
    /// Bytes sent.
    pub bytes: u64,
    /// How long the host took, connecting included.
    pub took: Duration,
}

/// The lines the script printed, read into what they say.
#[derive(Debug, Default, PartialEq, Eq)]
struct Said {
    path: Option<String>,
    present: bool,
    copied: bool,
    mismatch: Option<String>,
    runs: Option<String>,
    fails: Option<String>,
}

fn read_said(stdout: &str) -> Said {
    let mut said = Said::default();
    for line in stdout.lines() {
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        match word {
            "path" => said.path = Some(rest.to_string()),
            "present" => said.present = true,
            "copied" => said.copied = true,
            "mismatch" => said.mismatch = Some(rest.to_string()),
            "runs" => said.runs = Some(rest.to_string()),
            "fails" => said.fails = Some(rest.to_string()),
            _ => {}
        }
    }
    said
}

/// One ssh to `host` running the script in `mode`; `input`, when given, is
/// streamed to its stdin. Returns its stdout, or the failure in one line.
fn ssh(
    launch: &super::fleet::Launch,
    host: &str,
    sha: &str,
    mode: &str,
    input: Option<&std::path::Path>,
    limit: Duration,
) -> Result<String> {
    let mut args = launch.ssh_args(host);
    args.push(format!(
        "sh -c {} cipherbench-deploy {mode}",
        shell_word(&script(sha))
    ));
    let mut spawn = Spawn::new("ssh").args(&args).piped_stdout();
    if input.is_some() {
        spawn = spawn.piped_stdin();
    }
    let mut child = spawn
        .start()
        .with_context(|| format!("{host}: starting ssh"))?;
    if let Some(path) = input {
        let mut stdin = child
            .take_stdin()
            .context("ssh was started without a stdin")?;
        let mut file =
            std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
        // A closed connection ends the copy; ssh's words say why, below.
        let _ = std::io::copy(&mut file, &mut stdin);
        drop(stdin);
    }
    let deadline = Instant::now() + limit;
    let mut stdout = String::new();
    loop {
        match child.next_line(deadline.saturating_duration_since(Instant::now())) {
            crate::supervisor::Line::Text(t) => {
                stdout.push_str(&t);
                stdout.push('\n');
            }
            crate::supervisor::Line::Closed => break,
            crate::supervisor::Line::Timeout => {
                child.stop();
                bail!("{host}: no answer within {limit:.0?}: check the host (`ssh {host} true`) and run again");
            }
        }
    }
    let status = child.wait(Duration::from_secs(10))?;
    // 3 and 4 are the script's own verdicts, read from stdout by the caller.
    if !status.success() && !matches!(status.code(), Some(3 | 4)) {
        let tail = child.stderr_tail();
        if status.code() == Some(255) || tail.contains("ssh:") || tail.contains("Permission denied")
        {
            let line = super::fleet::ssh_failure(host, &tail);
            bail!("{}", line.replacen("agent ", "", 1));
        }
        bail!(
            "{host}: putting the build there failed ({status}){}",
            if tail.is_empty() {
                String::new()
            } else {
                format!(": {tail}")
            }
        );
    }
    Ok(stdout)
}

/// Puts this build on `host`: asks what it has, copies if needed, runs the copy.
fn place(launch: &super::fleet::Launch, host: &str) -> Result<Placed> {
    let started = Instant::now();
    let sha = super::executable_digest()?;
    let exe = PathBuf::from("/proc/self/exe");
    let probe = read_said(&ssh(launch, host, sha, "probe", None, PROBE_LIMIT)?);
    let (said, bytes) = if probe.present {
        (probe, 0)
    } else {
        let bytes = std::fs::metadata(&exe).map(|m| m.len()).unwrap_or(0);
        let said = read_said(&ssh(launch, host, sha, "upload", Some(&exe), UPLOAD_LIMIT)?);
        (said, bytes)
    };
    let path = said
        .path
        .clone()
        .ok_or_else(|| anyhow!("{host}: the host's shell did not run the script (no path said)"))?;
    if let Some(got) = said.mismatch {
        bail!(
            "{host}: the copy's SHA-256 there is {got}, not this build's {sha}: the transfer was altered or cut short; nothing was installed, run again"
        );
    }
    if let Some(words) = said.fails {
        bail!(
            "{host}: the copy does not run there ({words}); it was removed: the host needs glibc 2.34 or later and OpenSSL 3's libssl (libssl3 on Debian and Ubuntu, openssl-libs on RHEL)"
        );
    }
    let version = said
        .runs
        .ok_or_else(|| anyhow!("{host}: the copy was not run (the script ended early)"))?;
    if !(said.present || said.copied) {
        bail!("{host}: the copy was neither found nor copied (the script ended early)");
    }
    Ok(Placed {
        host: host.to_string(),
        path,
        copied: said.copied,
        version,
        bytes,
        took: started.elapsed(),
    })
}

/// Puts this build on every host of `launch`, all at once; every host's outcome,
/// in the order named.
pub fn deploy(launch: &super::fleet::Launch) -> Vec<Result<Placed>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = launch
            .hosts
            .iter()
            .map(|h| s.spawn(move || place(launch, h)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("deploying: a thread panicked")))
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// Runs the host-side script here, with `sh`, in a cache of its own: the
    /// digest logic as a host runs it.
    fn run_script(cache: &std::path::Path, sha: &str, mode: &str, input: &[u8]) -> (i32, String) {
        use std::io::Write;
        let mut child = Command::new("sh")
            .args(["-c", &script(sha), "cipherbench-deploy", mode])
            .env("XDG_CACHE_HOME", cache)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let _ = child.stdin.take().unwrap().write_all(input);
        let out = child.wait_with_output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    fn sha256_hex(data: &[u8]) -> String {
        let mut h = cipherbench_crypto::digest::Sha256::new().unwrap();
        h.update(data).unwrap();
        cipherbench_crypto::digest::to_hex(&h.finish().unwrap())
    }

    fn scratch(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("cipherbench-deploy-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn only_bytes_whose_digest_is_the_build_s_are_installed_and_nothing_else_stays() {
        let cache = scratch("digest");
        // A "build" that runs: a script answering --version.
        let build = b"#!/bin/sh\necho cipherbench 9.9.9\n".to_vec();
        let sha = sha256_hex(&build);
        let dir = cache.join("cipherbench").join(&sha);
        // Absent at first.
        let (code, out) = run_script(&cache, &sha, "probe", b"");
        assert_eq!(code, 0, "{out}");
        assert_eq!(
            read_said(&out).path.as_deref(),
            Some(dir.join("cipherbench").to_str().unwrap())
        );
        assert!(out.contains("absent"), "{out}");
        // Altered bytes: refused, nothing installed, no temporary file left.
        let mut altered = build.clone();
        altered.push(b'\n');
        let (code, out) = run_script(&cache, &sha, "upload", &altered);
        assert_eq!(code, 3, "{out}");
        assert_eq!(read_said(&out).mismatch, Some(sha256_hex(&altered)));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        // A cut-short transfer: the same.
        let (code, _) = run_script(&cache, &sha, "upload", &build[..10]);
        assert_eq!(code, 3);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        // The build itself: installed, run, and then found.
        let (code, out) = run_script(&cache, &sha, "upload", &build);
        assert_eq!(code, 0, "{out}");
        let said = read_said(&out);
        assert!(said.copied);
        assert_eq!(said.runs.as_deref(), Some("cipherbench 9.9.9"));
        assert_eq!(std::fs::read(dir.join("cipherbench")).unwrap(), build);
        let (code, out) = run_script(&cache, &sha, "probe", b"");
        assert_eq!(code, 0);
        assert!(read_said(&out).present, "{out}");
        // A copy changed in place is hashed again, not trusted: absent.
        std::fs::write(dir.join("cipherbench"), &altered).unwrap();
        let (_, out) = run_script(&cache, &sha, "probe", b"");
        assert!(out.contains("absent") && !read_said(&out).present, "{out}");
        std::fs::remove_dir_all(&cache).unwrap();
    }

    #[test]
    fn a_copy_that_does_not_run_there_is_removed_with_the_loader_s_words() {
        let cache = scratch("fails");
        let build =
            b"#!/bin/sh\necho 'error while loading shared libraries: libssl.so.3' >&2\nexit 127\n"
                .to_vec();
        let sha = sha256_hex(&build);
        let (code, out) = run_script(&cache, &sha, "upload", &build);
        assert_eq!(code, 4, "{out}");
        assert_eq!(
            read_said(&out).fails.as_deref(),
            Some("error while loading shared libraries: libssl.so.3")
        );
        assert!(!cache.join("cipherbench").join(&sha).exists());
        std::fs::remove_dir_all(&cache).unwrap();
    }

    #[test]
    fn the_launch_command_prefers_the_deployed_build_then_the_path() {
        let cache = scratch("launch");
        let sha = "ab".repeat(32);
        // A PATH of its own: the shell, and no cipherbench until one is put there.
        let bin = cache.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink("/bin/sh", bin.join("sh")).unwrap();
        // The login shell parses the command as ssh hands it over.
        let launch = |path: &str| {
            Command::new("/bin/sh")
                .args(["-c", &remote_launch(&sha)])
                .env("XDG_CACHE_HOME", &cache)
                .env("PATH", path)
                .output()
                .unwrap()
        };
        let out = launch(bin.to_str().unwrap());
        assert_eq!(out.status.code(), Some(127));
        assert!(String::from_utf8_lossy(&out.stderr).contains(NO_AGENT));
        // One on the PATH.
        let on_path = bin.join("cipherbench");
        std::fs::write(&on_path, "#!/bin/sh\necho path $1\n").unwrap();
        let _ = Command::new("chmod").args(["755"]).arg(&on_path).status();
        let out = launch(bin.to_str().unwrap());
        assert_eq!(String::from_utf8_lossy(&out.stdout), "path agent\n");
        // The deployed build first.
        let deployed = cache.join("cipherbench").join(&sha);
        std::fs::create_dir_all(&deployed).unwrap();
        std::fs::write(
            deployed.join("cipherbench"),
            "#!/bin/sh\necho deployed $1\n",
        )
        .unwrap();
        let _ = Command::new("chmod")
            .args(["755"])
            .arg(deployed.join("cipherbench"))
            .status();
        let out = launch(bin.to_str().unwrap());
        assert_eq!(String::from_utf8_lossy(&out.stdout), "deployed agent\n");
        std::fs::remove_dir_all(&cache).unwrap();
    }

    #[test]
    fn a_word_with_quotes_survives_the_remote_shell() {
        let w = shell_word("it's \"$HOME\"");
        let out = Command::new("sh")
            .args(["-c", &format!("printf %s {w}")])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "it's \"$HOME\"");
    }
}
