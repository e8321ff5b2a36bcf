//! The coordinator's side of `--agents` and `--peer`: launch `cipherbench agent` on
//! each named host with OpenSSH, check each one's version, measure its clock offset
//! and record its fingerprint; then the layers talk to them (`tls::agents` runs load
//! windows split over them, started together, and merges their reports exactly;
//! `tunnel::peer` brings up the peer's end of the tunnel).
//!
//! **Launch.** `ssh -T -o BatchMode=yes [-F FILE] HOST PATH agent` (without
//! `--agent-path`, the build `deploy` put there, else `cipherbench` on the host's
//! PATH: [`super::deploy::remote_launch`]): the user's own
//! ssh config, keys, agent and known_hosts; BatchMode means a host that would ask
//! for a password or a host-key confirmation fails at once, and no password is ever
//! on a command line. Every ssh runs under the supervisor's keeper, so a killed
//! coordinator closes the connections, and each agent ends when its stdin closes.
//!
//! **Clocks.** [`CLOCK_EXCHANGES`] request/answer pairs per agent; the one with the
//! shortest round trip gives the offset (agent's clock minus ours, taken at the
//! midpoint of the round trip; NTP's reasoning, RFC 5905 section 8), known to within
//! half that round trip. Both are recorded.
//!
//! **Start barrier.** The start is agreed ahead: now plus a lead long enough for
//! every request to arrive ([`lead`]). Each agent is told that instant on its own
//! clock (ours plus its offset) and sleeps until it. Each reports its window's
//! edges on its clock; converted back to ours, windows whose starts differ by more
//! than [`skew_tolerance`] fail the point, naming the late agent.
//!
//! **Failures.** An agent that dies (its ssh closes), answers with an error, does not
//! report by the deadline, starts late or saturates its generator fails the point
//! with its name ([`AgentFailure`]); nothing is dropped from a merge silently. A dead
//! agent stays dead: later points fail at once, naming it.
//!
//! **Slow or frozen.** An agent working on a request says so every
//! [`crate::agent::HEARTBEAT`]; waiting for its answer, the coordinator takes one
//! silent for [`SILENCE`] (no answer, no heartbeat) for frozen, and names it, while
//! one that keeps working on a busy host is given the request's whole limit.

use super::{Hello, Reply, Request};
use crate::supervisor::{Child, Line, Spawn};
use anyhow::{anyhow, bail, Context, Result};
use cipherbench_model::agents::AgentRecord;
use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Clock exchanges per agent.
pub const CLOCK_EXCHANGES: usize = 8;
/// How long an agent has to connect and say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an agent working on a request may say nothing at all: it says
/// `working` every [`crate::agent::HEARTBEAT`], so this silence means a frozen
/// agent, or a host that gives it no CPU at all, not merely a busy one.
pub const SILENCE: Duration = Duration::from_secs(30);

/// `--agents HOSTS`, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// Hosts as given (`user@host` or an ssh config alias), each once.
    pub hosts: Vec<String>,
    /// `--ssh-config FILE`: passed to ssh as `-F`.
    pub ssh_config: Option<PathBuf>,
    /// The agent program on the hosts (`--agent-path`). None: this build where
    /// `cipherbench deploy` put it, else `cipherbench` on the host's PATH
    /// ([`super::deploy::remote_launch`]).
    pub agent_path: Option<String>,
    /// `--agent-cpus`: the CPUs each agent's generator runs on (None: all it may use).
    pub cpus: Option<Vec<usize>>,
}

impl Launch {
    /// Parses `--agents`: a comma-separated list of `[user@]host`. Only names ssh
    /// takes as a destination are accepted (no option-like or shell-special text,
    /// since ssh hands the remote command to a shell).
    pub fn parse(
        hosts: &str,
        ssh_config: Option<PathBuf>,
        agent_path: Option<&str>,
        cpus: Option<&str>,
    ) -> Result<Launch> {
        let mut out: Vec<String> = Vec::new();
        for h in hosts.split(',') {
            let h = h.trim();
            let ok = !h.is_empty()
                && !h.starts_with('-')
                && h.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "@.-_:[]%".contains(c));
            if !ok {
                bail!("--agents: '{h}' is not a host: use [user@]host or an ssh config alias, comma-separated");
            }
            if !out.iter().any(|o| o == h) {
                out.push(h.to_string());
            }
        }
        if let Some(path) = agent_path {
            if path.is_empty()
                || !path
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c))
            {
                bail!("--agent-path '{path}': use a plain path (letters, digits, / . _ - +)");
            }
        }
        let agent_path = agent_path.map(str::to_string);
        if let Some(f) = &ssh_config {
            if !f.is_file() {
                bail!("--ssh-config {}: no such file", f.display());
            }
        }
        let cpus = match cpus {
            None => None,
            Some(text) => {
                let mut list: Vec<usize> = Vec::new();
                for t in text.split(',') {
                    let c = t
                        .trim()
                        .parse::<usize>()
                        .map_err(|_| anyhow!("--agent-cpus: '{}' is not a CPU number", t.trim()))?;
                    if !list.contains(&c) {
                        list.push(c);
                    }
                }
                Some(list)
            }
        };
        Ok(Launch {
            hosts: out,
            ssh_config,
            agent_path,
            cpus,
        })
    }

    /// ssh's arguments up to the remote command, for `host`: no prompt ever
    /// (BatchMode), a connection within 10 s, a peer that vanishes noticed within
    /// about 15 s, and `--ssh-config` as `-F`.
    pub fn ssh_args(&self, host: &str) -> Vec<String> {
        let mut args: Vec<String> = [
            "-T",
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=10",
            "-o",
            "ServerAliveInterval=5",
            "-o",
            "ServerAliveCountMax=3",
        ]
        .map(String::from)
        .to_vec();
        if let Some(f) = &self.ssh_config {
            args.push("-F".into());
            args.push(f.display().to_string());
        }
        args.push("--".into());
        args.push(host.to_string());
        args
    }
}

/// A point failed because of one agent: the message names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentFailure(pub String);

impl std::fmt::Display for AgentFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AgentFailure {}

/// One connected agent.
pub struct Agent {
    /// As named on the command line.
    pub name: String,
    /// What it said it is.
    pub hello: Hello,
    /// Its clock minus ours, ns.
    pub offset_ns: i128,
    /// The round trip of the exchange that gave the offset.
    pub rtt: Duration,
    child: Child,
    stdin: std::process::ChildStdin,
    /// Why it is gone, once it is.
    dead: Option<String>,
    /// Requests sent and not yet answered.
    pending: usize,
    /// When it last said anything (an answer or a heartbeat), or was asked.
    heard: Instant,
    /// [`SILENCE`] (shorter in tests).
    silence: Duration,
}

impl Agent {
    fn send(&mut self, req: &Request) -> Result<()> {
        let mut text = serde_json::to_string(req).context("encoding a request")?;
        text.push('\n');
        self.stdin
            .write_all(text.as_bytes())
            .and_then(|()| self.stdin.flush())
            .map_err(|e| anyhow!("agent {}: the connection closed ({e})", self.name))?;
        if self.pending == 0 {
            self.heard = Instant::now();
        }
        self.pending += 1;
        Ok(())
    }

    /// The next answer, skipping heartbeats, within `timeout`; an error on a closed
    /// connection, or when an agent with a request to answer has said nothing for
    /// [`SILENCE`]. An answer nobody asked for is returned as any other: the
    /// caller knows what it asked.
    pub(crate) fn receive(&mut self, timeout: Duration) -> Result<Reply> {
        let deadline = Instant::now() + timeout;
        loop {
            let silent_from = (self.pending > 0).then(|| self.heard + self.silence);
            let until = silent_from.map_or(deadline, |s| s.min(deadline));
            match self
                .child
                .next_line(until.saturating_duration_since(Instant::now()))
            {
                Line::Text(t) => {
                    self.heard = Instant::now();
                    let reply: Reply = serde_json::from_str(&t).map_err(|_| {
                        anyhow!(
                            "agent {}: answered something that is not a cipherbench agent's reply: {}",
                            self.name,
                            t.chars().take(120).collect::<String>()
                        )
                    })?;
                    if matches!(reply, Reply::Working) && self.pending > 0 {
                        continue;
                    }
                    self.pending = self.pending.saturating_sub(1);
                    return Ok(reply);
                }
                Line::Timeout if silent_from.is_some_and(|s| Instant::now() >= s) => {
                    bail!(
                        "agent {}: silent for {:.0?} while working on a request (no answer, no heartbeat): the agent is frozen or its host gives it no CPU; check the host (`ssh {} uptime`) and run again",
                        self.name,
                        self.silence,
                        self.name
                    )
                }
                Line::Timeout if Instant::now() < deadline => {}
                Line::Timeout => bail!("agent {}: no answer within {timeout:.0?}", self.name),
                Line::Closed => {
                    // Let ssh exit so its last words are in the tail.
                    let _ = self.child.wait(Duration::from_secs(2));
                    return Err(anyhow!(
                        "{}",
                        ssh_failure(&self.name, &self.child.stderr_tail())
                    ));
                }
            }
        }
    }

    /// Sends a request without waiting for its answer (see [`Agent::poll`]).
    pub(crate) fn send_only(&mut self, req: &Request) -> Result<()> {
        self.send(req)
    }

    /// The next answer if one arrives within `timeout` (an error answer as `Err`).
    pub(crate) fn poll(&mut self, timeout: Duration) -> Option<Result<Reply>> {
        match self.receive(timeout) {
            Ok(Reply::Error { message }) => Some(Err(anyhow!("agent {}: {message}", self.name))),
            Ok(r) => Some(Ok(r)),
            Err(e) if e.to_string().contains("no answer within") => None,
            Err(e) => Some(Err(e)),
        }
    }

    /// Sends a request and waits for its answer.
    pub(crate) fn ask(&mut self, req: &Request, timeout: Duration) -> Result<Reply> {
        if let Err(e) = self.send(req) {
            // ssh already ended (a refused connection): its last words say why.
            if self.child.wait(Duration::from_secs(5)).is_ok() {
                bail!("{}", ssh_failure(&self.name, &self.child.stderr_tail()));
            }
            return Err(e);
        }
        match self.receive(timeout)? {
            Reply::Error { message } => bail!("agent {}: {message}", self.name),
            r => Ok(r),
        }
    }

    /// Why it is gone, if it is.
    pub fn dead(&self) -> Option<&str> {
        self.dead.as_deref()
    }

    /// Ends it (its ssh stopped, which ends the agent) and remembers why.
    pub(crate) fn kill(&mut self, why: &str) {
        self.child.stop();
        self.dead = Some(why.to_string());
    }

    /// The record kept with the results.
    pub fn record(&self) -> AgentRecord {
        AgentRecord {
            name: self.name.clone(),
            version: self.hello.version.clone(),
            build: self.hello.build.clone(),
            hostname: self.hello.hostname.clone(),
            kernel: self.hello.kernel.clone(),
            cpu_model: self.hello.cpu_model.clone(),
            cpus: self.hello.cpus.clone(),
            openssl: self.hello.openssl.clone(),
            clock_offset_ns: self.offset_ns.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
            clock_rtt_ns: self.rtt.as_nanos() as u64,
            same_kernel: self.hello.shares_kernel_with_us(),
        }
    }
}

/// One clear line for an ssh that ended before its agent said hello, from ssh's
/// last words (OpenSSH's own messages, stable for decades).
pub fn ssh_failure(name: &str, stderr: &str) -> String {
    if stderr.contains(super::deploy::NO_AGENT) {
        return format!(
            "agent {name}: has no cipherbench: run `cipherbench deploy --agents {name}` to put this build there (or install the package there, or pass --agent-path)"
        );
    }
    let last = stderr.rsplit(" | ").next().unwrap_or("").trim();
    let last = last.strip_prefix("ssh: ").unwrap_or(last);
    let why = if stderr.contains("Could not resolve hostname") {
        "cannot resolve the host name: check --agents and your ssh config"
    } else if stderr.contains("Connection refused") {
        "refused the SSH connection: is sshd running there?"
    } else if stderr.contains("No route to host")
        || stderr.contains("Network is unreachable")
        || stderr.contains("timed out")
    {
        "unreachable over SSH: check the address and the network"
    } else if stderr.contains("Host key verification failed") {
        "its host key is not in your known_hosts: connect once with ssh to check and add it"
    } else if stderr.contains("Permission denied") {
        "refused the login: cipherbench uses your ssh keys (BatchMode, never a password); `ssh HOST true` must work without a prompt"
    } else if stderr.contains("command not found") || stderr.contains("No such file") {
        "has no cipherbench agent at the path given: install the same cipherbench there, or pass --agent-path"
    } else if last.is_empty() {
        "the connection closed before the agent answered"
    } else {
        "ssh failed"
    };
    let why = why.replace("ssh HOST", &format!("ssh {name}"));
    if last.is_empty() {
        format!("agent {name}: {why}")
    } else {
        format!("agent {name}: {why} (ssh: {last})")
    }
}

/// The connected agents.
pub struct Fleet {
    /// In the order named.
    pub agents: Vec<Agent>,
    /// `--agent-cpus`.
    pub cpus: Option<Vec<usize>>,
}

impl Fleet {
    /// Launches every agent (all at once), then checks each: hello, version, clock.
    /// Any failure ends every launched agent and returns one line naming the host.
    pub fn connect(launch: &Launch) -> Result<Fleet> {
        let mut pending = Vec::new();
        for host in &launch.hosts {
            let mut args = launch.ssh_args(host);
            match (&launch.agent_path, super::executable_digest()) {
                (Some(path), _) => {
                    args.push(path.clone());
                    args.push("agent".into());
                }
                (None, Ok(sha)) => args.push(super::deploy::remote_launch(sha)),
                (None, Err(_)) => {
                    args.push("cipherbench".into());
                    args.push("agent".into());
                }
            }
            let mut child = Spawn::new("ssh")
                .args(&args)
                .piped_stdin()
                .piped_stdout()
                .start()
                .with_context(|| format!("starting ssh for agent {host}"))?;
            let stdin = child
                .take_stdin()
                .context("ssh was started without a stdin")?;
            pending.push((host.clone(), child, stdin));
        }
        let mut agents = Vec::new();
        for (name, child, stdin) in pending {
            let mut agent = Agent {
                name,
                hello: Hello::here(),
                offset_ns: 0,
                rtt: Duration::ZERO,
                child,
                stdin,
                dead: None,
                pending: 0,
                heard: Instant::now(),
                silence: SILENCE,
            };
            match agent.ask(&Request::Hello, HELLO_TIMEOUT)? {
                Reply::Hello(h) => {
                    h.check(&agent.name)?;
                    agent.hello = *h;
                }
                _ => bail!("agent {}: answered hello with something else", agent.name),
            }
            let (offset, rtt) = clock(&mut agent)?;
            agent.offset_ns = offset;
            agent.rtt = rtt;
            agents.push(agent);
        }
        Ok(Fleet {
            agents,
            cpus: launch.cpus.clone(),
        })
    }

    /// The agents in one line: name, host, CPUs, clock offset and its uncertainty.
    pub fn describe(&self) -> String {
        self.agents
            .iter()
            .map(|a| {
                format!(
                    "{} ({}{}, {} CPUs, clock {:+.3} ms ±{:.3} ms)",
                    a.name,
                    a.hello.hostname,
                    if a.hello.shares_kernel_with_us() {
                        ", this machine's kernel"
                    } else {
                        ""
                    },
                    a.hello.cpus.len(),
                    a.offset_ns as f64 / 1e6,
                    a.rtt.as_secs_f64() * 1e3 / 2.0
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The agents' records.
    pub fn records(&self) -> Vec<AgentRecord> {
        self.agents.iter().map(Agent::record).collect()
    }

    /// Where the agents reach this machine: the addresses their ssh connections came
    /// from (a server cipherbench starts listens on these too).
    pub fn coordinator_addrs(&self) -> Result<Vec<IpAddr>> {
        let mut out: Vec<IpAddr> = Vec::new();
        for a in &self.agents {
            let ip: IpAddr = a
                .hello
                .coordinator_addr
                .as_deref()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| {
                    anyhow!(
                        "agent {}: cannot tell which address of this machine it reaches (no SSH_CONNECTION): pass --server URL",
                        a.name
                    )
                })?;
            if !out.contains(&ip) {
                out.push(ip);
            }
        }
        Ok(out)
    }
}

/// Measures an agent's clock offset: the exchange with the shortest round trip.
fn clock(agent: &mut Agent) -> Result<(i128, Duration)> {
    let mut best: Option<(i128, Duration)> = None;
    for _ in 0..CLOCK_EXCHANGES {
        let t0 = super::unix_ns();
        let sent = Instant::now();
        let Reply::Clock { unix_ns } = agent.ask(&Request::Clock, HELLO_TIMEOUT)? else {
            bail!(
                "agent {}: answered a clock request with something else",
                agent.name
            );
        };
        let rtt = sent.elapsed();
        let offset = unix_ns as i128 - (t0 as i128 + rtt.as_nanos() as i128 / 2);
        if best.is_none_or(|(_, r)| rtt < r) {
            best = Some((offset, rtt));
        }
    }
    best.context("no clock exchange")
}

/// The lead of the agreed start: the slowest agent's round trip many times over,
/// and at least half a second for each agent to build its client and threads.
pub fn lead(rtts: impl Iterator<Item = Duration>) -> Duration {
    let worst = rtts.max().unwrap_or(Duration::ZERO);
    Duration::from_millis(500) + worst * 10
}

/// How far apart the agents' windows may start: 1 % of the window, at least 50 ms.
pub fn skew_tolerance(window: Duration) -> Duration {
    (window / 100).max(Duration::from_millis(50))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_that_ssh_could_take_as_options_are_refused() {
        assert!(Launch::parse("-oProxyCommand=x", None, None, None).is_err());
        assert!(Launch::parse("a;reboot", None, None, None).is_err());
        assert!(Launch::parse("a,,b", None, None, None).is_err());
        assert!(Launch::parse("a", None, Some("cipherbench; rm"), None).is_err());
        let l = Launch::parse("root@10.0.0.2, b ,b", None, None, Some("1,1")).unwrap();
        assert_eq!(l.hosts, vec!["root@10.0.0.2".to_string(), "b".to_string()]);
        assert_eq!(l.agent_path, None);
        assert_eq!(l.cpus, Some(vec![1]));
        assert!(Launch::parse("a", None, None, Some("one")).is_err());
    }

    #[test]
    fn ssh_failures_become_one_line_each() {
        let cases = [
            (
                "ssh: Could not resolve hostname nope: Name or service not known",
                "resolve",
            ),
            (
                "ssh: connect to host 10.1.1.1 port 22: Connection refused",
                "sshd running",
            ),
            (
                "ssh: connect to host 10.1.1.1 port 22: Connection timed out",
                "unreachable",
            ),
            (
                "root@h: Permission denied (publickey).",
                "refused the login",
            ),
            ("Host key verification failed.", "known_hosts"),
            (
                "bash: line 1: cipherbench: command not found",
                "--agent-path",
            ),
            (
                "cipherbench-agent: no cipherbench on this host",
                "cipherbench deploy --agents h`",
            ),
        ];
        for (stderr, want) in cases {
            let line = ssh_failure("h", stderr);
            assert!(
                line.contains(want) && line.starts_with("agent h: "),
                "{line}"
            );
            assert!(!line.contains('\n'));
        }
    }

    /// An agent that is a shell script (reading requests, answering as it says),
    /// taken for frozen after `silence`.
    fn scripted(script: &str, silence: Duration) -> Agent {
        let mut child = Spawn::new("sh")
            .args(["-c", script])
            .piped_stdin()
            .piped_stdout()
            .start()
            .unwrap();
        let stdin = child.take_stdin().unwrap();
        Agent {
            name: "scripted".into(),
            hello: Hello::here(),
            offset_ns: 0,
            rtt: Duration::ZERO,
            child,
            stdin,
            dead: None,
            pending: 0,
            heard: Instant::now(),
            silence,
        }
    }

    #[test]
    fn a_working_agent_is_waited_for_however_long_it_works() {
        // Working for 1.5 s, saying so every 0.1 s: three times the silence allowed.
        let mut agent = scripted(
            r#"read req; for i in $(seq 15); do echo '{"type":"working"}'; sleep 0.1; done; echo '{"type":"done"}'; read more"#,
            Duration::from_millis(500),
        );
        let reply = agent.ask(&Request::Clock, Duration::from_secs(30)).unwrap();
        assert!(matches!(reply, Reply::Done), "{reply:?}");
        assert_eq!(agent.pending, 0);
    }

    #[test]
    fn a_silent_agent_is_named_frozen_long_before_the_request_s_limit() {
        let mut agent = scripted("read req; sleep 30", Duration::from_millis(300));
        let asked = Instant::now();
        let e = agent
            .ask(&Request::Clock, Duration::from_secs(30))
            .unwrap_err()
            .to_string();
        assert!(asked.elapsed() < Duration::from_secs(5), "{e}");
        assert!(
            e.starts_with("agent scripted: silent for 300ms while working on a request")
                && e.contains("ssh scripted uptime")
                && !e.contains('\n'),
            "{e}"
        );
    }

    #[test]
    fn an_idle_agent_is_not_silent_and_an_unasked_answer_is_handed_over() {
        let mut agent = scripted(
            r#"sleep 0.5; echo '{"type":"done"}'; read req"#,
            Duration::from_millis(100),
        );
        // Nothing asked: quiet is not silence, only no answer yet.
        assert!(agent.poll(Duration::from_millis(300)).is_none());
        // An answer nobody asked for reaches the caller, who knows what it asked.
        let unasked = agent.poll(Duration::from_secs(5));
        assert!(matches!(unasked, Some(Ok(Reply::Done))), "{unasked:?}");
    }

    #[test]
    fn the_skew_tolerance_grows_with_the_window() {
        assert_eq!(
            skew_tolerance(Duration::from_secs(1)),
            Duration::from_millis(50)
        );
        assert_eq!(
            skew_tolerance(Duration::from_secs(120)),
            Duration::from_millis(1200)
        );
    }
}
