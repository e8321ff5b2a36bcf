//! `cipherbench speed`: the flags, their resolution into a [`SpeedPlan`], and the
//! command.

use super::flags::{dedup, DirectionArg, LibraryArgs};
use super::output::{measure, summary, OutputArgs};
use crate::host::cores;
use crate::speed::SpeedPlan;
use crate::variant;
use anyhow::{anyhow, bail, Result};
use cipherbench_crypto::catalogue::{self, CipherId};
use cipherbench_crypto::pk::{self, PkAlgorithm};
use cipherbench_model::speed::Direction;
use cipherbench_model::units::parse_size_list;
use clap::Args;
use std::process::ExitCode;
use std::time::Duration;

/// `cipherbench speed`.
#[derive(Debug, Args)]
pub struct SpeedArgs {
    /// Ciphers, comma-separated (default: all seven, or none with --pk).
    #[arg(long, value_name = "LIST")]
    pub cipher: Option<String>,
    /// Public-key algorithms, comma-separated, or 'all' (alone: all the library has):
    /// ml-kem-512/768/1024, ml-dsa-44/65/87, x25519, p-256, rsa-2048, rsa-3072.
    #[arg(long, value_name = "LIST", num_args = 0..=1, default_missing_value = "all")]
    pub pk: Option<String>,
    /// Buffer sizes, comma-separated, such as 16,1KiB,16KiB (default: 16,64,256,1KiB,8KiB,16KiB).
    #[arg(long, value_name = "LIST")]
    pub sizes: Option<String>,
    /// Variants: accel, noaesni, noifma, noadx, nopkaccel, ia32cap:MASK, provider:CONF (an openssl.cnf loading a provider) or engine:ID (default: accel,noaesni; accel,nopkaccel with --pk alone; all three with both).
    #[arg(long, value_name = "LIST")]
    pub variants: Option<String>,
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
    /// Rounds the samples are split into, the variants of a cipher alternating from
    /// round to round (A B, B A, ...; at most one per sample) [default: 3, or
    /// --samples if fewer].
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Length of one sample, in milliseconds.
    #[arg(long, default_value_t = 100)]
    pub sample_ms: u64,
    /// Warm-up before the samples, in milliseconds.
    #[arg(long, default_value_t = 50)]
    pub warmup_ms: u64,
    /// Also run `openssl speed -evp` for the same single-thread points and show the ratio.
    #[arg(long)]
    pub check_openssl: bool,
    /// With --check-openssl and --pk: `openssl speed` runs per public-key algorithm
    /// and variant, each between two measurements of ours; the check is the median
    /// of the paired ratios (1 to 20; with 3, a drifting 2-vCPU VM left medians
    /// more than 10 % off that 5 brought within).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub check_rounds: u32,
    /// Also run `openssl speed -evp CIPHER -async_jobs N` for each N (comma-separated,
    /// 0 = synchronous, at most 1024), every variant, cipher and size, on one thread:
    /// for providers and engines that work asynchronously.
    #[arg(long, value_name = "N[,M...]")]
    pub async_jobs: Option<String>,
    /// Print the results as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The library under test.
    #[command(flatten)]
    pub library: LibraryArgs,
    /// Where results go.
    #[command(flatten)]
    pub output: OutputArgs,
}

impl SpeedArgs {
    /// Resolves the flags into a plan, refusing bad input with one clear line.
    pub fn plan(&self) -> Result<SpeedPlan> {
        let ciphers = match (&self.cipher, &self.pk) {
            (Some(list), _) => parse_ciphers(list)?,
            (None, Some(_)) => Vec::new(),
            (None, None) => cipherbench_crypto::catalogue::ALL.to_vec(),
        };
        let public_key = match &self.pk {
            Some(list) => parse_public_key(list)?,
            None => Vec::new(),
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
        let rounds = self.rounds.unwrap_or(self.samples.min(3));
        if rounds == 0 || rounds > self.samples {
            bail!(
                "--rounds must be between 1 and --samples ({}): each round takes at least one sample",
                self.samples
            );
        }
        if self.sample_ms == 0 || self.sample_ms > 60_000 {
            bail!("--sample-ms must be between 1 and 60000");
        }
        let directions = dedup(self.direction.iter().map(|&d| Direction::from(d)));
        let default_variants = match (ciphers.is_empty(), public_key.is_empty()) {
            (true, false) => "accel,nopkaccel",
            (false, false) => "accel,noaesni,nopkaccel",
            _ => "accel,noaesni",
        };
        let variants =
            variant::parse_variants(self.variants.as_deref().unwrap_or(default_variants))?;
        let threads = parse_threads(&self.threads, cores())?;
        // Last: resolving a library starts a child under it, and the preflight one
        // under each variant.
        let variants = variant::cross(&variants, &self.library.libraries()?)?;
        let explicit = self.pk.as_deref().is_some_and(|l| l.trim() != "all");
        let (public_key, pk_unavailable) = if public_key.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            crate::speed::pk::preflight(&public_key, &variants, explicit)?
        };
        Ok(SpeedPlan {
            ciphers,
            sizes,
            variants,
            threads,
            multi_thread_sizes: Vec::new(),
            directions,
            warmup: Duration::from_millis(self.warmup_ms.min(60_000)),
            sample: Duration::from_millis(self.sample_ms),
            samples: self.samples,
            rounds,
            check_openssl: self.check_openssl,
            async_jobs: match &self.async_jobs {
                Some(list) => parse_async_jobs(list)?,
                None => Vec::new(),
            },
            check_seconds: 1,
            check_rounds: self.check_rounds,
            public_key,
            pk_unavailable,
        })
    }
}

/// Parses `--async-jobs N[,M...]`: each 0 to 1024, each once, in the order given.
pub fn parse_async_jobs(text: &str) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    for part in text.split(',') {
        let n: u32 = part.trim().parse().map_err(|_| {
            anyhow::anyhow!(
                "--async-jobs: '{}' is not a number of async jobs (e.g. --async-jobs 0,8,64)",
                part.trim()
            )
        })?;
        if n > 1024 {
            bail!("--async-jobs: {n} is too many (at most 1024, as openssl speed's own limit is far above what pays)");
        }
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Ok(out)
}

/// Parses a comma-separated cipher list, refusing unknown names with the known ones.
pub fn parse_ciphers(text: &str) -> Result<Vec<CipherId>> {
    text.split(',')
        .map(|name| {
            CipherId::from_name(name).ok_or_else(|| {
                anyhow!(
                    "unknown cipher '{}': known ciphers are {}",
                    name.trim(),
                    catalogue::known_names()
                )
            })
        })
        .collect()
}

/// Parses `--pk`: `all`, or algorithm names (each once, in the order given),
/// refusing an unknown one with the known ones.
pub fn parse_public_key(text: &str) -> Result<Vec<PkAlgorithm>> {
    if text.trim() == "all" {
        return Ok(pk::ALL.to_vec());
    }
    let mut out = Vec::new();
    for name in text.split(',') {
        let a = PkAlgorithm::from_name(name).ok_or_else(|| {
            anyhow!(
                "--pk: unknown public-key algorithm '{}': known ones are {} (or all)",
                name.trim(),
                pk::known_names()
            )
        })?;
        if !out.contains(&a) {
            out.push(a);
        }
    }
    Ok(out)
}

/// Parses `1,2` or `all` (every online CPU).
pub fn parse_threads(text: &str, cores: usize) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for t in text.split(',') {
        let n = match t.trim() {
            "all" => cores,
            s => s
                .parse::<usize>()
                .ok()
                .filter(|&n| (1..=1024).contains(&n))
                .ok_or_else(|| anyhow!("bad thread count '{s}': use a number from 1 or 'all'"))?,
        };
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Ok(out)
}

/// `cipherbench speed`: resolves the plan, measures into a session, and prints the
/// table (or JSON).
pub fn command(args: &SpeedArgs, quiet: bool) -> Result<ExitCode> {
    let plan = args.plan()?;
    measure(
        &args.output,
        "custom",
        quiet,
        &variant::libraries_of(&plan.variants),
        false,
        |s| crate::speed::run(&plan, s),
        |s| {
            summary(
                args.json,
                s.record.speed.as_ref(),
                cipherbench_report::text::speed,
            )
        },
    )
}

#[cfg(test)]
mod tests {

    #[test]
    fn async_jobs_are_a_list_of_small_numbers_each_once() {
        assert_eq!(super::parse_async_jobs("0, 8,64,8").unwrap(), [0, 8, 64]);
        let err = super::parse_async_jobs("8,lots").unwrap_err().to_string();
        assert!(
            err.starts_with("--async-jobs: 'lots' is not a number"),
            "{err}"
        );
        assert!(super::parse_async_jobs("2048").is_err());
    }

    use super::*;

    #[test]
    fn refuses_unknown_ciphers_listing_the_known_ones() {
        let err = parse_ciphers("aes-128-gcm,rc4").unwrap_err().to_string();
        assert!(
            err.contains("'rc4'") && err.contains("chacha20-poly1305"),
            "{err}"
        );
        assert_eq!(
            parse_ciphers("AES-128-GCM").unwrap(),
            vec![CipherId::Aes128Gcm]
        );
    }

    #[test]
    fn public_key_lists_are_names_or_all() {
        assert_eq!(
            parse_public_key("ML-KEM-768, x25519,mlkem768").unwrap(),
            [PkAlgorithm::MlKem768, PkAlgorithm::X25519]
        );
        assert_eq!(parse_public_key("all").unwrap().len(), pk::ALL.len());
        let err = parse_public_key("x25519,rsa-1024").unwrap_err().to_string();
        assert!(
            err.starts_with("--pk: unknown public-key algorithm 'rsa-1024'")
                && err.contains("ml-dsa-65"),
            "{err}"
        );
    }

    #[test]
    fn parses_thread_counts() {
        assert_eq!(parse_threads("1,all", 4).unwrap(), vec![1, 4]);
        assert_eq!(parse_threads("2,2", 4).unwrap(), vec![2]);
        assert!(parse_threads("0", 4).is_err());
        assert!(parse_threads("many", 4).is_err());
    }
}
