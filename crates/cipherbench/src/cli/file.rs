//! `cipherbench seal`, `open` and `file`: the flags, their resolution into options
//! and plans (checked once, here; runners never see raw flags), and the commands.

use super::flags::{dedup, DirectionArg, LibraryArgs};
use super::output::{measure, summary, OutputArgs};
use crate::file::bench::{self, ColdChoice, FilePlan, InputSpec};
use crate::file::keys::{self, SecretSource};
use crate::file::seal::{self, Endpoint, OpenOptions, SealOptions};
use crate::file::tools::ToolId;
use crate::host::cores;
use crate::interrupt;
use crate::variant;

use anyhow::{anyhow, bail, Result};
use cipherbench_model::file::{Cache, SyncMode};
use cipherbench_model::speed::Direction;
use cipherbench_model::units::ByteSize;
use cipherbench_stream::header::{
    scrypt_acceptable, DEFAULT_SCRYPT, MAX_CHUNK_LOG2, MIN_CHUNK_LOG2,
};
use cipherbench_stream::Algorithm;
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;

/// How the key is given (exactly one; never the key itself).
#[derive(Debug, Args)]
#[group(required = false, multiple = false)]
pub struct SecretArgs {
    /// A 32-byte key file (make one with `cipherbench seal --gen-key FILE`).
    #[arg(short = 'k', long = "key-file", value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// A file holding the passphrase (one trailing newline is ignored); it must not
    /// be readable by group or others.
    #[arg(long, value_name = "FILE")]
    pub passphrase_file: Option<PathBuf>,
    /// Ask for a passphrase on the terminal.
    #[arg(short = 'p', long)]
    pub passphrase: bool,
}

impl SecretArgs {
    fn source(&self) -> Result<SecretSource> {
        match (&self.key_file, &self.passphrase_file, self.passphrase) {
            (Some(k), None, false) => Ok(SecretSource::KeyFile(k.clone())),
            (None, Some(p), false) => Ok(SecretSource::PassphraseFile(p.clone())),
            (None, None, true) => Ok(SecretSource::Prompt),
            _ => bail!("give one of --key-file FILE, --passphrase-file FILE or --passphrase"),
        }
    }
}

/// `cipherbench seal`.
#[derive(Debug, Args)]
pub struct SealArgs {
    /// Create a new 32-byte key file (mode 0600) and exit.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["input", "output"])]
    pub gen_key: Option<PathBuf>,
    /// The key or passphrase.
    #[command(flatten)]
    pub secret: SecretArgs,
    /// Chunk cipher: aes-256-gcm or chacha20-poly1305.
    #[arg(long, default_value = "aes-256-gcm")]
    pub cipher: String,
    /// Chunk size, a power of two from 256 B to 4 MiB.
    #[arg(long, default_value = "64KiB")]
    pub chunk_size: String,
    /// scrypt cost (log2 N) for a passphrase; r = 8, p = 3.
    #[arg(long, default_value_t = DEFAULT_SCRYPT.log_n)]
    pub scrypt_log_n: u8,
    /// Worker threads (default: every core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Replace an existing output file.
    #[arg(long)]
    pub force: bool,
    /// Do not fsync the output (faster; the file may be lost in a crash).
    #[arg(long)]
    pub no_fsync: bool,
    /// The file to seal, or - for stdin.
    pub input: Option<PathBuf>,
    /// The sealed file to write, or - for stdout.
    pub output: Option<PathBuf>,
}

/// What `seal` was asked to do.
#[derive(Debug)]
pub enum SealCommand {
    /// Make a key file.
    GenKey(PathBuf),
    /// Seal.
    Seal(SealOptions),
}

fn threads(t: Option<usize>) -> Result<usize> {
    match t {
        None => Ok(cores()),
        Some(n) if (1..=64).contains(&n) => Ok(n),
        Some(n) => bail!("--threads {n}: use 1 to 64"),
    }
}

fn endpoints(input: &Option<PathBuf>, output: &Option<PathBuf>) -> Result<(Endpoint, Endpoint)> {
    match (input, output) {
        (Some(i), Some(o)) => Ok((Endpoint::parse(i), Endpoint::parse(o))),
        _ => bail!("give an input and an output (- for stdin or stdout)"),
    }
}

impl SealArgs {
    /// Resolves the flags.
    pub fn plan(&self) -> Result<SealCommand> {
        if let Some(path) = &self.gen_key {
            if self.secret.key_file.is_some()
                || self.secret.passphrase_file.is_some()
                || self.secret.passphrase
            {
                bail!("--gen-key makes a new key file; it takes no other key");
            }
            return Ok(SealCommand::GenKey(path.clone()));
        }
        let algorithm = Algorithm::from_name(&self.cipher).ok_or_else(|| {
            anyhow!(
                "unknown cipher '{}': use aes-256-gcm or chacha20-poly1305",
                self.cipher
            )
        })?;
        let size: ByteSize = self
            .chunk_size
            .parse()
            .map_err(|e| anyhow!("--chunk-size: {e}"))?;
        let bytes = size.bytes();
        let log2 = bytes.trailing_zeros() as u8;
        if !bytes.is_power_of_two() || !(MIN_CHUNK_LOG2..=MAX_CHUNK_LOG2).contains(&log2) {
            bail!("--chunk-size {size}: use a power of two from 256 B to 4 MiB");
        }
        let scrypt = cipherbench_crypto::kdf::ScryptParams {
            log_n: self.scrypt_log_n,
            ..DEFAULT_SCRYPT
        };
        if !scrypt_acceptable(scrypt) {
            bail!("--scrypt-log-n {}: use 10 to 16", self.scrypt_log_n);
        }
        let (input, output) = endpoints(&self.input, &self.output)?;
        Ok(SealCommand::Seal(SealOptions {
            input,
            output,
            secret: self.secret.source()?,
            algorithm,
            chunk_log2: log2,
            scrypt,
            threads: threads(self.threads)?,
            force: self.force,
            fsync: !self.no_fsync,
        }))
    }
}

/// `cipherbench open`.
#[derive(Debug, Args)]
pub struct OpenArgs {
    /// The key or passphrase.
    #[command(flatten)]
    pub secret: SecretArgs,
    /// Worker threads (default: every core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Replace an existing output file.
    #[arg(long)]
    pub force: bool,
    /// Do not fsync the output.
    #[arg(long)]
    pub no_fsync: bool,
    /// The sealed file, or - for stdin.
    pub input: PathBuf,
    /// The plaintext file to write (only once every chunk verified), or - for stdout
    /// (each chunk written once verified; check the exit status).
    pub output: PathBuf,
}

impl OpenArgs {
    /// Resolves the flags.
    pub fn plan(&self) -> Result<OpenOptions> {
        let (input, output) = endpoints(&Some(self.input.clone()), &Some(self.output.clone()))?;
        Ok(OpenOptions {
            input,
            output,
            secret: self.secret.source()?,
            threads: threads(self.threads)?,
            force: self.force,
            fsync: !self.no_fsync,
        })
    }
}

/// Cache states on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CacheArg {
    /// Input in the page cache.
    Warm,
    /// Input evicted first.
    Cold,
}

/// Durability modes on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SyncArg {
    /// Until the output is fsynced.
    Fsync,
    /// Until the tool exits.
    None,
}

/// How to make the cache cold, on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColdMethodArg {
    /// `posix_fadvise(DONTNEED)` on the input: any user, this file only.
    Fadvise,
    /// `/proc/sys/vm/drop_caches`: root, the whole page cache.
    DropCaches,
}

/// `cipherbench file`.
#[derive(Debug, Args)]
pub struct FileArgs {
    /// Encrypt this file instead of a generated one.
    #[arg(long, value_name = "PATH", conflicts_with = "size")]
    pub input: Option<PathBuf>,
    /// Size of the generated incompressible input.
    #[arg(long, default_value = "80MiB")]
    pub size: String,
    /// Tools, comma-separated: cp, openssl-aes-256-cbc, openssl-aes-256-ctr, age, gpg,
    /// cipherbench, cipherbench-chacha20 (missing ones are skipped with a note).
    #[arg(
        long,
        value_name = "LIST",
        default_value = "cp,openssl-aes-256-cbc,openssl-aes-256-ctr,age,gpg,cipherbench"
    )]
    pub tools: String,
    /// Variants for tools whose crypto is OpenSSL's: accel, noaesni, ia32cap:MASK, provider:CONF or engine:ID.
    #[arg(long, value_name = "LIST", default_value = "accel,noaesni")]
    pub variants: String,
    /// Page cache states of the input.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "warm,cold"
    )]
    pub cache: Vec<CacheArg>,
    /// Durability: fsync (time to the output on disk) and/or none (time to exit).
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "fsync"
    )]
    pub sync: Vec<SyncArg>,
    /// Directions.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "encrypt"
    )]
    pub direction: Vec<DirectionArg>,
    /// Timed runs per point.
    #[arg(long, default_value_t = 3)]
    pub repetitions: usize,
    /// How to make the cache cold: fadvise (evict the input only; any user) or
    /// drop-caches (the whole page cache; root).
    #[arg(long, value_enum, default_value = "fadvise")]
    pub cold_method: ColdMethodArg,
    /// Directory for the outputs (default: inside the results directory, or the
    /// system's temporary directory with --no-save). Removed afterwards.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Threads for cipherbench seal/open (default: every core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Print the results as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The library under test (for the tools whose crypto is OpenSSL's).
    #[command(flatten)]
    pub library: LibraryArgs,
    /// Where results go.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Parses a comma-separated tool list.
pub fn parse_tools(text: &str) -> Result<Vec<ToolId>> {
    let mut out = Vec::new();
    for name in text.split(',') {
        let t = ToolId::from_name(name).ok_or_else(|| {
            anyhow!(
                "unknown tool '{}': known tools are {}",
                name.trim(),
                ToolId::ALL
                    .iter()
                    .map(|t| t.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        if !out.contains(&t) {
            out.push(t);
        }
    }
    Ok(out)
}

impl FileArgs {
    /// Resolves the flags into a plan.
    pub fn plan(&self) -> Result<FilePlan> {
        let input = match &self.input {
            Some(p) => {
                let meta =
                    std::fs::metadata(p).map_err(|e| anyhow!("--input {}: {e}", p.display()))?;
                if !meta.is_file() {
                    bail!("--input {}: not a regular file", p.display());
                }
                InputSpec::Path(p.clone())
            }
            None => {
                let size: ByteSize = self.size.parse().map_err(|e| anyhow!("--size: {e}"))?;
                if size.bytes() == 0 || size.bytes() > 64 * ByteSize::GIB {
                    bail!("--size {size}: use 1 byte to 64 GiB");
                }
                InputSpec::Generate(size.bytes())
            }
        };
        if self.repetitions == 0 || self.repetitions > 100 {
            bail!("--repetitions must be between 1 and 100");
        }
        if self.cache.contains(&CacheArg::Cold)
            && self.cold_method == ColdMethodArg::DropCaches
            && !crate::file::sys::can_drop_caches()
        {
            bail!("--cold-method drop-caches needs root (writing /proc/sys/vm/drop_caches); use --cold-method fadvise");
        }
        let tools = parse_tools(&self.tools)?;
        let variants = variant::parse_variants(&self.variants)?;
        let thread_count = threads(self.threads)?;
        Ok(FilePlan {
            input,
            tools,
            // Last: resolving a library starts a child under it.
            variants: variant::cross(&variants, &self.library.libraries()?)?,
            caches: dedup(self.cache.iter().map(|c| match c {
                CacheArg::Warm => Cache::Warm,
                CacheArg::Cold => Cache::Cold,
            })),
            syncs: dedup(self.sync.iter().map(|s| match s {
                SyncArg::Fsync => SyncMode::Fsync,
                SyncArg::None => SyncMode::None,
            })),
            directions: dedup(self.direction.iter().map(|d| Direction::from(*d))),
            repetitions: self.repetitions,
            cold_method: match self.cold_method {
                ColdMethodArg::Fadvise => ColdChoice::Fadvise,
                ColdMethodArg::DropCaches => ColdChoice::DropCaches,
            },
            scratch: self.dir.clone(),
            threads: thread_count,
        })
    }
}

/// `cipherbench seal`: silent on success, like `cp`.
pub fn seal(args: &SealArgs) -> Result<ExitCode> {
    match args.plan()? {
        SealCommand::GenKey(path) => keys::generate_key_file(&path)?,
        SealCommand::Seal(options) => {
            interrupt::install_interrupting();
            seal::seal(&options)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `cipherbench open`.
pub fn open(args: &OpenArgs) -> Result<ExitCode> {
    let options = args.plan()?;
    interrupt::install_interrupting();
    seal::open(&options)?;
    Ok(ExitCode::SUCCESS)
}

/// `cipherbench file`: resolves the plan, measures into a session, and prints the
/// summary.
pub fn command(args: &FileArgs, quiet: bool) -> Result<ExitCode> {
    let plan = args.plan()?;
    measure(
        &args.output,
        "custom",
        quiet,
        &variant::libraries_of(&plan.variants),
        false,
        |s| bench::run(&plan, s),
        |s| {
            summary(
                args.json,
                s.record.file.as_ref(),
                cipherbench_report::file::text,
            )
        },
    )
}
