//! Layer 1's public-key half, `cipherbench speed --pk`: operations per second of
//! ML-KEM, ML-DSA, X25519, P-256 and RSA, in every variant, on one thread and on all.
//!
//! It runs as the cipher half does: for each algorithm, the variants alternate in
//! rounds, a fresh `__speed-worker` each (under the variant's mask, environment and
//! library), which generates the algorithm's keys once per operation, checks one
//! run, and measures every operation at every thread count. Before anything is
//! measured, [`preflight`] asks a worker under each variant which algorithms its
//! library has.

use super::worker::{WorkerMessage, WorkerRequest};
use super::{SpeedPlan, Worker};
use crate::campaign;
use crate::interrupt;
use crate::progress::Progress;
use crate::results::Session;
use crate::supervisor::{Line, Spawn};
use crate::variant::{Baseline, Variant};
use anyhow::{bail, Context, Result};
use cipherbench_crypto::pk::PkAlgorithm;
use cipherbench_model::interleave::{schedule, Order, Slot};
use cipherbench_model::speed::pk::paired;
use cipherbench_model::speed::{PkCheck, PkPoint, SpeedResults, Unavailable};
use cipherbench_model::stats::Summary;
use std::time::Duration;

/// Which of `algorithms` each variant's library lacks, with OpenSSL's reason, asked
/// of one worker per variant (the providers of a `provider:` variant can add
/// algorithms). With `explicit` (the user named them), an algorithm that no variant
/// has is refused in one line naming what the library has; otherwise it is dropped.
/// Returns the algorithms to measure and what is unavailable where.
pub fn preflight(
    algorithms: &[PkAlgorithm],
    variants: &[Variant],
    explicit: bool,
) -> Result<(Vec<PkAlgorithm>, Vec<Unavailable>)> {
    let mut missing: Vec<Unavailable> = Vec::new();
    let mut versions: Vec<String> = Vec::new();
    // Every algorithm is asked (a context each, no key), to name what the library has.
    let every = cipherbench_crypto::pk::ALL;
    for variant in variants {
        let (version, lacks) = ask(variant, &every)?;
        versions.push(version);
        missing.extend(lacks.into_iter().map(|(algorithm, reason)| Unavailable {
            cipher: algorithm,
            variant: variant.name(),
            reason,
        }));
    }
    let nowhere =
        |a: &PkAlgorithm| missing.iter().filter(|u| u.cipher == a.name()).count() == variants.len();
    if explicit {
        if let Some(a) = algorithms.iter().find(|a| nowhere(a)) {
            let has: Vec<&str> = every
                .iter()
                .filter(|b| !nowhere(b))
                .map(|b| b.name())
                .collect();
            let mut versions = versions;
            versions.dedup();
            bail!(
                "--pk {}: not in {} (OpenSSL has it since {}; give such a build with --openssl DIR){}",
                a.name(),
                versions.join(", "),
                a.since(),
                if has.is_empty() {
                    String::new()
                } else {
                    format!("; it has {}", has.join(", "))
                }
            );
        }
    }
    let keep: Vec<PkAlgorithm> = algorithms.iter().copied().filter(|a| !nowhere(a)).collect();
    // What the plan asked for and a variant lacks, measured or dropped, stays on
    // record; the algorithms asked only to name what the library has do not.
    missing.retain(|u| algorithms.iter().any(|a| a.name() == u.cipher));
    Ok((keep, missing))
}

/// One worker under `variant` asked which of `algorithms` its library lacks: the
/// library's version, and each missing algorithm with OpenSSL's reason.
fn ask(variant: &Variant, algorithms: &[PkAlgorithm]) -> Result<(String, Vec<(String, String)>)> {
    let request = WorkerRequest::public_key(
        &variant.name(),
        algorithms.iter().map(|a| a.name().to_string()).collect(),
        Vec::new(),
    );
    // No mask: which algorithms a library has does not depend on the CPU bits.
    let mut child = super::spawn_worker(variant, None, &request)?;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let (mut version, mut lacks) = (String::new(), Vec::new());
    loop {
        interrupt::check()?;
        match child.next_line(Duration::from_millis(100)) {
            Line::Text(line) => match serde_json::from_str(&line)
                .with_context(|| format!("reading the speed worker's answer: {line}"))?
            {
                WorkerMessage::Library(loaded) => {
                    version = loaded.version.unwrap_or_else(|| "this library".into())
                }
                WorkerMessage::PkUnavailable(a, reason) => lacks.push((a, reason)),
                WorkerMessage::Failed(reason) => bail!("asking the library: {reason}"),
                _ => {}
            },
            Line::Timeout if std::time::Instant::now() > deadline => {
                child.stop();
                bail!("the speed worker asked which public-key algorithms the library has did not answer in 30 s");
            }
            Line::Timeout => {}
            Line::Closed => break,
        }
    }
    let status = child.wait(Duration::from_secs(10))?;
    if !status.success() {
        bail!(
            "the speed worker exited with {status}: {}",
            child.stderr_tail()
        );
    }
    Ok((version, lacks))
}

/// The public-key units: an algorithm, with every round of every variant.
pub(super) struct Algorithms<'a> {
    pub plan: &'a SpeedPlan,
    /// The interleaved order of every algorithm's slots (point: its index).
    pub order: Vec<Slot>,
    pub cpus: &'a [usize],
    pub baseline: &'a Baseline,
    pub results: &'a mut SpeedResults,
    pub session: &'a mut Session,
}

impl<'a> Algorithms<'a> {
    pub fn new(
        plan: &'a SpeedPlan,
        cpus: &'a [usize],
        baseline: &'a Baseline,
        results: &'a mut SpeedResults,
        session: &'a mut Session,
    ) -> Self {
        let order = schedule(
            plan.public_key.len(),
            plan.variants.len(),
            plan.rounds(),
            Order::PointByPoint,
        );
        Algorithms {
            plan,
            order,
            cpus,
            baseline,
            results,
            session,
        }
    }

    /// Points one worker of `algorithm` sends: every operation at every thread count.
    fn points_of(&self, algorithm: PkAlgorithm) -> usize {
        algorithm.ops().len() * self.plan.threads.len()
    }

    fn lacks(&self, algorithm: PkAlgorithm, variant: &str) -> bool {
        self.results
            .unavailable
            .iter()
            .any(|u| u.cipher == algorithm.name() && u.variant == variant)
    }
}

impl campaign::Units for Algorithms<'_> {
    type Unit = usize;

    fn done(&self, &a: &usize) -> bool {
        let algorithm = self.plan.public_key[a];
        self.plan.variants.iter().all(|v| {
            self.lacks(algorithm, &v.name())
                || algorithm.ops().iter().all(|op| {
                    self.plan.threads.iter().all(|&t| {
                        cipherbench_model::speed::pk::point(
                            &self.results.pk_points,
                            algorithm.name(),
                            op.name(),
                            &v.name(),
                            t,
                        )
                        .is_some_and(|p| p.samples.len() >= self.plan.samples)
                    })
                })
        })
    }

    fn skip(&mut self, &a: &usize) {
        let n = self.points_of(self.plan.public_key[a]);
        self.session
            .progress
            .skip(n * self.plan.variants.len() * self.plan.rounds());
    }

    fn forget(&mut self, &a: &usize) {
        let name = self.plan.public_key[a].name();
        self.results.pk_points.retain(|p| p.algorithm != name);
    }

    /// The algorithm's slots in order, a fresh worker each, saving after each.
    fn measure(&mut self, &a: &usize) -> Result<()> {
        let algorithm = self.plan.public_key[a];
        let slots: Vec<Slot> = self
            .order
            .iter()
            .filter(|s| s.point == a)
            .copied()
            .collect();
        for slot in slots {
            let variant =
                &self.plan.variants[(slot.variant + slot.point) % self.plan.variants.len()];
            interrupt::check()?;
            if self.lacks(algorithm, &variant.name()) {
                self.session.progress.skip(self.points_of(algorithm));
                continue;
            }
            let outcome = self.one_worker(algorithm, variant, slot.round);
            self.session.record.speed = Some(self.results.clone());
            self.session.save()?;
            outcome?;
        }
        Ok(())
    }
}

impl Algorithms<'_> {
    /// One worker: every operation of `algorithm` in `variant` at every thread
    /// count, for round `round`'s share of the samples.
    fn one_worker(
        &mut self,
        algorithm: PkAlgorithm,
        variant: &Variant,
        round: usize,
    ) -> Result<()> {
        let samples = self.plan.samples_in(round);
        let request = WorkerRequest {
            warmup_ns: self.plan.warmup.as_nanos() as u64,
            sample_ns: self.plan.sample.as_nanos() as u64,
            samples,
            cpus: self.cpus.to_vec(),
            // A variant the cipher half judged already is not probed again.
            probe: round == 0
                && !self
                    .results
                    .variants
                    .iter()
                    .any(|v| v.name == variant.name()),
            ..WorkerRequest::public_key(
                &variant.name(),
                vec![algorithm.name().to_string()],
                self.plan.threads.clone(),
            )
        };
        let points = self.points_of(algorithm);
        let mut worker = Worker {
            child: super::spawn_worker(variant, self.baseline.mask(variant).as_deref(), &request)?,
            deadline: super::deadline(self.plan, samples, points),
            what: format!("{} ({})", algorithm.name(), variant.name()),
            variant,
            baseline: self.baseline,
        };
        let threads = &self.plan.threads;
        let cpus = self.cpus;
        let cpus_of = |k: usize| -> Vec<usize> {
            let n = threads.get(k % threads.len().max(1)).copied().unwrap_or(1);
            (0..n)
                .filter_map(|i| cpus.get(i % cpus.len().max(1)).copied())
                .collect()
        };
        let progress = &mut self.session.progress;
        let rounds = self.plan.rounds();
        let mut received = 0;
        worker.drive(
            self.results,
            &mut self.session.record.environment,
            cpus_of,
            |message, results| {
                match message {
                    WorkerMessage::PkPoint(p) => {
                        received += 1;
                        add(results, progress, p, round, rounds);
                    }
                    WorkerMessage::PkUnavailable(a, reason) => {
                        // The points it will not send count as done.
                        progress.skip(points.saturating_sub(received));
                        progress.note(&format!(
                            "{a} is not available in the {} variant: {reason}",
                            variant.name()
                        ));
                        results.unavailable.push(Unavailable {
                            cipher: a,
                            variant: variant.name(),
                            reason,
                        });
                    }
                    _ => {}
                }
                Ok(())
            },
        )
    }
}

/// A point a worker measured, said and kept: a later round adds its samples.
fn add(
    results: &mut SpeedResults,
    progress: &mut Progress,
    p: PkPoint,
    round: usize,
    rounds: usize,
) {
    progress.point(&format!(
        "{} {} {} x{}{}: {:.0} op/s",
        p.algorithm,
        p.operation,
        p.variant,
        p.threads,
        if rounds > 1 {
            format!(" (round {}/{rounds})", round + 1)
        } else {
            String::new()
        },
        p.ops_per_sec.median
    ));
    match results.pk_points.iter_mut().find(|q| q.same_point(&p)) {
        Some(q) if round > 0 => q.absorb(p, round as u32),
        _ => results.pk_points.push(p),
    }
}

/// `--check-openssl` for the public-key points: `openssl speed ALG -mr` of the same
/// library under each variant's environment, once per algorithm and variant, both
/// per CPU second. A shared machine drifts by more than the check's tolerance within
/// a minute (the same `openssl speed` 18.5k-21.6k X25519 derivations per second here,
/// a minute apart), so ours is measured again just before and just after openssl's,
/// on one thread for as long as openssl's run, and the check takes their mean. Both
/// run on `cpu`, that of the one-thread points: under KVM the two vCPUs of the
/// development machine differed by 12 % (the median of five alternating pairs of
/// 2 s `openssl speed rsa3072` runs), which an unpinned `openssl speed` turned into
/// a systematic gap.
pub fn check_openssl(
    plan: &SpeedPlan,
    cpu: Option<usize>,
    baseline: &Baseline,
    results: &mut SpeedResults,
    session: &mut Session,
) -> Result<()> {
    for variant in &plan.variants {
        for &algorithm in &plan.public_key {
            interrupt::check()?;
            if !results
                .pk_points
                .iter()
                .any(|p| p.algorithm == algorithm.name() && p.variant == variant.name())
            {
                continue;
            }
            // A resumed run checks the pair again, whole.
            results
                .pk_checks
                .retain(|c| !(c.algorithm == algorithm.name() && c.variant == variant.name()));
            // ours, openssl, ours, openssl, ... ours: each run between two of ours,
            // so that a drift of the machine falls on both sides alike.
            let mut ours: Vec<Option<Vec<PkPoint>>> = Vec::new();
            let mut runs: Vec<Option<String>> = Vec::new();
            let mut command = Vec::new();
            ours.push(flanked(
                plan, cpu, baseline, variant, algorithm, results, session,
            )?);
            for _ in 0..plan.check_rounds.max(1) {
                interrupt::check()?;
                match openssl_speed(plan, cpu, baseline, variant, algorithm) {
                    Ok((args, output)) => {
                        command = Spawn::new("openssl")
                            .args(&args)
                            .loader(variant.library.loader())
                            .display();
                        runs.push(Some(output));
                    }
                    Err(e) => {
                        session.progress.note(&format!(
                            "openssl speed for {} {}: {e:#}",
                            algorithm.name(),
                            variant.name()
                        ));
                        runs.push(None);
                    }
                }
                ours.push(flanked(
                    plan, cpu, baseline, variant, algorithm, results, session,
                )?);
            }
            let (_, field) = algorithm.openssl_speed();
            for &op in algorithm.ops() {
                let mine: Vec<Option<f64>> = ours
                    .iter()
                    .map(|f| {
                        f.as_ref()?
                            .iter()
                            .find(|p| p.operation == op.name())
                            .map(|p| p.ops_per_cpu_sec.median)
                    })
                    .collect();
                let theirs: Vec<Option<f64>> = runs
                    .iter()
                    .map(|out| {
                        let (tag, at) = field(op)?;
                        super::openssl_speed::parse_mr_field(out.as_ref()?, tag, at)
                    })
                    .collect();
                let Some((mine, rate, ratios)) = paired(&mine, &theirs) else {
                    session.progress.note(&format!(
                        "openssl speed {}: no {} figure to compare",
                        algorithm.name(),
                        op.name()
                    ));
                    continue;
                };
                let ratio = Summary::of(&ratios).map_or(mine / rate, |s| s.median);
                session.progress.point(&format!(
                    "openssl speed {} {} {}: ours/openssl {ratio:.2} (per CPU second, the median of {} runs, each between two of ours)",
                    algorithm.name(),
                    op.name(),
                    variant.name(),
                    ratios.len()
                ));
                results.pk_checks.push(PkCheck {
                    algorithm: algorithm.name().into(),
                    operation: op.name().into(),
                    variant: variant.name(),
                    command: command.clone(),
                    openssl_ops_per_sec: rate,
                    ours_ops_per_cpu_sec: mine,
                    ratio,
                    ratios,
                });
            }
            session.record.speed = Some(results.clone());
            session.save()?;
        }
    }
    Ok(())
}

/// `openssl speed -seconds S -mr ALG...` under the variant, on `cpu`: its
/// arguments and output.
fn openssl_speed(
    plan: &SpeedPlan,
    cpu: Option<usize>,
    baseline: &Baseline,
    variant: &Variant,
    algorithm: PkAlgorithm,
) -> Result<(Vec<String>, String)> {
    let (names, _) = algorithm.openssl_speed();
    let mut args: Vec<String> = vec!["speed".into(), "-seconds".into()];
    args.push(plan.check_seconds.to_string());
    args.push("-mr".into());
    args.extend(names.iter().map(|n| n.to_string()));
    let output = Spawn::new("openssl")
        .args(&args)
        .ia32cap(baseline.mask(variant).as_deref())
        .envs(variant.environment())
        .loader(variant.library.loader())
        .pinned(cpu)
        .output(Duration::from_secs(
            u64::from(plan.check_seconds) * 4 * names.len() as u64 + 30,
        ))?
        .success("openssl speed")?;
    Ok((args, output.stdout))
}

/// Ours for the cross-check: every operation of `algorithm` in `variant` on one
/// thread on `cpu`, one sample as long as an `openssl speed` run of one operation;
/// None, with a note, where the worker failed (an interruption goes up).
fn flanked(
    plan: &SpeedPlan,
    cpu: Option<usize>,
    baseline: &Baseline,
    variant: &Variant,
    algorithm: PkAlgorithm,
    results: &mut SpeedResults,
    session: &mut Session,
) -> Result<Option<Vec<PkPoint>>> {
    let mut measure = || -> Result<Vec<PkPoint>> {
        let request = WorkerRequest {
            warmup_ns: plan.warmup.as_nanos() as u64,
            sample_ns: u64::from(plan.check_seconds) * 1_000_000_000,
            samples: 1,
            cpus: cpu.into_iter().collect(),
            ..WorkerRequest::public_key(
                &variant.name(),
                vec![algorithm.name().to_string()],
                vec![1],
            )
        };
        let mut worker = Worker {
            child: super::spawn_worker(variant, baseline.mask(variant).as_deref(), &request)?,
            deadline: std::time::Instant::now()
                + Duration::from_secs(u64::from(plan.check_seconds) * 10 + 30),
            what: format!(
                "{} ({}) for the cross-check",
                algorithm.name(),
                variant.name()
            ),
            variant,
            baseline,
        };
        let mut out = Vec::new();
        worker.drive(
            results,
            &mut session.record.environment,
            |_| Vec::new(),
            |message, _| {
                if let WorkerMessage::PkPoint(p) = message {
                    out.push(p);
                }
                Ok(())
            },
        )?;
        Ok(out)
    };
    match measure() {
        Ok(points) => Ok(Some(points)),
        Err(e) if e.is::<interrupt::Interrupted>() => Err(e),
        Err(e) => {
            session.progress.note(&format!(
                "the cross-check of {} {} could not measure ours: {e:#}",
                algorithm.name(),
                variant.name()
            ));
            Ok(None)
        }
    }
}

/// Runs the public-key half of the plan.
pub(super) fn run(
    plan: &SpeedPlan,
    cpus: &[usize],
    baseline: &Baseline,
    results: &mut SpeedResults,
    session: &mut Session,
) -> Result<()> {
    if plan.public_key.is_empty() {
        return Ok(());
    }
    // What the preflight found missing is known before any worker starts.
    for u in &plan.pk_unavailable {
        if !results.unavailable.contains(u) {
            results.unavailable.push(u.clone());
        }
    }
    let units: Vec<usize> = (0..plan.public_key.len()).collect();
    campaign::each_unit(
        &units,
        &mut Algorithms::new(plan, cpus, baseline, results, session),
    )?;
    Ok(())
}
