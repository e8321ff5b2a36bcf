//! Flag values that several commands share: a direction, `--target-gbps`,
//! `--openssl`, durations, and first-seen de-duplication of lists.

use crate::library::{self, Library};
use anyhow::{anyhow, bail, Result};
use cipherbench_model::speed::Direction;
use clap::{Args, ValueEnum};
use std::time::Duration;

/// `--openssl`: the library under test, shared by every measuring command.
#[derive(Debug, Clone, Default, Args)]
pub struct LibraryArgs {
    /// The OpenSSL under test: `system` (the default), or the directory of an OpenSSL
    /// 3.x or 4.x build (its prefix, holding lib/libcrypto.so.3 and lib/libssl.so.3,
    /// or their .so.4, or that lib directory), put first on LD_LIBRARY_PATH of every
    /// part the variants apply to (under 4.x: the cipherbench and nginx built against
    /// it in its libexec/cipherbench/). A comma-separated list measures each, the first
    /// as the baseline; the others' variants are named accel@VERSION.
    #[arg(long, value_name = "DIR[,DIR...]")]
    pub openssl: Option<String>,
}

impl LibraryArgs {
    /// The libraries, resolved and checked (a directory by a child started under
    /// it): the system's alone when the flag is absent.
    pub fn libraries(&self) -> Result<Vec<Library>> {
        match &self.openssl {
            None => Ok(vec![Library::system()]),
            Some(text) => library::resolve_list(text),
        }
    }
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

/// Checks a `--target-gbps` value.
pub fn target_gbps(v: f64) -> Result<f64> {
    if !(v.is_finite() && v > 0.0 && v <= 1e6) {
        bail!("--target-gbps must be a positive number of Gbit/s (such as 10 or 2.5), not {v}");
    }
    Ok(v)
}

/// The values in first-seen order, each once (a flag may repeat a value).
pub fn dedup<T: PartialEq + Copy>(values: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for x in values {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

/// Parses `2s`, `500ms`, `2m`, `1.5s` or a plain number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration> {
    let t = text.trim();
    let (number, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix("min") {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, 1.0)
    };
    let value: f64 = number.trim().parse().map_err(|_| {
        anyhow!("bad duration '{t}': use a number with ms, s, m or h, such as 2s or 500ms")
    })?;
    if !value.is_finite() || value < 0.0 || value * scale > 86_400.0 {
        bail!("bad duration '{t}': between 0 and 24 h");
    }
    Ok(Duration::from_secs_f64(value * scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_durations() {
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}
