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
                }
                slots * self.sizes.len()
            }
        }
    }

    /// A rough duration: four probes and the window per point.
    pub fn estimate(&self) -> Duration {
        // Four probes, each with its warm-up and the drain of its last requests; the
        // window's rounds each add a warm-up and a drain.
        let rounds = if self.variants.len() * self.key_stores.len() > 1 {
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
        let per_point = (self.warmup + self.probe + Duration::from_secs(1)) * probes
            + (self.warmup + Duration::from_millis(500)) * rounds
            + self.window;
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
            key_stores: self.key_stores.iter().map(|k| k.name().into()).collect(),
            rounds: self.rounds,
            open_loop_rate: self.fixed_rate,
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
    let mut fleet = super::connect_agents(plan.agents.as_ref(), session)?;
    let fleet = &mut fleet;
    match &plan.target {
        ServerTarget::External(url) => run_external(plan, url, config, session, fleet),
        ServerTarget::Nginx { binary, port } => {
            let binary = nginx::resolve_nginx(binary.as_deref())?;
            let info = nginx::nginx_info(&binary)?;
            if let Some(p) = port {
                // A point's slots run side by side: --port and the ports after it.
                nginx::check_ports(*p, plan.variants.len() * plan.key_stores.len())?;
            }
            let (assignments, skipped) = assign_cores(plan, session)?;
            let measured_cores: Vec<usize> = assignments.iter().map(|(c, _)| *c).collect();
            let store_skipped =
                super::keystore::skips(&plan.key_stores, &plan.suites, &measured_cores);
            for s in &store_skipped {
                session.record.warn(
                    "tls",
                    "key_store_skipped",
                    format!("{}: {}", s.what(), s.reason),
                );
            }
            note_skipped(session, &config, skipped, store_skipped)?;
            let clients = plan
                .suites
                .iter()
                .map(|s| Client::new(s, plan.resumption))
                .collect::<Result<Vec<_>>>()?;
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
                    config: &config,
                    session: &mut *session,
                    fleet,
                    binary: &binary,
                    info: &info,
                    port: *port,
                    assignments: &assignments,
                    clients: &clients,
                    variants: &variants,
                    workspace: &workspace,
                    sources: &sources,
                    also_listen: &also_listen,
                },
            )?;
            check_curve(session);
            Ok(())
        }
    }
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
}

impl<'a> Points<'a> {
    /// The point's slots in its turn's order: each variant with each key store that
    /// can serve its suite on its cores.
    fn slots(&self, p: &Point) -> Vec<(&'a crate::variant::Variant, &'a KeyStore, &'a KeySource)> {
        let suite = &self.plan.suites[p.suite];
        let slots: Vec<_> = self
            .plan
            .variants
            .iter()
            .flat_map(|v| {
                self.sources
                    .iter()
                    .filter(|(k, _)| cannot_serve(k, suite, p.cores).is_none())
                    .map(move |(k, src)| (v, k, src))
            })
            .collect();
        cipherbench_model::interleave::round_order(slots.len(), p.turn)
            .map(|k| slots[k])
            .collect()
    }

    fn measured(&self, p: &Point, variant: &crate::variant::Variant, store: &KeyStore) -> bool {
        find_point(
            self.session,
            self.plan.suites[p.suite].openssl,
            p.size,
            p.cores,
            &variant.name(),
            store.name(),
        )
        .is_some()
    }
}

impl campaign::Units for Points<'_> {
    type Unit = Point;

    fn done(&self, p: &Point) -> bool {
        self.slots(p)
            .iter()
            .all(|(variant, store, _)| self.measured(p, variant, store))
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
            if self.measured(p, slot.0, slot.1) {
                self.session.progress.skip(1);
            } else {
                todo.push(slot);
            }
        }
        let mut group: Vec<GroupSlot<'_>> = Vec::new();
        for (k, (variant, store, key_source)) in todo.into_iter().enumerate() {
            interrupt::check()?;
            let spec = ServerSpec {
                nginx: self.binary,
                info: self.info,
                workspace: self.workspace,
                suite: *suite,
                cpus: server_cpus.clone(),
                variant,
                ia32cap: self.variants.mask(variant),
                // One port per slot: the group's nginx run side by side.
                port: self.port.map(|port| port + k as u16),
                resumption: plan.resumption,
                also_listen: self.also_listen.to_vec(),
                groups: None,
                key_source: key_source.clone(),
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
                        generator_cpus.clone()
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
                    &variant.name(),
                    store.name(),
                ),
                p.cores,
            );
            let point_of = PointOf {
                suite,
                size: p.size,
                cores: p.cores,
                cpus: &placement_cpus,
            };
            let mut slot = GroupSlot::new(variant, store, server, record, target);
            slot.search(plan, client, generator_cpus, self.fleet, start, point_of)?;
            group.push(slot);
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

/// Records the core counts skipped, and those a key store was not measured at (the
/// sweep's record is created if needed).
fn note_skipped(
    session: &mut Session,
    config: &SweepConfig,
    skipped: Vec<SkippedCores>,
    store_skipped: Vec<cipherbench_model::tls::KeyStoreSkip>,
) -> Result<()> {
    if skipped.is_empty() && store_skipped.is_empty() {
        return Ok(());
    }
    for s in &skipped {
        session
            .progress
            .note(&format!("--cores {}: skipped: {}", s.cores, s.reason));
    }
    for s in &store_skipped {
        session
            .progress
            .note(&format!("{}: {}", s.what(), s.reason));
    }
    let tls = super::results(session);
    let sweep = tls.sweep.get_or_insert_with(|| new_results(config));
    sweep.skipped_cores = skipped;
    sweep.key_store_skipped = store_skipped;
    session.save()
}

fn new_results(config: &SweepConfig) -> SweepResults {
    SweepResults {
        config: config.clone(),
        points: Vec::new(),
        skipped_cores: Vec::new(),
        key_store_points: Vec::new(),
        key_store_skipped: Vec::new(),
    }
}

/// Every point of the sweep so far, whichever key store.
fn all_points(session: &Session) -> impl Iterator<Item = &SweepPoint> {
    session
        .record
        .tls
        .as_ref()
        .and_then(|t| t.sweep.as_ref())
        .into_iter()
        .flat_map(|s| s.points.iter().chain(&s.key_store_points))
}

/// A point already measured ([`run`] kept the sweep only if it was of this plan).
fn find_point<'a>(
    session: &'a Session,
    suite: &str,
    size: u64,
    cores: usize,
    variant: &str,
    key_store: &str,
) -> Option<&'a SweepPoint> {
    all_points(session).find(|p| {
        p.suite == suite
            && p.size_bytes == size
            && p.cores == cores
            && p.variant == variant
            && p.key_store == key_store
    })
}

/// (cores, chosen concurrency) of the points already measured for this size, suite,
/// variant and key store.
fn chosen_so_far(
    session: &Session,
    suite: &str,
    size: u64,
    variant: &str,
    key_store: &str,
) -> Vec<(usize, usize)> {
    all_points(session)
        .filter(|p| {
            p.suite == suite
                && p.size_bytes == size
                && p.variant == variant
                && p.key_store == key_store
        })
        .map(|p| (p.cores, p.concurrency))
        .collect()
}

/// The monotonicity rule: the probes for `cores` start at the concurrency chosen for
/// the largest smaller core count (nginx with more workers never needs fewer
/// clients to be kept busy), or at 1.
pub(crate) fn start_concurrency(chosen: &[(usize, usize)], cores: usize) -> usize {
    chosen
        .iter()
        .filter(|(c, _)| *c < cores)
        .max_by_key(|(c, _)| *c)
        .map_or(1, |(_, n)| (*n).max(1))
}

/// What the curve of one size, suite and variant says beyond its points: a throughput
/// falling with more cores, or a per-core figure rising by more than
/// [`CURVE_SUPERLINEAR`] above a point whose limit was not nginx (that point was
/// under-loaded, not the larger one efficient). `points` are (cores, throughput,
/// limit), any order.
pub(crate) fn curve_findings(points: &[(usize, f64, Option<Limit>)]) -> Vec<String> {
    let mut p: Vec<_> = points.iter().filter(|p| p.0 > 0 && p.1 > 0.0).collect();
    p.sort_by_key(|p| p.0);
    let mut out = Vec::new();
    for w in p.windows(2) {
        let (a, b) = (w[0], w[1]);
        if b.1 < a.1 * (1.0 - CURVE_FALL) {
            out.push(format!(
                "throughput falls from {} to {} cores ({:.0} % lower): the larger point was held by {}",
                a.0,
                b.0,
                (1.0 - b.1 / a.1) * 100.0,
                limit_words(b.2)
            ));
        }
        let (pa, pb) = (a.1 / a.0 as f64, b.1 / b.0 as f64);
        if pb > pa * (1.0 + CURVE_SUPERLINEAR) && a.2 != Some(Limit::Server) {
            out.push(format!(
                "per-core throughput rises {:.0} % from {} to {} cores: the {}-core point was held by {}, not by nginx's cores, so it understates them",
                (pb / pa - 1.0) * 100.0,
                a.0,
                b.0,
                a.0,
                limit_words(a.2)
            ));
        }
    }
    out
}

fn limit_words(l: Option<Limit>) -> &'static str {
    match l {
        Some(Limit::Server) => "nginx's cores",
        Some(Limit::Generator) => "the load generator",
        Some(Limit::Latency) => "the latency limit",
        Some(Limit::Undetermined) => "neither side (both had CPU to spare)",
        Some(Limit::Fixed) => "the fixed concurrency",
        None => "an unrecorded limit",
    }
}

/// Checks each measured curve by [`curve_findings`] and warns what it finds.
fn check_curve(session: &mut Session) {
    let Some(sweep) = session.record.tls.as_ref().and_then(|t| t.sweep.as_ref()) else {
        return;
    };
    let mut groups: std::collections::BTreeMap<(String, u64, String), Vec<_>> =
        std::collections::BTreeMap::new();
    for p in &sweep.points {
        groups
            .entry((p.suite.clone(), p.size_bytes, p.variant.clone()))
            .or_default()
            .push((
                p.cores,
                p.throughput_bytes_per_sec,
                p.search.as_ref().map(|s| s.limit),
            ));
    }
    let mut warnings = Vec::new();
    for ((suite, size, variant), pts) in groups {
        for f in curve_findings(&pts) {
            warnings.push(format!("{suite} {} {variant}: {f}", ByteSize(size)));
        }
    }
    for w in warnings {
        session.record.warn("tls", "sweep_curve", w);
    }
}

/// An invalid point's reason with its failed requests (`failures`, from
/// [`cipherbench_model::tls::failures_note`]) added when it does not say them.
pub(crate) fn with_failures(why: String, failures: Option<&str>) -> String {
    match failures {
        Some(f) if !why.contains(f) => format!("{why}; and {f} in the window"),
        _ => why,
    }
}

/// A request rate as the progress says it: whole requests per second, with a
/// decimal (or two) below 10 (`0.5 req/s`, not `0 req/s`).
pub(crate) fn format_rate(per_sec: f64) -> String {
    if per_sec >= 10.0 || per_sec == 0.0 {
        format!("{per_sec:.0}")
    } else if per_sec >= 0.1 {
        format!("{per_sec:.1}")
    } else {
        format!("{per_sec:.2}")
    }
}

fn record_point(
    session: &mut Session,
    config: &SweepConfig,
    server: ServerRecord,
    point: SweepPoint,
) -> Result<()> {
    let label = format!(
        "{}: {} ({} req/s) at {} client(s), first byte max {:.0} ms, nginx {}, generator {} per thread{}{}{}",
        point_name(&point),
        format_bits_per_sec(point.throughput_bytes_per_sec),
        format_rate(point.requests_per_sec),
        point.concurrency,
        point.max_first_byte_ns as f64 / 1e6,
        point
            .server_cpu
            .as_ref()
            .map(|c| format!("{:.0} %", c.total * 100.0))
            .unwrap_or_else(|| "-".into()),
        per_thread(&point.generator_cpu_per_thread),
        point
            .search
            .as_ref()
            .map(|s| format!("; {}", s.explanation))
            .unwrap_or_default(),
        // Failed requests on the terminal, not only in run.json.
        cipherbench_model::tls::failures_note(point.errors, &point.errors_by_reason)
            .map(|f| format!("; {f}"))
            .unwrap_or_default(),
        if point.valid { "" } else { " [INVALID]" }
    );
    session.progress.point(&label);
    warn_point(session, &point, &server);
    let tls = super::results(session);
    super::record_server(tls, server);
    let sweep = tls.sweep.get_or_insert_with(|| new_results(config));
    // The first key store's points are the sweep's; the others', its counterparts.
    if super::is_counterpart_store(&config.key_stores, &point.key_store) {
        sweep.key_store_points.push(point);
    } else {
        sweep.points.push(point);
    }
    session.save()
}

/// A point as the progress and the warnings name it: suite, size, cores, variant,
/// and the key store when it is not a file.
pub(crate) fn point_name(p: &SweepPoint) -> String {
    format!(
        "{} {} x{} {}{}",
        p.suite,
        ByteSize(p.size_bytes),
        p.cores,
        p.variant,
        store_suffix(&p.key_store)
    )
}

/// " key in pkcs11" for a key store other than a file, else nothing.
pub(crate) fn store_suffix(key_store: &str) -> String {
    match key_store {
        "" | "file" => String::new(),
        k => format!(" key in {k}"),
    }
}

fn warn_point(session: &mut Session, p: &SweepPoint, server: &ServerRecord) {
    let what = point_name(p);
    super::warn_server(session, &what, server);
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
                "{what}: {} in the window",
                cipherbench_model::tls::failures_note(p.errors, &p.errors_by_reason)
                    .unwrap_or_default()
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
    for f in p.noise_findings() {
        session
            .record
            .warn("tls", &f.kind, format!("{what}: {}", f.message));
    }
    if let Some(f) = cipherbench_model::noise::governor_finding(p.noise.as_deref()) {
        session.record.warn("tls", &f.kind, f.message);
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
}

/// Each generator thread's CPU, as "[52 %, 49 %]".
pub(crate) fn per_thread(cpu: &[f64]) -> String {
    let v: Vec<String> = cpu.iter().map(|c| format!("{:.0} %", c * 100.0)).collect();
    format!("[{}]", v.join(", "))
}

/// What a point is, for its record.
#[derive(Clone, Copy)]
pub(crate) struct Labels<'a> {
    pub suite: &'a str,
    pub protocol: &'a str,
    pub size: u64,
    pub cores: usize,
    pub variant: &'a str,
    /// Where nginx's key is (`file`, `pkcs11`; empty for a server not ours).
    pub key_store: &'a str,
    /// The CPUs the point runs on (nginx's and the generator's): its noise window's.
    pub cpus: &'a [usize],
}

/// One measurement at a fixed concurrency.
struct Measured {
    report: Report,
    server_cpu: Option<ServerCpu>,
    server_requests: Option<u64>,
    /// The machine's noise over the measurement, on the point's CPUs.
    noise: cipherbench_model::noise::Noise,
    /// With agents: the one that failed the window, named, if one did.
    agent_failure: Option<String>,
    /// With agents: each one's share.
    agents: Vec<cipherbench_model::agents::AgentShare>,
}

impl Measured {
    /// Adds a later round of the same point: the report appended
    /// ([`Report::append`]), nginx's CPU and the agents' shares weighted by window,
    /// the server's count added, the noise windows merged.
    fn absorb(&mut self, later: Measured) -> Result<()> {
        let (this_ns, later_ns) = (
            self.report.window.as_nanos() as u64,
            later.report.window.as_nanos() as u64,
        );
        self.server_cpu = match (self.server_cpu.take(), later.server_cpu) {
            (Some(mut a), Some(b)) => {
                a.absorb(&b, this_ns, later_ns);
                Some(a)
            }
            // A round without a figure leaves the point without one.
            _ => None,
        };
        self.server_requests = match (self.server_requests, later.server_requests) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        self.noise.merge(&later.noise);
        if self.agent_failure.is_none() {
            self.agent_failure = later.agent_failure;
        }
        cipherbench_model::agents::AgentShare::absorb_rounds(
            &mut self.agents,
            &later.agents,
            this_ns,
            later_ns,
        );
        self.report.append(later.report)
    }

    fn within(&self, limit: Duration) -> bool {
        self.report.max_first_byte <= limit
            && self.report.failed == 0
            && self.agent_failure.is_none()
    }
}

#[allow(clippy::too_many_arguments)]
fn measure(
    plan: &SweepPlan,
    client: &Client,
    target: &Target,
    generator_cpus: &[usize],
    server: Option<&Server>,
    fleet: &mut Option<Fleet>,
    suite: &str,
    concurrency: usize,
    window: Duration,
    cpus: &[usize],
) -> Result<Measured> {
    let interval = super::interval_for(window);
    let spec = Spec {
        target: target.clone(),
        arrivals: match plan.fixed_rate {
            // The warm-up at the same rate first, not counted (engine::Spec::warmup).
            Some(rate) => Arrivals::Open(engine::Schedule::Constant {
                rate,
                duration: plan.warmup + window,
            }),
            None => Arrivals::Closed { concurrency },
        },
        warmup: plan.warmup,
        window,
        drain: plan.drain,
        timeout: plan.timeout,
        interval,
        cpus: generator_cpus.to_vec(),
        max_connections: super::connection_budget(generator_cpus.len()),
        pace: super::engine::pays_for_wakeups(target.addr),
    };
    let before = server.and_then(Server::requests);
    let sampler = server.map(|s| {
        Sampler::start(
            s.workers().to_vec(),
            (interval / 4).min(Duration::from_millis(250)),
        )
    });
    // Around the whole measurement (warm-up and drain too), closed while nginx runs;
    // this process, its keeper and nginx under it are the run.
    let noise_window = crate::machine::noise::Window::open(cpus, &[std::process::id()]);
    let (report, agent_failure, agents) = match fleet {
        None => (engine::run(client, &spec)?, None, Vec::new()),
        Some(f) => match super::agents::run(f, &spec, suite, plan.resumption, &|a| {
            super::agent_addr(a, target)
        }) {
            Ok((r, shares)) => (r, None, shares),
            Err(e) => match e.downcast::<AgentFailure>() {
                Ok(failure) => (
                    super::agents::empty_report(&spec),
                    Some(failure.0),
                    Vec::new(),
                ),
                Err(e) => return Err(e),
            },
        },
    };
    let noise = noise_window.close();
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
        noise,
        agent_failure,
        agents,
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
        generator_cpu_per_thread: m.report.generator_cpu_per_thread(),
        server_cpu: m.server_cpu.as_ref().map(|c| c.total),
    }
}

/// The search's state between probes.
#[derive(Debug, Default)]
pub(crate) struct SearchState {
    /// Best (concurrency, throughput) so far within the limit.
    pub best: Option<(usize, f64)>,
    /// Doublings in a row that gained less than [`PLATEAU_GAIN`].
    pub flat: usize,
}

/// Whether the generator was near saturation in a probe: its mean or any thread.
pub(crate) fn generator_saturated(p: &Probe) -> bool {
    saturated(p.generator_cpu, &p.generator_cpu_per_thread)
}

/// Whether a generator at `mean` of its CPUs, each thread at `per_thread` of its own,
/// is over [`GENERATOR_SATURATED`]: the mean or any one thread.
pub(crate) fn saturated(mean: f64, per_thread: &[f64]) -> bool {
    mean > GENERATOR_SATURATED || per_thread.iter().any(|&c| c > GENERATOR_SATURATED)
}

/// The search rule, pure: after `probe`, double again (None) or stop, saying why.
pub(crate) fn next_step(
    state: &mut SearchState,
    probe: &Probe,
    max_concurrency: usize,
) -> Option<(Limit, String)> {
    if !probe.within_limit {
        return Some((
            Limit::Latency,
            format!(
                "{} clients broke the first-byte limit or failed, so fewer were kept",
                probe.concurrency
            ),
        ));
    }
    let t = probe.throughput_bytes_per_sec;
    let saturated = generator_saturated(probe);
    match state.best {
        None => state.best = Some((probe.concurrency, t)),
        // A probe that saturated the generator measured the generator: the last one
        // that did not stays the choice, however much more this one carried.
        Some(_) if saturated => {}
        Some((_, b)) => {
            if t > b * (1.0 + PLATEAU_GAIN) {
                state.flat = 0;
            } else {
                state.flat += 1;
            }
            if t > b {
                state.best = Some((probe.concurrency, t));
            }
        }
    }
    let server_busy = probe.server_cpu.is_some_and(|c| c >= SERVER_BUSY);
    let nginx = |p: &Probe| {
        p.server_cpu
            .map(|c| format!("nginx {:.0} % busy", c * 100.0))
            .unwrap_or_else(|| "nginx's CPU unknown".into())
    };
    if saturated {
        return Some((
            Limit::Generator,
            format!(
                "the generator saturated at {} clients (threads {}), {}",
                probe.concurrency,
                per_thread(&probe.generator_cpu_per_thread),
                nginx(probe)
            ),
        ));
    }
    if server_busy && state.flat >= 1 {
        return Some((
            Limit::Server,
            format!(
                "{} at {} clients and doubling gained under {:.0} %",
                nginx(probe),
                probe.concurrency,
                PLATEAU_GAIN * 100.0
            ),
        ));
    }
    if !server_busy && state.flat >= FLAT_IDLE {
        return Some((
            Limit::Undetermined,
            format!(
                "{FLAT_IDLE} doublings to {} clients gained nothing with {} and the generator at {:.0} %",
                probe.concurrency,
                nginx(probe),
                probe.generator_cpu * 100.0
            ),
        ));
    }
    if probe.concurrency >= max_concurrency {
        let limit = if server_busy {
            Limit::Server
        } else {
            Limit::Undetermined
        };
        return Some((
            limit,
            format!(
                "--max-concurrency {max_concurrency} reached, {}",
                nginx(probe)
            ),
        ));
    }
    None
}

/// What a group's points share: suite, size, cores, and the CPUs the point runs on
/// (nginx's and the generator's: its noise window's).
#[derive(Clone, Copy)]
pub(crate) struct PointOf<'b> {
    pub suite: &'b super::suite::Suite,
    pub size: u64,
    pub cores: usize,
    pub cpus: &'b [usize],
}

/// A variant x key-store slot of a point: its nginx stays up while the point's
/// slots take turns in the final window's rounds.
pub(crate) struct GroupSlot<'a> {
    variant: &'a crate::variant::Variant,
    variant_name: String,
    store: &'a KeyStore,
    server: Server,
    record: ServerRecord,
    target: Target,
    searched: Option<Searched>,
    /// The rounds so far, merged.
    measured: Option<Measured>,
    rounds: Vec<WindowRound>,
}

impl<'a> GroupSlot<'a> {
    /// A slot whose nginx is up, not yet searched.
    pub(crate) fn new(
        variant: &'a crate::variant::Variant,
        store: &'a KeyStore,
        server: Server,
        record: ServerRecord,
        target: Target,
    ) -> Self {
        GroupSlot {
            variant,
            variant_name: variant.name(),
            store,
            server,
            record,
            target,
            searched: None,
            measured: None,
            rounds: Vec::new(),
        }
    }

    /// Searches the slot's concurrency from `start` ([`search_concurrency`]).
    pub(crate) fn search(
        &mut self,
        plan: &SweepPlan,
        client: &Client,
        generator_cpus: &[usize],
        fleet: &mut Option<Fleet>,
        start: usize,
        of: PointOf<'_>,
    ) -> Result<()> {
        let searched = search_concurrency(
            plan,
            client,
            &self.target,
            generator_cpus,
            Some(&self.server),
            start,
            fleet,
            self.labels(of),
        )?;
        self.searched = Some(searched);
        Ok(())
    }

    fn labels<'b>(&'b self, of: PointOf<'b>) -> Labels<'b> {
        Labels {
            suite: of.suite.openssl,
            protocol: of.suite.protocol.as_str(),
            size: of.size,
            cores: of.cores,
            variant: &self.variant_name,
            key_store: self.store.name(),
            cpus: of.cpus,
        }
    }
}

/// Measures a group's searched slots in rounds ([`measure_rounds`]; one window
/// where the group has one slot), stops their nginx, and gives each slot's
/// variant, server record and point (None for a slot cut short before its first
/// round), with whether every round ran: what was measured is kept also when a
/// round was cut short (Ctrl-C), such a point having fewer rounds than the others.
#[allow(clippy::type_complexity)]
pub(crate) fn run_group<'a>(
    plan: &SweepPlan,
    client: &Client,
    generator_cpus: &[usize],
    fleet: &mut Option<Fleet>,
    mut group: Vec<GroupSlot<'a>>,
    of: PointOf<'_>,
) -> (
    Vec<(
        &'a crate::variant::Variant,
        ServerRecord,
        Option<SweepPoint>,
    )>,
    Result<()>,
) {
    let rounds = if group.len() > 1 {
        plan.rounds.max(1)
    } else {
        1
    };
    let (group_id, measured) =
        measure_rounds(plan, client, generator_cpus, fleet, &mut group, rounds, of);
    let done = group
        .into_iter()
        .map(|slot| {
            let labels = Labels {
                suite: of.suite.openssl,
                protocol: of.suite.protocol.as_str(),
                size: of.size,
                cores: of.cores,
                variant: &slot.variant_name,
                key_store: slot.store.name(),
                cpus: of.cpus,
            };
            let point = match (slot.searched, slot.measured) {
                (Some(searched), Some(m)) => {
                    let mut point = finish(plan, labels, searched, m);
                    if slot.rounds.len() > 1 {
                        point.interleave_group = group_id;
                        point.rounds = slot.rounds;
                    }
                    Some(point)
                }
                _ => None,
            };
            slot.server.stop();
            (slot.variant, slot.record, point)
        })
        .collect();
    (done, measured)
}

/// The final window of a group's slots, cut into `rounds` rounds of
/// `plan.window / rounds` each, the slots taking turns (A B, B A, A B: the
/// interleaving schedule), each slot's rounds merged into its `measured` and listed
/// in its `rounds`. The first round of each slot may step its concurrency down as
/// the single final window does; later rounds keep what the first kept. Returns the
/// group's id (the first round's wall-clock start) and whether every round ran; on
/// an error (Ctrl-C) the rounds measured so far stay in the slots.
fn measure_rounds(
    plan: &SweepPlan,
    client: &Client,
    generator_cpus: &[usize],
    fleet: &mut Option<Fleet>,
    group: &mut [GroupSlot<'_>],
    rounds: usize,
    of: PointOf<'_>,
) -> (Option<u64>, Result<()>) {
    let window = (plan.window / rounds as u32).max(Duration::from_millis(1));
    let group_id = Some(crate::agent::unix_ns());
    let order = cipherbench_model::interleave::schedule(
        1,
        group.len(),
        rounds,
        cipherbench_model::interleave::Order::PointByPoint,
    );
    for (sequence, turn) in order.iter().enumerate() {
        if let Err(e) = interrupt::check() {
            return (group_id, Err(e.into()));
        }
        let slot = &mut group[turn.variant];
        let Some(mut searched) = slot.searched.take() else {
            continue;
        };
        let m = final_window(
            plan,
            client,
            &slot.target,
            generator_cpus,
            Some(&slot.server),
            fleet,
            &mut searched,
            window,
            turn.round == 0,
            slot.labels(of),
        );
        slot.searched = Some(searched);
        let m = match m {
            Ok(m) => m,
            Err(e) => return (group_id, Err(e)),
        };
        slot.rounds.push(WindowRound {
            round: turn.round,
            sequence,
            window_ns: m.report.window.as_nanos() as u64,
            throughput_bytes_per_sec: m.report.throughput_bytes_per_sec(),
            requests: m.report.ok,
            max_first_byte_ns: m.report.max_first_byte.as_nanos() as u64,
            server_cpu: m.server_cpu.as_ref().map(|c| c.total),
        });
        let merged = match slot.measured.take() {
            None => Ok(m),
            Some(mut acc) => acc.absorb(m).map(|()| acc),
        };
        match merged {
            Ok(acc) => slot.measured = Some(acc),
            Err(e) => return (group_id, Err(e)),
        }
    }
    (group_id, Ok(()))
}

/// What the concurrency search found, before the final window.
pub(crate) struct Searched {
    /// The concurrency the probes started at.
    start: usize,
    /// The concurrency kept (halved by the final window's step-downs).
    chosen: usize,
    /// The probes, then the final window's attempts.
    probes: Vec<Probe>,
    /// What stopped the search, and why.
    stop: Option<(Limit, String)>,
    step_downs: usize,
    /// Why the final window stepped down, one line per step.
    step_notes: Vec<String>,
}

/// Searches the concurrency and measures the final window, in one window.
#[allow(clippy::too_many_arguments)]
pub(crate) fn search(
    plan: &SweepPlan,
    client: &Client,
    target: &Target,
    generator_cpus: &[usize],
    server: Option<&Server>,
    start: usize,
    fleet: &mut Option<Fleet>,
    labels: Labels<'_>,
) -> Result<SweepPoint> {
    let mut searched = search_concurrency(
        plan,
        client,
        target,
        generator_cpus,
        server,
        start,
        fleet,
        labels,
    )?;
    let m = final_window(
        plan,
        client,
        target,
        generator_cpus,
        server,
        fleet,
        &mut searched,
        plan.window,
        true,
        labels,
    )?;
    Ok(finish(plan, labels, searched, m))
}

/// The search: short probes at doubling concurrency until [`next_step`] stops it.
#[allow(clippy::too_many_arguments)]
fn search_concurrency(
    plan: &SweepPlan,
    client: &Client,
    target: &Target,
    generator_cpus: &[usize],
    server: Option<&Server>,
    start: usize,
    fleet: &mut Option<Fleet>,
    labels: Labels<'_>,
) -> Result<Searched> {
    let mut probes = Vec::new();
    let mut state = SearchState {
        best: plan.fixed_concurrency.map(|c| (c, 0.0)),
        flat: 0,
    };
    let start = start.clamp(1, plan.max_concurrency.max(1));
    let mut concurrency = start;
    let mut stop: Option<(Limit, String)> = match (plan.fixed_concurrency, plan.fixed_rate) {
        (_, Some(r)) => Some((
            Limit::Fixed,
            format!("open loop at {r} requests/s given with --rate"),
        )),
        (Some(c), None) => Some((
            Limit::Fixed,
            format!("{c} clients given with --concurrency"),
        )),
        (None, None) => None,
    };
    while stop.is_none() {
        interrupt::check()?;
        let m = measure(
            plan,
            client,
            target,
            generator_cpus,
            server,
            fleet,
            labels.suite,
            concurrency,
            plan.probe,
            labels.cpus,
        )?;
        let probe = probe_of(&m, concurrency, plan.limit);
        let next = next_step(&mut state, &probe, plan.max_concurrency);
        probes.push(probe);
        if let Some(s) = next {
            stop = Some(s);
            break;
        }
        concurrency = (concurrency * 2).min(plan.max_concurrency);
    }
    // A search stopped by the limit at its first probe keeps that probe's (smaller
    // is not searched below the start: the start came from fewer cores).
    Ok(Searched {
        start,
        chosen: state.best.map(|b| b.0).unwrap_or(start),
        probes,
        stop,
        step_downs: 0,
        step_notes: Vec::new(),
    })
}

/// One final window (or round of it) at the chosen concurrency. With `step_down`
/// (a point's first), a window that breaks the limit or saturates the generator
/// halves the concurrency and is measured again, up to [`STEP_DOWNS`] times, each
/// attempt kept with the probes and its reason in the point's explanation. (The
/// probes are shorter than the window: a generator at 85 % in a probe can pass 90 %
/// over the window, and a point that measures the generator is no point.)
#[allow(clippy::too_many_arguments)]
fn final_window(
    plan: &SweepPlan,
    client: &Client,
    target: &Target,
    generator_cpus: &[usize],
    server: Option<&Server>,
    fleet: &mut Option<Fleet>,
    s: &mut Searched,
    window: Duration,
    step_down: bool,
    labels: Labels<'_>,
) -> Result<Measured> {
    loop {
        interrupt::check()?;
        let m = measure(
            plan,
            client,
            target,
            generator_cpus,
            server,
            fleet,
            labels.suite,
            s.chosen,
            window,
            labels.cpus,
        )?;
        if !step_down {
            return Ok(m);
        }
        let probe = probe_of(&m, s.chosen, plan.limit);
        let why = step_down_reason(&probe);
        s.probes.push(probe);
        let Some(why) = why else { return Ok(m) };
        if s.chosen == 1
            || s.step_downs >= STEP_DOWNS
            || plan.fixed_concurrency.is_some()
            || plan.fixed_rate.is_some()
        {
            return Ok(m);
        }
        let fewer = (s.chosen / 2).max(1);
        s.step_notes.push(format!(
            "{why} at {} clients, so {fewer} were measured",
            s.chosen
        ));
        s.chosen = fewer;
        s.step_downs += 1;
    }
}

/// An open-loop point that served less than this share of its rate (over the span its
/// window's requests took) fell behind the schedule. A steady one loses only its last
/// requests' latency over the window (16 MiB at 10 ms in 4 s: 0.25 %).
const RATE_KEPT: f64 = 0.95;

/// Why a final window is measured again at half the clients, if it must be: it broke
/// the first-byte limit (or failed requests), or it saturated the generator.
pub(crate) fn step_down_reason(window: &Probe) -> Option<&'static str> {
    if !window.within_limit {
        Some("the final window broke the first-byte limit")
    } else if generator_saturated(window) {
        Some("the final window saturated the generator")
    } else {
        None
    }
}

/// The point of a search and its final window (all its rounds, merged).
fn finish(plan: &SweepPlan, labels: Labels<'_>, s: Searched, m: Measured) -> SweepPoint {
    let (mut limit, why) = s.stop.unwrap_or((Limit::Undetermined, "no probe".into()));
    // The final window can find what the probes did not.
    let last = probe_of(&m, s.chosen, plan.limit);
    if generator_saturated(&last) {
        limit = Limit::Generator;
    } else if !last.within_limit && limit != Limit::Fixed {
        limit = Limit::Latency;
    } else if limit == Limit::Generator && last.server_cpu.is_some_and(|c| c >= SERVER_BUSY) {
        // More clients saturated the generator, but at the clients kept nginx was
        // busy and the generator was not: nginx is what the figure measures.
        limit = Limit::Server;
    }
    let stepped: String = s.step_notes.iter().map(|n| format!("; {n}")).collect();
    let final_window = format!(
        "final window: nginx {}, generator threads {}",
        last.server_cpu
            .map(|c| format!("{:.0} %", c * 100.0))
            .unwrap_or_else(|| "-".into()),
        per_thread(&last.generator_cpu_per_thread)
    );
    let mut p = point(plan, labels, s.chosen, m, s.probes);
    let explanation = match plan.fixed_rate {
        Some(rate) => {
            // Open loop: the requests in flight on average (Little's law), not clients.
            let mean_s = p.latency.mean_ns as f64 / 1e9;
            p.concurrency = ((p.requests_per_sec * mean_s).ceil() as usize).max(1);
            p.open_loop_rate = Some(rate);
            // Its window's attempt too, which was kept with the search's start (the
            // clients of the point before, meaningless here).
            if let Some(window) = p.probes.last_mut() {
                window.concurrency = p.concurrency;
            }
            // A server behind the schedule finished the window's requests late: the
            // rate over their span is what it served.
            let behind = if p.requests_per_sec < rate * RATE_KEPT {
                format!(
                    "; served {:.1} requests/s of the {rate} asked: the server fell behind the schedule, so this is over its capacity",
                    p.requests_per_sec
                )
            } else {
                String::new()
            };
            format!(
                "about {} request(s) in flight: {why}{behind}; {final_window}",
                p.concurrency
            )
        }
        None => format!(
            "{} clients (probes from {}): {why}{stepped}; {final_window}",
            s.chosen, s.start
        ),
    };
    p.search = Some(SearchOutcome {
        started_at: s.start,
        limit,
        explanation,
    });
    p
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
    let generator_cpu_per_thread = r.generator_cpu_per_thread();
    let generator_saturated = saturated(generator_cpu, &generator_cpu_per_thread);
    let within_limit = m.within(plan.limit);
    let failures = cipherbench_model::tls::failures_note(r.failed, &r.failures);
    let invalid_reason = if let Some(failure) = &m.agent_failure {
        Some(format!("failed: {failure}"))
    } else if generator_saturated {
        Some(format!(
            "the load generator used {:.0} % of its cores (threads {}): the point measures the generator, not nginx",
            generator_cpu * 100.0,
            per_thread(&generator_cpu_per_thread)
        ))
    } else if let Some(f) = &failures {
        Some(format!("{f} in the window"))
    } else if !within_limit {
        Some(format!(
            "even at {concurrency} client(s) the first byte took up to {:.2} s, over the {:.2} s limit",
            r.max_first_byte.as_secs_f64(),
            plan.limit.as_secs_f64()
        ))
    } else {
        None
    };
    // Failed requests are said whatever else made the point invalid.
    let invalid_reason = invalid_reason.map(|why| with_failures(why, failures.as_deref()));
    SweepPoint {
        suite: l.suite.to_string(),
        protocol: l.protocol.to_string(),
        negotiated_suite: r.negotiated.as_ref().map(|n| n.0.clone()),
        negotiated_protocol: r.negotiated.as_ref().map(|n| n.1.clone()),
        size_bytes: l.size,
        cores: l.cores,
        variant: l.variant.to_string(),
        key_store: l.key_store.to_string(),
        concurrency,
        window_ns: r.window.as_nanos() as u64,
        interval_ns: r.interval.as_nanos() as u64,
        throughput_bytes_per_sec: r.throughput_bytes_per_sec(),
        interval_throughput_bytes_per_sec: Summary::of_or_empty(&rates),
        // Kept: the rounds a ratio's interval resamples.
        interval_samples_bytes_per_sec: rates,
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
        generator_cpu_per_thread,
        generator_threads: r.threads,
        generator_saturated,
        valid: invalid_reason.is_none(),
        invalid_reason,
        probes,
        search: None,
        noise: Some(Box::new(m.noise)),
        agents: m.agents,
        rounds: Vec::new(),
        interleave_group: None,
        open_loop_rate: None,
    }
}

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
