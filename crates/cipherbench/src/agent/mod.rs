//! Beyond one machine: `cipherbench agent`, the same binary on every client host,
//! and the coordinator's side of it ([`fleet`]).
//!
//! The agent is launched by a launcher that already exists, OpenSSH (`ssh HOST
//! cipherbench agent`, the user's own config, keys and known_hosts), and speaks over
//! the channel's stdin and stdout: one JSON object per line, a [`Request`] in, a
//! [`Reply`] out, in order; while it works on a request it says so every
//! [`HEARTBEAT`] ([`Reply::Working`]), so the coordinator can wait as long as the
//! work takes on a busy host and still tell a frozen or gone agent within seconds
//! (`fleet::SILENCE`). It keeps no state between requests but the connection,
//! and ends when its stdin closes (the coordinator, or its ssh, went away), so a
//! killed coordinator leaves nothing running on the hosts.
//!
//! This module holds the protocol (the messages, plain data, and the histogram codec:
//! recorded buckets as `(value, count)` pairs) and, in [`fleet`], the launcher and
//! the coordinator's connections; [`deploy`] puts this build on a host over the same
//! ssh, where the launcher finds it. It sits below the layers: what a load request or a
//! tunnel end means is the layers' (`tls::agents`, `tunnel::peer`), and the agent's
//! own loop, which hands each request to its layer, is `agent_server` above them.

pub mod deploy;
pub mod fleet;

use anyhow::{anyhow, bail, Result};
use cipherbench_model::tls::FailureReason;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Bumped whenever a message changes shape; agents of another protocol are refused
/// like agents of another version. 6: [`Reply::Working`]. 7: agents read by sample
/// ([`LoadRequest::verify`], [`WireReport::verified`]).
pub const PROTOCOL: u32 = 7;

/// How often an agent working on a request says so ([`Reply::Working`]).
pub const HEARTBEAT: Duration = Duration::from_secs(2);

/// This build's version, which every agent must share.
pub fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// This build's identity, which every agent must share: the SHA-256 of this
/// process's own executable (read through `/proc/self/exe`, so the file it started
/// from even if replaced since), with the commit and profile it was built from.
/// Two builds that share a version (a debug and a release build, two commits, two
/// compilers) differ in their bytes, and a debug agent's gateway would measure
/// something else; a copy of the same binary is the same build. Computed once.
pub fn build() -> &'static str {
    static BUILD: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BUILD.get_or_init(|| {
        let profile = if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        };
        let hash = executable_digest()
            .map(|h| format!("sha256:{}", &h[..16]))
            .unwrap_or_else(|e| format!("unhashed ({e})"));
        format!("{hash} (commit {}, {profile})", env!("CIPHERBENCH_COMMIT"))
    })
}

/// The SHA-256 of this process's executable, 64 hex digits, computed once: the
/// name [`deploy`] gives this build on a host, and the identity [`build`] quotes.
pub fn executable_digest() -> Result<&'static str> {
    static DIGEST: std::sync::OnceLock<std::result::Result<String, String>> =
        std::sync::OnceLock::new();
    DIGEST
        .get_or_init(|| executable_sha256().map_err(|e| format!("{e:#}")))
        .as_deref()
        .map_err(|e| anyhow!("hashing this executable (/proc/self/exe): {e}"))
}

/// The SHA-256 of this process's executable, hex.
fn executable_sha256() -> Result<String> {
    use std::io::Read;
    let mut f = std::fs::File::open("/proc/self/exe")?;
    let mut h = cipherbench_crypto::digest::Sha256::new()?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n])?;
    }
    Ok(cipherbench_crypto::digest::to_hex(&h.finish()?))
}

/// What the coordinator asks.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    /// Who are you: [`Reply::Hello`].
    Hello,
    /// Your clock now: [`Reply::Clock`] (one exchange of the offset measurement).
    Clock,
    /// Run the load generator: [`Reply::Load`].
    Load(Box<LoadRequest>),
    /// `tunnel --peer`: an iperf3 server on this host's underlay address.
    PeerIperf {
        /// Address to bind.
        bind: std::net::Ipv4Addr,
    },
    /// `tunnel --peer`: bring this host's end up (TUN, gateway, iperf3).
    PeerUp(Box<EndSpec>),
    /// `tunnel --peer`: place this host's end (the gateway and iperf3) on its own
    /// topology, or leave it unpinned: [`Reply::Placed`]. Kept for every end
    /// brought up after.
    PeerPlace {
        /// Pin (`tunnel --no-pin` not given).
        pin: bool,
        /// The gateway's workers per direction (None: this host's default).
        gateway_threads: Option<usize>,
    },
    /// `tunnel --peer`: a stats snapshot of this host's gateway with its
    /// host's counters and its noise since the last snapshot: [`Reply::EndStats`].
    PeerStats,
    /// `tunnel --peer`: take everything down.
    PeerDown,
    /// `tunnel --peer`, after a failure: remove a TUN a killed agent left.
    PeerSweep {
        /// Its name.
        tun: String,
    },
    /// `tunnel --peer`: wait for the check datagram on a UDP port.
    UdpListen {
        /// Port.
        port: u16,
        /// How long.
        timeout_ms: u64,
    },
    /// `tunnel --peer`: send the check datagram from a UDP port.
    UdpSend {
        /// To.
        to: std::net::SocketAddrV4,
        /// From this port.
        port: u16,
    },
}

/// What the agent answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Reply {
    /// Version and fingerprint.
    Hello(Box<Hello>),
    /// The agent's wall clock when it answered, ns since the Unix epoch.
    Clock {
        /// ns since the epoch.
        unix_ns: u64,
    },
    /// The load's report.
    Load(Box<WireReport>),
    /// The request was carried out.
    Done,
    /// `tunnel --peer`: this host's end is up; its gateway's variant as judged here,
    /// against this host's own accel (a variant is judged on the host it ran on).
    EndUp {
        /// The judgement.
        variant: Box<cipherbench_model::variant::VariantRecord>,
        /// The CPUs the gateway's worker threads may run on, read from /proc once
        /// it was up.
        gateway_affinity: Vec<usize>,
    },
    /// `tunnel --peer`: where this host placed its end (its host name, gateway
    /// CPUs, iperf3's CPU, the placement with its warnings).
    Placed(Box<cipherbench_model::tunnel::HostEnd>),
    /// `tunnel --peer`: a snapshot of this host's gateway and its counters, as the
    /// tunnel layer writes it (opaque to the protocol).
    EndStats {
        /// The layer's snapshot.
        snapshot: serde_json::Value,
    },
    /// The request failed; one line.
    Error {
        /// What failed.
        message: String,
    },
    /// Not an answer: the agent is still working on the request. Sent every
    /// [`HEARTBEAT`] until the answer, never after it; the coordinator skips it.
    Working,
}

/// An agent's identity: the version check and the environment fingerprint recorded
/// with the results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// `cipherbench` version.
    pub version: String,
    /// [`build`].
    #[serde(default)]
    pub build: String,
    /// [`PROTOCOL`].
    pub protocol: u32,
    /// Host name.
    pub hostname: String,
    /// Kernel release.
    pub kernel: String,
    /// CPU model.
    pub cpu_model: String,
    /// CPUs the agent may use (its generator's threads, one each).
    pub cpus: Vec<usize>,
    /// The OpenSSL the agent's generator runs on.
    pub openssl: String,
    /// `OPENSSL_ia32cap` as the library reports it.
    pub cpu_settings: Option<String>,
    /// Whether the agent runs as root.
    pub root: bool,
    /// The coordinator's address as this host sees it (from `SSH_CONNECTION`): where
    /// this agent reaches a server on the coordinator.
    pub coordinator_addr: Option<String>,
    /// This host's address the ssh connection came in on (from `SSH_CONNECTION`):
    /// where the coordinator reaches it.
    #[serde(default)]
    pub agent_addr: Option<String>,
    /// This kernel's boot id ([`crate::host::boot_id`]): the coordinator's own when
    /// the agent runs in a namespace or container of the coordinator's machine (the
    /// project's test hosts), whose TCP receive path then runs in the server's sends
    /// as on loopback ([`Hello::shares_kernel_with_us`]).
    #[serde(default)]
    pub boot_id: String,
}

impl Hello {
    /// This process's.
    pub fn here() -> Hello {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        let cpu_model = read("/proc/cpuinfo")
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")
                    .and_then(|r| r.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_default();
        Hello {
            version: version().to_string(),
            build: build().to_string(),
            protocol: PROTOCOL,
            hostname: read("/proc/sys/kernel/hostname"),
            kernel: read("/proc/sys/kernel/osrelease"),
            cpu_model,
            cpus: crate::host::allowed_cpus(),
            openssl: cipherbench_crypto::info::library_version(),
            cpu_settings: cipherbench_crypto::info::cpu_settings(),
            root: crate::host::is_root(),
            coordinator_addr: std::env::var("SSH_CONNECTION")
                .ok()
                .and_then(|c| c.split_whitespace().next().map(str::to_string)),
            agent_addr: std::env::var("SSH_CONNECTION")
                .ok()
                .and_then(|c| c.split_whitespace().nth(2).map(str::to_string)),
            boot_id: crate::host::boot_id(),
        }
    }

    /// Whether this agent runs on the coordinator's own kernel (a namespace or a
    /// container of this machine): the same boot id, read on both sides.
    pub fn shares_kernel_with_us(&self) -> bool {
        !self.boot_id.is_empty() && self.boot_id == crate::host::boot_id()
    }

    /// Refuses an agent that is not this very protocol, version and build; the
    /// message is one line naming both and what to do.
    pub fn check(&self, name: &str) -> Result<()> {
        if self.version != version() || self.protocol != PROTOCOL {
            bail!(
                "agent {name} runs cipherbench {} (protocol {}), this is {} (protocol {}): install the same version on every host",
                self.version,
                self.protocol,
                version(),
                PROTOCOL
            );
        }
        if self.build != build() {
            bail!(
                "agent {name} runs another build of cipherbench {}: {}, this is {}: put this build there with `cipherbench deploy --agents {name}` (without --agent-path, the agent is then this build)",
                self.version,
                if self.build.is_empty() { "unknown" } else { &self.build },
                build()
            );
        }
        Ok(())
    }
}

/// One agent's share of a load run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadRequest {
    /// Suite, OpenSSL's name.
    pub suite: String,
    /// Resume sessions.
    pub resumption: bool,
    /// Server address as this agent reaches it.
    pub addr: std::net::SocketAddr,
    /// Host header.
    pub host: String,
    /// Path.
    pub path: String,
    /// Body length every response must have.
    pub expected_len: Option<u64>,
    /// Closed loop: this agent's clients; open loop: its schedule.
    pub arrivals: WireArrivals,
    /// Warm-up, ns.
    pub warmup_ns: u64,
    /// Window, ns.
    pub window_ns: u64,
    /// Drain, ns.
    pub drain_ns: u64,
    /// Per-request timeout, ns.
    pub timeout_ns: u64,
    /// Series interval, ns.
    pub interval_ns: u64,
    /// CPUs for the generator's threads, one each (None: every CPU it may use).
    #[serde(default)]
    pub cpus: Option<Vec<usize>>,
    /// When to start, in the agent's own clock (ns since the epoch): the
    /// coordinator's agreed start plus this agent's measured offset.
    pub start_unix_ns: u64,
    /// Park large bodies between reads as to a loopback server: the agent shares the
    /// server's kernel, so the server's sends pay for its wake-ups and ACKs
    /// (`tls::engine`).
    #[serde(default)]
    pub pace: bool,
    /// How the agent checks responses (`--verify`): None reads every response whole
    /// through OpenSSL; else by sample, at this share of body records and of
    /// responses opened whole.
    pub verify: Option<WireSampling>,
    /// The key the served files' content is made from (16 bytes, hex), so an agent
    /// compares the records it opens with the file; None where it is not known.
    pub content_key_hex: Option<String>,
}

/// A sample's shares, on the wire (`tls::engine::sampled::Sampling`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WireSampling {
    /// Share of full body records opened.
    pub rate: f64,
    /// Share of responses opened whole.
    pub whole: f64,
}

/// How an agent's responses were read, on the wire
/// (`tls::engine::sampled::Verified`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireVerified {
    /// Responses read by sample.
    pub sampled: u64,
    /// Responses read whole through OpenSSL.
    pub by_openssl: u64,
    /// Records opened.
    pub opened: u64,
    /// Their bytes on the wire.
    pub opened_bytes: u64,
    /// Records discarded unopened.
    pub discarded: u64,
    /// Their bytes on the wire.
    pub discarded_bytes: u64,
    /// Body bytes compared with the file.
    pub compared_bytes: u64,
}

/// [`Arrivals`], on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WireArrivals {
    /// Closed loop.
    Closed {
        /// Clients.
        concurrency: usize,
    },
    /// Constant rate.
    Constant {
        /// Requests per second.
        rate: f64,
        /// Length, ns.
        duration_ns: u64,
    },
    /// Linear ramp from 0.
    Ramp {
        /// Rate at the end.
        target_rate: f64,
        /// Length, ns.
        duration_ns: u64,
    },
}

/// An HDR histogram on the wire: every recorded bucket as `(value, count)`, where
/// the value is the bucket's highest equivalent value. Recording those back into a
/// histogram of the same bounds and precision lands each count in the bucket it came
/// from, so the round trip is exact.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireHistogram(pub Vec<(u64, u64)>);

impl WireHistogram {
    /// Encodes.
    pub fn of(h: &Histogram<u64>) -> WireHistogram {
        WireHistogram(
            h.iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect(),
        )
    }

    /// Adds the counts into `h` (the engine's bounds).
    pub fn add_into(&self, h: &mut Histogram<u64>) -> Result<()> {
        for &(v, n) in &self.0 {
            h.record_n(v, n)
                .map_err(|e| anyhow!("a histogram value {v} is out of bounds: {e:?}"))?;
        }
        Ok(())
    }
}

/// A [`Report`] on the wire, with the window's edges on the agent's wall clock.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireReport {
    /// Window, ns.
    pub window_ns: u64,
    /// Interval, ns.
    pub interval_ns: u64,
    /// Series: bytes, attempted, ok, failed, max latency.
    pub buckets: Vec<(u64, u64, u64, u64, u64)>,
    /// See [`Report`].
    pub window_bytes: u64,
    /// See [`Report`].
    pub ok: u64,
    /// See [`Report`].
    pub failed: u64,
    /// See [`Report`].
    pub failures: BTreeMap<FailureReason, u64>,
    /// See [`Report`].
    pub attempted: u64,
    /// See [`Report`].
    pub requests_sent: u64,
    /// See [`Report`].
    pub ok_total: u64,
    /// See [`Report`].
    #[serde(default)]
    pub resumed_total: u64,
    /// See [`Report`].
    pub body_bytes: u64,
    /// See [`Report`].
    pub cancelled: u64,
    /// µs.
    pub latency: WireHistogram,
    /// µs.
    pub first_byte: WireHistogram,
    /// µs.
    pub handshake: WireHistogram,
    /// µs.
    pub connect: WireHistogram,
    /// ns.
    pub max_first_byte_ns: u64,
    /// Suite, protocol and key-exchange group negotiated.
    pub negotiated: Option<(String, String, Option<String>)>,
    /// Generator CPU time in the window, ns.
    pub cpu_ns: u64,
    /// Generator threads.
    pub threads: usize,
    /// Each generator thread's CPU time in the window, ns.
    #[serde(default)]
    pub thread_cpu_ns: Vec<u64>,
    /// Responses whose socket was parked between reads (paced), whole run.
    #[serde(default)]
    pub paced: u64,
    /// Window start, agent's clock, ns since the epoch.
    pub window_start_unix_ns: u64,
    /// Window end, same clock.
    pub window_end_unix_ns: u64,
    /// How long after the asked start the load began (ns; 0 when on time).
    pub started_late_ns: u64,
    /// This host's noise over the load (`machine::noise`) on the generator's CPUs,
    /// the agent's own process being the run.
    #[serde(default)]
    pub noise: Option<cipherbench_model::noise::Noise>,
    /// How its responses were read.
    pub verified: WireVerified,
}

impl WireReport {
    /// Generator CPU as a fraction of its cores.
    pub fn generator_cpu(&self) -> f64 {
        self.cpu_ns as f64 / (self.window_ns.max(1) as f64 * self.threads.max(1) as f64)
    }
}

/// One end of the tunnel, on the host this process runs on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EndSpec {
    /// TUN device name (chosen by the coordinator, so it can remove it by name).
    pub tun: String,
    /// This end's inner address.
    pub inner: std::net::Ipv4Addr,
    /// The other end's.
    pub peer_inner: std::net::Ipv4Addr,
    /// Tunnel MTU.
    pub mtu: u32,
    /// This host's underlay address (the gateway's UDP 4500 socket).
    pub local: std::net::SocketAddrV4,
    /// The other host's.
    pub peer: std::net::SocketAddrV4,
    /// Transform.
    pub transform: cipherbench_esp::Transform,
    /// The run's secret, hex (handed over the ssh channel).
    pub secret_hex: String,
    /// Key-derivation label.
    pub label: String,
    /// Which SA pair this end takes.
    pub initiator: bool,
    /// Start an iperf3 server on the inner address.
    pub iperf_server: bool,
    /// The gateway's variant, by name (a mask variant: `accel`, `noaesni`,
    /// `ia32cap:MASK`, `noifma`, ...).
    pub variant: String,
    /// Datagrams per batched system call (`tunnel --batch`).
    pub batch: usize,
    /// TUN offloads (`--no-offload` not given).
    pub offload: bool,
    /// UDP GSO and GRO (`--no-udp-offload` not given).
    pub udp_offload: bool,
}

/// Now, ns since the epoch.
pub fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// An `Instant` of this process on its wall clock.
pub fn instant_to_unix(t: Instant) -> u64 {
    let (now_i, now_u) = (Instant::now(), unix_ns());
    if t <= now_i {
        now_u.saturating_sub(now_i.duration_since(t).as_nanos() as u64)
    } else {
        now_u + t.duration_since(now_i).as_nanos() as u64
    }
}

/// A wall-clock time of this process as an `Instant`.
pub fn unix_to_instant(u: u64) -> Instant {
    let (now_i, now_u) = (Instant::now(), unix_ns());
    if u <= now_u {
        let back = Duration::from_nanos(now_u - u);
        now_i.checked_sub(back).unwrap_or(now_i)
    } else {
        now_i + Duration::from_nanos(u - now_u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram() -> Histogram<u64> {
        Histogram::new_with_bounds(1, 3_600_000_000, 3).unwrap()
    }

    #[test]
    fn histograms_round_trip_exactly_through_json() {
        let mut h = histogram();
        let mut x = 7u64;
        for _ in 0..5000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            h.record(100 + (x >> 33) % 900_000).unwrap();
        }
        let text = serde_json::to_string(&WireHistogram::of(&h)).unwrap();
        let back: WireHistogram = serde_json::from_str(&text).unwrap();
        let mut g = histogram();
        back.add_into(&mut g).unwrap();
        assert_eq!(g, h);
    }

    #[test]
    fn agents_of_another_version_are_refused_in_one_line() {
        let mut h = Hello::here();
        assert!(h.check("a").is_ok());
        h.version = "0.0.0-other".into();
        let e = h.check("user@b").unwrap_err().to_string();
        assert!(
            e.contains("user@b") && e.contains("0.0.0-other") && !e.contains('\n'),
            "{e}"
        );
        let mut h = Hello::here();
        h.protocol += 1;
        assert!(h.check("c").is_err());
    }

    #[test]
    fn an_agent_shares_our_kernel_only_with_our_boot_id() {
        let mut h = Hello::here();
        assert!(!h.boot_id.is_empty(), "no boot id read");
        assert!(h.shares_kernel_with_us());
        h.boot_id = "00000000-0000-0000-0000-000000000000".into();
        assert!(!h.shares_kernel_with_us());
        // An agent that could not read its boot id shares nothing.
        h.boot_id.clear();
        assert!(!h.shares_kernel_with_us());
    }

    #[test]
    fn agents_of_another_build_of_the_same_version_are_refused_naming_both() {
        let mut h = Hello::here();
        assert!(build().starts_with("sha256:"), "{}", build());
        h.build = "sha256:0123456789abcdef (commit 0, release)".into();
        let e = h.check("user@b").unwrap_err().to_string();
        assert!(
            e.contains("user@b")
                && e.contains("sha256:0123456789abcdef")
                && e.contains(build())
                && e.contains("cipherbench deploy --agents user@b")
                && !e.contains('\n'),
            "{e}"
        );
    }
}
