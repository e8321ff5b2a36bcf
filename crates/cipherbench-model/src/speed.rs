//! Layer 1 results: cipher throughput by buffer size, per acceleration variant.

use crate::stats::{Ratio, Summary};
use serde::{Deserialize, Serialize};

/// Encrypt or decrypt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
}

/// How an acceleration variant was set up, and whether it took effect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantRecord {
    /// `accel` or `noaesni`.
    pub name: String,
    /// `OPENSSL_ia32cap` given to the child process (None: unset).
    pub ia32cap_env: Option<String>,
    /// The vector the child's OpenSSL reported using.
    pub cpu_settings: String,
    /// Effective AES-NI bit.
    pub aesni: bool,
    /// Effective PCLMULQDQ bit.
    pub pclmulqdq: bool,
    /// The effective vector is what the variant intends (AES-NI and PCLMULQDQ off for
    /// `noaesni`, the detected vector otherwise).
    pub took_effect: bool,
}

/// One raw sample: what one run of the loop did, summed over threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
}

/// One measured point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
}

/// A cipher that could not run in a variant, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unavailable {
    /// Cipher name.
    pub cipher: String,
    /// Variant name.
    pub variant: String,
    /// What the library said.
    pub reason: String,
}

/// A control cipher (one AES-NI does not touch) compared between variants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpensslCheck {
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
    /// What openssl reported, bytes per second.
    pub openssl_bytes_per_sec: f64,
    /// Our median for the same point, bytes per second.
    pub ours_bytes_per_sec: f64,
    /// ours / openssl.
    pub ratio: f64,
}

/// Everything layer 1 produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
        }
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
        };
        r.compute_controls(&["des-ede3-cbc"]);
        assert_eq!(r.controls.len(), 2);
        assert!(r.controls[0].held && r.controls[0].library.is_none());
        assert!(!r.controls[1].held);
        assert_eq!(r.controls[1].library.as_deref(), Some("3.6.3"));
        assert!((r.controls[1].ratio.value - 0.75).abs() < 1e-9);
    }
}
