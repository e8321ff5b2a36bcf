//! `cipherbench tls sweep` (seeds 000/003): for each core count, file size, suite and
//! variant, the highest throughput nginx sustains for the window with the maximum
//! time to first byte within the limit.
//!
//! The concurrency is searched, not guessed: short probes at 1, 2, 4, ... clients
//! until the limit is broken, the generator saturates, or two doublings in a row
//! gain less than [`PLATEAU_GAIN`]; then the best probe's concurrency is measured
//! over the full window (and halved if the longer window breaks the limit). Each
//! point gets its own nginx, so the variant and the suite are exactly what the point
//! says; points are saved as they finish.

use super::cpu::{self, Sampler};
use super::engine::{self, Arrivals, Client, Report, Spec, Target};
use super::nginx::{self, Server, ServerSpec, Workspace};
use super::{ServerTarget, SweepPlan};
use crate::interrupt;
use crate::results::Session;
use anyhow::{bail, Result};
use cipherbench_model::tls::{
    Probe, ServerCpu, ServerRecord, SweepConfig, SweepPoint, SweepResults,
};
use cipherbench_model::units::{format_bits_per_sec, ByteSize};
use cipherbench_model::Summary;
use std::time::Duration;

/// A doubling of the concurrency that gains less than this is "flat".
pub const PLATEAU_GAIN: f64 = 0.05;
/// Generator CPU above this fraction of its cores marks a point invalid.
pub const GENERATOR_SATURATED: f64 = 0.90;
/// nginx's workers waiting for a CPU more than this fraction of the window is a
/// `server_contended` warning.
pub const CONTENDED: f64 = 0.05;
/// Final-window retries at a lower concurrency when the long window breaks the limit.
const STEP_DOWNS: usize = 2;

impl SweepPlan {
    /// Points to measure.
    pub fn total_points(&self) -> usize {
        match self.target {
            ServerTarget::External(_) => 1,
            ServerTarget::Nginx { .. } => {
                self.cores.len() * self.sizes.len() * self.suites.len() * self.variants.len()
            }
        }
    }

    /// A rough duration: four probes and the window per point.
    pub fn estimate(&self) -> Duration {
        // Four probes, each with its warm-up and the drain of its last requests.
        let per_point = (self.warmup + self.probe + Duration::from_secs(1)) * 4
            + self.warmup
            + self.window
            + Duration::from_millis(500);
        per_point * self.total_points() as u32
    }

    fn config(&self) -> SweepConfig {
        SweepConfig {
            suites: self.suites.iter().map(|s| s.openssl.to_string()).collect(),
            sizes_bytes: self.sizes.clone(),
            cores: self.cores.clone(),
            variants: self.variants.iter().map(|v| v.name().clone()).collect(),
            window_ns: self.window.as_nanos() as u64,
            probe_ns: self.probe.as_nanos() as u64,
            warmup_ns: self.warmup.as_nanos() as u64,
            latency_limit_ns: self.limit.as_nanos() as u64,
            max_concurrency: self.max_concurrency,
            timeout_ns: self.timeout.as_nanos() as u64,
            resumption: self.resumption,
            key: self.key.name().to_string(),
        }
    }
}

/// Runs the sweep, saving after every point.
pub fn run(plan: &SweepPlan, session: &mut Session) -> Result<()> {
    let config = plan.config();
    // A resumed run keeps an earlier sweep only if it was of this same plan.
    if let Some(tls) = session.record.tls.as_mut() {
        if tls.sweep.as_ref().is_some_and(|s| s.config != config) {
            tls.sweep = None;
        }
    }
    match &plan.target {
        ServerTarget::External(url) => run_external(plan, url, config, session),
        ServerTarget::Nginx { binary, port } => {
            let binary = nginx::resolve_nginx(binary.as_deref())?;
            let info = nginx::nginx_info(&binary)?;
            if let Some(p) = port {
                nginx::check_port(*p)?;
            }
            // Every core count's CPUs checked before anything starts.
            let allowed = crate::host::allowed_cpus();
            let assignments = plan
                .cores
                .iter()
                .map(|&c| {
                    super::assign_cpus(&allowed, c, plan.generator_cpus.as_deref())
                        .map(|cpus| (c, cpus))
                })
                .collect::<Result<Vec<_>>>()?;
            let clients = plan
                .suites
                .iter()
                .map(|s| Client::new(s, plan.resumption))
                .collect::<Result<Vec<_>>>()?;
            let variants = super::NginxVariants::judge(&plan.variants)?;
            let workspace = Workspace::create(&plan.sizes, plan.key)?;
            session
                .progress
                .layer("tls sweep", plan.total_points(), plan.estimate());
            for (cores, (server_cpus, generator_cpus)) in assignments {
                for &size in &plan.sizes {
                    for (suite, client) in plan.suites.iter().zip(&clients) {
                        for variant in &plan.variants {
                            interrupt::check()?;
                            if measured(session, suite.openssl, size, cores, &variant.name()) {
                                session.progress.skip(1);
                                continue;
                            }
                            let spec = ServerSpec {
                                nginx: &binary,
                                info: &info,
                                workspace: &workspace,
                                suite: *suite,
                                cpus: server_cpus.clone(),
                                variant,
                                ia32cap: variants.mask(variant),
                                port: *port,
                                resumption: plan.resumption,
                                groups: None,
                                key_source: super::keystore::KeySource::File(
                                    workspace.dir().join("key.pem"),
                                ),
                            };
                            let server = Server::start(&spec, client)?;
                            super::note_libraries(session, variant, &server);
                            let record = ServerRecord {
                                kind: "nginx".into(),
                                version: Some(info.version.clone()),
                                library: super::server_library(&info, variant),
                                suite: suite.openssl.to_string(),
                                key: plan.key.name().to_string(),
                                key_store: "file".into(),
                                cores,
                                server_cpus: server_cpus.clone(),
                                generator_cpus: generator_cpus.clone(),
                                variant: variants.record(variant, &server),
                                config: server.config().to_string(),
                            };
                            let target = Target {
                                addr: server.addr(),
                                host: "127.0.0.1".into(),
                                path: Workspace::url_path(size),
                                expected_len: Some(size),
                            };
                            let point = search(
                                plan,
                                client,
                                &target,
                                &generator_cpus,
                                Some(&server),
                                Labels {
                                    suite: suite.openssl,
                                    protocol: suite.protocol.as_str(),
                                    size,
                                    cores,
                                    variant: &variant.name(),
                                },
                            )?;
                            server.stop();
                            record_point(session, &config, record, point)?;
                        }
                    }
                }
            }
            Ok(())
        }
    }
}

fn run_external(
    plan: &SweepPlan,
    url: &super::ExternalUrl,
    config: SweepConfig,
    session: &mut Session,
) -> Result<()> {
    let Some(suite) = plan.suites.first() else {
        bail!("no suite to measure");
    };
    let client = Client::new(suite, plan.resumption)?;
    let target = super::external_target(&client, url)?;
    let allowed = plan
        .generator_cpus
        .clone()
        .unwrap_or_else(crate::host::allowed_cpus);
    session.progress.layer(
        "tls sweep",
        1,
        plan.estimate() / plan.total_points().max(1) as u32,
    );
    let point = search(
        plan,
        &client,
        &target,
        &allowed,
        None,
        Labels {
            suite: suite.openssl,
            protocol: suite.protocol.as_str(),
            size: target.expected_len.unwrap_or(0),
            cores: 0,
            variant: "external",
        },
    )?;
    let record = super::external_record(suite, url, allowed);
    record_point(session, &config, record, point)
}

fn record_point(
    session: &mut Session,
    config: &SweepConfig,
    server: ServerRecord,
    point: SweepPoint,
) -> Result<()> {
    let label = format!(
        "{} {} x{} {}: {} ({:.0} req/s) at {} client(s), first byte max {:.0} ms, nginx {}{}",
        point.suite,
        ByteSize(point.size_bytes),
        point.cores,
        point.variant,
        format_bits_per_sec(point.throughput_bytes_per_sec),
        point.requests_per_sec,
        point.concurrency,
        point.max_first_byte_ns as f64 / 1e6,
        point
            .server_cpu
            .as_ref()
            .map(|c| format!("{:.0} %", c.total * 100.0))
            .unwrap_or_else(|| "-".into()),
        if point.valid { "" } else { " [INVALID]" }
    );
    session.progress.point(&label);
    warn_point(session, &point, &server);
    let tls = super::results(session);
    if !tls.servers.iter().any(|s| {
        s.suite == server.suite && s.variant.name == server.variant.name && s.cores == server.cores
    }) {
        tls.servers.push(server);
    }
    let sweep = tls.sweep.get_or_insert_with(|| SweepResults {
        config: config.clone(),
        points: Vec::new(),
    });
    sweep.points.push(point);
    session.save()
}

/// Whether a resumed run already holds this point ([`run`] kept its sweep only if
/// it was of the same plan).
fn measured(session: &Session, suite: &str, size: u64, cores: usize, variant: &str) -> bool {
    session
        .record
        .tls
        .as_ref()
        .and_then(|t| t.sweep.as_ref())
        .is_some_and(|s| s.point(suite, size, cores, variant).is_some())
}

fn warn_point(session: &mut Session, p: &SweepPoint, server: &ServerRecord) {
    let what = format!(
        "{} {} x{} {}",
        p.suite,
        ByteSize(p.size_bytes),
        p.cores,
        p.variant
    );
    if let Some(reason) = &p.invalid_reason {
        let kind = if p.generator_saturated {
            "generator_saturated"
        } else {
            "latency_limit"
        };
        session
            .record
            .warn("tls", kind, format!("{what}: invalid point: {reason}"));
    }
    if p.errors > 0 {
        session.record.warn(
            "tls",
            "request_errors",
            format!(
                "{what}: {} failed request(s) in the window: {:?}",
                p.errors, p.errors_by_reason
            ),
        );
    }
    if let Some(n) = p.server_requests {
        if n != p.requests_sent && p.cancelled == 0 {
            session.record.warn(
                "tls",
                "count_mismatch",
                format!(
                    "{what}: nginx counted {n} requests, the generator sent {}",
                    p.requests_sent
                ),
            );
        }
    }
    if let Some(cpu) = p
        .server_cpu
        .as_ref()
        .filter(|c| c.runqueue_wait > CONTENDED)
    {
        session.record.warn(
            "tls",
            "server_contended",
            format!(
                "{what}: nginx's workers waited for a CPU {:.0} % of the window: another program was using the cores under test, so the throughput is below what this machine can do",
                cpu.runqueue_wait * 100.0
            ),
        );
    }
    if p.interval_throughput_bytes_per_sec.high_spread() {
        session.record.warn(
            "tls",
            "high_spread",
            format!(
                "{what}: throughput spread ±{:.1} % across intervals",
                p.interval_throughput_bytes_per_sec.rel_spread * 100.0
            ),
        );
    }
    if !server.variant.took_effect {
        session.record.warn(
            "tls",
            "variant_not_effective",
            format!(
                "variant {} did not take effect for nginx: {}",
                server.variant.name,
                server.variant.explanation()
            ),
        );
    }
}

/// What a point is, for its record.
pub(crate) struct Labels<'a> {
    pub suite: &'a str,
    pub protocol: &'a str,
    pub size: u64,
    pub cores: usize,
    pub variant: &'a str,
}

/// One measurement at a fixed concurrency.
struct Measured {
    report: Report,
    server_cpu: Option<ServerCpu>,
    server_requests: Option<u64>,
}

impl Measured {
    fn within(&self, limit: Duration) -> bool {
        self.report.max_first_byte <= limit && self.report.failed == 0
    }
}

fn measure(
    plan: &SweepPlan,
    client: &Client,
    target: &Target,
    generator_cpus: &[usize],
    server: Option<&Server>,
    concurrency: usize,
    window: Duration,
) -> Result<Measured> {
    let interval = super::interval_for(window);
    let spec = Spec {
        target: target.clone(),
        arrivals: Arrivals::Closed { concurrency },
        warmup: plan.warmup,
        window,
        drain: plan.drain,
        timeout: plan.timeout,
        interval,
        cpus: generator_cpus.to_vec(),
        max_connections: super::connection_budget(generator_cpus.len()),
    };
    let before = server.and_then(Server::requests);
    let sampler = server.map(|s| {
        Sampler::start(
            s.workers().to_vec(),
            (interval / 4).min(Duration::from_millis(250)),
        )
    });
    let report = engine::run(client, &spec)?;
    let server_cpu = sampler.and_then(|s| {
        let (samples, _) = s.finish();
        cpu::server_cpu(&samples, report.window_start, report.window_end, interval)
    });
    let after = server.and_then(Server::requests);
    let server_requests = match (before, after) {
        // The second status query counts the first one.
        (Some(b), Some(a)) => Some(a.saturating_sub(b).saturating_sub(1)),
        _ => None,
    };
    Ok(Measured {
        report,
        server_cpu,
        server_requests,
    })
}

fn probe_of(m: &Measured, concurrency: usize, limit: Duration) -> Probe {
    Probe {
        concurrency,
        window_ns: m.report.window.as_nanos() as u64,
        throughput_bytes_per_sec: m.report.throughput_bytes_per_sec(),
        requests_per_sec: m.report.requests_per_sec(),
        max_first_byte_ns: m.report.max_first_byte.as_nanos() as u64,
        errors: m.report.failed,
        within_limit: m.within(limit),
        generator_cpu: m.report.generator_cpu(),
    }
}

/// Searches the concurrency and measures the final window.
pub(crate) fn search(
    plan: &SweepPlan,
    client: &Client,
    target: &Target,
    generator_cpus: &[usize],
    server: Option<&Server>,
    labels: Labels<'_>,
) -> Result<SweepPoint> {
    let mut probes = Vec::new();
    let mut best: Option<(usize, f64)> = plan.fixed_concurrency.map(|c| (c, 0.0));
    let mut flat = 0;
    let mut concurrency = 1usize;
    while plan.fixed_concurrency.is_none() {
        interrupt::check()?;
        let m = measure(
            plan,
            client,
            target,
            generator_cpus,
            server,
            concurrency,
            plan.probe,
        )?;
        let probe = probe_of(&m, concurrency, plan.limit);
        let (ok, throughput, saturated) = (
            probe.within_limit,
            probe.throughput_bytes_per_sec,
            probe.generator_cpu > GENERATOR_SATURATED,
        );
        probes.push(probe);
        if !ok {
            break;
        }
        match best {
            None => best = Some((concurrency, throughput)),
            Some((_, b)) => {
                if throughput > b * (1.0 + PLATEAU_GAIN) {
                    flat = 0;
                } else {
                    flat += 1;
                }
                if throughput > b {
                    best = Some((concurrency, throughput));
                }
            }
        }
        if flat >= 2 || saturated || concurrency >= plan.max_concurrency {
            break;
        }
        concurrency = (concurrency * 2).min(plan.max_concurrency);
    }
    let mut chosen = best.map(|b| b.0).unwrap_or(1);
    let mut step_downs = 0;
    let final_m = loop {
        interrupt::check()?;
        let m = measure(
            plan,
            client,
            target,
            generator_cpus,
            server,
            chosen,
            plan.window,
        )?;
        probes.push(probe_of(&m, chosen, plan.limit));
        if m.within(plan.limit)
            || chosen == 1
            || step_downs >= STEP_DOWNS
            || plan.fixed_concurrency.is_some()
        {
            break m;
        }
        chosen = (chosen / 2).max(1);
        step_downs += 1;
    };
    Ok(point(plan, labels, chosen, final_m, probes))
}

fn point(
    plan: &SweepPlan,
    l: Labels<'_>,
    concurrency: usize,
    m: Measured,
    probes: Vec<Probe>,
) -> SweepPoint {
    let r = &m.report;
    let interval_s = r.interval.as_secs_f64().max(1e-9);
    let rates: Vec<f64> = r
        .buckets
        .iter()
        .map(|b| b.bytes as f64 / interval_s)
        .collect();
    let generator_cpu = r.generator_cpu();
    let generator_saturated = generator_cpu > GENERATOR_SATURATED;
    let within_limit = m.within(plan.limit);
    let invalid_reason = if generator_saturated {
        Some(format!(
            "the load generator used {:.0} % of its cores: the point measures the generator, not nginx",
            generator_cpu * 100.0
        ))
    } else if r.failed > 0 {
        Some(format!("{} request(s) failed in the window", r.failed))
    } else if !within_limit {
        Some(format!(
            "even at {concurrency} client(s) the first byte took up to {:.2} s, over the {:.2} s limit",
            r.max_first_byte.as_secs_f64(),
            plan.limit.as_secs_f64()
        ))
    } else {
        None
    };
    SweepPoint {
        suite: l.suite.to_string(),
        protocol: l.protocol.to_string(),
        negotiated_suite: r.negotiated.as_ref().map(|n| n.0.clone()),
        negotiated_protocol: r.negotiated.as_ref().map(|n| n.1.clone()),
        size_bytes: l.size,
        cores: l.cores,
        variant: l.variant.to_string(),
        concurrency,
        window_ns: r.window.as_nanos() as u64,
        interval_ns: r.interval.as_nanos() as u64,
        throughput_bytes_per_sec: r.throughput_bytes_per_sec(),
        interval_throughput_bytes_per_sec: Summary::of_or_empty(&rates),
        requests_per_sec: r.requests_per_sec(),
        requests: r.ok,
        requests_sent: r.requests_sent,
        server_requests: m.server_requests,
        cancelled: r.cancelled,
        requests_ok_total: r.ok_total,
        requests_resumed_total: r.resumed_total,
        body_bytes: r.body_bytes,
        errors: r.failed,
        errors_by_reason: r.failures.clone(),
        latency: engine::latency(&r.latency),
        first_byte: engine::latency(&r.first_byte),
        handshake: engine::latency(&r.handshake),
        connect: engine::latency(&r.connect),
        max_first_byte_ns: r.max_first_byte.as_nanos() as u64,
        within_limit,
        server_cpu: m.server_cpu,
        generator_cpu,
        generator_threads: r.threads,
        generator_saturated,
        valid: invalid_reason.is_none(),
        invalid_reason,
        probes,
    }
}
