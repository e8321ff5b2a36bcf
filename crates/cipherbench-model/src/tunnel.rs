//! Layer 4 results: iperf3 TCP and UDP through cipherbench's ESP-in-UDP tunnel
//! between two network namespaces, per transform and acceleration variant, next to
//! the underlay measured alone (the IIJ IPsec post's table, seed 004), with both
//! gateways' counters and CPU time for every run.
//!
//! Plain data: the tunnel runner fills it, the report renders it.

use crate::speed::VariantRecord;
use crate::stats::Summary;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The transport iperf3 measured.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// TCP (`iperf3 -c`).
    Tcp,
    /// UDP at a given rate (`iperf3 -c -u -b RATE`).
    Udp,
}

impl Protocol {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        }
    }

    /// TCP and UDP: what records without `protocols` measured.
    pub fn both() -> Vec<Protocol> {
        vec![Protocol::Tcp, Protocol::Udp]
    }
}

/// Which gateway(s) ran the variant; the other runs `accel` (the IIJ IPsec post
/// changed the sending side's engine and kept AES-NI at the receiver).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VariantSide {
    /// Both gateways.
    Both,
    /// Only the gateway on the iperf3 client's side (it seals the data).
    Sender,
    /// Only the gateway on the server's side (it opens the data).
    Receiver,
}

impl VariantSide {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            VariantSide::Both => "both",
            VariantSide::Sender => "sender",
            VariantSide::Receiver => "receiver",
        }
    }
}

fn one() -> usize {
    1
}

/// Where processes ran (`None`: not pinned, the scheduler chose).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Pinning {
    /// Cores of the sending gateway's threads: with one gateway thread the first
    /// runs TUN-to-UDP, the second (or the first again) UDP-to-TUN; with several,
    /// every thread may run on any of them.
    pub sender_gateway: Vec<usize>,
    /// Cores of the receiving gateway's threads.
    pub receiver_gateway: Vec<usize>,
    /// iperf3 client core (`-A`).
    pub iperf3_client: Option<usize>,
    /// iperf3 server core.
    pub iperf3_server: Option<usize>,
}

/// The addresses of the topology.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Addresses {
    /// Sender's veth (underlay) address.
    pub underlay_sender: String,
    /// Receiver's veth address.
    pub underlay_receiver: String,
    /// Sender's TUN (inner) address: the iperf3 client.
    pub inner_sender: String,
    /// Receiver's TUN address: the iperf3 server.
    pub inner_receiver: String,
}

/// What `cipherbench tunnel` was asked to measure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TunnelConfig {
    /// Transform names (`null`, `aes256-sha256`, ...).
    pub transforms: Vec<String>,
    /// Variant names.
    pub variants: Vec<String>,
    /// Which gateways ran the variant.
    pub variant_side: VariantSide,
    /// `tc tbf` rate on the underlay, as given (`1gbit`); None: the bare veth.
    pub underlay_rate: Option<String>,
    /// The TUN devices' MTU.
    pub tunnel_mtu: u32,
    /// iperf3 `-l` of UDP runs (bytes per datagram), and of TCP runs in records
    /// without `tcp_length_bytes`; None: iperf3's default.
    pub length_bytes: Option<u64>,
    /// iperf3 `-l` of TCP runs (bytes per write); None: iperf3's default (128 KiB),
    /// or a record from before the field, whose TCP runs used `length_bytes`. Each
    /// run's `iperf.length_bytes` is what iperf3 itself reported using.
    #[serde(default)]
    pub tcp_length_bytes: Option<u64>,
    /// iperf3 `-b` of TCP runs (`tunnel --rate`), bits per second; None: unpaced.
    #[serde(default)]
    pub tcp_rate_bits_per_sec: Option<u64>,
    /// The protocols asked for, in order (records before this field: both).
    #[serde(default = "Protocol::both")]
    pub protocols: Vec<Protocol>,
    /// iperf3 `-w` for UDP runs (socket buffers, bytes): iperf3's server shares a
    /// core with the receiving gateway, and must absorb a gateway's batch.
    #[serde(default)]
    pub udp_window_bytes: Option<u64>,
    /// iperf3 `-t` of a measured run.
    pub duration_ns: u64,
    /// iperf3 `-O`: leading time excluded from a TCP run's figures.
    pub omit_ns: u64,
    /// Length of one UDP search probe.
    pub udp_probe_ns: u64,
    /// The UDP loss the search aims for (0.05: the IIJ IPsec post's 5 %).
    pub udp_target_loss: f64,
    /// Loss within `target ± tolerance` ends the search.
    pub udp_loss_tolerance: f64,
    /// Most probes per search.
    pub udp_max_probes: usize,
    /// iperf3 runs per point (the spread across runs).
    pub repeats: usize,
    /// Gateway: datagrams per batched system call.
    pub batch: usize,
    /// Gateway: TUN offloads (TSO in, GRO out).
    pub offload: bool,
    /// Gateway: UDP offloads (GSO sends of equal-length ESP datagrams, `UDP_GRO`).
    #[serde(default)]
    pub udp_offload: bool,
    /// Cores.
    pub pinning: Pinning,
    /// Crypto workers per direction in each gateway: 1 is the two-thread data path
    /// (one TUN-to-UDP, one UDP-to-TUN thread), N >= 2 an ordered pipeline of N
    /// workers in each direction (runs before this field existed had 1).
    #[serde(default = "one")]
    pub gateway_threads: usize,
    /// How that number was chosen: `--gateway-threads`, or the default for the
    /// cores this machine gave the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_threads_from: Option<String>,
    /// iperf3 `-P`: parallel streams of each run (their sum is the figure).
    #[serde(default = "one")]
    pub iperf3_parallel: usize,
    /// Addresses.
    pub addresses: Addresses,
    /// The IPsec stacks measured, in order: cipherbench's own gateways and/or
    /// strongSwan. Absent from records of versions that had only their own.
    #[serde(
        default = "Stack::own_only",
        skip_serializing_if = "Stack::is_own_only"
    )]
    pub stacks: Vec<Stack>,
    /// strongSwan's crypto backends measured (`openssl`, `aesni`, `c`); empty
    /// unless strongSwan ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub strongswan_backends: Vec<String>,
}

/// An IPsec stack the tunnel layer can measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Stack {
    /// cipherbench's own ESP-in-UDP gateways.
    Own,
    /// strongSwan's charon with kernel-libipsec: a real IKEv2 stack whose ESP runs
    /// in userspace over a TUN device (a reference, not kernel IPsec speed).
    Strongswan,
}

impl Stack {
    /// The stack's name on the command line and in records.
    pub fn as_str(self) -> &'static str {
        match self {
            Stack::Own => "own",
            Stack::Strongswan => "strongswan",
        }
    }

    /// The default: cipherbench's own gateways only.
    pub fn own_only() -> Vec<Stack> {
        vec![Stack::Own]
    }

    /// Whether `stacks` is the default (not written, for older readers).
    pub fn is_own_only(stacks: &[Stack]) -> bool {
        stacks == [Stack::Own]
    }
}

/// One iperf3 run, parsed from its `-J` output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IperfRun {
    /// TCP or UDP.
    pub protocol: Protocol,
    /// The client command as run.
    pub command: Vec<String>,
    /// UDP `-b`, bits per second.
    pub target_bits_per_sec: Option<f64>,
    /// Bytes per write (`-l`) as iperf3 reports it.
    pub length_bytes: u64,
    /// TCP MSS iperf3 saw.
    pub tcp_mss_bytes: Option<u64>,
    /// Measured time (omitted seconds excluded), seconds as iperf3 reports.
    pub seconds: f64,
    /// Payload bytes the client sent.
    pub sent_bytes: u64,
    /// Payload bytes the server received.
    pub received_bytes: u64,
    /// Payload bytes the client wrote over the whole test, omitted warm-up
    /// included (what the gateways saw).
    pub sent_bytes_total: u64,
    /// Payload bytes the server read over the whole test, warm-up included.
    pub received_bytes_total: u64,
    /// TCP retransmissions over the whole test, warm-up included.
    pub retransmits_total: Option<u64>,
    /// Client-side rate.
    pub sender_bits_per_sec: f64,
    /// Server-side rate: the throughput.
    pub receiver_bits_per_sec: f64,
    /// TCP retransmitted segments.
    pub retransmits: Option<u64>,
    /// UDP datagrams sent.
    pub packets: Option<u64>,
    /// UDP datagrams lost.
    pub lost_packets: Option<u64>,
    /// UDP loss, percent.
    pub lost_percent: Option<f64>,
    /// UDP datagrams received out of order.
    pub out_of_order: Option<u64>,
    /// UDP jitter, milliseconds.
    pub jitter_ms: Option<f64>,
    /// Server-side rate per reporting interval (omitted ones excluded).
    pub interval_bits_per_sec: Vec<f64>,
    /// iperf3's own CPU use on the client's host, percent of one core.
    pub cpu_client_percent: Option<f64>,
    /// On the server's host.
    pub cpu_server_percent: Option<f64>,
}

/// One probe of the UDP rate search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UdpProbe {
    /// `-b`.
    pub target_bits_per_sec: f64,
    /// What the client managed to send.
    pub sender_bits_per_sec: f64,
    /// What arrived.
    pub receiver_bits_per_sec: f64,
    /// Loss, percent.
    pub lost_percent: f64,
}

/// How the UDP search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SearchOutcome {
    /// A probe landed within the tolerance of the target loss.
    Converged,
    /// The iperf3 client could not send faster and loss stayed below the target:
    /// the tunnel is faster than the load generator (the chosen rate is the most
    /// it sent).
    SenderLimited,
    /// Out of probes: the closest probe's rate was taken.
    MaxProbes,
    /// The rates just below and just above the target loss were within 2 % of each
    /// other (the loss jumps there, or noise moves it): the closest probe's rate was
    /// taken before the probes ran out.
    Bracketed,
}

/// The search for the UDP rate that gives the target loss.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UdpSearch {
    /// Probes in order.
    pub probes: Vec<UdpProbe>,
    /// The `-b` used for the measured runs.
    pub chosen_bits_per_sec: f64,
    /// How it ended.
    pub outcome: SearchOutcome,
}

/// One gateway's activity during one run: differences of its stats snapshots taken
/// just before and just after iperf3.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GatewayRun {
    /// `sender` or `receiver`.
    pub side: String,
    /// The host it ran on, as it reported its name, when the two gateways ran on two
    /// hosts (`tunnel --peer`); None between namespaces of one machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The variant it ran.
    pub variant: String,
    /// Inner packets sealed (TUN -> UDP).
    pub sealed_packets: u64,
    /// Their bytes (inner IP packets).
    pub sealed_bytes: u64,
    /// Packets the SA refused to seal.
    pub seal_refused: u64,
    /// ESP datagrams sent.
    pub esp_packets_sent: u64,
    /// Their bytes (UDP payload).
    pub esp_bytes_sent: u64,
    /// UDP datagrams received on the ESP-in-UDP port, whatever they were: each is
    /// opened, dropped (by reason), a NAT keepalive or non-ESP ([`GatewayRun::unaccounted`]).
    pub esp_packets_received: u64,
    /// Their bytes.
    pub esp_bytes_received: u64,
    /// Inner packets opened (UDP -> TUN).
    pub opened_packets: u64,
    /// Their bytes.
    pub opened_bytes: u64,
    /// Inbound drops by reason (every reason listed).
    pub drops: BTreeMap<String, u64>,
    /// RFC 3948 §2.3 NAT keepalives received (one 0xFF byte: not ESP, not a drop).
    /// Absent from records of versions that did not count them.
    #[serde(default)]
    pub nat_keepalives: u64,
    /// RFC 3948 §2.2 non-ESP-marker datagrams (IKE) received and ignored. Absent
    /// from records of versions that did not count them.
    #[serde(default)]
    pub non_esp: u64,
    /// Datagrams the kernel dropped at the gateway's full UDP receive buffer.
    pub socket_drops: u64,
    /// Datagrams dropped at any full UDP receive buffer in the gateway's namespace
    /// (`RcvbufErrors` of /proc/net/snmp): the gateway's own (`socket_drops`) plus,
    /// on the receiving side, iperf3's server socket.
    #[serde(default)]
    pub namespace_udp_drops: u64,
    /// Packets the kernel dropped at the TUN queue because the gateway did not read
    /// them in time (`tx_dropped` of the TUN device).
    pub tun_queue_drops: u64,
    /// Packets the kernel dropped on the gateway's TUN device on the way in
    /// (`rx_dropped`) and on its namespace's veth end (both directions).
    #[serde(default)]
    pub link_drops: u64,
    /// TUN writes refused, sends refused, offload errors, oversize packets.
    pub io_errors: u64,
    /// TUN reads and writes (fewer than packets when offloads batch them).
    pub tun_reads: u64,
    /// TUN writes.
    pub tun_writes: u64,
    /// Wall time between the two snapshots, seconds.
    #[serde(default)]
    pub seconds: f64,
    /// CPU time of the whole gateway / wall time (cores).
    pub cpu_cores_used: f64,
    /// Per thread: name, CPU time / wall time (1.0 = a whole core), pinned core.
    pub threads: Vec<ThreadLoad>,
    /// A gateway on one core runs both directions on its `tun<->udp` thread until
    /// that thread waits for its core over a quarter of the time, then hands the
    /// socket's side to its spare for good: whether, and when, it had by the end of
    /// this run. None: it had not (or the gateway has another layout, or the
    /// record is older than this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<GatewaySplit>,
}

/// When a one-core gateway's `tun<->udp` thread split into two threads.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GatewaySplit {
    /// Seconds from the start of this run (the gateway's snapshot just before
    /// iperf3) to the split; zero or negative: it had split before the run began
    /// (in an earlier run of the same point's gateways), so the whole run had two
    /// threads.
    pub at_seconds: f64,
    /// The share of the 200 ms before the split that the thread waited for its
    /// core (runnable, not running): over 0.25 by the rule.
    pub wait_share: f64,
}

impl GatewaySplit {
    /// Did the split happen during the run (not before it)?
    pub fn during_run(&self) -> bool {
        self.at_seconds > 0.0
    }
}

/// One gateway thread's load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThreadLoad {
    /// `tun->udp` or `udp->tun`.
    pub name: String,
    /// CPU time / wall time.
    pub cpu_cores_used: f64,
    /// Pinned core.
    pub pinned_cpu: Option<usize>,
}

impl GatewayRun {
    /// Every inbound drop (saturating: a run.json may hold any counts, and rendering
    /// it must not overflow).
    pub fn drops_total(&self) -> u64 {
        self.drops.values().fold(0, |sum, &n| sum.saturating_add(n))
    }

    /// Datagrams received that got no outcome: `received - (opened + drops +
    /// keepalives + non-ESP)`. Every datagram has exactly one, so anything but 0 is
    /// a counting bug (negative: counted twice). A record from before keepalives
    /// and non-ESP were counted shows any it received here.
    pub fn unaccounted(&self) -> i128 {
        let accounted = [
            self.opened_packets,
            self.drops_total(),
            self.nat_keepalives,
            self.non_esp,
        ]
        .map(i128::from)
        .iter()
        .sum::<i128>();
        i128::from(self.esp_packets_received) - accounted
    }

    /// Inner packets sealed per TUN read: how many MSS-sized segments each
    /// super-packet the kernel handed over held (1 without TUN offloads). The
    /// sending gateway's figure for the data direction; None without reads.
    pub fn sealed_per_tun_read(&self) -> Option<f64> {
        (self.tun_reads > 0).then(|| self.sealed_packets as f64 / self.tun_reads as f64)
    }

    /// Inner packets opened per TUN write: how many segments each GSO packet
    /// written back held. The receiving gateway's figure for the data direction;
    /// None without writes.
    pub fn opened_per_tun_write(&self) -> Option<f64> {
        (self.tun_writes > 0).then(|| self.opened_packets as f64 / self.tun_writes as f64)
    }

    /// The busiest thread's load (1.0 = saturated core).
    pub fn busiest_thread(&self) -> Option<&ThreadLoad> {
        self.threads
            .iter()
            .max_by(|a, b| a.cpu_cores_used.total_cmp(&b.cpu_cores_used))
    }
}

/// Do the bytes iperf3 reports agree with what the gateways counted?
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ByteCheck {
    /// Payload bytes iperf3's server received.
    pub iperf_bytes: u64,
    /// Inner bytes the receiving gateway opened (sender -> receiver direction).
    pub opened_bytes: u64,
    /// Inner packets it opened.
    pub opened_packets: u64,
    /// The least the opened bytes may be: iperf3's bytes plus the smallest headers
    /// per packet (IPv4 20 + UDP 8, or IPv4 20 + TCP 20).
    pub expected_min: u64,
    /// The most: iperf3's bytes plus the largest headers per packet (TCP with
    /// options: 60) plus what else crossed the tunnel (iperf3's control connection,
    /// TCP retransmissions), bounded as described in METHODOLOGY.md.
    pub expected_max: u64,
    /// Within the bounds.
    pub ok: bool,
}

/// Which side ran out first, and the evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Saturation {
    /// `sender_gateway`, `receiver_gateway`, `underlay` or `none`.
    pub side: String,
    /// One sentence for a person.
    pub evidence: String,
}

/// One measured run through the tunnel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TunnelRun {
    /// iperf3's view.
    pub iperf: IperfRun,
    /// The gateway on the client's side (seals the data).
    pub sender: GatewayRun,
    /// The gateway on the server's side (opens the data).
    pub receiver: GatewayRun,
    /// Bytes reconciliation.
    pub byte_check: ByteCheck,
    /// Where the bottleneck was.
    pub saturation: Saturation,
    /// How quiet the machine was on the CPUs the gateways and iperf3 used during the run
    /// (None: not recorded, as by an older cipherbench).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<Box<crate::noise::Noise>>,
    /// In a two-host run (`tunnel --peer`): how quiet the peer was on the CPUs of its
    /// end (its gateway and iperf3), watched there by its agent over the same run.
    /// None: one machine, or an older record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_noise: Option<Box<crate::noise::HostNoise>>,
    /// The round of the point's measurement this run is (from 0): the variants of a
    /// transform are measured in interleaved rounds (`crate::interleave`), and run
    /// `round` of one variant sits next to run `round` of the others, which pairs
    /// them for a ratio's interval. None: an older record, measured variant after
    /// variant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<usize>,
    /// The run's place in the layer's measuring order (0 first; a UDP search's
    /// probes take places too, so a gap is a probe not kept): what shows the rounds
    /// alternating. None: an older record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<usize>,
    /// The iperf3 client's data connection as the kernel saw it about halfway
    /// through a TCP run (`ss -tinH` in the sender's namespace). None: a UDP run,
    /// a sample that failed (recorded as absent, never an error), or an older
    /// record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<Box<TcpSample>>,
}

/// One TCP connection's state (`TCP_INFO` as `ss -ti` prints it), sampled once
/// mid-run from the sending side: what a run's throughput was held to (the
/// congestion window, the receiver's window, pacing, the path's RTT). A field `ss`
/// did not print is None. Rates in bits per second, times in milliseconds.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TcpSample {
    /// Seconds from the start of the iperf3 client (its `-O` warm-up included) to
    /// the sample.
    pub at_seconds: f64,
    /// Established connections to the server `ss` listed (iperf3's control
    /// connection and each data stream); the sample is the one with the most bytes
    /// acknowledged.
    pub connections: usize,
    /// Congestion window, segments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwnd: Option<u64>,
    /// Slow-start threshold, segments (None: still in slow start, never lowered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssthresh: Option<u64>,
    /// Smoothed RTT, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<f64>,
    /// Its variation, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rttvar_ms: Option<f64>,
    /// The smallest RTT seen, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_rtt_ms: Option<f64>,
    /// Sender MSS, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mss: Option<u64>,
    /// `send`: cwnd x MSS / RTT, what the window allows, bit/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_bits_per_sec: Option<f64>,
    /// The kernel's pacing rate, bit/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing_bits_per_sec: Option<f64>,
    /// The most recent delivery rate estimate, bit/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_bits_per_sec: Option<f64>,
    /// The peer's advertised window, bytes (newer `ss` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snd_wnd: Option<u64>,
    /// Receive-side space estimate of this (sending) socket, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcv_space: Option<u64>,
    /// Bytes acknowledged so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_acked: Option<u64>,
    /// Retransmitted segments so far (the total of `retrans:now/total`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrans: Option<u64>,
    /// Time the connection had data to send, ms since it began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_ms: Option<u64>,
    /// Of it, limited by the receiver's window, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rwnd_limited_ms: Option<u64>,
    /// Of it, limited by the send buffer, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sndbuf_limited_ms: Option<u64>,
    /// `app_limited`: the application did not fill the window at the last
    /// delivery-rate sample.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub app_limited: bool,
    /// The connection's `ss` text, for what the fields above leave out (cut to
    /// [`TcpSample::RAW_MAX`] bytes).
    pub raw: String,
}

impl TcpSample {
    /// The most of `ss`'s text kept in [`TcpSample::raw`].
    pub const RAW_MAX: usize = 1024;

    /// The share of the busy time that the receiver's window limited (None without
    /// a busy time).
    pub fn rwnd_limited_share(&self) -> Option<f64> {
        let busy = self.busy_ms.filter(|&b| b > 0)?;
        Some(self.rwnd_limited_ms.unwrap_or(0) as f64 / busy as f64)
    }

    /// The same for the send buffer.
    pub fn sndbuf_limited_share(&self) -> Option<f64> {
        let busy = self.busy_ms.filter(|&b| b > 0)?;
        Some(self.sndbuf_limited_ms.unwrap_or(0) as f64 / busy as f64)
    }
}

/// A transform x variant x protocol point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TunnelPoint {
    /// Transform name.
    pub transform: String,
    /// Variant name.
    pub variant: String,
    /// Which gateways ran it.
    pub variant_side: VariantSide,
    /// TCP or UDP.
    pub protocol: Protocol,
    /// The UDP rate search (UDP points).
    pub search: Option<UdpSearch>,
    /// The measured runs.
    pub runs: Vec<TunnelRun>,
    /// Server-side throughput over the runs: median and spread across runs.
    pub throughput_bits_per_sec: Summary,
    /// Server-side throughput per interval over all runs: the spread within runs.
    pub interval_bits_per_sec: Summary,
    /// Throughput / the underlay's TCP throughput.
    pub underlay_share: Option<f64>,
}

/// An iperf3 client that sent less than asked (the run's saturation side
/// `iperf3_client`) at this share of a core or more was the load generator's own
/// limit; below it, its writes were held back by the sending gateway, the tunnel's
/// limit (METHODOLOGY.md, "A client that sends less than asked").
pub const CLIENT_BUSY: f64 = 0.80;

/// A run below this share of the median of its point's other runs ...
pub const STALLED_SHARE: f64 = 0.5;

/// A TCP run at a fixed offered load (`tunnel --rate`) carried it when iperf3's
/// server received at least this share of it.
pub const CARRIED_SHARE: f64 = 0.95;

/// ... while both gateways' busiest threads used less than this share of a core
/// stalled outside the gateways: iperf3, the kernel or the machine set its figure.
pub const IDLE_GATEWAY: f64 = 0.5;

impl IperfRun {
    /// The iperf3 client used [`CLIENT_BUSY`] of a core or more (an unrecorded share
    /// counts as busy): a shortfall against the rate asked was its own limit.
    pub fn client_busy(&self) -> bool {
        self.cpu_client_percent.unwrap_or(100.0) >= CLIENT_BUSY * 100.0
    }
}

impl TunnelRun {
    /// The iperf3 client was the limit: it sent under 90 % of the rate asked, with
    /// little loss, while busy ([`IperfRun::client_busy`], as the runner's
    /// `load_generator_saturated` warning takes it).
    pub fn client_limited(&self) -> bool {
        self.saturation.side == "iperf3_client" && self.iperf.client_busy()
    }

    /// Both gateways' busiest threads under [`IDLE_GATEWAY`] of a core (false where
    /// a gateway recorded no threads: nothing says it was idle).
    pub fn gateways_idle(&self) -> bool {
        [&self.sender, &self.receiver].iter().all(|g| {
            g.busiest_thread()
                .is_some_and(|t| t.cpu_cores_used < IDLE_GATEWAY)
        })
    }
}

impl TunnelPoint {
    /// Why the instrument, not the tunnel, set this point's figure, if it did: a
    /// run whose iperf3 client was the limit ([`TunnelRun::client_limited`]), or a
    /// run that stalled: under [`STALLED_SHARE`] of the median of the point's other
    /// runs (at least one) while both gateways were idle
    /// ([`TunnelRun::gateways_idle`]). Either can only pull the point's median
    /// down, so its figure is then a lower bound on the tunnel's. One sentence
    /// naming the runs (1-based).
    pub fn instrument_limit(&self) -> Option<String> {
        let n = self.runs.len();
        let mut why = Vec::new();
        for (i, r) in self.runs.iter().enumerate() {
            let run = if n == 1 {
                "its run".to_string()
            } else {
                format!("run {} of {n}", i + 1)
            };
            if r.client_limited() {
                why.push(format!(
                    "{run}: the iperf3 client sent {:.0} of the {:.0} Mbit/s asked at {:.0} % of a core (the load generator's limit)",
                    r.iperf.sender_bits_per_sec / 1e6,
                    r.iperf.target_bits_per_sec.unwrap_or(0.0) / 1e6,
                    r.iperf.cpu_client_percent.unwrap_or(100.0)
                ));
                continue;
            }
            let others: Vec<f64> = self
                .runs
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, o)| o.iperf.receiver_bits_per_sec)
                .collect();
            let Some(median) = crate::stats::Summary::of(&others).map(|s| s.median) else {
                continue;
            };
            let rate = r.iperf.receiver_bits_per_sec;
            if rate < STALLED_SHARE * median && r.gateways_idle() {
                let busiest = |g: &GatewayRun| g.busiest_thread().map_or(0.0, |t| t.cpu_cores_used);
                why.push(format!(
                    "{run} stalled at {:.0} Mbit/s, {:.2}x the median of the others, with the gateways idle (busiest threads {:.2} and {:.2} of a core)",
                    rate / 1e6,
                    rate / median,
                    busiest(&r.sender),
                    busiest(&r.receiver)
                ));
            }
        }
        (!why.is_empty()).then(|| why.join("; "))
    }

    /// What the noise judge says of the point's runs: each kind once, from the run
    /// where the machine was busiest. In a two-host run, the peer's windows are
    /// judged the same way and their findings name the peer.
    pub fn noise_findings(&self) -> Vec<crate::noise::Finding> {
        self.per_host(|windows| crate::noise::findings_over(windows))
    }

    /// The governor's finding of the point's windows, here and (naming it) on the
    /// peer: once for each host that has one.
    pub fn governor_findings(&self) -> Vec<crate::noise::Finding> {
        self.per_host(|windows| {
            crate::noise::governor_finding(windows)
                .into_iter()
                .collect()
        })
    }

    /// `judge` of this host's windows, then of the peer's (if any), naming the peer.
    fn per_host(
        &self,
        judge: impl Fn(Vec<&crate::noise::Noise>) -> Vec<crate::noise::Finding>,
    ) -> Vec<crate::noise::Finding> {
        let mut out = judge(
            self.runs
                .iter()
                .filter_map(|r| r.noise.as_deref())
                .collect(),
        );
        let peer: Vec<&crate::noise::HostNoise> = self
            .runs
            .iter()
            .filter_map(|r| r.peer_noise.as_deref())
            .collect();
        if let Some(first) = peer.first() {
            out.extend(crate::noise::on_host(
                "peer",
                &first.host,
                judge(peer.iter().map(|p| &p.noise).collect()),
            ));
        }
        out
    }

    /// This point's throughput over `other`'s (the medians of their runs, what iperf3's
    /// server received) with its 95 % bootstrap interval over the runs
    /// ([`crate::interval`]). `Paired` when the two were measured in one set of
    /// interleaved rounds (two variants of a transform through one stack): runs
    /// are then paired by round, so a drift shared by a round cancels, provided
    /// every run has a round and both sides the same rounds (else, as for an older
    /// record, and always for `Independent`, each side is resampled on its own).
    /// None under 3 runs a side.
    pub fn ratio_interval(
        &self,
        other: &TunnelPoint,
        pairing: crate::interval::Pairing,
    ) -> Option<crate::interval::RatioInterval> {
        use crate::interval::{Pairing, RatioInterval, DEFAULT_SEED};
        match self.paired_rates(other) {
            Some((a, b)) if pairing == Pairing::Paired => {
                RatioInterval::bootstrap(&a, &b, Pairing::Paired, DEFAULT_SEED)
            }
            _ => {
                let rates = |p: &TunnelPoint| -> Vec<f64> {
                    p.runs
                        .iter()
                        .map(|r| r.iperf.receiver_bits_per_sec)
                        .collect()
                };
                RatioInterval::bootstrap(
                    &rates(self),
                    &rates(other),
                    Pairing::Independent,
                    DEFAULT_SEED,
                )
            }
        }
    }

    /// This point's and `other`'s runs' server-side rates, round by round, when
    /// every run of both has a round and both have the same rounds (the variants
    /// were measured in turn); None otherwise (an older record, a missing run).
    pub fn paired_rates(&self, other: &TunnelPoint) -> Option<(Vec<f64>, Vec<f64>)> {
        let by_round = |p: &TunnelPoint| -> Option<Vec<(usize, f64)>> {
            let mut v: Vec<(usize, f64)> = p
                .runs
                .iter()
                .map(|r| Some((r.round?, r.iperf.receiver_bits_per_sec)))
                .collect::<Option<_>>()?;
            v.sort_by_key(|(round, _)| *round);
            Some(v)
        };
        let (a, b) = (by_round(self)?, by_round(other)?);
        let rounds = |v: &[(usize, f64)]| v.iter().map(|(r, _)| *r).collect::<Vec<_>>();
        let values = |v: &[(usize, f64)]| v.iter().map(|(_, x)| *x).collect::<Vec<_>>();
        (rounds(&a) == rounds(&b)).then(|| (values(&a), values(&b)))
    }
}

/// The underlay measured alone (iperf3 straight over the veth).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UnderlayPoint {
    /// TCP or UDP.
    pub protocol: Protocol,
    /// The runs.
    pub runs: Vec<IperfRun>,
    /// Server-side throughput over the runs.
    pub throughput_bits_per_sec: Summary,
    /// Per interval over all runs.
    pub interval_bits_per_sec: Summary,
}

/// Everything layer 4 measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TunnelResults {
    /// The plan.
    pub config: TunnelConfig,
    /// The underlay alone.
    pub underlay: Vec<UnderlayPoint>,
    /// The tunnel points.
    pub points: Vec<TunnelPoint>,
    /// The variants as the gateways' OpenSSL reported them.
    pub variants: Vec<VariantRecord>,
    /// iperf3's version.
    pub iperf3_version: Option<String>,
    /// Where the gateways and iperf3 ran (whole cores per side) and what that
    /// placement cannot promise; None when nothing was pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<crate::topology::Placement>,
    /// strongSwan measured in the same topology (`--stack strongswan`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strongswan: Option<StrongswanResults>,
    /// The tunnel ran between this host and another (`tunnel --peer`): the peer as
    /// checked, each host's end, and the variants as judged on the peer. None
    /// between namespaces of one machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<PeerRecord>,
}

/// `tunnel --peer`: the sending gateway and the iperf3 client ran here, the
/// receiving gateway and the iperf3 server on the peer, over the real network.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PeerRecord {
    /// The peer's agent as the coordinator checked it before anything ran: name as
    /// given, host name, kernel, CPU, OpenSSL, build, clock offset.
    pub agent: crate::agents::AgentRecord,
    /// This host's end (the sender).
    pub here: HostEnd,
    /// The peer's end (the receiver).
    pub there: HostEnd,
    /// The variants as judged on the peer, each against the peer's own accel (a
    /// variant is judged on the host it ran on; [`TunnelResults::variants`] holds
    /// this host's judgement).
    pub variants: Vec<VariantRecord>,
}

/// One host's end of a two-host tunnel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostEnd {
    /// Its host name, as it reported it.
    pub hostname: String,
    /// Its underlay address: the gateway's UDP 4500 socket and the underlay's
    /// iperf3 end.
    pub address: String,
    /// `sender` (with the iperf3 client) or `receiver` (with the iperf3 server).
    pub gateway: String,
    /// The gateway's crypto workers per direction on this host.
    pub gateway_threads: usize,
    /// The CPUs the gateway's threads were pinned to (empty: not pinned).
    pub gateway_cpus: Vec<usize>,
    /// The CPU iperf3 was pinned to there (None: not pinned).
    pub iperf3_cpu: Option<usize>,
    /// The placement the host made from its own topology (None: `--no-pin`).
    pub placement: Option<crate::topology::Placement>,
    /// The CPUs the gateway's worker threads may run on, read from
    /// `/proc/PID/task/TID/status` (`Cpus_allowed_list`) once the gateway was up:
    /// the pinning by effect (the union over its threads).
    pub gateway_affinity: Vec<usize>,
}

/// strongSwan (charon with kernel-libipsec) measured in the same namespaces, with
/// the same iperf3 runs, beside cipherbench's own gateways. Its ESP runs in
/// userspace (libipsec reads and writes a TUN device), so it is a reference stack,
/// not the speed of kernel IPsec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StrongswanResults {
    /// `charon --version` (such as `Linux strongSwan U5.9.8/K6.1.0`).
    pub version: String,
    /// Where ESP ran: `kernel-libipsec (userspace, TUN)`.
    pub esp_path: String,
    /// One line on the kernel's own IPsec (xfrm), as probed in the run's namespace.
    pub kernel_xfrm: String,
    /// The points, per crypto backend.
    pub points: Vec<StrongswanPoint>,
    /// The variants of the `openssl` backend, judged by effect in a probe child
    /// with charon's environment and checked against charon's own environment.
    pub variants: Vec<VariantRecord>,
}

/// One strongSwan point: a crypto backend, and a transform x variant x protocol
/// measured exactly as cipherbench's own gateways are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StrongswanPoint {
    /// `openssl`, `aesni` or `c`.
    pub backend: String,
    /// charon's plugin list (`charon.load`).
    pub plugins: String,
    /// The ESP proposal asked for (`aes256-sha256`).
    pub esp_proposal: String,
    /// What the CHILD_SA negotiated, as `swanctl --list-sas` shows it
    /// (`ESP:AES_CBC-256/HMAC_SHA2_256_128`).
    pub negotiated: String,
    /// The plugins that registered the negotiated algorithms, from
    /// `swanctl --list-algs` (`AES_CBC[openssl]`, `HMAC_SHA2_256_128[openssl]`).
    pub served_by: Vec<String>,
    /// IKE_SA_INIT to an installed CHILD_SA, nanoseconds.
    pub ike_ns: u64,
    /// The point.
    pub point: TunnelPoint,
}

impl TunnelResults {
    /// The point for a transform, variant and protocol.
    pub fn point(
        &self,
        transform: &str,
        variant: &str,
        protocol: Protocol,
    ) -> Option<&TunnelPoint> {
        self.points
            .iter()
            .find(|p| p.transform == transform && p.variant == variant && p.protocol == protocol)
    }

    /// The bytes per write (TCP) or datagram (UDP) iperf3 reported using in this
    /// protocol's first run through the tunnel; else what the config asked, in
    /// records whose runs do not say. None: iperf3's default or nothing known.
    pub fn iperf_length(&self, protocol: Protocol) -> Option<u64> {
        let reported = self
            .points
            .iter()
            .filter(|p| p.protocol == protocol)
            .flat_map(|p| p.runs.first())
            .map(|r| r.iperf.length_bytes)
            .find(|&l| l > 0);
        reported.or(match protocol {
            Protocol::Tcp => self.config.tcp_length_bytes,
            Protocol::Udp => self.config.length_bytes,
        })
    }

    /// The underlay's throughput for a protocol.
    pub fn underlay(&self, protocol: Protocol) -> Option<&UnderlayPoint> {
        self.underlay.iter().find(|u| u.protocol == protocol)
    }

    /// The variants as the tables judge them: this host's records, except that a
    /// variant that did not take effect on the peer (`tunnel --peer`) is the
    /// peer's record, so its figures are marked and its ratios not shown, with the
    /// peer's reason.
    pub fn judged_variants(&self) -> Vec<VariantRecord> {
        let Some(peer) = &self.peer else {
            return self.variants.clone();
        };
        self.variants
            .iter()
            .map(|here| {
                match peer
                    .variants
                    .iter()
                    .find(|p| p.name == here.name && !p.took_effect)
                {
                    Some(there) if here.took_effect => there.clone(),
                    _ => here.clone(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gateway run as an older version wrote it: no keepalive or non-ESP count.
    const OLD: &str = r#"{"side":"receiver","variant":"accel","sealed_packets":0,
        "sealed_bytes":0,"seal_refused":0,"esp_packets_sent":0,"esp_bytes_sent":0,
        "esp_packets_received":29096,"esp_bytes_received":0,"opened_packets":28972,
        "opened_bytes":0,"drops":{"replayed":100,"too_old":4},"socket_drops":0,
        "tun_queue_drops":0,"io_errors":0,"tun_reads":0,"tun_writes":0,
        "cpu_cores_used":0.5,"threads":[]}"#;

    #[test]
    fn a_config_without_stacks_is_the_own_gateways_and_is_written_as_before() {
        let mut config = TunnelConfig {
            transforms: vec!["aes128-gcm".into()],
            variants: vec!["accel".into()],
            variant_side: VariantSide::Both,
            underlay_rate: None,
            tunnel_mtu: 1400,
            length_bytes: Some(1220),
            tcp_length_bytes: None,
            tcp_rate_bits_per_sec: None,
            protocols: Protocol::both(),
            udp_window_bytes: None,
            duration_ns: 1,
            omit_ns: 0,
            udp_probe_ns: 1,
            udp_target_loss: 0.05,
            udp_loss_tolerance: 0.025,
            udp_max_probes: 4,
            repeats: 1,
            batch: 64,
            offload: true,
            udp_offload: true,
            pinning: Pinning::default(),
            gateway_threads: 1,
            gateway_threads_from: None,
            iperf3_parallel: 1,
            addresses: Addresses {
                underlay_sender: "a".into(),
                underlay_receiver: "b".into(),
                inner_sender: "c".into(),
                inner_receiver: "d".into(),
            },
            stacks: Stack::own_only(),
            strongswan_backends: Vec::new(),
        };
        let json = serde_json::to_value(&config).unwrap();
        assert!(json.get("stacks").is_none() && json.get("strongswan_backends").is_none());
        let back: TunnelConfig = serde_json::from_value(json).unwrap();
        assert_eq!(back, config);
        config.stacks = vec![Stack::Own, Stack::Strongswan];
        config.strongswan_backends = vec!["openssl".into()];
        let json = serde_json::to_value(&config).unwrap();
        assert_eq!(json["stacks"], serde_json::json!(["own", "strongswan"]));
        assert_eq!(
            serde_json::from_value::<TunnelConfig>(json).unwrap(),
            config
        );
    }

    /// A run whose server received `rate` bit/s, in `round`.
    fn run(rate: f64, round: Option<usize>) -> TunnelRun {
        let gateway: GatewayRun = serde_json::from_str(OLD).unwrap();
        TunnelRun {
            iperf: IperfRun {
                protocol: Protocol::Tcp,
                command: Vec::new(),
                target_bits_per_sec: None,
                length_bytes: 1220,
                tcp_mss_bytes: None,
                seconds: 1.0,
                sent_bytes: 0,
                received_bytes: 0,
                sent_bytes_total: 0,
                received_bytes_total: 0,
                retransmits_total: None,
                sender_bits_per_sec: rate,
                receiver_bits_per_sec: rate,
                retransmits: None,
                packets: None,
                lost_packets: None,
                lost_percent: None,
                out_of_order: None,
                jitter_ms: None,
                interval_bits_per_sec: Vec::new(),
                cpu_client_percent: None,
                cpu_server_percent: None,
            },
            sender: gateway.clone(),
            receiver: gateway,
            byte_check: ByteCheck {
                iperf_bytes: 0,
                opened_bytes: 0,
                opened_packets: 0,
                expected_min: 0,
                expected_max: 0,
                ok: true,
            },
            saturation: Saturation {
                side: "none".into(),
                evidence: String::new(),
            },
            noise: None,
            peer_noise: None,
            round,
            sequence: None,
            tcp: None,
        }
    }

    fn point(variant: &str, runs: Vec<TunnelRun>) -> TunnelPoint {
        TunnelPoint {
            transform: "aes128-gcm".into(),
            variant: variant.into(),
            variant_side: VariantSide::Both,
            protocol: Protocol::Tcp,
            search: None,
            runs,
            throughput_bits_per_sec: Summary::of_or_empty(&[]),
            interval_bits_per_sec: Summary::of_or_empty(&[]),
            underlay_share: None,
        }
    }

    #[test]
    fn interleaved_rounds_pair_their_runs_and_a_drift_cancels() {
        // The machine slows down round after round; each round's accel run is 1.5x
        // its noaesni run. Stored out of round order, as nothing promises order.
        let drift = [1.0, 0.8, 0.6, 0.4];
        let accel = point(
            "accel",
            [3, 1, 0, 2]
                .iter()
                .map(|&r| run(1.5e9 * drift[r], Some(r)))
                .collect(),
        );
        let noaesni = point(
            "noaesni",
            (0..4).map(|r| run(1e9 * drift[r], Some(r))).collect(),
        );
        let paired = accel
            .ratio_interval(&noaesni, crate::interval::Pairing::Paired)
            .unwrap();
        assert_eq!(paired.pairing, crate::interval::Pairing::Paired);
        assert!((paired.low - 1.5).abs() < 1e-9 && (paired.high - 1.5).abs() < 1e-9);
        // The same figures without rounds (an older record) are resampled apart,
        // and the drift swamps the gain.
        let strip = |p: &TunnelPoint| {
            let mut p = p.clone();
            for r in &mut p.runs {
                r.round = None;
            }
            p
        };
        let apart = strip(&accel)
            .ratio_interval(&strip(&noaesni), crate::interval::Pairing::Paired)
            .unwrap();
        assert_eq!(apart.pairing, crate::interval::Pairing::Independent);
        assert_eq!(apart.verdict, crate::interval::Verdict::NoClearDifference);
        assert!(apart.display().ends_with(", no clear difference"));
        // One run a side gives no interval.
        let one = point("accel", vec![run(1e9, Some(0))]);
        assert!(one
            .ratio_interval(&one.clone(), crate::interval::Pairing::Paired)
            .is_none());
        // Points of different stacks are never paired, rounds or not.
        let other = accel
            .ratio_interval(&noaesni, crate::interval::Pairing::Independent)
            .unwrap();
        assert_eq!(other.pairing, crate::interval::Pairing::Independent);
    }

    #[test]
    fn a_busy_peer_flags_the_point_naming_the_peer() {
        let noise =
            |foreign: f64, governor: &str| crate::noise::test_window(1, foreign, &[governor]);
        let two_host = |here: f64, peer: &[f64]| {
            let runs = peer
                .iter()
                .map(|&p| {
                    let mut r = run(1e9, Some(0));
                    r.noise = Some(Box::new(noise(here, "performance")));
                    r.peer_noise = Some(Box::new(crate::noise::HostNoise {
                        host: "root@h1".into(),
                        noise: noise(p, "schedutil"),
                    }));
                    r
                })
                .collect();
            point("accel", runs)
        };
        // This host quiet, the peer busy in one run of three: flagged once, naming it.
        let p = two_host(0.0, &[0.01, 0.35, 0.02]);
        let f = p.noise_findings();
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].kind, "noisy_machine");
        assert!(
            f[0].message
                .starts_with("peer root@h1: other processes took 35 %"),
            "{}",
            f[0].message
        );
        // The peer's governor is said once, naming it; this host's is quiet.
        let g = p.governor_findings();
        assert_eq!(g.len(), 1, "{g:?}");
        assert!(g[0]
            .message
            .starts_with("peer root@h1: CPU frequency scaling"));
        // Both hosts quiet: nothing; both busy: one finding for each host.
        assert!(two_host(0.0, &[0.01, 0.02]).noise_findings().is_empty());
        let both = two_host(0.30, &[0.30]).noise_findings();
        assert_eq!(both.len(), 2, "{both:?}");
        assert!(
            !both[0].message.starts_with("peer ") && both[1].message.starts_with("peer root@h1: ")
        );
        // A record without the peer's windows loads, and says nothing of the peer.
        let mut r = run(1e9, None);
        let json = serde_json::to_value(&r).unwrap();
        assert!(json.get("peer_noise").is_none());
        r.peer_noise = p.runs[1].peer_noise.clone();
        let back: TunnelRun = serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn a_run_without_round_or_place_is_written_as_before_and_loads() {
        let r = run(1e9, None);
        let json = serde_json::to_value(&r).unwrap();
        assert!(json.get("round").is_none() && json.get("sequence").is_none());
        let back: TunnelRun = serde_json::from_value(json).unwrap();
        assert_eq!(back, r);
        let mut r = r;
        r.round = Some(2);
        r.sequence = Some(17);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(
            (json["round"].as_u64(), json["sequence"].as_u64()),
            (Some(2), Some(17))
        );
        assert_eq!(serde_json::from_value::<TunnelRun>(json).unwrap(), r);
    }

    #[test]
    fn old_records_load_and_show_what_they_did_not_account_for() {
        let mut g: GatewayRun = serde_json::from_str(OLD).unwrap();
        assert_eq!((g.nat_keepalives, g.non_esp), (0, 0));
        // Issue 14's run: 29,096 = 28,972 opened + 104 dropped + 20 keepalives.
        assert_eq!(g.unaccounted(), 20);
        g.nat_keepalives = 12;
        g.non_esp = 8;
        assert_eq!(g.unaccounted(), 0);
        g.non_esp = 9;
        assert_eq!(g.unaccounted(), -1, "one counted twice");
        let again: GatewayRun = serde_json::from_value(serde_json::to_value(&g).unwrap()).unwrap();
        assert_eq!(again, g);
    }

    #[test]
    fn a_tcp_sample_is_written_only_when_taken_and_reads_back() {
        let mut r = run(1e9, None);
        let json = serde_json::to_value(&r).unwrap();
        assert!(json.get("tcp").is_none());
        // Fields ss did not print stay out of the record.
        r.tcp = Some(Box::new(TcpSample {
            at_seconds: 1.5,
            connections: 2,
            cwnd: Some(312),
            rtt_ms: Some(0.21),
            busy_ms: Some(1400),
            rwnd_limited_ms: Some(0),
            raw: "cubic cwnd:312".into(),
            ..TcpSample::default()
        }));
        let json = serde_json::to_value(&r).unwrap();
        let tcp = json["tcp"].as_object().unwrap();
        assert!(!tcp.contains_key("ssthresh") && !tcp.contains_key("app_limited"));
        assert_eq!(serde_json::from_value::<TunnelRun>(json).unwrap(), r);
        let s = r.tcp.as_deref().unwrap();
        assert_eq!(s.rwnd_limited_share(), Some(0.0));
        assert_eq!(s.sndbuf_limited_share(), Some(0.0));
        assert_eq!(TcpSample::default().rwnd_limited_share(), None);
    }

    #[test]
    fn packets_per_tun_call_come_from_the_run_counters() {
        let mut g: GatewayRun = serde_json::from_str(OLD).unwrap();
        g.tun_reads = 0;
        g.tun_writes = 0;
        assert_eq!(
            (g.sealed_per_tun_read(), g.opened_per_tun_write()),
            (None, None)
        );
        g.sealed_packets = 4400;
        g.tun_reads = 100;
        g.opened_packets = 4400;
        g.tun_writes = 200;
        assert_eq!(g.sealed_per_tun_read(), Some(44.0));
        assert_eq!(g.opened_per_tun_write(), Some(22.0));
    }
}
