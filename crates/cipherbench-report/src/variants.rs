//! Variants in every rendering. A variant that did not take effect is named as such
//! wherever its figures appear (a `!` after its name in terminal tables, a red note
//! in HTML), with its reason and the mask that would work, and no ratio from it is
//! presented: the cell says `n/a: noaesni did not take effect` instead.

use crate::svg::escape;
use cipherbench_model::units::format_bytes_per_sec;
use cipherbench_model::variant::{self, ProbeRole, VariantRecord};
use cipherbench_model::RunRecord;

/// Every layer's variant records: (layer, records); the TLS layer's one per variant
/// (the first server where it did not take effect, if any).
pub fn of_record(record: &RunRecord) -> Vec<(&'static str, Vec<VariantRecord>)> {
    let mut out = Vec::new();
    if let Some(s) = &record.speed {
        out.push(("speed", s.variants.clone()));
    }
    if let Some(f) = &record.file {
        out.push(("file", f.variants.clone()));
    }
    if let Some(t) = &record.tls {
        let servers: Vec<VariantRecord> = t
            .servers
            .iter()
            .filter(|s| s.kind == "nginx")
            .map(|s| s.variant.clone())
            .collect();
        let mut one_each: Vec<VariantRecord> = Vec::new();
        for r in &servers {
            if !one_each.iter().any(|o| o.name == r.name) {
                one_each.extend(variant::find(&servers, &r.name).cloned());
            }
        }
        // A provider or engine variant: each server's own judgement (they differ by
        // the suite's cipher: one may have run, another fallen back).
        for r in servers.iter().filter(|r| r.expected.is_some()) {
            if !one_each
                .iter()
                .any(|o| o.name == r.name && o.implementation_line() == r.implementation_line())
            {
                one_each.push(r.clone());
            }
        }
        out.push(("tls", one_each));
    }
    if let Some(t) = &record.tunnel {
        out.push(("tunnel", t.judged_variants()));
        if let Some(s) = &t.strongswan {
            out.push(("tunnel (strongSwan's charon)", s.variants.clone()));
        }
    }
    out.retain(|(_, v)| !v.is_empty());
    out
}

/// The record of `name` if it did not take effect.
pub fn ineffective<'a>(records: &'a [VariantRecord], name: &str) -> Option<&'a VariantRecord> {
    variant::find(records, name).filter(|r| !r.took_effect)
}

/// What stands in place of a ratio between `names`, if one of them did not take
/// effect: `n/a: noaesni did not take effect`.
pub fn not_applicable(records: &[VariantRecord], names: &[&str]) -> Option<String> {
    variant::ineffective(records, names).and_then(VariantRecord::not_applicable)
}

/// What stands in place of a ratio of `cipher` between `names`: one of them did
/// not take effect, or its work on `cipher` fell back to the default provider
/// (`n/a: fallback: default provider served chacha20-poly1305`).
pub fn not_applicable_for(
    records: &[VariantRecord],
    names: &[&str],
    cipher: &str,
) -> Option<String> {
    names
        .iter()
        .filter_map(|n| variant::find(records, n))
        .find_map(|r| r.fallback(cipher).map(|f| format!("n/a: {f}")))
        .or_else(|| not_applicable(records, names))
}

/// A variant's name in a terminal table: `noaesni!` if it did not take effect.
pub fn text_name(records: &[VariantRecord], name: &str) -> String {
    if ineffective(records, name).is_some() {
        format!("{name}!")
    } else {
        name.to_string()
    }
}

/// The fallback of `cipher` in the record of `name`, if any.
pub fn find_fallback(records: &[VariantRecord], name: &str, cipher: &str) -> Option<String> {
    variant::find(records, name).and_then(|r| r.fallback(cipher))
}

/// Whether a row of `cipher` with variant `name` shows figures that are not what the
/// name says: the variant did not take effect, or (a provider or engine variant)
/// its work on this cipher fell back. A provider variant's record per server says
/// who served that server's cipher, so a server of another cipher that fell back
/// does not mark this one.
fn flagged_for(records: &[VariantRecord], name: &str, cipher: Option<&str>) -> bool {
    let mine: Vec<&VariantRecord> = records.iter().filter(|r| r.name == name).collect();
    match cipher {
        Some(c) if mine.iter().any(|r| r.expected.is_some()) => mine.iter().any(|r| {
            r.fallback(c).is_some()
                || (!r.took_effect
                    && r.effect.as_ref().map(|e| e.verdict)
                        != Some(cipherbench_model::variant::Verdict::Fallback))
        }),
        _ => ineffective(records, name).is_some(),
    }
}

/// [`text_name`] for a row of one cipher.
pub fn text_name_for(records: &[VariantRecord], name: &str, cipher: Option<&str>) -> String {
    if flagged_for(records, name, cipher) {
        format!("{name}!")
    } else {
        name.to_string()
    }
}

/// [`html_name`] for a row of one cipher.
pub fn html_name_for(records: &[VariantRecord], name: &str, cipher: Option<&str>) -> String {
    if flagged_for(records, name, cipher) {
        format!(
            "{} <span class=\"bad\">did not take effect</span>",
            escape(name)
        )
    } else {
        escape(name)
    }
}

/// A variant's name in an HTML cell, escaped, with a red note if it did not take
/// effect.
pub fn html_name(records: &[VariantRecord], name: &str) -> String {
    match ineffective(records, name) {
        Some(_) => format!(
            "{} <span class=\"bad\">did not take effect</span>",
            escape(name)
        ),
        None => escape(name),
    }
}

/// The legend under a terminal table that marked a variant.
pub fn text_legend(records: &[VariantRecord], names: &[String]) -> String {
    if names.iter().any(|n| ineffective(records, n).is_some()) {
        "(! after a variant: it did not take effect, so its figures are not what its name says; ratios with it are not shown; see 'variant' below)\n".into()
    } else {
        String::new()
    }
}

/// One variant in a line: its mask, and whether it took effect with the figures
/// behind the verdict (or why not, and the mask that works).
pub fn line(v: &VariantRecord) -> String {
    let mask = match &v.ia32cap_env {
        // A user mask is in the name already.
        Some(_) if v.name.starts_with("ia32cap:") => String::new(),
        Some(m) => format!("OPENSSL_ia32cap={m}; "),
        None => "OPENSSL_ia32cap unset; ".into(),
    };
    let verdict = match (&v.effect, v.took_effect) {
        (Some(e), true) => format!("took effect: {}", e.reason),
        (None, true) => format!("{} (as intended)", v.cpu_settings),
        (_, false) => format!("DID NOT TAKE EFFECT: {}", v.explanation()),
    };
    let implementation = v
        .implementation_line()
        .map(|l| format!("\n  implementation: {l}"))
        .unwrap_or_default();
    format!("variant {:<8} {mask}{verdict}{implementation}\n", v.name)
}

/// The variants of a layer as an HTML table: mask, where the probes ran, the probes
/// against accel's, the verdict and its reason.
pub fn html_table(records: &[VariantRecord]) -> String {
    if records.is_empty() {
        return String::new();
    }
    let mut out = String::from("<div class=\"scroll\"><table><tr><th class=\"l\">variant</th><th class=\"l\">OPENSSL_ia32cap</th><th class=\"l\">effective vector</th><th class=\"l\">probes measured in</th><th class=\"l\">AES-128-GCM probe</th><th class=\"l\">controls (of accel)</th><th>took effect</th><th class=\"l\">why</th></tr>");
    for v in records {
        let ratios = v
            .effect
            .as_ref()
            .map(|e| e.ratios.as_slice())
            .unwrap_or(&[]);
        let treatment = match (
            ratios.iter().find(|r| r.role == ProbeRole::Treatment),
            v.probes.as_ref().and_then(|p| p.figure("aes-128-gcm")),
        ) {
            (Some(r), _) => format!(
                "{} ({:.1}× slower than accel)",
                format_bytes_per_sec(r.variant_bytes_per_cpu_sec),
                r.slowdown
            ),
            (None, Some(f)) => format_bytes_per_sec(f.bytes_per_cpu_sec),
            (None, None) => "–".into(),
        };
        let controls = ratios
            .iter()
            .filter(|r| r.role == ProbeRole::Control)
            .map(|r| {
                let text = format!("{} {:.2}×", r.cipher, 1.0 / r.slowdown);
                if r.moved {
                    format!("<span class=\"bad\">{}</span>", escape(&text))
                } else {
                    escape(&text)
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        out.push_str(&format!(
            "<tr><td class=\"l\">{}</td><td class=\"l\"><code>{}</code></td><td class=\"l\"><code>{}</code></td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
            escape(&v.name),
            escape(v.ia32cap_env.as_deref().unwrap_or("(unset)")),
            escape(&v.cpu_settings),
            escape(v.probes.as_ref().map(|p| p.measured_in.as_str()).unwrap_or("–")),
            escape(&treatment),
            if controls.is_empty() { "–".into() } else { controls },
            if v.took_effect {
                "<span class=\"ok\">yes</span>"
            } else {
                "<span class=\"bad\">no</span>"
            },
            match v.implementation_line() {
                Some(l) => format!(
                    "{}<br>implementation: {}",
                    escape(&v.explanation()),
                    implementation_html(&l)
                ),
                None => escape(&v.explanation()),
            }
        ));
    }
    out.push_str("</table></div>");
    out
}

/// An implementation line in HTML, each fallback in red.
pub fn implementation_html(line: &str) -> String {
    line.split("; ")
        .map(|part| {
            if part.starts_with("fallback:") {
                format!("<span class=\"bad\">{}</span>", escape(part))
            } else {
                escape(part)
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, took_effect: bool) -> VariantRecord {
        VariantRecord {
            name: name.into(),
            ia32cap_env: Some("~0x200000200000000:~0x0".into()),
            cpu_settings: "OPENSSL_ia32cap=0x1:0x2".into(),
            aesni: false,
            pclmulqdq: false,
            took_effect,
            probes: None,
            effect: None,
            process_check: None,
            expected: None,
            provider_calls: None,
        }
    }

    #[test]
    fn marks_an_ineffective_variant_and_refuses_its_ratios() {
        let records = [record("accel", true), record("noaesni", false)];
        assert_eq!(text_name(&records, "noaesni"), "noaesni!");
        assert_eq!(text_name(&records, "accel"), "accel");
        assert!(html_name(&records, "noaesni").contains("did not take effect"));
        assert_eq!(
            not_applicable(&records, &["accel", "noaesni"]).as_deref(),
            Some("n/a: noaesni did not take effect")
        );
        assert!(line(&records[1]).contains("DID NOT TAKE EFFECT"));
        assert!(html_table(&records).contains("<span class=\"bad\">no</span>"));
        let good = [record("accel", true), record("noaesni", true)];
        assert_eq!(not_applicable(&good, &["accel", "noaesni"]), None);
        assert_eq!(text_legend(&good, &["noaesni".into()]), "");
    }
}
