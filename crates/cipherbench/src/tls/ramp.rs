//! `cipherbench tls ramp` (seed 002): an open-loop arrival rate rising linearly from
//! 0 to the target over the duration, every request a new connection, counted as
//! attempted, successful and unsuccessful (by reason), with a per-second series, for
//! each suite, response size and variant.
//!
//! Requests start on schedule whether or not earlier ones finished, and latency runs
//! from the scheduled start: a server that falls behind shows as latency and
//! timeouts, not as a slower schedule.

use super::cpu::{self, Sampler};
use super::engine::{self, Arrivals, Client, Schedule, Spec, Target};
use super::nginx::{self, Server, ServerSpec, Workspace};
use super::{RampPlan, ServerTarget};
use crate::interrupt;
use crate::results::Session;
use anyhow::{bail, Result};
use cipherbench_model::tls::{RampConfig, RampResults, RampRun, RampSecond, ServerRecord};
use cipherbench_model::units::ByteSize;
use std::time::Duration;

impl RampPlan {
    /// Ramps to run.
    pub fn total_runs(&self) -> usize {
        match self.target {
            ServerTarget::External(_) => 1,
            ServerTarget::Nginx { .. } => {
                self.suites.len() * self.sizes.len() * self.variants.len()
            }
        }
    }

    /// A rough duration.
    pub fn estimate(&self) -> Duration {
        (self.duration + Duration::from_millis(500)) * self.total_runs() as u32
    }

    fn config(&self) -> RampConfig {
        RampConfig {
            suites: self.suites.iter().map(|s| s.openssl.to_string()).collect(),
            sizes_bytes: self.sizes.clone(),
            variants: self.variants.iter().map(|v| v.name().clone()).collect(),
            cores: self.cores,
            target_rate: self.target_rate,
            duration_ns: self.duration.as_nanos() as u64,
            timeout_ns: self.timeout.as_nanos() as u64,
            key: self.key.name().to_string(),
        }
    }
}

/// Runs the ramps, saving after each.
pub fn run(plan: &RampPlan, session: &mut Session) -> Result<()> {
    let config = plan.config();
    // A resumed run keeps earlier ramps only if they were of this same plan.
    if let Some(tls) = session.record.tls.as_mut() {
        if tls.ramp.as_ref().is_some_and(|r| r.config != config) {
            tls.ramp = None;
        }
    }
    let schedule = Schedule::Ramp {
        target_rate: plan.target_rate,
        duration: plan.duration,
    };
    match &plan.target {
        ServerTarget::External(url) => {
            let Some(suite) = plan.suites.first() else {
                bail!("no suite to measure");
            };
            let client = Client::new(suite, false)?;
            let target = super::external_target(&client, url)?;
            let size = target.expected_len.unwrap_or(0);
            let generator_cpus = plan
                .generator_cpus
                .clone()
                .unwrap_or_else(crate::host::allowed_cpus);
            session.progress.layer("tls ramp", 1, plan.estimate());
            let run = one(
                plan,
                &client,
                &target,
                &generator_cpus,
                None,
                schedule,
                suite.openssl,
                size,
                "external",
                0,
            )?;
            let record = super::external_record(suite, url, generator_cpus);
            record_run(session, &config, record, run)
        }
        ServerTarget::Nginx { binary, port } => {
            let binary = nginx::resolve_nginx(binary.as_deref())?;
            let info = nginx::nginx_info(&binary)?;
            if let Some(p) = port {
                nginx::check_port(*p)?;
            }
            let allowed = crate::host::allowed_cpus();
            let (server_cpus, generator_cpus) =
                super::assign_cpus(&allowed, plan.cores, plan.generator_cpus.as_deref())?;
            let variants = super::NginxVariants::judge(&plan.variants)?;
            let workspace = Workspace::create(&plan.sizes, plan.key)?;
            session
                .progress
                .layer("tls ramp", plan.total_runs(), plan.estimate());
            for suite in &plan.suites {
                let client = Client::new(suite, false)?;
                for &size in &plan.sizes {
                    for variant in &plan.variants {
                        interrupt::check()?;
                        let done = session
                            .record
                            .tls
                            .as_ref()
                            .and_then(|t| t.ramp.as_ref())
                            .is_some_and(|r| r.run(suite.openssl, size, &variant.name()).is_some());
                        if done {
                            // Measured by an earlier, interrupted run of this plan.
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
                            resumption: false,
                            groups: None,
                            key_source: super::keystore::KeySource::File(
                                workspace.dir().join("key.pem"),
                            ),
                        };
                        let server = Server::start(&spec, &client)?;
                        super::note_libraries(session, variant, &server);
                        let record = ServerRecord {
                            kind: "nginx".into(),
                            version: Some(info.version.clone()),
                            library: super::server_library(&info, variant),
                            suite: suite.openssl.to_string(),
                            key: plan.key.name().to_string(),
                            key_store: "file".into(),
                            cores: plan.cores,
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
                        let run = one(
                            plan,
                            &client,
                            &target,
                            &generator_cpus,
                            Some(&server),
                            schedule,
                            suite.openssl,
                            size,
                            &variant.name(),
                            plan.cores,
                        )?;
                        server.stop();
                        record_run(session, &config, record, run)?;
                    }
                }
            }
            Ok(())
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn one(
    plan: &RampPlan,
    client: &Client,
    target: &Target,
    generator_cpus: &[usize],
    server: Option<&Server>,
    schedule: Schedule,
    suite: &str,
    size: u64,
    variant: &str,
    cores: usize,
) -> Result<RampRun> {
    let interval = Duration::from_secs(1);
    let spec = Spec {
        target: target.clone(),
        arrivals: Arrivals::Open(schedule),
        warmup: Duration::ZERO,
        window: schedule.duration(),
        drain: plan.timeout,
        timeout: plan.timeout,
        interval,
        cpus: generator_cpus.to_vec(),
        max_connections: super::connection_budget(generator_cpus.len()),
    };
    let before = server.and_then(Server::requests);
    let sampler = server.map(|s| Sampler::start(s.workers().to_vec(), Duration::from_millis(250)));
    let r = engine::run(client, &spec)?;
    let server_cpu = sampler.and_then(|s| {
        let (samples, _) = s.finish();
        cpu::server_cpu(&samples, r.window_start, r.window_end, interval)
    });
    let after = server.and_then(Server::requests);
    let generator_cpu = r.generator_cpu();
    Ok(RampRun {
        suite: suite.to_string(),
        negotiated_suite: r.negotiated.as_ref().map(|n| n.0.clone()),
        size_bytes: size,
        variant: variant.to_string(),
        cores,
        attempted: r.attempted,
        successful: r.ok,
        unsuccessful: r.failed,
        unsuccessful_by_reason: r.failures.clone(),
        server_requests: match (before, after) {
            (Some(b), Some(a)) => Some(a.saturating_sub(b).saturating_sub(1)),
            _ => None,
        },
        requests_sent: r.requests_sent,
        body_bytes: r.body_bytes,
        latency: engine::latency(&r.latency),
        handshake: engine::latency(&r.handshake),
        series: r
            .buckets
            .iter()
            .enumerate()
            .map(|(i, b)| RampSecond {
                second: i as u32,
                attempted: b.attempted,
                successful: b.ok,
                unsuccessful: b.failed,
                max_latency_ns: b.max_latency_ns,
            })
            .collect(),
        server_cpu,
        generator_cpu,
        generator_saturated: generator_cpu > super::sweep::GENERATOR_SATURATED,
    })
}

fn record_run(
    session: &mut Session,
    config: &RampConfig,
    server: ServerRecord,
    run: RampRun,
) -> Result<()> {
    let what = format!("{} {} {}", run.suite, ByteSize(run.size_bytes), run.variant);
    session.progress.point(&format!(
        "ramp {what}: {} attempted, {} successful, {} unsuccessful, latency p99 {:.1} ms",
        run.attempted,
        run.successful,
        run.unsuccessful,
        run.latency.p99_ns as f64 / 1e6
    ));
    if run.generator_saturated {
        session.record.warn(
            "tls",
            "generator_saturated",
            format!(
                "ramp {what}: the load generator used {:.0} % of its cores; its counts may describe the generator, not nginx",
                run.generator_cpu * 100.0
            ),
        );
    }
    if let Some(cpu) = run
        .server_cpu
        .as_ref()
        .filter(|c| c.runqueue_wait > super::sweep::CONTENDED)
    {
        session.record.warn(
            "tls",
            "server_contended",
            format!(
                "ramp {what}: nginx's workers waited for a CPU {:.0} % of the ramp: another program was using the cores under test",
                cpu.runqueue_wait * 100.0
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
    let tls = super::results(session);
    if !tls.servers.iter().any(|s| {
        s.suite == server.suite && s.variant.name == server.variant.name && s.cores == server.cores
    }) {
        tls.servers.push(server);
    }
    tls.ramp
        .get_or_insert_with(|| RampResults {
            config: config.clone(),
            runs: Vec::new(),
        })
        .runs
        .push(run);
    session.save()
}
