//! The runner's side of the gateways: starting the two `__gateway` children (each
//! with its variant's `OPENSSL_ia32cap` and library, and its configuration on stdin;
//! each reports the library it loaded, held to the variant's), asking them
//! for stats snapshots, stopping them, and turning two snapshots into a
//! [`GatewayRun`].
//!
//! The children are spawned from the thread that runs the layer, which lives as long
//! as they do, so `PR_SET_PDEATHSIG` takes them down with a killed runner.

use super::gateway::stats::GatewayStats;
use super::gateway::{to_hex, GatewayConfig};
use super::topology::{self, Names};
use crate::library::Loaded;
use crate::supervisor::{Child, Line, Spawn};
use crate::variant::Variant;
use anyhow::{bail, Context, Result};
use cipherbench_esp::Transform;
use cipherbench_model::tunnel::{GatewayRun, GatewaySplit, ThreadLoad};
use cipherbench_model::variant::Probes;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long a gateway may take to start, answer a snapshot request, or stop.
const GATEWAY_TIMEOUT: Duration = Duration::from_secs(10);

/// One running gateway.
pub struct Gateway {
    child: Child,
    side: &'static str,
    stats_path: PathBuf,
    /// `OPENSSL_info(CPU_SETTINGS)` as the gateway reported it.
    pub cpu_settings: String,
    /// The effect probes the gateway measured before its real work (None if they
    /// could not run).
    pub probes: Option<Probes>,
    /// The variant it runs.
    pub variant: Variant,
    /// The OpenSSL it loaded, as it reported it (held to the variant's library).
    pub loaded: Loaded,
    /// The MTU of its TUN device: what the IP layer beside it fragments to.
    pub mtu: u32,
}

impl Gateway {
    /// Starts one gateway with its configuration on stdin and waits for its ready
    /// line (also the two-host tunnel's, `tunnel::peer`).
    pub(crate) fn start(
        program: &std::path::Path,
        config: &GatewayConfig,
        variant: &Variant,
        mask: Option<String>,
        side: &'static str,
    ) -> Result<Gateway> {
        let mut child = Spawn::new(program)
            .args(["__gateway"])
            .ia32cap(mask.as_deref())
            .envs(variant.environment())
            .loader(variant.library.loader())
            .piped_stdin()
            .piped_stdout()
            .start()
            .with_context(|| format!("starting the {side} gateway"))?;
        child.send_stdin(&serde_json::to_vec(config)?)?;
        let line = next_line(&mut child, "ready", side)?;
        let ready: serde_json::Value =
            serde_json::from_str(line.trim_start_matches("ready").trim())
                .with_context(|| format!("the {side} gateway's ready line: {line}"))?;
        let loaded: Loaded = serde_json::from_value(ready["library"].clone())
            .with_context(|| format!("the {side} gateway's library in: {line}"))?;
        // Dropping the child on a mismatch stops it.
        variant
            .library
            .check(&format!("the {side} ESP gateway"), &loaded)?;
        Ok(Gateway {
            child,
            side,
            stats_path: config.stats_path.clone(),
            cpu_settings: ready["cpu_settings"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            probes: serde_json::from_value(ready["probes"].clone()).ok(),
            variant: variant.clone(),
            loaded,
            mtu: config.mtu as u32,
        })
    }

    /// A fresh stats snapshot (SIGUSR1, then wait for its `stats N` line).
    pub fn snapshot(&mut self) -> Result<GatewayStats> {
        self.child.signal(libc::SIGUSR1);
        next_line(&mut self.child, "stats", self.side)?;
        GatewayStats::read(&self.stats_path)
            .with_context(|| format!("reading {}", self.stats_path.display()))
    }

    /// Stops the gateway (SIGTERM) and returns its final stats.
    pub fn stop(mut self) -> Result<GatewayStats> {
        self.child.signal(libc::SIGTERM);
        let status = self.child.wait(GATEWAY_TIMEOUT)?;
        if !status.success() {
            bail!(
                "the {} gateway exited with {status}: {}",
                self.side,
                self.child.stderr_tail()
            );
        }
        GatewayStats::read(&self.stats_path)
    }

    /// Fails if the gateway has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "the {} gateway exited during the run ({status}): {}",
                self.side,
                self.child.stderr_tail()
            );
        }
        Ok(())
    }

    /// The gateway's pid.
    pub fn pid(&self) -> u32 {
        self.child.pid()
    }
}

/// Waits for the next line starting with `prefix`; a gateway that exits or stays
/// silent is an error quoting its stderr.
fn next_line(child: &mut Child, prefix: &str, side: &str) -> Result<String> {
    let deadline = Instant::now() + GATEWAY_TIMEOUT;
    loop {
        match child.next_line(Duration::from_millis(50)) {
            Line::Text(line) if line.starts_with(prefix) => return Ok(line),
            Line::Text(_) => {}
            Line::Closed => {
                let _ = child.wait(Duration::from_secs(2));
                bail!("the {side} gateway exited: {}", child.stderr_tail())
            }
            Line::Timeout => {
                if Instant::now() > deadline {
                    bail!(
                        "the {side} gateway did not answer within {GATEWAY_TIMEOUT:?}: {}",
                        child.stderr_tail()
                    );
                }
            }
        }
    }
}

/// What both gateways of a measurement share.
#[derive(Clone)]
pub struct PairOptions {
    /// The cipherbench executable that runs `__gateway` (the runner's own).
    pub program: PathBuf,
    /// The transform.
    pub transform: Transform,
    /// The run's secret.
    pub secret: Vec<u8>,
    /// The key-derivation label: unique per gateway start, so that no two starts
    /// ever use the same keys with sequence numbers (and AEAD nonces) from 1 again.
    pub label: String,
    /// Datagrams per batch.
    pub batch: usize,
    /// TUN offloads.
    pub offload: bool,
    /// UDP GSO sends and `UDP_GRO` receives.
    pub udp_offload: bool,
    /// TUN MTU.
    pub mtu: usize,
    /// Cores for the sender's threads.
    pub sender_cpus: Vec<usize>,
    /// Cores for the receiver's threads.
    pub receiver_cpus: Vec<usize>,
    /// Crypto workers per direction (1: the two-thread path).
    pub threads: usize,
    /// Anti-replay window (wide enough for the workers' jobs in flight).
    pub replay_window: u32,
    /// Where the sender sends ESP (normally the receiver's underlay address; a
    /// test puts a relay there).
    pub sender_peer: Option<SocketAddrV4>,
    /// The prepared ESP key log each gateway appends its outbound SA to.
    pub esp_keylog: Option<PathBuf>,
}

/// The two gateways.
pub struct GatewayPair {
    /// On the iperf3 client's side: seals the data.
    pub sender: Gateway,
    /// On the server's side: opens the data.
    pub receiver: Gateway,
}

fn addr(ip: &str) -> SocketAddrV4 {
    // The topology's constants are valid IPv4 literals.
    SocketAddrV4::new(
        ip.parse().unwrap_or(Ipv4Addr::UNSPECIFIED),
        cipherbench_esp::udp::NAT_T_PORT,
    )
}

impl GatewayPair {
    /// Starts both gateways, the receiver first (so the sender's first packets find
    /// it listening). `mask` gives each variant's `OPENSSL_ia32cap` for the library it
    /// loads (a layer's [`crate::variant::Baseline::mask`]).
    pub fn start(
        names: &Names,
        options: &PairOptions,
        sender_variant: &Variant,
        receiver_variant: &Variant,
        mask: impl Fn(&Variant) -> Option<String>,
    ) -> Result<GatewayPair> {
        let config = |side: &str,
                      ns: &str,
                      local: &str,
                      peer: SocketAddrV4,
                      initiator: bool,
                      cpus: &[usize]| GatewayConfig {
            name: side.to_string(),
            netns: Some(ns.to_string()),
            tun: topology::TUN.to_string(),
            local: addr(local),
            peer,
            transform: options.transform,
            secret_hex: to_hex(&options.secret),
            label: options.label.clone(),
            initiator,
            stats_path: names.dir.join(format!("{side}.json")),
            batch: options.batch,
            offload: options.offload,
            udp_offload: options.udp_offload,
            cpus: cpus.to_vec(),
            socket_buffer_bytes: 8 << 20,
            replay_window: options.replay_window,
            threads: options.threads,
            mtu: options.mtu,
            esp_keylog: options.esp_keylog.clone(),
        };
        let receiver = Gateway::start(
            &options.program,
            &config(
                "receiver",
                &names.receiver_ns,
                topology::UNDERLAY_RECEIVER,
                addr(topology::UNDERLAY_SENDER),
                false,
                &options.receiver_cpus,
            ),
            receiver_variant,
            mask(receiver_variant),
            "receiver",
        )?;
        let sender = Gateway::start(
            &options.program,
            &config(
                "sender",
                &names.sender_ns,
                topology::UNDERLAY_SENDER,
                options
                    .sender_peer
                    .unwrap_or_else(|| addr(topology::UNDERLAY_RECEIVER)),
                true,
                &options.sender_cpus,
            ),
            sender_variant,
            mask(sender_variant),
            "sender",
        )?;
        Ok(GatewayPair { sender, receiver })
    }

    /// Fails if either gateway has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        self.sender.check_alive()?;
        self.receiver.check_alive()
    }

    /// Snapshots of both.
    pub fn snapshot(&mut self) -> Result<(GatewayStats, GatewayStats)> {
        Ok((self.sender.snapshot()?, self.receiver.snapshot()?))
    }

    /// Stops both; returns their final stats.
    pub fn stop(self) -> Result<(GatewayStats, GatewayStats)> {
        let sender = self.sender.stop();
        let receiver = self.receiver.stop();
        Ok((sender?, receiver?))
    }
}

/// Counters of a gateway's namespace that the runner reads around a run (the
/// gateway cannot see them from inside its own stats).
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub struct NamespaceCounters {
    /// The TUN device's `tx_dropped`.
    pub tun_queue_drops: u64,
    /// The TUN device's `rx_dropped` (packets the gateway wrote that the kernel
    /// dropped) plus the veth's `tx_dropped` and `rx_dropped`.
    pub link_drops: u64,
    /// UDP `RcvbufErrors`.
    pub udp_rcvbuf_errors: u64,
}

impl NamespaceCounters {
    /// Reads them for the gateway `gateway` in `netns`.
    pub fn read(netns: &str, gateway: &Gateway) -> Result<NamespaceCounters> {
        let tun = topology::link_stats(netns, topology::TUN)?;
        let veth = topology::link_stats(netns, topology::VETH)?;
        Ok(NamespaceCounters {
            tun_queue_drops: tun.tx_dropped,
            link_drops: tun.rx_dropped + veth.tx_dropped + veth.rx_dropped,
            udp_rcvbuf_errors: topology::udp_rcvbuf_errors(gateway.pid()),
        })
    }
}

/// One gateway's activity between two snapshots, with its namespace's counters
/// read around the same interval.
pub fn gateway_run(
    side: &str,
    variant: &str,
    before: (&GatewayStats, NamespaceCounters),
    after: (&GatewayStats, NamespaceCounters),
) -> GatewayRun {
    let (before, ns_before) = before;
    let (after, ns_after) = after;
    let d = |a: u64, b: u64| b.saturating_sub(a);
    let wall = d(before.monotonic_ns, after.monotonic_ns).max(1) as f64;
    let inbound = after.inbound.since(&before.inbound);
    let drops = inbound
        .drops
        .iter()
        .map(|(reason, n)| (reason.name().to_string(), n))
        .collect();
    let threads = after
        .threads
        .iter()
        .map(|t| {
            let was = before
                .threads
                .iter()
                .find(|b| b.name == t.name)
                .map_or(0, |b| b.cpu_ns);
            ThreadLoad {
                name: t.name.clone(),
                cpu_cores_used: d(was, t.cpu_ns) as f64 / wall,
                pinned_cpu: t.pinned_cpu,
            }
        })
        .collect();
    let (tx0, tx1, rx0, rx1) = (&before.tx, &after.tx, &before.rx, &after.rx);
    GatewayRun {
        side: side.to_string(),
        host: None,
        variant: variant.to_string(),
        sealed_packets: d(
            before.outbound.sealed_packets,
            after.outbound.sealed_packets,
        ),
        sealed_bytes: d(before.outbound.sealed_bytes, after.outbound.sealed_bytes),
        seal_refused: d(before.outbound.seal_refused, after.outbound.seal_refused),
        esp_packets_sent: d(tx0.udp_packets, tx1.udp_packets),
        esp_bytes_sent: d(tx0.udp_bytes, tx1.udp_bytes),
        esp_packets_received: d(rx0.udp_packets, rx1.udp_packets),
        esp_bytes_received: d(rx0.udp_bytes, rx1.udp_bytes),
        opened_packets: inbound.opened_packets,
        opened_bytes: inbound.opened_bytes,
        drops,
        nat_keepalives: inbound.nat_keepalives,
        non_esp: inbound.non_esp,
        socket_drops: d(before.socket_drops, after.socket_drops),
        namespace_udp_drops: d(ns_before.udp_rcvbuf_errors, ns_after.udp_rcvbuf_errors),
        tun_queue_drops: d(ns_before.tun_queue_drops, ns_after.tun_queue_drops),
        link_drops: d(ns_before.link_drops, ns_after.link_drops),
        seconds: wall / 1e9,
        io_errors: d(rx0.tun_write_errors, rx1.tun_write_errors)
            + d(tx0.send_errors, tx1.send_errors)
            + d(tx0.offload_errors, tx1.offload_errors)
            + d(tx0.oversize, tx1.oversize),
        tun_reads: d(tx0.tun_reads, tx1.tun_reads),
        tun_writes: d(rx0.tun_writes, rx1.tun_writes),
        cpu_cores_used: d(before.process_cpu_ns, after.process_cpu_ns) as f64 / wall,
        threads,
        split: after.split.map(|s| GatewaySplit {
            at_seconds: (s.monotonic_ns as f64 - before.monotonic_ns as f64) / 1e9,
            wait_share: s.wait_share,
        }),
    }
}
