//! Layer 1's public-key results (`speed --pk`): operations per second of ML-KEM,
//! ML-DSA, X25519, P-256 and RSA, per variant and thread count, and what each
//! variant's mask did to them.

use super::SpeedSample;
use crate::interval::{Pairing, RatioInterval, DEFAULT_SEED};
use crate::stats::Summary;
use serde::{Deserialize, Serialize};

/// A ratio further from 1.0 than this, with an interval that excludes 1.0, is a mask
/// moving an operation; anything closer is the same code (5 %: the spread of a
/// public-key operation's samples on a shared VM is 1-3 %).
pub const MOVED_AT: f64 = 0.05;

/// One measured public-key point: an operation of an algorithm in a variant, on some
/// threads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PkPoint {
    /// Algorithm (`ml-kem-768`, `p-256`, ...).
    pub algorithm: String,
    /// Operation (`keygen`, `encaps`, `decaps`, `sign`, `verify`, `derive`).
    pub operation: String,
    /// Variant name.
    pub variant: String,
    /// Threads used.
    pub threads: usize,
    /// Raw samples; each operation counts one byte, so `bytes` equals `ops`.
    pub samples: Vec<SpeedSample>,
    /// Operations per second of wall time, over the samples.
    pub ops_per_sec: Summary,
    /// Operations per second of the measuring threads' CPU time (what `openssl
    /// speed` reports), over the samples.
    pub ops_per_cpu_sec: Summary,
    /// CPU seconds used per second of wall time.
    pub cpu_cores_used: f64,
    /// How quiet the point's CPUs were while it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<Box<crate::noise::Noise>>,
    /// The round each sample was measured in (empty with one round).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sample_rounds: Vec<u32>,
}

impl PkPoint {
    /// A point from its samples.
    pub fn of(
        algorithm: &str,
        operation: &str,
        variant: &str,
        threads: usize,
        samples: Vec<SpeedSample>,
    ) -> PkPoint {
        let mut point = PkPoint {
            algorithm: algorithm.into(),
            operation: operation.into(),
            variant: variant.into(),
            threads,
            samples,
            ops_per_sec: Summary::of_or_empty(&[]),
            ops_per_cpu_sec: Summary::of_or_empty(&[]),
            cpu_cores_used: 0.0,
            noise: None,
            sample_rounds: Vec::new(),
        };
        point.summarise();
        point
    }

    fn summarise(&mut self) {
        let wall: Vec<f64> = self
            .samples
            .iter()
            .map(SpeedSample::throughput_bytes_per_sec)
            .collect();
        let cpu: Vec<f64> = self
            .samples
            .iter()
            .map(SpeedSample::bytes_per_cpu_sec)
            .collect();
        self.ops_per_sec = Summary::of_or_empty(&wall);
        self.ops_per_cpu_sec = Summary::of_or_empty(&cpu);
        self.cpu_cores_used = super::cores_used(&self.samples);
    }

    /// Adds the samples of a later round of the same point and recomputes the
    /// figures over all of them (as [`super::SpeedPoint::absorb`]).
    pub fn absorb(&mut self, later: PkPoint, round: u32) {
        if self.sample_rounds.len() < self.samples.len() {
            self.sample_rounds.resize(self.samples.len(), 0);
        }
        self.sample_rounds
            .extend(std::iter::repeat_n(round, later.samples.len()));
        self.samples.extend(later.samples);
        self.summarise();
        match (&mut self.noise, later.noise) {
            (Some(n), Some(m)) => n.merge(&m),
            (n @ None, m) => *n = m,
            (Some(_), None) => {}
        }
    }

    /// Whether this is the same point as `other` (algorithm, operation, variant,
    /// threads).
    pub fn same_point(&self, other: &PkPoint) -> bool {
        self.algorithm == other.algorithm
            && self.operation == other.operation
            && self.variant == other.variant
            && self.threads == other.threads
    }
}

/// What a variant did to an operation, against the baseline of the same library.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MaskEffect {
    /// The interval excludes 1.0 and the ratio is more than [`MOVED_AT`] from it.
    Moved(RatioInterval),
    /// The same code ran: the ratio is within [`MOVED_AT`] of 1.0 and its interval
    /// within [`UNMOVED_WITHIN`].
    Unmoved(RatioInterval),
    /// The samples spread too widely to say either.
    Unclear(RatioInterval),
}

/// The widest interval an unmoved operation may have, each way from 1.0 (15 %: a
/// ratio near 1.0 whose interval reaches further says too little to call the code
/// the same).
pub const UNMOVED_WITHIN: f64 = 0.15;

impl MaskEffect {
    /// The effect of a ratio (variant over baseline).
    pub fn of(ratio: RatioInterval) -> MaskEffect {
        let outside = ratio.low > 1.0 || ratio.high < 1.0;
        let far = (ratio.point - 1.0).abs() > MOVED_AT;
        let narrow = ratio.low >= 1.0 - UNMOVED_WITHIN && ratio.high <= 1.0 + UNMOVED_WITHIN;
        match (outside, far) {
            (true, true) => MaskEffect::Moved(ratio),
            (_, false) if narrow => MaskEffect::Unmoved(ratio),
            _ => MaskEffect::Unclear(ratio),
        }
    }
}

/// `openssl speed` of the same library and variant, for a cross-check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PkCheck {
    /// Algorithm.
    pub algorithm: String,
    /// Operation.
    pub operation: String,
    /// Variant.
    pub variant: String,
    /// The command that ran (the variant's environment is the record's).
    pub command: Vec<String>,
    /// Its operations per second (of its user CPU time); with several runs, their
    /// median.
    pub openssl_ops_per_sec: f64,
    /// Ours, per CPU second of the measuring thread: the mean of the two
    /// measurements around each `openssl speed` run, then the median over the runs.
    pub ours_ops_per_cpu_sec: f64,
    /// Ours over openssl's: the median of [`PkCheck::ratios`].
    pub ratio: f64,
    /// Ours over openssl's per `openssl speed` run, each against the mean of ours
    /// just before and just after it (one entry in records made before runs were
    /// repeated).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ratios: Vec<f64>,
}

impl PkCheck {
    /// The paired ratios' lowest and highest, where there are two or more.
    pub fn spread(&self) -> Option<(f64, f64)> {
        let s = Summary::of(&self.ratios).filter(|s| s.n >= 2)?;
        Some((s.min, s.max))
    }
}

/// The cross-check of one operation from alternating measurements: `ours[i]` just
/// before and `ours[i + 1]` just after `openssl[i]` (None where one is missing).
/// Each run is paired with the mean of ours around it; the check's figures are the
/// medians. Pure.
pub fn paired(ours: &[Option<f64>], openssl: &[Option<f64>]) -> Option<(f64, f64, Vec<f64>)> {
    let mut mine = Vec::new();
    let mut theirs = Vec::new();
    let mut ratios = Vec::new();
    for (i, rate) in openssl.iter().enumerate() {
        let Some(rate) = rate.filter(|r| *r > 0.0) else {
            continue;
        };
        let around: Vec<f64> = [ours.get(i), ours.get(i + 1)]
            .into_iter()
            .flatten()
            .flatten()
            .copied()
            .collect();
        if around.is_empty() {
            continue;
        }
        let m = around.iter().sum::<f64>() / around.len() as f64;
        mine.push(m);
        theirs.push(rate);
        ratios.push(m / rate);
    }
    let median = |v: &[f64]| Summary::of(v).map(|s| s.median);
    Some((median(&mine)?, median(&theirs)?, ratios))
}

/// Finds a point.
pub fn point<'a>(
    points: &'a [PkPoint],
    algorithm: &str,
    operation: &str,
    variant: &str,
    threads: usize,
) -> Option<&'a PkPoint> {
    points.iter().find(|p| {
        p.algorithm == algorithm
            && p.operation == operation
            && p.variant == variant
            && p.threads == threads
    })
}

/// What `variant` did to an operation against `baseline` at `threads`, from the
/// samples of both (None: a point missing or with fewer than 3 samples).
pub fn effect(
    points: &[PkPoint],
    algorithm: &str,
    operation: &str,
    (variant, baseline): (&str, &str),
    threads: usize,
) -> Option<MaskEffect> {
    let rates = |v: &str| -> Option<Vec<f64>> {
        let p = point(points, algorithm, operation, v, threads)?;
        Some(
            p.samples
                .iter()
                .map(SpeedSample::throughput_bytes_per_sec)
                .collect(),
        )
    };
    RatioInterval::bootstrap(
        &rates(variant)?,
        &rates(baseline)?,
        Pairing::Independent,
        DEFAULT_SEED,
    )
    .map(MaskEffect::of)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_openssl_run_is_paired_with_ours_around_it_and_the_medians_kept() {
        // ours 100, openssl 100, ours 120, openssl 130, ours 80, openssl 90, ours 100
        let ours = [Some(100.0), Some(120.0), Some(80.0), Some(100.0)];
        let openssl = [Some(100.0), Some(130.0), Some(90.0)];
        let (mine, theirs, ratios) = paired(&ours, &openssl).unwrap();
        assert_eq!(ratios, [1.1, 100.0 / 130.0, 1.0]);
        assert_eq!(mine, 100.0);
        assert_eq!(theirs, 100.0);
        // A missing flank leaves the other; a missing run is skipped.
        let (_, _, r) = paired(&[Some(100.0), None], &[Some(50.0), None]).unwrap();
        assert_eq!(r, [2.0]);
        assert!(paired(&[None, None], &[Some(1.0)]).is_none());
        let check = PkCheck {
            algorithm: "x25519".into(),
            operation: "derive".into(),
            variant: "accel".into(),
            command: Vec::new(),
            openssl_ops_per_sec: theirs,
            ours_ops_per_cpu_sec: mine,
            ratio: Summary::of(&ratios).unwrap().median,
            ratios,
        };
        assert_eq!(check.ratio, 1.0);
        assert_eq!(check.spread(), Some((100.0 / 130.0, 1.1)));
    }

    fn samples(rates: &[u64]) -> Vec<SpeedSample> {
        rates
            .iter()
            .map(|&ops| SpeedSample {
                ops,
                bytes: ops,
                elapsed_ns: 100_000_000,
                cpu_ns: 50_000_000,
            })
            .collect()
    }

    #[test]
    fn a_point_counts_operations_per_wall_and_cpu_second() {
        let p = PkPoint::of("x25519", "derive", "accel", 1, samples(&[100, 110, 90]));
        assert_eq!(p.ops_per_sec.median, 1000.0);
        assert_eq!(p.ops_per_cpu_sec.median, 2000.0);
        assert!((p.cpu_cores_used - 0.5).abs() < 1e-9);
    }

    #[test]
    fn a_later_round_adds_its_samples() {
        let mut p = PkPoint::of("x25519", "derive", "accel", 1, samples(&[100, 100]));
        p.absorb(
            PkPoint::of("x25519", "derive", "accel", 1, samples(&[300])),
            1,
        );
        assert_eq!(p.samples.len(), 3);
        assert_eq!(p.sample_rounds, vec![0, 0, 1]);
        assert_eq!(p.ops_per_sec.median, 1000.0);
    }

    #[test]
    fn a_mask_moves_an_operation_only_clearly_and_by_more_than_five_percent() {
        let pts = vec![
            PkPoint::of(
                "rsa-2048",
                "sign",
                "accel",
                1,
                samples(&[100, 101, 99, 100]),
            ),
            PkPoint::of(
                "rsa-2048",
                "sign",
                "nopkaccel",
                1,
                samples(&[60, 61, 59, 60]),
            ),
            PkPoint::of("rsa-2048", "sign", "noaesni", 1, samples(&[98, 99, 97, 98])),
            PkPoint::of("rsa-2048", "sign", "other", 1, samples(&[90, 110, 100, 95])),
            PkPoint::of("rsa-2048", "sign", "wide", 1, samples(&[40, 130, 60, 120])),
        ];
        let of = |v| effect(&pts, "rsa-2048", "sign", (v, "accel"), 1).unwrap();
        assert!(matches!(of("nopkaccel"), MaskEffect::Moved(r) if (r.point - 0.6).abs() < 0.01));
        // Clearly lower, but by 2 %: the same code.
        assert!(matches!(of("noaesni"), MaskEffect::Unmoved(_)));
        // Spread over 1.0, the ratio near it, the interval within 15 %.
        assert!(matches!(of("other"), MaskEffect::Unmoved(_)));
        // Near 1.0 but spread beyond 15 %: too little to say.
        let loose = vec![
            PkPoint::of("x", "op", "accel", 1, samples(&[100, 101, 99, 100])),
            PkPoint::of("x", "op", "m", 1, samples(&[70, 135, 100, 102])),
        ];
        assert!(matches!(
            effect(&loose, "x", "op", ("m", "accel"), 1),
            Some(MaskEffect::Unclear(_))
        ));
        // Far from 1.0, but too spread to say.
        assert!(matches!(of("wide"), MaskEffect::Unclear(_)));
        assert!(effect(&pts, "rsa-2048", "verify", ("nopkaccel", "accel"), 1).is_none());
    }
}
