//! `summary.md`: the run in a few lines of Markdown, for a pull request or a chat.
//! The full story is in report.html; every figure here is also there.

use crate::ladder;
use cipherbench_model::speed::Direction;
use cipherbench_model::units::{format_bits_per_sec, format_bytes_per_sec, ByteSize};
use cipherbench_model::RunRecord;

/// Renders the summary: in reading order, one block per table.
pub fn summary(record: &RunRecord) -> String {
    let mut out = header(record);
    out.push_str(&ladder_section(record));
    out.push_str(&variants_section(record));
    out.push_str("## Highlights\n\n");
    for part in [
        speed_highlights,
        file_highlights,
        tls_highlights,
        tunnel_highlights,
        closing,
    ] {
        out.push_str(&part(record));
    }
    out
}

/// The title, the machine and the run, and the AES verdict.
fn header(record: &RunRecord) -> String {
    let env = &record.environment;
    let mut out = format!(
        "# cipherbench on {}\n\n{} ({} logical cores{}) · {} · kernel {} · preset `{}` · {}\n\n",
        env.hostname,
        env.cpu.model,
        env.cpu.logical_cores,
        env.cpu
            .hypervisor
            .as_ref()
            .map(|h| format!(", {h}"))
            .unwrap_or_default(),
        env.libraries_phrase(),
        env.kernel,
        record.preset,
        record.started_at
    );
    if record.interrupted {
        out.push_str("**Interrupted**: only what was measured before the stop is here.\n\n");
    }
    if record.rehearsal {
        out.push_str(&format!("**Rehearsal**: {}\n\n", crate::REHEARSAL));
    }
    if let Some(v) = env
        .verdicts
        .iter()
        .find(|v| v.capability.starts_with("AES"))
    {
        let yn = |b: Option<bool>| match b {
            Some(true) => "yes",
            Some(false) => "no",
            None => "n/a",
        };
        out.push_str(&format!(
            "{}: in the CPU **{}**, used by OpenSSL **{}**, used by the kernel **{}**.\n\n",
            v.capability,
            yn(Some(v.in_cpu)),
            yn(v.used_by_openssl),
            yn(v.used_by_kernel)
        ));
    }
    out
}

/// The ladder, the library steps, and the rungs left out with their reasons.
fn ladder_section(record: &RunRecord) -> String {
    let mut out = String::new();
    let l = ladder::build(record);
    if !l.steps.is_empty() {
        out.push_str("## The ladder (AES-GCM, with vs without AES-NI)\n\n| layer | what | with AES-NI | without | gain [95 % interval] | keeps | with AES-NI, of ceiling |\n|---|---|---:|---:|---:|---:|---|\n");
        for s in &l.steps {
            out.push_str(&format!(
                "| {} | {} | {} | {} | **{}** | {} | {} |\n",
                s.layer,
                s.what,
                s.accel,
                s.noaesni,
                ladder::step_gain_text(s),
                l.keeps_text(s),
                ladder::ceiling_text(s)
            ));
        }
        out.push('\n');
        for s in l.steps.iter().filter(|s| s.lower_bound.is_some()) {
            out.push_str(&format!(
                "- ladder, {}: **a lower bound** (≥): {}\n",
                s.layer,
                s.lower_bound.as_deref().unwrap_or_default()
            ));
        }
    }
    let mut tags: Vec<&str> = l.libraries.iter().map(|s| s.tag.as_str()).collect();
    tags.dedup();
    for tag in tags {
        let steps: Vec<_> = l.libraries.iter().filter(|s| s.tag == tag).collect();
        out.push_str(&format!(
            "## The library step: accel on {} over accel on {}\n\n| layer | what | baseline | on {tag} | gain [95 % interval] | keeps |\n|---|---|---:|---:|---:|---:|\n",
            steps[0].library, steps[0].baseline
        ));
        for s in steps {
            out.push_str(&format!(
                "| {} | {} | {} | {} | **{}** | {} |\n",
                s.layer,
                s.what,
                s.baseline_figure,
                s.library_figure,
                ladder::gain_text(s.gain, s.gain_interval.as_ref()),
                l.library_keeps_text(s)
            ));
        }
        out.push('\n');
    }
    for (layer, why) in &l.libraries_left_out {
        out.push_str(&format!("- library step, {layer}: **{why}**\n"));
    }
    for (layer, why) in &l.missing {
        if why.starts_with("n/a:") || why.starts_with(ladder::INSTRUMENT_LEFT_OUT) {
            out.push_str(&format!("- ladder, {layer}: **{why}**\n"));
        }
    }
    out
}

/// Each layer's variants: which took effect, which did not and why, who served a provider's work.
fn variants_section(record: &RunRecord) -> String {
    let mut out = String::new();
    let layers = crate::variants::of_record(record);
    if !layers.is_empty() {
        out.push_str("## Variants (judged by effect)\n\n");
        for (layer, records) in &layers {
            let ok: Vec<&str> = records
                .iter()
                .filter(|r| r.took_effect)
                .map(|r| r.name.as_str())
                .collect();
            if !ok.is_empty() {
                out.push_str(&format!("- {layer}: {} took effect\n", ok.join(", ")));
            }
            for r in records.iter().filter(|r| !r.took_effect) {
                out.push_str(&format!(
                    "- {layer}: **{} did not take effect**: {}\n",
                    r.name,
                    r.explanation()
                ));
            }
            // Provider and engine variants: which implementation served each cipher.
            for r in records {
                if let Some(line) = r.implementation_line() {
                    let line = line
                        .split("; ")
                        .map(|p| {
                            if p.starts_with("fallback:") {
                                format!("**{p}**")
                            } else {
                                p.to_string()
                            }
                        })
                        .collect::<Vec<_>>()
                        .join("; ");
                    out.push_str(&format!("- {layer}: {} implementation: {line}\n", r.name));
                }
            }
        }
        out.push('\n');
    }
    out
}

/// The primitive's highlights: the AES ciphers with and without AES-NI, and the controls.
fn speed_highlights(record: &RunRecord) -> String {
    let mut out = String::new();
    if let Some(s) = &record.speed {
        let size = s.config.sizes_bytes.iter().copied().max().unwrap_or(16384);
        for cipher in ["aes-128-gcm", "aes-256-cbc", "des-ede3-cbc"] {
            let a = s.point(cipher, "accel", Direction::Encrypt, size, 1);
            let n = s.point(cipher, "noaesni", Direction::Encrypt, size, 1);
            if let (Some(a), Some(n)) = (a, n) {
                let ratio = crate::variants::not_applicable(&s.variants, &["accel", "noaesni"])
                    .unwrap_or_else(|| {
                        // With its interval where the samples allow one.
                        s.ratio_interval(cipher, "accel", "noaesni", Direction::Encrypt, size, 1)
                            .map(|r| r.display())
                            .unwrap_or_else(|| {
                                format!(
                                    "{:.2}x",
                                    a.throughput_bytes_per_sec.median
                                        / n.throughput_bytes_per_sec.median
                                )
                            })
                    });
                out.push_str(&format!(
                    "- {cipher} at {}: {} with AES-NI, {} without ({ratio})\n",
                    ByteSize(size),
                    format_bytes_per_sec(a.throughput_bytes_per_sec.median),
                    format_bytes_per_sec(n.throughput_bytes_per_sec.median),
                ));
            }
        }
        if let Some(line) = crate::cycles::summary_line(s) {
            out.push_str(&line);
        }
        if !s.controls.is_empty() {
            let held = s.controls.iter().filter(|c| c.held).count();
            out.push_str(&format!(
                "- controls (3DES, ChaCha20-Poly1305) within ±{tol:.0} % in {held} of {} points\n",
                s.controls.len(),
                tol = cipherbench_model::speed::CONTROL_TOLERANCE * 100.0
            ));
        }
    }
    out
}

/// The file layer's fastest encryption.
fn file_highlights(record: &RunRecord) -> String {
    let mut out = String::new();
    if let Some(f) = &record.file {
        if let Some(fastest) = f
            .points
            .iter()
            .filter(|p| p.direction == Direction::Encrypt && p.variant == "accel")
            .filter(|p| p.tool != "cp")
            .min_by(|a, b| {
                a.elapsed_seconds
                    .median
                    .total_cmp(&b.elapsed_seconds.median)
            })
        {
            out.push_str(&format!(
                "- file: fastest encryption of the {} file: {} in {:.2} s ({} cache, sync {})\n",
                ByteSize(fastest.bytes),
                fastest.tool,
                fastest.elapsed_seconds.median,
                fastest.cache.as_str(),
                fastest.sync.as_str()
            ));
        }
    }
    out
}

/// The TLS layer's highlights: the sweep's points and ratios, key stores, handshakes.
fn tls_highlights(record: &RunRecord) -> String {
    let mut out = String::new();
    if let Some(sweep) = record.tls.as_ref().and_then(|t| t.sweep.as_ref()) {
        for p in sweep.points.iter().filter(|p| p.variant == "accel") {
            out.push_str(&format!(
                "- TLS {} {} x{}: {} at {} clients{}\n",
                p.suite,
                ByteSize(p.size_bytes),
                p.cores,
                format_bits_per_sec(p.throughput_bytes_per_sec),
                p.concurrency,
                if !p.valid {
                    " (invalid: see report)"
                } else if p.instrument_limit().is_some() {
                    " (a lower bound: the load generator set it; see report)"
                } else {
                    ""
                }
            ));
        }
        // A core count the machine could not split is said here, not only counted
        // among the warnings.
        for k in &sweep.skipped_cores {
            out.push_str(&format!("- TLS x{}: not measured: {}\n", k.cores, k.reason));
        }
        let records = record
            .tls
            .as_ref()
            .map(crate::tls::records)
            .unwrap_or_default();
        // Each ratio with its interval ("no clear difference" when it holds 1.0).
        for r in crate::tls::ratios(sweep, &records) {
            out.push_str(&format!("- TLS {}: {}\n", r.label(), r.display()));
        }
        // At a fixed rate: what the load cost nginx, not a throughput ratio.
        for c in crate::tls::cpu_at_rate(sweep, &records) {
            out.push_str(&format!(
                "- TLS nginx CPU, {}: {}\n",
                c.label(),
                c.sentence()
            ));
        }
        let target = record
            .target_gbps
            .unwrap_or(crate::tls::DEFAULT_TARGET_GBPS);
        for c in crate::tls::capacity(sweep, target) {
            out.push_str(&format!("- TLS capacity: {}\n", c.sentence()));
        }
    }
    if let Some(t) = &record.tls {
        out.push_str(&crate::keystore::markdown(t));
    }
    if let Some(h) = record.tls.as_ref().and_then(|t| t.handshake.as_ref()) {
        let records = record
            .tls
            .as_ref()
            .map(crate::tls::records)
            .unwrap_or_default();
        out.push_str(&crate::handshake::markdown(h, &records));
    }
    out
}

/// The tunnel's highlights: the underlay, each point, the ratios, strongSwan beside them.
fn tunnel_highlights(record: &RunRecord) -> String {
    let mut out = String::new();
    if let Some(t) = &record.tunnel {
        if let Some(u) = t.underlay(cipherbench_model::tunnel::Protocol::Tcp) {
            out.push_str(&format!(
                "- tunnel: {} TCP {}\n",
                crate::tunnel::underlay_label(&t.config),
                format_bits_per_sec(u.throughput_bits_per_sec.median / 8.0)
            ));
        }
        for p in &t.points {
            out.push_str(&format!(
                "- tunnel {} {} {}: {}{}{}\n",
                p.transform,
                crate::variants::text_name(&t.judged_variants(), &p.variant),
                p.protocol.as_str(),
                format_bits_per_sec(p.throughput_bits_per_sec.median / 8.0),
                p.runs
                    .last()
                    .and_then(|r| r.iperf.lost_percent)
                    .map(|l| format!(" at {l:.1} % loss"))
                    .unwrap_or_default(),
                p.instrument_limit()
                    .map(|why| format!(" (**a lower bound**: {why})"))
                    .unwrap_or_default()
            ));
        }
        let judged = t.judged_variants();
        let name = |v: &str| crate::variants::text_name(&judged, v);
        for line in [
            crate::tunnel::null_share_line(t, &name),
            crate::tunnel::cost_line(t, &name),
        ] {
            for l in line.lines() {
                out.push_str(&format!("- tunnel: {l}\n"));
            }
        }
        out.push_str(&crate::tunnel::ratio_markdown(
            &crate::tunnel::ratios(t),
            "",
        ));
        if let Some(s) = &t.strongswan {
            for (backend, rows) in crate::strongswan::ratios(s, &t.config.variants) {
                out.push_str(&crate::tunnel::ratio_markdown(
                    &rows,
                    &format!(" strongSwan/{backend}"),
                ));
            }
            for sp in &s.points {
                let p = &sp.point;
                out.push_str(&format!(
                    "- tunnel strongSwan/{} (userspace reference) {} {} {}: {}{}\n",
                    sp.backend,
                    p.transform,
                    crate::variants::text_name(&s.variants, &p.variant),
                    p.protocol.as_str(),
                    format_bits_per_sec(p.throughput_bits_per_sec.median / 8.0),
                    p.runs
                        .last()
                        .and_then(|r| r.iperf.lost_percent)
                        .map(|l| format!(" at {l:.1} % loss"))
                        .unwrap_or_default()
                ));
            }
            out.push_str(&format!("- tunnel strongSwan: {}\n", s.kernel_xfrm));
        }
    }
    out
}

/// The libraries under test, the machine's conditions, and the warnings' count.
fn closing(record: &RunRecord) -> String {
    let mut out = String::new();
    let env = &record.environment;
    if !env.libraries.is_empty() {
        out.push_str(&format!(
            "\n## OpenSSL under test\n\n```\n{}```\n",
            crate::text::libraries(env)
        ));
    }
    // The machine's conditions: every point measured while it was busy, and a
    // placement that could not keep the system under test and the load apart.
    let conditions: Vec<&cipherbench_model::Warning> = record
        .warnings
        .iter()
        .filter(|w| {
            matches!(
                w.kind.as_str(),
                "noisy_machine" | "steal" | "frequency_scaling" | "placement" | "placement_shared"
            )
        })
        .collect();
    if !conditions.is_empty() {
        out.push_str("\n## Machine conditions\n\n");
        for w in &conditions {
            out.push_str(&format!("- {} `{}`: {}\n", w.layer, w.kind, w.message));
        }
    }
    if !record.warnings.is_empty() {
        out.push_str(&format!(
            "\n{} warning(s); see report.html beside this file.\n",
            record.warnings.len()
        ));
    }
    out
}
