//! The acceleration variant, the idea every layer shares: what it is
//! ([`VariantKind`]), its name in records, the `OPENSSL_ia32cap` mask it runs under
//! for a given library version ([`mask`]), parsing a `--variants` list, and whether it
//! took effect.
//!
//! Whether a variant took effect is decided by effect, in every run: the variant's
//! process measures a treatment probe and control probes ([`crate::effect`]) and
//! [`judge`], a pure function of those figures, accel's, the vector the library
//! reported and the CPU's flags, says whether the treatment fell and the controls
//! held. The functions below `judge` gather the facts (a probe child, `/proc/cpuinfo`,
//! `openssl info -cpusettings`, `/proc/<pid>/environ`) and call it.
//!
//! A variant also carries the library its processes run under ([`Library`], the
//! system's by default); [`cross`] makes every variant once per library of an
//! `--openssl` list, and the later libraries' variants are named `accel@3.6.3`. The
//! mask, the probes and the accel a variant is judged against are its library's.
//!
//! The layers take variants from here; none of them owns the idea.

pub mod implementation;
pub mod mask;

use crate::library::Library;
use crate::supervisor::Spawn;
use anyhow::{bail, Context, Result};
use cipherbench_model::env::Ia32Cap;
use cipherbench_model::variant::{
    tolerance_text, Effect, Expected, ProbeFigure, ProbeRatio, ProbeRole, Probes, ProcessCheck,
    VariantRecord, Verdict, PROBE_CONTROL_TOLERANCE, TREATMENT_FACTOR,
};
use std::collections::BTreeMap;
use std::time::Duration;

/// What a variant changes in the library under test. New ways to switch an
/// implementation (an OpenSSL provider, an engine) are new kinds here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VariantKind {
    /// The library's default paths (`OPENSSL_ia32cap` removed from the environment).
    Accel,
    /// Every AES and GHASH hardware path off ([`mask::noaesni_mask`]), everything
    /// else as detected.
    NoAesni,
    /// A user-given `OPENSSL_ia32cap` value (`ia32cap:MASK`), checked by
    /// [`mask::parse`].
    Ia32Cap(String),
    /// An OpenSSL configuration that loads a provider (`provider:CONF`), checked
    /// by [`implementation::provider`]; judged by which provider served the work.
    Provider {
        /// As the user wrote it (the variant's name).
        given: String,
        /// Its absolute path: the children's `OPENSSL_CONF`.
        conf: std::path::PathBuf,
        /// The counting provider's tally file for this variant.
        counter: std::path::PathBuf,
    },
    /// An ENGINE made the default for its algorithms (`engine:ID`) through a
    /// generated configuration; judged by the engine bound to the work.
    Engine {
        /// The engine's id.
        id: String,
        /// The generated configuration: the children's `OPENSSL_CONF`.
        conf: std::path::PathBuf,
        /// The tally file a counting engine (such as the test engine,
        /// `testdata/engine/cbcount.c`) keeps; others leave it unwritten.
        counter: std::path::PathBuf,
    },
    /// A public-key path off (`noifma`, `noadx`, `nopkaccel`), AES left alone.
    PublicKey(mask::PublicKeyMask),
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

    /// Every AES and GHASH hardware path masked, everything else as detected.
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

    /// accel under this variant's library: the variant every ratio of its library
    /// divides by.
    pub fn its_accel(&self) -> Variant {
        Variant::accel().with_library(&self.library)
    }

    /// Parses `accel`, `noaesni`, `ia32cap:MASK`, `provider:CONF` or `engine:ID`; a
    /// mask OpenSSL would not read as written, a configuration whose provider does
    /// not load, an engine that does not initialise are refused with the reason.
    pub fn parse(text: &str) -> Result<Variant> {
        let t = text.trim();
        if let Some(conf) = t.strip_prefix("provider:") {
            let (path, counter) = implementation::provider(conf)?;
            return Ok(Variant::of(VariantKind::Provider {
                given: conf.to_string(),
                conf: path,
                counter,
            }));
        }
        if let Some(id) = t.strip_prefix("engine:") {
            let (conf, counter) = implementation::engine(id)?;
            return Ok(Variant::of(VariantKind::Engine {
                id: id.to_string(),
                conf,
                counter,
            }));
        }
        match t {
            "accel" => Ok(Variant::accel()),
            "noaesni" => Ok(Variant::noaesni()),
            "noifma" => Ok(Variant::of(VariantKind::PublicKey(mask::PublicKeyMask::NoIfma))),
            "noadx" => Ok(Variant::of(VariantKind::PublicKey(mask::PublicKeyMask::NoAdx))),
            "nopkaccel" => Ok(Variant::of(VariantKind::PublicKey(
                mask::PublicKeyMask::NoPkAccel,
            ))),
            t => match t.strip_prefix("ia32cap:") {
                Some(m) => {
                    mask::parse(m)?;
                    Ok(Variant::of(VariantKind::Ia32Cap(m.to_string())))
                }
                None => bail!(
                    "unknown variant '{t}': use accel, noaesni, noifma, noadx, nopkaccel, ia32cap:MASK (an OPENSSL_ia32cap value such as {}), provider:CONF (an openssl.cnf loading a provider) or engine:ID",
                    mask::NOAESNI_FIVE_FIELDS
                ),
            },
        }
    }

    /// The environment the variant adds to its children beside the mask:
    /// `OPENSSL_CONF` (and the counter file) for a provider or engine variant,
    /// nothing for the others (the user's own `OPENSSL_CONF`, if any, passes).
    pub fn environment(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        match &self.kind {
            VariantKind::Provider { conf, counter, .. }
            | VariantKind::Engine { conf, counter, .. } => vec![
                ("OPENSSL_CONF", conf.clone().into_os_string()),
                (
                    implementation::COUNTER_ENV,
                    counter.clone().into_os_string(),
                ),
            ],
            _ => Vec::new(),
        }
    }

    /// What should serve a provider or engine variant's work (None for the others).
    pub fn expected(&self) -> Option<Expected> {
        match &self.kind {
            VariantKind::Provider { .. } => Some(Expected::Provider),
            VariantKind::Engine { id, .. } => Some(Expected::Engine(id.clone())),
            _ => None,
        }
    }

    /// The counter file of a provider or engine variant.
    pub fn counter(&self) -> Option<&std::path::Path> {
        match &self.kind {
            VariantKind::Provider { counter, .. } | VariantKind::Engine { counter, .. } => {
                Some(counter)
            }
            _ => None,
        }
    }

    /// Zeroes the variant's provider tally before a layer's work.
    pub fn reset_counter(&self) {
        if let Some(c) = self.counter() {
            implementation::reset_counter(c);
        }
    }

    /// Puts the provider's tally over the layer's work into the variant's record.
    pub fn note_counter(&self, record: &mut VariantRecord) {
        if let Some(c) = self.counter() {
            record.provider_calls = implementation::read_counter(c);
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
            VariantKind::Provider { given, .. } => format!("provider:{given}"),
            VariantKind::Engine { id, .. } => format!("engine:{id}"),
            VariantKind::PublicKey(m) => m.name().into(),
        };
        match &self.library.tag {
            Some(tag) => format!("{kind}@{tag}"),
            None => kind,
        }
    }

    /// The `OPENSSL_ia32cap` the variant's processes run under with the library whose
    /// `OpenSSL_version()` is `library_version` (None: removed, the library's
    /// defaults). Pure.
    pub fn mask(&self, library_version: &str) -> Option<String> {
        match &self.kind {
            VariantKind::Accel | VariantKind::Provider { .. } | VariantKind::Engine { .. } => None,
            VariantKind::NoAesni => Some(mask::noaesni_mask(library_version).to_string()),
            VariantKind::Ia32Cap(mask) => Some(mask.clone()),
            VariantKind::PublicKey(m) => Some(m.mask(library_version).to_string()),
        }
    }

    /// Whether this is the library's default (the baseline of every ratio).
    pub fn is_accel(&self) -> bool {
        self.kind == VariantKind::Accel
    }

    /// Whether the variant means to turn AES off, so that it is judged as `noaesni`
    /// is: a user mask counts if it clears AES-NI.
    fn masks_aes(&self) -> bool {
        match &self.kind {
            VariantKind::Accel | VariantKind::Provider { .. } | VariantKind::Engine { .. } => false,
            VariantKind::NoAesni => true,
            VariantKind::Ia32Cap(m) => mask::parse(m).is_ok_and(|m| m.clears_aesni()),
            VariantKind::PublicKey(_) => false,
        }
    }

    /// The public-key mask, if this is one.
    fn public_key(&self) -> Option<mask::PublicKeyMask> {
        match self.kind {
            VariantKind::PublicKey(m) => Some(m),
            _ => None,
        }
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
    /// The vector the variant's OpenSSL reported (`OPENSSL_info(CPU_SETTINGS)` in its
    /// process); empty if it could not be read.
    pub settings: &'a str,
    /// Whether the CPU has AES (the `aes` flag of `/proc/cpuinfo`).
    pub cpu_has_aes: bool,
    /// The CPU's flags (`/proc/cpuinfo`), for the public-key masks.
    pub cpu_flags: &'a [String],
    /// The `OPENSSL_ia32cap` the variant's processes were given.
    pub mask: Option<&'a str>,
    /// What the variant's process measured (None: no probe ran).
    pub probes: Option<&'a Probes>,
    /// What accel's process measured in the same layer.
    pub accel_probes: Option<&'a Probes>,
    /// The check of the real process, where the probes ran in a stand-in child.
    pub process_check: Option<&'a ProcessCheck>,
}

/// Decides whether a variant did what it means, from its probes against accel's.
/// Pure: every fact comes in through `facts`.
///
/// - accel is the baseline: it must run without `OPENSSL_ia32cap` and see AES-NI
///   exactly when the CPU has it.
/// - A variant that turns AES off (`noaesni`, or a user mask that clears AES-NI) took
///   effect if the treatment (AES-128-GCM) ran at least [`TREATMENT_FACTOR`] times
///   slower than accel's and every control stayed within
///   [`PROBE_CONTROL_TOLERANCE`]. Otherwise the record names the mask that works for
///   the library's version.
/// - Any other user mask took effect if the vector changed; the ratios say which
///   probes moved.
pub fn judge(variant: &Variant, facts: &Facts) -> VariantRecord {
    let cap = Ia32Cap::parse_settings(facts.settings);
    let aesni = cap.is_some_and(|c| c.has(Ia32Cap::AESNI));
    let pclmulqdq = cap.is_some_and(|c| c.has(Ia32Cap::PCLMULQDQ));
    let effect = effect_of(variant, facts, cap, aesni);
    VariantRecord {
        name: variant.name(),
        ia32cap_env: facts.mask.map(str::to_string),
        cpu_settings: facts.settings.to_string(),
        aesni,
        pclmulqdq,
        took_effect: effect.verdict.took_effect(),
        probes: facts.probes.cloned(),
        effect: Some(effect),
        process_check: facts.process_check.cloned(),
        expected: variant.expected(),
        provider_calls: None,
    }
}

/// An effect with `verdict` and `reason`, judged by the usual factor and tolerance,
/// before its ratios are attached: the skeleton every judge fills.
fn verdict(verdict: Verdict, reason: String) -> Effect {
    Effect {
        verdict,
        reason,
        ratios: Vec::new(),
        treatment_factor: TREATMENT_FACTOR,
        control_tolerance: PROBE_CONTROL_TOLERANCE,
        working_mask: None,
        first_judgement: None,
    }
}

fn effect_of(variant: &Variant, facts: &Facts, cap: Option<Ia32Cap>, aesni: bool) -> Effect {
    if let Some(check) = facts.process_check.filter(|c| !c.passed) {
        return verdict(
            Verdict::Unjudged,
            format!(
                "the probes ran in a stand-in process, and the real one does not run under the same environment ({}: {})",
                check.what, check.detail
            ),
        );
    }
    if variant.is_accel() {
        return match cap {
            None => verdict(
                Verdict::Unjudged,
                format!("OpenSSL's vector could not be read ('{}')", facts.settings),
            ),
            Some(_) if facts.settings.contains("env:") => verdict(
                Verdict::Unjudged,
                format!(
                    "accel's process still had OPENSSL_ia32cap set ({})",
                    facts.settings
                ),
            ),
            Some(_) if aesni != facts.cpu_has_aes => verdict(
                Verdict::Unjudged,
                format!(
                    "OpenSSL's AES-NI bit ({}) differs from the CPU's flag ({})",
                    on_off(aesni),
                    on_off(facts.cpu_has_aes)
                ),
            ),
            Some(_) => verdict(
                Verdict::Baseline,
                "the library's defaults (OPENSSL_ia32cap removed)".into(),
            ),
        };
    }
    let (Some(probes), Some(accel)) = (facts.probes, facts.accel_probes) else {
        let missing = if facts.probes.is_none() {
            "no effect probe ran in the variant's process"
        } else {
            "accel's effect probe is missing"
        };
        return verdict(Verdict::Unjudged, missing.into());
    };
    let mut ratios = ratios(probes, accel);
    if let Some(pk) = variant.public_key() {
        let mut effect = judge_public_key(pk, &mut ratios, facts);
        effect.ratios = ratios;
        return effect;
    }
    let working = mask::noaesni_mask(&probes.library_version);
    let mut effect = if let Some(expected) = variant.expected() {
        judge_implementation(&expected, probes)
    } else if variant.masks_aes() {
        judge_masking(&ratios, facts, working)
    } else {
        judge_other(
            &ratios,
            cap,
            facts.accel_probes.map(|a| a.cpu_settings.as_str()),
        )
    };
    effect.ratios = ratios;
    effect
}

/// Each probe of the variant against accel's.
fn ratios(probes: &Probes, accel: &Probes) -> Vec<ProbeRatio> {
    probes
        .figures
        .iter()
        .filter_map(|f| {
            let a = accel.figure(&f.cipher)?;
            (f.bytes_per_cpu_sec > 0.0 && a.bytes_per_cpu_sec > 0.0).then(|| {
                let relative = f.bytes_per_cpu_sec / a.bytes_per_cpu_sec;
                let mut r = ProbeRatio {
                    cipher: f.cipher.clone(),
                    role: f.role,
                    accel_bytes_per_cpu_sec: a.bytes_per_cpu_sec,
                    variant_bytes_per_cpu_sec: f.bytes_per_cpu_sec,
                    slowdown: 1.0 / relative,
                    moved: false,
                    accel_spread: a.spread(),
                };
                r.moved = r.outside_band();
                r
            })
        })
        .collect()
}

fn judge_masking(ratios: &[ProbeRatio], facts: &Facts, working: &str) -> Effect {
    let mut effect = verdict(Verdict::TookEffect, String::new());
    let Some(treatment) = ratios.iter().find(|r| r.role == ProbeRole::Treatment) else {
        effect.verdict = Verdict::Unjudged;
        effect.reason = "the treatment probe (aes-128-gcm) did not run".into();
        return effect;
    };
    let controls: Vec<&ProbeRatio> = ratios
        .iter()
        .filter(|r| r.role == ProbeRole::Control)
        .collect();
    let control_text = controls
        .iter()
        .map(|c| c.control_text())
        .collect::<Vec<_>>()
        .join(", ");
    let allowed = tolerance_text(ratios);
    let moved: Vec<&&ProbeRatio> = controls.iter().filter(|c| c.moved).collect();
    let suggest = facts.mask != Some(working);
    if treatment.slowdown < TREATMENT_FACTOR {
        effect.verdict = Verdict::TreatmentDidNotMove;
        effect.reason = if !facts.cpu_has_aes {
            format!(
                "{} ran at {:.2}x of accel's speed: this CPU has no AES-NI, so there is no hardware path to mask",
                treatment.cipher,
                1.0 / treatment.slowdown
            )
        } else if suggest {
            format!(
                "{} ran at {:.2}x of accel's speed (it must fall {TREATMENT_FACTOR:.0}x or more): the mask missed the AES-GCM path this library takes",
                treatment.cipher,
                1.0 / treatment.slowdown
            )
        } else {
            format!(
                "{} ran at {:.2}x of accel's speed (it must fall {TREATMENT_FACTOR:.0}x or more) even with every AES and GHASH bit masked: this library takes an AES path that OPENSSL_ia32cap does not gate (a provider or engine?)",
                treatment.cipher,
                1.0 / treatment.slowdown
            )
        };
    } else if !moved.is_empty() {
        effect.verdict = Verdict::ControlMoved;
        effect.reason = format!(
            "{} fell {:.1}x, but the control{} moved ({control_text} of accel; {allowed}): the mask changed more than AES",
            treatment.cipher,
            treatment.slowdown,
            if moved.len() == 1 { "" } else { "s" },
        );
    } else {
        effect.reason = format!(
            "{} fell {:.1}x (≥ {TREATMENT_FACTOR:.0}x needed); controls {control_text} of accel ({allowed})",
            treatment.cipher,
            treatment.slowdown,
        );
    }
    if effect.verdict != Verdict::TookEffect && suggest && facts.cpu_has_aes {
        effect.working_mask = Some(working.to_string());
    }
    effect
}

/// A provider or engine variant: it took effect if its process says the expected
/// implementation served at least one algorithm; a fallback if the default provider
/// served them all. Per cipher, the record says which (`VariantRecord::fallback`).
fn judge_implementation(expected: &Expected, probes: &Probes) -> Effect {
    let Some(imp) = &probes.implementation else {
        return verdict(
            Verdict::Unjudged,
            "the variant's process did not say which implementation served it".into(),
        );
    };
    let ran: Vec<String> = imp
        .served
        .iter()
        .filter(|s| expected.ran(s))
        .map(|s| format!("{} ({})", s.algorithm, Expected::who(s)))
        .collect();
    let providers = imp.providers.join(", ");
    if !ran.is_empty() {
        return verdict(
            Verdict::TookEffect,
            format!("ran: {}; active providers: {providers}", ran.join(", ")),
        );
    }
    verdict(
        Verdict::Fallback,
        match expected {
            Expected::Provider => format!(
                "fallback: the default provider served every algorithm (active providers: {providers}); the configuration's provider has none of them or did not load"
            ),
            Expected::Engine(id) => format!(
                "fallback: engine {id} is bound to no algorithm this process fetches (active providers: {providers}); it did not initialise, or fetches bypass it"
            ),
        },
    )
}

/// A public-key mask took effect if each of its treatments fell by its factor
/// ([`mask::PublicKeyMask::treatments`]) and the controls (AES-128-GCM, 3DES, and
/// ChaCha20-Poly1305 unless the mask reaches Poly1305) held within
/// [`PROBE_CONTROL_TOLERANCE`]. The ratios' roles are rewritten to this variant's.
fn judge_public_key(pk: mask::PublicKeyMask, ratios: &mut [ProbeRatio], facts: &Facts) -> Effect {
    for r in ratios.iter_mut() {
        r.role = if pk.treatments().iter().any(|t| t.0 == r.cipher) {
            ProbeRole::Treatment
        } else if pk.affected().contains(&r.cipher.as_str()) {
            ProbeRole::Affected
        } else {
            ProbeRole::Control
        };
        r.moved = r.role != ProbeRole::Affected && r.outside_band();
    }
    let has_feature = pk
        .cpu_flags()
        .iter()
        .any(|f| facts.cpu_flags.iter().any(|c| c == f));
    let mut short = Vec::new();
    let mut fell = Vec::new();
    for (name, factor) in pk.treatments() {
        match ratios.iter().find(|r| r.cipher == *name) {
            None => short.push(format!("{name} did not run")),
            Some(r) if r.slowdown < *factor => short.push(format!(
                "{name} fell {:.2}x (≥ {factor:.2}x needed)",
                r.slowdown
            )),
            Some(r) => fell.push(format!("{name} fell {:.2}x (≥ {factor:.2}x)", r.slowdown)),
        }
    }
    let controls: Vec<String> = ratios
        .iter()
        .filter(|r| r.role == ProbeRole::Control)
        .map(ProbeRatio::control_text)
        .collect();
    let allowed = tolerance_text(ratios);
    let moved = ratios
        .iter()
        .any(|r| r.role == ProbeRole::Control && r.moved);
    let (judged, reason) = if !short.is_empty() {
        let why = if has_feature {
            "the library does not take the path the mask gates here (built without assembler, or another path)".to_string()
        } else {
            format!(
                "this CPU has none of {}, so there is no such path to mask",
                pk.cpu_flags().join(", ")
            )
        };
        (
            Verdict::TreatmentDidNotMove,
            format!("{}: {why}", short.join(", ")),
        )
    } else if moved {
        (
            Verdict::ControlMoved,
            format!(
                "{}, but a control moved ({} of accel; {allowed})",
                fell.join(", "),
                controls.join(", "),
            ),
        )
    } else {
        (
            Verdict::TookEffect,
            format!(
                "{}; controls {} of accel ({allowed})",
                fell.join(", "),
                controls.join(", "),
            ),
        )
    };
    Effect {
        // The smallest factor any of its treatments must fall by.
        treatment_factor: pk
            .treatments()
            .iter()
            .map(|t| t.1)
            .fold(f64::INFINITY, f64::min),
        ..verdict(judged, reason)
    }
}

fn judge_other(
    ratios: &[ProbeRatio],
    cap: Option<Ia32Cap>,
    accel_settings: Option<&str>,
) -> Effect {
    let accel = accel_settings.and_then(Ia32Cap::parse_settings);
    let moved: Vec<String> = ratios
        .iter()
        .filter(|r| r.moved)
        .map(|r| format!("{} {:.2}x", r.cipher, 1.0 / r.slowdown))
        .collect();
    let moved_text = if moved.is_empty() {
        format!(
            "no probe moved beyond ±{:.0} %",
            PROBE_CONTROL_TOLERANCE * 100.0
        )
    } else {
        format!("probes that moved: {}", moved.join(", "))
    };
    let (judged, reason) = match (cap, accel) {
        (Some(c), Some(a)) if c == a => (
            Verdict::Unchanged,
            format!("the vector is accel's: the mask changed nothing ({moved_text})"),
        ),
        (Some(_), Some(_)) => (
            Verdict::TookEffect,
            format!("the vector differs from accel's; {moved_text} of accel's speed"),
        ),
        _ => (
            Verdict::Unjudged,
            "the vector could not be read to compare with accel's".to_string(),
        ),
    };
    verdict(judged, reason)
}

/// Judges a provider or engine variant's record against what its layer asked for:
/// if every one of `ciphers` fell back to the default provider, the variant's work
/// in this layer was accel's, so it did not take effect here (whatever else its
/// provider serves). The record's list of who served what keeps the layer's
/// ciphers only. Other variants are left as they are. Pure.
pub fn judge_layer_fallback(record: &mut VariantRecord, ciphers: &[&str]) {
    if record.expected.is_none() || ciphers.is_empty() {
        return;
    }
    // The record speaks of the layer's work: the ciphers it asked for.
    if let Some(imp) = record
        .probes
        .as_mut()
        .and_then(|p| p.implementation.as_mut())
    {
        imp.served.retain(|s| ciphers.contains(&s.cipher.as_str()));
    }
    if !record.took_effect {
        return;
    }
    let fallbacks: Vec<String> = ciphers.iter().filter_map(|c| record.fallback(c)).collect();
    if fallbacks.len() < ciphers.len() {
        return;
    }
    record.took_effect = false;
    if let Some(effect) = record.effect.as_mut() {
        effect.verdict = Verdict::Fallback;
        effect.reason = format!(
            "{}: the layer's work ran on the default provider, not the variant's",
            fallbacks.join("; ")
        );
    }
}

/// Whether a judgement rests on figures a busy machine can produce: a control that
/// moved (3DES's table lookups lose 25-30 % of their CPU rate when other programs
/// share the caches, which a probe a few seconds earlier may not have met), or a
/// treatment near the factor. Such a judgement is measured again, accel and the
/// variant back to back ([`Baseline::judge`]).
pub fn needs_confirmation(record: &VariantRecord) -> bool {
    let Some(effect) = &record.effect else {
        return false;
    };
    let treatment = effect
        .ratios
        .iter()
        .find(|r| r.role == ProbeRole::Treatment)
        .map_or(1.0, |r| r.slowdown);
    // A treatment that moved half way to its factor, or 1.5x, is near enough to
    // measure again: the IFMA mask's RSA-2048 sign needs 1.5x and fell 1.47x once in
    // a clean-clone `make test` (library.rs) on a guest whose figures swing by 20 %.
    let near = (1.0 + (effect.treatment_factor - 1.0) / 2.0).min(1.5);
    match effect.verdict {
        Verdict::ControlMoved => true,
        Verdict::TreatmentDidNotMove => treatment >= near,
        Verdict::TookEffect => treatment < TREATMENT_FACTOR * 1.5,
        _ => false,
    }
}

/// Rounds of the confirmation ([`Baseline::judge`]): accel and the variant
/// alternately, this many times each. With two, each side the median of its own
/// sets, a slow spell over both of the variant's probes moved the controls by
/// 14-25 % on a quiet 2-vCPU guest (tunnel_root's gateway probe test failed so on
/// 2026-11-29), and with three the handshake test's IFMA mask still saw AES-GCM at
/// 0.73x of accel: on that guest consecutive 200 ms samples of AES-GCM alone ranged
/// 2.72-3.87 GB/s. A median of five round-by-round ratios outvotes two slow rounds.
pub const CONFIRMATION_ROUNDS: usize = 5;

/// How many confirmations a judgement that a control moved gets: a second one
/// when the first still finds a control moved. A mask that reaches a control moves
/// it in every one; a busy spell on a shared host (the Debian 13 root's quick preset
/// in a clean-clone `make test` saw every public-key control of noaesni at 1.46-1.66x
/// in the speed worker, then at 0.73-0.80x in the confirmation, while the same
/// probes held within 0.85-1.06x quiet) passes.
pub const CONFIRMATIONS: usize = 2;

/// accel's and the variant's probe sets, measured alternately in rounds: accel's
/// figure per cipher is the median of its sets; the variant's is that times the
/// median of the round-by-round ratios (variant over the accel probe just before
/// it), so a slow spell that covers one round moves neither side's figure, and the
/// judge's slowdown (accel over variant) is the median ratio's inverse.
fn combine_paired(accel: &[Probes], mine: &[Probes]) -> Option<(Probes, Probes)> {
    let accel_combined = combine(
        accel,
        "__variant-probe with accel's environment, alternating with the variant's",
    )?;
    let mut mine_combined = combine(
        mine,
        "__variant-probe with the variant's environment, alternating with accel's: accel's median times the median of the round-by-round ratios",
    )?;
    for f in &mut mine_combined.figures {
        let ratios: Vec<f64> = accel
            .iter()
            .zip(mine)
            .filter_map(|(a, m)| {
                let (a, m) = (a.figure(&f.cipher)?, m.figure(&f.cipher)?);
                (a.bytes_per_cpu_sec > 0.0).then(|| m.bytes_per_cpu_sec / a.bytes_per_cpu_sec)
            })
            .collect();
        if let (Some(base), Some(ratio)) = (
            accel_combined.figure(&f.cipher),
            cipherbench_model::Summary::of(&ratios),
        ) {
            f.bytes_per_cpu_sec = base.bytes_per_cpu_sec * ratio.median;
        }
    }
    Some((accel_combined, mine_combined))
}

/// Combines probe sets measured under one environment: per cipher, the median of the
/// sets' figures, and the rounds of all of them.
fn combine(sets: &[Probes], measured_in: &str) -> Option<Probes> {
    let first = sets.first()?;
    let figures = first
        .figures
        .iter()
        .map(|f| {
            let all: Vec<&ProbeFigure> = sets.iter().filter_map(|s| s.figure(&f.cipher)).collect();
            let rates: Vec<f64> = all.iter().map(|g| g.bytes_per_cpu_sec).collect();
            ProbeFigure {
                cipher: f.cipher.clone(),
                role: f.role,
                size_bytes: f.size_bytes,
                bytes_per_cpu_sec: cipherbench_model::Summary::of(&rates).map_or(0.0, |s| s.median),
                rounds_bytes_per_cpu_sec: all
                    .iter()
                    .flat_map(|g| g.rounds_bytes_per_cpu_sec.iter().copied())
                    .collect(),
                sets_bytes_per_cpu_sec: rates,
            }
        })
        .collect();
    Some(Probes {
        library_version: first.library_version.clone(),
        cpu_settings: first.cpu_settings.clone(),
        measured_in: measured_in.to_string(),
        figures,
        implementation: first.implementation.clone(),
    })
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// A `__variant-probe` child under `variant`'s library with `mask`.
fn probe_child(variant: &Variant, mask: Option<&str>, measured_in: &str) -> Result<Probes> {
    crate::effect::run_child(
        crate::effect::child_command(false)?
            .ia32cap(mask)
            .envs(variant.environment())
            .loader(variant.library.loader()),
        measured_in,
    )
}

/// The facts every variant of one layer is judged against, gathered once at the
/// layer's start, per library under test: the library the children load (its
/// version picks the `noaesni` mask) and accel's probes in a child with accel's
/// environment under that library.
#[derive(Debug, Clone)]
pub struct Baseline {
    /// Per library, accel's probes from `cipherbench __variant-probe` without
    /// `OPENSSL_ia32cap`, in the order of the layer's libraries.
    pub accel: Vec<(Library, Probes)>,
    /// Whether the CPU has AES.
    pub cpu_has_aes: bool,
    /// The CPU's flags, for the public-key masks.
    pub cpu_flags: Vec<String>,
}

impl Baseline {
    /// Measures accel's probes in a child with accel's environment under each library
    /// of `variants`. A child that reports another library than the one asked for
    /// stops the layer (results must not mix libraries).
    pub fn measure(variants: &[Variant]) -> Result<Baseline> {
        let mut accel = Vec::new();
        let mut libraries = libraries_of(variants);
        if libraries.is_empty() {
            libraries.push(Library::system());
        }
        for library in libraries {
            let v = Variant::accel().with_library(&library);
            let probes = probe_child(&v, None, "__variant-probe with accel's environment")
                .with_context(|| {
                    format!("measuring accel's effect probes under {}", library.name())
                })?;
            if !library.is_system() && probes.library_version != library.version() {
                bail!(
                    "the effect probe child under --openssl {} loaded {}, not {}; stopped so that results do not mix libraries",
                    library.name(),
                    probes.library_version,
                    library.version()
                );
            }
            accel.push((library, probes));
        }
        Ok(Baseline {
            accel,
            cpu_has_aes: cpu_has_aes(),
            cpu_flags: cpu_flags(),
        })
    }

    /// accel's probes under `variant`'s library (the first library's if the layer
    /// did not measure that one).
    pub fn accel_probes(&self, variant: &Variant) -> &Probes {
        self.accel
            .iter()
            .find(|(l, _)| *l == variant.library)
            .or(self.accel.first())
            .map(|(_, p)| p)
            .expect("a baseline measures at least one library")
    }

    /// The `OpenSSL_version()` `variant`'s children load.
    pub fn library_version(&self, variant: &Variant) -> &str {
        &self.accel_probes(variant).library_version
    }

    /// The mask a variant's children run under (its library's `noaesni`).
    pub fn mask(&self, variant: &Variant) -> Option<String> {
        variant.mask(self.library_version(variant))
    }

    /// Judges a variant from what its process reported, against this layer's accel:
    /// the accel record already `known` if there is one (its own process's probes),
    /// else the baseline child's. A judgement a busy machine could have produced
    /// ([`needs_confirmation`]) is measured again: accel and the variant in
    /// `__variant-probe` children with their environments, alternating,
    /// [`CONFIRMATION_ROUNDS`] times each, and judged on the round-by-round ratios
    /// ([`combine_paired`]); the first judgement is kept in the record.
    pub fn judge(
        &self,
        variant: &Variant,
        probes: Option<&Probes>,
        known: &[VariantRecord],
        process_check: Option<&ProcessCheck>,
    ) -> VariantRecord {
        let accel_name = variant.its_accel().name();
        let accel_probes = known
            .iter()
            .find(|v| v.name == accel_name)
            .and_then(|v| v.probes.as_ref())
            .unwrap_or(self.accel_probes(variant));
        let first = self.judge_with(variant, probes, accel_probes, process_check);
        if variant.is_accel() || variant.expected().is_some() || !needs_confirmation(&first) {
            return first;
        }
        let mut said = first.effect.as_ref().map(|e| {
            format!(
                "{}, from the probes of the {} against accel's",
                e.reason,
                probes.map_or("variant", |p| p.measured_in.as_str())
            )
        });
        let mut second = first.clone();
        for attempt in 1..=CONFIRMATIONS {
            let Some((accel, mine)) = self.paired(variant) else {
                return first;
            };
            if attempt > 1 {
                // What the confirmation before this one said.
                let before = second.effect.as_ref().map(|e| e.reason.clone());
                said = Some(format!(
                    "{}; then, alternating with accel: {}",
                    said.unwrap_or_default(),
                    before.unwrap_or_default()
                ));
            }
            second = self.judge_with(variant, Some(&mine), &accel, process_check);
            let verdict = second.effect.as_ref().map(|e| e.verdict);
            if verdict != Some(Verdict::ControlMoved) {
                break;
            }
        }
        if let Some(effect) = second.effect.as_mut() {
            effect.first_judgement = said;
        }
        // The record keeps the variant's own probes (its process, its library).
        second.probes = first.probes;
        second
    }

    fn judge_with(
        &self,
        variant: &Variant,
        probes: Option<&Probes>,
        accel_probes: &Probes,
        process_check: Option<&ProcessCheck>,
    ) -> VariantRecord {
        let settings = probes.map(|p| p.cpu_settings.as_str()).unwrap_or_default();
        let mask = self.mask(variant);
        judge(
            variant,
            &Facts {
                settings,
                cpu_has_aes: self.cpu_has_aes,
                cpu_flags: &self.cpu_flags,
                mask: mask.as_deref(),
                probes,
                accel_probes: Some(accel_probes),
                process_check,
            },
        )
    }

    /// accel and the variant probed alternately, [`CONFIRMATION_ROUNDS`] times each,
    /// in `__variant-probe` children with their environments under the variant's
    /// library: (accel, variant) as [`combine_paired`] makes them.
    fn paired(&self, variant: &Variant) -> Option<(Probes, Probes)> {
        let mask = self.mask(variant);
        let run = |m: Option<&str>| probe_child(variant, m, "paired").ok();
        let mut accel = Vec::new();
        let mut mine = Vec::new();
        for _ in 0..CONFIRMATION_ROUNDS {
            accel.push(run(None)?);
            mine.push(run(mask.as_deref())?);
        }
        combine_paired(&accel, &mine)
    }
}

/// The CPU's flags (`/proc/cpuinfo`), sorted.
pub fn cpu_flags() -> Vec<String> {
    std::fs::read_to_string("/proc/cpuinfo")
        .map(|t| {
            crate::probe::cpuinfo::parse(&t)
                .flags
                .iter()
                .map(|f| f.to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the CPU has AES (the `aes` flag of `/proc/cpuinfo`).
pub fn cpu_has_aes() -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .map(|t| crate::probe::cpuinfo::parse(&t).flags.contains("aes"))
        .unwrap_or(false)
}

/// Records for variants whose real process cannot run the probe (nginx, the
/// `openssl` CLI): each measured by a `cipherbench __variant-probe` child with the
/// environment that process gets (its mask and its library), by variant name. Each
/// library's accel is measured first (and even when not asked for), as the others
/// are judged against it.
pub fn stand_in_records(
    variants: &[Variant],
    baseline: &Baseline,
    stands_in_for: &str,
) -> BTreeMap<String, VariantRecord> {
    let mut known: Vec<VariantRecord> = Vec::new();
    let mut ordered: Vec<Variant> = variants.to_vec();
    for library in libraries_of(variants) {
        let accel = Variant::accel().with_library(&library);
        if !ordered.contains(&accel) {
            ordered.push(accel);
        }
    }
    ordered.sort_by_key(|v| !v.is_accel());
    let mut out = BTreeMap::new();
    for v in &ordered {
        let mask = baseline.mask(v);
        let probes = probe_child(
            v,
            mask.as_deref(),
            &format!("__variant-probe with {stands_in_for}'s environment"),
        );
        let record = match probes {
            Ok(p) => baseline.judge(v, Some(&p), &known, None),
            Err(e) => {
                let mut r = baseline.judge(v, None, &known, None);
                if let Some(effect) = r.effect.as_mut() {
                    effect.reason = format!("the effect probe failed: {e:#}");
                }
                r
            }
        };
        known.push(record.clone());
        if variants.contains(v) {
            out.insert(v.name(), record);
        }
    }
    out
}

/// A stand-in record checked against the real process: judged again with `check`.
pub fn with_check(
    baseline: &Baseline,
    variant: &Variant,
    record: &VariantRecord,
    known: &[VariantRecord],
    check: ProcessCheck,
) -> VariantRecord {
    baseline.judge(variant, record.probes.as_ref(), known, Some(&check))
}

/// Checks that `openssl info -cpusettings`, run with the variant's environment (its
/// mask, its library's CLI), reports what the probe child reported: the CLI loads
/// the same library and reads the same variable.
pub fn check_openssl_cli(
    variant: &Variant,
    mask: Option<&str>,
    record: &VariantRecord,
) -> ProcessCheck {
    let what = "openssl info -cpusettings with the same environment".to_string();
    let settings = Spawn::new("openssl")
        .args(["info", "-cpusettings"])
        .ia32cap(mask)
        .envs(variant.environment())
        .loader(variant.library.loader())
        .output(Duration::from_secs(10))
        .and_then(|o| o.success("openssl info -cpusettings"))
        .map(|o| o.stdout.trim().to_string());
    match settings {
        Ok(s) if s == record.cpu_settings => ProcessCheck {
            what,
            passed: true,
            detail: format!("same vector: {s}"),
        },
        Ok(s) => ProcessCheck {
            what,
            passed: false,
            detail: format!(
                "the CLI reports {s}, the probe child {}: the CLI loads another library",
                record.cpu_settings
            ),
        },
        Err(e) => ProcessCheck {
            what,
            passed: false,
            detail: format!("{e:#}"),
        },
    }
}

/// Checks that every process in `pids` runs with `OPENSSL_ia32cap` as `mask` says
/// (set to it, or absent): the environment the probe child had. Read from each
/// process ([`crate::host::env_var_of`]).
pub fn check_environ(what: &str, pids: &[u32], mask: Option<&str>) -> ProcessCheck {
    let mut found = Vec::new();
    let mut passed = !pids.is_empty();
    for &pid in pids {
        match crate::host::env_var_of(pid, "OPENSSL_ia32cap") {
            Ok((v, source)) => {
                passed &= v.as_deref() == mask;
                found.push(format!(
                    "{pid}: {}{}",
                    v.as_deref().unwrap_or("unset"),
                    match source {
                        crate::host::EnvSource::Environ => "",
                        crate::host::EnvSource::Memory => " (in its memory)",
                    }
                ));
            }
            Err(e) => {
                passed = false;
                found.push(format!("{pid}: unreadable ({e})"));
            }
        }
    }
    ProcessCheck {
        what: format!("OPENSSL_ia32cap of {what}"),
        passed,
        detail: format!(
            "expected {}; found {}",
            mask.unwrap_or("unset"),
            if found.is_empty() {
                "no process".to_string()
            } else {
                found.join(", ")
            }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ACCEL: &str = "OPENSSL_ia32cap=0xfffa32034f8bffff:0x1b415fdef1bf27eb";
    const NOAESNI: &str = "OPENSSL_ia32cap=0xfdfa32014f8bffff:0x1b4159def1bf27eb env:~0x200000200000000:~0x60000000000";
    const OLD_MASK: &str =
        "OPENSSL_ia32cap=0xfdfa32014f8bffff:0x1b415fdef1bf27eb env:~0x200000200000000:~0x0";

    fn probes(settings: &str, gcm: f64, chacha: f64, des: f64) -> Probes {
        let figure = |cipher: &str, role, rate: f64| ProbeFigure {
            cipher: cipher.into(),
            role,
            size_bytes: 16384,
            bytes_per_cpu_sec: rate,
            rounds_bytes_per_cpu_sec: vec![rate; 3],
            sets_bytes_per_cpu_sec: Vec::new(),
        };
        Probes {
            library_version: "OpenSSL 3.6.3 9 Jun 2026".into(),
            cpu_settings: settings.into(),
            measured_in: "test".into(),
            figures: vec![
                figure("aes-128-gcm", ProbeRole::Treatment, gcm),
                figure("chacha20-poly1305", ProbeRole::Control, chacha),
                figure("des-ede3-cbc", ProbeRole::Control, des),
            ],
            implementation: None,
        }
    }

    fn judged(
        variant: &Variant,
        mask: Option<&str>,
        mine: &Probes,
        accel: &Probes,
    ) -> VariantRecord {
        judge(
            variant,
            &Facts {
                settings: &mine.cpu_settings,
                cpu_has_aes: true,
                cpu_flags: &[],
                mask,
                probes: Some(mine),
                accel_probes: Some(accel),
                process_check: None,
            },
        )
    }

    fn accel_probes() -> Probes {
        probes(ACCEL, 11e9, 3.7e9, 31e6)
    }

    fn with_public_key(mut p: Probes, sign: f64, verify: f64, ecdh: f64) -> Probes {
        for (name, rate) in [
            ("rsa2048-sign", sign),
            ("rsa2048-verify", verify),
            ("ecdh-p256", ecdh),
        ] {
            p.figures.push(ProbeFigure {
                cipher: name.into(),
                role: ProbeRole::Control,
                size_bytes: 0,
                bytes_per_cpu_sec: rate,
                rounds_bytes_per_cpu_sec: vec![rate; 3],
                sets_bytes_per_cpu_sec: Vec::new(),
            });
        }
        p
    }

    fn judged_pk(variant: &Variant, mine: &Probes, flags: &[String]) -> VariantRecord {
        let accel = with_public_key(accel_probes(), 4200.0, 60_000.0, 31_000.0);
        judge(
            variant,
            &Facts {
                settings: &mine.cpu_settings,
                cpu_has_aes: true,
                cpu_flags: flags,
                mask: variant.mask(&mine.library_version).as_deref(),
                probes: Some(mine),
                accel_probes: Some(&accel),
                process_check: None,
            },
        )
    }

    #[test]
    fn public_key_masks_are_judged_by_their_own_treatments_and_controls() {
        let flags = vec!["avx512ifma".to_string(), "adx".to_string()];
        let noifma = Variant::parse("noifma").unwrap();
        assert_eq!(
            noifma.mask("OpenSSL 3.0.19 27 Jan 2026").as_deref(),
            Some("~0:~0x200000")
        );
        // Measured here: signing 2.5x slower, ChaCha20-Poly1305 1.24x (Poly1305's
        // IFMA path: affected, not a control), everything else put.
        let mine = with_public_key(probes(ACCEL, 11e9, 3.0e9, 31e6), 1680.0, 60_500.0, 31_000.0);
        let r = judged_pk(&noifma, &mine, &flags);
        assert!(r.took_effect, "{:?}", r.effect);
        let e = r.effect.unwrap();
        let role = |c: &str| e.ratios.iter().find(|r| r.cipher == c).unwrap().role;
        assert_eq!(role("rsa2048-sign"), ProbeRole::Treatment);
        assert_eq!(role("chacha20-poly1305"), ProbeRole::Affected);
        assert_eq!(role("aes-128-gcm"), ProbeRole::Control);
        // A mask that missed: signing did not fall.
        let missed = with_public_key(probes(ACCEL, 11e9, 3.7e9, 31e6), 4100.0, 60_000.0, 31_000.0);
        let r = judged_pk(&noifma, &missed, &flags);
        assert_eq!(
            r.effect.as_ref().unwrap().verdict,
            Verdict::TreatmentDidNotMove
        );
        // Without the CPU flag there is nothing to mask, and the record says so.
        let r = judged_pk(&noifma, &missed, &[]);
        assert!(r.effect.unwrap().reason.contains("no such path"));
        // AES moved: the mask changed more than the public-key code.
        let nopk = Variant::parse("nopkaccel").unwrap();
        let aes_moved =
            with_public_key(probes(ACCEL, 2e9, 3.0e9, 31e6), 2100.0, 44_000.0, 27_000.0);
        let r = judged_pk(&nopk, &aes_moved, &flags);
        assert_eq!(r.effect.unwrap().verdict, Verdict::ControlMoved);
        let ok = with_public_key(probes(ACCEL, 11e9, 3.0e9, 31e6), 2100.0, 44_000.0, 27_000.0);
        assert!(judged_pk(&nopk, &ok, &flags).took_effect);
        // noaesni keeps the public-key probes as controls.
        let noaesni = Variant::noaesni();
        let mine = with_public_key(
            probes(NOAESNI, 0.5e9, 3.7e9, 31e6),
            1000.0,
            60_000.0,
            31_000.0,
        );
        let r = judged(
            &noaesni,
            Some(mask::NOAESNI_FIVE_FIELDS),
            &mine,
            &with_public_key(accel_probes(), 4200.0, 60_000.0, 31_000.0),
        );
        assert_eq!(r.effect.unwrap().verdict, Verdict::ControlMoved);
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
        assert!(crossed[2].is_accel() && crossed[2].mask("OpenSSL 3.6.3").is_none());
        assert_eq!(crossed[3].its_accel(), crossed[2]);
        assert_eq!(crossed[1].its_accel(), crossed[0]);
        assert_eq!(libraries_of(&crossed), [Library::system(), tagged]);
        // No list: the variants as they were, under the system's library.
        assert_eq!(cross(&variants, &[]), variants);
    }

    fn provider_variant() -> Variant {
        Variant::of(VariantKind::Provider {
            given: "counting.cnf".into(),
            conf: "/etc/counting.cnf".into(),
            counter: "/tmp/counting.count".into(),
        })
    }

    fn served_by(gcm: &str) -> Probes {
        let mut p = probes(ACCEL, 9e9, 3.7e9, 31e6);
        let s =
            |cipher: &str, algorithm: &str, provider: &str| cipherbench_model::variant::Served {
                cipher: cipher.into(),
                algorithm: algorithm.into(),
                kind: "cipher".into(),
                provider: Some(provider.into()),
                engine: None,
            };
        p.implementation = Some(cipherbench_model::variant::Implementation {
            providers: vec!["counting".into(), "default".into()],
            served: vec![
                s("aes-128-gcm", "AES-128-GCM", gcm),
                s("chacha20-poly1305", "ChaCha20-Poly1305", "default"),
            ],
            cpu_vendor: "AuthenticAMD".into(),
        });
        p
    }

    #[test]
    fn a_provider_variant_ran_where_its_provider_served_and_fell_back_elsewhere() {
        let v = provider_variant();
        assert_eq!(v.name(), "provider:counting.cnf");
        assert_eq!(v.mask("OpenSSL 3.0.19"), None);
        let env: Vec<String> = v
            .environment()
            .iter()
            .map(|(k, val)| format!("{k}={}", val.to_string_lossy()))
            .collect();
        assert_eq!(
            env,
            [
                "OPENSSL_CONF=/etc/counting.cnf",
                "CIPHERBENCH_PROVIDER_COUNTER=/tmp/counting.count"
            ]
        );
        let mine = served_by("counting");
        let r = judged(&v, None, &mine, &accel_probes());
        assert!(r.took_effect, "{r:?}");
        assert_eq!(r.effect.as_ref().unwrap().verdict, Verdict::TookEffect);
        assert_eq!(r.fallback("aes-128-gcm"), None);
        assert_eq!(
            r.fallback("chacha20-poly1305").as_deref(),
            Some("fallback: default provider served chacha20-poly1305")
        );
        assert_eq!(
            r.not_applicable_for("chacha20-poly1305").as_deref(),
            Some("n/a: fallback: default provider served chacha20-poly1305")
        );
        // Nothing served by the provider: a fallback, not taken.
        let none = judged(&v, None, &served_by("default"), &accel_probes());
        assert!(!none.took_effect);
        assert_eq!(none.effect.unwrap().verdict, Verdict::Fallback);
        // A process that did not say is not judged.
        let silent = judged(&v, None, &accel_probes(), &accel_probes());
        assert_eq!(silent.effect.unwrap().verdict, Verdict::Unjudged);
    }

    #[test]
    fn a_layer_whose_every_cipher_fell_back_did_not_take_effect_and_keeps_its_ciphers() {
        let v = provider_variant();
        let r = judged(&v, None, &served_by("counting"), &accel_probes());
        let mut only_chacha = r.clone();
        judge_layer_fallback(&mut only_chacha, &["chacha20-poly1305"]);
        assert!(!only_chacha.took_effect);
        assert_eq!(
            only_chacha.effect.as_ref().unwrap().verdict,
            Verdict::Fallback
        );
        let served = &only_chacha
            .probes
            .as_ref()
            .unwrap()
            .implementation
            .as_ref()
            .unwrap()
            .served;
        assert_eq!(served.len(), 1);
        let mut both = r.clone();
        judge_layer_fallback(&mut both, &["aes-128-gcm", "chacha20-poly1305"]);
        assert!(both.took_effect);
        // Other variants are left alone.
        let mut accel = judged(&Variant::accel(), None, &accel_probes(), &accel_probes());
        let before = accel.clone();
        judge_layer_fallback(&mut accel, &["chacha20-poly1305"]);
        assert_eq!(accel, before);
    }

    #[test]
    fn parses_variants_and_refuses_unknown_ones() {
        let v = parse_variants("accel,noaesni,ia32cap:~0x0:~0x60000000000").unwrap();
        assert_eq!(v[0].mask("OpenSSL 3.6.3"), None);
        assert_eq!(
            v[1].mask("OpenSSL 3.0.19 27 Jan 2026").as_deref(),
            Some("~0x200000200000000:~0x60000000000")
        );
        assert_eq!(
            v[1].mask("OpenSSL 3.6.3 9 Jun 2026").as_deref(),
            Some("~0x200000200000000:~0x60000000000:~0:~0:~0")
        );
        assert_eq!(v[2].mask("any").as_deref(), Some("~0x0:~0x60000000000"));
        let err = parse_variants("fast").unwrap_err().to_string();
        assert!(err.contains("unknown variant 'fast'"), "{err}");
    }

    #[test]
    fn refuses_a_mask_openssl_would_misread_in_one_line() {
        for bad in [
            "ia32cap:zz",
            "ia32cap:",
            "ia32cap:~0x1g:~0",
            "ia32cap:~0::~0",
        ] {
            let err = format!("{:#}", Variant::parse(bad).unwrap_err());
            assert!(err.starts_with("invalid OPENSSL_ia32cap mask"), "{err}");
            assert!(err.contains("e.g. ia32cap:~0x200000200000000"), "{err}");
            assert!(!err.contains('\n'));
        }
    }

    #[test]
    fn names_variants_as_records_always_have() {
        let v = parse_variants("accel, noaesni ,ia32cap:~0x0:~0x60000000000").unwrap();
        let names: Vec<String> = v.iter().map(Variant::name).collect();
        assert_eq!(names, ["accel", "noaesni", "ia32cap:~0x0:~0x60000000000"]);
        assert!(v[0].is_accel() && !v[1].is_accel() && !v[2].is_accel());
    }

    #[test]
    fn a_masking_variant_whose_treatment_fell_and_controls_held_took_effect() {
        let accel = accel_probes();
        let mine = probes(NOAESNI, 0.33e9, 3.8e9, 30e6);
        let r = judged(
            &Variant::noaesni(),
            Some(mask::NOAESNI_FIVE_FIELDS),
            &mine,
            &accel,
        );
        assert!(r.took_effect, "{r:?}");
        let e = r.effect.unwrap();
        assert_eq!(e.verdict, Verdict::TookEffect);
        assert!(e.reason.contains("aes-128-gcm fell 33.3x"), "{}", e.reason);
        assert_eq!(e.ratios.len(), 3);
        assert_eq!(e.working_mask, None);
        assert!(!r.aesni && !r.pclmulqdq);
    }

    #[test]
    fn a_treatment_that_did_not_move_is_flagged_with_the_mask_that_works() {
        // The old mask on 3.6.3: the VAES path keeps AES-GCM at full speed.
        let accel = accel_probes();
        let mine = probes(OLD_MASK, 10.8e9, 3.7e9, 31e6);
        let v = Variant::parse("ia32cap:~0x200000200000000:~0x0").unwrap();
        let r = judged(&v, Some("~0x200000200000000:~0x0"), &mine, &accel);
        assert!(!r.took_effect);
        let e = r.effect.as_ref().unwrap();
        assert_eq!(e.verdict, Verdict::TreatmentDidNotMove);
        assert_eq!(
            e.working_mask.as_deref(),
            Some("~0x200000200000000:~0x60000000000:~0:~0:~0")
        );
        assert!(
            r.explanation().contains("missed the AES-GCM path"),
            "{}",
            r.explanation()
        );
        // 2.5x is not enough either.
        let half = probes(OLD_MASK, 4.4e9, 3.7e9, 31e6);
        assert!(!judged(&Variant::noaesni(), None, &half, &accel).took_effect);
    }

    #[test]
    fn a_control_that_moved_is_flagged() {
        // The second word zeroed: AES falls, and ChaCha20 loses AVX-512 too.
        let accel = accel_probes();
        let mine = probes(NOAESNI, 0.33e9, 0.9e9, 31e6);
        let r = judged(
            &Variant::parse("ia32cap:~0x200000200000000").unwrap(),
            Some("~0x200000200000000"),
            &mine,
            &accel,
        );
        let e = r.effect.unwrap();
        assert!(!r.took_effect);
        assert_eq!(e.verdict, Verdict::ControlMoved);
        assert!(e.reason.contains("chacha20-poly1305 0.24x"), "{}", e.reason);
        assert!(e.working_mask.is_some());
        // 3DES moving alone is enough.
        let des = probes(NOAESNI, 0.33e9, 3.7e9, 20e6);
        assert!(!judged(&Variant::noaesni(), None, &des, &accel).took_effect);
        // Within the tolerance is not a move.
        let ok = probes(NOAESNI, 0.33e9, 3.7e9 * 0.8, 31e6 * 1.2);
        assert!(judged(&Variant::noaesni(), None, &ok, &accel).took_effect);
    }

    #[test]
    fn a_cpu_without_aes_has_nothing_to_mask() {
        let accel = probes("OPENSSL_ia32cap=0xfdfa32014f8bffff:0x0", 0.3e9, 1.0e9, 30e6);
        let r = judge(
            &Variant::noaesni(),
            &Facts {
                settings: &accel.cpu_settings,
                cpu_has_aes: false,
                cpu_flags: &[],
                mask: Some(mask::NOAESNI_FIVE_FIELDS),
                probes: Some(&accel),
                accel_probes: Some(&accel),
                process_check: None,
            },
        );
        assert!(!r.took_effect);
        assert!(r.explanation().contains("no AES-NI"), "{}", r.explanation());
        assert_eq!(r.effect.unwrap().working_mask, None);
    }

    #[test]
    fn other_user_masks_took_effect_if_the_vector_changed_and_say_what_moved() {
        let accel = accel_probes();
        let vaes_off =
            "OPENSSL_ia32cap=0xfffa32034f8bffff:0x1b4159def1bf27eb env:~0:~0x60000000000:~0:~0:~0";
        let mine = probes(vaes_off, 4.5e9, 3.7e9, 31e6);
        let v = Variant::parse("ia32cap:~0:~0x60000000000:~0:~0:~0").unwrap();
        let r = judged(&v, Some("~0:~0x60000000000:~0:~0:~0"), &mine, &accel);
        assert!(r.took_effect);
        assert!(
            r.explanation().contains("aes-128-gcm 0.41x"),
            "{}",
            r.explanation()
        );
        let same = probes(ACCEL, 11e9, 3.7e9, 31e6);
        let r = judged(
            &Variant::parse("ia32cap:~0:~0").unwrap(),
            Some("~0:~0"),
            &same,
            &accel,
        );
        assert!(!r.took_effect);
        assert_eq!(r.effect.unwrap().verdict, Verdict::Unchanged);
    }

    #[test]
    fn a_moved_control_or_a_grey_treatment_is_measured_again_and_a_clear_one_is_not() {
        let accel = accel_probes();
        let judged_noaesni = |p: &Probes| judged(&Variant::noaesni(), None, p, &accel);
        // 3DES 1.30x on a busy machine: measured again.
        assert!(needs_confirmation(&judged_noaesni(&probes(
            NOAESNI, 0.33e9, 3.7e9, 40e6
        ))));
        // 2.2x: between no effect and the factor.
        assert!(needs_confirmation(&judged_noaesni(&probes(
            NOAESNI, 5e9, 3.7e9, 31e6
        ))));
        // 3.5x: took effect, but close to the factor.
        assert!(needs_confirmation(&judged_noaesni(&probes(
            NOAESNI, 3.1e9, 3.7e9, 31e6
        ))));
        // Clear either way: 33x with the controls put, or 1.02x.
        assert!(!needs_confirmation(&judged_noaesni(&probes(
            NOAESNI, 0.33e9, 3.7e9, 31e6
        ))));
        assert!(!needs_confirmation(&judged_noaesni(&probes(
            OLD_MASK, 10.8e9, 3.7e9, 31e6
        ))));
        // A mask whose factor is 1.5x (IFMA's RSA sign): 1.47x is near, 1.2x is not.
        let mut near = judged_noaesni(&probes(NOAESNI, 5e9, 3.7e9, 31e6));
        let set = |r: &mut VariantRecord, slowdown: f64| {
            let e = r.effect.as_mut().unwrap();
            e.treatment_factor = 1.5;
            for ratio in &mut e.ratios {
                if ratio.role == ProbeRole::Treatment {
                    ratio.slowdown = slowdown;
                }
            }
        };
        set(&mut near, 1.47);
        assert!(needs_confirmation(&near));
        set(&mut near, 1.2);
        assert!(!needs_confirmation(&near));
    }

    #[test]
    fn probe_sets_combine_into_their_median_with_every_round() {
        let sets = [
            probes(ACCEL, 10e9, 3.0e9, 20e6),
            probes(ACCEL, 12e9, 4.0e9, 30e6),
        ];
        let c = combine(&sets, "both").unwrap();
        assert_eq!(c.figure("aes-128-gcm").unwrap().bytes_per_cpu_sec, 11e9);
        assert_eq!(
            c.figure("des-ede3-cbc")
                .unwrap()
                .rounds_bytes_per_cpu_sec
                .len(),
            6
        );
        assert_eq!(c.measured_in, "both");
        assert!(combine(&[], "none").is_none());
    }

    #[test]
    fn the_confirmation_judges_round_by_round_ratios_so_one_slow_round_is_outvoted() {
        // The variant masks AES (GCM 20x slower) and leaves ChaCha and 3DES alone;
        // a slow spell (0.7x for everything) covers the variant's first probe and
        // accel's second one.
        let accel = [
            probes(ACCEL, 10e9, 2e9, 100e6),
            probes(ACCEL, 7e9, 1.4e9, 70e6),
            probes(ACCEL, 10e9, 2e9, 100e6),
        ];
        let mine = [
            probes(NOAESNI, 0.35e9, 1.4e9, 70e6),
            probes(NOAESNI, 0.35e9, 1.4e9, 70e6),
            probes(NOAESNI, 0.5e9, 2e9, 100e6),
        ];
        // Each side's own median would say the controls moved by 30 %.
        let (a, m) = (combine(&accel, "a").unwrap(), combine(&mine, "m").unwrap());
        let chacha = |p: &Probes| p.figure("chacha20-poly1305").unwrap().bytes_per_cpu_sec;
        assert!((chacha(&m) / chacha(&a) - 0.7).abs() < 1e-9);
        // Round by round, the ratios are 0.7, 1.0, 1.0: the controls did not move.
        let (a, m) = combine_paired(&accel, &mine).unwrap();
        assert!((chacha(&m) / chacha(&a) - 1.0).abs() < 1e-9);
        let gcm = |p: &Probes| p.figure("aes-128-gcm").unwrap().bytes_per_cpu_sec;
        assert!(
            (gcm(&a) / gcm(&m) - 20.0).abs() < 1e-6,
            "{}",
            gcm(&a) / gcm(&m)
        );
        let r = judged(&Variant::noaesni(), None, &m, &a);
        assert!(r.took_effect, "{}", r.explanation());
        // All of the rounds stay in the record.
        let des = m.figure("des-ede3-cbc").unwrap();
        assert_eq!(des.rounds_bytes_per_cpu_sec.len(), 9);
    }

    #[test]
    fn a_control_held_if_it_moved_no_more_than_accel_against_itself_up_to_the_limit() {
        // accel's five processes spread 0.70-1.30x around their median on ChaCha; the
        // variant's ChaCha ran at 0.72x of accel round by round: inside accel's own
        // spread, so no evidence the mask reached it.
        let spread = [1.0, 0.7, 1.3, 1.0, 1.0];
        let accel: Vec<Probes> = spread
            .iter()
            .map(|k| probes(ACCEL, 10e9, 2e9 * k, 100e6))
            .collect();
        let mine: Vec<Probes> = spread
            .iter()
            .map(|k| probes(NOAESNI, 0.4e9, 2e9 * k * 0.72, 100e6))
            .collect();
        let (a, m) = combine_paired(&accel, &mine).unwrap();
        let r = judged(&Variant::noaesni(), None, &m, &a);
        assert!(r.took_effect, "{}", r.explanation());
        let e = r.effect.unwrap();
        assert!(
            e.reason
                .contains("chacha20-poly1305 0.72x (accel against itself 0.70-1.30x)"),
            "{}",
            e.reason
        );
        assert!(e.reason.contains("or as far as accel moved against itself"));
        // The same move with accel steady is a move.
        let steady: Vec<Probes> = (0..5).map(|_| probes(ACCEL, 10e9, 2e9, 100e6)).collect();
        let (a, m) = combine_paired(&steady, &mine).unwrap();
        let r = judged(&Variant::noaesni(), None, &m, &a);
        assert_eq!(r.effect.unwrap().verdict, Verdict::ControlMoved);
        // However noisy accel is, a control at 1/1.5 or beyond moved: the band stops
        // at CONTROL_BAND_LIMIT.
        let wild = [1.0, 0.4, 2.0, 1.0, 1.0];
        let accel: Vec<Probes> = wild
            .iter()
            .map(|k| probes(ACCEL, 10e9, 2e9 * k, 100e6))
            .collect();
        let mine: Vec<Probes> = wild
            .iter()
            .map(|k| probes(NOAESNI, 0.4e9, 2e9 * k * 0.6, 100e6))
            .collect();
        let (a, m) = combine_paired(&accel, &mine).unwrap();
        let r = judged(&Variant::noaesni(), None, &m, &a);
        let e = r.effect.unwrap();
        assert_eq!(e.verdict, Verdict::ControlMoved, "{}", e.reason);
        assert!(
            e.reason
                .contains("chacha20-poly1305 0.60x (accel against itself 0.67-1.50x)"),
            "{}",
            e.reason
        );
    }

    #[test]
    fn accel_is_the_baseline_only_without_a_mask_and_with_the_cpu_s_aes_ni() {
        let accel = accel_probes();
        let r = judged(&Variant::accel(), None, &accel, &accel);
        assert!(r.took_effect && r.aesni && r.pclmulqdq);
        assert_eq!(r.effect.unwrap().verdict, Verdict::Baseline);
        let leaked = probes(OLD_MASK, 11e9, 3.7e9, 31e6);
        assert!(!judged(&Variant::accel(), None, &leaked, &accel).took_effect);
        let without_aes_in_cpu = judge(
            &Variant::accel(),
            &Facts {
                settings: ACCEL,
                cpu_has_aes: false,
                cpu_flags: &[],
                mask: None,
                probes: Some(&accel),
                accel_probes: Some(&accel),
                process_check: None,
            },
        );
        assert!(!without_aes_in_cpu.took_effect);
    }

    #[test]
    fn a_variant_without_probes_or_with_a_failed_process_check_is_not_taken() {
        let accel = accel_probes();
        let none = judge(
            &Variant::noaesni(),
            &Facts {
                settings: NOAESNI,
                cpu_has_aes: true,
                cpu_flags: &[],
                mask: None,
                probes: None,
                accel_probes: Some(&accel),
                process_check: None,
            },
        );
        assert!(!none.took_effect);
        assert_eq!(none.effect.unwrap().verdict, Verdict::Unjudged);
        let mine = probes(NOAESNI, 0.33e9, 3.7e9, 31e6);
        let check = ProcessCheck {
            what: "OPENSSL_ia32cap in /proc/<pid>/environ of nginx's workers".into(),
            passed: false,
            detail: "expected ~0; found 12: unset".into(),
        };
        let r = judge(
            &Variant::noaesni(),
            &Facts {
                settings: NOAESNI,
                cpu_has_aes: true,
                cpu_flags: &[],
                mask: None,
                probes: Some(&mine),
                accel_probes: Some(&accel),
                process_check: Some(&check),
            },
        );
        assert!(!r.took_effect);
        assert!(
            r.explanation().contains("found 12: unset"),
            "{}",
            r.explanation()
        );
    }
}
