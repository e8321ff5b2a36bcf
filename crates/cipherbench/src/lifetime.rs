//! What a run makes outside its processes, and how it goes when the run does.
//!
//! Processes die with cipherbench by themselves (`supervisor.rs`: a keeper per
//! child). Files and kernel objects cannot: the nearest thing to "gone when we
//! are" is a name that says whose they are, in a place the next run looks. So:
//!
//! - every temporary directory of a run (nginx's workspace with its private key,
//!   the tunnel's scratch, the file layer's scratch when there is no results
//!   directory) is `<kind>-<pid>-<start>-<nonce>` under one directory per user,
//!   [`temp_root`] = `$TMPDIR/cipherbench-<uid>/` (0711, ours, never a link);
//!   `<pid>-<start>` is the owner's pid and start time (clock ticks since boot, from
//!   `/proc/PID/stat`), which together name one process for the life of the
//!   machine: a pid reused by another process has another start time;
//! - the tunnel's namespaces carry the same owner tag (`tunnel/topology.rs`);
//! - [`sweep_temp`] removes the entries whose owner is gone (all of them with
//!   `force`), first ending any process still running in or on one (a cwd or an
//!   argument under it: nginx's workers if their keeper was killed too, gpg's
//!   agent); every measuring command calls it at start and `cipherbench cleanup`
//!   on demand, and each says in one line what it removed;
//! - while a run lives, what it would leave if it were killed now is registered
//!   ([`register`]), so that a third Ctrl-C, which exits at once, can say what
//!   stays and how to remove it (`interrupt.rs`).

use crate::host;
use crate::interrupt;
use crate::supervisor;
use anyhow::{bail, Context, Result};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// `<pid>-<start>` of this process.
pub fn owner_tag() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| {
        let pid = std::process::id();
        // Our own stat is always readable; 0 would only make our names look dead.
        format!("{pid}-{}", host::start_time(pid).unwrap_or(0))
    })
}

/// The owner encoded in a name `<prefix><pid>-<start>[-...]`: (pid, start time).
pub fn owner_of(name: &str, prefix: &str) -> Option<(u32, u64)> {
    let rest = name.strip_prefix(prefix)?;
    let mut parts = rest.splitn(3, '-');
    let pid = parts.next()?.parse().ok()?;
    let start = parts.next()?.parse().ok()?;
    Some((pid, start))
}

/// Whether the owner of such a name still runs.
pub fn owner_alive(name: &str, prefix: &str) -> bool {
    owner_of(name, prefix).is_some_and(|(pid, start)| host::process_alive(pid, start))
}

/// `$TMPDIR/cipherbench-<uid>/`, created 0711 if missing (others may pass through
/// it to an entry they know, as nginx's workers, run as `nobody` by a root
/// cipherbench, must; they may not list or change it). Refused if it is a link,
/// not a directory, not ours, or writable by others: another user could otherwise
/// have made it to swap what we put there.
pub fn temp_root() -> Result<PathBuf> {
    let root = temp_root_path();
    match std::fs::DirBuilder::new().mode(0o711).create(&root) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(e).with_context(|| {
                format!(
                    "creating {} (set TMPDIR to a writable directory)",
                    root.display()
                )
            })
        }
    }
    check_private(&root)?;
    Ok(root)
}

fn check_private(root: &Path) -> Result<()> {
    let meta =
        std::fs::symlink_metadata(root).with_context(|| format!("reading {}", root.display()))?;
    if !meta.is_dir() || meta.uid() != host::uid() || meta.mode() & 0o022 != 0 {
        bail!(
            "{} is not a private directory of this user (a link, another user's, or writable by others): remove it, or set TMPDIR elsewhere",
            root.display()
        );
    }
    Ok(())
}

/// A temporary directory of this run, `<temp root>/<kind>-<pid>-<start>-<nonce>`,
/// removed (with everything in it) on drop, and registered meanwhile as what a
/// third Ctrl-C would leave.
pub struct RunDir {
    path: PathBuf,
    _registered: Registration,
}

impl RunDir {
    /// Creates one; `what` names it for people ("nginx workspace").
    pub fn create(kind: &str, what: &str) -> Result<RunDir> {
        let mut nonce = [0u8; 3];
        cipherbench_crypto::random_bytes(&mut nonce).context("drawing a random name")?;
        let name = format!(
            "{kind}-{}-{}",
            owner_tag(),
            cipherbench_crypto::digest::to_hex(&nonce)
        );
        RunDir::create_named(&name, what)
    }

    /// Creates `<temp root>/<name>`, where `name` already carries our owner tag.
    pub fn create_named(name: &str, what: &str) -> Result<RunDir> {
        let path = create_in_root(name)?;
        Ok(RunDir {
            _registered: register(format!("{what} {}", path.display())),
            path,
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
        release_root();
    }
}

/// Creates the directory `<temp root>/<name>` (0700). The root is made again if a
/// run that just emptied it removed it meanwhile ([`release_root`]).
pub fn create_in_root(name: &str) -> Result<PathBuf> {
    let mut attempt = 0;
    loop {
        let path = temp_root()?.join(name);
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && attempt < 3 => attempt += 1,
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("creating the temporary directory {}", path.display())
                })
            }
        }
    }
}

/// Where the temp root is (nothing is created).
pub fn temp_root_path() -> PathBuf {
    std::env::temp_dir().join(format!("cipherbench-{}", host::uid()))
}

/// Removes the temp root if it is empty, so that a run that ends leaves not even
/// that; a run that is using it keeps it (the removal fails), and one about to
/// use it makes it again ([`create_in_root`]).
pub fn release_root() {
    let _ = std::fs::remove_dir(temp_root_path());
}

static REGISTRY: Mutex<Vec<(u64, String)>> = Mutex::new(Vec::new());
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Something this run made that would stay if it were killed now; unregistered
/// when dropped.
#[must_use = "dropping the registration unregisters at once"]
pub struct Registration(u64);

/// Registers `what` (a namespace, a directory: its kind and name).
pub fn register(what: String) -> Registration {
    let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let mut items = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    items.push((id, what));
    publish(&items);
    Registration(id)
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut items = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
        items.retain(|(id, _)| *id != self.0);
        publish(&items);
    }
}

fn publish(items: &[(u64, String)]) {
    let names: Vec<String> = items.iter().map(|(_, w)| w.clone()).collect();
    interrupt::set_left_behind(&names);
}

/// What a sweep did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Swept {
    /// What was removed, one phrase each ("nginx workspace /tmp/...").
    pub removed: Vec<String>,
    /// Processes ended because they ran in or on something removed.
    pub processes: Vec<u32>,
    /// What was left alone because its owner still runs.
    pub live: Vec<String>,
    /// What could not be removed, and why.
    pub failed: Vec<String>,
}

impl Swept {
    /// Adds another sweep's findings.
    pub fn merge(&mut self, other: Swept) {
        self.removed.extend(other.removed);
        self.processes.extend(other.processes);
        self.live.extend(other.live);
        self.failed.extend(other.failed);
    }

    /// The one line a command prints at start, if anything was removed or failed.
    pub fn note(&self) -> Option<String> {
        if self.removed.is_empty() && self.failed.is_empty() {
            return None;
        }
        let mut line = String::new();
        if !self.removed.is_empty() {
            line.push_str(&format!(
                "removed what an earlier, killed cipherbench left: {}",
                self.removed.join(", ")
            ));
            if !self.processes.is_empty() {
                line.push_str(&format!(
                    " (ended {} process(es) still running there: {:?})",
                    self.processes.len(),
                    self.processes
                ));
            }
        }
        if !self.failed.is_empty() {
            if !line.is_empty() {
                line.push_str("; ");
            }
            line.push_str(&format!(
                "could not remove what an earlier cipherbench left: {} (`cipherbench cleanup` retries)",
                self.failed.join("; ")
            ));
        }
        Some(line)
    }
}

/// The kinds of temporary directory, by the prefix of their names, and what they
/// are called in messages.
pub const KINDS: [(&str, &str); 3] = [
    ("tls-", "nginx workspace"),
    ("cbtun-", "tunnel scratch directory"),
    ("file-", "file-layer scratch directory"),
];

/// Sweeps the temp root: every entry whose owner is gone (every one with `force`)
/// is removed, after the processes running in or on it are ended.
pub fn sweep_temp(force: bool) -> Swept {
    let root = temp_root_path();
    if !root.is_dir() || check_private(&root).is_err() {
        return Swept::default();
    }
    let mut swept = Swept::default();
    for (prefix, what) in KINDS {
        swept.merge(sweep_dir(&root, prefix, what, force));
    }
    release_root();
    swept
}

/// Removes the entries `<prefix><pid>-<start>[-...]` of `dir` whose owner is gone
/// (every one with `force`), ending the processes still using each first.
pub fn sweep_dir(dir: &Path, prefix: &str, what: &str, force: bool) -> Swept {
    let mut swept = Swept::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return swept;
    };
    let mine = owner_tag();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((pid, start)) = owner_of(&name, prefix) else {
            continue;
        };
        let path = entry.path();
        if format!("{pid}-{start}") == mine {
            continue;
        }
        if !force && host::process_alive(pid, start) {
            swept.live.push(format!("{what} {}", path.display()));
            continue;
        }
        swept.processes.extend(end_processes_using(&path));
        match remove(&path) {
            Ok(()) => swept.removed.push(format!("{what} {}", path.display())),
            Err(e) => swept.failed.push(format!("{what} {}: {e}", path.display())),
        }
    }
    swept
}

fn remove(path: &Path) -> std::io::Result<()> {
    if std::fs::symlink_metadata(path)?.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    }
}

/// SIGKILLs every process whose working directory, executable or one of whose
/// arguments is under `dir` (other than this process and its ancestors), and
/// returns their pids. The name of `dir` carries a dead run's owner tag, so these
/// are that run's (nginx in its workspace, gpg's agent on its home), not anyone
/// else's.
pub fn end_processes_using(dir: &Path) -> Vec<u32> {
    let Ok(dir) = dir.canonicalize() else {
        return Vec::new();
    };
    let me = std::process::id();
    let ancestors = ancestors_of(me);
    let mut ended = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return ended;
    };
    for entry in procs.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == me || ancestors.contains(&pid) || !host::pid_alive(pid) {
            continue;
        }
        let under = |p: PathBuf| p.starts_with(&dir);
        let uses = std::fs::read_link(entry.path().join("cwd")).is_ok_and(under)
            || std::fs::read_link(entry.path().join("exe")).is_ok_and(under)
            || std::fs::read(entry.path().join("cmdline"))
                .is_ok_and(|cmd| cmd.split(|&b| b == 0).any(|arg| arg_under(arg, &dir)));
        if uses {
            supervisor::kill_process(pid, libc::SIGKILL);
            ended.push(pid);
        }
    }
    ended
}

/// Whether a command-line argument names something under `dir` (as a path, or as
/// the value of `--opt=PATH`).
fn arg_under(arg: &[u8], dir: &Path) -> bool {
    let text = String::from_utf8_lossy(arg);
    let value = text.split_once('=').map_or(text.as_ref(), |(_, v)| v);
    [text.as_ref(), value]
        .iter()
        .any(|t| t.starts_with('/') && Path::new(t).starts_with(dir))
}

fn ancestors_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut current = pid;
    while let Some(parent) = host::parent_of(current) {
        if parent == 0 || out.contains(&parent) {
            break;
        }
        out.push(parent);
        current = parent;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_their_owner_and_a_dead_or_reused_pid_is_not_alive() {
        assert_eq!(owner_of("tls-12-345-ab", "tls-"), Some((12, 345)));
        assert_eq!(owner_of("tls-12-345", "tls-"), Some((12, 345)));
        assert_eq!(owner_of("tls-12", "tls-"), None);
        assert_eq!(owner_of("file-x-1", "file-"), None);
        assert_eq!(owner_of("cbtun-1-2-3", "tls-"), None);
        let mine = format!("tls-{}-ff", owner_tag());
        assert!(owner_alive(&mine, "tls-"));
        // Our pid with another start time: a reused pid, so its owner is gone.
        let (pid, start) = owner_of(&mine, "tls-").unwrap();
        assert!(!owner_alive(&format!("tls-{pid}-{}-ff", start + 1), "tls-"));
    }

    #[test]
    fn arguments_under_a_directory_are_recognised() {
        let dir = Path::new("/tmp/cb-x/tls-1-2-ab");
        assert!(arg_under(b"/tmp/cb-x/tls-1-2-ab/nginx.conf", dir));
        assert!(arg_under(b"--homedir=/tmp/cb-x/tls-1-2-ab/g", dir));
        assert!(!arg_under(b"/tmp/cb-x/tls-1-2-abc/nginx.conf", dir));
        assert!(!arg_under(b"relative/tmp/cb-x/tls-1-2-ab", dir));
    }

    #[test]
    fn the_sweep_removes_a_dead_owners_entry_and_leaves_a_live_ones() {
        let dir = std::env::temp_dir().join(format!("cb-sweep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (pid, start) = owner_of(&format!("x-{}", owner_tag()), "x-").unwrap();
        let dead = dir.join(format!("k-{pid}-{}-aa", start + 1));
        let live_parent = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let lp = live_parent.id();
        let live = dir.join(format!("k-{lp}-{}-bb", host::start_time(lp).unwrap()));
        std::fs::create_dir_all(dead.join("sub")).unwrap();
        std::fs::create_dir_all(&live).unwrap();
        let swept = sweep_dir(&dir, "k-", "thing", false);
        assert_eq!(swept.removed, vec![format!("thing {}", dead.display())]);
        assert_eq!(swept.live, vec![format!("thing {}", live.display())]);
        assert!(!dead.exists() && live.exists());
        assert!(swept.note().unwrap().contains("removed what an earlier"));
        let forced = sweep_dir(&dir, "k-", "thing", true);
        assert_eq!(forced.removed.len(), 1);
        let mut live_parent = live_parent;
        let _ = live_parent.kill();
        let _ = live_parent.wait();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
