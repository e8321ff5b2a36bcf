//! Command-line arguments, and their resolution into plans. Raw flags are parsed
//! and checked here once; runners only ever see resolved plans.

use crate::speed::{self, SpeedPlan};
use anyhow::{bail, Result};
use cipherbench_model::speed::Direction;
use cipherbench_model::units::parse_size_list;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// cipherbench: what does hardware crypto acceleration buy, on this machine, for my
/// workload?
#[derive(Debug, Parser)]
#[command(name = "cipherbench", version, about, long_about = None)]
pub struct Cli {
    /// Print only results and notes, not progress.
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// CPU crypto features, hypervisor, OpenSSL build and capability vector, engines and
    /// providers, kernel crypto drivers, offload devices.
    Probe {
        /// Print JSON instead of the human report.
        #[arg(long)]
        json: bool,
    },
    /// Layer 1: cipher throughput by buffer size, with AES-NI available and masked.
    Speed(SpeedArgs),
    /// Layer 2: the time to encrypt a file through the disk, by tool and variant.
    File(crate::file::args::FileArgs),
    /// Encrypt a file (or stdin) into cipherbench's streaming format, in parallel.
    Seal(crate::file::args::SealArgs),
    /// Decrypt a sealed file; the output appears only if every chunk verified.
    Open(crate::file::args::OpenArgs),
    /// Layer 3: TLS web serving with a real nginx: the throughput sweep and the ramp.
    Tls(crate::tls::args::TlsArgs),
    /// The main job: probe and every layer, into a results directory with a report.
    Run(RunArgs),
    /// Re-render report.html and the CSV files of a results directory, without measuring.
    Report {
        /// A results directory (holding run.json).
        dir: PathBuf,
    },
    /// Two or more results directories side by side: environment differences, then
    /// per-layer ratios, with 3DES as the control that separates CPU speed from
    /// acceleration.
    Compare {
        /// Results directories; the first is the baseline.
        #[arg(required = true, num_args = 2..)]
        dirs: Vec<PathBuf>,
        /// Also write compare.md and compare.html into this directory.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Internal: the measuring child of `speed` (reads a request on stdin).
    #[command(name = "__speed-worker", hide = true)]
    SpeedWorker,
}

/// Where results go.
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Results directory (default: results/<timestamp>-<host>).
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,
    /// Measure and print, but write no results directory.
    #[arg(long, conflicts_with = "results")]
    pub no_save: bool,
}

/// `cipherbench speed`.
#[derive(Debug, Args)]
pub struct SpeedArgs {
    /// Ciphers, comma-separated (default: all seven).
    #[arg(long, value_name = "LIST")]
    pub cipher: Option<String>,
    /// Buffer sizes, comma-separated, such as 16,1KiB,16KiB (default: 16,64,256,1KiB,8KiB,16KiB).
    #[arg(long, value_name = "LIST")]
    pub sizes: Option<String>,
    /// Variants: accel, noaesni, or ia32cap:MASK (default: accel,noaesni).
    #[arg(long, value_name = "LIST", default_value = "accel,noaesni")]
    pub variants: String,
    /// Thread counts: numbers or 'all' (default: 1,all).
    #[arg(long, value_name = "LIST", default_value = "1,all")]
    pub threads: String,
    /// Directions (default: encrypt,decrypt).
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "encrypt,decrypt"
    )]
    pub direction: Vec<DirectionArg>,
    /// Samples per point.
    #[arg(long, default_value_t = 5)]
    pub samples: usize,
    /// Length of one sample, in milliseconds.
    #[arg(long, default_value_t = 100)]
    pub sample_ms: u64,
    /// Warm-up before the samples, in milliseconds.
    #[arg(long, default_value_t = 50)]
    pub warmup_ms: u64,
    /// Also run `openssl speed -evp` for the same single-thread points and show the ratio.
    #[arg(long)]
    pub check_openssl: bool,
    /// Print the results as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Where results go.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// A direction on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DirectionArg {
    /// Encryption.
    Encrypt,
    /// Decryption.
    Decrypt,
}

impl From<DirectionArg> for Direction {
    fn from(d: DirectionArg) -> Direction {
        match d {
            DirectionArg::Encrypt => Direction::Encrypt,
            DirectionArg::Decrypt => Direction::Decrypt,
        }
    }
}

/// The presets of `cipherbench run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// A few minutes: every layer, short windows.
    Quick,
    /// The seeds' methodology at full length.
    Full,
    /// Seconds: proves every layer works (CI and tests).
    Tiny,
}

impl Preset {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Quick => "quick",
            Preset::Full => "full",
            Preset::Tiny => "tiny",
        }
    }
}

/// `cipherbench run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// How thorough.
    #[arg(long, value_enum, default_value = "quick")]
    pub preset: Preset,
    /// Where results go.
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,
}

/// Number of online CPUs.
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

impl SpeedArgs {
    /// Resolves the flags into a plan, refusing bad input with one clear line.
    pub fn plan(&self) -> Result<SpeedPlan> {
        let ciphers = match &self.cipher {
            Some(list) => speed::parse_ciphers(list)?,
            None => cipherbench_crypto::catalogue::ALL.to_vec(),
        };
        let sizes: Vec<u64> = match &self.sizes {
            Some(list) => parse_size_list(list)
                .map_err(|e| anyhow::anyhow!("--sizes: {e}"))?
                .into_iter()
                .map(|s| s.bytes())
                .collect(),
            None => SpeedPlan::DEFAULT_SIZES.to_vec(),
        };
        if let Some(bad) = sizes.iter().find(|&&s| s == 0 || s > 64 * 1024 * 1024) {
            bail!("--sizes: {bad} bytes is out of range (1 byte to 64 MiB)");
        }
        if self.samples == 0 || self.samples > 1000 {
            bail!("--samples must be between 1 and 1000");
        }
        if self.sample_ms == 0 || self.sample_ms > 60_000 {
            bail!("--sample-ms must be between 1 and 60000");
        }
        let mut directions: Vec<Direction> = Vec::new();
        for d in &self.direction {
            let d = Direction::from(*d);
            if !directions.contains(&d) {
                directions.push(d);
            }
        }
        Ok(SpeedPlan {
            ciphers,
            sizes,
            variants: speed::parse_variants(&self.variants)?,
            threads: speed::parse_threads(&self.threads, cores())?,
            multi_thread_sizes: Vec::new(),
            directions,
            warmup: Duration::from_millis(self.warmup_ms.min(60_000)),
            sample: Duration::from_millis(self.sample_ms),
            samples: self.samples,
            check_openssl: self.check_openssl,
            check_seconds: 1,
        })
    }
}

/// The file (layer 2) plan of a preset: tiny proves it works in seconds; quick is
/// seed 001's 80 MiB file with the seed's tool, ours and `cp`; full is 1 GiB, every
/// tool, both directions.
pub fn preset_file_plan(preset: Preset) -> crate::file::bench::FilePlan {
    use crate::file::bench::{ColdChoice, FilePlan, InputSpec};
    use crate::file::tools::ToolId;
    use cipherbench_model::file::{Cache, SyncMode};
    use cipherbench_model::units::ByteSize;
    let variants = vec![speed::Variant::accel(), speed::Variant::noaesni()];
    let seeds_tools = vec![ToolId::Cp, ToolId::OpensslCbc, ToolId::Cipherbench];
    let (input, tools, caches, directions, repetitions) = match preset {
        Preset::Tiny => (
            2 * ByteSize::MIB,
            seeds_tools,
            vec![Cache::Warm],
            vec![Direction::Encrypt],
            2,
        ),
        Preset::Quick => (
            80 * ByteSize::MIB,
            seeds_tools,
            vec![Cache::Warm, Cache::Cold],
            vec![Direction::Encrypt],
            3,
        ),
        Preset::Full => (
            ByteSize::GIB,
            crate::file::tools::ToolId::ALL.to_vec(),
            vec![Cache::Warm, Cache::Cold],
            vec![Direction::Encrypt, Direction::Decrypt],
            5,
        ),
    };
    FilePlan {
        input: InputSpec::Generate(input),
        tools,
        variants,
        caches,
        syncs: vec![SyncMode::Fsync],
        directions,
        repetitions,
        cold_method: ColdChoice::Fadvise,
        scratch: None,
        threads: cores(),
    }
}

/// The speed plan of a preset.
pub fn preset_speed_plan(preset: Preset) -> SpeedPlan {
    let all = cipherbench_crypto::catalogue::ALL.to_vec();
    let both = vec![Direction::Encrypt, Direction::Decrypt];
    let variants = vec![speed::Variant::accel(), speed::Variant::noaesni()];
    match preset {
        Preset::Tiny => SpeedPlan {
            ciphers: vec![
                cipherbench_crypto::catalogue::CipherId::Aes128Gcm,
                cipherbench_crypto::catalogue::CipherId::Aes256Cbc,
                cipherbench_crypto::catalogue::CipherId::DesEde3Cbc,
            ],
            sizes: vec![256, 16384],
            variants,
            threads: vec![1],
            multi_thread_sizes: Vec::new(),
            directions: vec![Direction::Encrypt],
            warmup: Duration::from_millis(2),
            sample: Duration::from_millis(5),
            samples: 3,
            check_openssl: false,
            check_seconds: 1,
        },
        Preset::Quick => SpeedPlan {
            ciphers: all,
            sizes: SpeedPlan::DEFAULT_SIZES.to_vec(),
            variants,
            threads: if cores() > 1 {
                vec![1, cores()]
            } else {
                vec![1]
            },
            multi_thread_sizes: vec![16384],
            directions: both,
            warmup: Duration::from_millis(20),
            sample: Duration::from_millis(30),
            samples: 5,
            check_openssl: false,
            check_seconds: 1,
        },
        Preset::Full => SpeedPlan {
            ciphers: all,
            sizes: SpeedPlan::DEFAULT_SIZES.to_vec(),
            variants,
            threads: if cores() > 1 {
                vec![1, cores()]
            } else {
                vec![1]
            },
            multi_thread_sizes: Vec::new(),
            directions: both,
            warmup: Duration::from_millis(200),
            sample: Duration::from_millis(300),
            samples: 7,
            check_openssl: true,
            check_seconds: 3,
        },
    }
}
