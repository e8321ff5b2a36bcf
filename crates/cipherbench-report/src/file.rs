//! Layer 2 renderings: `file.csv`, the terminal table, and the report's section with
//! the chart of the EC2 AES-NI blog post (seed 001): time to encrypt the file, by
//! tool and variant. Pure functions of [`FileResults`].

use crate::csv::field;
use crate::svg::{escape, BarChart, Series};
use cipherbench_model::file::{Cache, FilePoint, FileResults, SyncMode};
use cipherbench_model::speed::Direction;
use cipherbench_model::units::{format_bytes_per_sec, ByteSize};

/// A short label for charts.
fn short(tool: &str) -> &str {
    match tool {
        "openssl-aes-256-cbc" => "openssl cbc",
        "openssl-aes-256-ctr" => "openssl ctr",
        "cipherbench-chacha20" => "cipherbench chacha",
        t => t,
    }
}

/// Tools in the order asked, then any others that have points.
fn tools(r: &FileResults) -> Vec<String> {
    let mut out: Vec<String> = r.config.tools.clone();
    for p in &r.points {
        if !out.contains(&p.tool) {
            out.push(p.tool.clone());
        }
    }
    out.retain(|t| r.points.iter().any(|p| &p.tool == t));
    out
}

/// Variants in the order asked, then any others that have points.
fn variants(r: &FileResults) -> Vec<String> {
    let mut out: Vec<String> = r.config.variants.clone();
    for p in &r.points {
        if !out.contains(&p.variant) {
            out.push(p.variant.clone());
        }
    }
    out
}

/// The (direction, cache, sync) groups that have points, in a stable order.
fn groups(r: &FileResults) -> Vec<(Direction, Cache, SyncMode)> {
    let mut g: Vec<(Direction, Cache, SyncMode)> = r
        .points
        .iter()
        .map(|p| (p.direction, p.cache, p.sync))
        .collect();
    g.sort();
    g.dedup();
    g
}

fn group_title(d: Direction, c: Cache, s: SyncMode) -> String {
    format!("{}, {}", d.as_str(), condition(c, s))
}

/// The cache and sync conditions of a group, without its direction.
fn condition(c: Cache, s: SyncMode) -> String {
    format!(
        "{} cache, {}",
        c.as_str(),
        match s {
            SyncMode::Fsync => "until the output is fsynced",
            SyncMode::None => "until the tool exits (no fsync)",
        }
    )
}

fn mib(bytes: u64) -> String {
    format!("{:.0}", bytes as f64 / ByteSize::MIB as f64)
}

/// `file.csv`: one row per point.
pub fn csv(r: &FileResults) -> String {
    let mut out = String::from(
        "tool,variant,direction,cache,sync,bytes,runs,elapsed_seconds_median,elapsed_seconds_min,elapsed_seconds_max,rel_spread,throughput_bytes_per_sec_median,user_seconds_median,system_seconds_median,max_rss_bytes,verified\n",
    );
    for p in &r.points {
        let e = &p.elapsed_seconds;
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{:.4},{:.4},{:.4},{:.4},{:.0},{:.4},{:.4},{},{}\n",
            field(&p.tool),
            field(&p.variant),
            p.direction.as_str(),
            p.cache.as_str(),
            p.sync.as_str(),
            p.bytes,
            e.n,
            e.median,
            e.min,
            e.max,
            e.rel_spread,
            p.throughput_bytes_per_sec.median,
            p.user_seconds.median,
            p.system_seconds.median,
            p.max_rss_bytes,
            r.verified(&p.tool)
        ));
    }
    out
}

/// `p`'s throughput over cp's in the same cache state and durability mode: the share of
/// the disk path's own ceiling a tool keeps.
pub fn vs_cp(r: &FileResults, p: &FilePoint) -> Option<f64> {
    let cp = r.point("cp", "accel", p.direction, p.cache, p.sync)?;
    (cp.throughput_bytes_per_sec.median > 0.0)
        .then(|| p.throughput_bytes_per_sec.median / cp.throughput_bytes_per_sec.median)
}

/// The 95 % bootstrap interval of `num`'s time over `den`'s, over their samples:
/// paired when both have as many (the file layer runs every scenario once per
/// repetition, so sample i of each comes from the same pass), else independent;
/// ` (95 % interval 3.90-4.10)`, with `: no clear difference` when it holds 1.0;
/// nothing under 3 samples a side.
fn time_interval(num: &FilePoint, den: &FilePoint) -> String {
    use cipherbench_model::interval::{Pairing, RatioInterval, DEFAULT_SEED, LEVEL};
    let times = |p: &FilePoint| -> Vec<f64> {
        p.samples
            .iter()
            .map(|s| s.elapsed_ns as f64 / 1e9)
            .collect()
    };
    let (a, b) = (times(num), times(den));
    let pairing = if a.len() == b.len() {
        Pairing::Paired
    } else {
        Pairing::Independent
    };
    match RatioInterval::bootstrap(&a, &b, pairing, DEFAULT_SEED) {
        Some(i) => format!(
            " ({:.0} % interval {:.2}-{:.2}{})",
            LEVEL * 100.0,
            i.low,
            i.high,
            if i.is_clear() {
                ""
            } else {
                ": no clear difference"
            }
        ),
        None => String::new(),
    }
}

/// The terminal table: one block per direction, cache state and durability mode.
#[expect(
    clippy::too_many_lines,
    reason = "layer 2's terminal table, one block per direction, cache state and durability mode"
)]
pub fn text(r: &FileResults) -> String {
    let mut out = format!(
        "file: {} MiB {} ({}), {} run{} per point, outputs on {}\n",
        mib(r.config.input.size_bytes),
        if r.config.input.generated {
            "generated incompressible file".to_string()
        } else {
            r.config.input.path.clone().unwrap_or_default()
        },
        r.config
            .scratch_filesystem
            .as_ref()
            .map(|f| format!("{} {}", f.fs_type, f.source))
            .unwrap_or_else(|| "unknown file system".into()),
        r.config.repetitions,
        if r.config.repetitions == 1 { "" } else { "s" },
        r.config.scratch_dir
    );
    let (tools, variants) = (tools(r), variants(r));
    let w = variants
        .iter()
        .map(|v| v.len())
        .chain([8])
        .max()
        .unwrap_or(8);
    for (d, c, s) in groups(r) {
        out.push_str(&format!("\n{}\n", group_title(d, c, s)));
        out.push_str(&format!(
            "{:<22} {:<w$} {:>9} {:>7} {:>11} {:>7} {:>7} {:>7} {:>9} {}\n",
            "tool",
            "variant",
            "median",
            "spread",
            "throughput",
            "vs cp",
            "user",
            "system",
            "peak RSS",
            "verified"
        ));
        for tool in &tools {
            for variant in &variants {
                let Some(p) = r.point(tool, variant, d, c, s) else {
                    continue;
                };
                let e = &p.elapsed_seconds;
                out.push_str(&format!(
                    "{:<22} {:<w$} {:>7.3} s {:>6.1}% {:>10}{} {:>7} {:>5.2} s {:>5.2} s {:>5} MiB {}\n",
                    tool,
                    crate::variants::text_name(&r.variants, variant),
                    e.median,
                    e.rel_spread * 100.0,
                    format_bytes_per_sec(p.throughput_bytes_per_sec.median),
                    crate::machine::flag(&p.noise_findings(), false),
                    vs_cp(r, p).map(|x| format!("{x:.2}x")).unwrap_or_else(|| "-".into()),
                    p.user_seconds.median,
                    p.system_seconds.median,
                    mib(p.max_rss_bytes),
                    if r.verified(tool) { "yes" } else { "NO" }
                ));
            }
            for (label, a, n) in crate::text::ratio_rows(&variants) {
                if let (Some(pa), Some(pn)) =
                    (r.point(tool, &a, d, c, s), r.point(tool, &n, d, c, s))
                {
                    let names = [a.as_str(), n.as_str()];
                    let na = match tool_cipher(tool) {
                        Some(c) => crate::variants::not_applicable_for(&r.variants, &names, c),
                        None => crate::variants::not_applicable(&r.variants, &names),
                    };
                    let ratio = match na {
                        Some(na) => na,
                        None => format!(
                            "{n} takes {:.2}x the time of {a}{}",
                            pn.elapsed_seconds.median / pa.elapsed_seconds.median.max(1e-9),
                            time_interval(pn, pa)
                        ),
                    };
                    out.push_str(&format!("{:<22} {:<w$} {ratio}\n", "", label));
                }
            }
        }
    }
    for t in &r.tools {
        if let Some(why) = &t.unavailable {
            out.push_str(&format!("\n{} not measured (or stopped): {why}", t.tool));
        }
    }
    out.push_str(
        "\n(throughput in decimal units of the plaintext; vs cp = throughput / cp's; user and system = the tool's CPU seconds, from wait4)\n",
    );
    if r.points.iter().any(|p| !p.noise_findings().is_empty()) {
        out.push_str(&crate::machine::noise_legend());
    }
    out.push_str(&crate::variants::text_legend(
        &r.variants,
        &r.config.variants,
    ));
    for v in &r.variants {
        out.push_str(&crate::variants::line(v));
    }
    out
}

/// The report's layer 2 section.
#[expect(
    clippy::too_many_lines,
    reason = "the layer 2 section in reading order, one block per table or chart"
)]
pub fn html_section(r: &FileResults) -> String {
    let size = mib(r.config.input.size_bytes);
    let mut out = format!(
        "<h2 id=\"file\">Layer 2: a file through the disk <a class=\"how\" href=\"#m-file\">how measured</a></h2>\
<p>The time to encrypt a {size} MiB {} with each tool, written to a new file on the same file system ({}), \
with AES-NI available (<b>accel</b>) and, for tools whose crypto is OpenSSL's, masked (<b>noaesni</b>). \
Each point is the median of {} runs; <b>fsync</b> means until the output and its directory are on disk. \
<code>cp</code> is the floor the disk sets without encryption.</p>",
        if r.config.input.generated { "generated incompressible file" } else { "file" },
        escape(
            &r.config
                .scratch_filesystem
                .as_ref()
                .map(|f| format!("{} on {}", f.fs_type, f.source))
                .unwrap_or_else(|| "file system not identified".into())
        ),
        r.config.repetitions
    );
    let tools = tools(r);
    let variants = variants(r);
    let groups = groups(r);
    for (i, &(d, c, s)) in groups.iter().enumerate() {
        let series: Vec<Series> = variants
            .iter()
            .map(|v| Series {
                intervals: Vec::new(),
                name: if crate::variants::ineffective(&r.variants, v).is_some() {
                    format!("{v} (did not take effect)")
                } else {
                    v.clone()
                },
                values: tools
                    .iter()
                    .map(|t| r.point(t, v, d, c, s).map(|p| p.elapsed_seconds.median))
                    .collect(),
            })
            .filter(|s| s.values.iter().any(Option::is_some))
            .collect();
        let id = format!("fig-file-{}-{}-{}", d.as_str(), c.as_str(), s.as_str());
        let chart = BarChart {
            id: id.clone(),
            title: format!("Time to {} the {size} MiB file: {}", d.as_str(), condition(c, s)),
            description: format!(
                "Median seconds per tool (categories) and acceleration variant (series), {}. Lower is faster.",
                group_title(d, c, s)
            ),
            categories: tools.iter().map(|t| short(t).to_string()).collect(),
            series,
            y_label: "seconds (lower is faster)".into(),
            reference: None,
            format: |v| format!("{v:.2}"),
        };
        out.push_str("<figure>");
        out.push_str(&chart.render());
        out.push_str(&format!(
            "<figcaption>{} to {} the file, {}.</figcaption></figure>",
            if d == Direction::Encrypt && i == 0 {
                "After the EC2 AES-NI blog post's file encryption chart: time"
            } else {
                "Time"
            },
            d.as_str(),
            escape(&condition(c, s))
        ));
    }
    out.push_str("<div class=\"scroll\"><table><tr><th class=\"l\">tool</th><th class=\"l\">variant</th><th class=\"l\">direction</th><th class=\"l\">cache</th><th class=\"l\">sync</th><th>median</th><th>spread</th><th>throughput</th><th>vs cp</th><th>user CPU</th><th>system CPU</th><th>peak RSS</th><th>verified</th></tr>");
    for &(d, c, s) in &groups {
        for t in &tools {
            for v in &variants {
                let Some(p) = r.point(t, v, d, c, s) else {
                    continue;
                };
                let e = &p.elapsed_seconds;
                out.push_str(&format!(
                    "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{:.3} s</td><td{}>±{:.1} %</td><td>{}{}</td><td>{}</td><td>{:.2} s</td><td>{:.2} s</td><td>{} MiB</td><td>{}</td></tr>",
                    escape(t),
                    crate::variants::html_name(&r.variants, v),
                    d.as_str(),
                    c.as_str(),
                    s.as_str(),
                    e.median,
                    if e.high_spread() { " class=\"bad\"" } else { "" },
                    e.rel_spread * 100.0,
                    format_bytes_per_sec(p.throughput_bytes_per_sec.median),
                    crate::machine::noise_mark_html(&p.noise_findings()),
                    vs_cp(r, p).map(|x| format!("{x:.2}×")).unwrap_or_else(|| "–".into()),
                    p.user_seconds.median,
                    p.system_seconds.median,
                    mib(p.max_rss_bytes),
                    if r.verified(t) { "<span class=\"ok\">yes</span>" } else { "<span class=\"bad\">no</span>" }
                ));
            }
        }
    }
    out.push_str("</table></div>");
    if !r.variants.is_empty() {
        out.push_str("<h3>Variants</h3><p>The tools whose crypto is OpenSSL's run each variant; a <code>cipherbench __variant-probe</code> child with their environment measured the effect probes, and <code>openssl info -cpusettings</code> under the same environment was checked to report the same vector.</p>");
        out.push_str(&crate::variants::html_table(&r.variants));
    }
    out.push_str("<h3>Tools</h3><div class=\"scroll\"><table><tr><th class=\"l\">tool</th><th class=\"l\">version</th><th class=\"l\">crypto</th><th class=\"l\">status</th></tr>");
    for t in &r.tools {
        out.push_str(&format!(
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
            escape(&t.tool),
            escape(t.version.as_deref().unwrap_or("–")),
            escape(&t.crypto),
            match &t.unavailable {
                Some(why) => format!("<span class=\"bad\">not measured</span>: {}", escape(why)),
                None => "measured".into(),
            }
        ));
    }
    out.push_str("</table></div>");
    out.push_str(&format!(
        "<p class=\"muted\">Input SHA-256 <code>{}</code>; every tool's output was decrypted once per variant and direction and compared with it. \
Cold runs: <code>{}</code>. Commands are in run.json.</p>",
        escape(&r.config.input.sha256),
        r.config.cold_method.as_str()
    ));
    out
}

/// The catalogue cipher a file tool encrypts with, where the catalogue has it: what
/// a provider variant's fallback is judged on (the app's `ToolId::catalogue_cipher`).
fn tool_cipher(tool: &str) -> Option<&'static str> {
    match tool {
        "openssl-aes-256-cbc" => Some("aes-256-cbc"),
        "cipherbench" => Some("aes-256-gcm"),
        "cipherbench-chacha20" => Some("chacha20-poly1305"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cipherbench_model::file::{
        ColdMethod, FileConfig, FileInput, FileSample, RoundTripCheck, ToolStatus,
    };

    fn point(tool: &str, variant: &str, seconds: f64) -> FilePoint {
        let s = FileSample {
            elapsed_ns: (seconds * 1e9) as u64,
            user_ns: 1_000_000,
            system_ns: 2_000_000,
            max_rss_bytes: 8 << 20,
            input_resident_bytes: Some(0),
        };
        FilePoint::from_samples(
            tool,
            variant,
            Direction::Encrypt,
            Cache::Warm,
            SyncMode::Fsync,
            vec![tool.into()],
            80 << 20,
            vec![s, s, s],
        )
        .unwrap()
    }

    fn results() -> FileResults {
        FileResults {
            config: FileConfig {
                input: FileInput {
                    path: None,
                    generated: true,
                    size_bytes: 80 << 20,
                    sha256: "ab".into(),
                },
                scratch_dir: "/tmp/x".into(),
                scratch_filesystem: None,
                input_filesystem: None,
                tools: vec![
                    "cp".into(),
                    "openssl-aes-256-cbc".into(),
                    "cipherbench".into(),
                ],
                variants: vec!["accel".into(), "noaesni".into()],
                caches: vec![Cache::Warm],
                syncs: vec![SyncMode::Fsync],
                directions: vec![Direction::Encrypt],
                repetitions: 3,
                cold_method: ColdMethod::FadviseDontneed,
                cipherbench_threads: 2,
            },
            tools: vec![ToolStatus {
                tool: "age".into(),
                version: None,
                crypto: "x".into(),
                variants_apply: false,
                unavailable: Some("age not installed".into()),
            }],
            variants: vec![],
            points: vec![
                point("cp", "accel", 0.10),
                point("openssl-aes-256-cbc", "accel", 0.20),
                point("openssl-aes-256-cbc", "noaesni", 0.80),
                point("cipherbench", "accel", 0.11),
            ],
            checks: vec![
                RoundTripCheck {
                    tool: "cp".into(),
                    variant: "accel".into(),
                    direction: Direction::Encrypt,
                    sha256: "ab".into(),
                    matches: true,
                },
                RoundTripCheck {
                    tool: "openssl-aes-256-cbc".into(),
                    variant: "accel".into(),
                    direction: Direction::Encrypt,
                    sha256: "ab".into(),
                    matches: true,
                },
            ],
        }
    }

    #[test]
    fn csv_has_a_row_per_point_with_units_in_the_header() {
        let c = csv(&results());
        assert_eq!(c.lines().count(), 5);
        assert!(
            c.starts_with("tool,variant,direction,cache,sync,bytes,runs,elapsed_seconds_median")
        );
        assert!(c.contains("openssl-aes-256-cbc,noaesni,encrypt,warm,fsync,83886080,3,0.8000"));
        assert!(
            c.lines().last().unwrap().ends_with(",false"),
            "cipherbench was never checked"
        );
    }

    #[test]
    fn text_shows_ratios_against_cp_and_between_variants() {
        let t = text(&results());
        assert!(
            t.contains("encrypt, warm cache, until the output is fsynced"),
            "{t}"
        );
        assert!(t.contains("noaesni takes 4.00x the time of accel"), "{t}");
        assert!(
            t.contains("0.50x"),
            "openssl cbc at half cp's throughput: {t}"
        );
        assert!(t.contains("age not measured"), "{t}");
    }

    #[test]
    fn a_time_ratio_whose_interval_spans_one_is_no_clear_difference() {
        let mut r = results();
        let t = text(&r);
        assert!(
            t.contains("noaesni takes 4.00x the time of accel (95 % interval 4.00-4.00)"),
            "{t}"
        );
        // noaesni's three runs straddle accel's: 0.19, 0.21, 0.2 s against 0.2 s.
        let accel = r
            .points
            .iter()
            .find(|p| p.variant == "accel" && p.tool == "openssl-aes-256-cbc")
            .unwrap()
            .clone();
        let slow = r
            .points
            .iter_mut()
            .find(|p| p.variant == "noaesni" && p.tool == "openssl-aes-256-cbc")
            .unwrap();
        let mut samples = accel.samples.clone();
        samples[0].elapsed_ns = accel.samples[0].elapsed_ns * 95 / 100;
        samples[1].elapsed_ns = accel.samples[1].elapsed_ns * 105 / 100;
        *slow = FilePoint::from_samples(
            &slow.tool,
            &slow.variant,
            slow.direction,
            slow.cache,
            slow.sync,
            slow.command.clone(),
            slow.bytes,
            samples,
        )
        .unwrap();
        let t = text(&r);
        assert!(t.contains(": no clear difference)"), "{t}");
    }

    #[test]
    fn html_draws_seed_001s_chart_by_tool_and_variant() {
        let h = html_section(&results());
        assert!(h.contains("id=\"fig-file-encrypt-warm-fsync\""));
        assert!(h.contains("openssl cbc") && h.contains("cipherbench"));
        // 4 bars + 2 legend swatches.
        assert_eq!(h.matches("<rect x=").count(), 6);
        assert!(h.contains("noaesni, openssl cbc: 0.80"));
    }
}
