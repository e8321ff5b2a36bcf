//! Beyond one machine: `cipherbench agent`, the same binary on every client host,
//! and the coordinator's side of it ([`fleet`]).
//!
//! The agent is launched by a launcher that already exists, OpenSSH (`ssh HOST
//! cipherbench agent`, the user's own config, keys and known_hosts), and speaks over
//! the channel's stdin and stdout: one JSON object per line, a [`Request`] in, a
//! [`Reply`] out, in order. It keeps no state between requests but the connection,
//! and ends when its stdin closes (the coordinator, or its ssh, went away), so a
//! killed coordinator leaves nothing running on the hosts.
//!
//! This module holds the protocol (types and the pure codecs: histograms as
//! `(value, count)` pairs, reports with wall-clock edges) and [`merge`], the exact
//! union of several agents' reports: counters add, HDR histograms add bucket by
//! bucket (never an average of percentiles), maxima take the maximum.

pub mod fleet;
pub mod peer;

use crate::tls::engine::{self, Arrivals, Bucket, Report, Schedule};
use anyhow::{anyhow, bail, Context, Result};
use cipherbench_model::tls::FailureReason;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Bumped whenever a message changes shape; agents of another protocol are refused
/// like agents of another version.
pub const PROTOCOL: u32 = 1;

/// This build's version, which every agent must share.
pub fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
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
    PeerUp(Box<peer::EndSpec>),
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
    Hello(Hello),
    /// The agent's wall clock when it answered, ns since the Unix epoch.
    Clock {
        /// ns since the epoch.
        unix_ns: u64,
    },
    /// The load's report.
    Load(Box<WireReport>),
    /// The request was carried out.
    Done,
    /// The request failed; one line.
    Error {
        /// What failed.
        message: String,
    },
}

/// An agent's identity: the version check and the environment fingerprint recorded
/// with the results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// `cipherbench` version.
    pub version: String,
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
        }
    }

    /// Refuses an agent that is not this very protocol and version; the message is
    /// one line naming both versions and what to do.
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

impl WireArrivals {
    /// From the engine's.
    pub fn of(a: &Arrivals) -> WireArrivals {
        match *a {
            Arrivals::Closed { concurrency } => WireArrivals::Closed { concurrency },
            Arrivals::Open(Schedule::Constant { rate, duration }) => WireArrivals::Constant {
                rate,
                duration_ns: duration.as_nanos() as u64,
            },
            Arrivals::Open(Schedule::Ramp {
                target_rate,
                duration,
            }) => WireArrivals::Ramp {
                target_rate,
                duration_ns: duration.as_nanos() as u64,
            },
        }
    }

    /// To the engine's.
    pub fn arrivals(&self) -> Arrivals {
        match *self {
            WireArrivals::Closed { concurrency } => Arrivals::Closed { concurrency },
            WireArrivals::Constant { rate, duration_ns } => Arrivals::Open(Schedule::Constant {
                rate,
                duration: Duration::from_nanos(duration_ns),
            }),
            WireArrivals::Ramp {
                target_rate,
                duration_ns,
            } => Arrivals::Open(Schedule::Ramp {
                target_rate,
                duration: Duration::from_nanos(duration_ns),
            }),
        }
    }
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
    /// Suite and protocol negotiated.
    pub negotiated: Option<(String, String)>,
    /// Generator CPU time in the window, ns.
    pub cpu_ns: u64,
    /// Generator threads.
    pub threads: usize,
    /// Window start, agent's clock, ns since the epoch.
    pub window_start_unix_ns: u64,
    /// Window end, same clock.
    pub window_end_unix_ns: u64,
    /// How long after the asked start the load began (ns; 0 when on time).
    pub started_late_ns: u64,
}

/// Now, ns since the epoch.
pub fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// An `Instant` of this process on its wall clock.
fn instant_to_unix(t: Instant) -> u64 {
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

impl WireReport {
    /// Encodes a report.
    pub fn of(r: &Report, started_late: Duration) -> WireReport {
        WireReport {
            window_ns: r.window.as_nanos() as u64,
            interval_ns: r.interval.as_nanos() as u64,
            buckets: r
                .buckets
                .iter()
                .map(|b| (b.bytes, b.attempted, b.ok, b.failed, b.max_latency_ns))
                .collect(),
            window_bytes: r.window_bytes,
            ok: r.ok,
            failed: r.failed,
            failures: r.failures.clone(),
            attempted: r.attempted,
            requests_sent: r.requests_sent,
            ok_total: r.ok_total,
            body_bytes: r.body_bytes,
            cancelled: r.cancelled,
            latency: WireHistogram::of(&r.latency),
            first_byte: WireHistogram::of(&r.first_byte),
            handshake: WireHistogram::of(&r.handshake),
            connect: WireHistogram::of(&r.connect),
            max_first_byte_ns: r.max_first_byte.as_nanos() as u64,
            negotiated: r.negotiated.clone(),
            cpu_ns: r.cpu_ns,
            threads: r.threads,
            window_start_unix_ns: instant_to_unix(r.window_start),
            window_end_unix_ns: instant_to_unix(r.window_end),
            started_late_ns: started_late.as_nanos() as u64,
        }
    }

    /// Generator CPU as a fraction of its cores.
    pub fn generator_cpu(&self) -> f64 {
        self.cpu_ns as f64 / (self.window_ns.max(1) as f64 * self.threads.max(1) as f64)
    }
}

/// One agent's report with its clock offset (agent minus coordinator, ns).
pub struct Part<'a> {
    /// The report.
    pub report: &'a WireReport,
    /// Its clock's offset.
    pub offset_ns: i128,
}

/// The exact union of the agents' reports, as one [`Report`] on the coordinator's
/// clock. Counters and series buckets add; histograms add bucket by bucket, so every
/// percentile of the result is the percentile of the union of all requests (to the
/// histogram's precision, as for one generator); maxima take the maximum. The window
/// runs from the earliest agent's start to the latest one's end (their windows were
/// started together; the spread is what [`fleet`] checks), so throughput is never
/// inflated by a late agent.
pub fn merge(parts: &[Part<'_>]) -> Result<Report> {
    let first = parts.first().context("no agent reported")?;
    let mut buckets: Vec<Bucket> = Vec::new();
    let mut out_hist = [
        engine_histogram(),
        engine_histogram(),
        engine_histogram(),
        engine_histogram(),
    ];
    let mut failures: BTreeMap<FailureReason, u64> = BTreeMap::new();
    let (mut start, mut end) = (u64::MAX, 0u64);
    let sum = |f: fn(&WireReport) -> u64| parts.iter().map(|p| f(p.report)).sum::<u64>();
    let window_bytes = sum(|r| r.window_bytes);
    let ok = sum(|r| r.ok);
    let failed = sum(|r| r.failed);
    let attempted = sum(|r| r.attempted);
    let requests_sent = sum(|r| r.requests_sent);
    let ok_total = sum(|r| r.ok_total);
    let body_bytes = sum(|r| r.body_bytes);
    let cancelled = sum(|r| r.cancelled);
    let cpu_ns = sum(|r| r.cpu_ns);
    let mut threads = 0;
    let mut max_first_byte_ns = 0;
    let mut negotiated = None;
    for p in parts {
        let r = p.report;
        if r.interval_ns != first.report.interval_ns {
            bail!("agents reported different series intervals");
        }
        if buckets.len() < r.buckets.len() {
            buckets.resize(r.buckets.len(), Bucket::default());
        }
        for (b, &(bytes, att, okb, fail, maxl)) in buckets.iter_mut().zip(&r.buckets) {
            b.bytes += bytes;
            b.attempted += att;
            b.ok += okb;
            b.failed += fail;
            b.max_latency_ns = b.max_latency_ns.max(maxl);
        }
        for (k, v) in &r.failures {
            *failures.entry(*k).or_default() += v;
        }
        for (h, w) in out_hist
            .iter_mut()
            .zip([&r.latency, &r.first_byte, &r.handshake, &r.connect])
        {
            w.add_into(h)?;
        }
        // To the coordinator's clock.
        let shift = |u: u64| (u as i128 - p.offset_ns).max(0) as u64;
        start = start.min(shift(r.window_start_unix_ns));
        end = end.max(shift(r.window_end_unix_ns));
        threads += r.threads;
        max_first_byte_ns = max_first_byte_ns.max(r.max_first_byte_ns);
        if negotiated.is_none() {
            negotiated = r.negotiated.clone();
        }
    }
    let [latency, first_byte, handshake, connect] = out_hist;
    let window_start = unix_to_instant(start);
    let window_end = unix_to_instant(end.max(start));
    Ok(Report {
        window: window_end.duration_since(window_start),
        interval: Duration::from_nanos(first.report.interval_ns),
        buckets,
        window_bytes,
        ok,
        failed,
        failures,
        attempted,
        requests_sent,
        ok_total,
        body_bytes,
        cancelled,
        latency,
        first_byte,
        handshake,
        connect,
        max_first_byte: Duration::from_nanos(max_first_byte_ns),
        negotiated,
        cpu_ns,
        threads,
        window_start,
        window_end,
    })
}

/// The report of a window that failed before it measured anything (an agent's
/// failure): zero of everything, so nothing of it is mistaken for a measurement.
pub fn empty_report(spec: &engine::Spec) -> Report {
    let now = Instant::now();
    Report {
        window: Duration::ZERO,
        interval: spec.interval,
        buckets: Vec::new(),
        window_bytes: 0,
        ok: 0,
        failed: 0,
        failures: BTreeMap::new(),
        attempted: 0,
        requests_sent: 0,
        ok_total: 0,
        body_bytes: 0,
        cancelled: 0,
        latency: engine::histogram(),
        first_byte: engine::histogram(),
        handshake: engine::histogram(),
        connect: engine::histogram(),
        max_first_byte: Duration::ZERO,
        negotiated: None,
        cpu_ns: 0,
        threads: 0,
        window_start: now,
        window_end: now,
    }
}

fn engine_histogram() -> Histogram<u64> {
    engine::histogram()
}

/// `cipherbench agent`: answers requests on stdin until it closes. Returns when the
/// coordinator hangs up; a load in progress is abandoned the moment stdin closes (the
/// process exits), so nothing outlives the coordinator's connection.
pub fn main() -> Result<()> {
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    // The reader owns stdin. EOF while a load runs ends the process at once (a load
    // holds nothing outside it); otherwise the loop below ends and drops what the
    // tunnel brought up (its TUN, gateway, iperf3) before the agent exits.
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                return;
            }
        }
        if LOADING.load(std::sync::atomic::Ordering::SeqCst) {
            std::process::exit(0);
        }
    });
    let mut peer = peer::PeerState::default();
    // An agent nobody talks to for this long ends (every run is bounded in time).
    const IDLE: Duration = Duration::from_secs(30 * 60);
    let mut out = std::io::stdout().lock();
    loop {
        let line = match rx.recv_timeout(IDLE) {
            Ok(l) => l,
            Err(_) => return Ok(()),
        };
        let reply = match serde_json::from_str::<Request>(&line) {
            Err(e) => Reply::Error {
                message: format!("not a request this agent understands ({e}): is the coordinator cipherbench {}?", version()),
            },
            Ok(Request::Hello) => Reply::Hello(Hello::here()),
            Ok(Request::Clock) => Reply::Clock { unix_ns: unix_ns() },
            Ok(Request::Load(req)) => {
                LOADING.store(true, std::sync::atomic::Ordering::SeqCst);
                let r = load(&req);
                LOADING.store(false, std::sync::atomic::Ordering::SeqCst);
                match r {
                    Ok(r) => Reply::Load(Box::new(r)),
                    Err(e) => Reply::Error {
                        message: crate::progress::one_line(&e),
                    },
                }
            }
            Ok(req) => peer.handle(req).unwrap_or_else(|e| Reply::Error {
                message: crate::progress::one_line(&e),
            }),
        };
        let mut text = serde_json::to_string(&reply).context("encoding a reply")?;
        text.push('\n');
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .context("writing to the coordinator")?;
    }
}

/// Set while a load runs (see [`main`]'s reader).
static LOADING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Runs one load share: waits for the agreed start, then the engine.
fn load(req: &LoadRequest) -> Result<WireReport> {
    let suite = crate::tls::suite::Suite::find(&req.suite)
        .ok_or_else(|| anyhow!("unknown suite {}", req.suite))?;
    let client = engine::Client::new(&suite, req.resumption)?;
    let allowed = crate::host::allowed_cpus();
    let cpus = match &req.cpus {
        None => allowed,
        Some(asked) => {
            if let Some(c) = asked.iter().find(|c| !allowed.contains(c)) {
                bail!("--agent-cpus: CPU {c} is not one of this host's {allowed:?}");
            }
            asked.clone()
        }
    };
    let threads = cpus.len();
    let spec = engine::Spec {
        target: engine::Target {
            addr: req.addr,
            host: req.host.clone(),
            path: req.path.clone(),
            expected_len: req.expected_len,
        },
        arrivals: req.arrivals.arrivals(),
        warmup: Duration::from_nanos(req.warmup_ns),
        window: Duration::from_nanos(req.window_ns),
        drain: Duration::from_nanos(req.drain_ns),
        timeout: Duration::from_nanos(req.timeout_ns),
        interval: Duration::from_nanos(req.interval_ns),
        cpus,
        max_connections: crate::tls::connection_budget(threads),
    };
    // The start barrier: sleep to the agreed instant of this host's clock.
    let now = unix_ns();
    if req.start_unix_ns > now {
        std::thread::sleep(Duration::from_nanos(req.start_unix_ns - now));
    }
    let late = Duration::from_nanos(unix_ns().saturating_sub(req.start_unix_ns));
    let report = engine::run(&client, &spec)?;
    Ok(WireReport::of(&report, late))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(samples: &[u64], offset_start: u64) -> WireReport {
        let mut h = engine::histogram();
        for &s in samples {
            h.record(s).unwrap();
        }
        WireReport {
            window_ns: 1_000_000_000,
            interval_ns: 250_000_000,
            buckets: vec![(10, 0, 1, 0, 5), (20, 0, 2, 0, 7)],
            window_bytes: 30,
            ok: samples.len() as u64,
            failed: 0,
            failures: BTreeMap::new(),
            attempted: samples.len() as u64,
            requests_sent: samples.len() as u64,
            ok_total: samples.len() as u64,
            body_bytes: 30,
            cancelled: 0,
            latency: WireHistogram::of(&h),
            first_byte: WireHistogram::of(&h),
            handshake: WireHistogram::default(),
            connect: WireHistogram::default(),
            max_first_byte_ns: samples.iter().max().copied().unwrap_or(0) * 1000,
            negotiated: None,
            cpu_ns: 1,
            threads: 1,
            window_start_unix_ns: unix_ns() + offset_start,
            window_end_unix_ns: unix_ns() + offset_start + 1_000_000_000,
            started_late_ns: 0,
        }
    }

    /// A deterministic spread of latencies, µs, different per agent.
    fn samples(seed: u64, n: usize) -> Vec<u64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                100 + (x >> 33)
                    % (if seed.is_multiple_of(2) {
                        50_000
                    } else {
                        900_000
                    })
            })
            .collect()
    }

    #[test]
    fn merged_percentiles_are_those_of_the_union_of_samples() {
        let sets: Vec<Vec<u64>> = (1..=3).map(|s| samples(s, 20_000 * s as usize)).collect();
        let reports: Vec<WireReport> = sets.iter().map(|s| wire(s, 0)).collect();
        let parts: Vec<Part> = reports
            .iter()
            .map(|r| Part {
                report: r,
                offset_ns: 0,
            })
            .collect();
        let merged = merge(&parts).unwrap();
        let mut union = engine::histogram();
        for s in sets.iter().flatten() {
            union.record(*s).unwrap();
        }
        for q in [0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(
                merged.latency.value_at_quantile(q),
                union.value_at_quantile(q),
                "q {q}"
            );
        }
        assert_eq!(merged.latency.len(), union.len());
        // And not the average of the agents' p99s (the two differ for these spreads).
        let mean_p99: u64 = reports
            .iter()
            .map(|r| {
                let mut h = engine::histogram();
                r.latency.add_into(&mut h).unwrap();
                h.value_at_quantile(0.99)
            })
            .sum::<u64>()
            / 3;
        assert_ne!(merged.latency.value_at_quantile(0.99), mean_p99);
        assert_eq!(merged.ok, sets.iter().map(|s| s.len() as u64).sum::<u64>());
        assert_eq!(merged.buckets[1].bytes, 60);
        assert_eq!(merged.buckets[0].max_latency_ns, 5);
        assert_eq!(merged.threads, 3);
    }

    #[test]
    fn histograms_round_trip_exactly_through_json() {
        let mut h = engine::histogram();
        for s in samples(7, 5000) {
            h.record(s).unwrap();
        }
        let text = serde_json::to_string(&WireHistogram::of(&h)).unwrap();
        let back: WireHistogram = serde_json::from_str(&text).unwrap();
        let mut g = engine::histogram();
        back.add_into(&mut g).unwrap();
        assert_eq!(g, h);
    }

    #[test]
    fn the_merged_window_spans_the_agents_on_the_coordinators_clock() {
        // Agent b's clock runs 2 s ahead and its window started 2 s later by its clock:
        // on the coordinator's clock, the two windows are the same second.
        let a = wire(&[100], 0);
        let b = wire(&[100], 2_000_000_000);
        let merged = merge(&[
            Part {
                report: &a,
                offset_ns: 0,
            },
            Part {
                report: &b,
                offset_ns: 2_000_000_000,
            },
        ])
        .unwrap();
        let w = merged.window.as_secs_f64();
        assert!((w - 1.0).abs() < 0.01, "{w}");
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
}
