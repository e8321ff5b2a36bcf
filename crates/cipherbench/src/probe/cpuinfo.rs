//! Parsing `/proc/cpuinfo` (x86 and aarch64 layouts) into the few facts we need.

use std::collections::BTreeSet;

/// The crypto-relevant flags, by architecture, in the order probe prints them.
pub const X86_CRYPTO_FLAGS: &[&str] = &[
    "aes",
    "pclmulqdq",
    "vaes",
    "vpclmulqdq",
    "avx",
    "avx2",
    "avx512f",
    "sha_ni",
    "gfni",
];
/// aarch64 names (the `Features` line).
pub const ARM_CRYPTO_FLAGS: &[&str] = &["aes", "pmull", "sha1", "sha2"];

/// What `/proc/cpuinfo` says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuInfoText {
    /// `vendor_id` (x86) or the implementer's name (ARM).
    pub vendor: String,
    /// `model name`, or the ARM part number.
    pub model: String,
    /// Count of `processor` entries.
    pub processors: usize,
    /// The first processor's flags (`flags` on x86, `Features` on ARM).
    pub flags: BTreeSet<String>,
    /// x86 `cpu family`.
    pub family: Option<u32>,
    /// x86 `model` (the number).
    pub model_number: Option<u32>,
}

/// Parses the text of `/proc/cpuinfo`.
pub fn parse(text: &str) -> CpuInfoText {
    let mut info = CpuInfoText::default();
    let mut implementer = None;
    let mut part = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        match key {
            "processor" => info.processors += 1,
            "vendor_id" if info.vendor.is_empty() => info.vendor = value.to_string(),
            "model name" if info.model.is_empty() => info.model = value.to_string(),
            "cpu family" if info.family.is_none() => info.family = value.parse().ok(),
            "model" if info.model_number.is_none() => info.model_number = value.parse().ok(),
            "flags" | "Features" if info.flags.is_empty() => {
                info.flags = value.split_whitespace().map(str::to_string).collect();
            }
            "CPU implementer" if implementer.is_none() => implementer = Some(value.to_string()),
            "CPU part" if part.is_none() => part = Some(value.to_string()),
            _ => {}
        }
    }
    if info.vendor.is_empty() {
        if let Some(code) = implementer {
            info.vendor = match code.as_str() {
                "0x41" => "ARM".to_string(),
                "0x61" => "Apple".to_string(),
                "0xc0" => "Ampere".to_string(),
                "0x48" => "HiSilicon".to_string(),
                "0x51" => "Qualcomm".to_string(),
                other => format!("implementer {other}"),
            };
        }
    }
    if info.model.is_empty() {
        if let Some(p) = part {
            info.model = format!("part {p}");
        }
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    const WITH_AES: &str = include_str!("../../tests/fixtures/cpuinfo-xeon-aes.txt");
    const WITHOUT_AES: &str = include_str!("../../tests/fixtures/cpuinfo-x5550-noaes.txt");
    const ARM: &str = include_str!("../../tests/fixtures/cpuinfo-graviton.txt");

    #[test]
    fn reads_an_x86_cpu_with_aes() {
        let info = parse(WITH_AES);
        assert_eq!(info.vendor, "GenuineIntel");
        assert_eq!(info.model, "Intel(R) Xeon(R) CPU E5-2665 0 @ 2.40GHz");
        assert_eq!(info.processors, 2);
        assert!(info.flags.contains("aes"));
        assert!(info.flags.contains("pclmulqdq"));
        assert!(info.flags.contains("hypervisor"));
        // Sandy Bridge-EP: family 6, model 45 (0x2D), read as decimal.
        assert_eq!((info.family, info.model_number), (Some(6), Some(45)));
    }

    #[test]
    fn reads_an_x86_cpu_without_aes() {
        // The EC2 AES-NI blog post's "padawan" (seed 001): a Xeon X5550 without AES-NI.
        let info = parse(WITHOUT_AES);
        assert_eq!(
            info.model,
            "Intel(R) Xeon(R) CPU           X5550  @ 2.67GHz"
        );
        assert!(!info.flags.contains("aes"));
        assert!(!info.flags.contains("pclmulqdq"));
        assert!(info.flags.contains("sse4_2"));
    }

    #[test]
    fn reads_an_arm_cpu() {
        let info = parse(ARM);
        assert_eq!(info.vendor, "ARM");
        assert_eq!(info.model, "part 0xd0c");
        assert_eq!(info.processors, 2);
        for f in ARM_CRYPTO_FLAGS {
            assert!(info.flags.contains(*f), "{f}");
        }
    }

    #[test]
    fn tolerates_garbage() {
        let info = parse("no colons here\n\n:::\n");
        assert_eq!(info.processors, 0);
        assert!(info.flags.is_empty());
    }
}
