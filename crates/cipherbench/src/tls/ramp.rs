//! `cipherbench tls ramp` (after the IXP425 offload paper, seed 002): an open-loop
//! arrival rate rising linearly from 0 to the target over the duration, every request
//! a new connection, counted as attempted, successful and unsuccessful (by reason),
//! with a per-second series, for each suite, response size and variant.
//!
//! Requests start on schedule whether or not earlier ones finished, and latency runs
//! from the scheduled start: a server that falls behind shows as latency and
//! timeouts, not as a slower schedule.
//!
//! With `--key-store file,pkcs11` each ramp runs with the key in each store, one
//! after the other (their order alternating from one ramp to the next), each with
//! its own nginx; a PKCS#11 module's key needs `--cores 1` (one nginx process).

use super::cpu::{self, Sampler};
use super::engine::{self, Arrivals, Client, Schedule, Spec, Target};
use super::nginx::{self, Server, ServerSpec, Workspace};
use super::{RampPlan, ServerTarget};
use crate::campaign;
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
                let slots: usize = self
                    .suites
                    .iter()
                    .map(|s| {
                        self.key_stores
                            .iter()
                            .filter(|k| super::keystore::cannot_serve(k, s, self.cores).is_none())
                            .count()
                    })
                    .sum();
                slots * self.sizes.len() * self.variants.len()
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
            key_stores: self.key_stores.iter().map(|k| k.name().into()).collect(),
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
    super::defaults::note(session, &crate::variant::libraries_of(&plan.variants));
    let schedule = Schedule::Ramp {
        target_rate: plan.target_rate,
        duration: plan.duration,
    };
    let mut fleet = super::connect_agents(plan.agents.as_ref(), session)?;
    let fleet = &mut fleet;
    match &plan.target {
        ServerTarget::External(url) => run_external(plan, url, &config, schedule, fleet, session),
        ServerTarget::Nginx { binary, port } => run_nginx(
            plan,
            binary.as_deref(),
            *port,
            &config,
            schedule,
            session,
            fleet,
        ),
    }
}

/// The ramps against nginx started here, one per ramp.
fn run_nginx(
    plan: &RampPlan,
    binary: Option<&std::path::Path>,
    port: Option<u16>,
    config: &RampConfig,
    schedule: Schedule,
    session: &mut Session,
    fleet: &mut Option<crate::agent::fleet::Fleet>,
) -> Result<()> {
    let binary = nginx::resolve_nginx(binary)?;
    let info = nginx::nginx_info(&binary)?;
    if let Some(p) = port {
        nginx::check_port(p)?;
    }
    let placed = super::assign_cpus(
        &campaign::topology(session),
        plan.cores,
        plan.generator_cpus.as_deref(),
    )?;
    super::warn_agents_on_server_cpus(session, fleet.as_ref(), &placed.server);
    let variants = super::NginxVariants::judge(&plan.variants)?;
    let workspace = Workspace::create(&plan.sizes, plan.key)?;
    let sources = super::key_sources(&plan.key_stores, &workspace)?;
    let skipped = super::keystore::skips(&plan.key_stores, &plan.suites, &[plan.cores]);
    for s in &skipped {
        session
            .progress
            .note(&format!("{}: {}", s.what(), s.reason));
        session.record.warn(
            "tls",
            "key_store_skipped",
            format!("{}: {}", s.what(), s.reason),
        );
    }
    if !skipped.is_empty() {
        ramp_results(session, config).key_store_skipped = skipped;
        session.save()?;
    }
    let also_listen = match fleet {
        Some(f) => f.coordinator_addrs()?,
        None => Vec::new(),
    };
    session
        .progress
        .layer("tls ramp", plan.total_runs(), plan.estimate());
    // The variant x key-store slots of one suite and size back to back, the
    // order turning from one to the next (A B, B A, ...: the interleaving
    // schedule with a size for a round), so a drift of the machine does not
    // always favour the first.
    let clients = plan
        .suites
        .iter()
        .map(|s| Client::verifying(s, false, plan.verify))
        .collect::<Result<Vec<_>>>()?;
    let units = in_turns(plan, &sources);
    campaign::each_unit(
        &units,
        &mut Ramps {
            plan,
            config,
            session: &mut *session,
            fleet,
            schedule,
            binary: &binary,
            info: &info,
            port,
            placed: &placed,
            clients: &clients,
            variants: &variants,
            workspace: &workspace,
            also_listen: &also_listen,
        },
    )?;
    Ok(())
}

/// A ramp against the user's server (`--server URL`).
fn run_external(
    plan: &RampPlan,
    url: &super::ExternalUrl,
    config: &RampConfig,
    schedule: Schedule,
    fleet: &mut Option<crate::agent::fleet::Fleet>,
    session: &mut Session,
) -> Result<()> {
    let Some(suite) = plan.suites.first() else {
        bail!("no suite to measure");
    };
    let client = Client::verifying(suite, false, plan.verify)?;
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
        fleet,
        schedule,
        suite.openssl,
        size,
        "external",
        "",
        0,
        &generator_cpus,
    )?;
    let record = super::external_record(suite, url, generator_cpus);
    record_run(session, config, record, run)
}

/// Every ramp of the plan in measuring order: per suite and size, its variant x
/// key-store slots that can serve the suite, back to back, in the turn of that
/// suite and size.
fn in_turns<'a>(
    plan: &'a RampPlan,
    sources: &'a [(super::keystore::KeyStore, super::keystore::KeySource)],
) -> Vec<Ramp<'a>> {
    let mut units = Vec::new();
    let mut turn = 0usize;
    for (s, suite) in plan.suites.iter().enumerate() {
        for &size in &plan.sizes {
            let slots: Vec<_> = plan
                .variants
                .iter()
                .flat_map(|v| {
                    sources
                        .iter()
                        .filter(|(k, _)| {
                            super::keystore::cannot_serve(k, suite, plan.cores).is_none()
                        })
                        .map(move |(k, src)| (v, k, src))
                })
                .collect();
            units.extend(
                cipherbench_model::interleave::round_order(slots.len(), turn).map(|k| Ramp {
                    suite: s,
                    size,
                    variant: slots[k].0,
                    store: slots[k].1,
                    key_source: slots[k].2,
                }),
            );
            turn += 1;
        }
    }
    units
}

/// One ramp: a suite and a size through one variant x key-store slot's nginx.
struct Ramp<'a> {
    /// Index into the plan's suites.
    suite: usize,
    size: u64,
    variant: &'a crate::variant::Variant,
    store: &'a super::keystore::KeyStore,
    key_source: &'a super::keystore::KeySource,
}

/// The ramps' units: each ramp, on a fresh nginx. A resumed run skips the ramps an
/// earlier run of the plan measured.
struct Ramps<'a> {
    plan: &'a RampPlan,
    config: &'a RampConfig,
    session: &'a mut Session,
    fleet: &'a mut Option<crate::agent::fleet::Fleet>,
    schedule: Schedule,
    binary: &'a std::path::Path,
    info: &'a nginx::NginxInfo,
    port: Option<u16>,
    placed: &'a cipherbench_model::topology::TlsCpus,
    clients: &'a [Client],
    variants: &'a super::NginxVariants,
    workspace: &'a Workspace,
    also_listen: &'a [std::net::IpAddr],
}

impl<'a> campaign::Units for Ramps<'a> {
    type Unit = Ramp<'a>;

    fn done(&self, r: &Ramp<'a>) -> bool {
        let suite = self.plan.suites[r.suite].openssl;
        self.session
            .record
            .tls
            .as_ref()
            .and_then(|t| t.ramp.as_ref())
            .is_some_and(|ramps| {
                ramps.runs.iter().chain(&ramps.key_store_runs).any(|x| {
                    x.suite == suite
                        && x.size_bytes == r.size
                        && x.variant == r.variant.name()
                        && x.key_store == r.store.name()
                })
            })
    }

    fn skip(&mut self, _: &Ramp<'a>) {
        self.session.progress.skip(1);
    }

    /// Nothing: a ramp is saved whole or not at all.
    fn forget(&mut self, _: &Ramp<'a>) {}

    fn measure(&mut self, r: &Ramp<'a>) -> Result<()> {
        let plan = self.plan;
        let (suite, client) = (&plan.suites[r.suite], &self.clients[r.suite]);
        let spec = ServerSpec {
            nginx: self.binary,
            info: self.info,
            workspace: self.workspace,
            suite: *suite,
            cpus: self.placed.server.clone(),
            variant: r.variant,
            ia32cap: self.variants.mask(r.variant),
            port: self.port,
            resumption: false,
            also_listen: self.also_listen.to_vec(),
            groups: None,
            key_source: r.key_source.clone(),
            plain: None,
        };
        let (server, record, target) = super::start_nginx(
            self.session,
            &spec,
            client,
            self.variants,
            super::SlotRecord {
                key: plan.key,
                store: r.store,
                cores: plan.cores,
                generator_cpus: self.placed.generator.clone(),
                placement: &self.placed.placement,
            },
            r.size,
        )?;
        let run = one(
            plan,
            client,
            &target,
            &self.placed.generator,
            Some(&server),
            self.fleet,
            self.schedule,
            suite.openssl,
            r.size,
            &r.variant.name(),
            r.store.name(),
            plan.cores,
            &self.placed.placement.all_cpus(),
        )?;
        server.stop();
        record_run(self.session, self.config, record, run)?;
        super::NginxVariants::note_counter(self.session, r.variant);
        Ok(())
    }
}

fn empty(config: &RampConfig) -> RampResults {
    RampResults {
        config: config.clone(),
        runs: Vec::new(),
        key_store_runs: Vec::new(),
        key_store_skipped: Vec::new(),
    }
}

/// The session's ramp record, created if needed.
fn ramp_results<'a>(session: &'a mut Session, config: &RampConfig) -> &'a mut RampResults {
    super::results(session)
        .ramp
        .get_or_insert_with(|| empty(config))
}

#[allow(clippy::too_many_arguments)]
fn one(
    plan: &RampPlan,
    client: &Client,
    target: &Target,
    generator_cpus: &[usize],
    server: Option<&Server>,
    fleet: &mut Option<crate::agent::fleet::Fleet>,
    schedule: Schedule,
    suite: &str,
    size: u64,
    variant: &str,
    key_store: &str,
    cores: usize,
    window_cpus: &[usize],
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
        pace: super::engine::pays_for_wakeups(target.addr),
        verify: plan.verify,
    };
    let before = server.and_then(Server::requests);
    let sampler = server.map(|s| Sampler::start(s.workers().to_vec(), Duration::from_millis(250)));
    // Around the whole ramp, closed while nginx runs (nginx is under this process).
    let noise_window = crate::machine::noise::Window::open(window_cpus, &[std::process::id()]);
    let (r, agents) = match fleet {
        None => (engine::run(client, &spec)?, Vec::new()),
        // The rate split over the agents; an agent's failure ends the ramp, naming it
        // (a ramp is one window: there is no other point to go on with).
        Some(f) => super::agents::run(f, &spec, suite, false, &|a| super::agent_addr(a, target))
            .map_err(
                |e| match e.downcast::<crate::agent::fleet::AgentFailure>() {
                    Ok(failure) => anyhow::anyhow!(
                        "ramp {suite} {} {variant} failed: {failure}",
                        ByteSize(size)
                    ),
                    Err(e) => e,
                },
            )?,
    };
    let noise = noise_window.close();
    let server_cpu = sampler.and_then(|s| {
        let (samples, _) = s.finish();
        cpu::server_cpu(&samples, r.window_start, r.window_end, interval)
    });
    let server_requests = match (before, server.and_then(Server::requests)) {
        (Some(b), Some(a)) => Some(a.saturating_sub(b).saturating_sub(1)),
        _ => None,
    };
    Ok(RampRun {
        suite: suite.to_string(),
        size_bytes: size,
        variant: variant.to_string(),
        key_store: key_store.to_string(),
        cores,
        server_requests,
        server_cpu,
        noise: Some(Box::new(noise)),
        // Agents read as this machine's generator does, and report their counts.
        verification: Some(plan.verify.record(&r.verified)),
        agents,
        ..from_report(&r)
    })
}

/// What the generator's report says of a ramp: its counts, latencies and
/// second-by-second series, the generator's CPU; the point's own fields empty.
fn from_report(r: &engine::Report) -> RampRun {
    let generator_cpu = r.generator_cpu();
    let generator_cpu_per_thread = r.generator_cpu_per_thread();
    let generator_saturated = super::sweep::saturated(generator_cpu, &generator_cpu_per_thread);
    RampRun {
        suite: String::new(),
        negotiated_suite: r.negotiated.as_ref().map(|n| n.0.clone()),
        size_bytes: 0,
        variant: String::new(),
        key_store: String::new(),
        cores: 0,
        attempted: r.attempted,
        successful: r.ok,
        unsuccessful: r.failed,
        unsuccessful_by_reason: r.failures.clone(),
        server_requests: None,
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
        server_cpu: None,
        generator_cpu,
        generator_cpu_per_thread,
        generator_saturated,
        noise: None,
        agents: Vec::new(),
        verification: None,
    }
}

fn record_run(
    session: &mut Session,
    config: &RampConfig,
    server: ServerRecord,
    run: RampRun,
) -> Result<()> {
    let what = format!(
        "{} {} {}{}",
        run.suite,
        ByteSize(run.size_bytes),
        run.variant,
        super::sweep::store_suffix(&run.key_store)
    );
    session.progress.point(&format!(
        "ramp {what}: {} attempted, {} successful, {} unsuccessful, latency p99 {:.1} ms, generator {} per thread",
        run.attempted,
        run.successful,
        run.unsuccessful,
        run.latency.p99_ns as f64 / 1e6,
        super::sweep::per_thread(&run.generator_cpu_per_thread)
    ));
    if run.generator_saturated {
        session.record.warn(
            "tls",
            "generator_saturated",
            format!(
                "ramp {what}: the load generator used {:.0} % of its cores (threads {}); its counts may describe the generator, not nginx",
                run.generator_cpu * 100.0,
                super::sweep::per_thread(&run.generator_cpu_per_thread)
            ),
        );
    }
    for f in run.noise_findings() {
        session
            .record
            .warn("tls", &f.kind, format!("ramp {what}: {}", f.message));
    }
    if let Some(f) = cipherbench_model::noise::governor_finding(run.noise.as_deref()) {
        session.record.warn("tls", &f.kind, f.message);
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
    super::warn_server(session, &format!("ramp {what}"), &server);
    let tls = super::results(session);
    super::record_server(tls, server);
    let ramp = tls.ramp.get_or_insert_with(|| empty(config));
    // The first key store's ramps are the ramp's; the others', its counterparts.
    if super::is_counterpart_store(&config.key_stores, &run.key_store) {
        ramp.key_store_runs.push(run);
    } else {
        ramp.runs.push(run);
    }
    session.save()
}
