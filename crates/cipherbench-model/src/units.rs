//! Units as types: byte sizes that parse and print without ambiguity, and the
//! formatting of rates.
//!
//! Binary prefixes (KiB, MiB, GiB) mean powers of 1024; decimal ones (kB, MB, GB)
//! powers of 1000. A bare `K` or `M` is refused rather than guessed. Throughput of a
//! cipher is printed in decimal bytes per second (GB/s, as `openssl speed` counts),
//! network rates in bits per second (Gbit/s).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A number of bytes.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct ByteSize(pub u64);

/// Why a size did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseSizeError {
    /// The text was empty.
    #[error("empty size")]
    Empty,
    /// The number part is not a non-negative integer or decimal.
    #[error("'{0}' is not a size: expected a number with an optional unit, like 16, 1KiB or 4MiB")]
    NotANumber(String),
    /// The unit is not one we know, or is ambiguous.
    #[error("'{text}': unknown unit '{unit}' (use B, KiB, MiB, GiB for powers of 1024, or kB, MB, GB for powers of 1000)")]
    UnknownUnit {
        /// The whole input.
        text: String,
        /// The unit as written.
        unit: String,
    },
    /// The result does not fit in 64 bits or is not a whole number of bytes.
    #[error("'{0}' is not a whole number of bytes that fits in 64 bits")]
    OutOfRange(String),
}

impl ByteSize {
    /// One kibibyte.
    pub const KIB: u64 = 1024;
    /// One mebibyte.
    pub const MIB: u64 = 1024 * 1024;
    /// One gibibyte.
    pub const GIB: u64 = 1024 * 1024 * 1024;

    /// The size in bytes.
    pub fn bytes(self) -> u64 {
        self.0
    }
}

impl FromStr for ByteSize {
    type Err = ParseSizeError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(ParseSizeError::Empty);
        }
        let split = trimmed
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(trimmed.len());
        let (number, unit) = trimmed.split_at(split);
        let unit = unit.trim();
        if number.is_empty() {
            return Err(ParseSizeError::NotANumber(text.to_string()));
        }
        let multiplier: u64 = match unit {
            "" | "B" | "b" => 1,
            "KiB" | "kiB" | "Ki" => ByteSize::KIB,
            "MiB" | "Mi" => ByteSize::MIB,
            "GiB" | "Gi" => ByteSize::GIB,
            "kB" | "KB" => 1000,
            "MB" => 1_000_000,
            "GB" => 1_000_000_000,
            _ => {
                return Err(ParseSizeError::UnknownUnit {
                    text: text.to_string(),
                    unit: unit.to_string(),
                })
            }
        };
        if number.is_empty() || number.matches('.').count() > 1 {
            return Err(ParseSizeError::NotANumber(text.to_string()));
        }
        let value = if let Some((whole, frac)) = number.split_once('.') {
            // Decimal input ("1.5MiB"): exact arithmetic on the digits, no float rounding.
            let scale = 10u64
                .checked_pow(frac.len() as u32)
                .ok_or_else(|| ParseSizeError::OutOfRange(text.to_string()))?;
            let digits: u64 = format!("{whole}{frac}")
                .parse()
                .map_err(|_| ParseSizeError::NotANumber(text.to_string()))?;
            let scaled = u128::from(digits) * u128::from(multiplier);
            if scaled % u128::from(scale) != 0 {
                return Err(ParseSizeError::OutOfRange(text.to_string()));
            }
            u64::try_from(scaled / u128::from(scale))
                .map_err(|_| ParseSizeError::OutOfRange(text.to_string()))?
        } else {
            let n: u64 = number
                .parse()
                .map_err(|_| ParseSizeError::OutOfRange(text.to_string()))?;
            n.checked_mul(multiplier)
                .ok_or_else(|| ParseSizeError::OutOfRange(text.to_string()))?
        };
        Ok(ByteSize(value))
    }
}

impl fmt::Display for ByteSize {
    /// The shortest exact binary form: `16 B`, `1 KiB`, `16 KiB`, `1.5 MiB` where exact,
    /// otherwise bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        for (unit, size) in [
            ("GiB", ByteSize::GIB),
            ("MiB", ByteSize::MIB),
            ("KiB", ByteSize::KIB),
        ] {
            if n >= size {
                let (whole, rest) = (n / size, n % size);
                if rest == 0 {
                    return write!(f, "{whole} {unit}");
                }
                // Integers only: `n * 10` overflows above 1.8e18, and an f64 holds 53
                // bits, so either would print a size that parses back to another.
                if (rest * 10).is_multiple_of(size) {
                    return write!(f, "{whole}.{} {unit}", rest * 10 / size);
                }
            }
        }
        write!(f, "{n} B")
    }
}

/// Parses a comma-separated list of sizes, such as `16,1KiB,16KiB`.
pub fn parse_size_list(text: &str) -> Result<Vec<ByteSize>, ParseSizeError> {
    text.split(',').map(str::parse).collect()
}

/// Formats a throughput in bytes per second with decimal prefixes: `4.02 GB/s`.
pub fn format_bytes_per_sec(rate: f64) -> String {
    scaled(rate, "B/s")
}

/// Formats a throughput in bytes per second as a network rate: `8.10 Gbit/s`.
pub fn format_bits_per_sec(bytes_per_sec: f64) -> String {
    scaled(bytes_per_sec * 8.0, "bit/s")
}

fn scaled(value: f64, unit: &str) -> String {
    let (div, prefix) = if value >= 1e9 {
        (1e9, "G")
    } else if value >= 1e6 {
        (1e6, "M")
    } else if value >= 1e3 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    let v = value / div;
    let precision = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.precision$} {prefix}{unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_binary_and_decimal_units() {
        assert_eq!("16".parse::<ByteSize>().unwrap().0, 16);
        assert_eq!("1KiB".parse::<ByteSize>().unwrap().0, 1024);
        assert_eq!("16 KiB".parse::<ByteSize>().unwrap().0, 16384);
        assert_eq!("4MiB".parse::<ByteSize>().unwrap().0, 4 << 20);
        assert_eq!("1GiB".parse::<ByteSize>().unwrap().0, 1 << 30);
        assert_eq!("50kB".parse::<ByteSize>().unwrap().0, 50_000);
        assert_eq!("1.5MiB".parse::<ByteSize>().unwrap().0, 3 << 19);
        assert_eq!("0".parse::<ByteSize>().unwrap().0, 0);
    }

    #[test]
    fn refuses_ambiguous_or_malformed_sizes() {
        assert!(matches!(
            "1K".parse::<ByteSize>(),
            Err(ParseSizeError::UnknownUnit { .. })
        ));
        assert!(matches!(
            "abc".parse::<ByteSize>(),
            Err(ParseSizeError::NotANumber(_))
        ));
        assert!(matches!(
            "-5".parse::<ByteSize>(),
            Err(ParseSizeError::NotANumber(_))
        ));
        assert_eq!("".parse::<ByteSize>(), Err(ParseSizeError::Empty));
        assert!(matches!(
            "1.1B".parse::<ByteSize>(),
            Err(ParseSizeError::OutOfRange(_))
        ));
        assert!(matches!(
            "99999999999GiB".parse::<ByteSize>(),
            Err(ParseSizeError::OutOfRange(_))
        ));
    }

    #[test]
    fn parses_lists() {
        let sizes = parse_size_list("16,64,1KiB").unwrap();
        assert_eq!(sizes, vec![ByteSize(16), ByteSize(64), ByteSize(1024)]);
        assert!(parse_size_list("16,,64").is_err());
    }

    #[test]
    fn displays_exact_binary_forms() {
        assert_eq!(ByteSize(16).to_string(), "16 B");
        assert_eq!(ByteSize(1024).to_string(), "1 KiB");
        assert_eq!(ByteSize(16384).to_string(), "16 KiB");
        assert_eq!(ByteSize(3 << 19).to_string(), "1.5 MiB");
        assert_eq!(ByteSize(1000).to_string(), "1000 B");
    }

    #[test]
    fn displays_sizes_near_u64_max_exactly() {
        // Found by fuzzing (target `sizes`): the tenths were printed through f64 and
        // `n * 10` wrapped, so these displayed as sizes that parse to other numbers.
        for n in [
            18446513405199729152,
            u64::MAX,
            u64::MAX - 511,
            (1 << 63) + 512,
        ] {
            let shown = ByteSize(n).to_string();
            assert_eq!(
                shown.replace(' ', "").parse::<ByteSize>(),
                Ok(ByteSize(n)),
                "{shown}"
            );
        }
        assert_eq!(
            ByteSize(18446513405199729152).to_string(),
            "18014173247265360.5 KiB"
        );
    }

    #[test]
    fn formats_rates() {
        assert_eq!(format_bytes_per_sec(4.02e9), "4.02 GB/s");
        assert_eq!(format_bytes_per_sec(123.4e6), "123 MB/s");
        assert_eq!(format_bits_per_sec(1e9), "8.00 Gbit/s");
    }

    proptest::proptest! {
        #[test]
        fn display_then_parse_is_identity(n in 0u64..(1u64 << 40)) {
            let shown = ByteSize(n).to_string().replace(' ', "");
            proptest::prop_assert_eq!(shown.parse::<ByteSize>().unwrap(), ByteSize(n));
        }
    }
}
