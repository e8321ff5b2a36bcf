//! Layer 1 results: cipher throughput by buffer size, per acceleration variant.

use crate::stats::{Ratio, Summary};
use serde::{Deserialize, Serialize};

pub mod pk;
pub mod reference;
pub use pk::{PkCheck, PkPoint};

/// Encrypt or decrypt.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Encryption (seal).
    Encrypt,
    /// Decryption (open, including tag verification).
    Decrypt,
}

impl Direction {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Encrypt => "encrypt",
            Direction::Decrypt => "decrypt",
        }
    }
}

/// What `cipherbench speed` was asked to measure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SpeedConfig {
    /// Cipher names, in catalogue spelling.
    pub ciphers: Vec<String>,
    /// Buffer sizes in bytes.
    pub sizes_bytes: Vec<u64>,
    /// Variant names (`accel`, `noaesni`).
    pub variants: Vec<String>,
    /// Thread counts.
    pub threads: Vec<usize>,
    /// Directions.
    pub directions: Vec<Direction>,
    /// Warm-up per point before sampling.
    pub warmup_ns: u64,
    /// Length of one sample.
    pub sample_ns: u64,
    /// Samples per point.
    pub samples: usize,
    /// Rounds the samples were split into, the variants of a cipher alternating from
    /// round to round (`speed --rounds`); 1 in records written before.
    #[serde(default = "one_round")]
    pub rounds: usize,
    /// Public-key algorithms (`speed --pk`), in catalogue spelling; empty in records
    /// written before, and when only ciphers were asked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub public_key: Vec<String>,
}

fn one_round() -> usize {
    1
}

/// Moved to [`crate::variant`], the home of everything about variants; kept here so
/// that `speed::VariantRecord` paths keep working.
pub use crate::variant::VariantRecord;

/// One raw sample: what one run of the loop did, summed over threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SpeedSample {
    /// Operations (one per buffer).
    pub ops: u64,
    /// Payload bytes processed.
    pub bytes: u64,
    /// Wall time of the sample (the longest thread's).
    pub elapsed_ns: u64,
    /// CPU time used by all threads in the sample.
    pub cpu_ns: u64,
}

impl SpeedSample {
    /// Bytes per second of wall time.
    pub fn throughput_bytes_per_sec(&self) -> f64 {
        if self.elapsed_ns == 0 {
            return 0.0;
        }
        self.bytes as f64 * 1e9 / self.elapsed_ns as f64
    }

    /// Bytes per second of the measuring threads' CPU time: what `openssl speed`
    /// reports by default, and what a busy machine moves least.
    pub fn bytes_per_cpu_sec(&self) -> f64 {
        if self.cpu_ns == 0 {
            return 0.0;
        }
        self.bytes as f64 * 1e9 / self.cpu_ns as f64
    }
}

/// One measured point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SpeedPoint {
    /// Cipher name.
    pub cipher: String,
    /// Variant name.
    pub variant: String,
    /// Direction.
    pub direction: Direction,
    /// Buffer size.
    pub size_bytes: u64,
    /// Threads used.
    pub threads: usize,
    /// Raw samples.
    pub samples: Vec<SpeedSample>,
    /// Throughput in bytes per second of wall time, over the samples.
    pub throughput_bytes_per_sec: Summary,
    /// CPU seconds used per second of wall time (1.0 = one core busy).
    pub cpu_cores_used: f64,
    /// How quiet the point's CPUs were while it was measured (from its warm-up to its
    /// last sample; with several rounds, their windows taken as one,
    /// [`crate::noise::Noise::merge`]). Absent in records written before it was
    /// recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<Box<crate::noise::Noise>>,
    /// The round each sample (in order) was measured in, where the samples were split
    /// into rounds that alternate the variants; empty with one round, and in records
    /// written before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sample_rounds: Vec<u32>,
}

impl SpeedPoint {
    /// Adds the samples of a later round of the same point (`later`, measured in
    /// round `round` by a fresh worker) and recomputes the figures over all of them:
    /// the median and spread over every sample, CPU per wall second over their sums,
    /// the noise over both windows.
    pub fn absorb(&mut self, later: SpeedPoint, round: u32) {
        if self.sample_rounds.len() < self.samples.len() {
            self.sample_rounds.resize(self.samples.len(), 0);
        }
        self.sample_rounds
            .extend(std::iter::repeat_n(round, later.samples.len()));
        self.samples.extend(later.samples);
        let rates: Vec<f64> = self
            .samples
            .iter()
            .map(SpeedSample::throughput_bytes_per_sec)
            .collect();
        self.throughput_bytes_per_sec = Summary::of_or_empty(&rates);
        self.cpu_cores_used = cores_used(&self.samples);
        match (&mut self.noise, later.noise) {
            (Some(n), Some(m)) => n.merge(&m),
            (n @ None, m) => *n = m,
            (Some(_), None) => {}
        }
    }
    /// Cycles per byte at `hz` (a [`reference::MeasuredClock`]'s): the median over
    /// the samples of their threads' CPU seconds times the clock over their bytes.
    /// None without samples that moved bytes.
    pub fn cycles_per_byte(&self, hz: f64) -> Option<f64> {
        let per_byte: Vec<f64> = self
            .samples
            .iter()
            .filter(|s| s.bytes > 0 && s.cpu_ns > 0)
            .map(|s| s.cpu_ns as f64 * hz / 1e9 / s.bytes as f64)
            .collect();
        Summary::of(&per_byte).map(|s| s.median)
    }

    /// What the noise judge says of this point's window: `noisy_machine`, `steal`,
    /// and throttling (the governor is the machine's, said once per run instead).
    pub fn noise_findings(&self) -> Vec<crate::noise::Finding> {
        crate::noise::findings_of(self.noise.as_deref())
    }
}

/// CPU seconds per wall second over `samples` (their sums), 0 without time.
pub fn cores_used(samples: &[SpeedSample]) -> f64 {
    let elapsed: u64 = samples.iter().map(|s| s.elapsed_ns).sum();
    let cpu: u64 = samples.iter().map(|s| s.cpu_ns).sum();
    if elapsed > 0 {
        cpu as f64 / elapsed as f64
    } else {
        0.0
    }
}

/// A cipher (or public-key algorithm) that could not run in a variant, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Unavailable {
    /// Cipher name.
    pub cipher: String,
    /// Variant name.
    pub variant: String,
    /// What the library said.
    pub reason: String,
}

/// A control cipher (one AES-NI does not touch) compared between variants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ControlCheck {
    /// Cipher name.
    pub cipher: String,
    /// Direction.
    pub direction: Direction,
    /// Size.
    pub size_bytes: u64,
    /// Threads.
    pub threads: usize,
    /// noaesni throughput / accel throughput.
    pub ratio: Ratio,
    /// Within tolerance: the variant changed AES-NI and nothing else this cipher uses.
    pub held: bool,
    /// The tag of the library the pair ran under (`3.6.3` for `accel@3.6.3` and
    /// `noaesni@3.6.3`); None for the baseline library.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
}

/// `openssl speed -evp ... -mr` measured for the same point, for a cross-check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OpensslCheck {
    /// What openssl's loop does per operation, so the reader knows how like for like
    /// the check is (`-aead`: one message per operation with 13 bytes of AAD, ...).
    /// Empty in records written before it was recorded.
    #[serde(default)]
    pub mode: String,
    /// The time both figures divide by: `cpu` (openssl's user CPU time, our measuring
    /// thread's CPU time) or `wall` (`-elapsed`; records written before `cpu` existed).
    #[serde(default = "wall")]
    pub time_basis: String,
    /// Cipher name (ours).
    pub cipher: String,
    /// Variant.
    pub variant: String,
    /// Direction.
    pub direction: Direction,
    /// Size.
    pub size_bytes: u64,
    /// The command that ran.
    pub command: Vec<String>,
    /// What openssl reported, bytes per second (of `time_basis`).
    pub openssl_bytes_per_sec: f64,
    /// Our median for the same point, bytes per second of `time_basis`.
    pub ours_bytes_per_sec: f64,
    /// ours / openssl.
    pub ratio: f64,
}

/// `openssl speed -evp ... -async_jobs N -mr` for one variant, cipher and size: what a
/// provider or engine that works asynchronously gains from N jobs in flight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AsyncPoint {
    /// Cipher name (ours).
    pub cipher: String,
    /// Variant.
    pub variant: String,
    /// Size.
    pub size_bytes: u64,
    /// `-async_jobs` (0: synchronous).
    pub async_jobs: u32,
    /// The command that ran (the variant's environment is the record's).
    pub command: Vec<String>,
    /// What openssl reported, bytes per second of its user CPU time.
    pub bytes_per_sec: f64,
}

fn wall() -> String {
    "wall".into()
}

/// Everything layer 1 produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SpeedResults {
    /// What was asked.
    pub config: SpeedConfig,
    /// Variants as they were set up.
    pub variants: Vec<VariantRecord>,
    /// Measured points.
    pub points: Vec<SpeedPoint>,
    /// Cipher/variant pairs that could not run.
    pub unavailable: Vec<Unavailable>,
    /// Control cipher checks.
    pub controls: Vec<ControlCheck>,
    /// Cross-checks against `openssl speed`.
    #[serde(default)]
    pub openssl_checks: Vec<OpensslCheck>,
    /// `--async-jobs`: `openssl speed -async_jobs N` per variant, cipher and size.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub async_points: Vec<AsyncPoint>,
    /// Where the worker's threads ran: thread i on the i-th CPU of the role's order
    /// (one thread per core before any sibling; `topology::spread_order`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<crate::topology::Placement>,
    /// Public-key points (`speed --pk`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pk_points: Vec<PkPoint>,
    /// Cross-checks of the public-key points against `openssl speed`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pk_checks: Vec<PkCheck>,
    /// The core's clock, measured before the first point and after the last: what
    /// the points' cycles per byte are counted at ([`SpeedPoint::cycles_per_byte`]).
    /// Absent where it could not be measured, and in records written before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<reference::MeasuredClock>,
}

/// Ratio tolerance within which a control cipher is said to run at the same speed in
/// both variants (10 %: wider than the usual sample spread on a shared VM).
pub const CONTROL_TOLERANCE: f64 = 0.10;

impl SpeedResults {
    /// The point for a key, if measured.
    pub fn point(
        &self,
        cipher: &str,
        variant: &str,
        direction: Direction,
        size_bytes: u64,
        threads: usize,
    ) -> Option<&SpeedPoint> {
        self.points.iter().find(|p| {
            p.cipher == cipher
                && p.variant == variant
                && p.direction == direction
                && p.size_bytes == size_bytes
                && p.threads == threads
        })
    }

    /// The throughput ratio of two points with its 95 % bootstrap interval over their
    /// samples (`crate::interval`; the variants' samples were taken in different
    /// processes one after the other, so they are resampled independently). None when
    /// a point is missing or has fewer than 3 samples.
    pub fn ratio_interval(
        &self,
        cipher: &str,
        numerator: &str,
        denominator: &str,
        direction: Direction,
        size_bytes: u64,
        threads: usize,
    ) -> Option<crate::interval::RatioInterval> {
        self.ratio_interval_between(
            (cipher, numerator),
            (cipher, denominator),
            direction,
            size_bytes,
            threads,
        )
    }

    /// Like [`SpeedResults::ratio_interval`], between any two (cipher, variant)
    /// points of the same direction, size and threads (AES-GCM over CBC-HMAC-SHA1).
    pub fn ratio_interval_between(
        &self,
        numerator: (&str, &str),
        denominator: (&str, &str),
        direction: Direction,
        size_bytes: u64,
        threads: usize,
    ) -> Option<crate::interval::RatioInterval> {
        let rates = |(cipher, variant): (&str, &str)| -> Option<Vec<f64>> {
            let p = self.point(cipher, variant, direction, size_bytes, threads)?;
            Some(
                p.samples
                    .iter()
                    .map(SpeedSample::throughput_bytes_per_sec)
                    .collect(),
            )
        };
        crate::interval::RatioInterval::bootstrap(
            &rates(numerator)?,
            &rates(denominator)?,
            crate::interval::Pairing::Independent,
            crate::interval::DEFAULT_SEED,
        )
    }

    /// Recomputes the control checks from the points: for each control cipher, every
    /// point measured in both `accel` and `noaesni`.
    pub fn compute_controls(&mut self, control_ciphers: &[&str]) {
        let mut controls = Vec::new();
        for p in &self.points {
            // accel, or accel on a later library (`accel@TAG`), against the noaesni of
            // the same library.
            let (variant, tag) = crate::env::split_variant_name(&p.variant);
            if variant != "accel" || !control_ciphers.contains(&p.cipher.as_str()) {
                continue;
            }
            let noaesni = match tag {
                Some(t) => format!("noaesni@{t}"),
                None => "noaesni".to_string(),
            };
            if let Some(q) = self.point(&p.cipher, &noaesni, p.direction, p.size_bytes, p.threads) {
                if let Some(ratio) =
                    Ratio::of(&q.throughput_bytes_per_sec, &p.throughput_bytes_per_sec)
                {
                    controls.push(ControlCheck {
                        cipher: p.cipher.clone(),
                        direction: p.direction,
                        size_bytes: p.size_bytes,
                        threads: p.threads,
                        held: (ratio.value - 1.0).abs() <= CONTROL_TOLERANCE,
                        ratio,
                        library: tag.map(str::to_string),
                    });
                }
            }
        }
        self.controls = controls;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(cipher: &str, variant: &str, rate: f64) -> SpeedPoint {
        SpeedPoint {
            cipher: cipher.into(),
            variant: variant.into(),
            direction: Direction::Encrypt,
            size_bytes: 16384,
            threads: 1,
            samples: Vec::new(),
            throughput_bytes_per_sec: Summary::of(&[rate, rate]).unwrap(),
            cpu_cores_used: 1.0,
            noise: None,
            sample_rounds: Vec::new(),
        }
    }

    fn sample(bytes: u64, elapsed_ns: u64, cpu_ns: u64) -> SpeedSample {
        SpeedSample {
            ops: 1,
            bytes,
            elapsed_ns,
            cpu_ns,
        }
    }

    #[test]
    fn a_later_round_adds_its_samples_and_the_figures_cover_every_round() {
        let mut first = point("aes-128-gcm", "accel", 0.0);
        first.samples = vec![sample(100, 1_000_000_000, 1_000_000_000); 2];
        let mut later = point("aes-128-gcm", "accel", 0.0);
        later.samples = vec![sample(400, 1_000_000_000, 500_000_000)];
        first.absorb(later, 1);
        assert_eq!(first.samples.len(), 3);
        assert_eq!(first.sample_rounds, [0, 0, 1]);
        // Median of 100, 100, 400 B/s; CPU over the sums: 2.5 s of 3 s.
        assert_eq!(first.throughput_bytes_per_sec.median, 100.0);
        assert_eq!(first.throughput_bytes_per_sec.max, 400.0);
        assert!((first.cpu_cores_used - 2.5 / 3.0).abs() < 1e-9);
        let mut third = point("aes-128-gcm", "accel", 0.0);
        third.samples = vec![sample(400, 1_000_000_000, 1_000_000_000); 2];
        first.absorb(third, 2);
        assert_eq!(first.sample_rounds, [0, 0, 1, 2, 2]);
        assert_eq!(first.throughput_bytes_per_sec.median, 400.0);
        // The rounds survive a round trip through run.json; a point of one round
        // writes none.
        let json = serde_json::to_string(&first).unwrap();
        let back: SpeedPoint = serde_json::from_str(&json).unwrap();
        assert_eq!(back.sample_rounds, first.sample_rounds);
        let one = point("aes-128-gcm", "accel", 1.0);
        assert!(!serde_json::to_string(&one)
            .unwrap()
            .contains("sample_rounds"));
    }

    #[test]
    fn controls_pair_accel_and_noaesni_of_the_same_library() {
        let mut r = SpeedResults {
            config: SpeedConfig {
                ciphers: vec!["des-ede3-cbc".into()],
                sizes_bytes: vec![16384],
                variants: vec![],
                threads: vec![1],
                directions: vec![Direction::Encrypt],
                warmup_ns: 0,
                sample_ns: 0,
                samples: 2,
                rounds: 1,
                public_key: Vec::new(),
            },
            variants: Vec::new(),
            points: vec![
                point("des-ede3-cbc", "accel", 100.0),
                point("des-ede3-cbc", "noaesni", 99.0),
                // A faster library, whose own noaesni moved its control: flagged
                // there, and never compared across libraries.
                point("des-ede3-cbc", "accel@3.6.3", 200.0),
                point("des-ede3-cbc", "noaesni@3.6.3", 150.0),
            ],
            unavailable: Vec::new(),
            controls: Vec::new(),
            openssl_checks: Vec::new(),
            async_points: Vec::new(),
            placement: None,
            pk_points: Vec::new(),
            pk_checks: Vec::new(),
            clock: None,
        };
        r.compute_controls(&["des-ede3-cbc"]);
        assert_eq!(r.controls.len(), 2);
        assert!(r.controls[0].held && r.controls[0].library.is_none());
        assert!(!r.controls[1].held);
        assert_eq!(r.controls[1].library.as_deref(), Some("3.6.3"));
        assert!((r.controls[1].ratio.value - 0.75).abs() < 1e-9);
    }

    #[test]
    fn an_openssl_check_written_before_the_mode_was_recorded_reads_as_wall_time() {
        let old = r#"{"cipher":"aes-128-gcm","variant":"accel","direction":"encrypt",
            "size_bytes":1024,"command":["openssl","speed","-elapsed"],
            "openssl_bytes_per_sec":1.0e9,"ours_bytes_per_sec":1.3e9,"ratio":1.3}"#;
        let c: OpensslCheck = serde_json::from_str(old).unwrap();
        assert_eq!((c.time_basis.as_str(), c.mode.as_str()), ("wall", ""));
    }

    #[test]
    fn a_sample_divides_by_cpu_time_as_well_as_by_wall_time() {
        let s = SpeedSample {
            ops: 10,
            bytes: 1_000_000,
            elapsed_ns: 2_000_000,
            cpu_ns: 1_000_000,
        };
        assert_eq!(s.throughput_bytes_per_sec(), 5e8);
        assert_eq!(s.bytes_per_cpu_sec(), 1e9);
    }
}
