//! External programs (nginx, iperf3, openssl, ip, tc, tshark, our own workers) go
//! through here, so that every one of them is started the same careful way:
//!
//! - arguments as a vector, never a shell string;
//! - its own process group, so Ctrl-C reaches cipherbench (which stops things in
//!   order) and not the child directly, and so a stop reaches the child's children
//!   too (nginx's workers);
//! - `PR_SET_PDEATHSIG`, so a child does not outlive a cipherbench that was killed
//!   with SIGKILL. Linux sends it when the *thread* that spawned the child exits:
//!   spawn a long-lived child from the thread that owns it for its whole life;
//! - stderr drained on a thread (a full pipe would block the child) and its tail
//!   kept for error messages;
//! - stopped and reaped on drop: SIGTERM to the group, then SIGKILL after a grace
//!   period.
//!
//! Readiness is waited for with [`wait_until`] and a deadline, never a sleep.
//! [`Child::wait_with_usage`] waits for a child to exit and returns its CPU time and
//! peak memory (`wait4`), for measurements that say where the time went.

use anyhow::{anyhow, bail, Context, Result};
use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Lines of stderr kept for error messages.
const STDERR_TAIL_LINES: usize = 20;
/// Time a child gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// The OpenSSL a child is started under, when it is not the system's (see
/// `crate::library`): the library's directory goes first on `LD_LIBRARY_PATH`, so the
/// loader finds its `libcrypto.so.3` and `libssl.so.3` before the system's, and
/// `openssl` runs as the build's own command line tool where it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loader {
    /// The directory holding `libcrypto.so.3` and `libssl.so.3`.
    pub lib_dir: std::path::PathBuf,
    /// The build's `bin/openssl`, run in place of `openssl` on PATH.
    pub openssl: Option<std::path::PathBuf>,
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
}

impl Spawn {
    /// A program with no arguments yet.
    pub fn new(program: impl AsRef<OsStr>) -> Spawn {
        Spawn {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            stdin: false,
            stdout: false,
        }
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
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Spawn {
        self.env
            .push((key.as_ref().to_owned(), Some(value.as_ref().to_owned())));
        self
    }

    /// Removes an environment variable.
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Spawn {
        self.env.push((key.as_ref().to_owned(), None));
        self
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
    pub fn loader(mut self, loader: Option<&Loader>) -> Spawn {
        let Some(loader) = loader else {
            return self;
        };
        let mut path = loader.lib_dir.clone().into_os_string();
        if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|v| !v.is_empty()) {
            path.push(":");
            path.push(old);
        }
        if let (Some(cli), true) = (&loader.openssl, self.program == "openssl") {
            self.program = cli.clone().into_os_string();
        }
        self.env("LD_LIBRARY_PATH", path)
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

    /// Delivers stdout line by line (see [`Child::stdout_lines`]); otherwise stdout
    /// is discarded.
    pub fn piped_stdout(mut self) -> Spawn {
        self.stdout = true;
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
        // SAFETY: prctl is async-signal-safe and touches only the new process.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd
    }

    /// Starts the program.
    pub fn start(self) -> Result<Child> {
        let mut cmd = self.command();
        cmd.stdin(if self.stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        cmd.stdout(if self.stdout {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        cmd.stderr(Stdio::piped());
        let name = self.name();
        let mut child = cmd.spawn().map_err(|e| spawn_error(&self, e))?;
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(stderr) = child.stderr.take() {
            let tail = Arc::clone(&stderr_tail);
            thread::spawn(move || {
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
            pid: child.id() as libc::pid_t,
            name,
            inner: Some(child),
            stderr_tail,
            stdout_lines,
        })
    }

    /// Runs the program to completion with a deadline and captures its output.
    pub fn output(self, timeout: Duration) -> Result<Output> {
        let name = self.name();
        let mut cmd = self.command();
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| spawn_error(&self, e))?;
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
                kill_group(child.id() as libc::pid_t, libc::SIGKILL);
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

fn spawn_error(spawn: &Spawn, e: std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::NotFound {
        anyhow!(
            "{} is not installed (or not on PATH); `make run` or `make test` installs what cipherbench needs",
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
    pid: libc::pid_t,
    name: String,
    inner: Option<std::process::Child>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
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
    /// Process id (also the process group id).
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

    /// The last lines the child wrote to stderr, joined with " | ".
    pub fn stderr_tail(&self) -> String {
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
            Some(c) => Ok(c.try_wait()?),
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
        if self.inner.is_none() {
            bail!("{} was already stopped", self.name);
        }
        let pid = self.pid;
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let _ = tx.send(wait4_blocking(pid));
        });
        let deadline = Instant::now() + timeout;
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(Ok((status, usage))) => {
                    // Reaped here, so std must not wait for it again; stragglers left in
                    // its process group get the same treatment as in `stop`.
                    self.inner = None;
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
    /// after a grace period. Idempotent.
    pub fn stop(&mut self) {
        let Some(mut child) = self.inner.take() else {
            return;
        };
        if let Ok(Some(_)) = child.try_wait() {
            // Exited already; stragglers in its group still get the signal.
            kill_group(self.pid, libc::SIGKILL);
            return;
        }
        kill_group(self.pid, libc::SIGTERM);
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                kill_group(self.pid, libc::SIGKILL);
                return;
            }
            thread::sleep(Duration::from_millis(10));
        }
        kill_group(self.pid, libc::SIGKILL);
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
    fn a_loader_puts_its_directory_first_and_swaps_the_openssl_cli() {
        let loader = Loader {
            lib_dir: "/opt/ossl/lib".into(),
            openssl: Some("/opt/ossl/bin/openssl".into()),
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
        // The system's: nothing changes.
        let plain = Spawn::new("openssl").loader(None);
        assert_eq!(plain.display(), ["openssl"]);
        assert!(plain.env.is_empty());
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
