//! Whether a variant did what it means, decided from facts: [`judge`] is a pure
//! function of the variant's probes, accel's probes in the same layer, the vector
//! the library reported and the CPU's flags; [`judge_layer_fallback`] and
//! [`needs_confirmation`] read a judgement. Gathering the facts is `facts.rs`'s.

use super::{mask, Variant};
use cipherbench_model::env::Ia32Cap;
use cipherbench_model::variant::{
    tolerance_text, Effect, Expected, ProbeRatio, ProbeRole, Probes, ProcessCheck, VariantRecord,
    Verdict, PROBE_CONTROL_TOLERANCE, TREATMENT_FACTOR,
};

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

/// A stand-in's judgement (a `__variant-probe` child with the environment of nginx,
/// charon or the `openssl` CLI) checked against the real process: the verdict stands (its
/// confirmation, if it had one, is not measured again for every process started
/// with the same environment), unless the real process does not run under that
/// environment, which leaves it unjudged. Pure.
pub fn with_check(record: &VariantRecord, check: ProcessCheck) -> VariantRecord {
    let mut record = record.clone();
    if !check.passed {
        record.effect = Some(failed_check(&check));
        record.took_effect = false;
    }
    record.process_check = Some(check);
    record
}

fn failed_check(check: &ProcessCheck) -> Effect {
    verdict(
        Verdict::Unjudged,
        format!(
            "the probes ran in a stand-in process, and the real one does not run under the same environment ({}: {})",
            check.what, check.detail
        ),
    )
}

fn effect_of(variant: &Variant, facts: &Facts, cap: Option<Ia32Cap>, aesni: bool) -> Effect {
    if let Some(check) = facts.process_check.filter(|c| !c.passed) {
        return failed_check(check);
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
        // Near its own factor: AES's 3x (up to 4.5x), IFMA's 1.5x (up to 2.25x).
        Verdict::TookEffect => treatment < effect.treatment_factor * 1.5,
        _ => false,
    }
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}
