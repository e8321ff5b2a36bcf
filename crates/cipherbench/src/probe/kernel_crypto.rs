//! Parsing `/proc/crypto`: which driver the kernel prefers for each algorithm, and
//! whether that driver uses CPU crypto instructions or an offload device.

use cipherbench_model::env::KernelCryptoDriver;

/// The algorithms probe reports on.
pub const ALGORITHMS: &[&str] = &[
    "aes",
    "cbc(aes)",
    "ctr(aes)",
    "gcm(aes)",
    "rfc4106(gcm(aes))",
    "ghash",
    "sha1",
    "sha256",
];

/// One entry of `/proc/crypto`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `name`.
    pub name: String,
    /// `driver`.
    pub driver: String,
    /// `module`.
    pub module: String,
    /// `priority`.
    pub priority: i64,
}

/// Parses `/proc/crypto` into entries (blank-line separated blocks).
pub fn parse(text: &str) -> Vec<Entry> {
    let mut entries = Vec::new();
    for block in text.split("\n\n") {
        let mut entry = Entry {
            name: String::new(),
            driver: String::new(),
            module: String::new(),
            priority: 0,
        };
        for line in block.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim().to_string();
            match key.trim() {
                "name" => entry.name = value,
                "driver" => entry.driver = value,
                "module" => entry.module = value,
                "priority" => entry.priority = value.parse().unwrap_or(0),
                _ => {}
            }
        }
        if !entry.name.is_empty() {
            entries.push(entry);
        }
    }
    entries
}

/// How a driver implements its algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriverKind {
    /// Uses CPU crypto instructions (AES-NI, CLMUL, SHA-NI, ARMv8 CE).
    CpuAccelerated,
    /// An offload device (QAT, CCP, ...).
    Offload,
    /// Portable C.
    Generic,
    /// The kernel's crypto library, which may pick CPU instructions internally.
    Library,
}

/// Classifies a driver by its name.
pub fn classify(driver: &str) -> DriverKind {
    let d = driver.to_ascii_lowercase();
    if ["qat", "ccp", "nitrox", "hisi", "cpt", "caam"]
        .iter()
        .any(|k| d.contains(k))
    {
        DriverKind::Offload
    } else if [
        "aesni", "clmulni", "-ni", "vaes", "avx", "ssse3", "-ce", "neon",
    ]
    .iter()
    .any(|k| d.contains(k))
    {
        DriverKind::CpuAccelerated
    } else if d.ends_with("-lib") {
        DriverKind::Library
    } else {
        DriverKind::Generic
    }
}

/// For each of [`ALGORITHMS`] present, the highest-priority driver.
pub fn preferred(entries: &[Entry]) -> Vec<KernelCryptoDriver> {
    ALGORITHMS
        .iter()
        .filter_map(|alg| {
            entries
                .iter()
                .filter(|e| e.name == *alg)
                .max_by_key(|e| e.priority)
                .map(|e| KernelCryptoDriver {
                    algorithm: e.name.clone(),
                    driver: e.driver.clone(),
                    module: e.module.clone(),
                    priority: e.priority,
                    accelerated: matches!(
                        classify(&e.driver),
                        DriverKind::CpuAccelerated | DriverKind::Offload
                    ),
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_kind_of_machine_uses_generic_aes() {
        let entries = parse(include_str!("../../tests/fixtures/proc-crypto-generic.txt"));
        let drivers = preferred(&entries);
        let aes = drivers.iter().find(|d| d.algorithm == "aes").unwrap();
        assert_eq!(aes.driver, "aes-fixed-time");
        assert!(!aes.accelerated);
        assert!(drivers.iter().all(|d| d.algorithm != "gcm(aes)"));
        let sha = drivers.iter().find(|d| d.algorithm == "sha256").unwrap();
        assert_eq!(classify(&sha.driver), DriverKind::Library);
    }

    #[test]
    fn a_kernel_with_aesni_intel_is_accelerated() {
        let entries = parse(include_str!("../../tests/fixtures/proc-crypto-aesni.txt"));
        let drivers = preferred(&entries);
        let aes = drivers.iter().find(|d| d.algorithm == "aes").unwrap();
        assert_eq!(aes.driver, "aes-aesni");
        assert_eq!(aes.module, "aesni_intel");
        assert!(aes.accelerated);
        let gcm = drivers.iter().find(|d| d.algorithm == "gcm(aes)").unwrap();
        assert!(gcm.accelerated, "{gcm:?}");
        let ghash = drivers.iter().find(|d| d.algorithm == "ghash").unwrap();
        assert_eq!(ghash.driver, "ghash-clmulni");
    }

    #[test]
    fn classifies_driver_names() {
        assert_eq!(classify("aes-generic"), DriverKind::Generic);
        assert_eq!(classify("generic-gcm-aesni"), DriverKind::CpuAccelerated);
        assert_eq!(classify("sha256-ni"), DriverKind::CpuAccelerated);
        assert_eq!(classify("qat_aes_cbc_hmac_sha256"), DriverKind::Offload);
        assert_eq!(classify("aes-ce"), DriverKind::CpuAccelerated);
        assert_eq!(classify("sha1-lib"), DriverKind::Library);
    }
}
