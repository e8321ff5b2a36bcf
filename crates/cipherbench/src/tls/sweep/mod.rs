//! `cipherbench tls sweep` (after Intel's nginx study, seeds 000/003): for each core
//! count, file size, suite and variant, the highest throughput nginx sustains for the
//! window with the maximum time to first byte within the limit.
//!
//! The concurrency is searched, not guessed: short probes at doubling client counts
//! until the limit is broken, a generator thread saturates, nginx is busy and a
//! doubling gains less than [`PLATEAU_GAIN`], or, with nginx not busy, three
//! doublings in a row gain nothing ([`next_step`]); then the best probe's concurrency
//! is measured over the full window (and halved if the longer window breaks the
//! limit). The monotonicity rule: a core count's probes start at the concurrency the
//! next smaller core count chose ([`start_concurrency`]), since more workers never
//! need fewer clients, and the finished curve is checked ([`curve_findings`]): a
//! throughput that falls with more cores, or a per-core figure that rises with more
//! cores above a point nginx did not saturate, is said. Every point records what
//! stopped its search and which side was the limit. Core counts this machine cannot
//! give nginx with a generator CPU to spare are skipped, and said so. Each variant x
//! key-store slot of a point gets its own nginx, so the variant, the suite and the
//! key store are exactly what the point says.
//!
//! The slots of one point are measured together ([`measure_rounds`]): their nginx
//! start side by side (one port each) and are searched in turn; then the final
//! window is cut into `--rounds` rounds and the slots take turns (A B, B A, A B),
//! so a drift of the machine reaches each alike and a ratio between them pairs the
//! rounds (METHODOLOGY.md, "Variants interleaved"). Each slot's figure is over all
//! its rounds, which stay in its record. The slots' order turns from one point to
//! the next; a point's slots are saved together when its rounds end (or are cut
//! short by Ctrl-C: what was measured is kept).
//!
//! The key store (`--key-store file,pkcs11`) is a dimension of the run: each point is
//! measured with the key in each store, one more slot of the point. A PKCS#11
//! module's key is served by one nginx process, so that store is measured at one
//! core only and its other core counts are recorded as not measured.

mod point;
mod rules;
mod search;
mod slots;
mod words;

pub(crate) use point::*;
pub(crate) use rules::*;
pub(crate) use search::*;
pub(crate) use slots::*;
pub(crate) use words::*;

use super::cpu::{self, Sampler};
use super::engine::{self, Arrivals, Client, Report, Spec, Target};
use super::keystore::{cannot_serve, KeySource, KeyStore};
use super::nginx::{self, Server, ServerSpec, Workspace};
use super::{ServerTarget, SweepPlan};
use crate::agent::fleet::{AgentFailure, Fleet};
use crate::campaign;
use crate::interrupt;
use crate::results::Session;
use anyhow::{bail, Result};
use cipherbench_model::tls::{
    Limit, Probe, SearchOutcome, ServerCpu, ServerRecord, SkippedCores, SweepConfig, SweepPoint,
    SweepResults, WindowRound,
};
use cipherbench_model::units::{format_bits_per_sec, ByteSize};
use cipherbench_model::Summary;
use std::time::Duration;

/// A doubling of the concurrency that gains less than this is "flat".
pub const PLATEAU_GAIN: f64 = 0.05;
/// Generator CPU above this fraction of its cores (or of one thread's core) marks a
/// point invalid.
pub const GENERATOR_SATURATED: f64 = 0.90;
/// nginx's workers busy above this fraction of their cores: nginx is the limit.
pub const SERVER_BUSY: f64 = 0.90;
/// Flat doublings that end a search while nginx is not busy.
const FLAT_IDLE: usize = 3;
/// A throughput this much lower at more cores is a falling curve.
pub const CURVE_FALL: f64 = 0.05;
/// A per-core figure this much higher at more cores is superlinear.
pub const CURVE_SUPERLINEAR: f64 = 0.10;
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
                let cpus = crate::host::allowed_cpus().len();
                let mut slots = 0;
                for &c in self.cores.iter().filter(|&&c| c < cpus) {
                    for s in &self.suites {
                        let stores = self
                            .key_stores
                            .iter()
                            .filter(|k| cannot_serve(k, s, c).is_none())
                            .count();
                        slots += stores * self.variants.len();
                    }
                    // The plain-HTTP ceiling, beside the first suite's point.
                    if self.plain_http && self.fixed_rate.is_none() && self.agents.is_none() {
                        slots += 2;
                    }
                }
                slots * self.sizes.len()
            }
        }
    }

    /// A rough duration: four probes and the window per point.
    pub fn estimate(&self) -> Duration {
        self.estimate_per_point() * self.total_points() as u32
    }

    /// How long one point takes: its search, then its rounds.
    pub fn estimate_per_point(&self) -> Duration {
        // Four probes, each with its warm-up and the drain of its last requests; the
        // window's rounds each add a warm-up and a drain.
        // The plain-HTTP slots join the first suite's points.
        let plain = if self.plain_http { 2 } else { 0 };
        let rounds = if self.variants.len() * self.key_stores.len() + plain > 1 {
            self.rounds.max(1) as u32
        } else {
            1
        };
        // With --concurrency or --rate there is no search: the window alone.
        let probes = if self.fixed_concurrency.is_some() || self.fixed_rate.is_some() {
            0
        } else {
            4
        };
        (self.warmup + self.probe + Duration::from_secs(1)) * probes
            + (self.warmup + Duration::from_millis(500)) * rounds
            + self.window
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
            key_stores: self.key_stores.iter().map(|k| k.name().into()).collect(),
            rounds: self.rounds,
            open_loop_rate: self.fixed_rate,
            plain_http: self.plain_http,
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
    crate::tls::defaults::note(session, &crate::variant::libraries_of(&plan.variants));
    let mut fleet = super::connect_agents(plan.agents.as_ref(), session)?;
    let fleet = &mut fleet;
    match &plan.target {
        ServerTarget::External(url) => run_external(plan, url, config, session, fleet),
        ServerTarget::Nginx { binary, port } => {
            run_nginx(plan, binary.as_deref(), *port, &config, session, fleet)
        }
    }
}

/// The sweep against nginx started here, one per slot of each point.
fn run_nginx(
    plan: &SweepPlan,
    binary: Option<&std::path::Path>,
    port: Option<u16>,
    config: &SweepConfig,
    session: &mut Session,
    fleet: &mut Option<Fleet>,
) -> Result<()> {
    let binary = nginx::resolve_nginx(binary)?;
    let info = nginx::nginx_info(&binary)?;
    if let Some(p) = port {
        // A point's slots run side by side: --port and the ports after it.
        let plain = if plan.plain_http { 2 } else { 0 };
        nginx::check_ports(p, plan.variants.len() * plan.key_stores.len() + plain)?;
    }
    let (assignments, skipped) = assign_cores(plan, session)?;
    let measured_cores: Vec<usize> = assignments.iter().map(|(c, _)| *c).collect();
    let store_skipped = super::keystore::skips(&plan.key_stores, &plan.suites, &measured_cores);
    for s in &store_skipped {
        session.record.warn(
            "tls",
            "key_store_skipped",
            format!("{}: {}", s.what(), s.reason),
        );
    }
    note_skipped(session, config, skipped, store_skipped)?;
    let clients = plan
        .suites
        .iter()
        .map(|s| Client::verifying(s, plan.resumption, plan.verify))
        .collect::<Result<Vec<_>>>()?;
    let plain = plain_ceiling(plan, fleet.is_some(), session)?;
    let variants = super::NginxVariants::judge(&plan.variants)?;
    let workspace = Workspace::create(&plan.sizes, plan.key)?;
    let sources = super::key_sources(&plan.key_stores, &workspace)?;
    let also_listen = match fleet {
        Some(f) => f.coordinator_addrs()?,
        None => Vec::new(),
    };
    session
        .progress
        .layer("tls sweep", plan.total_points(), plan.estimate());
    let mut units = Vec::new();
    for (a, (cores, _)) in assignments.iter().enumerate() {
        for &size in &plan.sizes {
            for suite in 0..plan.suites.len() {
                units.push(Point {
                    assignment: a,
                    cores: *cores,
                    size,
                    suite,
                    turn: units.len(),
                });
            }
        }
    }
    campaign::each_unit(
        &units,
        &mut Points {
            plan,
            config,
            session: &mut *session,
            fleet,
            binary: &binary,
            info: &info,
            port,
            assignments: &assignments,
            clients: &clients,
            variants: &variants,
            workspace: &workspace,
            sources: &sources,
            also_listen: &also_listen,
            plain: plain.as_ref(),
        },
    )?;
    check_curve(session);
    Ok(())
}

/// The plain-HTTP ceiling's client where `--plain-http` asks for it and this sweep
/// can measure it; where it cannot (load from agents, a fixed rate), a warning
/// says so and the sweep goes on without it.
fn plain_ceiling(plan: &SweepPlan, agents: bool, session: &mut Session) -> Result<Option<Client>> {
    if !plan.plain_http {
        return Ok(None);
    }
    let why = if agents {
        "the load comes from agents, whose generators speak TLS only"
    } else if plan.fixed_rate.is_some() {
        "at a fixed rate (--rate) every point's throughput is the rate"
    } else {
        return Client::plain().map(Some);
    };
    session.record.warn(
        "tls",
        "plain_http_not_measured",
        format!("the plain-HTTP ceiling was not measured: {why}"),
    );
    Ok(None)
}

/// A core count with the CPUs of its nginx and its generator.
type Assignment = (usize, cipherbench_model::topology::TlsCpus);

/// Every core count's CPUs, checked before anything starts. A count this machine
/// cannot split (nginx's cores and at least one for the generator) is skipped and
/// said (a warning, and in the second list); a bad --generator-cpus stops the command.
fn assign_cores(
    plan: &SweepPlan,
    session: &mut Session,
) -> Result<(Vec<Assignment>, Vec<SkippedCores>)> {
    let topology = campaign::topology(session);
    let allowed = &topology.allowed;
    let mut assignments = Vec::new();
    let mut skipped = Vec::new();
    for &c in &plan.cores {
        if c >= allowed.len() && c > 0 {
            skipped.push(SkippedCores {
                cores: c,
                reason: format!(
                    "nginx on {c} core(s) leaves none of this machine's {} CPU(s) for the load generator (server and generator are pinned to disjoint CPUs); measured only where they fit",
                    allowed.len()
                ),
            });
            continue;
        }
        let cpus = super::assign_cpus(&topology, c, plan.generator_cpus.as_deref())?;
        assignments.push((c, cpus));
    }
    if assignments.is_empty() {
        // The same one line as before, for the smallest count asked.
        let c = plan.cores.iter().copied().min().unwrap_or(1);
        super::assign_cpus(&topology, c, plan.generator_cpus.as_deref())?;
    }
    for s in &skipped {
        session.record.warn(
            "tls",
            "cores_skipped",
            format!("--cores {}: not measured: {}", s.cores, s.reason),
        );
    }
    Ok((assignments, skipped))
}

/// A point of the sweep: a core count (its CPUs), a size and a suite, measured by
/// its variant x key-store slots side by side.
struct Point {
    /// Index into the sweep's core assignments.
    assignment: usize,
    cores: usize,
    size: u64,
    /// Index into the plan's suites.
    suite: usize,
    /// The point's place in the sweep: the order of its slots turns from one point
    /// to the next (accel noaesni, noaesni accel, ...: the interleaving schedule
    /// with a point for a round), so a steady drift of the machine does not always
    /// favour the first. Key stores join the rotation: every slot starts its own
    /// nginx anyway, and the token is made once for the run.
    turn: usize,
}

/// The sweep's units: its points. A resumed run keeps the slots an earlier one
/// measured and measures the others, together.
struct Points<'a> {
    plan: &'a SweepPlan,
    config: &'a SweepConfig,
    session: &'a mut Session,
    fleet: &'a mut Option<Fleet>,
    binary: &'a std::path::Path,
    info: &'a nginx::NginxInfo,
    port: Option<u16>,
    assignments: &'a [Assignment],
    clients: &'a [Client],
    variants: &'a super::NginxVariants,
    workspace: &'a Workspace,
    sources: &'a [(KeyStore, KeySource)],
    also_listen: &'a [std::net::IpAddr],
    /// The plain-HTTP ceiling's client, when measured ([`plain_ceiling`]).
    plain: Option<&'a Client>,
}

/// A slot of a point: variant, key store, its key's source, and what nginx speaks.
type Slot<'a> = (
    &'a crate::variant::Variant,
    &'a KeyStore,
    &'a KeySource,
    Transport,
);

impl<'a> Points<'a> {
    /// The point's slots in its turn's order: each variant with each key store that
    /// can serve its suite on its cores; with the plain-HTTP ceiling, at the first
    /// suite's point, nginx over plain HTTP with `sendfile` on and off, started under
    /// the first variant (the baseline's library, no mask: no cipher runs).
    fn slots(&self, p: &Point) -> Vec<Slot<'a>> {
        let suite = &self.plan.suites[p.suite];
        let mut slots: Vec<Slot<'a>> = self
            .plan
            .variants
            .iter()
            .flat_map(|v| {
                self.sources
                    .iter()
                    .filter(|(k, _)| cannot_serve(k, suite, p.cores).is_none())
                    .map(move |(k, src)| (v, k, src, Transport::Tls))
            })
            .collect();
        if let (Some(_), 0, Some(v), Some((k, src))) = (
            self.plain,
            p.suite,
            self.plan.variants.first(),
            self.sources.first(),
        ) {
            for sendfile in [true, false] {
                slots.push((v, k, src, Transport::Plain { sendfile }));
            }
        }
        cipherbench_model::interleave::round_order(slots.len(), p.turn)
            .map(|k| slots[k])
            .collect()
    }

    fn measured(&self, p: &Point, (variant, store, _, transport): &Slot<'_>) -> bool {
        find_point(
            self.session,
            self.plan.suites[p.suite].openssl,
            p.size,
            p.cores,
            &transport.slot_name(variant),
            store.name(),
        )
        .is_some()
    }
}

impl<'a> Points<'a> {
    /// Slot `k` of point `p` started: its nginx (on its own port, as the point's
    /// slots run side by side) and its concurrency searched from the one chosen for
    /// the nearest point measured so far.
    fn start_slot(
        &mut self,
        p: &Point,
        k: usize,
        (variant, store, key_source, transport): Slot<'a>,
    ) -> Result<GroupSlot<'a>> {
        let plan = self.plan;
        let own_client = match transport {
            Transport::Tls => None,
            Transport::Plain { .. } => self.plain,
        };
        let suite = &plan.suites[p.suite];
        let client = own_client.unwrap_or(&self.clients[p.suite]);
        let placed = &self.assignments[p.assignment].1;
        let spec = ServerSpec {
            nginx: self.binary,
            info: self.info,
            workspace: self.workspace,
            suite: *suite,
            cpus: placed.server.clone(),
            variant,
            ia32cap: self.variants.mask(variant),
            port: self.port.map(|port| port + k as u16),
            resumption: plan.resumption,
            also_listen: self.also_listen.to_vec(),
            groups: None,
            key_source: key_source.clone(),
            plain: transport.plain(),
        };
        let (server, record, target) = super::start_nginx(
            self.session,
            &spec,
            client,
            self.variants,
            super::SlotRecord {
                key: plan.key,
                store,
                cores: p.cores,
                // With agents, the load is theirs (see tls.agents).
                generator_cpus: if self.fleet.is_some() {
                    Vec::new()
                } else {
                    placed.generator.clone()
                },
                placement: &placed.placement,
            },
            p.size,
        )?;
        let start = start_concurrency(
            &chosen_so_far(
                self.session,
                suite.openssl,
                p.size,
                &transport.slot_name(variant),
                store.name(),
            ),
            p.cores,
        );
        let cpus = placed.placement.all_cpus();
        let point_of = PointOf {
            suite,
            size: p.size,
            cores: p.cores,
            cpus: &cpus,
        };
        let mut slot = GroupSlot::new(
            (variant, transport),
            own_client,
            store,
            server,
            record,
            target,
        );
        slot.search(plan, client, &placed.generator, self.fleet, start, point_of)?;
        Ok(slot)
    }
}

impl campaign::Units for Points<'_> {
    type Unit = Point;

    fn done(&self, p: &Point) -> bool {
        self.slots(p).iter().all(|slot| self.measured(p, slot))
    }

    fn skip(&mut self, p: &Point) {
        let n = self.slots(p).len();
        self.session.progress.skip(n);
    }

    /// Nothing: a slot measured whole keeps its point (the slots of a point are
    /// compared in their rounds only where they ran together, which the record says).
    fn forget(&mut self, _: &Point) {}

    fn measure(&mut self, p: &Point) -> Result<()> {
        let plan = self.plan;
        let (suite, client) = (&plan.suites[p.suite], &self.clients[p.suite]);
        let placed = &self.assignments[p.assignment].1;
        let (server_cpus, generator_cpus) = (&placed.server, &placed.generator);
        super::warn_agents_on_server_cpus(self.session, self.fleet.as_ref(), server_cpus);
        let placement_cpus = placed.placement.all_cpus();
        let mut todo = Vec::new();
        for slot in self.slots(p) {
            if self.measured(p, &slot) {
                self.session.progress.skip(1);
            } else {
                todo.push(slot);
            }
        }
        let mut group: Vec<GroupSlot<'_>> = Vec::new();
        for (k, slot) in todo.into_iter().enumerate() {
            interrupt::check()?;
            group.push(self.start_slot(p, k, slot)?);
        }
        let point_of = PointOf {
            suite,
            size: p.size,
            cores: p.cores,
            cpus: &placement_cpus,
        };
        let (done, measured) = run_group(plan, client, generator_cpus, self.fleet, group, point_of);
        for (variant, record, point) in done {
            if let Some(point) = point {
                record_point(self.session, self.config, record, point)?;
            }
            super::NginxVariants::note_counter(self.session, variant);
        }
        measured
    }
}

fn run_external(
    plan: &SweepPlan,
    url: &super::ExternalUrl,
    config: SweepConfig,
    session: &mut Session,
    fleet: &mut Option<Fleet>,
) -> Result<()> {
    let Some(suite) = plan.suites.first() else {
        bail!("no suite to measure");
    };
    let client = Client::verifying(suite, plan.resumption, plan.verify)?;
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
        1,
        fleet,
        Labels {
            suite: suite.openssl,
            protocol: suite.protocol.as_str(),
            size: target.expected_len.unwrap_or(0),
            cores: 0,
            variant: "external",
            key_store: "",
            cpus: &allowed,
        },
    )?;
    let record = super::external_record(suite, url, allowed);
    record_point(session, &config, record, point)
}

/// An open-loop point that served less than this share of its rate (over the span its
/// window's requests took) fell behind the schedule. A steady one loses only its last
/// requests' latency over the window (16 MiB at 10 ms in 4 s: 0.25 %).
const RATE_KEPT: f64 = 0.95;

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(concurrency: usize, gbps: f64, nginx: f64, generator: &[f64]) -> Probe {
        Probe {
            concurrency,
            window_ns: 1_000_000_000,
            throughput_bytes_per_sec: gbps * 1e9 / 8.0,
            requests_per_sec: 0.0,
            max_first_byte_ns: 0,
            errors: 0,
            within_limit: true,
            generator_cpu: generator.iter().sum::<f64>() / generator.len().max(1) as f64,
            generator_cpu_per_thread: generator.to_vec(),
            server_cpu: Some(nginx),
        }
    }

    /// Runs the rule over probes at 1, 2, 4, ... until it stops.
    fn run_rule(series: &[(f64, f64, &[f64])]) -> (usize, Option<(Limit, String)>) {
        let mut state = SearchState::default();
        for (i, &(gbps, nginx, generator)) in series.iter().enumerate() {
            let p = probe(1 << i, gbps, nginx, generator);
            if let Some(stop) = next_step(&mut state, &p, 1024) {
                return (state.best.unwrap().0, Some(stop));
            }
        }
        (state.best.unwrap().0, None)
    }

    #[test]
    fn small_rates_keep_a_decimal_and_failures_join_any_invalid_reason() {
        assert_eq!(format_rate(0.5), "0.5");
        assert_eq!(format_rate(0.04), "0.04");
        assert_eq!(format_rate(2.34), "2.3");
        assert_eq!(format_rate(100.4), "100");
        assert_eq!(format_rate(0.0), "0");
        let f = "39800 failed request(s): handshake 30000, timeout 9000";
        assert_eq!(
            with_failures("the load generator used 100 % of its cores".into(), Some(f)),
            format!("the load generator used 100 % of its cores; and {f} in the window")
        );
        assert_eq!(
            with_failures(format!("{f} in the window"), Some(f)),
            format!("{f} in the window")
        );
        assert_eq!(with_failures("x".into(), None), "x");
    }

    #[test]
    fn the_search_stops_where_nginx_is_busy_and_a_doubling_gains_nothing() {
        let (chosen, stop) =
            run_rule(&[(2.0, 0.5, &[0.2]), (4.0, 0.95, &[0.4]), (4.1, 0.97, &[0.4])]);
        assert_eq!(chosen, 4);
        assert_eq!(stop.unwrap().0, Limit::Server);
    }

    #[test]
    fn the_search_keeps_doubling_while_nginx_has_cycles_to_spare() {
        // Two flat doublings with nginx at 60 % used to end the search (Intel's nginx
        // study's 4-core point at 64 clients); now a third is needed, and the rise
        // after it is found.
        let (_, stop) = run_rule(&[
            (2.0, 0.3, &[0.2]),
            (4.0, 0.6, &[0.3]),
            (4.1, 0.6, &[0.3]),
            (4.1, 0.6, &[0.3]),
            (6.0, 0.9, &[0.4]),
        ]);
        assert!(stop.is_none(), "{stop:?}");
        let (chosen, stop) = run_rule(&[
            (2.0, 0.3, &[0.2]),
            (2.0, 0.3, &[0.2]),
            (2.0, 0.3, &[0.2]),
            (2.0, 0.3, &[0.2]),
        ]);
        assert_eq!(chosen, 1);
        assert_eq!(stop.unwrap().0, Limit::Undetermined);
    }

    #[test]
    fn one_saturated_generator_thread_stops_the_search_and_is_named() {
        let (chosen, stop) = run_rule(&[(2.0, 0.4, &[0.3, 0.3]), (3.0, 0.5, &[0.5, 0.95])]);
        let (limit, why) = stop.unwrap();
        assert_eq!(limit, Limit::Generator);
        assert!(why.contains("95 %"), "{why}");
        // The probe that carried more measured the generator: the one before is kept.
        assert_eq!(chosen, 1);
        // With nothing before it, the saturated probe is all there is (the final
        // window steps down from it).
        let (chosen, stop) = run_rule(&[(3.0, 0.5, &[0.95])]);
        assert_eq!((chosen, stop.unwrap().0), (1, Limit::Generator));
    }

    #[test]
    fn a_final_window_steps_down_for_the_limit_or_a_saturated_generator_only() {
        let quiet = probe(8, 14.0, 0.97, &[0.85]);
        assert_eq!(step_down_reason(&quiet), None);
        let busy = probe(8, 14.7, 0.97, &[0.96]);
        assert!(step_down_reason(&busy).unwrap().contains("generator"));
        let mut late = probe(8, 14.0, 0.97, &[0.5]);
        late.within_limit = false;
        assert!(step_down_reason(&late)
            .unwrap()
            .contains("first-byte limit"));
    }

    #[test]
    fn the_latency_limit_keeps_the_last_good_concurrency() {
        let mut state = SearchState::default();
        assert!(next_step(&mut state, &probe(8, 4.0, 0.8, &[0.3]), 64).is_none());
        let mut bad = probe(16, 5.0, 0.9, &[0.3]);
        bad.within_limit = false;
        let (limit, _) = next_step(&mut state, &bad, 64).unwrap();
        assert_eq!(limit, Limit::Latency);
        assert_eq!(state.best.unwrap().0, 8);
    }

    #[test]
    fn a_larger_core_count_starts_where_the_next_smaller_one_stopped() {
        let chosen = [(1, 4), (2, 16), (8, 64)];
        assert_eq!(start_concurrency(&chosen, 1), 1);
        assert_eq!(start_concurrency(&chosen, 2), 4);
        assert_eq!(start_concurrency(&chosen, 4), 16);
        assert_eq!(start_concurrency(&chosen, 16), 64);
        assert_eq!(start_concurrency(&[], 4), 1);
    }

    #[test]
    fn a_falling_or_superlinear_curve_is_said_and_a_clean_one_is_not() {
        let gb = |g: f64| g * 1e9 / 8.0;
        let clean = [
            (1, gb(11.6), Some(Limit::Server)),
            (2, gb(20.3), Some(Limit::Server)),
            (4, gb(38.0), Some(Limit::Server)),
        ];
        assert!(curve_findings(&clean).is_empty());
        // The figure: 10.6 Gbit/s per core at 4 cores, 14.5 at 8, the 4-core
        // point not held by nginx.
        let jump = [
            (4, gb(42.6), Some(Limit::Undetermined)),
            (8, gb(116.0), Some(Limit::Server)),
        ];
        let f = curve_findings(&jump);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].contains("4-core point") && f[0].contains("neither side"),
            "{f:?}"
        );
        // The same rise above a point nginx saturated is not blamed on the search.
        let busy = [
            (4, gb(42.6), Some(Limit::Server)),
            (8, gb(116.0), Some(Limit::Server)),
        ];
        assert!(curve_findings(&busy).is_empty());
        let falls = [
            (2, gb(20.0), Some(Limit::Server)),
            (4, gb(15.0), Some(Limit::Generator)),
        ];
        let f = curve_findings(&falls);
        assert!(
            f[0].contains("falls") && f[0].contains("load generator"),
            "{f:?}"
        );
    }
}
