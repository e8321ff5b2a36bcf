//! Layer 3's side of `--agents`: what a load request means and what comes back. The
//! coordinator splits a window over the agents ([`split`]), starts them together
//! ([`run`]) and merges their reports exactly ([`merge`]); an agent runs its share
//! with the same engine ([`load`]). The launcher, the clocks and the protocol's
//! messages are `crate::agent`'s; the start barrier and the merge are explained in
//! METHODOLOGY.md ("Load from several hosts").

use super::engine::{self, Arrivals, Bucket, Report, Schedule, Spec};
use crate::agent::fleet::{self, Agent, AgentFailure, Fleet};
use crate::agent::{
    unix_to_instant, LoadRequest, Reply, Request, WireArrivals, WireHistogram, WireReport,
    WireSampling, WireVerified,
};
use crate::interrupt;
use anyhow::{anyhow, bail, Context, Result};
use cipherbench_model::agents::AgentShare;
use cipherbench_model::tls::FailureReason;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A generator above this fraction of its cores has fallen behind its share.
const SATURATED: f64 = super::sweep::GENERATOR_SATURATED;

/// The engine's arrivals on the wire.
pub fn wire_arrivals(a: &Arrivals) -> WireArrivals {
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

/// The engine's arrivals from the wire.
pub fn arrivals(w: &WireArrivals) -> Arrivals {
    match *w {
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

/// A report on the wire.
pub fn wire_report(
    r: &Report,
    started_late: Duration,
    noise: Option<cipherbench_model::noise::Noise>,
) -> WireReport {
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
        resumed_total: r.resumed_total,
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
        thread_cpu_ns: r.thread_cpu_ns.clone(),
        paced: r.paced,
        window_start_unix_ns: crate::agent::instant_to_unix(r.window_start),
        window_end_unix_ns: crate::agent::instant_to_unix(r.window_end),
        started_late_ns: started_late.as_nanos() as u64,
        noise,
        verified: {
            let v = &r.verified;
            WireVerified {
                sampled: v.sampled,
                by_openssl: v.by_openssl,
                opened: v.counts.opened,
                opened_bytes: v.counts.opened_bytes,
                discarded: v.counts.discarded,
                discarded_bytes: v.counts.discarded_bytes,
                compared_bytes: v.counts.compared_bytes,
            }
        },
    }
}

/// An agent's [`WireVerified`] as this side's counts.
fn verified(w: &WireVerified) -> engine::sampled::Verified {
    engine::sampled::Verified {
        sampled: w.sampled,
        by_openssl: w.by_openssl,
        counts: engine::sampled::Counts {
            opened: w.opened,
            opened_bytes: w.opened_bytes,
            discarded: w.discarded,
            discarded_bytes: w.discarded_bytes,
            compared_bytes: w.compared_bytes,
        },
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
/// started together; the spread is what the coordinator checks), so throughput is never
/// inflated by a late agent.
pub fn merge(parts: &[Part<'_>]) -> Result<Report> {
    let first = parts.first().context("no agent reported")?;
    let mut buckets: Vec<Bucket> = Vec::new();
    let mut out_hist = [
        engine::histogram(),
        engine::histogram(),
        engine::histogram(),
        engine::histogram(),
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
    let resumed_total = sum(|r| r.resumed_total);
    let body_bytes = sum(|r| r.body_bytes);
    let cancelled = sum(|r| r.cancelled);
    let cpu_ns = sum(|r| r.cpu_ns);
    let paced = sum(|r| r.paced);
    // Every agent's threads, in the agents' order.
    let thread_cpu_ns: Vec<u64> = parts
        .iter()
        .flat_map(|p| p.report.thread_cpu_ns.iter().copied())
        .collect();
    let mut threads = 0;
    let mut max_first_byte_ns = 0;
    let mut negotiated = None;
    let mut all_verified = engine::sampled::Verified::default();
    for p in parts {
        let r = p.report;
        all_verified.add(&verified(&r.verified));
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
        resumed_total,
        body_bytes,
        cancelled,
        latency,
        first_byte,
        handshake,
        connect,
        max_first_byte: Duration::from_nanos(max_first_byte_ns),
        negotiated,
        cpu_ns,
        thread_cpu_ns,
        paced,
        verified: all_verified,
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
        resumed_total: 0,
        body_bytes: 0,
        cancelled: 0,
        latency: engine::histogram(),
        first_byte: engine::histogram(),
        handshake: engine::histogram(),
        connect: engine::histogram(),
        max_first_byte: Duration::ZERO,
        negotiated: None,
        cpu_ns: 0,
        thread_cpu_ns: Vec::new(),
        paced: 0,
        verified: engine::sampled::Verified::default(),
        threads: 0,
        window_start: now,
        window_end: now,
    }
}

/// Runs one window of `spec` split over the agents, started together; returns the
/// merged report and each agent's share, or an [`AgentFailure`] naming the agent
/// (as the error; downcast it). Each agent reaches the server at `addr(agent)`.
#[expect(
    clippy::too_many_lines,
    reason = "the agents' run in order (start each, wait, merge, check), each with its error path"
)]
pub fn run(
    fleet: &mut Fleet,
    spec: &Spec,
    suite: &str,
    resumption: bool,
    addr: &dyn Fn(&Agent) -> SocketAddr,
) -> Result<(Report, Vec<AgentShare>)> {
    if let Some(a) = fleet.agents.iter().find(|a| a.dead().is_some()) {
        return Err(AgentFailure(format!(
            "agent {} died earlier ({})",
            a.name,
            a.dead().unwrap_or("")
        ))
        .into());
    }
    let shares = split(&spec.arrivals, fleet.agents.len());
    let lead = fleet::lead(fleet.agents.iter().map(|a| a.rtt));
    let start = crate::agent::unix_ns() + lead.as_nanos() as u64;
    let mut running = Vec::new();
    for (i, agent) in fleet.agents.iter_mut().enumerate() {
        let Some(arrivals) = shares[i] else { continue };
        let req = LoadRequest {
            suite: suite.to_string(),
            resumption,
            addr: addr(agent),
            host: spec.target.host.clone(),
            path: spec.target.path.clone(),
            expected_len: spec.target.expected_len,
            arrivals: wire_arrivals(&arrivals),
            warmup_ns: spec.warmup.as_nanos() as u64,
            window_ns: spec.window.as_nanos() as u64,
            drain_ns: spec.drain.as_nanos() as u64,
            timeout_ns: spec.timeout.as_nanos() as u64,
            interval_ns: spec.interval.as_nanos() as u64,
            cpus: fleet.cpus.clone(),
            start_unix_ns: (start as i128 + agent.offset_ns).max(0) as u64,
            // An agent on this kernel (a namespace of this machine) loading a server
            // here receives in the server's sends, as on loopback: the server pays
            // for its wake-ups. A server elsewhere (--server) does not.
            pace: agent.hello.shares_kernel_with_us()
                && super::engine::pays_for_wakeups(spec.target.addr),
            verify: match spec.verify {
                engine::sampled::Verify::All => None,
                engine::sampled::Verify::Sampled(s) => Some(WireSampling {
                    rate: s.rate,
                    whole: s.whole,
                }),
            },
            content_key_hex: spec
                .target
                .content
                .map(|k| k.iter().map(|b| format!("{b:02x}")).collect()),
        };
        if let Err(e) = agent.send_only(&Request::Load(Box::new(req))) {
            return Err(fail(fleet, i, e.to_string()));
        }
        running.push((i, arrivals));
    }
    // Every share ends by then: the window and what may follow it.
    let tail = match spec.arrivals {
        Arrivals::Closed { .. } => spec.warmup + spec.window + spec.drain,
        Arrivals::Open(s) => s.duration() + spec.timeout,
    };
    let deadline = Instant::now() + lead + tail + Duration::from_secs(30);
    let mut reports: Vec<(usize, usize, WireReport)> = Vec::new();
    for &(i, arrivals) in &running {
        let r = loop {
            if let Err(e) = interrupt::check() {
                // Closing the connections ends the agents' loads.
                for a in &mut fleet.agents {
                    a.kill("interrupted");
                }
                return Err(e.into());
            }
            let agent = &mut fleet.agents[i];
            if Instant::now() >= deadline {
                let msg = format!(
                    "agent {} fell behind: no report 30 s after its window should have ended",
                    agent.name
                );
                return Err(fail(fleet, i, msg));
            }
            match agent.receive(Duration::from_millis(100)) {
                Ok(Reply::Load(r)) => break *r,
                Ok(Reply::Error { message }) => {
                    let name = agent.name.clone();
                    return Err(AgentFailure(format!("agent {name}: {message}")).into());
                }
                Ok(_) => {
                    let msg = format!("agent {}: answered a load with something else", agent.name);
                    return Err(fail(fleet, i, msg));
                }
                Err(e) if e.to_string().contains("no answer within") => continue,
                Err(e) => {
                    let msg = format!(
                        "{} (it died during the window)",
                        crate::progress::one_line(&e)
                    );
                    return Err(fail(fleet, i, msg));
                }
            }
        };
        let concurrency = match arrivals {
            Arrivals::Closed { concurrency } => concurrency,
            Arrivals::Open(_) => 0,
        };
        reports.push((i, concurrency, r));
    }
    // Starts on our clock; the spread of window starts is the barrier's error.
    let starts: Vec<u64> = reports
        .iter()
        .map(|(i, _, r)| {
            (r.window_start_unix_ns as i128 - fleet.agents[*i].offset_ns).max(0) as u64
        })
        .collect();
    let first = starts.iter().copied().min().unwrap_or(0);
    let tolerance = fleet::skew_tolerance(spec.window);
    let mut out = Vec::new();
    for ((i, concurrency, r), s) in reports.iter().zip(&starts) {
        let name = &fleet.agents[*i].name;
        let skew = Duration::from_nanos(s - first);
        if skew > tolerance {
            return Err(AgentFailure(format!(
                "agent {name} fell behind: its window started {:.0} ms after the first agent's (tolerance {:.0} ms), so the load was not simultaneous",
                skew.as_secs_f64() * 1e3,
                tolerance.as_secs_f64() * 1e3
            ))
            .into());
        }
        if r.generator_cpu() > SATURATED {
            return Err(AgentFailure(format!(
                "agent {name} fell behind: its generator used {:.0} % of its cores, so it could not keep its share of the load",
                r.generator_cpu() * 100.0
            ))
            .into());
        }
        out.push(AgentShare {
            name: name.clone(),
            concurrency: *concurrency,
            start_skew_ns: skew.as_nanos() as u64,
            started_late_ns: r.started_late_ns,
            throughput_bytes_per_sec: r.window_bytes as f64 / (r.window_ns.max(1) as f64 / 1e9),
            requests: r.ok,
            generator_cpu: r.generator_cpu(),
            noise: r.noise.clone(),
        });
    }
    let parts: Vec<Part<'_>> = reports
        .iter()
        .map(|(i, _, r)| Part {
            report: r,
            offset_ns: fleet.agents[*i].offset_ns,
        })
        .collect();
    Ok((merge(&parts)?, out))
}

/// Marks agent `i` dead (its ssh stopped, which ends it) and returns the failure.
fn fail(fleet: &mut Fleet, i: usize, message: String) -> anyhow::Error {
    fleet.agents[i].kill(&message);
    AgentFailure(message).into()
}

/// Each agent's share of the arrivals: the concurrency split as evenly as integers
/// allow (the first agents take the remainder; an agent with no client sits the
/// window out), or the rate divided evenly (the sum of the agents' schedules is the
/// whole schedule).
pub fn split(arrivals: &Arrivals, agents: usize) -> Vec<Option<Arrivals>> {
    let n = agents.max(1);
    (0..agents)
        .map(|i| match *arrivals {
            Arrivals::Closed { concurrency } => {
                let c = concurrency / n + usize::from(i < concurrency % n);
                (c > 0).then_some(Arrivals::Closed { concurrency: c })
            }
            Arrivals::Open(Schedule::Constant { rate, duration }) => {
                Some(Arrivals::Open(Schedule::Constant {
                    rate: rate / n as f64,
                    duration,
                }))
            }
            Arrivals::Open(Schedule::Ramp {
                target_rate,
                duration,
            }) => Some(Arrivals::Open(Schedule::Ramp {
                target_rate: target_rate / n as f64,
                duration,
            })),
        })
        .collect()
}

/// Runs one load share: waits for the agreed start, then the engine.
pub fn load(req: &LoadRequest) -> Result<WireReport> {
    let suite = crate::tls::suite::Suite::find(&req.suite)
        .ok_or_else(|| anyhow!("unknown suite {}", req.suite))?;
    let verify = match req.verify {
        None => engine::sampled::Verify::All,
        Some(s) => {
            if !(0.0..=1.0).contains(&s.rate) || !(0.0..=1.0).contains(&s.whole) {
                bail!("a sample's shares must be within 0 and 1");
            }
            engine::sampled::Verify::Sampled(engine::sampled::Sampling {
                rate: s.rate,
                whole: s.whole,
            })
        }
    };
    let content = match &req.content_key_hex {
        None => None,
        Some(hex) => {
            let bytes = cipherbench_crypto::digest::from_hex(hex)
                .and_then(|b| <[u8; 16]>::try_from(b).ok())
                .ok_or_else(|| anyhow!("the content key is not 16 bytes of hex"))?;
            Some(bytes)
        }
    };
    let client = engine::Client::verifying(&suite, req.resumption, verify)?;
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
            content,
        },
        arrivals: arrivals(&req.arrivals),
        warmup: Duration::from_nanos(req.warmup_ns),
        window: Duration::from_nanos(req.window_ns),
        drain: Duration::from_nanos(req.drain_ns),
        timeout: Duration::from_nanos(req.timeout_ns),
        interval: Duration::from_nanos(req.interval_ns),
        cpus,
        max_connections: crate::tls::connection_budget(threads),
        pace: req.pace,
        verify,
    };
    // The start barrier: sleep to the agreed instant of this host's clock.
    let now = crate::agent::unix_ns();
    if req.start_unix_ns > now {
        std::thread::sleep(Duration::from_nanos(req.start_unix_ns - now));
    }
    let late = Duration::from_nanos(crate::agent::unix_ns().saturating_sub(req.start_unix_ns));
    // This host's noise, watched as the coordinator watches its own: around the
    // whole load, on the generator's CPUs, this process being the run.
    let window = crate::machine::noise::Window::open(&spec.cpus, &[std::process::id()]);
    let report = engine::run(&client, &spec)?;
    Ok(wire_report(&report, late, Some(window.close())))
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
            resumed_total: 0,
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
            thread_cpu_ns: vec![1],
            paced: 0,
            window_start_unix_ns: crate::agent::unix_ns() + offset_start,
            window_end_unix_ns: crate::agent::unix_ns() + offset_start + 1_000_000_000,
            started_late_ns: 0,
            noise: None,
            // Counts of this agent's own (its sample count in each).
            verified: {
                let n = samples.len() as u64;
                WireVerified {
                    sampled: n,
                    by_openssl: n / 1000,
                    opened: n / 100,
                    opened_bytes: n * 3,
                    discarded: n / 10,
                    discarded_bytes: n * 40,
                    compared_bytes: n * 2,
                }
            },
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
        // How the agents read: their counts (different for each), added.
        let v = merged.verified;
        let n: Vec<u64> = sets.iter().map(|s| s.len() as u64).collect();
        assert_eq!(v.sampled, merged.ok);
        assert_eq!(v.by_openssl, n.iter().map(|n| n / 1000).sum::<u64>());
        assert_eq!(v.counts.opened, n.iter().map(|n| n / 100).sum::<u64>());
        assert_eq!(v.counts.discarded, n.iter().map(|n| n / 10).sum::<u64>());
        let total: u64 = n.iter().sum();
        assert_eq!(
            (
                v.counts.opened_bytes,
                v.counts.discarded_bytes,
                v.counts.compared_bytes
            ),
            (total * 3, total * 40, total * 2)
        );
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
    fn concurrency_is_split_exactly_over_the_agents() {
        let shares = split(&Arrivals::Closed { concurrency: 7 }, 3);
        let c: Vec<usize> = shares
            .iter()
            .map(|s| match s {
                Some(Arrivals::Closed { concurrency }) => *concurrency,
                _ => 0,
            })
            .collect();
        assert_eq!(c, vec![3, 2, 2]);
        // Fewer clients than agents: the others sit out, none gets zero clients.
        let shares = split(&Arrivals::Closed { concurrency: 1 }, 3);
        assert!(shares[0].is_some() && shares[1].is_none() && shares[2].is_none());
    }

    #[test]
    fn a_ramp_is_split_into_ramps_whose_sum_is_the_whole() {
        let s = Schedule::Ramp {
            target_rate: 90.0,
            duration: Duration::from_secs(10),
        };
        let shares = split(&Arrivals::Open(s), 3);
        let total: u64 = shares
            .iter()
            .map(|a| match a {
                Some(Arrivals::Open(s)) => s.count(),
                _ => 0,
            })
            .sum();
        assert!(total.abs_diff(s.count()) <= 3, "{total} vs {}", s.count());
    }
}
