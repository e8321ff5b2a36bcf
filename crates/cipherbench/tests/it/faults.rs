//! Fault injection (issue 14): SIGKILL, Ctrl-C twice and three times, SIGTERM,
//! SIGHUP, a closed stdout/stderr and two runs on one results directory, at chosen
//! and at random points of each layer (speed, file with gpg's agent, seal from a pipe,
//! tls sweep and ramp, tunnel) and of `run`, which drives them all and resumes.
//! Each test asserts what a careful operator expects afterwards: no
//! process of the run (every descendant seen while it ran, the keepers included,
//! and anything working under the test's directory), no namespace named after it,
//! no port it listened on, nothing in its own `TMPDIR`, a results directory that
//! reads under the schema and that the advised command resumes, and the exit code.
//!
//! Every check is scoped to what the test itself started (its `TMPDIR`, its pids,
//! namespaces carrying its pid), since other runs may share this machine. A random
//! point is drawn from the clock and printed; `CB_FAULT_SEED=N` replays it.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use cipherbench_model::RunRecord;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_cipherbench");
/// How long a stopped run may take to end, and its processes to go.
const PROMPT: Duration = Duration::from_secs(15);
/// How long a run may take to reach the point a test stops it at. Generous: the
/// suite shares the machine with builds and other tests, and only a run that
/// never gets there waits this long.
const LAYER_START: Duration = Duration::from_secs(600);

/// A test's own directory: `tmp/` is the runs' `TMPDIR`, `res/` a results directory.
struct Case(PathBuf);

impl Case {
    fn new(name: &str) -> Case {
        let dir = std::env::temp_dir().join(format!("cb-fault-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("tmp")).unwrap();
        Case(dir)
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new(BIN);
        c.env("TMPDIR", self.0.join("tmp"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c
    }

    fn res(&self) -> PathBuf {
        self.0.join("res")
    }

    fn tmp_entries(&self) -> Vec<String> {
        names_in(&self.0.join("tmp"))
    }
}

impl Drop for Case {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `/proc/PID/stat` after the command name: (state, ppid, start time).
fn stat(pid: u32) -> Option<(String, u32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    Some((f[0].to_string(), f[1].parse().ok()?, f[19].parse().ok()?))
}

fn alive(pid: u32, start: u64) -> bool {
    stat(pid).is_some_and(|(state, _, s)| state != "Z" && s == start)
}

/// Every process descended from `root`, as (pid, start time).
fn descendants(root: u32) -> Vec<(u32, u64)> {
    let mut parent = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() {
            if let Some((_, ppid, start)) = stat(pid) {
                parent.push((pid, ppid, start));
            }
        }
    }
    let mut found: Vec<(u32, u64)> = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for &(pid, ppid, start) in &parent {
            if ppid == p && !found.iter().any(|f| f.0 == pid) {
                found.push((pid, start));
                frontier.push(pid);
            }
        }
    }
    found
}

/// A run under test: the child, and every descendant seen while it ran (polled
/// every few milliseconds, so nginx's workers and the keepers are caught).
struct Run {
    child: Child,
    seen: Arc<Mutex<BTreeSet<(u32, u64)>>>,
    stop: Arc<AtomicBool>,
}

impl Run {
    fn spawn(cmd: &mut Command) -> Run {
        let child = cmd.spawn().unwrap();
        let root = child.id();
        let seen = Arc::new(Mutex::new(BTreeSet::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (Arc::clone(&seen), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !st.load(Ordering::SeqCst) {
                let now = descendants(root);
                s.lock().unwrap().extend(now);
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Run { child, seen, stop }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill with the pid of our own child, not yet reaped.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    /// SIGKILL; the run ends within [`PROMPT`] and every process of it goes
    /// ([`assert_no_process_left`]). Its status and stderr.
    fn sigkill(&mut self, case: &Case, what: &str) -> (ExitStatus, String) {
        self.signal(libc::SIGKILL);
        let ended = self.end(what);
        assert_no_process_left(case, self, what);
        ended
    }

    /// Ctrl-C twice, a tenth of a second apart; the run exits 130 within
    /// [`PROMPT`]. Its stderr.
    fn ctrl_c_twice(&mut self, what: &str) -> String {
        self.signal(libc::SIGINT);
        std::thread::sleep(Duration::from_millis(100));
        self.signal(libc::SIGINT);
        let (status, err) = self.end(what);
        assert_eq!(status.code(), Some(130), "{what}: {err}");
        err
    }

    fn seen(&self) -> Vec<(u32, u64)> {
        self.seen.lock().unwrap().iter().copied().collect()
    }

    /// Waits for a stopped run to end within [`PROMPT`]; its status and stderr.
    fn end(&mut self, what: &str) -> (ExitStatus, String) {
        self.end_within(what, PROMPT)
    }

    /// Waits for the run to end within `within`; its status and stderr.
    fn end_within(&mut self, what: &str, within: Duration) -> (ExitStatus, String) {
        let deadline = Instant::now() + within;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "{what}: still running");
            std::thread::sleep(Duration::from_millis(10));
        };
        self.stop.store(true, Ordering::SeqCst);
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        (status, err)
    }

    /// Waits until `ready` holds (or fails the test after `within`).
    fn wait_for(&mut self, what: &str, within: Duration, ready: impl Fn() -> bool) {
        let deadline = Instant::now() + within;
        while !ready() {
            if let Some(status) = self.child.try_wait().unwrap() {
                let mut err = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                panic!("{what}: the run ended first ({status}): {err}");
            }
            assert!(Instant::now() < deadline, "{what}: not within {within:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Processes whose working directory or an argument is under `dir`.
fn processes_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if entry.file_name().to_string_lossy().parse::<u32>().is_err() {
            continue;
        }
        let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let in_cwd = std::fs::read_link(entry.path().join("cwd")).is_ok_and(|c| c.starts_with(dir));
        let in_args = String::from_utf8_lossy(&cmd).contains(&*dir.to_string_lossy())
            && !String::from_utf8_lossy(&cmd).contains("cargo");
        if in_cwd || in_args {
            out.push(format!(
                "{} {}",
                entry.file_name().to_string_lossy(),
                String::from_utf8_lossy(&cmd).replace('\0', " ")
            ));
        }
    }
    out
}

/// Network namespaces named after `pid` (the tunnel's `cbtun-<pid>-...`).
fn namespaces_of(pid: u32) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output();
    let text = out
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("cbtun-{pid}-")))
        .map(str::to_string)
        .collect()
}

/// No process of the run (within [`PROMPT`]) and nothing working under the
/// case's directory. What a SIGKILLed run cannot remove itself (files,
/// namespaces) is left for the caller to check, or for the next run to sweep.
fn assert_no_process_left(case: &Case, run: &Run, how: &str) {
    let seen = run.seen();
    let deadline = Instant::now() + PROMPT;
    loop {
        let living: Vec<_> = seen.iter().filter(|(p, s)| alive(*p, *s)).collect();
        let under = processes_under(&case.0);
        if living.is_empty() && under.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{how}: left running: {living:?} {under:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// [`assert_no_process_left`], and `TMPDIR` empty, no namespace named after the
/// run, none of `ports` listening.
fn assert_nothing_left(case: &Case, run: &Run, ports: &[u16], how: &str) {
    assert_no_process_left(case, run, how);
    assert_eq!(case.tmp_entries(), Vec::<String>::new(), "{how}: TMPDIR");
    assert_eq!(namespaces_of(run.pid()), Vec::<String>::new(), "{how}");
    assert_ports_closed(ports, how);
}

fn assert_ports_closed(ports: &[u16], how: &str) {
    for port in ports {
        let open = std::net::TcpStream::connect(("127.0.0.1", *port)).is_ok();
        assert!(!open, "{how}: port {port} still listening");
    }
}

/// The scratch directories of file layers in a results directory.
fn file_scratch(res: &Path) -> Vec<String> {
    names_in(res)
        .into_iter()
        .filter(|n| n.starts_with("cipherbench-file-"))
        .collect()
}

/// The lines of `err` saying what the sweep at start removed.
/// The notes of what a run removed at its start, but for those that name only the
/// temporary files of saves a kill cut short: a SIGKILL at a random instant may land
/// in a save, and the next run removing its `.tmp` (and saying so) is right, not
/// what these tests count.
fn removal_notes(err: &str) -> Vec<&str> {
    const PREFIX: &str = "removed what an earlier, killed cipherbench left: ";
    err.lines()
        .filter(|l| {
            l.split_once(PREFIX).is_some_and(|(_, what)| {
                !what
                    .split(", ")
                    .all(|item| item.starts_with("temporary file of a killed write "))
            })
        })
        .collect()
}

/// A results directory's entries, which must be results only: `run.json`, the CSV
/// files, `summary.md` and `report.html`; no lock file, write test, temporary file
/// or scratch directory.
fn assert_only_results(res: &Path, how: &str) -> Vec<String> {
    let names = names_in(res);
    let other: Vec<&String> = names.iter().filter(|n| !is_result(n)).collect();
    assert!(
        other.is_empty(),
        "{how}: {} holds more than results: {other:?} (all: {names:?})",
        res.display()
    );
    assert!(names.iter().any(|n| n == "run.json"), "{how}: {names:?}");
    names
}

/// A results file's name: `run.json`, a CSV file, `summary.md`, `report.html`.
fn is_result(name: &str) -> bool {
    matches!(name, "run.json" | "summary.md" | "report.html")
        || (name.ends_with(".csv") && !name.starts_with('.'))
}

use crate::schema::record;

/// A point in `lo..hi` drawn from the clock (or `CB_FAULT_SEED`), printed.
fn random_point(what: &str, lo: Duration, hi: Duration) -> Duration {
    let seed: u64 = std::env::var("CB_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos() as u64
        });
    let span = (hi - lo).as_millis() as u64;
    let at = lo + Duration::from_millis(seed.wrapping_mul(2654435761) % span.max(1));
    eprintln!("{what}: fault at {at:?} (CB_FAULT_SEED={seed})");
    at
}

fn one_line(err: &str) -> &str {
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty(), "no message");
    lines[lines.len() - 1]
}

/// `args`, then `--results res`.
fn with_results(args: &[&str], res: &Path) -> Vec<String> {
    let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    v.push("--results".into());
    v.push(res.display().to_string());
    v
}

/// A short speed run: three ciphers, two variants, one size, into `--results`.
fn speed_args(res: &Path) -> Vec<String> {
    with_results(
        &[
            "speed",
            "--cipher",
            "aes-128-gcm,aes-256-gcm,chacha20-poly1305",
            "--sizes",
            "1KiB",
            "--threads",
            "1",
            "--direction",
            "encrypt",
            "--sample-ms",
            "150",
            "--samples",
            "3",
        ],
        res,
    )
}

fn has_speed_point(res: &Path) -> bool {
    std::fs::read_to_string(res.join("run.json"))
        .ok()
        .and_then(|t| RunRecord::from_json(&t).ok())
        .and_then(|r| r.speed)
        .is_some_and(|s| !s.points.is_empty())
}

#[test]
fn speed_sigkill_at_a_random_point_leaves_no_process_and_the_same_command_resumes() {
    let _turn = crate::turn!();
    let case = Case::new("speed-kill");
    let res = case.res();
    let mut run = Run::spawn(case.cmd().args(speed_args(&res)));
    let pid = run.pid();
    run.wait_for("speed's lock", LAYER_START, || {
        cipherbench::results::lock_holder(&res) == Some(pid)
    });
    std::thread::sleep(random_point(
        "speed SIGKILL",
        Duration::from_millis(100),
        Duration::from_millis(2500),
    ));
    let (status, _) = run.sigkill(&case, "speed SIGKILL");
    assert_eq!(status.code(), None, "killed by a signal");
    // No lock file, whenever the kill came: only results, or a save it cut short.
    let killed_save = format!(".tmp-{}", run.pid());
    let stray: Vec<String> = names_in(&res)
        .into_iter()
        .filter(|n| !is_result(n) && !n.ends_with(&killed_save))
        .collect();
    assert_eq!(stray, Vec::<String>::new(), "after a SIGKILL");
    // A write killed between its temporary file and the rename leaves this name
    // (write_atomic's); made here, since hitting that moment by timing is luck.
    let stale = res.join(format!(".speed.csv.tmp-{}", run.pid()));
    std::fs::write(&stale, "half a file").unwrap();
    let had_points = has_speed_point(&res);
    let out = case.cmd().args(speed_args(&res)).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("removed what an earlier, killed cipherbench left")
            && err.contains(".speed.csv.tmp-"),
        "{err}"
    );
    if had_points {
        assert!(err.contains("resuming the unfinished run"), "{err}");
    }
    assert!(!stale.exists());
    let r = record(&res);
    assert!(r.finished_at.is_some() && !r.interrupted);
    assert_eq!(r.speed.unwrap().points.len(), 6);
    assert!(res.join("report.html").exists());
    assert_only_results(&res, "resumed after a SIGKILL");
    assert_eq!(case.tmp_entries(), Vec::<String>::new());
}

#[test]
fn speed_ctrl_c_twice_exits_130_and_leaves_nothing() {
    let _turn = crate::turn!();
    let case = Case::new("speed-int2");
    let res = case.res();
    let mut run = Run::spawn(case.cmd().args(speed_args(&res)));
    run.wait_for("a saved point", LAYER_START, || has_speed_point(&res));
    let err = run.ctrl_c_twice("speed SIGINT twice");
    assert!(!err.contains("panicked"), "{err}");
    assert_nothing_left(&case, &run, &[], "speed SIGINT twice");
    let r = record(&res);
    assert!(r.interrupted);
    assert!(res.join("report.html").exists());
}

#[test]
fn speed_three_quick_signals_exit_130_at_once_and_say_so() {
    let _turn = crate::turn!();
    let case = Case::new("speed-int3");
    let res = case.res();
    let mut run = Run::spawn(case.cmd().args(speed_args(&res)));
    run.wait_for("a saved point", LAYER_START, || has_speed_point(&res));
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGINT] {
        run.signal(signal);
    }
    let (status, err) = run.end("three signals");
    assert_eq!(status.code(), Some(130), "{err}");
    // The third signal exits from the handler, unless the run had finished its
    // cleanup before it arrived.
    assert!(
        err.contains("exiting at once (third signal)") || err.contains("interrupted"),
        "{err}"
    );
    assert_no_process_left(&case, &run, "three signals");
    // Whatever it saved reads under the schema and the same command resumes it.
    if res.join("run.json").exists() {
        record(&res);
        let out = case.cmd().args(speed_args(&res)).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!record(&res).interrupted);
    }
    assert_eq!(case.tmp_entries(), Vec::<String>::new());
}

#[test]
fn ctrl_c_with_stdout_and_stderr_into_a_pipe_that_closed_exits_130_without_a_panic() {
    let _turn = crate::turn!();
    // `cipherbench ... 2>&1 | tee log`, and the same Ctrl-C ends tee first.
    let case = Case::new("speed-pipe");
    let res = case.res();
    let (mut reader, writer) = std::io::pipe().unwrap();
    let mut run = Run::spawn(
        case.cmd()
            .args(speed_args(&res))
            .stdout(writer.try_clone().unwrap())
            .stderr(writer),
    );
    // Some progress has been written: read it, then close the pipe.
    let mut first = [0u8; 16];
    reader.read_exact(&mut first).unwrap();
    run.wait_for("a saved point", LAYER_START, || has_speed_point(&res));
    drop(reader);
    run.signal(libc::SIGINT);
    let (status, _) = run.end("closed pipe");
    assert_eq!(status.code(), Some(130), "not 101 (a panic)");
    assert_nothing_left(&case, &run, &[], "closed pipe");
    assert!(record(&res).interrupted);
    // A command that writes its result to a closed stdout: the text is lost, not
    // the exit status.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let status = case.cmd().arg("probe").stdout(writer).status().unwrap();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn two_runs_on_one_results_directory_the_second_is_refused_naming_the_first() {
    let _turn = crate::turn!();
    let case = Case::new("speed-two");
    let res = case.res();
    // The first run lasts about 6 s of its own time (6 points of 6 samples), so
    // that it still holds the directory when the second, started after it took the
    // lock, gets there on a loaded machine.
    let mut long = speed_args(&res);
    let at = long.iter().position(|a| a == "--samples").unwrap();
    long[at + 1] = "6".into();
    let mut first = Run::spawn(case.cmd().args(&long));
    let pid = first.pid();
    first.wait_for("the first run's lock", LAYER_START, || {
        cipherbench::results::lock_holder(&res) == Some(pid)
    });
    let mut other = speed_args(&res);
    other[2] = "aes-256-cbc".into();
    let out = case.cmd().args(&other).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let line = one_line(&err);
    assert_eq!(
        err.lines().filter(|l| !l.trim().is_empty()).count(),
        1,
        "{err}"
    );
    // Named by its pid and command line, read from /proc (the lock is on the
    // directory: no file in it says who holds it).
    assert!(
        line.contains(&format!("in use by cipherbench pid {} (`", first.pid()))
            && line.contains(" speed --cipher aes-128-gcm"),
        "{line}"
    );
    // Not stopped: it ends by itself, when it has measured its points.
    let (status, err) = first.end_within("the first run", LAYER_START);
    assert!(status.success(), "{err}");
    // The finished run's directory holds its results and nothing else, and a run
    // refused there, a re-render and a cleanup leave it so.
    let finished = assert_only_results(&res, "a finished run");
    assert_eq!(
        finished,
        ["report.html", "run.json", "speed.csv", "summary.md"],
        "a finished run"
    );
    let out = case.cmd().args(&other).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        one_line(&err).contains("already holds a finished run"),
        "{err}"
    );
    assert_eq!(names_in(&res), finished, "a run refused on a finished run");
    for command in [&["report"][..], &["cleanup"][..]] {
        let out = case.cmd().args(command).arg(&res).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{command:?}: {err}");
        assert_eq!(names_in(&res), finished, "{command:?}");
    }
    let r = record(&res);
    let ciphers: BTreeSet<String> = r
        .speed
        .unwrap()
        .points
        .iter()
        .map(|p| p.cipher.clone())
        .collect();
    assert_eq!(ciphers.len(), 3, "the first run's ciphers are all there");
    assert!(!ciphers.contains("aes-256-cbc"));
}

#[test]
fn sighup_stops_a_run_as_ctrl_c_does_unless_ignored_as_under_nohup() {
    let _turn = crate::turn!();
    let case = Case::new("speed-hup");
    let res = case.res();
    let mut run = Run::spawn(case.cmd().args(speed_args(&res)));
    run.wait_for("a saved point", LAYER_START, || has_speed_point(&res));
    run.signal(libc::SIGHUP);
    let (status, err) = run.end("speed SIGHUP");
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(
        one_line(&err).contains("interrupted by SIGHUP"),
        "a SIGHUP says so: {err}"
    );
    assert_nothing_left(&case, &run, &[], "speed SIGHUP");
    assert!(record(&res).interrupted);
    assert_only_results(&res, "after a SIGHUP");
    // Under nohup (SIGHUP ignored when it starts) the run goes on to its end.
    let res = case.0.join("res-nohup");
    let mut cmd = case.cmd();
    cmd.args(speed_args(&res));
    // SAFETY: signal() is async-signal-safe; only the child's disposition changes.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            Ok(())
        });
    }
    let mut run = Run::spawn(&mut cmd);
    run.wait_for("a saved point", LAYER_START, || has_speed_point(&res));
    run.signal(libc::SIGHUP);
    let (status, err) = run.end_within("speed under nohup", LAYER_START);
    assert!(status.success(), "{err}");
    assert!(!record(&res).interrupted);
}

#[test]
fn after_an_interrupted_speed_the_advised_resume_command_works() {
    let _turn = crate::turn!();
    let case = Case::new("speed-advice");
    let res = case.res();
    let mut run = Run::spawn(case.cmd().args(speed_args(&res)));
    run.wait_for("a saved point", LAYER_START, || has_speed_point(&res));
    run.signal(libc::SIGINT);
    let (status, _) = run.end("speed SIGINT");
    assert_eq!(status.code(), Some(130));
    let interrupted = assert_only_results(&res, "an interrupted run");
    let out = case
        .cmd()
        .args(["run", "--preset", "tiny", "--results"])
        .arg(&res)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let line = one_line(&err);
    let advice = line
        .split('`')
        .nth(1)
        .unwrap_or_else(|| panic!("no command in {line}"));
    assert!(advice.starts_with("cipherbench speed "), "{advice}");
    assert_eq!(names_in(&res), interrupted, "a refused run");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("exec {BIN} {}", &advice["cipherbench ".len()..]))
        .env("TMPDIR", case.0.join("tmp"))
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{advice}: {err}");
    assert!(err.contains("resuming the unfinished run"), "{err}");
    let r = record(&res);
    assert!(!r.interrupted && r.speed.unwrap().points.len() == 6);
    assert_only_results(&res, "a resumed run");
}

#[test]
fn a_file_run_killed_mid_measurement_leaves_its_scratch_only_until_it_resumes() {
    let _turn = crate::turn!();
    let case = Case::new("file-kill");
    let args = |res: &Path| {
        with_results(
            &[
                "file",
                "--size",
                "8MiB",
                "--tools",
                "cp,openssl-aes-256-ctr",
                "--variants",
                "accel",
                "--cache",
                "warm",
                "--repetitions",
                "4",
            ],
            res,
        )
    };
    // The run is short, and on a fast machine it may finish before the kill point:
    // then it is measured again into a fresh directory with the point drawn from a
    // shorter span, so that the kill always lands in a live measurement.
    let mut latest = Duration::from_millis(1500);
    let res = loop {
        let res = case.0.join(format!("res-{}", latest.as_millis()));
        let mut run = Run::spawn(case.cmd().args(args(&res)));
        run.wait_for("the scratch directory", LAYER_START, || {
            !file_scratch(&res).is_empty()
        });
        std::thread::sleep(random_point(
            "file SIGKILL",
            Duration::from_millis(50),
            latest,
        ));
        let (status, err) = run.sigkill(&case, "file SIGKILL");
        if status.signal() == Some(libc::SIGKILL) {
            break res;
        }
        assert!(
            status.success(),
            "the file run failed before the kill: {err}"
        );
        assert!(
            latest > Duration::from_millis(100),
            "the file run always finished within 50 ms of its scratch directory"
        );
        latest /= 2;
    };
    let scratch = || !file_scratch(&res).is_empty();
    let out = case.cmd().args(args(&res)).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        !scratch(),
        "scratch left after the resumed run: {:?}",
        names_in(&res)
    );
    if err.contains("resuming") || err.contains("removed what") {
        assert!(err.contains("file-layer scratch directory"), "{err}");
    }
    let r = record(&res);
    assert!(r.finished_at.is_some() && !r.interrupted);
    assert_eq!(case.tmp_entries(), Vec::<String>::new());
}

#[test]
fn seal_from_a_pipe_killed_by_sigkill_leaves_no_file_and_no_temporary() {
    let _turn = crate::turn!();
    let case = Case::new("seal-kill");
    let key = case.0.join("key");
    let out = case
        .cmd()
        .args(["seal", "--gen-key"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut run = Run::spawn(
        case.cmd()
            .args(["seal", "-k"])
            .arg(&key)
            .args(["-", "out.cbs"])
            .current_dir(&case.0)
            .stdin(Stdio::piped()),
    );
    let mut stdin = run.child.stdin.take().unwrap();
    stdin.write_all(&vec![7u8; 8 << 20]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    run.signal(libc::SIGKILL);
    run.end("seal SIGKILL");
    drop(stdin);
    // The output is an unnamed file until committed: nothing has a name.
    let left: Vec<String> = names_in(&case.0)
        .into_iter()
        .filter(|n| n != "key" && n != "tmp")
        .collect();
    assert_eq!(left, Vec::<String>::new());
    assert_eq!(case.tmp_entries(), Vec::<String>::new());
}

// ---- tls: nginx master and workers, its workspace with the private key ----

fn nginx_possible() -> bool {
    let found = Command::new("nginx")
        .arg("-v")
        .stderr(Stdio::null())
        .status()
        .is_ok()
        || Path::new("/usr/sbin/nginx").exists();
    if !found {
        eprintln!("skipping: nginx is not installed (scripts/install-deps.sh test)");
    }
    found
}

fn sweep_args(res: &Path) -> Vec<String> {
    with_results(
        &[
            "tls",
            "sweep",
            "--suites",
            "AES128-GCM-SHA256,AES128-SHA",
            "--sizes",
            "64KiB,128KiB",
            "--variants",
            "accel",
            "--window",
            "400ms",
            "--probe",
            "200ms",
            "--warmup",
            "0s",
            "--max-concurrency",
            "2",
        ],
        res,
    )
}

/// The ports nginx listens on, from the configs in the case's workspaces.
fn nginx_ports(case: &Case) -> Vec<u16> {
    let mut ports = Vec::new();
    let root = case.0.join("tmp");
    for top in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        for ws in std::fs::read_dir(top.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            for f in std::fs::read_dir(ws.path()).into_iter().flatten().flatten() {
                let text = std::fs::read_to_string(f.path()).unwrap_or_default();
                for l in text.lines() {
                    if let Some(rest) = l.trim().strip_prefix("listen 127.0.0.1:") {
                        if let Ok(p) = rest
                            .split(|c: char| !c.is_ascii_digit())
                            .next()
                            .unwrap_or("")
                            .parse()
                        {
                            ports.push(p);
                        }
                    }
                }
            }
        }
    }
    ports
}

/// Waits until nginx (a master and at least one worker) works in the workspace:
/// within [`LAYER_START`] (a `run` gets there after two layers).
fn wait_for_nginx(run: &mut Run, case: &Case) -> Vec<u16> {
    let dir = case.0.join("tmp");
    run.wait_for("nginx", LAYER_START, || {
        processes_under(&dir)
            .iter()
            .filter(|p| p.contains("nginx"))
            .count()
            >= 2
    });
    nginx_ports(case)
}

#[test]
fn tls_sweep_sigkill_takes_nginx_workers_along_and_the_next_run_removes_the_workspace() {
    let _turn = crate::turn!();
    if !nginx_possible() {
        return;
    }
    let case = Case::new("tls-kill");
    let res = case.res();
    let mut run = Run::spawn(case.cmd().args(sweep_args(&res)));
    let ports = wait_for_nginx(&mut run, &case);
    std::thread::sleep(random_point(
        "tls SIGKILL",
        Duration::from_millis(0),
        Duration::from_millis(800),
    ));
    run.sigkill(&case, "tls SIGKILL");
    assert_ports_closed(&ports, "tls SIGKILL");
    // What the kernel cannot remove: the workspace, named after the dead run.
    let root = names_in(&case.0.join("tmp"));
    assert_eq!(root.len(), 1, "{root:?}");
    let left = names_in(&case.0.join("tmp").join(&root[0]));
    assert!(
        left.len() == 1 && left[0].starts_with(&format!("tls-{}-", run.pid())),
        "{left:?}"
    );
    // The next run removes it, in one line, and resumes.
    let out = case.cmd().args(sweep_args(&res)).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let notes = removal_notes(&err);
    assert_eq!(notes.len(), 1, "{err}");
    assert!(
        notes[0].contains("nginx workspace") && notes[0].contains(&left[0]),
        "{}",
        notes[0]
    );
    assert_eq!(case.tmp_entries(), Vec::<String>::new());
    assert!(!record(&res).interrupted);
}

#[test]
fn tls_sweep_killed_then_cipherbench_cleanup_removes_the_workspace() {
    let _turn = crate::turn!();
    if !nginx_possible() {
        return;
    }
    let case = Case::new("tls-cleanup");
    let res = case.res();
    let mut run = Run::spawn(case.cmd().args(sweep_args(&res)));
    wait_for_nginx(&mut run, &case);
    run.sigkill(&case, "tls SIGKILL");
    // A held-by-nobody results directory is cleaned too (its lock is free).
    let out = case
        .cmd()
        .arg("cleanup")
        .arg(&res)
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("removed nginx workspace") && said.contains(&format!("tls-{}-", run.pid())),
        "{said}"
    );
    assert_eq!(case.tmp_entries(), Vec::<String>::new());
    let again = case
        .cmd()
        .arg("cleanup")
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing to clean up"));
    // What the killed run saved is still valid and resumable.
    if res.join("run.json").exists() {
        assert!(record(&res).finished_at.is_none());
    }
}

#[test]
fn tls_sweep_ctrl_c_twice_a_tenth_of_a_second_apart_exits_130_and_leaves_nothing() {
    let _turn = crate::turn!();
    if !nginx_possible() {
        return;
    }
    let case = Case::new("tls-int2");
    let res = case.res();
    let mut run = Run::spawn(case.cmd().args(sweep_args(&res)));
    let ports = wait_for_nginx(&mut run, &case);
    run.ctrl_c_twice("tls SIGINT twice");
    assert_nothing_left(&case, &run, &ports, "tls SIGINT twice");
    if res.join("run.json").exists() {
        assert!(record(&res).interrupted);
    }
}

#[test]
fn tls_ramp_sigterm_at_a_random_point_exits_130_and_leaves_nothing() {
    let _turn = crate::turn!();
    if !nginx_possible() {
        return;
    }
    let case = Case::new("tls-ramp");
    let res = case.res();
    let mut run = Run::spawn(
        case.cmd()
            .args([
                "tls",
                "ramp",
                "--suites",
                "AES128-GCM-SHA256",
                "--sizes",
                "1KiB",
                "--variants",
                "accel,noaesni",
                "--rate",
                "40",
                "--duration",
                "2s",
                "--results",
            ])
            .arg(&res),
    );
    let ports = wait_for_nginx(&mut run, &case);
    std::thread::sleep(random_point(
        "ramp SIGTERM",
        Duration::from_millis(0),
        Duration::from_millis(1500),
    ));
    run.signal(libc::SIGTERM);
    let (status, err) = run.end("ramp SIGTERM");
    // 0 only if the ramp had finished when the signal came.
    assert!(
        matches!(status.code(), Some(130) | Some(0)),
        "{status}: {err}"
    );
    if status.code() == Some(130) {
        assert!(err.contains("SIGTERM"), "{err}");
    }
    assert_nothing_left(&case, &run, &ports, "ramp SIGTERM");
    if res.join("run.json").exists() {
        record(&res);
    }
}

// ---- tunnel: namespaces, links, qdiscs, gateways, iperf3 (root) ----

fn tunnel_possible() -> bool {
    if !cipherbench::host::is_root() {
        eprintln!("skipping: the tunnel needs root");
        return false;
    }
    if let Err(e) = cipherbench::tunnel::check_prerequisites() {
        eprintln!("skipping: {e:#}");
        return false;
    }
    true
}

fn tunnel_args() -> Vec<&'static str> {
    vec![
        "tunnel",
        "--preset",
        "tiny",
        "--transforms",
        "null",
        "--protocols",
        "tcp",
        "--seconds",
        "5",
        "--no-save",
    ]
}

fn wait_for_namespaces(run: &mut Run) {
    let pid = run.pid();
    let seen = Arc::clone(&run.seen);
    run.wait_for("the tunnel's gateways", LAYER_START, || {
        namespaces_of(pid).len() == 2
            && seen.lock().unwrap().iter().any(|(p, _)| {
                std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains("iperf3"))
            })
    });
}

#[test]
fn tunnel_sigkill_then_another_tunnel_removes_the_stale_namespaces_in_one_line() {
    let _turn = crate::turn!();
    if !tunnel_possible() {
        return;
    }
    let case = Case::new("tun-kill");
    let mut run = Run::spawn(case.cmd().args(tunnel_args()));
    wait_for_namespaces(&mut run);
    // Gateways and iperf3 die with it (their keepers); the namespaces cannot.
    run.sigkill(&case, "tunnel SIGKILL");
    let stale = namespaces_of(run.pid());
    assert_eq!(stale.len(), 2, "{stale:?}");
    let mut args = tunnel_args();
    args[8] = "1";
    let out = case.cmd().args(&args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let notes = removal_notes(&err);
    assert_eq!(notes.len(), 1, "{err}");
    for ns in &stale {
        assert!(notes[0].contains(ns.as_str()), "{}", notes[0]);
    }
    assert_eq!(namespaces_of(run.pid()), Vec::<String>::new());
    assert_eq!(case.tmp_entries(), Vec::<String>::new());
}

#[test]
fn tunnel_ctrl_c_twice_exits_130_and_leaves_no_namespace_or_process() {
    let _turn = crate::turn!();
    if !tunnel_possible() {
        return;
    }
    let case = Case::new("tun-int2");
    let mut run = Run::spawn(case.cmd().args(tunnel_args()));
    wait_for_namespaces(&mut run);
    run.ctrl_c_twice("tunnel SIGINT twice");
    assert_nothing_left(&case, &run, &[], "tunnel SIGINT twice");
}

#[test]
fn tunnel_sigterm_exits_130_says_so_and_leaves_no_namespace_or_process() {
    let _turn = crate::turn!();
    if !tunnel_possible() {
        return;
    }
    let case = Case::new("tun-term");
    let mut run = Run::spawn(case.cmd().args(tunnel_args()));
    wait_for_namespaces(&mut run);
    run.signal(libc::SIGTERM);
    let (status, err) = run.end("tunnel SIGTERM");
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("SIGTERM"), "{err}");
    assert_nothing_left(&case, &run, &[], "tunnel SIGTERM");
}

// ---- file tools that start helpers: gpg and its agent ----

fn gpg_possible() -> bool {
    let found = ["gpg", "gpg-agent", "gpgconf", "gpg-connect-agent"]
        .iter()
        .all(|p| {
            Command::new(p)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        });
    if !found {
        eprintln!("skipping: gpg is not installed (scripts/install-deps.sh)");
    }
    found
}

/// A file run of `tools` (gpg among them), long enough to be caught with gpg's
/// agent running.
fn gpg_file_args(res: &Path, tools: &str) -> Vec<String> {
    with_results(
        &[
            "file",
            "--size",
            "4MiB",
            "--tools",
            tools,
            "--cache",
            "warm",
            "--repetitions",
            "8",
        ],
        res,
    )
}

/// Waits until gpg's agent runs on the run's private GnuPG home.
fn wait_for_gpg_agent(run: &mut Run, case: &Case) {
    let dir = case.0.clone();
    run.wait_for("gpg's agent", LAYER_START, || {
        processes_under(&dir)
            .iter()
            .any(|p| p.contains("gpg-agent"))
    });
}

#[test]
fn a_file_run_of_every_tool_killed_by_sigkill_takes_gpgs_agent_and_every_tool_along() {
    let _turn = crate::turn!();
    if !gpg_possible() {
        return;
    }
    let case = Case::new("gpg-kill");
    let res = case.res();
    // Every tool the host has (a missing one is skipped with a note), so the
    // point drawn may fall in any of them; gpg's agent starts before the first.
    let tools = "cp,openssl-aes-256-cbc,openssl-aes-256-ctr,age,gpg,cipherbench";
    let mut run = Run::spawn(case.cmd().args(gpg_file_args(&res, tools)));
    wait_for_gpg_agent(&mut run, &case);
    std::thread::sleep(random_point(
        "file SIGKILL",
        Duration::from_millis(0),
        Duration::from_millis(4000),
    ));
    // Without a next run: the agent is gone with the run, not left to a sweep.
    run.sigkill(&case, "gpg SIGKILL");
}

#[test]
fn a_file_run_of_gpg_ctrl_c_exits_130_and_stops_gpgs_agent() {
    let _turn = crate::turn!();
    if !gpg_possible() {
        return;
    }
    let case = Case::new("gpg-int");
    let res = case.res();
    let mut run = Run::spawn(case.cmd().args(gpg_file_args(&res, "gpg")));
    wait_for_gpg_agent(&mut run, &case);
    run.signal(libc::SIGINT);
    let (status, err) = run.end("gpg SIGINT");
    assert_eq!(status.code(), Some(130), "{err}");
    assert_nothing_left(&case, &run, &[], "gpg SIGINT");
    assert_eq!(
        file_scratch(&res),
        Vec::<String>::new(),
        "the scratch with the GnuPG home"
    );
}

// ---- run: every layer in turn into one results directory ----

fn run_args(res: &Path) -> Vec<String> {
    with_results(&["run", "--preset", "tiny"], res)
}

/// What run.json holds of the layers a killed or interrupted run completed, as
/// JSON text (compared before and after a resume: kept, not measured again).
fn completed(res: &Path) -> (Vec<String>, String, String) {
    let r = record(res);
    let speed = serde_json::to_string(&r.speed).unwrap();
    let file = serde_json::to_string(&r.file).unwrap();
    (r.completed_layers, speed, file)
}

#[test]
fn run_sigkilled_in_the_file_then_the_tunnel_layer_leaves_no_process_and_resumes_keeping_what_it_measured(
) {
    let _turn = crate::turn!();
    if !tunnel_possible() || !nginx_possible() {
        return;
    }
    let case = Case::new("run-kill");
    let res = case.res();

    // 1. Killed in the file layer, its scratch (the input file) in the results
    // directory.
    let mut run = Run::spawn(case.cmd().args(run_args(&res)));
    run.wait_for("the file layer", LAYER_START, || {
        !file_scratch(&res).is_empty()
    });
    std::thread::sleep(random_point(
        "run SIGKILL in file",
        Duration::from_millis(0),
        Duration::from_millis(300),
    ));
    run.sigkill(&case, "run SIGKILL in file");
    let (layers, speed, _) = completed(&res);
    assert_eq!(layers[0], "speed", "saved before the kill: {layers:?}");
    let scratch = file_scratch(&res);

    // 2. The same command resumes; killed again, in the tunnel layer.
    let mut run = Run::spawn(case.cmd().args(run_args(&res)));
    let pid = run.pid();
    run.wait_for("the tunnel layer", LAYER_START, || {
        namespaces_of(pid).len() == 2
    });
    std::thread::sleep(random_point(
        "run SIGKILL in tunnel",
        Duration::from_millis(0),
        Duration::from_millis(1500),
    ));
    let (_, err) = run.sigkill(&case, "run SIGKILL in tunnel");
    assert!(err.contains("resuming the unfinished run"), "{err}");
    assert!(
        err.contains("speed: measured by the run being resumed, skipped"),
        "{err}"
    );
    if !scratch.is_empty() {
        let notes = removal_notes(&err);
        assert!(
            notes.len() == 1 && notes[0].contains("file-layer scratch directory"),
            "{err}"
        );
    }
    let (layers, speed_again, file) = completed(&res);
    assert_eq!(layers, ["speed", "file", "tls"], "saved before the kill");
    assert_eq!(speed_again, speed, "the speed layer was kept as measured");
    let stale = namespaces_of(pid);

    // 3. Resumed again: it removes the stale namespaces in one line, keeps three
    // layers as measured, measures the tunnel, and leaves nothing.
    let out = case.cmd().args(run_args(&res)).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("resuming the unfinished run"), "{err}");
    for layer in ["speed", "file", "tls"] {
        assert!(
            err.contains(&format!(
                "{layer}: measured by the run being resumed, skipped"
            )),
            "{err}"
        );
    }
    let notes = removal_notes(&err);
    assert_eq!(notes.len(), 1, "{err}");
    for ns in &stale {
        assert!(notes[0].contains(ns.as_str()), "{}", notes[0]);
    }
    let after = completed(&res);
    assert_eq!(after.0, ["speed", "file", "tls", "tunnel"]);
    assert!(
        after.1 == speed && after.2 == file,
        "the kept layers changed"
    );
    let r = record(&res);
    assert!(r.finished_at.is_some() && !r.interrupted && r.tunnel.is_some());
    assert_eq!(namespaces_of(pid), Vec::<String>::new());
    assert_eq!(case.tmp_entries(), Vec::<String>::new());
    assert_eq!(file_scratch(&res), Vec::<String>::new());
}

#[test]
fn run_ctrl_c_twice_in_the_tls_layer_exits_130_keeps_what_it_measured_and_leaves_nothing() {
    let _turn = crate::turn!();
    if !nginx_possible() {
        return;
    }
    let case = Case::new("run-int2");
    let res = case.res();
    let mut run = Run::spawn(case.cmd().args(run_args(&res)));
    let ports = wait_for_nginx(&mut run, &case);
    let err = run.ctrl_c_twice("run SIGINT twice");
    assert!(!err.contains("panicked"), "{err}");
    assert_nothing_left(&case, &run, &ports, "run SIGINT twice");
    let r = record(&res);
    assert!(r.interrupted);
    assert_eq!(r.completed_layers, ["speed", "file"]);
    assert!(r.speed.is_some_and(|s| !s.points.is_empty()));
    assert!(r.file.is_some());
    assert!(res.join("report.html").exists());
    assert_eq!(file_scratch(&res), Vec::<String>::new());
}
