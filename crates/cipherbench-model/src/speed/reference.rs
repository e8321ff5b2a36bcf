//! Cycles per byte: what a layer-1 point cost the core, and the figure the cipher's
//! implementers published for the same path on a named microarchitecture, the
//! primitive's ceiling where one is known (METHODOLOGY.md, "Cycles per byte").
//!
//! The published figures are the performance tables in the comments of OpenSSL's
//! assembly (perlasm), by the authors who wrote and measured that code: long
//! buffers, raw profiled loops without EVP (a few percent better than EVP, the
//! comments say). OpenSSL publishes none for Zen 2 to 5, Ice Lake, Sapphire Rapids
//! or for its VAES/AVX-512 GCM: on those CPUs there is no reference, and the report
//! says so rather than borrowing another core's.

use serde::{Deserialize, Serialize};

/// The core clock measured around layer 1 (the app's `machine::clock`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MeasuredClock {
    /// Cycles per CPU second before the first point.
    pub before_hz: f64,
    /// After the last point; None when the run stopped before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_hz: Option<f64>,
    /// How it was measured.
    pub method: String,
    /// The CPU it was measured on (the one-thread points' CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
    /// The microarchitecture OpenSSL's performance tables name, when this CPU is
    /// one of them ([`microarchitecture`]): the points' published references.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub microarchitecture: Option<String>,
}

/// A clock that moved more than this between the start and the end of the layer is
/// reported as drifting: its cycles per byte are as uncertain as that.
pub const CLOCK_DRIFT: f64 = 0.03;

impl MeasuredClock {
    /// The rate cycles are counted at: the mean of the two measurements.
    pub fn hz(&self) -> f64 {
        match self.after_hz {
            Some(after) => (self.before_hz + after) / 2.0,
            None => self.before_hz,
        }
    }

    /// After over before, minus one; None without an end.
    pub fn drift(&self) -> Option<f64> {
        self.after_hz
            .filter(|_| self.before_hz > 0.0)
            .map(|after| after / self.before_hz - 1.0)
    }

    /// "3.67 GHz", with the drift when it exceeds [`CLOCK_DRIFT`].
    pub fn describe(&self) -> String {
        let mut text = format!("{:.2} GHz", self.hz() / 1e9);
        if let Some(d) = self.drift().filter(|d| d.abs() > CLOCK_DRIFT) {
            text.push_str(&format!(
                " (moved {:+.0} % between the layer's start and end)",
                d * 100.0
            ));
        }
        text
    }
}

/// The CPU by its identification (`cpu family` and `model` of /proc/cpuinfo): the
/// microarchitecture the published tables name, where this is one of them.
pub fn microarchitecture(vendor: &str, family: u32, model: u32) -> Option<&'static str> {
    match (vendor, family, model) {
        ("GenuineIntel", 6, 0x3C | 0x3F | 0x45 | 0x46) => Some("Haswell"),
        ("GenuineIntel", 6, 0x3D | 0x47 | 0x4F | 0x56) => Some("Broadwell"),
        // Skylake client, Kaby and Coffee Lake (the same core), and the server parts
        // of model 0x55 (Skylake-SP, Cascade Lake): the core of OpenSSL's "Skylake"
        // rows. Its AVX-512 GCM needs VAES, which none of them has.
        ("GenuineIntel", 6, 0x4E | 0x5E | 0x8E | 0x9E | 0x55) => Some("Skylake"),
        // The tables' "Ryzen": Zen and Zen+ (family 17h below model 30h).
        ("AuthenticAMD", 0x17, 0x00..=0x2F) => Some("Ryzen"),
        _ => None,
    }
}

/// A published figure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reference {
    /// Cycles per byte.
    pub cycles_per_byte: f64,
    /// The microarchitecture the table names.
    pub microarchitecture: &'static str,
    /// The code path it is for.
    pub implementation: &'static str,
    /// Where it is written: file and lines at OpenSSL commit dc8a9299 (master,
    /// 2026-03-06; the tables have not changed since 3.0).
    pub source: &'static str,
}

const GCM: &str = "crypto/modes/asm/aesni-gcm-x86_64.pl lines 31-38";
const SHA1_TABLE: &str = "crypto/aes/asm/aesni-sha1-x86_64.pl lines 30-55";
const SHA1_DECRYPT: &str = "crypto/aes/asm/aesni-sha1-x86_64.pl lines 70-75";

/// The published figures: cipher as cipherbench names it, encrypting (true) or
/// decrypting, microarchitecture, cycles per byte, path, source.
const TABLE: &[(&str, bool, &str, f64, &str, &str)] = &[
    (
        "aes-128-gcm",
        true,
        "Haswell",
        1.0,
        "AES-NI + AVX stitched GCM",
        GCM,
    ),
    (
        "aes-128-gcm",
        true,
        "Broadwell",
        0.74,
        "AES-NI + AVX stitched GCM",
        GCM,
    ),
    (
        "aes-128-gcm",
        true,
        "Skylake",
        0.63,
        "AES-NI + AVX stitched GCM",
        GCM,
    ),
    (
        "aes-256-cbc",
        true,
        "Haswell",
        6.19,
        "AES-NI CBC",
        SHA1_TABLE,
    ),
    (
        "aes-256-cbc",
        true,
        "Skylake",
        3.62,
        "AES-NI CBC",
        SHA1_TABLE,
    ),
    ("aes-256-cbc", true, "Ryzen", 3.71, "AES-NI CBC", SHA1_TABLE),
    (
        "aes-256-cbc",
        false,
        "Haswell",
        0.88,
        "AES-NI CBC",
        SHA1_DECRYPT,
    ),
    (
        "aes-128-cbc-hmac-sha1",
        true,
        "Skylake",
        4.23,
        "AES-NI CBC + SHA-1 stitched",
        SHA1_TABLE,
    ),
    (
        "aes-128-cbc-hmac-sha1",
        true,
        "Ryzen",
        2.74,
        "AES-NI CBC + SHA-1 stitched",
        SHA1_TABLE,
    ),
];

/// The published figure for `cipher` in that direction on that microarchitecture,
/// for the accelerated path (the tables have none for a masked one).
pub fn reference(cipher: &str, encrypt: bool, microarchitecture: &str) -> Option<Reference> {
    TABLE
        .iter()
        .find(|(c, e, m, ..)| *c == cipher && *e == encrypt && *m == microarchitecture)
        .map(
            |&(_, _, m, cycles_per_byte, implementation, source)| Reference {
                cycles_per_byte,
                microarchitecture: m,
                implementation,
                source,
            },
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_is_the_mean_of_its_ends_and_says_when_it_moved() {
        let steady = MeasuredClock {
            before_hz: 3.6e9,
            after_hz: Some(3.64e9),
            method: "m".into(),
            cpu: Some(1),
            microarchitecture: None,
        };
        assert!((steady.hz() - 3.62e9).abs() < 1.0);
        assert_eq!(steady.describe(), "3.62 GHz");
        let moved = MeasuredClock {
            after_hz: Some(3.0e9),
            ..steady.clone()
        };
        assert!(
            moved.describe().contains("moved -17 %"),
            "{}",
            moved.describe()
        );
        let unfinished = MeasuredClock {
            after_hz: None,
            ..steady
        };
        assert_eq!(unfinished.hz(), 3.6e9);
        assert_eq!(unfinished.drift(), None);
    }

    #[test]
    fn a_figure_is_found_only_for_the_core_it_was_published_for() {
        let skylake = microarchitecture("GenuineIntel", 6, 0x55).unwrap();
        let r = reference("aes-128-gcm", true, skylake).unwrap();
        assert_eq!(r.cycles_per_byte, 0.63);
        assert!(r.source.contains("aesni-gcm-x86_64.pl"));
        // Zen 4 (family 19h) and Ice Lake-SP (model 0x6A): no published figure.
        assert_eq!(microarchitecture("AuthenticAMD", 0x19, 0x11), None);
        assert_eq!(microarchitecture("GenuineIntel", 6, 0x6A), None);
        // Zen 2 is not the tables' Ryzen.
        assert_eq!(microarchitecture("AuthenticAMD", 0x17, 0x31), None);
        assert_eq!(reference("aes-128-gcm", false, skylake), None);
        assert_eq!(reference("chacha20-poly1305", true, skylake), None);
    }
}
