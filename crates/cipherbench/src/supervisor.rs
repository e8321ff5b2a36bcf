//! External programs (nginx, iperf3, openssl, ip, tc, tshark, our own workers) go
//! through here, so that every one of them is started the same careful way:
//!
//! - arguments as a vector, never a shell string;
//! - its own process group, so Ctrl-C reaches cipherbench (which stops things in
//!   order) and not the child directly, and so a stop reaches the child's children
//!   too (nginx's workers);
//! - a **keeper** between us and it, so that nothing the program starts outlives
//!   cipherbench, however cipherbench ends (SIGKILL included). The keeper is our
//!   own binary in a hidden mode (`cipherbench __keep`, [`keeper_main`]): a child
//!   subreaper (`PR_SET_CHILD_SUBREAPER`) with a parent-death signal
//!   (`PR_SET_PDEATHSIG`). The kernel re-parents to it every descendant of the
//!   program whose parent dies (nginx's workers when the master goes, a daemon
//!   that double-forks and calls `setsid`), and signals it when cipherbench dies;
//!   it then SIGKILLs every descendant it has until none is left, and exits. When
//!   the program ends by itself, it does the same to any straggler and exits with
//!   the program's status (or dies of its signal), so callers see the program's
//!   status. The program also has `PR_SET_PDEATHSIG` (SIGKILL) on the keeper. The
//!   keeper sleeps in one `sigwaitinfo` meanwhile: no CPU, no wake-ups.
//!   `PR_SET_PDEATHSIG` fires when the *thread* that spawned the child exits:
//!   spawn a long-lived child from the thread that owns it for its whole life;
//! - [`Spawn::direct`] skips the keeper for a program that is timed from start to
//!   exit with its `wait4` figures (the file layer's tools): nothing may sit between
//!   us and it. Such a program must not fork; it has `PR_SET_PDEATHSIG` itself;
//! - stderr drained on a thread (a full pipe would block the child) and its tail
//!   kept for error messages;
//! - stopped and reaped on drop: SIGTERM to the group, then SIGKILL after a grace
//!   period, or SIGKILL at once once the user asked to hurry (a second Ctrl-C).
//!
//! Without a keeper executable ([`use_keeper`], called by the binary's `main`;
//! tests that use the library may call it with the built binary), children start
//! directly, with `PR_SET_PDEATHSIG` only.
//!
//! Readiness is waited for with [`wait_until`] and a deadline, never a sleep.
//! [`Child::wait_with_usage`] waits for a child to exit and returns its CPU time and
//! peak memory (`wait4`), for measurements that say where the time went.

use crate::interrupt;
use anyhow::{anyhow, bail, Context, Result};
use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

/// Lines of stderr kept for error messages.
const STDERR_TAIL_LINES: usize = 20;
/// How long, once a child has exited, its stderr tail waits for the last lines
/// still in the pipe (the draining thread may not have read them yet).
const STDERR_SETTLE: Duration = Duration::from_secs(2);
/// Time a child gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(3);
/// Time a keeper gets to reap and exit once its program was killed.
const KEEPER_GRACE: Duration = Duration::from_secs(2);
/// The hidden command that runs a keeper (see the module's documentation).
pub const KEEPER_COMMAND: &str = "__keep";
/// The descriptor on which a keeper reports the program's pid, or why it could not
/// start it.
const REPORT_FD: libc::c_int = 3;

static KEEPER: OnceLock<PathBuf> = OnceLock::new();

/// Starts every later child (except [`Spawn::direct`] ones) under a keeper run from
/// `exe`, which must be the cipherbench binary. The binary passes `/proc/self/exe`:
/// the very file it runs from, even if a rebuild replaced it on disk meanwhile.
pub fn use_keeper(exe: impl Into<PathBuf>) {
    let _ = KEEPER.set(exe.into());
}

/// Set in a cipherbench started again under a library (`crate::library::run_under`):
/// the `LD_LIBRARY_PATH` it was first started with (empty: none), which a child
/// started under the system's library gets back.
pub const OUTER_LD_LIBRARY_PATH: &str = "CIPHERBENCH_OUTER_LD_LIBRARY_PATH";

/// The OpenSSL a child is started under, when it is not the system's (see
/// `crate::library`): the library's directory goes first on `LD_LIBRARY_PATH`, so the
/// loader finds its `libcrypto.so.N` and `libssl.so.N` before the system's, `openssl`
/// runs as the build's own command line tool where it has one, and cipherbench's own
/// children run as the cipherbench built against it where one is needed (OpenSSL 4:
/// a binary linked with `libcrypto.so.3` cannot load `libcrypto.so.4`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loader {
    /// The directory holding `libcrypto.so.N` and `libssl.so.N`.
    pub lib_dir: std::path::PathBuf,
    /// The build's `bin/openssl`, run in place of `openssl` on PATH.
    pub openssl: Option<std::path::PathBuf>,
    /// A cipherbench built against this library (`scripts/build-against.sh`), run in
    /// place of this executable; None: this one, which loads the library itself.
    pub cipherbench: Option<std::path::PathBuf>,
    /// An nginx built against this library (`scripts/build-nginx.sh`), run where the
    /// nginx asked for cannot load it (`crate::library::Library::nginx_for`).
    pub nginx: Option<std::path::PathBuf>,
}

impl Loader {
    /// `LD_LIBRARY_PATH` for a program under this library: its directory first, then
    /// what this cipherbench was first started with ([`OUTER_LD_LIBRARY_PATH`], else
    /// its own).
    pub fn library_path(&self) -> OsString {
        let mut path = self.lib_dir.clone().into_os_string();
        let old =
            std::env::var_os(OUTER_LD_LIBRARY_PATH).or_else(|| std::env::var_os("LD_LIBRARY_PATH"));
        if let Some(old) = old.filter(|v| !v.is_empty()) {
            path.push(":");
            path.push(old);
        }
        path
    }
}

/// Whether `program` names this very executable (as `std::env::current_exe` gives
/// it, or `/proc/self/exe`).
fn is_this_executable(program: &OsStr) -> bool {
    let path = Path::new(program);
    if path == Path::new("/proc/self/exe") {
        return true;
    }
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    std::env::current_exe()
        .ok()
        .and_then(|me| canonical(&me))
        .is_some_and(|me| path.is_absolute() && canonical(path) == Some(me))
}

/// How to start a program.
#[derive(Debug, Clone)]
pub struct Spawn {
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, Option<OsString>)>,
    cwd: Option<std::path::PathBuf>,
    stdin: bool,
    stdout: bool,
    direct: bool,
    cpu: Option<usize>,
}

impl Spawn {
    /// A program with no arguments yet.
    /// In a cipherbench started again under a library, the child starts from the
    /// `LD_LIBRARY_PATH` the first one had ([`OUTER_LD_LIBRARY_PATH`]): a program
    /// runs on the system's library unless [`Spawn::loader`] says otherwise.
    pub fn new(program: impl AsRef<OsStr>) -> Spawn {
        let spawn = Spawn {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            stdin: false,
            stdout: false,
            direct: false,
            cpu: None,
        };
        match std::env::var_os(OUTER_LD_LIBRARY_PATH) {
            Some(o) if o.is_empty() => spawn.env_remove("LD_LIBRARY_PATH"),
            Some(o) => spawn.env("LD_LIBRARY_PATH", o),
            None => spawn,
        }
    }

    /// Sets (`Some`) or removes (`None`) a variable, in place of what an earlier call
    /// said of it: the keeper applies its sets before its removals, so a key must be
    /// in one list only.
    fn put(mut self, key: &OsStr, value: Option<&OsStr>) -> Spawn {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_owned(), value.map(OsStr::to_owned)));
        self
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, args: I) -> Spawn
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets an environment variable.
    pub fn env(self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Spawn {
        self.put(key.as_ref(), Some(value.as_ref()))
    }

    /// Sets each of `vars` (a variant's `OPENSSL_CONF` and the like).
    pub fn envs<K: AsRef<OsStr>, V: AsRef<OsStr>>(
        mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Spawn {
        for (k, v) in vars {
            self = self.env(k, v);
        }
        self
    }

    /// Removes an environment variable.
    pub fn env_remove(self, key: impl AsRef<OsStr>) -> Spawn {
        self.put(key.as_ref(), None)
    }

    /// Sets `OPENSSL_ia32cap` to `mask`, or removes it for `None`: how an acceleration
    /// variant reaches a child.
    pub fn ia32cap(self, mask: Option<&str>) -> Spawn {
        match mask {
            Some(m) => self.env("OPENSSL_ia32cap", m),
            None => self.env_remove("OPENSSL_ia32cap"),
        }
    }

    /// Starts the program under a library (None: the system's, the environment
    /// left as it is): `LD_LIBRARY_PATH` gets the library's directory first (what it
    /// held in this process's environment follows), and a program named `openssl`
    /// becomes the library's own CLI when it has one.
    /// In a cipherbench started again under a library (see
    /// `crate::library::run_under`), what follows is the `LD_LIBRARY_PATH` it was
    /// first started with ([`OUTER_LD_LIBRARY_PATH`]), as for [`Spawn::new`].
    pub fn loader(mut self, loader: Option<&Loader>) -> Spawn {
        let Some(loader) = loader else {
            return self;
        };
        if let (Some(cli), true) = (&loader.openssl, self.program == "openssl") {
            self.program = cli.clone().into_os_string();
        }
        if let Some(own) = &loader.cipherbench {
            if is_this_executable(&self.program) {
                self.program = own.clone().into_os_string();
            }
        }
        self.env("LD_LIBRARY_PATH", loader.library_path())
    }

    /// The program to be started, as it stands.
    pub fn program(&self) -> &OsStr {
        &self.program
    }

    /// Working directory.
    pub fn cwd(mut self, dir: impl AsRef<Path>) -> Spawn {
        self.cwd = Some(dir.as_ref().to_owned());
        self
    }

    /// Gives the child a stdin pipe (see [`Child::stdin`]).
    pub fn piped_stdin(mut self) -> Spawn {
        self.stdin = true;
        self
    }

    /// Delivers stdout line by line (see [`Child::next_line`]); otherwise stdout
    /// is discarded.
    pub fn piped_stdout(mut self) -> Spawn {
        self.stdout = true;
        self
    }

    /// Runs the program on one CPU (where the process's cpuset allows it; the
    /// program runs unpinned where it does not, or with None): a figure compared
    /// with one measured on that CPU is then not moved by another CPU's neighbours.
    pub fn pinned(mut self, cpu: Option<usize>) -> Spawn {
        self.cpu = cpu;
        self
    }

    /// Starts the program with no keeper in between, for a program timed from start
    /// to exit with its own `wait4` figures. It must not fork: only the program
    /// itself dies with cipherbench (its `PR_SET_PDEATHSIG`).
    pub fn direct(mut self) -> Spawn {
        self.direct = true;
        self
    }

    /// The program name, for messages.
    pub fn name(&self) -> String {
        Path::new(&self.program)
            .file_name()
            .unwrap_or(self.program.as_os_str())
            .to_string_lossy()
            .into_owned()
    }

    /// The command as a person would type it (for results and messages).
    pub fn display(&self) -> Vec<String> {
        std::iter::once(&self.program)
            .chain(&self.args)
            .map(|s| s.to_string_lossy().into_owned())
            .collect()
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args);
        for (k, v) in &self.env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
        cmd.process_group(0);
        die_with_parent(&mut cmd);
        pin(&mut cmd, self.cpu);
        cmd
    }

    /// The keeper's command line: `__keep PARENT [--cwd DIR] [--set K V]...
    /// [--unset K]... -- PROGRAM ARGS...`. The keeper itself runs in our own
    /// environment; the program's changes are applied by it, to the program only.
    fn keeper_command(&self, keeper: &Path) -> Command {
        let mut cmd = Command::new(keeper);
        cmd.arg0("cipherbench-keeper")
            .arg(KEEPER_COMMAND)
            .arg(std::process::id().to_string());
        if let Some(dir) = &self.cwd {
            cmd.arg("--cwd").arg(dir);
        }
        for (k, v) in &self.env {
            match v {
                Some(v) => cmd.arg("--set").arg(k).arg(v),
                None => cmd.arg("--unset").arg(k),
            };
        }
        cmd.arg("--").arg(&self.program).args(&self.args);
        cmd.process_group(0);
        // The keeper's affinity is its program's: the keeper only waits.
        pin(&mut cmd, self.cpu);
        cmd
    }

    /// Starts the program (under a keeper unless [`Spawn::direct`] or none is
    /// configured) with the given standard streams.
    fn launch(&self, stdin: Stdio, stdout: Stdio, stderr: Stdio) -> Result<Launched> {
        let keeper = match KEEPER.get() {
            Some(k) if !self.direct => k,
            _ => {
                let mut cmd = self.command();
                cmd.stdin(stdin).stdout(stdout).stderr(stderr);
                let child = cmd.spawn().map_err(|e| spawn_error(self, e))?;
                return Ok(Launched {
                    pid: child.id() as libc::pid_t,
                    inner: child,
                    kept: false,
                });
            }
        };
        let (mut report, writer) = std::io::pipe().context("creating the keeper's pipe")?;
        let fd = writer.as_raw_fd();
        if fd <= 2 {
            bail!(
                "cannot start {}: standard descriptors are closed",
                self.name()
            );
        }
        let mut cmd = self.keeper_command(keeper);
        cmd.stdin(stdin).stdout(stdout).stderr(stderr);
        die_with_parent(&mut cmd);
        // SAFETY: dup2 and fcntl are async-signal-safe and change only the new
        // process's descriptor table: the report pipe's write end becomes its fd 3,
        // without close-on-exec (dup2 clears the flag; fcntl does when it is 3
        // already).
        unsafe {
            cmd.pre_exec(move || {
                let r = if fd == REPORT_FD {
                    libc::fcntl(fd, libc::F_SETFD, 0)
                } else {
                    libc::dup2(fd, REPORT_FD)
                };
                if r < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting the keeper of {}", self.name()))?;
        drop(writer);
        // The keeper writes one line and closes its end; only it holds one.
        let mut text = String::new();
        let _ = report.read_to_string(&mut text);
        match parse_report(&text) {
            Some(Ok(pid)) => Ok(Launched {
                inner: child,
                pid,
                kept: true,
            }),
            Some(Err(errno)) => {
                let _ = child.wait();
                Err(spawn_error(self, std::io::Error::from_raw_os_error(errno)))
            }
            None => {
                let _ = child.kill();
                let status = child.wait();
                bail!(
                    "the keeper of {} ended before starting it ({status:?})",
                    self.name()
                )
            }
        }
    }

    /// Starts the program.
    pub fn start(self) -> Result<Child> {
        let launched = self.launch(
            if self.stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            },
            if self.stdout {
                Stdio::piped()
            } else {
                Stdio::null()
            },
            Stdio::piped(),
        )?;
        let Launched {
            inner: mut child,
            pid,
            kept,
        } = launched;
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let mut stderr_closed = None;
        if let Some(stderr) = child.stderr.take() {
            let tail = Arc::clone(&stderr_tail);
            // Dropped by the thread at the pipe's end: the tail is then complete.
            let (closed, closing) = mpsc::channel::<()>();
            stderr_closed = Some(closing);
            thread::spawn(move || {
                let _closed = closed;
                drain_lines(stderr, |line| {
                    // A poisoned lock only means another drain thread panicked; keep going.
                    let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
                    if t.len() == STDERR_TAIL_LINES {
                        t.pop_front();
                    }
                    t.push_back(line);
                })
            });
        }
        let stdout_lines = child.stdout.take().map(|stdout| {
            let (tx, rx) = mpsc::channel();
            thread::spawn(move || {
                drain_lines(stdout, |line| {
                    let _ = tx.send(line);
                })
            });
            rx
        });
        Ok(Child {
            pid,
            kept,
            name: self.name(),
            inner: Some(child),
            stderr_tail,
            stderr_closed: Mutex::new(stderr_closed),
            exited: false,
            stdout_lines,
        })
    }

    /// Runs the program to completion with a deadline and captures its output.
    pub fn output(self, timeout: Duration) -> Result<Output> {
        let name = self.name();
        let Launched {
            inner: mut child,
            pid,
            kept: _,
        } = self.launch(Stdio::null(), Stdio::piped(), Stdio::piped())?;
        let mut stdout = child.stdout.take().context("stdout pipe")?;
        let mut stderr = child.stderr.take().context("stderr pipe")?;
        let out_thread = thread::spawn(move || {
            let mut v = Vec::new();
            let _ = stdout.read_to_end(&mut v);
            v
        });
        let err_thread = thread::spawn(move || {
            let mut v = Vec::new();
            let _ = stderr.read_to_end(&mut v);
            v
        });
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if Instant::now() >= deadline {
                // The program's group; a keeper then reaps it and exits.
                kill_group(pid, libc::SIGKILL);
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "{name} did not finish within {:.0?}; it was stopped",
                    timeout
                );
            }
            thread::sleep(Duration::from_millis(5));
        };
        Ok(Output {
            status,
            stdout: String::from_utf8_lossy(&out_thread.join().unwrap_or_default()).into_owned(),
            stderr: String::from_utf8_lossy(&err_thread.join().unwrap_or_default()).into_owned(),
        })
    }
}

/// A started program: the process we wait for (the keeper, or the program when it
/// runs directly) and the program's own pid.
struct Launched {
    inner: std::process::Child,
    pid: libc::pid_t,
    kept: bool,
}

/// In a child before it runs its program: `PR_SET_PDEATHSIG` (SIGKILL), and an
/// empty signal mask (std's fork path keeps the spawning thread's mask, and the
/// keeper, a gateway thread or a `seal` helper blocks stop signals: a program
/// started with them blocked would not stop on SIGTERM).
fn die_with_parent(cmd: &mut Command) {
    // SAFETY: prctl, sigemptyset and pthread_sigmask are async-signal-safe and
    // touch only the new process; the set lives on this stack frame.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            Ok(())
        });
    }
}

/// In a child before it runs its program: its affinity set to `cpu` alone, best
/// effort (a cpuset may forbid the CPU; the program then runs where it may).
fn pin(cmd: &mut Command, cpu: Option<usize>) {
    let Some(cpu) = cpu else {
        return;
    };
    // SAFETY: sched_setaffinity is a system call, async-signal-safe; the set is
    // plain data on this stack frame and CPU_SET bounds-checks the index.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            Ok(())
        });
    }
}

/// A keeper's report: `pid N` or `err ERRNO`.
fn parse_report(text: &str) -> Option<std::result::Result<libc::pid_t, i32>> {
    let line = text.lines().next()?;
    if let Some(pid) = line.strip_prefix("pid ") {
        return pid.trim().parse().ok().map(Ok);
    }
    line.strip_prefix("err ")?.trim().parse().ok().map(Err)
}

fn spawn_error(spawn: &Spawn, e: std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::NotFound {
        anyhow!(
            "{} is not installed (or not on PATH): `cipherbench doctor` gives the command that installs it here",
            spawn.name()
        )
    } else {
        anyhow!("cannot start {}: {e}", spawn.name())
    }
}

fn drain_lines(stream: impl Read, mut each: impl FnMut(String)) {
    let reader = BufReader::new(stream);
    for line in reader.split(b'\n') {
        match line {
            Ok(bytes) => each(String::from_utf8_lossy(&bytes).trim_end().to_string()),
            Err(_) => break,
        }
    }
}

/// Sends `signal` to one process (not its group): for ending a dead run's
/// leftovers, which the caller identified by what they run in (`lifetime.rs`).
pub fn kill_process(pid: u32, signal: libc::c_int) {
    // SAFETY: kill has no memory-safety preconditions; a positive pid names one
    // process.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
}

fn kill_group(pid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: kill has no memory-safety preconditions; a negative pid names the
    // process group we created for this child (its pid), so nothing else is hit.
    unsafe {
        libc::kill(-pid, signal);
    }
}

/// A finished program's output.
#[derive(Debug)]
pub struct Output {
    /// Exit status.
    pub status: ExitStatus,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Output {
    /// The output if the program succeeded, otherwise an error quoting its stderr.
    pub fn success(self, what: &str) -> Result<Output> {
        if self.status.success() {
            Ok(self)
        } else {
            bail!(
                "{what} failed ({}): {}",
                self.status,
                last_lines(&self.stderr, 3)
            )
        }
    }
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// What a finished child used, from `wait4(2)`'s `rusage` (its own use plus that of
/// the children it waited for).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResourceUsage {
    /// User-mode CPU time.
    pub user: Duration,
    /// Kernel-mode CPU time.
    pub system: Duration,
    /// Peak resident set size, bytes.
    pub max_rss_bytes: u64,
}

/// A running child, stopped and reaped when dropped.
pub struct Child {
    /// The program's pid, and its process group's id.
    pid: libc::pid_t,
    /// Whether a keeper runs it (then `inner` is the keeper).
    kept: bool,
    name: String,
    inner: Option<std::process::Child>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    /// Closed when the stderr pipe has been read to its end (taken once waited for).
    stderr_closed: Mutex<Option<Receiver<()>>>,
    /// Whether it was seen to exit.
    exited: bool,
    stdout_lines: Option<Receiver<String>>,
}

/// What waiting for a line produced.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A line of stdout.
    Text(String),
    /// Nothing within the timeout.
    Timeout,
    /// Stdout closed (the child exited or closed it).
    Closed,
}

impl Child {
    /// The program's process id (also its process group's id; a keeper, if any, is
    /// its parent).
    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// Program name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Writes all of `data` to the child's stdin and closes it.
    pub fn send_stdin(&mut self, data: &[u8]) -> Result<()> {
        let child = self.inner.as_mut().context("child already stopped")?;
        let mut stdin = child
            .stdin
            .take()
            .context("child was not started with piped stdin")?;
        stdin
            .write_all(data)
            .with_context(|| format!("writing to {}", self.name))?;
        Ok(())
    }

    /// Takes the child's stdin, to write to it over its life (a conversation, as
    /// with an agent over ssh); None if it was not piped or was already taken.
    pub fn take_stdin(&mut self) -> Option<std::process::ChildStdin> {
        self.inner.as_mut().and_then(|c| c.stdin.take())
    }

    /// The next stdout line, waiting at most `timeout`.
    pub fn next_line(&self, timeout: Duration) -> Line {
        let Some(rx) = &self.stdout_lines else {
            return Line::Closed;
        };
        match rx.recv_timeout(timeout) {
            Ok(line) => Line::Text(line),
            Err(RecvTimeoutError::Timeout) => Line::Timeout,
            Err(RecvTimeoutError::Disconnected) => Line::Closed,
        }
    }

    /// The last lines the child wrote to stderr, joined with " | ". Once it was
    /// seen to exit, with its last words: the pipe is read to its end first (for at
    /// most [`STDERR_SETTLE`], once), so an error quoting why a program ended does
    /// not miss the reason on a busy machine.
    pub fn stderr_tail(&self) -> String {
        if self.exited {
            let mut closed = self.stderr_closed.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(rx) = closed.take() {
                let _ = rx.recv_timeout(STDERR_SETTLE);
            }
        }
        let t = self.stderr_tail.lock().unwrap_or_else(|p| p.into_inner());
        t.iter()
            .filter(|l| !l.trim().is_empty())
            .cloned()
            .collect::<Vec<_>>()
            .join(" | ")
    }

    /// The exit status if the child has exited.
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        match self.inner.as_mut() {
            Some(c) => {
                let status = c.try_wait()?;
                self.exited |= status.is_some();
                Ok(status)
            }
            None => Ok(None),
        }
    }

    /// Waits for the child to exit on its own, at most `timeout`; stops it if it does
    /// not.
    pub fn wait(&mut self, timeout: Duration) -> Result<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                self.stop();
                bail!(
                    "{} did not exit within {timeout:.0?}; it was stopped",
                    self.name
                );
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits for the child to exit, at most `timeout`, and returns its exit status and
    /// resource usage. A blocking `wait4` on a helper thread returns the moment the
    /// child exits (no polling delay in a timing); `stop_early` is asked every 50 ms
    /// and, when it says so, the child is stopped and an error returned.
    pub fn wait_with_usage(
        &mut self,
        timeout: Duration,
        stop_early: impl Fn() -> bool,
    ) -> Result<(ExitStatus, ResourceUsage)> {
        let Some(inner) = self.inner.as_ref() else {
            bail!("{} was already stopped", self.name);
        };
        // Our own child: the keeper, or the program itself when direct (a keeper's
        // figures include its own small share).
        let waited = inner.id() as libc::pid_t;
        let pid = self.pid;
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let _ = tx.send(wait4_blocking(waited));
        });
        let deadline = Instant::now() + timeout;
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(Ok((status, usage))) => {
                    // Reaped here, so std must not wait for it again; stragglers left in
                    // its process group get the same treatment as in `stop`.
                    self.inner = None;
                    self.exited = true;
                    kill_group(pid, libc::SIGKILL);
                    return Ok((status, usage));
                }
                Ok(Err(e)) => bail!("waiting for {}: {e}", self.name),
                Err(RecvTimeoutError::Disconnected) => {
                    bail!("waiting for {}: the waiting thread ended", self.name)
                }
                Err(RecvTimeoutError::Timeout) => {
                    let late = Instant::now() >= deadline;
                    if late || stop_early() {
                        // SIGKILL makes the pending wait4 return; then nothing is left
                        // for `stop` to do.
                        kill_group(pid, libc::SIGKILL);
                        let _ = rx.recv_timeout(STOP_GRACE);
                        self.inner = None;
                        if late {
                            bail!(
                                "{} did not finish within {timeout:.0?}; it was stopped",
                                self.name
                            );
                        }
                        bail!("{} was stopped early", self.name);
                    }
                }
            }
        }
    }

    /// Sends a signal to the child's process group.
    pub fn signal(&self, signal: libc::c_int) {
        if self.inner.is_some() {
            kill_group(self.pid, signal);
        }
    }

    /// Stops the child and everything in its process group: SIGTERM, then SIGKILL
    /// after a grace period (at once when the user asked to hurry). A keeper then
    /// ends whatever else the program started, and exits. Idempotent.
    pub fn stop(&mut self) {
        let Some(mut child) = self.inner.take() else {
            return;
        };
        // Whatever follows, it has ended (or been given up on) when this returns.
        self.exited = true;
        if let Ok(Some(_)) = child.try_wait() {
            // Exited already; stragglers in its group still get the signal.
            kill_group(self.pid, libc::SIGKILL);
            return;
        }
        if !interrupt::hurry() {
            kill_group(self.pid, libc::SIGTERM);
            let deadline = Instant::now() + STOP_GRACE;
            while Instant::now() < deadline && !interrupt::hurry() {
                if let Ok(Some(_)) = child.try_wait() {
                    kill_group(self.pid, libc::SIGKILL);
                    return;
                }
                thread::sleep(Duration::from_millis(10));
            }
        }
        kill_group(self.pid, libc::SIGKILL);
        if self.kept {
            let deadline = Instant::now() + KEEPER_GRACE;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                thread::sleep(Duration::from_millis(5));
            }
            // A keeper that does not exit: its program's children (already
            // SIGKILLed with their group) cannot hold it, so end it too.
            let _ = child.kill();
        }
        let _ = child.wait();
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `wait4(pid, 0)`: blocks until the child exits, retrying on EINTR.
fn wait4_blocking(pid: libc::pid_t) -> std::io::Result<(ExitStatus, ResourceUsage)> {
    use std::os::unix::process::ExitStatusExt;
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: rusage is plain old data; zeroed is a valid value for wait4 to fill.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: pid is our own unreaped child; status and usage are valid for writes.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            let time = |t: libc::timeval| {
                Duration::from_secs(t.tv_sec.max(0) as u64)
                    + Duration::from_micros(t.tv_usec.max(0) as u64)
            };
            return Ok((
                ExitStatus::from_raw(status),
                ResourceUsage {
                    user: time(usage.ru_utime),
                    system: time(usage.ru_stime),
                    // Linux reports ru_maxrss in KiB.
                    max_rss_bytes: (usage.ru_maxrss.max(0) as u64) * 1024,
                },
            ));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The keeper (see the module's documentation), run as `cipherbench __keep PARENT
/// [--cwd DIR] [--set K V]... [--unset K]... -- PROGRAM ARGS...` by [`Spawn`]. It
/// reports the program's pid on fd 3 (or `err ERRNO` if it cannot start it), waits,
/// and exits with the program's status or dies of its signal, after every other
/// descendant is gone. If cipherbench dies first, it SIGKILLs all of them.
pub fn keeper_main(args: &[OsString]) -> std::process::ExitCode {
    match keep(args) {
        Ok(never) => match never {},
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "cipherbench keeper: {e:#}");
            std::process::ExitCode::from(127)
        }
    }
}

/// A keeper's command line.
#[derive(Debug, Default, PartialEq, Eq)]
struct KeeperArgs {
    parent: libc::pid_t,
    cwd: Option<OsString>,
    set: Vec<(OsString, OsString)>,
    unset: Vec<OsString>,
    program: OsString,
    args: Vec<OsString>,
}

fn parse_keeper_args(args: &[OsString]) -> Result<KeeperArgs> {
    let mut it = args.iter();
    let mut k = KeeperArgs {
        parent: it
            .next()
            .and_then(|p| p.to_str()?.parse().ok())
            .context("no parent pid")?,
        ..KeeperArgs::default()
    };
    let mut value = |what: &str| it_next(&mut it, what);
    loop {
        let a = value("a program")?;
        match a.to_str() {
            Some("--cwd") => k.cwd = Some(value("--cwd DIR")?),
            Some("--set") => {
                let key = value("--set KEY")?;
                k.set.push((key, value("--set KEY VALUE")?));
            }
            Some("--unset") => k.unset.push(value("--unset KEY")?),
            Some("--") => break,
            _ => bail!("unexpected argument {a:?}"),
        }
    }
    k.program = it_next(&mut it, "a program")?;
    k.args = it.cloned().collect();
    Ok(k)
}

fn it_next(it: &mut std::slice::Iter<'_, OsString>, what: &str) -> Result<OsString> {
    it.next()
        .cloned()
        .with_context(|| format!("expected {what}"))
}

/// The keeper waits for these: a child's end, and cipherbench's (its parent-death
/// signal).
const KEEPER_WAITS: [libc::c_int; 2] = [libc::SIGCHLD, libc::SIGUSR1];
/// And blocks these, so that neither a Ctrl-C nor a stray SIGTERM ends it before
/// its program (which starts with an empty mask: `die_with_parent`).
const KEEPER_BLOCKS: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

fn signal_set(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it before sigaddset.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in signals {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

fn keep(args: &[OsString]) -> Result<std::convert::Infallible> {
    let a = parse_keeper_args(args)?;
    let waits = signal_set(&KEEPER_WAITS);
    let blocks = signal_set(&[KEEPER_WAITS.as_slice(), KEEPER_BLOCKS.as_slice()].concat());
    // SAFETY: these calls change only this process (single-threaded here): its name,
    // its signal mask, its subreaper flag and parent-death signal, and the
    // close-on-exec flag of fd 3; the name is a NUL-terminated literal.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, c"cb-keeper".as_ptr());
        libc::pthread_sigmask(libc::SIG_BLOCK, &blocks, std::ptr::null_mut());
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) != 0 {
            bail!(
                "PR_SET_CHILD_SUBREAPER: {}",
                std::io::Error::last_os_error()
            );
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGUSR1) != 0 {
            bail!("PR_SET_PDEATHSIG: {}", std::io::Error::last_os_error());
        }
        if libc::getppid() != a.parent {
            // cipherbench died before we could watch it: start nothing.
            std::process::exit(137);
        }
        libc::fcntl(REPORT_FD, libc::F_SETFD, libc::FD_CLOEXEC);
    }
    // SAFETY: fd 3 is the report pipe's write end that `Spawn::launch` handed over,
    // open, and owned by nothing else in this process.
    let mut report = unsafe { std::fs::File::from_raw_fd(REPORT_FD) };
    let mut cmd = Command::new(&a.program);
    cmd.args(&a.args);
    for (k, v) in &a.set {
        cmd.env(k, v);
    }
    for k in &a.unset {
        cmd.env_remove(k);
    }
    if let Some(dir) = &a.cwd {
        cmd.current_dir(dir);
    }
    cmd.process_group(0);
    die_with_parent(&mut cmd);
    let program = match cmd.spawn() {
        Ok(c) => c.id() as libc::pid_t,
        Err(e) => {
            let _ = writeln!(report, "err {}", e.raw_os_error().unwrap_or(libc::ENOENT));
            std::process::exit(127);
        }
    };
    let _ = writeln!(report, "pid {program}");
    drop(report);
    // The program has the streams now: their pipes must close when it ends.
    detach_standard_streams();
    loop {
        let mut signal;
        loop {
            // SAFETY: `waits` is an initialised set; no siginfo is asked for.
            signal = unsafe { libc::sigwaitinfo(&waits, std::ptr::null_mut()) };
            if signal > 0 {
                break;
            }
        }
        // SAFETY: getppid has no preconditions.
        if signal == libc::SIGUSR1 || unsafe { libc::getppid() } != a.parent {
            kill_descendants();
            std::process::exit(137);
        }
        let mut ended = None;
        while let Some((pid, status)) = reap(libc::WNOHANG) {
            if pid == program {
                ended = Some(status);
            }
        }
        if let Some(status) = ended {
            kill_descendants();
            end_like(status);
        }
    }
}

/// `waitpid(-1)`: a reaped child and its raw status, or None (none ended yet with
/// WNOHANG, or no child left).
fn reap(flags: libc::c_int) -> Option<(libc::pid_t, libc::c_int)> {
    loop {
        let mut status = 0;
        // SAFETY: status is a live out-parameter.
        let pid = unsafe { libc::waitpid(-1, &mut status, flags) };
        if pid > 0 {
            return Some((pid, status));
        }
        if pid < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return None;
    }
}

/// SIGKILLs every child of this process until none is left. As a subreaper, the
/// keeper gets the children of each one it kills, so the loop reaches every
/// descendant.
fn kill_descendants() {
    loop {
        for pid in own_children() {
            // SAFETY: kill has no memory-safety preconditions; `pid` is our own
            // child (alive or not yet reaped), so it cannot have been reused.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        if reap(0).is_none() {
            return;
        }
    }
}

fn own_children() -> Vec<libc::pid_t> {
    let me = std::process::id();
    match std::fs::read_to_string(format!("/proc/{me}/task/{me}/children")) {
        Ok(text) => text
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect(),
        // A kernel without CONFIG_PROC_CHILDREN: the slow way.
        Err(_) => crate::host::children_of(me)
            .into_iter()
            .map(|p| p as libc::pid_t)
            .collect(),
    }
}

/// Points fds 0-2 at /dev/null.
fn detach_standard_streams() {
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for fd in 0..=2 {
            // SAFETY: dup2 onto the standard descriptors, which this process owns;
            // `null` stays open for the call.
            unsafe {
                libc::dup2(null.as_raw_fd(), fd);
            }
        }
    }
}

/// Exits as the program did: with its code, or by its signal (no core file).
fn end_like(status: libc::c_int) -> ! {
    if libc::WIFEXITED(status) {
        std::process::exit(libc::WEXITSTATUS(status));
    }
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        let set = signal_set(&[signal]);
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: these change only this process: no core file, the default action
        // for the signal, the signal unblocked, then sent to ourselves.
        unsafe {
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            libc::signal(signal, libc::SIG_DFL);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::raise(signal);
        }
        std::process::exit(128 + signal);
    }
    std::process::exit(1);
}

/// Polls `ready` until it returns true or the deadline passes. `what` names the
/// condition in the error ("nginx accepting TLS on 127.0.0.1:8443").
pub fn wait_until(
    what: &str,
    timeout: Duration,
    mut ready: impl FnMut() -> Result<bool>,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let mut last_error = None;
    loop {
        match ready() {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => last_error = Some(e),
        }
        if Instant::now() >= deadline {
            return Err(match last_error {
                Some(e) => e.context(format!("timed out after {timeout:.0?} waiting for {what}")),
                None => anyhow!("timed out after {timeout:.0?} waiting for {what}"),
            });
        }
        thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_output_and_exit_status() {
        let out = Spawn::new("sh")
            .args(["-c", "echo hello; echo oops >&2; exit 3"])
            .output(Duration::from_secs(5))
            .unwrap();
        assert_eq!(out.stdout.trim(), "hello");
        assert_eq!(out.stderr.trim(), "oops");
        assert_eq!(out.status.code(), Some(3));
        let err = out.success("the script").unwrap_err().to_string();
        assert!(err.contains("oops"), "{err}");
    }

    #[test]
    fn an_exited_child_s_stderr_tail_has_its_last_words() {
        // The words come after the child's exit (from a process it left, holding
        // the pipe): the tail waits for the pipe's end, not only for the exit.
        let mut child = Spawn::new("sh")
            .args(["-c", "(sleep 0.3; echo the reason >&2) & exit 3"])
            .start()
            .unwrap();
        let status = child.wait(Duration::from_secs(5)).unwrap();
        assert_eq!(status.code(), Some(3));
        assert_eq!(child.stderr_tail(), "the reason");
    }

    #[test]
    fn a_loader_puts_its_directory_first_and_swaps_the_openssl_cli() {
        let loader = Loader {
            lib_dir: "/opt/ossl/lib".into(),
            openssl: Some("/opt/ossl/bin/openssl".into()),
            cipherbench: Some("/opt/ossl/libexec/cipherbench/cipherbench".into()),
            nginx: None,
        };
        let out = Spawn::new("sh")
            .args(["-c", "echo \"$LD_LIBRARY_PATH\""])
            .loader(Some(&loader))
            .output(Duration::from_secs(5))
            .unwrap();
        assert!(
            out.stdout.trim().starts_with("/opt/ossl/lib"),
            "{}",
            out.stdout
        );
        let cli = Spawn::new("openssl")
            .args(["version"])
            .loader(Some(&loader));
        assert_eq!(cli.display(), ["/opt/ossl/bin/openssl", "version"]);
        // cipherbench's own children run as the build against the library.
        let me = std::env::current_exe().unwrap();
        let own = Spawn::new(&me).args(["__library"]).loader(Some(&loader));
        assert_eq!(
            own.display(),
            ["/opt/ossl/libexec/cipherbench/cipherbench", "__library"]
        );
        let other = Spawn::new("sh").loader(Some(&loader));
        assert_eq!(other.display(), ["sh"]);
        // The system's: nothing changes.
        assert_eq!(Spawn::new(&me).loader(None).program(), me.as_os_str());
        let plain = Spawn::new("openssl").loader(None);
        assert_eq!(plain.display(), ["openssl"]);
        assert!(plain.env.is_empty());
    }

    #[test]
    fn a_pinned_program_runs_on_its_cpu_alone_and_an_unpinned_one_where_we_may() {
        let allowed = |spawn: Spawn| {
            let out = spawn
                .args(["Cpus_allowed_list", "/proc/self/status"])
                .output(Duration::from_secs(5))
                .unwrap()
                .success("grep")
                .unwrap();
            out.stdout.split(':').nth(1).unwrap().trim().to_string()
        };
        let ours = crate::host::allowed_cpus();
        let last = *ours.last().unwrap();
        assert_eq!(
            allowed(Spawn::new("grep").pinned(Some(last))),
            last.to_string()
        );
        let unpinned = allowed(Spawn::new("grep").pinned(None));
        assert_eq!(
            cipherbench_model::topology::parse_cpu_list(&unpinned),
            Some(ours),
            "{unpinned}"
        );
    }

    #[test]
    fn missing_program_says_so() {
        let err = Spawn::new("cipherbench-no-such-program")
            .output(Duration::from_secs(1))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not installed"), "{err}");
    }

    #[test]
    fn output_deadline_stops_the_program() {
        let started = Instant::now();
        let err = Spawn::new("sleep")
            .args(["30"])
            .output(Duration::from_millis(200))
            .unwrap_err();
        assert!(err.to_string().contains("did not finish"));
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn drop_stops_the_whole_process_group() {
        // The shell starts a grandchild; stopping the child must take it down too.
        let child = Spawn::new("sh")
            .args(["-c", "sleep 60 & echo $!; wait"])
            .piped_stdout()
            .start()
            .unwrap();
        let Line::Text(grandchild) = child.next_line(Duration::from_secs(5)) else {
            panic!("no pid printed");
        };
        let grandchild: i32 = grandchild.trim().parse().unwrap();
        drop(child);
        // Gone, or a zombie waiting for init to reap it: either way not running.
        wait_until("the grandchild to stop", Duration::from_secs(5), || {
            Ok(
                match std::fs::read_to_string(format!("/proc/{grandchild}/stat")) {
                    Err(_) => true,
                    Ok(stat) => stat
                        .rsplit(')')
                        .next()
                        .unwrap_or("")
                        .trim_start()
                        .starts_with('Z'),
                },
            )
        })
        .unwrap();
    }

    #[test]
    fn keeps_the_stderr_tail_and_reads_lines() {
        let mut child = Spawn::new("sh")
            .args(["-c", "echo one; echo two; echo bad >&2; exit 1"])
            .piped_stdout()
            .start()
            .unwrap();
        assert_eq!(
            child.next_line(Duration::from_secs(5)),
            Line::Text("one".into())
        );
        assert_eq!(
            child.next_line(Duration::from_secs(5)),
            Line::Text("two".into())
        );
        assert_eq!(child.next_line(Duration::from_secs(5)), Line::Closed);
        let status = child.wait(Duration::from_secs(5)).unwrap();
        assert_eq!(status.code(), Some(1));
        wait_until("stderr drained", Duration::from_secs(5), || {
            Ok(child.stderr_tail().contains("bad"))
        })
        .unwrap();
    }

    #[test]
    fn wait_with_usage_reports_cpu_time_and_memory() {
        // A shell that burns a little CPU in user mode, then exits with 4.
        let mut child = Spawn::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exit 4",
            ])
            .start()
            .unwrap();
        let (status, usage) = child
            .wait_with_usage(Duration::from_secs(30), || false)
            .unwrap();
        assert_eq!(status.code(), Some(4));
        assert!(usage.user + usage.system > Duration::ZERO, "{usage:?}");
        assert!(usage.max_rss_bytes > 100 * 1024, "{usage:?}");
        drop(child); // nothing left to stop, and no error
    }

    #[test]
    fn wait_with_usage_stops_the_child_when_asked() {
        let started = Instant::now();
        let mut child = Spawn::new("sleep").args(["30"]).start().unwrap();
        let err = child
            .wait_with_usage(Duration::from_secs(60), || {
                started.elapsed() > Duration::from_millis(100)
            })
            .unwrap_err();
        assert!(err.to_string().contains("stopped early"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn wait_until_times_out_with_the_last_error() {
        let err =
            wait_until("a thing", Duration::from_millis(50), || bail!("not yet")).unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.contains("a thing") && text.contains("not yet"),
            "{text}"
        );
    }
}
