//! Acceleration variants as the record keeps them: how each was set up, what its
//! effect probes measured in the variant's own process, and the verdict on whether
//! the variant did what it means.
//!
//! A variant is judged by effect, not by the bits of its mask: a short treatment
//! probe (AES-128-GCM) must fall by [`TREATMENT_FACTOR`] and each control probe
//! (ChaCha20-Poly1305, 3DES) must stay within [`PROBE_CONTROL_TOLERANCE`] of accel's
//! (METHODOLOGY.md, "Variants are judged by effect"). The judging itself is the app's
//! (`variant::judge`); this module holds the data and the few readings every
//! renderer needs, so that no layer's report can present a ratio from a variant that
//! did not take effect.

use serde::{Deserialize, Serialize};

/// A masking variant took effect only if its treatment probe ran at least this many
/// times slower than accel's. AES-NI against its software fallback is 10x or more on
/// every x86 CPU with AES-NI we have seen (14x for Debian's 3.0.19 and 33x for 3.6.3
/// here); a mask that missed the path the library takes moves it by 1.0-2.5x.
pub const TREATMENT_FACTOR: f64 = 3.0;

/// A control probe stayed put if its rate is within this fraction of accel's. The
/// probes are tens of milliseconds of one thread's CPU time, so a busy machine moves
/// them less than wall-clock figures but more than a long measurement; a mask that
/// reaches a control's code (the second word zeroed: ChaCha20 loses AVX-512) moves it
/// by 1.5x or more.
pub const PROBE_CONTROL_TOLERANCE: f64 = 0.25;

/// The widest a control's band may grow to cover accel's own spread
/// ([`ProbeRatio::band`]): a mask that reaches a control's code moves it by 1.5x or
/// more, which must still show however noisy the machine.
pub const CONTROL_BAND_LIMIT: f64 = 1.5;

/// What a probe is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProbeRole {
    /// The code the variant means to change (AES-GCM: AES and GHASH).
    Treatment,
    /// Code the variant must leave alone (ChaCha20-Poly1305, 3DES).
    Control,
    /// Code the variant moves by design but does not aim at (ChaCha20-Poly1305 under
    /// a mask of AVX-512 IFMA, which Poly1305 uses too): neither judged nor a control.
    Affected,
}

/// One probe: a short measurement of one cipher in the variant's process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProbeFigure {
    /// Cipher, in the catalogue's spelling (`aes-128-gcm`).
    pub cipher: String,
    /// Treatment or control.
    pub role: ProbeRole,
    /// Bytes per operation (one message: nonce, 13 bytes of AAD, payload, tag).
    pub size_bytes: u64,
    /// Encrypted bytes per second of the measuring thread's CPU time: the median of
    /// the rounds.
    pub bytes_per_cpu_sec: f64,
    /// Each round's rate, in the order measured (rounds of the probes interleave).
    pub rounds_bytes_per_cpu_sec: Vec<f64>,
    /// Where the figure combines several probe processes (the confirmation's
    /// alternating children): each process's figure, in the order measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sets_bytes_per_cpu_sec: Vec<f64>,
}

impl ProbeFigure {
    /// The spread of the process figures behind a combined figure, each over their
    /// median: `[lowest, highest]`, from three or more processes; None otherwise.
    /// accel against itself: how far a control moves with no mask at all.
    pub fn spread(&self) -> Option<[f64; 2]> {
        let sets = &self.sets_bytes_per_cpu_sec;
        let median = crate::Summary::of(sets)?.median;
        (sets.len() >= 3 && median > 0.0).then(|| {
            let lo = sets.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = sets.iter().copied().fold(0.0, f64::max);
            [lo / median, hi / median]
        })
    }
}

/// What one variant's process measured before its real work, and what it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Probes {
    /// `OpenSSL_version(OPENSSL_VERSION)` of the library that process loaded.
    pub library_version: String,
    /// `OPENSSL_info(OPENSSL_INFO_CPU_SETTINGS)` in that process.
    pub cpu_settings: String,
    /// Which process measured: `speed worker`, `tunnel gateway`, or the probe child
    /// started with another program's environment (`__variant-probe with nginx's
    /// environment`).
    pub measured_in: String,
    /// The probes, treatment first.
    pub figures: Vec<ProbeFigure>,
    /// Which implementation that process's library gives each algorithm the layers
    /// fetch: asked of the library itself, in the same process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implementation: Option<Implementation>,
}

/// The provider that serves a fetched algorithm when nothing else does: what a
/// provider variant's work falls back to.
pub const DEFAULT_PROVIDER: &str = "default";

/// Which implementation served one OpenSSL algorithm in one process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Served {
    /// The catalogue cipher it is part of (`aes-256-cbc-hmac-sha256`).
    pub cipher: String,
    /// OpenSSL's algorithm name as fetched (`AES-256-CBC`, `SHA256`).
    pub algorithm: String,
    /// `cipher` or `digest`.
    pub kind: String,
    /// `OSSL_PROVIDER_get0_name` of the provider the fetch returned (None: the
    /// library had no implementation).
    pub provider: Option<String>,
    /// The ENGINE bound to the algorithm as its default (`ENGINE_get_cipher_engine`
    /// / `ENGINE_get_digest_engine`), which takes the work of programs that use the
    /// legacy `EVP_aes_128_gcm()` style (libssl, nginx) in place of the provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
}

/// What one process said about its implementations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Implementation {
    /// The providers active in the process, in the library's order.
    pub providers: Vec<String>,
    /// Every fetched algorithm and who served it.
    pub served: Vec<Served>,
    /// The CPU's vendor (`vendor_id` of `/proc/cpuinfo`).
    pub cpu_vendor: String,
}

/// The counting test provider's tally for one variant in one layer (its
/// `CIPHERBENCH_PROVIDER_COUNTER` file): an independent check that the provider took
/// work, from every process of the variant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProviderCalls {
    /// Cipher contexts the provider made.
    pub contexts: u64,
    /// Calls into the provider's cipher functions.
    pub calls: u64,
    /// Bytes through its update and one-shot functions.
    pub bytes: u64,
}

/// What a provider or engine variant expects to serve its work: the record keeps
/// it so every renderer can tell "ran" from "fell back" per algorithm.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "kind", content = "id")]
pub enum Expected {
    /// Any provider but the default one (the configuration names which).
    Provider,
    /// The engine with this id.
    Engine(String),
}

impl Expected {
    /// Whether `s` was served as expected.
    pub fn ran(&self, s: &Served) -> bool {
        match self {
            Expected::Provider => s.provider.as_deref().is_some_and(|p| p != DEFAULT_PROVIDER),
            Expected::Engine(id) => s.engine.as_deref() == Some(id.as_str()),
        }
    }

    /// Who served `s`, in a few words (`counting provider`, `default provider`,
    /// `engine pkcs11`).
    pub fn who(s: &Served) -> String {
        match (&s.engine, &s.provider) {
            (Some(e), _) => format!("engine {e}"),
            (None, Some(p)) => format!("{p} provider"),
            (None, None) => "no implementation".into(),
        }
    }
}

impl Probes {
    /// The figure of a cipher, if probed.
    pub fn figure(&self, cipher: &str) -> Option<&ProbeFigure> {
        self.figures.iter().find(|f| f.cipher == cipher)
    }
}

/// A check made on the real process when the probes ran in a stand-in child (nginx's
/// workers, the `openssl` CLI): that it runs under the same environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProcessCheck {
    /// What was compared (`OPENSSL_ia32cap in /proc/<pid>/environ of nginx's 2
    /// workers`, `openssl info -cpusettings`).
    pub what: String,
    /// It matched the probe child's environment or settings.
    pub passed: bool,
    /// What was found.
    pub detail: String,
}

/// One probe compared between accel and the variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProbeRatio {
    /// Cipher.
    pub cipher: String,
    /// Treatment or control.
    pub role: ProbeRole,
    /// accel's rate, bytes per CPU second.
    pub accel_bytes_per_cpu_sec: f64,
    /// The variant's rate.
    pub variant_bytes_per_cpu_sec: f64,
    /// accel / variant: how many times slower the variant ran (1.0: no change).
    pub slowdown: f64,
    /// Outside the control's band ([`ProbeRatio::band`]), either way.
    pub moved: bool,
    /// accel's own spread where accel was measured in several processes (the
    /// confirmation): its lowest and highest figure over their median
    /// ([`ProbeFigure::spread`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accel_spread: Option<[f64; 2]>,
}

impl ProbeRatio {
    /// The variant's rate over accel's (1.0: no change).
    pub fn relative(&self) -> f64 {
        1.0 / self.slowdown
    }

    /// The range `relative` must stay in for a control to have held: ±
    /// [`PROBE_CONTROL_TOLERANCE`], widened to accel's own spread where that was
    /// measured and wider (a variant that moves a control no more than accel moves
    /// against itself has not shown it moved it), never beyond
    /// [`CONTROL_BAND_LIMIT`] either way.
    pub fn band(&self) -> (f64, f64) {
        let (mut lo, mut hi) = (1.0 - PROBE_CONTROL_TOLERANCE, 1.0 + PROBE_CONTROL_TOLERANCE);
        if let Some([a, b]) = self.accel_spread {
            lo = lo.min(a);
            hi = hi.max(b);
        }
        (lo.max(1.0 / CONTROL_BAND_LIMIT), hi.min(CONTROL_BAND_LIMIT))
    }

    /// Outside [`ProbeRatio::band`].
    pub fn outside_band(&self) -> bool {
        let (lo, hi) = self.band();
        let r = self.relative();
        r < lo || r > hi
    }

    /// The band grew beyond ± [`PROBE_CONTROL_TOLERANCE`] to accel's own spread.
    pub fn band_widened(&self) -> bool {
        let (lo, hi) = self.band();
        lo < 1.0 - PROBE_CONTROL_TOLERANCE || hi > 1.0 + PROBE_CONTROL_TOLERANCE
    }

    /// `rsa2048-verify 0.73x`, with the band when it was widened: `rsa2048-verify
    /// 0.73x (accel against itself 0.70-1.21x)`.
    pub fn control_text(&self) -> String {
        let mut out = format!("{} {:.2}x", self.cipher, self.relative());
        if self.band_widened() {
            let (lo, hi) = self.band();
            out.push_str(&format!(" (accel against itself {lo:.2}-{hi:.2}x)"));
        }
        out
    }
}

/// What a judge's reason says of the controls' tolerance: `±25 % allowed`, and where
/// any control's band was widened, that it was to accel's own spread.
pub fn tolerance_text(ratios: &[ProbeRatio]) -> String {
    let base = format!("±{:.0} % allowed", PROBE_CONTROL_TOLERANCE * 100.0);
    if ratios
        .iter()
        .any(|r| r.role == ProbeRole::Control && r.band_widened())
    {
        format!("{base}, or as far as accel moved against itself, up to {CONTROL_BAND_LIMIT}x")
    } else {
        base
    }
}

/// The verdict on a variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// accel: the library's defaults (the variable removed), the baseline of the others.
    Baseline,
    /// A masking variant whose treatment fell enough while the controls held; or a
    /// user mask that changed the vector (the ratios say what moved).
    TookEffect,
    /// The treatment did not fall enough: the mask missed the path the library takes.
    TreatmentDidNotMove,
    /// The treatment fell, but a control moved too: the mask changed more than AES.
    ControlMoved,
    /// A user mask that left the vector as accel's.
    Unchanged,
    /// A provider or engine variant whose every fetched algorithm was served by the
    /// default provider: its figures are accel's, not the module's.
    Fallback,
    /// Not judged: a probe or a check could not run (the reason says which).
    Unjudged,
}

impl Verdict {
    /// Whether ratios from the variant may be presented.
    pub fn took_effect(self) -> bool {
        matches!(self, Verdict::Baseline | Verdict::TookEffect)
    }
}

/// The judgement of a variant by its probes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Effect {
    /// The verdict.
    pub verdict: Verdict,
    /// One sentence for a person: the figures behind the verdict.
    pub reason: String,
    /// Each probe against accel's (empty for accel itself).
    pub ratios: Vec<ProbeRatio>,
    /// The treatment factor used ([`TREATMENT_FACTOR`]).
    pub treatment_factor: f64,
    /// The control tolerance used ([`PROBE_CONTROL_TOLERANCE`]).
    pub control_tolerance: f64,
    /// When a mask meant to turn AES off did not: the mask that does for this library
    /// version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_mask: Option<String>,
    /// When the first judgement found a control moved (or the treatment in the grey
    /// zone) and accel and the variant were probed again back to back: what the first
    /// judgement said. The verdict, reason and ratios above are the re-measurement's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_judgement: Option<String>,
}

/// How an acceleration variant was set up, and whether it took effect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VariantRecord {
    /// `accel`, `noaesni` or `ia32cap:MASK`.
    pub name: String,
    /// `OPENSSL_ia32cap` given to the child process (None: unset).
    pub ia32cap_env: Option<String>,
    /// The vector the child's OpenSSL reported using.
    pub cpu_settings: String,
    /// Effective AES-NI bit.
    pub aesni: bool,
    /// Effective PCLMULQDQ bit.
    pub pclmulqdq: bool,
    /// The variant did what it means, judged by effect ([`Effect`]) where probes were
    /// measured; records written before the probes existed judged the bits.
    pub took_effect: bool,
    /// What the variant's process measured before its real work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<Probes>,
    /// The judgement of the probes against accel's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<Effect>,
    /// The check on the real process, where the probes ran in a stand-in child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_check: Option<ProcessCheck>,
    /// For a provider or engine variant: what should serve its work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<Expected>,
    /// For a provider or engine variant: its tally over the layer, where the
    /// provider or engine keeps one (the counting test provider and engine do).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_calls: Option<ProviderCalls>,
}

impl VariantRecord {
    /// Why the variant's figures cannot be compared with accel's, in a few words, or
    /// None if they can: what a table puts in place of a ratio.
    pub fn not_applicable(&self) -> Option<String> {
        (!self.took_effect).then(|| format!("n/a: {} did not take effect", self.name))
    }

    /// For a provider or engine variant, what served `cipher` in its process, if
    /// not what the variant is for: `fallback: default provider served
    /// chacha20-poly1305`. None if it ran where expected, or if the variant is not
    /// one of those kinds or its process did not say.
    pub fn fallback(&self, cipher: &str) -> Option<String> {
        let expected = self.expected.as_ref()?;
        let served: Vec<&Served> = self
            .probes
            .as_ref()?
            .implementation
            .as_ref()?
            .served
            .iter()
            .filter(|s| s.cipher == cipher)
            .collect();
        if served.is_empty() || served.iter().any(|s| expected.ran(s)) {
            return None;
        }
        Some(format!(
            "fallback: {} served {cipher}",
            Expected::who(served[0])
        ))
    }

    /// What stands in place of a ratio of `cipher` with this variant: the variant
    /// did not take effect, or its work on `cipher` fell back.
    pub fn not_applicable_for(&self, cipher: &str) -> Option<String> {
        self.fallback(cipher)
            .map(|f| format!("n/a: {f}"))
            .or_else(|| self.not_applicable())
    }

    /// For a provider or engine variant: who served each cipher its process
    /// fetched, grouped, and the counting provider's tally: `ran: counting provider
    /// served aes-128-gcm; fallback: default provider served aes-256-gcm,
    /// chacha20-poly1305; 253226 provider calls, 6 contexts, 1037962894 bytes`. None
    /// for other variants.
    pub fn implementation_line(&self) -> Option<String> {
        let expected = self.expected.as_ref()?;
        let mut parts = Vec::new();
        match self.probes.as_ref().and_then(|p| p.implementation.as_ref()) {
            Some(imp) => {
                // (ran, who) -> ciphers, in first-seen order.
                let mut groups: Vec<(bool, String, Vec<&str>)> = Vec::new();
                let mut seen: Vec<&str> = Vec::new();
                for s in &imp.served {
                    if seen.contains(&s.cipher.as_str()) {
                        continue;
                    }
                    seen.push(&s.cipher);
                    let parts_of: Vec<&Served> =
                        imp.served.iter().filter(|t| t.cipher == s.cipher).collect();
                    let by = parts_of
                        .iter()
                        .find(|t| expected.ran(t))
                        .copied()
                        .unwrap_or(parts_of[0]);
                    let key = (expected.ran(by), Expected::who(by));
                    match groups.iter_mut().find(|g| (g.0, &g.1) == (key.0, &key.1)) {
                        Some(g) => g.2.push(&s.cipher),
                        None => groups.push((key.0, key.1, vec![&s.cipher])),
                    }
                }
                groups.sort_by_key(|g| !g.0);
                for (ran, who, ciphers) in groups {
                    parts.push(format!(
                        "{}: {who} served {}",
                        if ran { "ran" } else { "fallback" },
                        ciphers.join(", ")
                    ));
                }
            }
            None => parts.push("its process did not say which implementation served it".into()),
        }
        if let Some(c) = &self.provider_calls {
            let whose = match expected {
                Expected::Provider => "provider",
                Expected::Engine(_) => "engine",
            };
            parts.push(format!(
                "{} {whose} calls, {} contexts, {} bytes (the {whose}'s own tally, the effect probe's AES-128-GCM included)",
                c.calls, c.contexts, c.bytes
            ));
        }
        Some(parts.join("; "))
    }

    /// The warning a layer gives when this variant did not take effect, naming where
    /// it was judged (`in the gateway`, `for nginx`; empty: the layer's own process);
    /// None if it took effect.
    pub fn not_effective_warning(&self, place: &str) -> Option<String> {
        if self.took_effect {
            return None;
        }
        let place = if place.is_empty() {
            String::new()
        } else {
            format!(" {place}")
        };
        Some(format!(
            "variant {} did not take effect{place}: {}",
            self.name,
            self.explanation()
        ))
    }

    /// The reason and, if known, the mask that would work: one line for a person.
    pub fn explanation(&self) -> String {
        let mut out = match &self.effect {
            Some(e) => e.reason.clone(),
            None if self.took_effect => "as intended".to_string(),
            None => format!("OpenSSL reported {}", self.cpu_settings),
        };
        if let Some(check) = self.process_check.as_ref().filter(|c| !c.passed) {
            out.push_str(&format!("; {}: {}", check.what, check.detail));
        }
        if let Some(mask) = self.effect.as_ref().and_then(|e| e.working_mask.as_ref()) {
            out.push_str(&format!("; the mask that works here: ia32cap:{mask}"));
        }
        if let Some(first) = self
            .effect
            .as_ref()
            .and_then(|e| e.first_judgement.as_ref())
        {
            out.push_str(&format!(
                " (measured again back to back with accel; the first probes said: {first})"
            ));
        }
        out
    }
}

/// The record of a variant by name among a layer's records; the first one that did
/// not take effect if several have the name (a layer with one record per server).
pub fn find<'a>(
    records: impl IntoIterator<Item = &'a VariantRecord>,
    name: &str,
) -> Option<&'a VariantRecord> {
    let mut first = None;
    for r in records.into_iter().filter(|r| r.name == name) {
        if !r.took_effect {
            return Some(r);
        }
        first.get_or_insert(r);
    }
    first
}

/// The first of the named variants that did not take effect among `records`: the one
/// whose failure makes a ratio between them not a finding.
pub fn ineffective<'a>(
    records: impl IntoIterator<Item = &'a VariantRecord> + Clone,
    names: &[&str],
) -> Option<&'a VariantRecord> {
    names
        .iter()
        .filter_map(|n| find(records.clone(), n))
        .find(|r| !r.took_effect)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, took_effect: bool) -> VariantRecord {
        VariantRecord {
            name: name.into(),
            ia32cap_env: None,
            cpu_settings: String::new(),
            aesni: true,
            pclmulqdq: true,
            took_effect,
            probes: None,
            effect: None,
            process_check: None,
            expected: None,
            provider_calls: None,
        }
    }

    #[test]
    fn a_record_without_probes_reads_as_before() {
        let old = r#"{"name":"noaesni","ia32cap_env":"~0x200000200000000:~0x0",
            "cpu_settings":"OPENSSL_ia32cap=0x1:0x2","aesni":false,"pclmulqdq":false,
            "took_effect":true}"#;
        let r: VariantRecord = serde_json::from_str(old).unwrap();
        assert!(r.took_effect && r.probes.is_none() && r.effect.is_none());
        assert_eq!(r.not_applicable(), None);
    }

    #[test]
    fn an_ineffective_variant_is_found_among_several_servers() {
        let records = [
            record("accel", true),
            record("noaesni", true),
            record("noaesni", false),
        ];
        assert!(!find(&records, "noaesni").unwrap().took_effect);
        assert_eq!(
            ineffective(&records, &["accel", "noaesni"])
                .unwrap()
                .not_applicable()
                .unwrap(),
            "n/a: noaesni did not take effect"
        );
        assert!(ineffective(&records[..2], &["accel", "noaesni"]).is_none());
    }

    #[test]
    fn a_variant_that_did_not_take_effect_is_one_warning_saying_where() {
        let noaesni = record("noaesni", false);
        assert_eq!(
            record("accel", true).not_effective_warning("in the gateway"),
            None
        );
        assert_eq!(
            noaesni.not_effective_warning("in the gateway").as_deref(),
            Some("variant noaesni did not take effect in the gateway: OpenSSL reported ")
        );
        assert_eq!(
            noaesni.not_effective_warning("").as_deref(),
            Some("variant noaesni did not take effect: OpenSSL reported ")
        );
    }

    #[test]
    fn the_explanation_names_the_mask_that_works() {
        let mut r = record("noaesni", false);
        r.effect = Some(Effect {
            verdict: Verdict::TreatmentDidNotMove,
            reason: "aes-128-gcm ran at 1.02x of accel".into(),
            ratios: vec![],
            treatment_factor: TREATMENT_FACTOR,
            control_tolerance: PROBE_CONTROL_TOLERANCE,
            working_mask: Some("~0x200000200000000:~0x60000000000:~0:~0:~0".into()),
            first_judgement: None,
        });
        assert_eq!(
            r.explanation(),
            "aes-128-gcm ran at 1.02x of accel; the mask that works here: ia32cap:~0x200000200000000:~0x60000000000:~0:~0:~0"
        );
    }
}
