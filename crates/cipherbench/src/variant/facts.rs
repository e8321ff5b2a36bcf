//! The facts a variant is judged by, gathered: accel's probes in a child under each
//! library ([`Baseline`]), the confirmation measured again back to back, the
//! stand-in probe children of programs that cannot run the probe (nginx, charon,
//! the `openssl` CLI) and the checks of those programs' own processes.

use super::judge::{judge, needs_confirmation, Facts};
use super::{libraries_of, Variant};
use crate::library::Library;
use crate::supervisor::Spawn;
use anyhow::{bail, Context, Result};
use cipherbench_model::variant::{ProbeFigure, Probes, ProcessCheck, VariantRecord};
use std::collections::BTreeMap;
use std::time::Duration;

/// Rounds of the confirmation ([`Baseline::judge`]): accel and the variant
/// alternately, this many times each. With two, each side the median of its own
/// sets, a slow spell over both of the variant's probes moved the controls by
/// 14-25 % on a quiet 2-vCPU guest (tunnel_root's gateway probe test failed so on
/// 2026-11-29), and with three the handshake test's IFMA mask still saw AES-GCM at
/// 0.73x of accel: on that guest consecutive 200 ms samples of AES-GCM alone ranged
/// 2.72-3.87 GB/s. A median of five round-by-round ratios outvotes two slow rounds.
pub const CONFIRMATION_ROUNDS: usize = 5;

/// How many confirmations a judgement gets: a second one when the first still did
/// not take effect for a reason a busy spell can give (a control moved, or the
/// treatment near its factor). A mask that reaches a control moves it in every one,
/// and one that misses its path leaves the treatment near 1.0x; a busy spell on a
/// shared host passes (the Debian 13 root's quick preset in a clean-clone `make
/// test` saw every public-key control of noaesni at 1.46-1.66x in the speed worker,
/// then at 0.73-0.80x in the confirmation, while the same probes held within
/// 0.85-1.06x quiet).
pub const CONFIRMATIONS: usize = 2;

/// accel's and the variant's probe sets, measured alternately in rounds: accel's
/// figure per cipher is the median of its sets; the variant's is that times the
/// median of the round-by-round ratios (variant over the accel probe just before
/// it), so a slow spell that covers one round moves neither side's figure, and the
/// judge's slowdown (accel over variant) is the median ratio's inverse.
pub(super) fn combine_paired(accel: &[Probes], mine: &[Probes]) -> Option<(Probes, Probes)> {
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
pub(super) fn combine(sets: &[Probes], measured_in: &str) -> Option<Probes> {
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
            // Measured once more if it still did not take effect for a reason a busy
            // spell can give: a control moved, or the treatment fell short of its
            // factor but not far (noifma's RSA sign, 1.7-2.3x here quiet, read 1.49x
            // against its 1.5x once, with accel's own sets spread 0.67-1.05x).
            let took = second
                .effect
                .as_ref()
                .is_some_and(|e| e.verdict.took_effect());
            if took || !needs_confirmation(&second) {
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
