//! Layer 2 results: the time to encrypt (and decrypt) one file through the file
//! system, by tool, acceleration variant, page-cache state and durability, with
//! where the time went (user and system CPU, peak memory) and a check that each
//! tool's output decrypts to the input.

use crate::speed::{Direction, VariantRecord};
use crate::stats::Summary;
use serde::{Deserialize, Serialize};

/// Page cache state of the input when a tool starts.
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
pub enum Cache {
    /// The input is in the page cache.
    Warm,
    /// The input was evicted from the page cache just before the run.
    Cold,
}

impl Cache {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Cache::Warm => "warm",
            Cache::Cold => "cold",
        }
    }
}

/// Whether the timing includes making the output durable.
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
pub enum SyncMode {
    /// Time until the output file (and its directory entry) is fsynced.
    Fsync,
    /// Time until the tool exits; the output may still be in the page cache.
    None,
}

impl SyncMode {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncMode::Fsync => "fsync",
            SyncMode::None => "none",
        }
    }
}

/// How a cold cache was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ColdMethod {
    /// `posix_fadvise(POSIX_FADV_DONTNEED)` on the input after a `syncfs`: evicts that
    /// file only; needs no privilege and leaves other users' caches alone.
    FadviseDontneed,
    /// `echo 1 > /proc/sys/vm/drop_caches` after `sync` (root): evicts the whole page
    /// cache, the tools' own binaries and libraries included.
    DropCaches,
}

impl ColdMethod {
    /// Name as in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ColdMethod::FadviseDontneed => "fadvise-dontneed",
            ColdMethod::DropCaches => "drop-caches",
        }
    }
}

/// The file that was encrypted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileInput {
    /// The user's file (`--input`), or None for a generated one.
    pub path: Option<String>,
    /// Generated incompressible (random) data.
    pub generated: bool,
    /// Size in bytes.
    pub size_bytes: u64,
    /// SHA-256 of the contents, lower-case hex.
    pub sha256: String,
}

/// The file system a path lives on (from /proc/self/mountinfo).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Filesystem {
    /// Mount point.
    pub mount_point: String,
    /// Device or source (`/dev/vda`).
    pub source: String,
    /// Type (`ext4`, `xfs`, `tmpfs`).
    pub fs_type: String,
}

/// What `cipherbench file` was asked to measure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileConfig {
    /// The input.
    pub input: FileInput,
    /// Where the outputs were written.
    pub scratch_dir: String,
    /// The scratch directory's file system.
    pub scratch_filesystem: Option<Filesystem>,
    /// The input's file system (the same as the scratch one for a generated input).
    pub input_filesystem: Option<Filesystem>,
    /// Tools asked for (some may have been unavailable).
    pub tools: Vec<String>,
    /// Variants asked for.
    pub variants: Vec<String>,
    /// Cache states.
    pub caches: Vec<Cache>,
    /// Durability modes.
    pub syncs: Vec<SyncMode>,
    /// Directions.
    pub directions: Vec<Direction>,
    /// Repetitions per point.
    pub repetitions: usize,
    /// How cold caches were made.
    pub cold_method: ColdMethod,
    /// Threads `cipherbench seal`/`open` used.
    pub cipherbench_threads: usize,
}

/// A tool, whether it could run here, and what it encrypts with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolStatus {
    /// Tool id (`openssl-aes-256-cbc`, `age`, `cipherbench`, ...).
    pub tool: String,
    /// Its version line, if installed.
    pub version: Option<String>,
    /// The cipher and library doing the work (`AES-256-GCM, OpenSSL libcrypto`).
    pub crypto: String,
    /// Whether `OPENSSL_ia32cap` reaches its crypto (so that `noaesni` applies).
    pub variants_apply: bool,
    /// Why it was not measured, or stopped being measured, if so.
    pub unavailable: Option<String>,
}

/// One timed run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileSample {
    /// From just before the tool started to its exit, or (with `fsync`) to the
    /// output and its directory being fsynced.
    pub elapsed_ns: u64,
    /// The tool's user-mode CPU time.
    pub user_ns: u64,
    /// The tool's kernel-mode CPU time.
    pub system_ns: u64,
    /// The tool's peak resident set size.
    pub max_rss_bytes: u64,
    /// Bytes of the input in the page cache when the tool started.
    pub input_resident_bytes: Option<u64>,
}

/// One measured point: a tool, variant, direction, cache state and durability mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FilePoint {
    /// Tool id.
    pub tool: String,
    /// Variant (`accel`, `noaesni`).
    pub variant: String,
    /// Encrypt or decrypt.
    pub direction: Direction,
    /// Input cache state.
    pub cache: Cache,
    /// Durability mode.
    pub sync: SyncMode,
    /// The command, as run (paths are the scratch directory's).
    pub command: Vec<String>,
    /// Plaintext bytes (the input's size: throughput counts the file, not overhead).
    pub bytes: u64,
    /// Raw samples.
    pub samples: Vec<FileSample>,
    /// Seconds per run.
    pub elapsed_seconds: Summary,
    /// Plaintext bytes per second.
    pub throughput_bytes_per_sec: Summary,
    /// User CPU seconds per run.
    pub user_seconds: Summary,
    /// System CPU seconds per run.
    pub system_seconds: Summary,
    /// The largest peak RSS over the samples.
    pub max_rss_bytes: u64,
    /// How quiet the machine was during the noisiest of the point's samples (the
    /// tool is not pinned: on every CPU cipherbench may use)
    /// (None: not recorded, as by an older cipherbench).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<Box<crate::noise::Noise>>,
}

impl FilePoint {
    /// Builds the summaries from the samples; None if there are none.
    #[allow(clippy::too_many_arguments)]
    pub fn from_samples(
        tool: &str,
        variant: &str,
        direction: Direction,
        cache: Cache,
        sync: SyncMode,
        command: Vec<String>,
        bytes: u64,
        samples: Vec<FileSample>,
    ) -> Option<FilePoint> {
        let seconds = |ns: u64| ns as f64 / 1e9;
        let elapsed: Vec<f64> = samples.iter().map(|s| seconds(s.elapsed_ns)).collect();
        let rate: Vec<f64> = samples
            .iter()
            .map(|s| {
                if s.elapsed_ns == 0 {
                    0.0
                } else {
                    bytes as f64 * 1e9 / s.elapsed_ns as f64
                }
            })
            .collect();
        let user: Vec<f64> = samples.iter().map(|s| seconds(s.user_ns)).collect();
        let system: Vec<f64> = samples.iter().map(|s| seconds(s.system_ns)).collect();
        Some(FilePoint {
            tool: tool.to_string(),
            variant: variant.to_string(),
            direction,
            cache,
            sync,
            command,
            bytes,
            elapsed_seconds: Summary::of(&elapsed)?,
            throughput_bytes_per_sec: Summary::of(&rate)?,
            user_seconds: Summary::of(&user)?,
            system_seconds: Summary::of(&system)?,
            max_rss_bytes: samples.iter().map(|s| s.max_rss_bytes).max().unwrap_or(0),
            samples,
            noise: None,
        })
    }

    /// What the noise judge says of the point's samples.
    pub fn noise_findings(&self) -> Vec<crate::noise::Finding> {
        crate::noise::findings_of(self.noise.as_deref())
    }
}

/// A tool's output decrypted (or, for decryption, its output hashed) and compared
/// with the input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RoundTripCheck {
    /// Tool id.
    pub tool: String,
    /// Variant of the run whose output was checked.
    pub variant: String,
    /// Which direction's output was checked.
    pub direction: Direction,
    /// SHA-256 of the recovered plaintext.
    pub sha256: String,
    /// It equals the input's.
    pub matches: bool,
}

/// Everything layer 2 produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileResults {
    /// What was asked.
    pub config: FileConfig,
    /// Tools and their availability.
    pub tools: Vec<ToolStatus>,
    /// Variants as the OpenSSL command line reported them.
    pub variants: Vec<VariantRecord>,
    /// Measured points.
    pub points: Vec<FilePoint>,
    /// Round-trip checks.
    pub checks: Vec<RoundTripCheck>,
}

impl FileResults {
    /// The point for a key, if measured.
    pub fn point(
        &self,
        tool: &str,
        variant: &str,
        direction: Direction,
        cache: Cache,
        sync: SyncMode,
    ) -> Option<&FilePoint> {
        self.points.iter().find(|p| {
            p.tool == tool
                && p.variant == variant
                && p.direction == direction
                && p.cache == cache
                && p.sync == sync
        })
    }

    /// Whether a tool's output was checked and every check matched.
    pub fn verified(&self, tool: &str) -> bool {
        let mut checks = self.checks.iter().filter(|c| c.tool == tool).peekable();
        checks.peek().is_some() && checks.all(|c| c.matches)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(ms: u64) -> FileSample {
        FileSample {
            elapsed_ns: ms * 1_000_000,
            user_ns: ms * 500_000,
            system_ns: ms * 250_000,
            max_rss_bytes: ms * 1000,
            input_resident_bytes: Some(0),
        }
    }

    #[test]
    fn summarises_samples_into_time_rate_and_cpu() {
        let p = FilePoint::from_samples(
            "cp",
            "accel",
            Direction::Encrypt,
            Cache::Warm,
            SyncMode::Fsync,
            vec!["cp".into()],
            1_000_000_000,
            vec![sample(500), sample(1000), sample(2000)],
        )
        .unwrap();
        assert_eq!(p.elapsed_seconds.median, 1.0);
        assert_eq!(p.throughput_bytes_per_sec.median, 1e9);
        assert_eq!(p.user_seconds.median, 0.5);
        assert_eq!(p.system_seconds.median, 0.25);
        assert_eq!(p.max_rss_bytes, 2_000_000);
        assert!(FilePoint::from_samples(
            "cp",
            "accel",
            Direction::Encrypt,
            Cache::Warm,
            SyncMode::Fsync,
            vec![],
            1,
            vec![]
        )
        .is_none());
    }

    #[test]
    fn enums_serialise_as_their_names() {
        assert_eq!(serde_json::to_string(&Cache::Cold).unwrap(), "\"cold\"");
        assert_eq!(serde_json::to_string(&SyncMode::None).unwrap(), "\"none\"");
        assert_eq!(
            serde_json::to_string(&ColdMethod::FadviseDontneed).unwrap(),
            "\"fadvise-dontneed\""
        );
    }
}
