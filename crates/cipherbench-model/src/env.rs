//! The environment fingerprint: what machine and software a result was measured on.
//!
//! `cipherbench probe` fills these types; every result file carries them so that a
//! figure can always be traced to the CPU, flags, kernel, library and acceleration
//! vector that produced it. Filling them (reading `/proc`, asking OpenSSL) happens in
//! the app; this module only describes and interprets.

use serde::{Deserialize, Serialize};

/// Everything `cipherbench probe` learns about the machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Environment {
    /// Host name.
    pub hostname: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// Operating system (PRETTY_NAME from /etc/os-release).
    pub os: String,
    /// The CPU.
    pub cpu: Cpu,
    /// The OpenSSL library and CLI.
    pub openssl: OpensslInfo,
    /// The kernel's crypto drivers for the algorithms we care about.
    pub kernel_crypto: Vec<KernelCryptoDriver>,
    /// Crypto offload devices (QAT and the like).
    pub offload_devices: Vec<OffloadDevice>,
    /// One verdict per capability: in the CPU, used by OpenSSL, used by the kernel.
    pub verdicts: Vec<Verdict>,
    /// Versions of the external tools the layers drive, where installed.
    #[serde(default)]
    pub tools: Vec<ToolVersion>,
    /// The CPU layout: SMT siblings, cores, packages, NUMA nodes, the CPUs this process
    /// may use. Absent in records written before it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<crate::topology::Topology>,
    /// The OpenSSL libraries the run measured (`--openssl`), the baseline first;
    /// empty in records written before the flag existed (they measured the system's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub libraries: Vec<LibraryUnderTest>,
    /// Which library each part of the run loaded, as checked from the part itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loaded: Vec<PartLibrary>,
}

impl Environment {
    /// The library a variant name refers to: `accel@3.6.3` to the library tagged
    /// `3.6.3`, a plain name to the baseline (the first). None in records that name
    /// no library.
    pub fn library_of(&self, variant: &str) -> Option<&LibraryUnderTest> {
        let (_, tag) = split_variant_name(variant);
        match tag {
            Some(t) => self.libraries.iter().find(|l| l.tag.as_deref() == Some(t)),
            None => self.libraries.first(),
        }
    }

    /// The library under test in one phrase: `OpenSSL 3.6.3 1 Jul 2025 (--openssl
    /// DIR)` for a directory, the version alone for the system's; for several, each
    /// joined with ` vs `. Records without the list measured the library cipherbench
    /// linked.
    pub fn libraries_phrase(&self) -> String {
        if self.libraries.is_empty() {
            return self.openssl.library_version.clone();
        }
        self.libraries
            .iter()
            .map(LibraryUnderTest::phrase)
            .collect::<Vec<_>>()
            .join(" vs ")
    }
}

/// Splits a variant name into the variant and the tag of its library:
/// `noaesni@3.6.3` into (`noaesni`, `3.6.3`); a name without `@` belongs to the
/// baseline library.
pub fn split_variant_name(name: &str) -> (&str, Option<&str>) {
    match name.rsplit_once('@') {
        Some((variant, tag)) if !tag.is_empty() => (variant, Some(tag)),
        _ => (name, None),
    }
}

/// An OpenSSL library a run measured: the system's, or a build given with `--openssl
/// DIR`, resolved and checked before anything started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LibraryUnderTest {
    /// `system` (what programs load by default), or the directory given to
    /// `--openssl`.
    pub name: String,
    /// The suffix of its variants' names (`accel@3.6.3`); None for the first library
    /// of a run, whose variants keep their plain names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// `OpenSSL_version(OPENSSL_VERSION)`, as the library itself reported it.
    pub version: String,
    /// The libcrypto file a process started under it mapped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub libcrypto: Option<String>,
    /// The libssl file it mapped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub libssl: Option<String>,
    /// The `openssl` command line tool run with it: the build's own `bin/openssl`, or
    /// the one on PATH.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cli: Option<String>,
}

impl LibraryUnderTest {
    /// The library in one phrase: its version, and where it came from unless it is
    /// the system's.
    pub fn phrase(&self) -> String {
        if self.name == "system" {
            format!("{} (system)", self.version)
        } else {
            format!("{} (--openssl {})", self.version, self.name)
        }
    }
}

/// Which OpenSSL one part of a run loaded (a speed worker, the `openssl` tool, an
/// nginx worker, a gateway, iperf3), as the part reported it or as the kernel shows
/// its mappings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PartLibrary {
    /// Layer (`speed`, `file`, `tls`, `tunnel`).
    pub layer: String,
    /// The part (`speed worker`, `openssl CLI`, `nginx worker`, ...).
    pub part: String,
    /// The library it was started under (a [`LibraryUnderTest::name`]).
    pub asked: String,
    /// The version the part reported; None where only its mappings are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The libcrypto file it mapped; None where it reported only a version, or mapped
    /// none (statically linked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub libcrypto: Option<String>,
    /// The libssl file it mapped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub libssl: Option<String>,
    /// How it was learnt: `its own report`, `/proc/<pid>/maps`, `openssl version`.
    pub source: String,
    /// Whether it was held to the library asked for (a mismatch stops the layer);
    /// false for parts only recorded (iperf3, the TLS load generator).
    pub checked: bool,
}

/// The CPU as `/proc/cpuinfo` (and CPUID for the hypervisor) describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cpu {
    /// Architecture (`x86_64`, `aarch64`).
    pub arch: String,
    /// Vendor (`GenuineIntel`, `AuthenticAMD`, or the implementer on ARM).
    pub vendor: String,
    /// Model name.
    pub model: String,
    /// Logical CPUs online.
    pub logical_cores: usize,
    /// The hypervisor, if the CPU reports running under one (`KVM`, `VMware`, ...).
    pub hypervisor: Option<String>,
    /// The crypto-relevant flags and whether each is present.
    pub crypto_flags: Vec<CpuFlag>,
    /// x86 `cpu family` (decimal in /proc/cpuinfo): with `model_number`, the
    /// microarchitecture (a hypervisor that hides the model name passes these).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<u32>,
    /// x86 `model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_number: Option<u32>,
}

/// One CPU feature flag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuFlag {
    /// Name as in /proc/cpuinfo (`aes`, `pclmulqdq`, `sha_ni`, ...).
    pub name: String,
    /// Present on this CPU.
    pub present: bool,
}

impl Cpu {
    /// The microarchitecture OpenSSL's performance tables name, where this is one
    /// ([`crate::speed::reference::microarchitecture`]).
    pub fn microarchitecture(&self) -> Option<&'static str> {
        crate::speed::reference::microarchitecture(&self.vendor, self.family?, self.model_number?)
    }

    /// Whether the named flag is present.
    pub fn has(&self, flag: &str) -> bool {
        self.crypto_flags
            .iter()
            .any(|f| f.name == flag && f.present)
    }
}

/// The OpenSSL that cipherbench links and the `openssl` command line tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OpensslInfo {
    /// `OpenSSL_version(OPENSSL_VERSION)` of the linked libcrypto.
    pub library_version: String,
    /// `openssl version` of the CLI on PATH, if any.
    pub cli_version: Option<String>,
    /// The capability vector the linked library uses, as `OPENSSL_info(CPU_SETTINGS)`
    /// prints it (`OPENSSL_ia32cap=0x...:0x...`, with `env:` when the user set one).
    pub cpu_settings: Option<String>,
    /// `OPENSSL_ia32cap` from cipherbench's environment, if the user set it.
    pub ia32cap_env: Option<String>,
    /// Engines found (name and description).
    pub engines: Vec<String>,
    /// Providers loaded or available.
    pub providers: Vec<String>,
    /// Which AES-GCM implementation the library takes on this machine, by effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aes_gcm_path: Option<AesGcmPath>,
}

/// The AES-GCM implementation family the library takes here, named by effect: the
/// AES-128-GCM effect probe (16 KiB messages, bytes per CPU second) with
/// `OPENSSL_ia32cap` unset, with AES-NI and PCLMULQDQ masked, and with VAES and
/// VPCLMULQDQ masked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AesGcmPath {
    /// `vaes-avx512`, `aesni-pclmulqdq`, `software` or `unknown`.
    pub family: String,
    /// One sentence for a person.
    pub sentence: String,
    /// The library the probes loaded.
    pub library_version: String,
    /// Unset.
    pub unset_bytes_per_cpu_sec: f64,
    /// With [`Ia32Cap::AESNI_ONLY_MASK`].
    pub aesni_masked_bytes_per_cpu_sec: f64,
    /// With [`Ia32Cap::VAES_ONLY_MASK`].
    pub vaes_masked_bytes_per_cpu_sec: f64,
}

impl AesGcmPath {
    /// A mask "moves" AES-GCM if it slows it at least this much: AES-NI against
    /// software is 10x or more; the VAES path against the AES-NI one about 3x on
    /// this class of CPU (1.5x leaves room for CPUs whose gap is smaller).
    const AESNI_DROP: f64 = 3.0;
    const VAES_DROP: f64 = 1.5;

    /// Names the family from the three rates.
    pub fn classify(
        library_version: &str,
        unset: f64,
        aesni_masked: f64,
        vaes_masked: f64,
        cpu_has_aes: bool,
    ) -> AesGcmPath {
        let rate = crate::units::format_bytes_per_sec;
        let drop = |masked: f64| if masked > 0.0 { unset / masked } else { 0.0 };
        let (family, sentence) = if drop(vaes_masked) >= Self::VAES_DROP
            && drop(aesni_masked) < Self::AESNI_DROP
        {
            (
                "vaes-avx512",
                format!(
                    "AES-GCM: VAES/AVX-512 path (AES-128-GCM {}; {} with VAES and VPCLMULQDQ masked); masking AES-NI alone does not disable it ({})",
                    rate(unset), rate(vaes_masked), rate(aesni_masked)
                ),
            )
        } else if drop(aesni_masked) >= Self::AESNI_DROP {
            (
                "aesni-pclmulqdq",
                format!(
                    "AES-GCM: AES-NI+PCLMULQDQ path (AES-128-GCM {}; {} with AES-NI and PCLMULQDQ masked; masking VAES changes nothing: {})",
                    rate(unset), rate(aesni_masked), rate(vaes_masked)
                ),
            )
        } else if !cpu_has_aes {
            (
                "software",
                format!(
                    "AES-GCM: software, this CPU has no AES-NI (AES-128-GCM {})",
                    rate(unset)
                ),
            )
        } else {
            (
                "unknown",
                format!(
                    "AES-GCM: neither mask moved it (AES-128-GCM {}; {} without AES-NI, {} without VAES): the library takes a path OPENSSL_ia32cap does not gate (a provider or engine?)",
                    rate(unset), rate(aesni_masked), rate(vaes_masked)
                ),
            )
        };
        AesGcmPath {
            family: family.into(),
            sentence,
            library_version: library_version.into(),
            unset_bytes_per_cpu_sec: unset,
            aesni_masked_bytes_per_cpu_sec: aesni_masked,
            vaes_masked_bytes_per_cpu_sec: vaes_masked,
        }
    }
}

/// The kernel's preferred implementation of one algorithm, from `/proc/crypto`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct KernelCryptoDriver {
    /// Algorithm name (`aes`, `gcm(aes)`, `sha256`).
    pub algorithm: String,
    /// Highest-priority driver (`aesni_intel`'s `aes-aesni`, or `aes-generic`).
    pub driver: String,
    /// Module providing it (`kernel` when built in).
    pub module: String,
    /// Its priority.
    pub priority: i64,
    /// Whether the driver uses CPU crypto instructions or an offload device.
    pub accelerated: bool,
}

/// A crypto offload device on the PCI bus.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OffloadDevice {
    /// PCI address.
    pub address: String,
    /// What it is (`Intel QAT C62x (PF)`).
    pub description: String,
    /// `vendor:device` in hex.
    pub id: String,
    /// Bound driver, if any.
    pub driver: Option<String>,
}

/// Where one capability stands: in the CPU, in OpenSSL, in the kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Verdict {
    /// Capability (`AES-NI`, `PCLMULQDQ`, `VAES`, ...).
    pub capability: String,
    /// The CPU reports it.
    pub in_cpu: bool,
    /// OpenSSL's effective capability vector has it (None: not applicable/unknown).
    pub used_by_openssl: Option<bool>,
    /// The kernel's preferred driver uses it (None: the kernel has no use for it).
    pub used_by_kernel: Option<bool>,
    /// One sentence for a person.
    pub note: String,
}

/// A tool's version line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolVersion {
    /// Program name.
    pub name: String,
    /// Its version line, or None if not installed.
    pub version: Option<String>,
}

/// OpenSSL's x86 capability vector: the first two 64-bit fields (see
/// `OPENSSL_ia32cap(3)`), which every 3.x release has; 3.5 and later print three more
/// (CPUID leaf 7 subleaf 1 and leaf 0x24), which nothing here reads.
///
/// Word 0 is CPUID.1:EDX in bits 0-31 and CPUID.1:ECX in bits 32-63; word 1 is
/// CPUID.(EAX=7,ECX=0):EBX in bits 0-31 and ECX in bits 32-63.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Ia32Cap {
    /// First word.
    pub word0: u64,
    /// Second word.
    pub word1: u64,
}

impl Ia32Cap {
    /// AES-NI: CPUID.1:ECX bit 25.
    pub const AESNI: (usize, u64) = (0, 1 << 57);
    /// PCLMULQDQ: CPUID.1:ECX bit 1.
    pub const PCLMULQDQ: (usize, u64) = (0, 1 << 33);
    /// AVX: CPUID.1:ECX bit 28.
    pub const AVX: (usize, u64) = (0, 1 << 60);
    /// AVX2: CPUID.7:EBX bit 5.
    pub const AVX2: (usize, u64) = (1, 1 << 5);
    /// AVX-512F: CPUID.7:EBX bit 16.
    pub const AVX512F: (usize, u64) = (1, 1 << 16);
    /// SHA extensions: CPUID.7:EBX bit 29.
    pub const SHA: (usize, u64) = (1, 1 << 29);
    /// GFNI: CPUID.7:ECX bit 8.
    pub const GFNI: (usize, u64) = (1, 1 << 40);
    /// VAES: CPUID.7:ECX bit 9.
    pub const VAES: (usize, u64) = (1, 1 << 41);
    /// VPCLMULQDQ: CPUID.7:ECX bit 10.
    pub const VPCLMULQDQ: (usize, u64) = (1, 1 << 42);

    /// AES-NI and PCLMULQDQ off, every other bit of the five fields as detected:
    /// masks the AES-NI + PCLMULQDQ AES-GCM path but not the VAES one.
    pub const AESNI_ONLY_MASK: &'static str = "~0x200000200000000:~0:~0:~0:~0";
    /// VAES and VPCLMULQDQ off, everything else as detected: masks the AVX-512 VAES
    /// AES-GCM path (OpenSSL 3.1 and later) and nothing else.
    pub const VAES_ONLY_MASK: &'static str = "~0:~0x60000000000:~0:~0:~0";

    /// Parses the vector out of `OPENSSL_info(OPENSSL_INFO_CPU_SETTINGS)` or
    /// `openssl info -cpusettings`: `OPENSSL_ia32cap=0xfffa32034f8bffff:0x1b41...`
    /// (3.0-3.4, two fields) or five zero-padded fields (3.5 and later), possibly
    /// followed by ` env:...`.
    pub fn parse_settings(text: &str) -> Option<Ia32Cap> {
        let value = text
            .split_whitespace()
            .find_map(|t| t.strip_prefix("OPENSSL_ia32cap="))?;
        let word = |s: &str| {
            let hex = s.strip_prefix("0x")?;
            u64::from_str_radix(hex, 16).ok()
        };
        let words: Vec<u64> = value.split(':').map(word).collect::<Option<_>>()?;
        if !(2..=5).contains(&words.len()) {
            return None;
        }
        Some(Ia32Cap {
            word0: words[0],
            word1: words[1],
        })
    }

    /// Whether a bit (one of the associated constants) is set.
    pub fn has(&self, bit: (usize, u64)) -> bool {
        let word = if bit.0 == 0 { self.word0 } else { self.word1 };
        word & bit.1 != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpu_settings_with_and_without_env() {
        let full = Ia32Cap::parse_settings("OPENSSL_ia32cap=0xfffa32034f8bffff:0x1b415fdef1bf27eb")
            .unwrap();
        assert!(full.has(Ia32Cap::AESNI));
        assert!(full.has(Ia32Cap::PCLMULQDQ));
        assert!(full.has(Ia32Cap::VAES));
        assert!(full.has(Ia32Cap::VPCLMULQDQ));
        assert!(full.has(Ia32Cap::AVX512F));
        assert!(full.has(Ia32Cap::SHA));
        let masked = Ia32Cap::parse_settings(
            "OPENSSL_ia32cap=0xfdfa32014f8bffff:0x1b415fdef1bf27eb env:~0x200000200000000:~0x0",
        )
        .unwrap();
        assert!(!masked.has(Ia32Cap::AESNI));
        assert!(!masked.has(Ia32Cap::PCLMULQDQ));
        assert!(masked.has(Ia32Cap::AVX2));
        assert_eq!(masked.word1, full.word1);
    }

    #[test]
    fn variant_names_carry_their_librarys_tag_after_an_at_sign() {
        assert_eq!(split_variant_name("accel"), ("accel", None));
        assert_eq!(
            split_variant_name("noaesni@3.6.3"),
            ("noaesni", Some("3.6.3"))
        );
        assert_eq!(
            split_variant_name("ia32cap:~0x0:~0x0@3.0.19"),
            ("ia32cap:~0x0:~0x0", Some("3.0.19"))
        );
        assert_eq!(split_variant_name("odd@"), ("odd@", None));
    }

    #[test]
    fn parses_the_five_fields_of_openssl_3_5_and_later() {
        let v = Ia32Cap::parse_settings("OPENSSL_ia32cap=0xfffa3203078bffff:0x004059c6f1bf07ab:0x0000002000000010:0x0000000000000000:0x0000000000000000 env:~0:~0x60000000000:~0:~0:~0").unwrap();
        assert_eq!(v.word1, 0x4059c6f1bf07ab);
        assert!(v.has(Ia32Cap::AESNI) && !v.has(Ia32Cap::VAES));
    }

    #[test]
    fn names_the_aes_gcm_path_by_which_mask_moves_it() {
        // Figures from this machine: upstream 3.6.3 and Debian's 3.0.19.
        let v = AesGcmPath::classify("OpenSSL 3.6.3", 11.3e9, 11.2e9, 3.58e9, true);
        assert_eq!(v.family, "vaes-avx512");
        assert!(
            v.sentence
                .contains("masking AES-NI alone does not disable it"),
            "{}",
            v.sentence
        );
        let a = AesGcmPath::classify("OpenSSL 3.0.19", 3.9e9, 0.33e9, 4.5e9, true);
        assert_eq!(a.family, "aesni-pclmulqdq");
        assert!(a.sentence.starts_with("AES-GCM: AES-NI+PCLMULQDQ path"));
        assert_eq!(
            AesGcmPath::classify("x", 0.3e9, 0.3e9, 0.3e9, false).family,
            "software"
        );
        assert_eq!(
            AesGcmPath::classify("x", 9e9, 9e9, 9e9, true).family,
            "unknown"
        );
    }

    #[test]
    fn rejects_malformed_settings() {
        assert!(Ia32Cap::parse_settings("nothing here").is_none());
        assert!(Ia32Cap::parse_settings("OPENSSL_ia32cap=0xzz:0x1").is_none());
        assert!(Ia32Cap::parse_settings("OPENSSL_ia32cap=0x1").is_none());
        assert!(Ia32Cap::parse_settings("OPENSSL_ia32cap=0x1:0x2:0x3:0x4:0x5:0x6").is_none());
        assert!(Ia32Cap::parse_settings("OPENSSL_ia32cap=0x1:2").is_none());
    }
}
