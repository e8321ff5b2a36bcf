//! The acceleration variant, the idea every layer shares: what it is
//! ([`VariantKind`]), its name in records, the `OPENSSL_ia32cap` mask it runs
//! under, parsing a `--variants` list, and whether it took effect.
//!
//! The took-effect judgement is split in two: [`judge`] is a pure function of the
//! facts (what the variant's OpenSSL reported, what the CPU has, what accel
//! reported) and does no I/O; [`variant_record`] and [`openssl_variant_records`]
//! gather those facts (`/proc/cpuinfo`, `openssl info -cpusettings`) and call it.
//!
//! A variant also carries the library its processes run under ([`Library`], the
//! system's by default); [`cross`] makes every variant once per library of an
//! `--openssl` list, and the later libraries' variants are named `accel@3.6.3`.
//!
//! The layers take variants from here; none of them owns the idea.

use crate::library::Library;
use crate::supervisor::Spawn;
use anyhow::{bail, Result};
use cipherbench_model::env::Ia32Cap;
use cipherbench_model::speed::VariantRecord;
use std::collections::BTreeMap;
use std::time::Duration;

/// What a variant changes in the library under test. New ways to switch an
/// implementation (an OpenSSL provider, an engine) are new kinds here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VariantKind {
    /// The library's default paths.
    Accel,
    /// AES-NI and PCLMULQDQ masked, everything else as detected.
    NoAesni,
    /// A user-given `OPENSSL_ia32cap` value (`ia32cap:MASK`).
    Ia32Cap(String),
}

/// An acceleration variant: the kind, and through it the environment its
/// processes run under, and the library they load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// What the variant changes.
    pub kind: VariantKind,
    /// The OpenSSL its processes load (the system's unless `--openssl` says).
    pub library: Library,
}

impl Variant {
    /// The library's default paths.
    pub fn accel() -> Variant {
        Variant::of(VariantKind::Accel)
    }

    /// AES-NI and PCLMULQDQ masked, everything else as detected.
    pub fn noaesni() -> Variant {
        Variant::of(VariantKind::NoAesni)
    }

    fn of(kind: VariantKind) -> Variant {
        Variant {
            kind,
            library: Library::system(),
        }
    }

    /// The same variant under another library.
    pub fn with_library(&self, library: &Library) -> Variant {
        Variant {
            kind: self.kind.clone(),
            library: library.clone(),
        }
    }

    /// Parses `accel`, `noaesni` or `ia32cap:MASK`.
    pub fn parse(text: &str) -> Result<Variant> {
        match text.trim() {
            "accel" => Ok(Variant::accel()),
            "noaesni" => Ok(Variant::noaesni()),
            t => match t.strip_prefix("ia32cap:") {
                Some(mask) if !mask.is_empty() => {
                    Ok(Variant::of(VariantKind::Ia32Cap(mask.to_string())))
                }
                _ => bail!(
                    "unknown variant '{t}': use accel, noaesni, or ia32cap:MASK (an OPENSSL_ia32cap value such as ~0x200000200000000:~0x0)"
                ),
            },
        }
    }

    /// The name in records and on screen: `accel`, `noaesni`, or `ia32cap:MASK`,
    /// followed by `@TAG` under a library that is not the first of a list
    /// (`accel@3.6.3`).
    pub fn name(&self) -> String {
        let kind = match &self.kind {
            VariantKind::Accel => "accel".into(),
            VariantKind::NoAesni => "noaesni".into(),
            VariantKind::Ia32Cap(mask) => format!("ia32cap:{mask}"),
        };
        match &self.library.tag {
            Some(tag) => format!("{kind}@{tag}"),
            None => kind,
        }
    }

    /// The `OPENSSL_ia32cap` the variant's processes run under (None: unset, the
    /// library's defaults).
    pub fn mask(&self) -> Option<&str> {
        match &self.kind {
            VariantKind::Accel => None,
            VariantKind::NoAesni => Some(Ia32Cap::NOAESNI_MASK),
            VariantKind::Ia32Cap(mask) => Some(mask),
        }
    }

    /// Whether this is the library's default (the baseline of every ratio).
    pub fn is_accel(&self) -> bool {
        self.kind == VariantKind::Accel
    }
}

/// Parses a comma-separated variant list.
pub fn parse_variants(text: &str) -> Result<Vec<Variant>> {
    let v: Vec<Variant> = text.split(',').map(Variant::parse).collect::<Result<_>>()?;
    Ok(v)
}

/// Every variant under every library, library by library (so a layer that goes
/// through its variants in order measures one library's, then the next's); an
/// empty list of libraries leaves the variants as they are. Pure.
pub fn cross(variants: &[Variant], libraries: &[Library]) -> Vec<Variant> {
    if libraries.is_empty() {
        return variants.to_vec();
    }
    libraries
        .iter()
        .flat_map(|l| variants.iter().map(move |v| v.with_library(l)))
        .collect()
}

/// The libraries of a list of variants, each once, in first-seen order.
pub fn libraries_of(variants: &[Variant]) -> Vec<Library> {
    let mut out: Vec<Library> = Vec::new();
    for v in variants {
        if !out.contains(&v.library) {
            out.push(v.library.clone());
        }
    }
    out
}

/// What [`judge`] decides from, gathered by the caller.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    /// The vector the variant's OpenSSL reported (`openssl info -cpusettings`, or a
    /// worker's `settings` line); empty if it could not be read.
    pub settings: &'a str,
    /// Whether the CPU has AES (the `aes` flag of `/proc/cpuinfo`).
    pub cpu_has_aes: bool,
    /// What the accel variant's OpenSSL reported, if it was judged before.
    pub accel_settings: Option<&'a str>,
}

/// Decides whether a variant's effective vector is what the variant means. Pure:
/// every fact comes in through `facts`.
pub fn judge(variant: &Variant, facts: &Facts) -> VariantRecord {
    let settings = facts.settings;
    let cpu_has_aes = facts.cpu_has_aes;
    let cap = Ia32Cap::parse_settings(settings);
    let aesni = cap.map(|c| c.has(Ia32Cap::AESNI)).unwrap_or(false);
    let pclmulqdq = cap.map(|c| c.has(Ia32Cap::PCLMULQDQ)).unwrap_or(false);
    let accel_word1 = facts
        .accel_settings
        .and_then(Ia32Cap::parse_settings)
        .map(|c| c.word1);
    let took_effect = match &variant.kind {
        VariantKind::Accel => aesni == cpu_has_aes,
        VariantKind::NoAesni => {
            !aesni
                && !pclmulqdq
                // The second word must survive: `~0x200000200000000` alone zeroes it.
                && match (accel_word1, cap) {
                    (Some(w), Some(c)) => c.word1 == w,
                    (None, Some(c)) => c.word1 != 0 || !cpu_has_aes,
                    _ => false,
                }
        }
        VariantKind::Ia32Cap(_) => settings.contains("env:"),
    };
    VariantRecord {
        name: variant.name(),
        ia32cap_env: variant.mask().map(str::to_string),
        cpu_settings: settings.to_string(),
        aesni,
        pclmulqdq,
        took_effect,
    }
}

/// Judges a variant from what its OpenSSL reported (`settings`), reading the CPU's
/// flags here and accel's vector from the records already `known`.
pub fn variant_record(variant: &Variant, settings: &str, known: &[VariantRecord]) -> VariantRecord {
    let cpu_has_aes = std::fs::read_to_string("/proc/cpuinfo")
        .map(|t| crate::probe::cpuinfo::parse(&t).flags.contains("aes"))
        .unwrap_or(false);
    let accel_settings = known
        .iter()
        .find(|v| v.name == "accel")
        .map(|v| v.cpu_settings.as_str());
    judge(
        variant,
        &Facts {
            settings,
            cpu_has_aes,
            accel_settings,
        },
    )
}

/// Variant records as `openssl info -cpusettings` reports them under each variant's
/// environment (the libcrypto that nginx and the `openssl` tool load), by variant
/// name. accel is judged first, and measured even when not asked for: noaesni is
/// judged against its second word.
pub fn openssl_variant_records(variants: &[Variant]) -> BTreeMap<String, VariantRecord> {
    let mut known: Vec<VariantRecord> = Vec::new();
    let mut ordered: Vec<Variant> = variants.to_vec();
    ordered.sort_by_key(|v| !v.is_accel());
    if !ordered.iter().any(Variant::is_accel) {
        ordered.insert(0, Variant::accel());
    }
    let mut out = BTreeMap::new();
    for v in &ordered {
        let settings = Spawn::new("openssl")
            .args(["info", "-cpusettings"])
            .ia32cap(v.mask())
            .loader(v.library.loader())
            .output(Duration::from_secs(10))
            .ok()
            .filter(|o| o.status.success())
            .map(|o| o.stdout.trim().to_string())
            .unwrap_or_default();
        let record = variant_record(v, &settings, &known);
        known.push(record.clone());
        if variants.contains(v) {
            out.insert(v.name(), record);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const ACCEL: &str = "OPENSSL_ia32cap=0xfffa32034f8bffff:0x1b415fdef1bf27eb";

    fn judged(variant: &Variant, settings: &str, accel: Option<&str>) -> VariantRecord {
        judge(
            variant,
            &Facts {
                settings,
                cpu_has_aes: true,
                accel_settings: accel,
            },
        )
    }

    #[test]
    fn parses_variants_and_refuses_unknown_ones() {
        let v = parse_variants("accel,noaesni,ia32cap:~0x0:~0x60000000000").unwrap();
        assert_eq!(v[0].mask(), None);
        assert_eq!(v[1].mask(), Some("~0x200000200000000:~0x0"));
        assert_eq!(v[2].mask(), Some("~0x0:~0x60000000000"));
        let err = parse_variants("fast").unwrap_err().to_string();
        assert!(err.contains("unknown variant 'fast'"), "{err}");
    }

    #[test]
    fn names_variants_as_records_always_have() {
        let v = parse_variants("accel, noaesni ,ia32cap:~0x0:~0x60000000000").unwrap();
        let names: Vec<String> = v.iter().map(Variant::name).collect();
        assert_eq!(names, ["accel", "noaesni", "ia32cap:~0x0:~0x60000000000"]);
        assert!(v[0].is_accel() && !v[1].is_accel() && !v[2].is_accel());
    }

    #[test]
    fn a_library_list_crosses_the_variants_and_tags_the_later_ones() {
        let variants = parse_variants("accel,noaesni").unwrap();
        let tagged = Library {
            dir: None,
            tag: Some("3.6.3".into()),
        };
        let crossed = cross(&variants, &[Library::system(), tagged.clone()]);
        let names: Vec<String> = crossed.iter().map(Variant::name).collect();
        assert_eq!(names, ["accel", "noaesni", "accel@3.6.3", "noaesni@3.6.3"]);
        assert!(crossed[2].is_accel() && crossed[2].mask().is_none());
        assert_eq!(crossed[3].mask(), crossed[1].mask());
        assert_eq!(libraries_of(&crossed), [Library::system(), tagged]);
        // No list: the variants as they were, under the system's library.
        assert_eq!(cross(&variants, &[]), variants);
    }

    #[test]
    fn judges_whether_a_variant_took_effect() {
        let accel = judged(&Variant::accel(), ACCEL, None);
        assert!(accel.took_effect && accel.aesni && accel.pclmulqdq);
        let good = judged(
            &Variant::noaesni(),
            "OPENSSL_ia32cap=0xfdfa32014f8bffff:0x1b415fdef1bf27eb env:~0x200000200000000:~0x0",
            Some(ACCEL),
        );
        assert!(good.took_effect && !good.aesni && !good.pclmulqdq);
        // The classic mistake: the second word zeroed too.
        let zeroed = judged(
            &Variant::noaesni(),
            "OPENSSL_ia32cap=0xfdfa32014f8bffff:0x0 env:~0x200000200000000",
            Some(ACCEL),
        );
        assert!(!zeroed.took_effect);
        // A mask that did nothing.
        let ignored = judged(&Variant::noaesni(), ACCEL, Some(ACCEL));
        assert!(!ignored.took_effect);
    }

    #[test]
    fn accel_took_effect_only_if_its_aesni_bit_matches_the_cpu() {
        let without_aes_in_cpu = judge(
            &Variant::accel(),
            &Facts {
                settings: ACCEL,
                cpu_has_aes: false,
                accel_settings: None,
            },
        );
        assert!(!without_aes_in_cpu.took_effect);
    }
}
