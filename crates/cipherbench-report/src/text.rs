//! Terminal renderings: what a person reads at a glance after a command finishes.

use crate::variants;
use cipherbench_model::env::Environment;
use cipherbench_model::speed::{Direction, SpeedResults};
use cipherbench_model::units::{format_bytes_per_sec, ByteSize};

/// The probe, as a short human report.
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

/// Layer 1 as tables: one per direction and thread count; rows are ciphers and
/// variants, columns buffer sizes, with the accel/noaesni ratio under each cipher.
pub fn speed(results: &SpeedResults) -> String {
    let mut out = String::new();
    let sizes = &results.config.sizes_bytes;
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
            out.push_str(&format!("{:<24} {:<8}", "cipher", "variant"));
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
                            "{:<24} {:<8} unavailable: {reason}\n",
                            cipher,
                            variants::text_name(&results.variants, variant)
                        ));
                        continue;
                    }
                    out.push_str(&format!(
                        "{cipher:<24} {:<8}",
                        variants::text_name(&results.variants, variant)
                    ));
                    for &s in sizes {
                        match results.point(cipher, variant, direction, s, threads) {
                            Some(p) => {
                                let flag = if !p.noise_findings().is_empty() {
                                    "!"
                                } else if p.throughput_bytes_per_sec.high_spread() {
                                    "~"
                                } else {
                                    " "
                                };
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
                if let Some(ratios) = ratio_row(results, cipher, direction, threads) {
                    out.push_str(&format!("{:<24} {:<8}{ratios}\n", "", "ratio"));
                }
            }
        }
    }
    out.push_str(&format!(
        "\n(~ marks a point whose samples spread more than ±{:.0} %; ratio = accel / noaesni)\n",
        cipherbench_model::stats::HIGH_SPREAD * 100.0,
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
        out.push_str(&format!(
            "(! marks a point measured while other processes took more than {:.0} % of its CPUs, steal passed {:.0} %, or the CPU throttled; the warnings name them)\n",
            cipherbench_model::noise::NOISY_SHARE * 100.0,
            cipherbench_model::noise::STEAL_SHARE * 100.0,
        ));
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

/// Whether any accel/noaesni ratio of the tables has an interval holding 1.0.
fn any_unclear_ratio(results: &SpeedResults) -> bool {
    variants::not_applicable(&results.variants, &["accel", "noaesni"]).is_none()
        && results.points.iter().any(|p| {
            p.variant == "accel"
                && results
                    .ratio_interval(
                        &p.cipher,
                        "accel",
                        "noaesni",
                        p.direction,
                        p.size_bytes,
                        p.threads,
                    )
                    .is_some_and(|r| !r.is_clear())
        })
}

fn ratio_row(
    results: &SpeedResults,
    cipher: &str,
    direction: Direction,
    threads: usize,
) -> Option<String> {
    let measured = results.points.iter().any(|p| {
        p.cipher == cipher
            && p.variant == "noaesni"
            && p.direction == direction
            && p.threads == threads
    });
    if let Some(na) = variants::not_applicable(&results.variants, &["accel", "noaesni"]) {
        return measured.then(|| format!(" {na}"));
    }
    let mut row = String::new();
    let mut any = false;
    for &s in &results.config.sizes_bytes {
        let a = results.point(cipher, "accel", direction, s, threads);
        let n = results.point(cipher, "noaesni", direction, s, threads);
        match (a, n) {
            (Some(a), Some(n)) if n.throughput_bytes_per_sec.median > 0.0 => {
                any = true;
                let ratio = a.throughput_bytes_per_sec.median / n.throughput_bytes_per_sec.median;
                // A ratio whose interval holds 1.0 is not a gain: marked, same width.
                let unclear = results
                    .ratio_interval(cipher, "accel", "noaesni", direction, s, threads)
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
