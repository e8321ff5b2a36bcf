//! Layer 1, `cipherbench speed`: cipher throughput by buffer size, with AES-NI
//! available (`accel`) and masked (`noaesni`).
//!
//! The parent takes the resolved plan, measures accel's effect probes in a child
//! (which also tells the library the children load, and so each variant's mask), and,
//! for each cipher and variant, starts a worker child with the variant's
//! `OPENSSL_ia32cap` (see [`worker`]). Each worker measures the effect probes before
//! its real work; the parent has [`crate::variant`] judge the first worker of each
//! variant by them, and checks the control ciphers. It never prints: progress goes to
//! the observer.

pub mod openssl_speed;
pub mod pk;
pub mod worker;

use crate::campaign;
use crate::interrupt;
use crate::progress::Progress;
use crate::results::Session;
use crate::supervisor::{Line, Spawn};
use crate::variant::{Baseline, Variant};
use anyhow::{bail, Context, Result};
use cipherbench_crypto::catalogue::{self, CipherId};
use cipherbench_crypto::pk::PkAlgorithm;
use cipherbench_model::env::Environment;
use cipherbench_model::interleave::{schedule, Order, Slot};
use cipherbench_model::speed::reference::MeasuredClock;
use cipherbench_model::speed::{Direction, OpensslCheck, SpeedConfig, SpeedResults, Unavailable};
use std::time::Duration;
use worker::{WorkerMessage, WorkerRequest};

/// Everything `speed` will measure, resolved once from the flags.
#[derive(Debug, Clone)]
pub struct SpeedPlan {
    /// Ciphers.
    pub ciphers: Vec<CipherId>,
    /// Buffer sizes, bytes.
    pub sizes: Vec<u64>,
    /// Variants.
    pub variants: Vec<Variant>,
    /// Thread counts.
    pub threads: Vec<usize>,
    /// Sizes at which thread counts above 1 are measured (empty: all sizes).
    pub multi_thread_sizes: Vec<u64>,
    /// Directions.
    pub directions: Vec<Direction>,
    /// Warm-up per point.
    pub warmup: Duration,
    /// One sample's length.
    pub sample: Duration,
    /// Samples per point.
    pub samples: usize,
    /// Rounds the samples are split into (1 to `samples`): each round runs every
    /// variant of a cipher once, in an order that turns from round to round (A B,
    /// B A, ...), so a drift of the machine reaches every variant alike.
    pub rounds: usize,
    /// Cross-check against `openssl speed` for single-thread points.
    pub check_openssl: bool,
    /// `openssl speed -async_jobs N` per entry, for every variant, cipher and size
    /// (single thread): for providers and engines that work asynchronously.
    pub async_jobs: Vec<u32>,
    /// Seconds per `openssl speed` run.
    pub check_seconds: u32,
    /// `openssl speed` runs per public-key cross-check, each between two of ours.
    pub check_rounds: u32,
    /// Public-key algorithms (`--pk`), each with every operation it has.
    pub public_key: Vec<PkAlgorithm>,
    /// What the preflight found missing: an algorithm in a variant whose library
    /// lacks it.
    pub pk_unavailable: Vec<Unavailable>,
}

impl SpeedPlan {
    /// The default sizes (the `openssl speed` sizes of Intel's AES-GCM study, seed 003).
    pub const DEFAULT_SIZES: [u64; 6] = [16, 64, 256, 1024, 8192, 16384];

    fn points(&self) -> Vec<(Direction, u64, usize)> {
        let mut points = Vec::new();
        for &size in &self.sizes {
            for &direction in &self.directions {
                for &threads in &self.threads {
                    if threads > 1
                        && !self.multi_thread_sizes.is_empty()
                        && !self.multi_thread_sizes.contains(&size)
                    {
                        continue;
                    }
                    points.push((direction, size, threads));
                }
            }
        }
        points
    }

    /// Number of points to measure.
    pub fn total_points(&self) -> usize {
        (self.points().len() * self.ciphers.len() + self.pk_points()) * self.variants.len()
    }

    /// Public-key points per variant: every operation at every thread count.
    fn pk_points(&self) -> usize {
        self.public_key.iter().map(|a| a.ops().len()).sum::<usize>() * self.threads.len()
    }

    /// A rough duration, for the estimate printed before a run.
    pub fn estimate(&self) -> Duration {
        let per_point = self.warmup * self.rounds() as u32
            + self.sample * self.samples as u32
            + Duration::from_millis(5);
        // One `openssl speed` per single-thread point of every cipher it can run.
        let checks = if self.check_openssl {
            let single = self.points().iter().filter(|p| p.2 == 1).count();
            let ciphers = self
                .ciphers
                .iter()
                .filter(|c| c.openssl_speed().is_some())
                .count();
            Duration::from_secs(u64::from(self.check_seconds))
                * (single * ciphers * self.variants.len()) as u32
        } else {
            Duration::ZERO
        };
        // Each worker measures the effect probes first (about 0.2 s), and accel's are
        // measured once more at the start.
        let probes =
            Duration::from_millis(250) * (self.ciphers.len() * self.variants.len() + 1) as u32;
        // Per public-key algorithm and variant: ours, then each `openssl speed` run
        // followed by ours again, check_seconds per operation each (openssl times
        // one or two more: ML-DSA's key generation, RSA's encryption and
        // decryption).
        let rounds = self.check_rounds.max(1) as usize;
        let pk_checks = if self.check_openssl {
            Duration::from_secs(u64::from(self.check_seconds))
                * (self
                    .public_key
                    .iter()
                    .map(|a| (2 * rounds + 1) * a.ops().len() + 2 * rounds)
                    .sum::<usize>()
                    * self.variants.len()) as u32
        } else {
            Duration::ZERO
        };
        per_point * self.total_points() as u32 + checks + probes + pk_checks
    }

    fn config(&self) -> SpeedConfig {
        SpeedConfig {
            ciphers: self.ciphers.iter().map(|c| c.name().to_string()).collect(),
            sizes_bytes: self.sizes.clone(),
            variants: self.variants.iter().map(|v| v.name().clone()).collect(),
            threads: self.threads.clone(),
            directions: self.directions.clone(),
            warmup_ns: self.warmup.as_nanos() as u64,
            sample_ns: self.sample.as_nanos() as u64,
            samples: self.samples,
            rounds: self.rounds(),
            public_key: self
                .public_key
                .iter()
                .map(|a| a.name().to_string())
                .collect(),
        }
    }

    /// Rounds, at least 1 and at most one per sample.
    pub(crate) fn rounds(&self) -> usize {
        self.rounds.clamp(1, self.samples.max(1))
    }

    /// Samples taken in round `round` (the earlier rounds take the remainder).
    pub(crate) fn samples_in(&self, round: usize) -> usize {
        let rounds = self.rounds();
        self.samples / rounds + usize::from(round < self.samples % rounds)
    }
}

/// Runs the plan, saving into the session after every cipher and variant. Returns
/// early (with what it has saved) if the user interrupts.
pub fn run(plan: &SpeedPlan, session: &mut Session) -> Result<()> {
    // A resumed run keeps what an earlier, interrupted run of the same plan measured.
    let mut results = campaign::resume(
        session.record.speed.take(),
        |earlier| earlier.config == plan.config(),
        || SpeedResults {
            config: plan.config(),
            variants: Vec::new(),
            points: Vec::new(),
            unavailable: Vec::new(),
            controls: Vec::new(),
            openssl_checks: Vec::new(),
            async_points: Vec::new(),
            placement: None,
            pk_points: Vec::new(),
            pk_checks: Vec::new(),
            clock: None,
        },
    );
    let (cpus, placement) = place(plan, session);
    results.placement = Some(placement);
    // The clock the points' cycles per byte are counted at, on the one-thread
    // points' CPU, before the first point (a resumed run keeps its first start's).
    let clock_cpu = cpus.first().copied();
    if results.clock.is_none() {
        results.clock = crate::machine::clock::measure(clock_cpu).map(|hz| MeasuredClock {
            before_hz: hz,
            after_hz: None,
            method: crate::machine::clock::METHOD.to_string(),
            cpu: clock_cpu,
            microarchitecture: session
                .record
                .environment
                .cpu
                .microarchitecture()
                .map(str::to_string),
        });
    }
    let points = plan.points();
    let total = plan.total_points();
    let variants = campaign::Variants::begin("speed", &plan.variants)?;
    let baseline = &variants.baseline;
    // Progress counts each point once per round.
    session
        .progress
        .layer("speed", total * plan.rounds(), plan.estimate());
    // The interleaving schedule, one point per cipher ([`Ciphers::measure`]).
    let order = schedule(
        plan.ciphers.len(),
        plan.variants.len(),
        plan.rounds(),
        Order::PointByPoint,
    );
    let units: Vec<usize> = (0..plan.ciphers.len()).collect();
    campaign::each_unit(
        &units,
        &mut Ciphers {
            plan,
            order: &order,
            points: &points,
            cpus: &cpus,
            baseline,
            results: &mut results,
            session: &mut *session,
        },
    )?;
    pk::run(plan, &cpus, baseline, &mut results, session)?;
    if let Some(clock) = &mut results.clock {
        clock.after_hz = crate::machine::clock::measure(clock_cpu);
    }
    // A provider's tally covers every worker of its variant.
    let ciphers: Vec<&str> = plan.ciphers.iter().map(|c| c.name()).collect();
    variants.end(&mut results.variants, &ciphers);
    variants.warn_fallbacks(&mut session.record, &results.variants, &ciphers);
    for v in &results.variants {
        variants.warn_not_effective(&mut session.record, v, "");
    }
    measurement_warnings(&results, &mut session.record);
    session.record.speed = Some(results.clone());
    session.save()?;
    if plan.check_openssl {
        // On the CPU of the one-thread points: another CPU's neighbours differ.
        let cpu = cpus.first().copied();
        check_openssl(plan, cpu, baseline, &mut results, session)?;
        pk::check_openssl(plan, cpu, baseline, &mut results, session)?;
    }
    if !plan.async_jobs.is_empty() {
        async_jobs(plan, cpus.first().copied(), baseline, &mut results, session)?;
    }
    Ok(())
}

/// `--async-jobs`: `openssl speed -evp CIPHER -async_jobs N` under each variant's
/// environment, for every cipher `openssl speed` has, size and N, one thread. A
/// point openssl refuses is noted and skipped. On `cpu`, as the one-thread points.
fn async_jobs(
    plan: &SpeedPlan,
    cpu: Option<usize>,
    baseline: &Baseline,
    results: &mut SpeedResults,
    session: &mut Session,
) -> Result<()> {
    for variant in &plan.variants {
        let mask = baseline.mask(variant);
        let loader = variant.library.loader();
        for cipher in &plan.ciphers {
            let Some((name, aead)) = cipher.openssl_speed() else {
                continue;
            };
            for &size in &plan.sizes {
                for &jobs in &plan.async_jobs {
                    interrupt::check()?;
                    let mut args =
                        openssl_speed::command(name, aead, false, size, plan.check_seconds);
                    // Before -mr, which stays last; 0 is openssl's synchronous
                    // default, which it refuses to be given.
                    if jobs > 0 {
                        let at = args.len() - 1;
                        args.splice(at..at, ["-async_jobs".to_string(), jobs.to_string()]);
                    }
                    let rate = match openssl_speed::run(
                        &args,
                        mask.as_deref(),
                        &variant.environment(),
                        loader,
                        plan.check_seconds,
                        cpu,
                    ) {
                        Ok(r) => r,
                        Err(e) => {
                            session.progress.note(&format!(
                                "openssl speed -async_jobs {jobs} for {} {}: {e:#}",
                                cipher.name(),
                                variant.name()
                            ));
                            continue;
                        }
                    };
                    session.progress.point(&format!(
                        "openssl speed -async_jobs {jobs} {} {} {size} B: {}",
                        cipher.name(),
                        variant.name(),
                        cipherbench_model::units::format_bytes_per_sec(rate)
                    ));
                    let command = Spawn::new("openssl").args(&args).loader(loader).display();
                    results
                        .async_points
                        .push(cipherbench_model::speed::AsyncPoint {
                            cipher: cipher.name().to_string(),
                            variant: variant.name(),
                            size_bytes: size,
                            async_jobs: jobs,
                            command,
                            bytes_per_sec: rate,
                        });
                }
            }
        }
    }
    session.record.speed = Some(results.clone());
    session.save()?;
    Ok(())
}

/// The noise judge's warnings for every point measured while the machine was busy,
/// named by point, and the frequency governor's once for the run.
fn noise_warnings(results: &SpeedResults, record: &mut cipherbench_model::RunRecord) {
    for p in &results.points {
        for f in p.noise_findings() {
            record.warn(
                "speed",
                &f.kind,
                format!(
                    "{} {} {} B {} x{}: {}",
                    p.cipher,
                    p.variant,
                    p.size_bytes,
                    p.direction.as_str(),
                    p.threads,
                    f.message
                ),
            );
        }
    }
    let governor = results
        .points
        .iter()
        .filter_map(|p| p.noise.as_ref())
        .flat_map(|n| cipherbench_model::noise::judge(n))
        .find(|f| f.kind == "frequency_scaling" && f.message.contains("governor"));
    if let Some(f) = governor {
        record.warn("speed", &f.kind, f.message);
    }
}

/// Whether one cipher in one variant is fully measured (or known unavailable).
/// Whether a cipher's points in a variant are all there with every sample of every
/// round (or the cipher is unavailable in it).
fn chunk_done(
    results: &SpeedResults,
    cipher: CipherId,
    variant: &str,
    points: &[(Direction, u64, usize)],
    samples: usize,
) -> bool {
    let name = cipher.name();
    results
        .unavailable
        .iter()
        .any(|u| u.cipher == name && u.variant == variant)
        || points.iter().all(|&(d, size, threads)| {
            results
                .point(name, variant, d, size, threads)
                .is_some_and(|p| p.samples.len() >= samples)
        })
}

fn control_names() -> Vec<&'static str> {
    catalogue::ALL
        .iter()
        .filter(|c| c.is_control())
        .map(|c| c.name())
        .collect()
}

/// What one worker measures: one cipher in one variant, at every point, its thread i
/// on `cpus[i]`.
struct Chunk<'a> {
    cipher: CipherId,
    variant: &'a Variant,
    points: &'a [(Direction, u64, usize)],
    cpus: &'a [usize],
    /// The round (0: the first, whose worker measures the effect probes).
    round: usize,
    /// Samples per point in this round.
    samples: usize,
}

/// The warnings the layer's figures raise: a control cipher that moved between
/// accel and noaesni, a noisy window, a point whose samples spread widely.
fn measurement_warnings(results: &SpeedResults, record: &mut cipherbench_model::RunRecord) {
    for c in results.controls.iter().filter(|c| !c.held) {
        record.warn(
            "speed",
            "control_moved",
            format!(
                "control cipher {} ran at {:.2}x in noaesni{at} vs accel{at} ({} B, {}, {} thread(s)): the variant changed more than AES-NI, or the machine was noisy",
                c.cipher, c.ratio.value, c.size_bytes, c.direction.as_str(), c.threads,
                at = c.library.as_ref().map(|t| format!("@{t}")).unwrap_or_default()
            ),
        );
    }
    noise_warnings(results, record);
    for p in results
        .points
        .iter()
        .filter(|p| p.throughput_bytes_per_sec.high_spread())
    {
        record.warn(
            "speed",
            "high_spread",
            format!(
                "{} {} {} B {} x{}: spread ±{:.1} % across samples",
                p.cipher,
                p.variant,
                p.size_bytes,
                p.direction.as_str(),
                p.threads,
                p.throughput_bytes_per_sec.rel_spread * 100.0
            ),
        );
    }
}

/// Where the worker's threads go: one per core before any sibling, CPU 0's core
/// last. The CPUs in that order, and the placement the record keeps.
fn place(
    plan: &SpeedPlan,
    session: &Session,
) -> (Vec<usize>, cipherbench_model::topology::Placement) {
    let topology = campaign::topology(session);
    let cpus = match cipherbench_model::topology::spread_order(&topology) {
        order if order.is_empty() => crate::host::allowed_cpus(),
        order => order,
    };
    let most_threads = plan.threads.iter().copied().max().unwrap_or(1);
    let mut used_unique: Vec<usize> = (0..most_threads)
        .filter_map(|i| cpus.get(i % cpus.len().max(1)).copied())
        .collect();
    used_unique.sort_unstable();
    used_unique.dedup();
    let placement = cipherbench_model::topology::placement_on(
        &topology,
        "speed worker",
        cipherbench_model::topology::Side::Sut,
        &used_unique,
    );
    (cpus, placement)
}

/// The layer's units: a cipher, with every round of every variant (a cipher whose
/// rounds did not all finish, in a resumed run, is measured again whole).
struct Ciphers<'a> {
    plan: &'a SpeedPlan,
    /// The interleaved order of every cipher's slots (point: the cipher's index).
    order: &'a [Slot],
    points: &'a [(Direction, u64, usize)],
    cpus: &'a [usize],
    baseline: &'a Baseline,
    results: &'a mut SpeedResults,
    session: &'a mut Session,
}

impl campaign::Units for Ciphers<'_> {
    type Unit = usize;

    fn done(&self, &c: &usize) -> bool {
        let cipher = self.plan.ciphers[c];
        self.plan.variants.iter().all(|v| {
            chunk_done(
                self.results,
                cipher,
                &v.name(),
                self.points,
                self.plan.samples,
            )
        })
    }

    fn skip(&mut self, _: &usize) {
        self.session
            .progress
            .skip(self.points.len() * self.plan.variants.len() * self.plan.rounds());
    }

    fn forget(&mut self, &c: &usize) {
        let name = self.plan.ciphers[c].name();
        self.results.points.retain(|p| p.cipher != name);
        self.results.unavailable.retain(|u| u.cipher != name);
    }

    /// The cipher's slots in order, a fresh worker each, saving after each: the
    /// variants alternate in rounds (accel noaesni, noaesni accel, ...), each round
    /// taking its share of the samples, so that a drift of the machine (thermal, a
    /// neighbour's load) reaches every variant alike; the order also turns from one
    /// cipher to the next, so a steady drift does not always favour the first.
    fn measure(&mut self, &c: &usize) -> Result<()> {
        let cipher = self.plan.ciphers[c];
        for slot in self.order.iter().filter(|s| s.point == c) {
            let variant =
                &self.plan.variants[(slot.variant + slot.point) % self.plan.variants.len()];
            interrupt::check()?;
            if self
                .results
                .unavailable
                .iter()
                .any(|u| u.cipher == cipher.name() && u.variant == variant.name())
            {
                self.session.progress.skip(self.points.len());
                continue;
            }
            let chunk = Chunk {
                cipher,
                variant,
                points: self.points,
                cpus: self.cpus,
                round: slot.round,
                samples: self.plan.samples_in(slot.round),
            };
            let outcome = run_worker(
                &chunk,
                self.plan,
                self.baseline,
                self.results,
                &mut self.session.progress,
                &mut self.session.record.environment,
            );
            if outcome.is_err() && self.results.points.is_empty() {
                return outcome;
            }
            // Interrupted or not, the points the worker finished are kept: each came
            // whole, with all its samples.
            self.results.compute_controls(&control_names());
            self.session.record.speed = Some(self.results.clone());
            self.session.save()?;
            outcome?;
        }
        Ok(())
    }
}

/// One worker: one cipher in one variant, every point. The worker's own report of
/// its library is checked against the variant's before any of its points counts.
fn run_worker(
    chunk: &Chunk,
    plan: &SpeedPlan,
    baseline: &Baseline,
    results: &mut SpeedResults,
    progress: &mut Progress,
    environment: &mut Environment,
) -> Result<()> {
    let Chunk {
        cipher,
        variant,
        points,
        samples,
        ..
    } = *chunk;
    let child = spawn_worker(
        variant,
        baseline.mask(variant).as_deref(),
        &request_for(chunk, plan),
    )?;
    let mut received = 0;
    let mut worker = Worker {
        child,
        deadline: deadline(plan, samples, points.len()),
        what: format!("{} ({})", cipher.name(), variant.name()),
        variant,
        baseline,
    };
    worker.drive(
        results,
        environment,
        |k| cpus_of(chunk, k),
        |message, results| {
            match message {
                WorkerMessage::Point(p) => {
                    received += 1;
                    add_point(plan, chunk.round, results, progress, p);
                }
                WorkerMessage::Unavailable(reason) => {
                    progress.skip(points.len() - received);
                    unavailable(chunk, results, progress, reason);
                }
                _ => {}
            }
            Ok(())
        },
    )
}

/// When a worker of `points` points of `samples` samples is overdue: a point takes
/// warm-up plus samples; 10x that for a loaded machine, and 10 s more each.
pub(crate) fn deadline(plan: &SpeedPlan, samples: usize, points: usize) -> std::time::Instant {
    let per_point = (plan.warmup + plan.sample * samples as u32) * 10 + Duration::from_secs(10);
    std::time::Instant::now() + per_point * (points as u32 + 1)
}

/// A running `__speed-worker` and what its lines are checked against.
pub(crate) struct Worker<'a> {
    pub child: crate::supervisor::Child,
    pub deadline: std::time::Instant,
    /// What it measures, for messages (`aes-128-gcm (noaesni)`).
    pub what: String,
    pub variant: &'a Variant,
    pub baseline: &'a Baseline,
}

impl Worker<'_> {
    /// Reads the worker's lines to its end: its library is checked against the
    /// variant's, its probes judge the variant (once), a failure is an error, and
    /// every measurement (a point, with its noise window: from the previous line to
    /// its own, on the CPUs `cpus(k)` of the k-th point) goes to `measured`.
    pub(crate) fn drive(
        &mut self,
        results: &mut SpeedResults,
        environment: &mut Environment,
        cpus: impl Fn(usize) -> Vec<usize>,
        mut measured: impl FnMut(WorkerMessage, &mut SpeedResults) -> Result<()>,
    ) -> Result<()> {
        let mut received = 0;
        // This process and its descendants (the worker) are the run.
        let own = [std::process::id()];
        let mut window = Some(crate::machine::noise::Window::open(&cpus(0), &own));
        loop {
            if interrupt::requested() {
                self.child.stop();
                return Err(interrupt::Interrupted.into());
            }
            let line = match self.child.next_line(Duration::from_millis(100)) {
                Line::Text(line) => line,
                Line::Timeout => {
                    self.still_working()?;
                    continue;
                }
                Line::Closed => break,
            };
            let message: WorkerMessage = serde_json::from_str(&line)
                .with_context(|| format!("reading the speed worker's answer: {line}"))?;
            let mut noise = || {
                received += 1;
                let closed = window.take().map(|w| Box::new(w.close()));
                window = Some(crate::machine::noise::Window::open(&cpus(received), &own));
                closed
            };
            match message {
                WorkerMessage::Library(loaded) => {
                    self.variant.library.check_and_note(
                        environment,
                        "speed",
                        "speed worker",
                        &loaded,
                        "its own report",
                    )?;
                }
                // The first worker of a variant judges it: every worker of the
                // variant runs the same library under the same environment.
                WorkerMessage::Probed(probes) => {
                    judge_once(results, self.baseline, self.variant, Ok(probes))
                }
                WorkerMessage::Settings(s) => {
                    judge_once(results, self.baseline, self.variant, Err(s))
                }
                WorkerMessage::Failed(reason) => {
                    bail!("measuring {} failed: {reason}", self.what)
                }
                WorkerMessage::Point(mut p) => {
                    p.noise = noise();
                    measured(WorkerMessage::Point(p), results)?;
                }
                WorkerMessage::PkPoint(mut p) => {
                    p.noise = noise();
                    measured(WorkerMessage::PkPoint(p), results)?;
                }
                other => measured(other, results)?,
            }
        }
        let status = self.child.wait(Duration::from_secs(10))?;
        if !status.success() {
            bail!(
                "the speed worker exited with {status}: {}",
                self.child.stderr_tail()
            );
        }
        Ok(())
    }

    /// Between the worker's lines: an error if it exited with a failure or ran past
    /// its deadline (it is stopped then).
    fn still_working(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            if !status.success() {
                bail!(
                    "the speed worker exited with {status}: {}",
                    self.child.stderr_tail()
                );
            }
        }
        if std::time::Instant::now() > self.deadline {
            self.child.stop();
            bail!(
                "the speed worker for {} did not finish in time; it was stopped",
                self.what
            );
        }
        Ok(())
    }
}

/// The CPUs point `k` of `chunk` runs on: the worker measures the points in order,
/// thread i of a point on `cpus[i]`.
fn cpus_of(chunk: &Chunk, k: usize) -> Vec<usize> {
    let cpus = chunk.cpus;
    let threads = chunk.points.get(k).map_or(1, |p| p.2);
    (0..threads)
        .filter_map(|i| cpus.get(i % cpus.len().max(1)).copied())
        .collect()
}

/// A cipher the worker's library does not have in this variant: said, and kept in
/// the results with the worker's reason.
fn unavailable(chunk: &Chunk, results: &mut SpeedResults, progress: &mut Progress, reason: String) {
    let (cipher, variant) = (chunk.cipher, chunk.variant);
    progress.note(&format!(
        "{} is not available in the {} variant: {reason}",
        cipher.name(),
        variant.name()
    ));
    results.unavailable.push(Unavailable {
        cipher: cipher.name().into(),
        variant: variant.name().clone(),
        reason,
    });
}

/// The request of a worker for `chunk`.
fn request_for(chunk: &Chunk, plan: &SpeedPlan) -> WorkerRequest {
    WorkerRequest {
        cipher: chunk.cipher.name().into(),
        variant: chunk.variant.name().clone(),
        points: chunk.points.to_vec(),
        warmup_ns: plan.warmup.as_nanos() as u64,
        sample_ns: plan.sample.as_nanos() as u64,
        samples: chunk.samples,
        cpus: chunk.cpus.to_vec(),
        // The first round's worker measures the effect probes; a later one runs the
        // same library under the same environment.
        probe: chunk.round == 0,
        public_key: None,
    }
}

/// A `__speed-worker` child under `mask` and `variant`'s environment and library,
/// with `request` sent.
pub(crate) fn spawn_worker(
    variant: &Variant,
    mask: Option<&str>,
    request: &WorkerRequest,
) -> Result<crate::supervisor::Child> {
    let exe = std::env::current_exe().context("finding cipherbench's own executable")?;
    let mut child = Spawn::new(&exe)
        .args(["__speed-worker"])
        .ia32cap(mask)
        .envs(variant.environment())
        .loader(variant.library.loader())
        .piped_stdin()
        .piped_stdout()
        .start()?;
    child.send_stdin(&serde_json::to_vec(request)?)?;
    Ok(child)
}

/// The variant judged from its first worker's probes (or, where it ran none, from
/// the vector it reported), unless a worker before this one judged it.
fn judge_once(
    results: &mut SpeedResults,
    baseline: &Baseline,
    variant: &Variant,
    reported: std::result::Result<cipherbench_model::variant::Probes, String>,
) {
    if results.variants.iter().any(|v| v.name == variant.name()) {
        return;
    }
    let record = match reported {
        Ok(probes) => baseline.judge(variant, Some(&probes), &results.variants, None),
        Err(settings) => {
            let mut record = baseline.judge(variant, None, &results.variants, None);
            record.cpu_settings = settings;
            record
        }
    };
    results.variants.push(record);
}

/// A point a worker measured, said on the progress line and kept: a later round
/// adds its samples to the point the first round made.
fn add_point(
    plan: &SpeedPlan,
    round: usize,
    results: &mut SpeedResults,
    progress: &mut Progress,
    p: cipherbench_model::speed::SpeedPoint,
) {
    progress.point(&format!(
        "{} {} {} {} B x{}{}: {}",
        p.cipher,
        p.variant,
        p.direction.as_str(),
        p.size_bytes,
        p.threads,
        if plan.rounds() > 1 {
            format!(" (round {}/{})", round + 1, plan.rounds())
        } else {
            String::new()
        },
        cipherbench_model::units::format_bytes_per_sec(p.throughput_bytes_per_sec.median)
    ));
    match results.points.iter_mut().find(|q| {
        q.cipher == p.cipher
            && q.variant == p.variant
            && q.direction == p.direction
            && q.size_bytes == p.size_bytes
            && q.threads == p.threads
    }) {
        Some(q) if round > 0 => q.absorb(p, round as u32),
        _ => results.points.push(p),
    }
}

fn check_openssl(
    plan: &SpeedPlan,
    cpu: Option<usize>,
    baseline: &Baseline,
    results: &mut SpeedResults,
    session: &mut Session,
) -> Result<()> {
    let single: Vec<_> = results
        .points
        .iter()
        .filter(|p| p.threads == 1)
        .cloned()
        .collect();
    let aead_loop = openssl_speed::aead_loop();
    for p in single {
        interrupt::check()?;
        let Some(cipher) = CipherId::from_name(&p.cipher) else {
            continue;
        };
        let Some((name, aead)) = cipher.openssl_speed() else {
            continue;
        };
        let Some(variant) = plan.variants.iter().find(|v| v.name() == p.variant) else {
            continue;
        };
        let args = openssl_speed::command(
            name,
            aead,
            p.direction == Direction::Decrypt,
            p.size_bytes,
            plan.check_seconds,
        );
        let mask = baseline.mask(variant);
        let loader = variant.library.loader();
        let rate = match openssl_speed::run(
            &args,
            mask.as_deref(),
            &variant.environment(),
            loader,
            plan.check_seconds,
            cpu,
        ) {
            Ok(r) => r,
            Err(e) => {
                session.progress.note(&format!(
                    "openssl speed for {} {}: {e:#}",
                    p.cipher, p.variant
                ));
                continue;
            }
        };
        // Like for like: both divided by CPU time (openssl's user time, our thread's).
        let per_cpu: Vec<f64> = p.samples.iter().map(|s| s.bytes_per_cpu_sec()).collect();
        let ours = cipherbench_model::Summary::of_or_empty(&per_cpu).median;
        let mode = openssl_speed::mode(name, aead, aead_loop);
        session.progress.point(&format!(
            "openssl speed {} {} {} B: ours/openssl {:.2} (per CPU second; {})",
            p.cipher,
            p.variant,
            p.size_bytes,
            ours / rate,
            mode
        ));
        // The CLI that ran: the library's own `bin/openssl` where it has one.
        let command = Spawn::new("openssl").args(&args).loader(loader).display();
        results.openssl_checks.push(OpensslCheck {
            mode,
            time_basis: "cpu".into(),
            cipher: p.cipher.clone(),
            variant: p.variant.clone(),
            direction: p.direction,
            size_bytes: p.size_bytes,
            command,
            openssl_bytes_per_sec: rate,
            ours_bytes_per_sec: ours,
            ratio: ours / rate,
        });
        session.record.speed = Some(results.clone());
        session.save()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_counts_one_openssl_check_per_single_thread_point() {
        let mut plan = SpeedPlan {
            ciphers: vec![CipherId::Aes128Gcm, CipherId::Aes256CbcHmacSha256],
            sizes: vec![1024, 16384],
            variants: vec![Variant::accel(), Variant::noaesni()],
            threads: vec![1, 2],
            multi_thread_sizes: vec![16384],
            directions: vec![Direction::Encrypt],
            warmup: Duration::ZERO,
            sample: Duration::from_millis(100),
            samples: 1,
            rounds: 1,
            check_openssl: false,
            async_jobs: Vec::new(),
            check_seconds: 3,
            check_rounds: 1,
            public_key: Vec::new(),
            pk_unavailable: Vec::new(),
        };
        let without = plan.estimate();
        plan.check_openssl = true;
        // 2 single-thread points x 1 cipher openssl speed has (not the composed
        // aes-256-cbc + hmac-sha256) x 2 variants, 3 s each.
        assert_eq!(plan.estimate() - without, Duration::from_secs(12));
    }
}
