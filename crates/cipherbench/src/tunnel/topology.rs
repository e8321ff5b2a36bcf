//! The tunnel's network: two namespaces joined by a veth pair (the underlay,
//! optionally rate-limited with `tc tbf`), a multi-queue TUN device in each (the
//! inner network), addresses from RFC 2544's benchmarking range 198.18.0.0/15, and
//! its removal, on every exit path and after a killed run.
//!
//! Naming is how leftovers are found: every namespace and scratch directory of a run
//! is called `cbtun-<pid>-<start time>-<nonce>...` (the owner tag of
//! `lifetime.rs`; the scratch directory under its temp root), so the next run and
//! `cipherbench cleanup` can tell a live run's (its owner process still exists,
//! with the same start time) from a dead one's. Links, the TUN devices and
//! qdiscs live inside the namespaces and go with them; so would a packet filter's
//! tables. While they exist they are registered as what a third Ctrl-C would
//! leave. Every command goes through the supervisor; nothing here measures.

use crate::host;
use crate::lifetime::{self, Registration, Swept};
use crate::supervisor::Spawn;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The prefix of everything a run creates.
pub const PREFIX: &str = "cbtun-";
/// The veth end's name inside each namespace.
pub const VETH: &str = "cbt-ul";
/// The TUN device's name inside each namespace.
pub const TUN: &str = "cbt-tun";
/// Underlay (veth) addresses, a /30 of RFC 2544's 198.18.0.0/15.
pub const UNDERLAY_SENDER: &str = "198.18.0.1";
/// The receiver's.
pub const UNDERLAY_RECEIVER: &str = "198.18.0.2";
/// Inner (TUN) addresses, from the other half of the range.
pub const INNER_SENDER: &str = "198.19.0.1";
/// The receiver's.
pub const INNER_RECEIVER: &str = "198.19.0.2";
/// TUN queue length: the kernel's default of 500 packets overflows (TCP
/// retransmissions) whenever a gateway thread is descheduled for a moment on a
/// shared machine; 4096 packets is 6 MB at our MTU.
pub const TUN_QUEUE_LEN: u32 = 4096;

/// Seconds a namespace keeps an incomplete IPv4 datagram's fragments (the kernel's
/// `ipfrag_time`, 30 by default): shorter than the pause between two runs.
const IPFRAG_TIME_S: u32 = 2;
const COMMAND_TIMEOUT: Duration = Duration::from_secs(15);

/// The names of one run's objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// `cbtun-<pid>-<start>-<nonce>`.
    pub run: String,
    /// The iperf3 client's namespace (its gateway seals the data).
    pub sender_ns: String,
    /// The iperf3 server's namespace.
    pub receiver_ns: String,
    /// Scratch directory (gateway stats files).
    pub dir: PathBuf,
}

impl Names {
    /// Fresh names owned by this process.
    pub fn new() -> Result<Names> {
        let mut nonce = [0u8; 3];
        cipherbench_crypto::random_bytes(&mut nonce).context("drawing a random name")?;
        Ok(Names::from_run(format!(
            "{PREFIX}{}-{}",
            lifetime::owner_tag(),
            crate::tunnel::gateway::to_hex(&nonce)
        )))
    }

    fn from_run(run: String) -> Names {
        let root = lifetime::temp_root_path();
        Names {
            sender_ns: format!("{run}-s"),
            receiver_ns: format!("{run}-r"),
            dir: root.join(&run),
            run,
        }
    }

    /// The owner (pid, start time) encoded in a name of ours.
    pub fn owner(name: &str) -> Option<(u32, u64)> {
        lifetime::owner_of(name, PREFIX)
    }

    /// The run name a namespace or directory name belongs to.
    pub fn run_of(name: &str) -> Option<String> {
        Names::owner(name)?;
        let parts: Vec<&str> = name.splitn(5, '-').collect();
        (parts.len() >= 4).then(|| parts[..4].join("-"))
    }
}

/// Whether the process that created `name` is still running.
pub fn owner_alive(name: &str) -> bool {
    lifetime::owner_alive(name, PREFIX)
}

/// Runs `ip` (or `tc`) and fails with its stderr.
pub fn command(program: &str, args: &[&str]) -> Result<String> {
    let out = Spawn::new(program)
        .args(args)
        .output(COMMAND_TIMEOUT)?
        .success(&format!("{program} {}", args.join(" ")))?;
    Ok(out.stdout)
}

/// Parses a `tc` rate (`1gbit`, `500mbit`, `100kbit`, `1000000bit`, or a bare
/// number of bits per second) into bits per second.
pub fn parse_rate(text: &str) -> Result<u64> {
    parse_rate_of("underlay rate", text)
}

/// [`parse_rate`], its errors naming `what` was given.
pub fn parse_rate_of(what: &str, text: &str) -> Result<u64> {
    let t = text.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .with_context(|| format!("{what} {text:?}: expected a number and a unit such as 1gbit"))?;
    let multiplier = match unit {
        "" | "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        _ => bail!("{what} {text:?}: unknown unit {unit:?}; use bit, kbit, mbit or gbit (tc's units, bits per second)"),
    };
    let bits = (value * multiplier).round();
    if !(1e5..=1e12).contains(&bits) {
        bail!("{what} {text:?} is out of range (100kbit to 1000gbit)");
    }
    Ok(bits as u64)
}

/// The built network, removed on drop.
pub struct Topology {
    names: Names,
    torn_down: bool,
    _registered: Registration,
}

/// How to build it.
#[derive(Debug, Clone)]
pub struct TopologyOptions {
    /// `tc tbf` rate on both veth ends, bits per second.
    pub underlay_rate_bits_per_sec: Option<u64>,
    /// TUN MTU.
    pub mtu: u32,
    /// Make the veth segment GSO packets before they leave (`gso_max_segs 1`), so
    /// that a capture or a packet filter on the underlay sees one ESP packet per
    /// frame, as a real wire would carry; otherwise the veth hands a gateway's GSO
    /// send to the peer in one piece, as a NIC with USO and one with UDP GRO would.
    pub segment_on_the_wire: bool,
}

impl Topology {
    /// Builds the namespaces, veth, TUN devices and addresses. On failure, whatever
    /// was created is removed again.
    pub fn build(names: Names, options: &TopologyOptions) -> Result<Topology> {
        let registered = lifetime::register(format!(
            "network namespaces {} and {} with scratch directory {}",
            names.sender_ns,
            names.receiver_ns,
            names.dir.display()
        ));
        let topology = Topology {
            names,
            torn_down: false,
            _registered: registered,
        };
        topology
            .create(options)
            .context("building the tunnel topology")?;
        Ok(topology)
    }

    /// The names.
    pub fn names(&self) -> &Names {
        &self.names
    }

    #[expect(
        clippy::too_many_lines,
        reason = "the ip commands that build both namespaces and their links, in the order they must run"
    )]
    fn create(&self, options: &TopologyOptions) -> Result<()> {
        let (s, r) = (&self.names.sender_ns, &self.names.receiver_ns);
        lifetime::create_in_root(&self.names.run)?;
        command("ip", &["netns", "add", s])?;
        command("ip", &["netns", "add", r])?;
        // Created directly in the namespaces: never visible in the root one.
        command(
            "ip",
            &[
                "link", "add", VETH, "netns", s, "type", "veth", "peer", "name", VETH, "netns", r,
            ],
        )?;
        let mtu = options.mtu.to_string();
        let queue = TUN_QUEUE_LEN.to_string();
        // One TUN super-packet per UDP GSO send (offload::tun_gso_max_segs).
        let gso_segs =
            crate::tunnel::gateway::offload::tun_gso_max_segs(options.mtu as usize).to_string();
        for (ns, underlay, inner, peer) in [
            (s, UNDERLAY_SENDER, INNER_SENDER, INNER_RECEIVER),
            (r, UNDERLAY_RECEIVER, INNER_RECEIVER, INNER_SENDER),
        ] {
            command("ip", &["-n", ns, "link", "set", "lo", "up"])?;
            // Datagrams above the tunnel MTU arrive in fragments; a lossy probe leaves
            // half-built ones holding the namespace's reassembly memory (4 MB) for
            // `ipfrag_time`, 30 s by default, and every fragment of the runs after it
            // is dropped. Kept for 2 s here, they are gone before the next run.
            command(
                "ip",
                &[
                    "netns",
                    "exec",
                    ns,
                    "sh",
                    "-c",
                    &format!("echo {IPFRAG_TIME_S} > /proc/sys/net/ipv4/ipfrag_time"),
                ],
            )?;
            command(
                "ip",
                &[
                    "-n",
                    ns,
                    "addr",
                    "add",
                    &format!("{underlay}/30"),
                    "dev",
                    VETH,
                ],
            )?;
            command("ip", &["-n", ns, "link", "set", VETH, "up"])?;
            if options.segment_on_the_wire {
                command(
                    "ip",
                    &["-n", ns, "link", "set", "dev", VETH, "gso_max_segs", "1"],
                )?;
            }
            command(
                "ip",
                &[
                    "-n",
                    ns,
                    "tuntap",
                    "add",
                    "dev",
                    TUN,
                    "mode",
                    "tun",
                    "multi_queue",
                ],
            )?;
            command(
                "ip",
                &[
                    "-n",
                    ns,
                    "link",
                    "set",
                    TUN,
                    "mtu",
                    &mtu,
                    "txqueuelen",
                    &queue,
                    "gso_max_segs",
                    &gso_segs,
                    "up",
                ],
            )?;
            command(
                "ip",
                &["-n", ns, "addr", "add", inner, "peer", peer, "dev", TUN],
            )?;
            if let Some(rate) = options.underlay_rate_bits_per_sec {
                // Burst: 4 ms at the rate, and at least one 64 KiB GSO packet, so
                // that tbf does not have to split the veth's large packets.
                let burst = (rate / 8 / 250).max(65_536).to_string();
                command(
                    "tc",
                    &[
                        "-n",
                        ns,
                        "qdisc",
                        "add",
                        "dev",
                        VETH,
                        "root",
                        "tbf",
                        "rate",
                        &format!("{rate}bit"),
                        "burst",
                        &burst,
                        "latency",
                        "20ms",
                    ],
                )?;
            }
        }
        Ok(())
    }

    /// Removes everything now (also done on drop, ignoring errors).
    pub fn teardown(mut self) -> Result<()> {
        self.torn_down = true;
        remove_run(&self.names.run)
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        if !self.torn_down {
            let _ = remove_run(&self.names.run);
        }
    }
}

/// One link's counters, from `ip -s -j link show`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Packets dropped on transmit (for a TUN device: not read by the gateway in
    /// time, its queue full).
    pub tx_dropped: u64,
    /// Packets dropped on receive.
    pub rx_dropped: u64,
}

/// Parses `ip -s -j link show dev X`.
pub fn parse_link_stats(json: &str) -> Option<LinkStats> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let s = &v.as_array()?.first()?["stats64"];
    Some(LinkStats {
        tx_dropped: s["tx"]["dropped"].as_u64()?,
        rx_dropped: s["rx"]["dropped"].as_u64()?,
    })
}

/// A link's counters in a namespace.
pub fn link_stats(netns: &str, device: &str) -> Result<LinkStats> {
    let out = command(
        "ip",
        &["-n", netns, "-s", "-j", "link", "show", "dev", device],
    )?;
    parse_link_stats(&out).with_context(|| format!("reading {device}'s counters in {netns}"))
}

/// `RcvbufErrors` of the `Udp:` lines of /proc/net/snmp: datagrams dropped at a
/// full socket receive buffer anywhere in the namespace.
pub fn parse_udp_rcvbuf_errors(snmp: &str) -> Option<u64> {
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let names: Vec<&str> = udp.next()?.split_whitespace().collect();
    let values: Vec<&str> = udp.next()?.split_whitespace().collect();
    let at = names.iter().position(|n| *n == "RcvbufErrors")?;
    values.get(at)?.parse().ok()
}

/// UDP receive-buffer drops in the namespace of process `pid` so far (0 if it
/// cannot be read).
pub fn udp_rcvbuf_errors(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/net/snmp"))
        .ok()
        .and_then(|t| parse_udp_rcvbuf_errors(&t))
        .unwrap_or(0)
}

/// Our namespaces, as `ip netns list` shows them.
pub fn our_namespaces() -> Result<Vec<String>> {
    let out = command("ip", &["netns", "list"])?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(PREFIX))
        .map(str::to_string)
        .collect())
}

/// Removes what runs left behind: every namespace and scratch directory named by
/// this tool whose owner is gone (or every one, with `force`), killing the
/// processes inside those namespaces first. Without `ip`, or with no namespace
/// of ours, only scratch directories are looked for.
pub fn cleanup(force: bool) -> Swept {
    let mut swept = Swept::default();
    let namespaces = if host::is_root() || Path::new("/var/run/netns").exists() {
        our_namespaces().unwrap_or_default()
    } else {
        Vec::new()
    };
    let mut runs: Vec<String> = namespaces.iter().filter_map(|n| Names::run_of(n)).collect();
    // The temp root, and $TMPDIR itself where older versions put the scratch.
    let root = Names::from_run(String::new()).dir;
    for dir in [root.as_path(), std::env::temp_dir().as_path()] {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                if let Some(run) = Names::run_of(&e.file_name().to_string_lossy()) {
                    runs.push(run);
                }
            }
        }
    }
    runs.sort();
    runs.dedup();
    let mine = format!("{PREFIX}{}-", lifetime::owner_tag());
    for run in runs {
        if run.starts_with(&mine) {
            continue;
        }
        if !force && owner_alive(&run) {
            swept.live.push(format!("tunnel run {run}"));
            continue;
        }
        swept.merge(remove_run_report(&run, &namespaces));
    }
    swept
}

fn remove_run(run: &str) -> Result<()> {
    let existing = our_namespaces()?;
    let swept = remove_run_report(run, &existing);
    lifetime::release_root();
    if !swept.failed.is_empty() {
        bail!("cleaning up {run}: {}", swept.failed.join("; "));
    }
    Ok(())
}

fn remove_run_report(run: &str, existing: &[String]) -> Swept {
    let mut swept = Swept::default();
    let mut names = Names::from_run(run.to_string());
    for ns in [&names.sender_ns, &names.receiver_ns] {
        if !existing.contains(ns) {
            continue;
        }
        // Anything still running inside (a gateway, iperf3) would keep the
        // namespace's devices alive after the name is gone: kill it first.
        if let Ok(out) = command("ip", &["netns", "pids", ns]) {
            for pid in out.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
                super::gateway::sys::kill(pid);
                swept.processes.push(pid as u32);
            }
        }
        match command("ip", &["netns", "del", ns]) {
            Ok(_) => swept.removed.push(format!("network namespace {ns}")),
            Err(e) => swept.failed.push(format!("{e:#}")),
        }
    }
    let legacy = std::env::temp_dir().join(run);
    for dir in [std::mem::take(&mut names.dir), legacy] {
        if dir.exists() {
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => swept
                    .removed
                    .push(format!("tunnel scratch directory {}", dir.display())),
                Err(e) => swept
                    .failed
                    .push(format!("removing {}: {e}", dir.display())),
            }
        }
    }
    swept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_their_owner() {
        let n = Names::from_run("cbtun-4242-987654-a1b2c3".into());
        assert_eq!(n.sender_ns, "cbtun-4242-987654-a1b2c3-s");
        assert_eq!(Names::owner(&n.receiver_ns), Some((4242, 987654)));
        assert_eq!(
            Names::run_of(&n.receiver_ns).as_deref(),
            Some("cbtun-4242-987654-a1b2c3")
        );
        assert_eq!(
            Names::run_of("cbtun-4242-987654-a1b2c3").as_deref(),
            Some("cbtun-4242-987654-a1b2c3")
        );
        assert_eq!(Names::owner("other-1-2"), None);
        assert_eq!(Names::owner("cbtun-x-2-3"), None);
        assert!(n.dir.ends_with("cbtun-4242-987654-a1b2c3"));
    }

    #[test]
    fn our_own_names_are_alive_and_a_dead_owner_is_not() {
        let ours = Names::new().unwrap();
        assert!(owner_alive(&ours.sender_ns));
        let (pid, start) = Names::owner(&ours.run).unwrap();
        assert!(!owner_alive(&format!("{PREFIX}{pid}-{}-000000", start + 1)));
    }

    #[test]
    fn parses_tc_rates() {
        assert_eq!(parse_rate("1gbit").unwrap(), 1_000_000_000);
        assert_eq!(parse_rate("500Mbit").unwrap(), 500_000_000);
        assert_eq!(parse_rate("2.5gbit").unwrap(), 2_500_000_000);
        assert_eq!(parse_rate("1000000").unwrap(), 1_000_000);
        assert!(parse_rate("1gbps")
            .unwrap_err()
            .to_string()
            .contains("unknown unit"));
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("10bit").is_err());
    }

    #[test]
    fn parses_udp_receive_buffer_errors() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
Udp: 71 0 12 72 9 0 0 0 0\n\
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
UdpLite: 0 0 0 0 0 0 0 0 0\n";
        assert_eq!(parse_udp_rcvbuf_errors(snmp), Some(9));
        assert_eq!(parse_udp_rcvbuf_errors("Ip: 1\n"), None);
    }

    #[test]
    fn parses_link_counters() {
        let json = r#"[{"ifname":"cbt-tun","stats64":{"rx":{"bytes":1,"packets":2,"dropped":3},"tx":{"bytes":4,"packets":5,"dropped":11263}}}]"#;
        assert_eq!(
            parse_link_stats(json),
            Some(LinkStats {
                tx_dropped: 11263,
                rx_dropped: 3
            })
        );
        assert_eq!(parse_link_stats("[]"), None);
        assert_eq!(parse_link_stats("nope"), None);
    }
}
