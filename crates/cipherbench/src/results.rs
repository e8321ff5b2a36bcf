//! The results directory: `run.json` (canonical), CSV per layer, `summary.md` and
//! `report.html`,
//! written atomically after every scenario so an interrupted run keeps what it
//! measured.
//!
//! A directory is checked for writability before anything is measured; if the run
//! then fails before measuring anything, a directory this run created is removed
//! again, so bad input leaves nothing behind.
//!
//! **One run per directory**: whoever writes into a results directory (a measuring
//! command, `report`, `cleanup`) first takes an exclusive `flock` on the directory
//! itself ([`DirLock`]), which the kernel releases when the process ends, however
//! it ends; no lock file is left behind. A second run is refused in one line naming
//! the holder (its pid from `/proc/locks`, its command line from `/proc`).
//! Holding the lock, a run knows that nobody else writes there, so what it finds
//! of a killed write (`.NAME.tmp-<pid>` of [`write_atomic`]), of a killed file
//! layer (`cipherbench-file-<pid>-<start>/`) or an older version's lock file
//! (`.cipherbench.lock`) is a dead run's: [`ResultsDir`] removes it when it opens
//! the directory, and says so in one line. So a results directory holds only
//! results after any run, refused, failed or interrupted; after a SIGKILL, only
//! until the next command opens it.
//!
//! **Resume advice is a command that works**: a directory holding an unfinished run
//! is resumed by the same command ([`same_run`]: `run` with the same preset, a
//! single-layer command with the same arguments); any other command refuses, naming
//! the command that resumes it (with `--results`), which the layers honour by
//! skipping what the record already has.

use crate::host;
use crate::lifetime::{self, Swept};
use crate::progress::Progress;
use anyhow::{bail, Context, Result};
use cipherbench_model::env::Environment;
use cipherbench_model::{RunRecord, SCHEMA_NAME, SCHEMA_VERSION};
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The file layer's scratch directories in a results directory.
pub const FILE_SCRATCH_PREFIX: &str = "cipherbench-file-";

/// A measuring command's state: the record being filled, where it is saved, and the
/// progress observer.
pub struct Session {
    /// The record.
    pub record: RunRecord,
    /// The observer.
    pub progress: Progress,
    dir: Option<ResultsDir>,
}

/// A results directory open for writing: locked, swept of a killed run's debris.
pub struct ResultsDir {
    path: PathBuf,
    /// The topmost directory this run created (removed if nothing gets measured).
    created: Option<PathBuf>,
    /// What opening it removed (reported once, by whoever opened it).
    swept: Swept,
    _lock: DirLock,
}

/// The current time in seconds since the epoch.
pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `results/<timestamp>-<host>`.
pub fn default_dir(hostname: &str) -> PathBuf {
    let host: String = hostname
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    PathBuf::from("results").join(format!(
        "{}-{}",
        cipherbench_model::time::compact_utc(now_unix()),
        if host.is_empty() { "host" } else { &host }
    ))
}

impl Session {
    /// Starts a new record. With `dir`, opens the directory (created if missing,
    /// locked, swept, checked for writability) and refuses it if it already holds a
    /// run, saying how to resume or re-render that run.
    pub fn start(
        environment: Environment,
        preset: &str,
        dir: Option<PathBuf>,
        progress: Progress,
    ) -> Result<Session> {
        match dir {
            None => Ok(Session::fresh(environment, preset, None, progress)),
            Some(path) => {
                let dir = ResultsDir::open(path)?;
                if dir.path.join("run.json").exists() {
                    bail!("{}", occupied(&dir.path, &load_held(&dir.path)?));
                }
                Ok(Session::fresh(environment, preset, Some(dir), progress))
            }
        }
    }

    /// Opens `dir` for this command: a new record if it holds no run, else the
    /// unfinished run it holds if this command is the one that resumes it
    /// ([`same_run`]): the record is loaded and the layers skip what it already
    /// has. Refuses a finished run, another command's run (naming the command that
    /// resumes it), and one measured on another machine. The bool says whether it
    /// resumed.
    pub fn open(
        environment: Environment,
        preset: &str,
        path: PathBuf,
        mut progress: Progress,
    ) -> Result<(Session, bool)> {
        let dir = ResultsDir::open(path)?;
        if let Some(note) = dir.swept.note() {
            progress.note(&note);
        }
        if !dir.path.join("run.json").exists() {
            return Ok((
                Session::fresh(environment, preset, Some(dir), progress),
                false,
            ));
        }
        let mut record = load_held(&dir.path)?;
        let this: Vec<String> = std::env::args().collect();
        if record.finished_at.is_some() && !record.interrupted
            || !same_run(&record.command_line, &record.preset, &this, preset)
        {
            bail!("{}", occupied(&dir.path, &record));
        }
        if record.environment.cpu.model != environment.cpu.model
            || record.environment.hostname != environment.hostname
        {
            bail!(
                "{} holds a run measured on {} ({}), not this machine; choose another --results directory",
                dir.path.display(),
                record.environment.hostname,
                record.environment.cpu.model
            );
        }
        let names = |e: &Environment| -> Vec<String> {
            e.libraries
                .iter()
                .map(|l| format!("{} ({})", l.name, l.version))
                .collect()
        };
        let (was, now) = (names(&record.environment), names(&environment));
        // A record from before the list measured the system's library.
        let same_libraries = was == now
            || (was.is_empty() && environment.libraries.iter().all(|l| l.name == "system"));
        if !same_libraries {
            bail!(
                "{} holds an unfinished run measured with OpenSSL {}, not {}: resume it with the same --openssl, or choose another --results directory",
                dir.path.display(),
                if was.is_empty() { "system".to_string() } else { was.join(", ") },
                now.join(", ")
            );
        }
        record.interrupted = false;
        record.finished_at = None;
        record.warn(
            "run",
            "resumed",
            format!(
                "resumed at {}: scenarios measured before the interruption were kept, not measured again",
                cipherbench_model::time::rfc3339_utc(now_unix())
            ),
        );
        Ok((
            Session {
                record,
                progress,
                dir: Some(dir),
            },
            true,
        ))
    }

    fn fresh(
        environment: Environment,
        preset: &str,
        dir: Option<ResultsDir>,
        mut progress: Progress,
    ) -> Session {
        if let Some(note) = dir.as_ref().and_then(|d| d.swept.note()) {
            progress.note(&note);
        }
        let mut session = Session {
            record: RunRecord {
                schema: SCHEMA_NAME.into(),
                schema_version: SCHEMA_VERSION,
                tool_version: env!("CARGO_PKG_VERSION").into(),
                command_line: std::env::args().collect(),
                preset: preset.into(),
                rehearsal: false,
                started_at: cipherbench_model::time::rfc3339_utc(now_unix()),
                finished_at: None,
                interrupted: false,
                environment,
                speed: None,
                file: None,
                tls: None,
                tunnel: None,
                warnings: Vec::new(),
                completed_layers: Vec::new(),
                target_gbps: None,
                placement: None,
                fitness: None,
            },
            progress,
            dir,
        };
        session.note_user_ia32cap();
        session
    }

    /// An `OPENSSL_ia32cap` in the user's environment (even empty or malformed) does
    /// not reach the measurements: every variant sets its own in its processes and
    /// accel removes it. Said once, in the notes and the record, with the value.
    fn note_user_ia32cap(&mut self) {
        let Some(value) = self.record.environment.openssl.ia32cap_env.clone() else {
            return;
        };
        let message = format!(
            "OPENSSL_ia32cap='{value}' is set in your environment: every variant sets its own in the processes it measures (accel removes it), so it does not change the figures; it does apply to cipherbench's own process, where the TLS load generator runs"
        );
        self.progress.note(&message);
        self.record.warn("run", "ia32cap_in_environment", message);
    }

    /// Where results go, if anywhere.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_ref().map(|d| d.path.as_path())
    }

    /// Whether any layer has data.
    pub fn has_measurements(&self) -> bool {
        self.record.speed.is_some()
            || self.record.file.is_some()
            || self
                .record
                .tls
                .as_ref()
                .is_some_and(cipherbench_model::tls::TlsResults::has_data)
            || self.record.tunnel.is_some()
    }

    /// Saves `run.json` and the CSV files (not the HTML: that is rendered at the end,
    /// and by `cipherbench report`).
    pub fn save(&mut self) -> Result<()> {
        let Some(dir) = &self.dir else { return Ok(()) };
        write_atomic(&dir.path.join("run.json"), self.record.to_json().as_bytes())?;
        for file in cipherbench_report::render_csv(&self.record) {
            write_atomic(&dir.path.join(&file.name), file.contents.as_bytes())?;
        }
        Ok(())
    }

    /// Ends the session. On success or interruption the record is saved and the
    /// report rendered; on an error with nothing measured, a directory this run
    /// created is removed.
    pub fn finish(&mut self, outcome: &Result<()>) -> Result<()> {
        // Any early end (Ctrl-C or an error) marks the record incomplete.
        let interrupted = outcome.is_err();
        if interrupted && !self.has_measurements() {
            if let Some(dir) = self.dir.take() {
                dir.remove_if_created();
            }
            return Ok(());
        }
        self.record.interrupted = interrupted;
        self.record.finished_at = Some(cipherbench_model::time::rfc3339_utc(now_unix()));
        self.save()?;
        if let Some(dir) = &self.dir {
            // run.json is already safe on disk: a rendering problem cannot lose data.
            for file in cipherbench_report::render_documents(&self.record) {
                write_atomic(&dir.path.join(&file.name), file.contents.as_bytes())?;
            }
        }
        Ok(())
    }
}

impl ResultsDir {
    /// Opens a results directory for writing: creates it if missing, takes its
    /// lock (refusing if another run holds it), removes what a killed run left,
    /// and checks that it is writable. If anything fails, a directory this call
    /// created is removed again (unless another run holds it).
    pub fn open(path: PathBuf) -> Result<ResultsDir> {
        // Find the topmost missing ancestor, so a failure can remove exactly what we
        // made.
        let mut created = None;
        let mut probe = path.as_path();
        while !probe.as_os_str().is_empty() && !probe.exists() {
            created = Some(probe.to_path_buf());
            match probe.parent() {
                Some(p) => probe = p,
                None => break,
            }
        }
        fs::create_dir_all(&path).with_context(|| {
            format!(
                "cannot create the results directory {}; pass --results with a writable path",
                path.display()
            )
        })?;
        let lock = match DirLock::take(&path) {
            Ok(lock) => lock,
            Err(e) => {
                // Another run may hold it: what we "created" may be its directory.
                if let (Some(top), false) = (&created, lock_held(&path)) {
                    let _ = fs::remove_dir_all(top);
                }
                return Err(e);
            }
        };
        if let Some(refusal) = held_by_an_older_version(&path) {
            bail!("{refusal}");
        }
        let swept = sweep_results(&path);
        let dir = ResultsDir {
            path,
            created,
            swept,
            _lock: lock,
        };
        if let Err(e) = dir.check_writable() {
            dir.remove_if_created();
            return Err(e);
        }
        Ok(dir)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What opening it removed.
    pub fn swept(&self) -> &Swept {
        &self.swept
    }

    /// Writes a few bytes into an unnamed file (`O_TMPFILE`), which leaves nothing
    /// however the process ends; where the file system has no unnamed files, into
    /// `.cipherbench-write-test`, removed at once (and by the sweep, after a kill).
    fn check_writable(&self) -> Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let unnamed = fs::OpenOptions::new()
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_TMPFILE | libc::O_CLOEXEC)
            .open(&self.path)
            .and_then(|mut f| f.write_all(b"ok"));
        if unnamed.is_ok() {
            return Ok(());
        }
        let test = self.path.join(WRITE_TEST);
        let writable = fs::File::create(&test).and_then(|mut f| f.write_all(b"ok"));
        let _ = fs::remove_file(&test);
        if let Err(e) = writable {
            bail!(
                "cannot write to the results directory {} ({e}); pass --results with a writable path",
                self.path.display()
            );
        }
        Ok(())
    }

    fn remove_if_created(self) {
        if let Some(top) = &self.created {
            let _ = fs::remove_dir_all(top);
        }
    }
}

/// The exclusive lock on a results directory, held until dropped or the process
/// ends (the kernel releases a `flock` with the last descriptor of its open file).
/// The lock is on the directory itself, so it leaves no file behind.
pub struct DirLock {
    _dir: fs::File,
}

impl DirLock {
    /// Takes an exclusive `flock` on `dir` itself without waiting. The descriptor is
    /// close-on-exec, so no program we start holds the lock after us.
    pub fn take(dir: &Path) -> Result<DirLock> {
        let file = open_directory(dir).with_context(|| {
            format!(
                "cannot open the results directory {}; pass --results with a readable, writable directory",
                dir.display()
            )
        })?;
        match host::try_lock_exclusive(&file) {
            Ok(true) => Ok(DirLock { _dir: file }),
            Ok(false) => bail!("{}", held_by(dir)),
            Err(e) => bail!(
                "cannot lock the results directory {} (flock: {e}): one run writes there at a time, under a lock its file system must support; pass --results with a directory on a local file system",
                dir.display()
            ),
        }
    }
}

/// `dir` opened read-only as a directory (`O_DIRECTORY`, `O_CLOEXEC`), for its lock.
fn open_directory(dir: &Path) -> std::io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)
}

/// Whether another process holds `dir`'s lock now (an older cipherbench's lock
/// file included).
pub fn held_by_another(dir: &Path) -> bool {
    lock_held(dir) || held_by_an_older_version(dir).is_some()
}

fn lock_held(dir: &Path) -> bool {
    open_directory(dir).is_ok_and(|f| matches!(host::try_lock_exclusive(&f), Ok(false)))
}

/// The one line refusing a directory another run holds, naming that run (its pid
/// and command line, from `/proc/locks` and `/proc/PID/cmdline`), or "another
/// cipherbench" when the holder cannot be found (it just ended, or `/proc` does
/// not show it).
fn held_by(dir: &Path) -> String {
    let who = match lock_holder(dir) {
        None => "another cipherbench".to_string(),
        Some(pid) => match command_line(pid) {
            Some(command) => format!("cipherbench pid {pid} (`{command}`)"),
            None => format!("cipherbench pid {pid}"),
        },
    };
    format!(
        "{} is in use by {who}: one run per results directory; wait for it to end, or choose another --results directory",
        dir.display()
    )
}

/// The pid of the process holding `dir`'s lock, from `/proc/locks`: the `FLOCK`
/// `WRITE` lock on the directory's device and inode. Where the device in
/// `/proc/locks` is not the one `stat` reports (btrfs subvolumes report their own),
/// a lock on the same inode number counts if its holder has the directory open.
pub fn lock_holder(dir: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let meta = fs::metadata(dir).ok()?;
    let locks = parse_proc_locks(&fs::read_to_string("/proc/locks").ok()?);
    let (major, minor) = dev_major_minor(meta.dev());
    let held: Vec<&ProcLock> = locks
        .iter()
        .filter(|l| l.kind == "FLOCK" && l.write && !l.waiting && l.inode == meta.ino())
        .collect();
    if let Some(exact) = held.iter().find(|l| (l.major, l.minor) == (major, minor)) {
        return Some(exact.pid);
    }
    held.iter()
        .map(|l| l.pid)
        .find(|&pid| has_open(pid, meta.dev(), meta.ino()))
}

/// Whether process `pid` has a descriptor open on the file `dev`/`ino`.
fn has_open(pid: u32, dev: u64, ino: u64) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten()
        .any(|fd| fs::metadata(fd.path()).is_ok_and(|m| m.dev() == dev && m.ino() == ino))
}

/// A process's command line, its arguments joined by spaces (None if it is gone or
/// has none).
fn command_line(pid: u32) -> Option<String> {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let words: Vec<String> = raw
        .split(|&b| b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// One line of `/proc/locks`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ProcLock {
    /// `FLOCK`, `POSIX`, `OFDLCK`, `LEASE`...
    kind: String,
    /// A waiter for the lock (`->`), not a holder.
    waiting: bool,
    /// An exclusive lock (`WRITE`).
    write: bool,
    /// The holder (or waiter), as this process's pid namespace sees it.
    pid: u32,
    /// The file's device and inode.
    major: u32,
    minor: u32,
    inode: u64,
}

/// Parses `/proc/locks`: `N: [->] KIND ADVISORY|MANDATORY READ|WRITE PID MAJ:MIN:INODE
/// START END`, the device's major and minor in hex, the inode in decimal. Lines
/// without an inode (`<none>`), or whose pid is not a process of ours to name (0,
/// or -1 for open file description locks), are left out.
fn parse_proc_locks(text: &str) -> Vec<ProcLock> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace().skip(1).peekable();
            let waiting = words.next_if_eq(&"->").is_some();
            let kind = words.next()?.to_string();
            let _advisory = words.next()?;
            let write = words.next()? == "WRITE";
            let pid: u32 = words.next()?.parse().ok().filter(|&p| p > 0)?;
            let mut file = words.next()?.split(':');
            let major = u32::from_str_radix(file.next()?, 16).ok()?;
            let minor = u32::from_str_radix(file.next()?, 16).ok()?;
            let inode = file.next()?.parse().ok()?;
            Some(ProcLock {
                kind,
                waiting,
                write,
                pid,
                major,
                minor,
                inode,
            })
        })
        .collect()
}

/// A `st_dev`'s major and minor numbers (glibc's and the kernel's `new_encode_dev`).
fn dev_major_minor(dev: u64) -> (u32, u32) {
    let major = ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0000_0fff);
    let minor = ((dev >> 12) & 0xffff_ff00) | (dev & 0x0000_00ff);
    (major as u32, minor as u32)
}

/// The lock file of cipherbench versions that locked a file in the directory rather
/// than the directory: removed by the sweep ([`sweep_results`]), unless an older
/// cipherbench still holds it ([`ResultsDir::open`] refuses then).
const OLD_LOCK_FILE: &str = ".cipherbench.lock";

/// If an older cipherbench (one that locked [`OLD_LOCK_FILE`]) writes in `dir`
/// now, the line refusing it, naming that run from what it wrote in its lock file.
fn held_by_an_older_version(dir: &Path) -> Option<String> {
    let mut file = fs::File::open(dir.join(OLD_LOCK_FILE)).ok()?;
    if !matches!(host::try_lock_exclusive(&file), Ok(false)) {
        return None;
    }
    let mut text = String::new();
    let _ = file.read_to_string(&mut text);
    let mut lines = text.lines();
    let pid = lines.next().unwrap_or("").trim();
    let command = lines.nth(1).unwrap_or("").trim();
    let who = match (pid.is_empty(), command.is_empty()) {
        (true, _) => "an older cipherbench".to_string(),
        (false, true) => format!("an older cipherbench, pid {pid}"),
        (false, false) => format!("an older cipherbench, pid {pid} (`{command}`)"),
    };
    Some(format!(
        "{} is in use by {who}: one run per results directory; wait for it to end, or choose another --results directory",
        dir.display()
    ))
}

/// The writability check's file where the file system has no unnamed files.
const WRITE_TEST: &str = ".cipherbench-write-test";

/// What a killed run left in a results directory, removed. Called holding its
/// lock, so no other run writes there: a temporary file of [`write_atomic`] not
/// ours is a dead writer's, and so is a file-layer scratch directory (any process
/// still working in one, such as gpg's agent, is ended first); an older version's
/// lock file is no one's (checked free by [`held_by_an_older_version`]).
fn sweep_results(dir: &Path) -> Swept {
    let mut swept = Swept::default();
    let Ok(entries) = fs::read_dir(dir) else {
        return swept;
    };
    let me = std::process::id();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let what = if let Some(pid) = temp_file_pid(&name) {
            if pid == me {
                continue;
            }
            "temporary file of a killed write"
        } else if name.starts_with(FILE_SCRATCH_PREFIX) {
            if name == format!("{FILE_SCRATCH_PREFIX}{}", lifetime::owner_tag()) {
                continue;
            }
            swept.processes.extend(lifetime::end_processes_using(&path));
            "file-layer scratch directory"
        } else if name == WRITE_TEST {
            "write test file"
        } else if name == OLD_LOCK_FILE {
            "an older cipherbench's lock file (no longer used)"
        } else {
            continue;
        };
        let removed = if path.is_dir() {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        match removed {
            Ok(()) => swept.removed.push(format!("{what} {}", path.display())),
            Err(e) => swept.failed.push(format!("{}: {e}", path.display())),
        }
    }
    swept
}

/// The writer's pid in a temporary name of [`write_atomic`]: `.NAME.tmp-<pid>`.
fn temp_file_pid(name: &str) -> Option<u32> {
    let (base, pid) = name.rsplit_once(".tmp-")?;
    if !base.starts_with('.') {
        return None;
    }
    pid.parse().ok()
}

/// Opens a results directory for a command that rewrites its derived files
/// (`report`) or only sweeps it (`cleanup`).
pub fn open_existing(dir: &Path) -> Result<ResultsDir> {
    if !dir.is_dir() {
        bail!(
            "{} is not a directory: give a cipherbench results directory",
            dir.display()
        );
    }
    ResultsDir::open(dir.to_path_buf())
}

/// The arguments that make a run what it is: the command line without the
/// program, `--quiet`/`-q` and `--results DIR`.
pub fn run_arguments(command_line: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut args = command_line.iter().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "-q" | "--quiet" => {}
            "--results" => {
                args.next();
            }
            _ if a.starts_with("--results=") => {}
            _ => out.push(a.clone()),
        }
    }
    out
}

/// Whether a run recorded as (`recorded`, `recorded_preset`) is resumed by this
/// command (`current`, `preset`): `run` with the same preset, or the same
/// single-layer command with the same arguments.
pub fn same_run(
    recorded: &[String],
    recorded_preset: &str,
    current: &[String],
    preset: &str,
) -> bool {
    let (a, b) = (run_arguments(recorded), run_arguments(current));
    match (a.first().map(String::as_str), b.first().map(String::as_str)) {
        (Some("run"), Some("run")) => {
            let rehearsal = |args: &[String]| args.iter().any(|a| a == "--rehearse");
            recorded_preset == preset && rehearsal(&a) == rehearsal(&b)
        }
        _ => a == b,
    }
}

/// The command that resumes a recorded run in `dir`.
pub fn resume_command(record: &RunRecord, dir: &Path) -> String {
    let args = run_arguments(&record.command_line);
    let mut words: Vec<String> = vec!["cipherbench".into()];
    if args.first().map(String::as_str) == Some("run") {
        words.extend(["run".into(), "--preset".into(), record.preset.clone()]);
        if record.rehearsal {
            words.push("--rehearse".into());
        }
    } else {
        words.extend(args);
    }
    words.push("--results".into());
    words.push(dir.display().to_string());
    words
        .iter()
        .map(|w| shell_quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A word as a POSIX shell reads it back.
fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@%".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The run a directory already holds; a `run.json` that cannot be read is refused
/// as a run all the same (never overwritten).
fn load_held(dir: &Path) -> Result<RunRecord> {
    load(dir).map_err(|e| {
        anyhow::anyhow!(
            "{} already holds a run (run.json), which cannot be read ({}); choose another --results directory",
            dir.display(),
            crate::progress::one_line(&e)
        )
    })
}

/// Why a directory holding a run cannot take another, and what to do instead.
fn occupied(dir: &Path, record: &RunRecord) -> String {
    if record.finished_at.is_some() && !record.interrupted {
        format!(
            "{} already holds a finished run; choose another --results directory, or re-render it with `cipherbench report {}`",
            dir.display(),
            shell_quote(&dir.display().to_string())
        )
    } else {
        format!(
            "{} holds an unfinished run; resume it with `{}`, or choose another --results directory",
            dir.display(),
            resume_command(record, dir)
        )
    }
}

/// Writes a file atomically: a temporary file beside it, fsync, rename, fsync the
/// directory. A reader sees the old file or the new one, never half of one.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(contents)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        if let Ok(d) = fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("writing {}", path.display()));
    }
    Ok(())
}

/// Reads a results directory's `run.json`.
pub fn load(dir: &Path) -> Result<RunRecord> {
    let path = dir.join("run.json");
    let text = fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read {}: is {} a cipherbench results directory?",
            path.display(),
            dir.display()
        )
    })?;
    RunRecord::from_json(&text).with_context(|| format!("reading {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cb-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn atomic_write_replaces_whole_files() {
        let dir = scratch("atomic");
        fs::create_dir_all(&dir).unwrap();
        let f = dir.join("x.json");
        write_atomic(&f, b"one").unwrap();
        write_atomic(&f, b"two").unwrap();
        assert_eq!(fs::read_to_string(&f).unwrap(), "two");
        let leftovers: Vec<_> = fs::read_dir(&dir).unwrap().flatten().collect();
        assert_eq!(leftovers.len(), 1);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_open_leaves_nothing() {
        let base = scratch("prep");
        let target = base.join("a/b");
        let dir = ResultsDir::open(target.clone()).unwrap();
        assert!(target.is_dir());
        dir.remove_if_created();
        assert!(!base.exists());
    }

    #[test]
    fn a_second_opener_is_refused_naming_the_holder_and_leaves_the_directory() {
        let base = scratch("lock");
        let first = ResultsDir::open(base.clone()).unwrap();
        // flock locks belong to the open file description: a second open in the
        // same process conflicts as another process would.
        let err = ResultsDir::open(base.clone()).err().unwrap().to_string();
        let me = format!("is in use by cipherbench pid {} (`", std::process::id());
        assert!(err.contains(&me), "{err}");
        assert_eq!(lock_holder(&base), Some(std::process::id()));
        assert!(held_by_another(&base));
        assert!(base.is_dir(), "the holder's directory must stay");
        assert_eq!(
            fs::read_dir(&base).unwrap().count(),
            0,
            "a lock leaves no file"
        );
        drop(first);
        assert_eq!(lock_holder(&base), None);
        let again = ResultsDir::open(base.clone()).unwrap();
        drop(again);
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn opening_removes_a_killed_writes_temporary_files_and_scratch() {
        let base = scratch("sweep");
        fs::create_dir_all(base.join("cipherbench-file-4242-77/secrets")).unwrap();
        fs::create_dir_all(base.join("cipherbench-file-4243")).unwrap();
        fs::write(base.join(".speed.csv.tmp-4242"), "half").unwrap();
        fs::write(base.join("run.json"), "{}").unwrap();
        fs::write(base.join("notes.tmp-1"), "a user's file").unwrap();
        let dir = ResultsDir::open(base.clone()).unwrap();
        let mut left: Vec<String> = fs::read_dir(&base)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, vec!["notes.tmp-1", "run.json"]);
        assert_eq!(dir.swept().removed.len(), 3, "{:?}", dir.swept());
        assert!(dir.swept().note().unwrap().contains(".speed.csv.tmp-4242"));
        drop(dir);
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn an_older_versions_lock_file_is_swept_unless_that_version_still_runs() {
        let base = scratch("old-lock");
        fs::create_dir_all(&base).unwrap();
        fs::write(
            base.join(".cipherbench.lock"),
            "4242\n4242-1\ncipherbench speed\n",
        )
        .unwrap();
        let held = fs::File::open(base.join(".cipherbench.lock")).unwrap();
        assert!(host::try_lock_exclusive(&held).unwrap());
        let err = ResultsDir::open(base.clone()).err().unwrap().to_string();
        assert!(
            err.contains("in use by an older cipherbench, pid 4242 (`cipherbench speed`)"),
            "{err}"
        );
        assert!(held_by_another(&base));
        assert!(base.join(".cipherbench.lock").exists());
        drop(held);
        let dir = ResultsDir::open(base.clone()).unwrap();
        let note = dir.swept().note().unwrap();
        assert!(
            note.contains("an older cipherbench's lock file") && note.contains(".cipherbench.lock"),
            "{note}"
        );
        assert_eq!(fs::read_dir(&base).unwrap().count(), 0);
        drop(dir);
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn proc_locks_lines_give_the_holder_and_the_locked_inode() {
        let text = "\
1: FLOCK  ADVISORY  WRITE 5283 fe:00:9977981 0 EOF
1: -> FLOCK  ADVISORY  WRITE 5290 fe:00:9977981 0 EOF
2: POSIX  ADVISORY  READ 812 00:1a:1043 0 EOF
3: OFDLCK ADVISORY  WRITE -1 08:11:77 0 EOF
4: FLOCK  ADVISORY  READ 0 103:0a:12 0 EOF
5: LEASE  ACTIVE    READ 900 <none>:0 0 EOF
";
        let locks = parse_proc_locks(text);
        assert_eq!(
            locks,
            vec![
                ProcLock {
                    kind: "FLOCK".into(),
                    waiting: false,
                    write: true,
                    pid: 5283,
                    major: 0xfe,
                    minor: 0,
                    inode: 9977981,
                },
                ProcLock {
                    kind: "FLOCK".into(),
                    waiting: true,
                    write: true,
                    pid: 5290,
                    major: 0xfe,
                    minor: 0,
                    inode: 9977981,
                },
                ProcLock {
                    kind: "POSIX".into(),
                    waiting: false,
                    write: false,
                    pid: 812,
                    major: 0,
                    minor: 0x1a,
                    inode: 1043,
                },
            ]
        );
        assert!(parse_proc_locks("").is_empty());
        assert!(parse_proc_locks("garbage\n1: FLOCK\n").is_empty());
    }

    #[test]
    fn device_numbers_split_as_the_kernel_prints_them() {
        // stat's st_dev of /dev/vda (254:0) and of a device above 255 (259:10).
        assert_eq!(dev_major_minor(0xfe00), (0xfe, 0));
        assert_eq!(dev_major_minor(0x1030a), (259, 10));
        // Large minors spill into the high bits (new_encode_dev).
        assert_eq!(
            dev_major_minor((0x1234 << 20) | 0x0800 | 0x56),
            (8, 0x123456)
        );
    }

    #[test]
    fn the_writability_check_leaves_nothing() {
        let base = scratch("writable");
        let dir = ResultsDir::open(base.clone()).unwrap();
        dir.check_writable().unwrap();
        assert_eq!(fs::read_dir(&base).unwrap().count(), 0);
        drop(dir);
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn temporary_names_carry_their_writer() {
        assert_eq!(temp_file_pid(".run.json.tmp-123"), Some(123));
        assert_eq!(temp_file_pid("run.json.tmp-123"), None);
        assert_eq!(temp_file_pid(".run.json.tmp-x"), None);
    }

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn a_run_is_resumed_by_the_same_command_only() {
        let speed = args("/x/cipherbench -q speed --cipher aes-128-gcm --results r");
        assert!(same_run(
            &speed,
            "custom",
            &args("cipherbench speed --cipher aes-128-gcm --results=r --quiet"),
            "custom"
        ));
        assert!(!same_run(
            &speed,
            "custom",
            &args("cipherbench run --results r"),
            "quick"
        ));
        assert!(!same_run(
            &speed,
            "custom",
            &args("cipherbench speed --results r"),
            "custom"
        ));
        // A rehearsal is resumed by a rehearsal only.
        let rehearsal = args("cipherbench run --preset full --rehearse --results r");
        let full = args("cipherbench run --preset full --results r");
        assert!(same_run(&rehearsal, "full", &rehearsal, "full"));
        assert!(!same_run(&rehearsal, "full", &full, "full"));
        assert!(!same_run(&full, "full", &rehearsal, "full"));
        let run = args("cipherbench run --preset tiny --results r");
        assert!(same_run(
            &run,
            "tiny",
            &args("cipherbench run --preset tiny --target-gbps 5 --results r"),
            "tiny"
        ));
        assert!(!same_run(
            &run,
            "tiny",
            &args("cipherbench run --results r"),
            "quick"
        ));
    }

    #[test]
    fn resume_advice_is_the_recorded_command_with_its_directory() {
        let mut record: RunRecord = serde_json::from_str(include_str!(
            "../../cipherbench-report/tests/fixtures/run-quick.json"
        ))
        .unwrap();
        record.command_line = args("/usr/bin/cipherbench speed --cipher aes-128-gcm -q");
        assert_eq!(
            resume_command(&record, Path::new("my res")),
            "cipherbench speed --cipher aes-128-gcm --results 'my res'"
        );
        record.command_line = args("cipherbench run --results x");
        record.preset = "quick".into();
        assert_eq!(
            resume_command(&record, Path::new("x")),
            "cipherbench run --preset quick --results x"
        );
        record.command_line = args("cipherbench run --preset full --rehearse --results x");
        record.preset = "full".into();
        record.rehearsal = true;
        assert_eq!(
            resume_command(&record, Path::new("x")),
            "cipherbench run --preset full --rehearse --results x"
        );
    }

    use cipherbench_model::env::LibraryUnderTest;

    fn library(name: &str, version: &str) -> LibraryUnderTest {
        LibraryUnderTest {
            name: name.into(),
            tag: None,
            version: version.into(),
            libcrypto: None,
            libssl: None,
            cli: None,
        }
    }

    #[test]
    fn a_run_resumes_only_with_the_libraries_it_measured() {
        let dir = std::env::temp_dir().join(format!("cb-resume-lib-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        // A recorded machine (the report crate's fixture): this module is below the probe.
        let fixture = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../cipherbench-report/tests/fixtures/run-quick.json"
        ))
        .unwrap();
        let mut env = RunRecord::from_json(&fixture).unwrap().environment;
        env.libraries = vec![library("/opt/ossl", "OpenSSL 3.6.3 9 Jun 2026")];
        let (mut session, resumed) =
            Session::open(env.clone(), "tiny", dir.clone(), Progress::new(true)).unwrap();
        assert!(!resumed);
        session.record.interrupted = true;
        session.save().unwrap();
        drop(session);
        let mut system = env.clone();
        system.libraries = vec![library("system", "OpenSSL 3.0.19 27 Jan 2026")];
        let err = Session::open(system, "tiny", dir.clone(), Progress::new(true))
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("OpenSSL /opt/ossl (OpenSSL 3.6.3 9 Jun 2026), not system"),
            "{err}"
        );
        let (_, resumed) = Session::open(env, "tiny", dir.clone(), Progress::new(true)).unwrap();
        assert!(resumed);
        fs::remove_dir_all(&dir).unwrap();
    }
}
