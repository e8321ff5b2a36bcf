//! The project's own test hosts: network namespaces on this machine joined by one
//! bridge, each with its own address and a real `sshd` (Debian's openssh-server)
//! started from a scratch directory with its own host key, the test's authorized key
//! and its own config; the ssh client's config, key and known_hosts are in the same
//! scratch directory (never `~/.ssh` or `/etc/ssh`), and each host's sessions have a
//! cache directory of their own there (`XDG_CACHE_HOME`). So the SSH launcher, the agents
//! and the two-host tunnel run end to end without a packet leaving the machine.
//!
//! Layout: bridge `cbb<tag>` in this namespace with `10.213.<n>.1/24` (the
//! coordinator's address), and per host a namespace `cbh<tag>_<i>` whose `eth0` (a
//! veth whose other end is on the bridge) has `10.213.<n>.<10+i>/24`. Everything is
//! removed when the [`Hosts`] is dropped, a failing test's unwinding included.

#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// sshd, as Debian installs it.
pub const SSHD: &str = "/usr/sbin/sshd";

/// Why the hosts cannot be built here (the test prints it and skips), if so.
pub fn unavailable() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let root = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        == Some("0");
    if !root {
        return Some("needs root (network namespaces)".into());
    }
    if !Path::new(SSHD).exists() {
        return Some(format!(
            "{SSHD} is missing: scripts/install-deps.sh test installs openssh-server"
        ));
    }
    for program in ["ip", "ssh", "ssh-keygen"] {
        let ok = Command::new(program)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !ok {
            return Some(format!("{program} is not installed"));
        }
    }
    None
}

/// SIGKILL to a pid, or to a process group as `-PGID` (kill(1): no `unsafe` in tests).
pub fn kill(target: &str) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", target])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// One test host.
pub struct Host {
    /// Its name in the ssh config (`h0`, `h1`, ...).
    pub alias: String,
    /// Its network namespace.
    pub netns: String,
    /// Its address on the bridge.
    pub addr: Ipv4Addr,
    sshd: Option<Child>,
}

impl Host {
    /// Kills its sshd (and every session it forked: its process group), as a host
    /// that goes down would.
    pub fn kill_sshd(&mut self) {
        if let Some(mut c) = self.sshd.take() {
            // Its process group (process_group(0)): sshd and anything it left in it.
            kill(&format!("-{}", c.id()));
            let _ = c.wait();
        }
    }
}

/// The test hosts and everything they need; removed on drop.
pub struct Hosts {
    /// The hosts.
    pub hosts: Vec<Host>,
    /// The scratch directory (keys, configs, pid files).
    pub dir: PathBuf,
    /// The bridge in this namespace.
    pub bridge: String,
    /// This machine's address on the bridge (where agents reach a server here).
    pub gateway: Ipv4Addr,
    tag: String,
}

fn run(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// A /24 of 10.213.0.0/16 that no interface here uses yet.
fn free_subnet() -> u8 {
    let used = Command::new("ip")
        .args(["-4", "-o", "addr"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let seed = std::process::id() as usize;
    for k in 0..250 {
        let n = ((seed + k * 37) % 250) as u8 + 1;
        if !used.contains(&format!("10.213.{n}.")) {
            return n;
        }
    }
    panic!("no free 10.213.x.0/24 subnet");
}

impl Hosts {
    /// Builds `count` hosts with sshd running on each, or panics saying what failed
    /// (what was built is removed first).
    pub fn start(count: usize) -> Hosts {
        // Unique among this process's harnesses and other test processes' (pid).
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tag = format!("{:x}x{k}", std::process::id() % 0x10_0000);
        let n = free_subnet();
        let dir = std::env::temp_dir().join(format!("cipherbench-hosts-{tag}"));
        let mut hosts = Hosts {
            hosts: Vec::new(),
            dir,
            bridge: format!("cbb{tag}"),
            gateway: Ipv4Addr::new(10, 213, n, 1),
            tag,
        };
        if let Err(e) = hosts.build(count, n) {
            drop(hosts);
            panic!("building the test hosts: {e}");
        }
        hosts
    }

    #[expect(
        clippy::too_many_lines,
        reason = "the hosts' setup reads top to bottom: bridge, namespaces, keys, sshd, each checked"
    )]
    fn build(&mut self, count: usize, n: u8) -> Result<(), String> {
        std::fs::create_dir_all(&self.dir).map_err(|e| e.to_string())?;
        let d = self.dir.clone();
        let s = |p: &str| d.join(p).display().to_string();
        // The privilege-separation directory sshd insists on (the package's own,
        // created at boot by its tmpfiles.d entry; empty).
        let _ = std::fs::create_dir_all("/run/sshd");
        run(&[
            "ssh-keygen",
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-f",
            &s("host_key"),
        ])?;
        run(&[
            "ssh-keygen",
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-f",
            &s("id"),
        ])?;
        std::fs::copy(d.join("id.pub"), d.join("authorized_keys")).map_err(|e| e.to_string())?;
        let host_pub =
            std::fs::read_to_string(d.join("host_key.pub")).map_err(|e| e.to_string())?;
        let host_pub: String = host_pub
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ");

        run(&["ip", "link", "add", &self.bridge, "type", "bridge"])?;
        run(&[
            "ip",
            "addr",
            "add",
            &format!("{}/24", self.gateway),
            "dev",
            &self.bridge,
        ])?;
        run(&["ip", "link", "set", &self.bridge, "up"])?;

        let mut ssh_config = String::from("# cipherbench test hosts\n");
        let mut known_hosts = String::new();
        for i in 0..count {
            let netns = format!("cbh{}_{i}", self.tag);
            let addr = Ipv4Addr::new(10, 213, n, 10 + i as u8);
            run(&["ip", "netns", "add", &netns])?;
            self.hosts.push(Host {
                alias: format!("h{i}"),
                netns: netns.clone(),
                addr,
                sshd: None,
            });
            let outer = format!("cbv{}_{i}", self.tag);
            run(&[
                "ip", "link", "add", &outer, "type", "veth", "peer", "name", "eth0", "netns",
                &netns,
            ])?;
            run(&["ip", "link", "set", &outer, "master", &self.bridge, "up"])?;
            run(&[
                "ip",
                "-n",
                &netns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                "eth0",
            ])?;
            run(&["ip", "-n", &netns, "link", "set", "eth0", "up"])?;
            run(&["ip", "-n", &netns, "link", "set", "lo", "up"])?;
            let config = format!(
                "ListenAddress {addr}:22\nHostKey {}\nPidFile {}\nAuthorizedKeysFile {}\n\
                 StrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 PermitRootLogin prohibit-password\nUsePAM no\nPrintMotd no\nLogLevel ERROR\n\
                 SetEnv XDG_CACHE_HOME={}\n",
                s("host_key"),
                s(&format!("sshd-{i}.pid")),
                s("authorized_keys"),
                s(&format!("cache-{i}")),
            );
            let conf_path = d.join(format!("sshd-{i}.conf"));
            std::fs::write(&conf_path, config).map_err(|e| e.to_string())?;
            let child = Command::new("ip")
                .args(["netns", "exec", &netns, SSHD, "-D", "-e", "-f"])
                .arg(&conf_path)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .map_err(|e| format!("starting sshd in {netns}: {e}"))?;
            self.hosts[i].sshd = Some(child);
            ssh_config.push_str(&format!("Host h{i}\n  HostName {addr}\n"));
            known_hosts.push_str(&format!("{addr} {host_pub}\n"));
        }
        ssh_config.push_str(&format!(
            "Host *\n  User root\n  IdentityFile {}\n  IdentitiesOnly yes\n  \
             UserKnownHostsFile {}\n  GlobalKnownHostsFile /dev/null\n  \
             StrictHostKeyChecking yes\n  BatchMode yes\n  ConnectTimeout 5\n  \
             LogLevel ERROR\n",
            s("id"),
            s("known_hosts")
        ));
        std::fs::write(d.join("ssh_config"), ssh_config).map_err(|e| e.to_string())?;
        std::fs::write(d.join("known_hosts"), known_hosts).map_err(|e| e.to_string())?;
        // Ready when each sshd accepts a connection (a deadline, not a sleep).
        for h in &self.hosts {
            let deadline = Instant::now() + Duration::from_secs(20);
            let sa = SocketAddr::from((h.addr, 22));
            while TcpStream::connect_timeout(&sa, Duration::from_millis(200)).is_err() {
                if Instant::now() > deadline {
                    return Err(format!(
                        "sshd in {} did not accept on {sa} within 20 s",
                        h.netns
                    ));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(())
    }

    /// Gives host `i` only `cpus` (a `taskset` list, such as `1`), as a host with
    /// fewer CPUs would have: its sshd's affinity, which every session and agent it
    /// forks from now on inherits (so the agent's topology is those CPUs).
    #[allow(dead_code)]
    pub fn confine(&self, i: usize, cpus: &str) {
        let pid = self.hosts[i]
            .sshd
            .as_ref()
            .expect("the host's sshd runs")
            .id()
            .to_string();
        run(&["taskset", "-a", "-p", "-c", cpus, &pid])
            .unwrap_or_else(|e| panic!("confining h{i} to CPUs {cpus}: {e}"));
    }

    /// Host `i`'s own cache directory (its sessions' `XDG_CACHE_HOME`: where
    /// `cipherbench deploy` puts a build there), so each host starts with none of
    /// its own and the machine's `~/.cache` is not touched.
    pub fn cache(&self, i: usize) -> PathBuf {
        self.dir.join(format!("cache-{i}"))
    }

    /// The ssh client config file (pass it with `--ssh-config`).
    pub fn ssh_config(&self) -> PathBuf {
        self.dir.join("ssh_config")
    }

    /// `h0,h1,...`, the first `n` hosts' aliases.
    pub fn list(&self, n: usize) -> String {
        self.hosts[..n]
            .iter()
            .map(|h| h.alias.clone())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Runs a command on host `i` over ssh; its stdout.
    pub fn ssh(&self, i: usize, command: &str) -> Result<String, String> {
        let out = Command::new("ssh")
            .arg("-F")
            .arg(self.ssh_config())
            .arg(&self.hosts[i].alias)
            .arg(command)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Runs a command inside host `i`'s namespace directly (not over ssh).
    pub fn exec(&self, i: usize, args: &[&str]) -> Result<String, String> {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.hosts[i].netns])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// What of this harness is still on the machine (namespaces, links, the scratch
    /// directory): empty once it was dropped.
    pub fn leftovers_of(tag: &str, dir: &Path) -> Vec<String> {
        let mut left = Vec::new();
        let ns = Command::new("ip")
            .args(["netns", "list"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        left.extend(
            ns.lines()
                .filter(|l| l.contains(&format!("cbh{tag}_")))
                .map(|l| format!("namespace {l}")),
        );
        let links = Command::new("ip")
            .args(["-o", "link"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        left.extend(
            links
                .lines()
                .filter(|l| l.contains(&format!("cbb{tag}")) || l.contains(&format!("cbv{tag}_")))
                .map(|l| format!("link {}", l.split(':').nth(1).unwrap_or("").trim())),
        );
        if dir.exists() {
            left.push(format!("directory {}", dir.display()));
        }
        left
    }

    /// This harness's tag (in every name it made).
    pub fn tag(&self) -> &str {
        &self.tag
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for h in &mut self.hosts {
            h.kill_sshd();
            // Sessions sshd forked are in sessions of their own: whatever still runs
            // in this host's namespace (agents, gateways, iperf3) was started by this
            // test, and goes too.
            if let Ok(out) = Command::new("ip")
                .args(["netns", "pids", &h.netns])
                .output()
            {
                for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                    kill(pid);
                }
            }
            // The pair goes with either end; deleted here, not left to the kernel's
            // asynchronous clean-up of a deleted namespace.
            let outer = format!("cbv{}_{}", self.tag, &h.alias[1..]);
            let _ = run(&["ip", "link", "del", &outer]);
            let _ = run(&["ip", "netns", "del", &h.netns]);
        }
        let _ = run(&["ip", "link", "del", &self.bridge]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
