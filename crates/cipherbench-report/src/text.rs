//! Terminal renderings: what a person reads at a glance after a command finishes.

use crate::variants;
use cipherbench_model::env::{split_variant_name, Environment};
use cipherbench_model::speed::{Direction, SpeedResults};
use cipherbench_model::units::{format_bytes_per_sec, ByteSize};

/// The probe, as a short human report.
#[expect(
    clippy::too_many_lines,
    reason = "the probe report in reading order, one block per finding"
)]
pub fn probe(env: &Environment) -> String {
    let mut out = String::new();
    let cpu = &env.cpu;
    out.push_str(&format!(
        "CPU        {} ({}, {}), {} logical cores{}\n",
        cpu.model,
        cpu.vendor,
        cpu.arch,
        cpu.logical_cores,
        cpu.hypervisor
            .as_ref()
            .map(|h| format!(", under {h}"))
            .unwrap_or_default()
    ));
    let flags: Vec<String> = cpu
        .crypto_flags
        .iter()
        .map(|f| format!("{}{}", if f.present { "+" } else { "-" }, f.name))
        .collect();
    out.push_str(&format!("flags      {}\n", flags.join(" ")));
    out.push_str(&format!("kernel     {} ({})\n", env.kernel, env.os));
    out.push_str(&format!(
        "OpenSSL    {} (linked)",
        env.openssl.library_version
    ));
    match &env.openssl.cli_version {
        Some(v) => out.push_str(&format!("; CLI: {v}\n")),
        None => out.push_str("; no openssl CLI on PATH\n"),
    }
    out.push_str(&format!(
        "ia32cap    {}{}\n",
        env.openssl
            .cpu_settings
            .as_deref()
            .unwrap_or("(not reported)"),
        env.openssl
            .ia32cap_env
            .as_ref()
            .map(|e| format!("  [OPENSSL_ia32cap={e} set in this environment]"))
            .unwrap_or_default()
    ));
    if let Some(path) = &env.openssl.aes_gcm_path {
        out.push_str(&format!(
            "AES-GCM    {}\n",
            path.sentence.trim_start_matches("AES-GCM: ")
        ));
    }
    out.push_str(&format!(
        "engines    {}\n",
        if env.openssl.engines.is_empty() {
            "none".to_string()
        } else {
            env.openssl.engines.join("; ")
        }
    ));
    out.push_str(&format!(
        "providers  {}\n",
        if env.openssl.providers.is_empty() {
            "none found".to_string()
        } else {
            env.openssl.providers.join(", ")
        }
    ));
    out.push_str("kernel crypto (preferred driver per algorithm):\n");
    if env.kernel_crypto.is_empty() {
        out.push_str("           none of AES, GCM, SHA registered\n");
    }
    for d in &env.kernel_crypto {
        out.push_str(&format!(
            "           {:<20} {:<28} {:<12} {}\n",
            d.algorithm,
            d.driver,
            d.module,
            if d.accelerated {
                "accelerated"
            } else {
                "not accelerated"
            }
        ));
    }
    out.push_str("offload    ");
    if env.offload_devices.is_empty() {
        out.push_str("none\n");
    } else {
        let devices: Vec<String> = env
            .offload_devices
            .iter()
            .map(|d| {
                format!(
                    "{} {} [{}] driver {}",
                    d.address,
                    d.description,
                    d.id,
                    d.driver.as_deref().unwrap_or("none")
                )
            })
            .collect();
        out.push_str(&devices.join("\n           "));
        out.push('\n');
    }
    out.push_str("\ncapability   CPU  OpenSSL  kernel  \n");
    for v in &env.verdicts {
        out.push_str(&format!(
            "{:<12} {:<4} {:<8} {:<7} {}\n",
            v.capability,
            yes_no(Some(v.in_cpu)),
            yes_no(v.used_by_openssl),
            yes_no(v.used_by_kernel),
            v.note
        ));
    }
    out
}

fn yes_no(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "-",
    }
}

/// The libraries a run measured and which one each part loaded, in the probe's
/// style: empty for a record that names none.
pub fn libraries(env: &Environment) -> String {
    let mut out = String::new();
    if env.libraries.is_empty() {
        return out;
    }
    out.push_str(
        "libraries  (the first is the baseline; later ones' variants are named accel@TAG)\n",
    );
    for l in &env.libraries {
        out.push_str(&format!(
            "  {:<10} {}  {}{}{}\n",
            l.tag
                .as_ref()
                .map(|t| format!("@{t}"))
                .unwrap_or_else(|| "baseline".into()),
            l.version,
            l.libcrypto.as_deref().unwrap_or("(libcrypto not known)"),
            if l.name == "system" {
                "  [system]".to_string()
            } else {
                format!("  [--openssl {}]", l.name)
            },
            l.cli
                .as_ref()
                .map(|c| format!(" CLI {c}"))
                .unwrap_or_default()
        ));
    }
    if !env.loaded.is_empty() {
        out.push_str(
            "loaded     (each part as it showed itself; * = held to the library asked for)\n",
        );
        for p in &env.loaded {
            let what = match (&p.version, &p.libcrypto) {
                (Some(v), Some(c)) => format!("{v}  {c}"),
                (Some(v), None) => v.clone(),
                (None, Some(c)) => c.clone(),
                (None, None) => "no libcrypto mapped".into(),
            };
            out.push_str(&format!(
                "  {:<6} {:<40} {} {}  [{}; asked: {}]\n",
                p.layer,
                p.part,
                if p.checked { "*" } else { " " },
                what,
                p.source,
                p.asked
            ));
        }
    }
    out
}

/// Layer 1 as tables: one per direction and thread count; rows are ciphers and
/// variants, columns buffer sizes, with the accel/noaesni ratio under each cipher.
#[expect(
    clippy::too_many_lines,
    reason = "layer 1's terminal tables in reading order, one block per table"
)]
pub fn speed(results: &SpeedResults) -> String {
    let mut out = String::new();
    let sizes = &results.config.sizes_bytes;
    let width = variant_width(results);
    for &threads in &results.config.threads {
        for &direction in &results.config.directions {
            let any = results
                .points
                .iter()
                .any(|p| p.threads == threads && p.direction == direction);
            if !any {
                continue;
            }
            out.push_str(&format!(
                "\n{} ({} thread{}), median throughput (decimal units: 1 GB/s = 10^9 bytes/s)\n",
                direction.as_str(),
                threads,
                if threads == 1 { "" } else { "s" }
            ));
            out.push_str(&format!("{:<24} {:<w$}", "cipher", "variant", w = width));
            for s in sizes {
                out.push_str(&format!(" {:>11}", ByteSize(*s).to_string()));
            }
            out.push('\n');
            for cipher in &results.config.ciphers {
                for variant in &results.config.variants {
                    if let Some(u) = results
                        .unavailable
                        .iter()
                        .find(|u| &u.cipher == cipher && &u.variant == variant)
                    {
                        // The sentence before OpenSSL's error code, which is in run.json.
                        let reason = u.reason.split(" (").next().unwrap_or(&u.reason);
                        out.push_str(&format!(
                            "{:<24} {:<w$} unavailable: {reason}\n",
                            cipher,
                            variants::text_name(&results.variants, variant),
                            w = width
                        ));
                        continue;
                    }
                    out.push_str(&format!(
                        "{cipher:<24} {:<width$}",
                        variants::text_name(&results.variants, variant)
                    ));
                    for &s in sizes {
                        match results.point(cipher, variant, direction, s, threads) {
                            Some(p) => {
                                let flag = crate::machine::flag(
                                    &p.noise_findings(),
                                    p.throughput_bytes_per_sec.high_spread(),
                                );
                                out.push_str(&format!(
                                    " {:>10}{flag}",
                                    format_bytes_per_sec(p.throughput_bytes_per_sec.median)
                                        .replace(" B/s", "")
                                ));
                            }
                            None => out.push_str(&format!(" {:>11}", "-")),
                        }
                    }
                    out.push('\n');
                }
                for (label, top, bottom) in ratio_rows(&results.config.variants) {
                    if let Some(ratios) =
                        ratio_row(results, cipher, direction, threads, &top, &bottom)
                    {
                        out.push_str(&format!("{:<24} {label:<width$}{ratios}\n", ""));
                    }
                }
            }
        }
    }
    if results.points.is_empty() && !results.pk_points.is_empty() {
        out.push_str(&crate::pk::text(results));
        out.push_str(&variants::text_legend(
            &results.variants,
            &results.config.variants,
        ));
        for v in &results.variants {
            out.push_str(&variants::line(v));
        }
        return out;
    }
    out.push_str(&crate::cycles::text(results));
    out.push_str(&crate::pk::text(results));
    let libraries = results
        .config
        .variants
        .iter()
        .any(|v| split_variant_name(v).1.is_some());
    out.push_str(&format!(
        "\n(~ marks a point whose samples spread more than ±{:.0} %; ratio = accel / noaesni{})\n",
        cipherbench_model::stats::HIGH_SPREAD * 100.0,
        if libraries {
            ", under the same library; @TAG/base = accel on that library / accel on the baseline library"
        } else {
            ""
        }
    ));
    if any_unclear_ratio(results) {
        out.push_str(&format!(
            "(? marks a ratio whose {:.0} % bootstrap interval over the samples holds 1.0: no clear difference)\n",
            cipherbench_model::interval::LEVEL * 100.0
        ));
    }
    if results
        .points
        .iter()
        .any(|p| !p.noise_findings().is_empty())
    {
        out.push_str(&crate::machine::noise_legend());
    }
    out.push_str(&variants::text_legend(
        &results.variants,
        &results.config.variants,
    ));
    if !results.controls.is_empty() {
        let held = results.controls.iter().filter(|c| c.held).count();
        out.push_str(&format!(
            "controls (3DES, ChaCha20-Poly1305): {held} of {} points within ±{tol:.0} % between variants",
            results.controls.len(),
            tol = cipherbench_model::speed::CONTROL_TOLERANCE * 100.0
        ));
        let worst = results.controls.iter().max_by(|a, b| {
            (a.ratio.value - 1.0)
                .abs()
                .total_cmp(&(b.ratio.value - 1.0).abs())
        });
        match worst {
            Some(w) if held < results.controls.len() => out.push_str(&format!(
                "; furthest: {} {} {} x{} at {:.2}x (noaesni/accel). A control that moves means the machine was busy or the mask changed more than AES-NI\n",
                w.cipher,
                w.direction.as_str(),
                ByteSize(w.size_bytes),
                w.threads,
                w.ratio.value
            )),
            _ if variants::ineffective(&results.variants, "noaesni").is_some() => out.push_str(
                ": noaesni did not take effect, so this says nothing about the mask\n",
            ),
            _ => out.push_str(": the mask changed AES and nothing else\n"),
        }
    }
    for v in &results.variants {
        out.push_str(&variants::line(v));
    }
    if !results.async_points.is_empty() {
        out.push_str("\nopenssl speed -async_jobs N (single thread, per CPU second of openssl; each variant's environment):\n");
        for a in &results.async_points {
            let flag = variants::find_fallback(&results.variants, &a.variant, &a.cipher)
                .map(|f| format!("  {f}"))
                .unwrap_or_default();
            out.push_str(&format!(
                "  {:<22} {:<8} {:>7}  jobs {:>4}  {:>11}{flag}\n",
                a.cipher,
                a.variant,
                ByteSize(a.size_bytes).to_string(),
                a.async_jobs,
                format_bytes_per_sec(a.bytes_per_sec),
            ));
        }
    }
    if !results.openssl_checks.is_empty() {
        out.push_str("\ncross-check against openssl speed (same point, single thread):\n");
        let mut modes: Vec<&str> = Vec::new();
        for c in &results.openssl_checks {
            let note = match modes.iter().position(|m| *m == c.mode) {
                Some(i) => i + 1,
                None => {
                    modes.push(&c.mode);
                    modes.len()
                }
            };
            out.push_str(&format!(
                "  {:<22} {:<8} {:<7} {:>7}  ours {:>11}  openssl {:>11}  ratio {:.2}  per {} second [{note}]\n",
                c.cipher,
                c.variant,
                c.direction.as_str(),
                ByteSize(c.size_bytes).to_string(),
                format_bytes_per_sec(c.ours_bytes_per_sec),
                format_bytes_per_sec(c.openssl_bytes_per_sec),
                c.ratio,
                if c.time_basis == "cpu" { "CPU" } else { "wall" }
            ));
        }
        for (i, m) in modes.iter().enumerate() {
            let m = if m.is_empty() { "not recorded" } else { m };
            out.push_str(&format!("  [{}] openssl {m}\n", i + 1));
        }
    }
    out
}

/// The ratio rows of a speed table, from its variant names: `ratio` (accel /
/// noaesni) for each library that has both (`ratio@TAG` for a later library), then
/// `@TAG/base` (accel on a later library / accel on the baseline). Pure.
pub fn ratio_rows(variants: &[String]) -> Vec<(String, String, String)> {
    let has = |name: &str| variants.iter().any(|v| v == name);
    let mut tags: Vec<Option<&str>> = Vec::new();
    for v in variants {
        let tag = split_variant_name(v).1;
        if !tags.contains(&tag) {
            tags.push(tag);
        }
    }
    let mut rows = Vec::new();
    for tag in &tags {
        let suffix = tag.map(|t| format!("@{t}")).unwrap_or_default();
        let (a, n) = (format!("accel{suffix}"), format!("noaesni{suffix}"));
        if has(&a) && has(&n) {
            rows.push((format!("ratio{suffix}"), a, n));
        }
    }
    for tag in tags.iter().flatten() {
        let a = format!("accel@{tag}");
        if has(&a) && has("accel") {
            rows.push((format!("@{tag}/base"), a, "accel".to_string()));
        }
    }
    // A provider or engine variant against its library's accel: the module's gain,
    // per cipher unless its work on the cipher fell back.
    for v in variants {
        let (kind, tag) = split_variant_name(v);
        if kind.starts_with("provider:") || kind.starts_with("engine:") {
            let a = match tag {
                Some(t) => format!("accel@{t}"),
                None => "accel".to_string(),
            };
            if has(&a) {
                rows.push((format!("{v}/accel"), v.clone(), a));
            }
        }
    }
    rows
}

/// Whether any ratio row of the tables (accel/noaesni per library, a later library's
/// accel over the baseline's) has an interval holding 1.0.
fn any_unclear_ratio(results: &SpeedResults) -> bool {
    ratio_rows(&results.config.variants)
        .iter()
        .any(|(_, top, bottom)| {
            variants::not_applicable(&results.variants, &[top, bottom]).is_none()
                && results.points.iter().any(|p| {
                    p.variant == *top
                        && results
                            .ratio_interval(
                                &p.cipher,
                                top,
                                bottom,
                                p.direction,
                                p.size_bytes,
                                p.threads,
                            )
                            .is_some_and(|r| !r.is_clear())
                })
        })
}

fn ratio_row(
    results: &SpeedResults,
    cipher: &str,
    direction: Direction,
    threads: usize,
    top: &str,
    bottom: &str,
) -> Option<String> {
    let measured = results.points.iter().any(|p| {
        p.cipher == cipher
            && p.variant == bottom
            && p.direction == direction
            && p.threads == threads
    });
    if let Some(na) = variants::not_applicable_for(&results.variants, &[top, bottom], cipher) {
        return measured.then(|| format!(" {na}"));
    }
    let mut row = String::new();
    let mut any = false;
    for &s in &results.config.sizes_bytes {
        let a = results.point(cipher, top, direction, s, threads);
        let n = results.point(cipher, bottom, direction, s, threads);
        match (a, n) {
            (Some(a), Some(n)) if n.throughput_bytes_per_sec.median > 0.0 => {
                any = true;
                let ratio = a.throughput_bytes_per_sec.median / n.throughput_bytes_per_sec.median;
                // A ratio whose interval holds 1.0 is not a gain: marked, same width.
                let unclear = results
                    .ratio_interval(cipher, top, bottom, direction, s, threads)
                    .is_some_and(|r| !r.is_clear());
                if unclear {
                    row.push_str(&format!(" {ratio:>9.2}x?"));
                } else {
                    row.push_str(&format!(" {ratio:>10.2}x"));
                }
            }
            _ => row.push_str(&format!(" {:>11}", "-")),
        }
    }
    any.then_some(row)
}

/// The width of the speed tables' variant column: the longest variant name, at
/// least 8.
pub(crate) fn variant_width(results: &SpeedResults) -> usize {
    results
        .config
        .variants
        .iter()
        .map(|v| v.len())
        .chain([8])
        .max()
        .unwrap_or(8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn one_library_has_the_one_ratio_row() {
        let rows = ratio_rows(&names(&["accel", "noaesni"]));
        assert_eq!(rows, [("ratio".into(), "accel".into(), "noaesni".into())]);
        assert!(ratio_rows(&names(&["accel"])).is_empty());
    }

    #[test]
    fn a_library_list_gets_a_ratio_per_library_and_the_library_step() {
        let rows = ratio_rows(&names(&[
            "accel",
            "noaesni",
            "accel@3.6.3",
            "noaesni@3.6.3",
        ]));
        let labels: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
        assert_eq!(labels, ["ratio", "ratio@3.6.3", "@3.6.3/base"]);
        assert_eq!(rows[2].1, "accel@3.6.3");
        assert_eq!(rows[2].2, "accel");
        // accel alone on each library: only the library step.
        let rows = ratio_rows(&names(&["accel", "accel@3.6.3"]));
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].0, "@3.6.3/base");
    }
}
