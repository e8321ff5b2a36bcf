//! cipherbench's fuzz targets as plain functions, and a seeded mutation driver.
//!
//! Each target is a `check(data: &[u8])` that never returns an error: it feeds the
//! bytes to the code under test and *asserts properties* (a forged ESP packet never
//! opens, every datagram has exactly one outcome, an edited sealed file never yields
//! plaintext, `parse(format(x)) == x`, a record that loads always renders), so a
//! broken property is a panic that a fuzzer reports like a crash.
//!
//! The same functions are driven two ways:
//! - by libFuzzer (coverage-guided; `fuzz/`, cargo-fuzz, nightly Rust), the deep runs
//!   of `scripts/fuzz.sh`;
//! - by [`driver`], a deterministic mutation loop (no coverage feedback) over the
//!   committed seed corpus with a fixed seed, which builds on stable: the smoke run in
//!   `cargo test` and `scripts/fuzz.sh --stable` where no nightly toolchain exists.
//!
//! The seeds live in `fuzz/seeds/<target>/` (FUZZING.md says how they were made).

#![forbid(unsafe_code)]

pub mod driver;
pub mod esp_open;
pub mod esp_receive;
pub mod ia32cap;
pub mod mask;
pub mod report;
pub mod sizes;
pub mod stream_open;

/// One fuzz target: its name (the seed folder's and libFuzzer binary's) and its check.
#[derive(Clone, Copy)]
pub struct Target {
    /// `esp_open`, `esp_receive`, `stream_open`, `report`, `sizes`, `ia32cap`, `mask`.
    pub name: &'static str,
    /// Feeds one input to the code under test and asserts its properties.
    pub check: fn(&[u8]),
    /// The longest input worth trying (libFuzzer's `-max_len`, the driver's cap).
    pub max_len: usize,
}

/// Every target, in the order `scripts/fuzz.sh` runs them.
pub const TARGETS: [Target; 7] = [
    Target {
        name: "esp_open",
        check: esp_open::check,
        max_len: 2048,
    },
    Target {
        name: "esp_receive",
        check: esp_receive::check,
        max_len: 4096,
    },
    Target {
        name: "stream_open",
        check: stream_open::check,
        max_len: 4096,
    },
    Target {
        name: "report",
        check: report::check,
        max_len: 4096,
    },
    Target {
        name: "sizes",
        check: sizes::check,
        max_len: 256,
    },
    Target {
        name: "ia32cap",
        check: ia32cap::check,
        max_len: 256,
    },
    Target {
        name: "mask",
        check: mask::check,
        max_len: 256,
    },
];

/// The target with this name.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().copied().find(|t| t.name == name)
}

/// Reads fuzzer bytes front to back; past the end every read is zero, so a target
/// never has to check lengths to pick its parameters.
pub(crate) struct Bytes<'a> {
    data: &'a [u8],
}

impl<'a> Bytes<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Bytes<'a> {
        Bytes { data }
    }

    pub(crate) fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    pub(crate) fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }

    pub(crate) fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    pub(crate) fn u64(&mut self) -> u64 {
        (u64::from(self.u32()) << 32) | u64::from(self.u32())
    }

    /// Up to `n` bytes (fewer at the end).
    pub(crate) fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }

    /// Whatever is left.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        self.take(self.data.len())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}
