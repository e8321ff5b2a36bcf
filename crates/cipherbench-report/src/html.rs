//! `report.html`: one self-contained page (inline CSS and SVG, no scripts, no
//! network) rendered from the run record alone.

use crate::svg::{escape, BarChart, Series};
use cipherbench_model::speed::{Direction, SpeedResults};
use cipherbench_model::units::{format_bytes_per_sec, ByteSize};
use cipherbench_model::RunRecord;

pub(crate) const STYLE: &str = r#"
:root { --fg:#1b1f23; --muted:#586069; --line:#d0d7de; --bg:#fff; --accent:#0072B2; --warn:#9a6700; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); margin: 0 auto; max-width: 980px; padding: 16px; }
h1 { font-size: 1.6em; margin: 0.2em 0; } h2 { font-size: 1.25em; border-bottom: 1px solid var(--line); padding-bottom: 4px; margin-top: 2em; }
h3 { font-size: 1.05em; }
.muted { color: var(--muted); }
table { border-collapse: collapse; width: 100%; margin: 8px 0 16px; font-variant-numeric: tabular-nums; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 8px; text-align: right; white-space: nowrap; }
th:first-child, td:first-child, th.l, td.l { text-align: left; }
.scroll { overflow-x: auto; }
.chart { width: 100%; height: auto; max-width: 760px; display: block; }
.chart .grid { stroke: #eaeef2; } .chart .axisline { stroke: #57606a; } .chart .reference { stroke: #cf222e; stroke-dasharray: 4 3; }
.chart text { font: 11px system-ui, sans-serif; fill: #24292f; } .chart .axis { font-size: 12px; }
.banner { border-left: 4px solid var(--warn); background: #fff8c5; padding: 8px 12px; margin: 12px 0; }
.ok { color: #1a7f37; } .bad { color: #cf222e; font-weight: 600; }
figure { margin: 16px 0; } figcaption { color: var(--muted); font-size: 0.9em; }
details summary { cursor: pointer; color: var(--accent); }
@media print { body { max-width: none; } details { display: block; } .scroll { overflow: visible; } }
"#;

/// Renders the whole page.
pub fn render(record: &RunRecord) -> String {
    let mut body = String::new();
    let env = &record.environment;
    body.push_str(&format!(
        "<header><h1>cipherbench: what crypto acceleration buys on {}</h1>\
<p class=\"muted\">{} · preset <b>{}</b> · started {} · cipherbench {} · schema {}</p></header>",
        escape(&env.hostname),
        escape(&env.cpu.model),
        escape(&record.preset),
        escape(&record.started_at),
        escape(&record.tool_version),
        record.schema_version
    ));
    if record.interrupted {
        body.push_str("<p class=\"banner\">This run was interrupted: the page shows what was measured before it stopped.</p>");
    }
    body.push_str(&machine(record));
    if !record.warnings.is_empty() {
        body.push_str("<h2 id=\"warnings\">Warnings</h2><ul>");
        for w in &record.warnings {
            body.push_str(&format!(
                "<li><b>{}</b> ({}): {}</li>",
                escape(&w.kind),
                escape(&w.layer),
                escape(&w.message)
            ));
        }
        body.push_str("</ul>");
    }
    if let Some(speed) = &record.speed {
        body.push_str(&speed_section(speed));
    }
    if let Some(t) = &record.tunnel {
        body.push_str(&crate::tunnel::html(t));
    }
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>cipherbench report: {}</title><style>{STYLE}</style></head><body>{body}\
<footer class=\"muted\"><p>Rendered from run.json by <code>cipherbench report</code>. \
Throughput in decimal units (1 GB/s = 10<sup>9</sup> bytes/s); sizes in binary units (1 KiB = 1024 bytes).</p></footer></body></html>\n",
        escape(&env.hostname)
    )
}

fn machine(record: &RunRecord) -> String {
    let env = &record.environment;
    let mut s = String::from("<h2 id=\"machine\">The machine</h2><div class=\"scroll\"><table>");
    let flags: Vec<String> = env
        .cpu
        .crypto_flags
        .iter()
        .map(|f| {
            if f.present {
                format!("<span class=\"ok\">{}</span>", escape(&f.name))
            } else {
                format!("<s class=\"muted\">{}</s>", escape(&f.name))
            }
        })
        .collect();
    for (k, v) in [
        (
            "CPU",
            format!(
                "{} ({}, {} logical cores)",
                escape(&env.cpu.model),
                escape(&env.cpu.vendor),
                env.cpu.logical_cores
            ),
        ),
        ("Crypto flags", flags.join(" ")),
        (
            "Hypervisor",
            escape(env.cpu.hypervisor.as_deref().unwrap_or("none reported")),
        ),
        (
            "Kernel",
            format!("{} · {}", escape(&env.kernel), escape(&env.os)),
        ),
        ("OpenSSL", escape(&env.openssl.library_version)),
        (
            "Capability vector",
            format!(
                "<code>{}</code>",
                escape(
                    env.openssl
                        .cpu_settings
                        .as_deref()
                        .unwrap_or("not reported")
                )
            ),
        ),
        (
            "Offload devices",
            if env.offload_devices.is_empty() {
                "none".into()
            } else {
                escape(
                    &env.offload_devices
                        .iter()
                        .map(|d| d.description.clone())
                        .collect::<Vec<_>>()
                        .join(", "),
                )
            },
        ),
    ] {
        s.push_str(&format!(
            "<tr><th class=\"l\">{k}</th><td class=\"l\">{v}</td></tr>"
        ));
    }
    s.push_str("</table></div><h3>Who uses what</h3><div class=\"scroll\"><table><tr><th>capability</th><th>in the CPU</th><th>used by OpenSSL</th><th>used by the kernel</th><th class=\"l\">note</th></tr>");
    for v in &env.verdicts {
        s.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
            escape(&v.capability),
            yes_no(Some(v.in_cpu)),
            yes_no(v.used_by_openssl),
            yes_no(v.used_by_kernel),
            escape(&v.note)
        ));
    }
    s.push_str("</table></div>");
    s
}

fn yes_no(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "<span class=\"ok\">yes</span>",
        Some(false) => "no",
        None => "<span class=\"muted\">–</span>",
    }
}

fn median(s: &SpeedResults, cipher: &str, variant: &str, size: u64) -> Option<f64> {
    s.point(cipher, variant, Direction::Encrypt, size, 1)
        .map(|p| p.throughput_bytes_per_sec.median)
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn speed_section(s: &SpeedResults) -> String {
    let mut out = String::from("<h2 id=\"speed\">Layer 1: the primitive</h2>\
<p>Throughput of each cipher on one core, one operation per buffer (a fresh nonce, the header as additional data, the tag), \
with AES-NI available (<b>accel</b>) and masked through <code>OPENSSL_ia32cap</code> (<b>noaesni</b>).</p>");
    let sizes = &s.config.sizes_bytes;
    let categories: Vec<String> = sizes.iter().map(|b| ByteSize(*b).to_string()).collect();
    let gcm_vs_cbc: Vec<Option<f64>> = sizes
        .iter()
        .map(|&z| {
            ratio(
                median(s, "aes-128-gcm", "accel", z),
                median(s, "aes-128-cbc-hmac-sha1", "accel", z),
            )
        })
        .collect();
    let gcm_accel: Vec<Option<f64>> = sizes
        .iter()
        .map(|&z| {
            ratio(
                median(s, "aes-128-gcm", "accel", z),
                median(s, "aes-128-gcm", "noaesni", z),
            )
        })
        .collect();
    let chart = BarChart {
        id: "fig-relative".into(),
        title: "Relative throughput by buffer size".into(),
        description: "For each buffer size: AES-128-GCM throughput divided by AES-128-CBC-HMAC-SHA1 throughput with AES-NI, and AES-128-GCM with AES-NI divided by AES-128-GCM with AES-NI masked. Above 1 means the first is faster.".into(),
        categories: categories.clone(),
        series: vec![
            Series {
                name: "aes-128-gcm / aes-128-cbc-hmac-sha1 (accel)".into(),
                values: gcm_vs_cbc.clone(),
            },
            Series {
                name: "aes-128-gcm accel / noaesni".into(),
                values: gcm_accel.clone(),
            },
        ],
        y_label: "ratio (×)".into(),
        reference: Some(1.0),
        format: |v| format!("{v:.1}×"),
    };
    out.push_str("<figure>");
    out.push_str(&chart.render());
    out.push_str("<figcaption>Figure 1 (after seed 003's Figure 1): how much faster AES-GCM is than the stitched AES-CBC + HMAC-SHA1, and how much AES-NI buys AES-GCM, by buffer size (encrypt, 1 thread). The dashed line is parity.</figcaption></figure>");
    out.push_str("<div class=\"scroll\"><table><tr><th>size</th><th>GCM / CBC-HMAC-SHA1 (accel)</th><th>GCM accel / noaesni</th></tr>");
    for (i, c) in categories.iter().enumerate() {
        out.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(c),
            fmt_ratio(gcm_vs_cbc[i]),
            fmt_ratio(gcm_accel[i])
        ));
    }
    out.push_str("</table></div>");

    // Seed 001: AES-256-CBC and 3DES, accel vs noaesni, at 256 bytes (its figure's
    // size) or the nearest measured size.
    let size = *sizes
        .iter()
        .min_by_key(|&&z| (z as i64 - 256).abs())
        .unwrap_or(&256);
    let rows = [
        ("aes-256-cbc", "AES-256-CBC"),
        ("des-ede3-cbc", "3DES (control)"),
    ];
    let chart = BarChart {
        id: "fig-aesni-control".into(),
        title: format!("AES-256-CBC and 3DES at {}, with and without AES-NI", ByteSize(size)),
        description: "Throughput in MB/s of AES-256-CBC and of 3DES, each with AES-NI available and masked. AES-NI speeds up AES only; 3DES is the control and should not move.".into(),
        categories: rows.iter().map(|r| r.1.to_string()).collect(),
        series: ["accel", "noaesni"]
            .iter()
            .map(|v| Series {
                name: (*v).to_string(),
                values: rows.iter().map(|r| median(s, r.0, v, size).map(|x| x / 1e6)).collect(),
            })
            .collect(),
        y_label: "MB/s (10^6 bytes/s)".into(),
        reference: None,
        format: |v| format!("{v:.0}"),
    };
    out.push_str("<figure>");
    out.push_str(&chart.render());
    out.push_str("<figcaption>Figure 2 (after seed 001): AES-NI speeds up AES-256-CBC; 3DES, which AES-NI does not touch, shows whether anything else changed between the variants.</figcaption></figure>");
    out.push_str("<div class=\"scroll\"><table><tr><th>cipher</th><th>accel</th><th>noaesni</th><th>accel / noaesni</th></tr>");
    for (cipher, label) in rows {
        let a = median(s, cipher, "accel", size);
        let n = median(s, cipher, "noaesni", size);
        out.push_str(&format!(
            "<tr><td>{label}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            a.map(format_bytes_per_sec).unwrap_or("–".into()),
            n.map(format_bytes_per_sec).unwrap_or("–".into()),
            fmt_ratio(ratio(a, n))
        ));
    }
    out.push_str("</table></div>");

    out.push_str("<h3>Variants</h3><div class=\"scroll\"><table><tr><th>variant</th><th class=\"l\">OPENSSL_ia32cap</th><th class=\"l\">effective vector</th><th>AES-NI</th><th>PCLMULQDQ</th><th>took effect</th></tr>");
    for v in &s.variants {
        out.push_str(&format!(
            "<tr><td>{}</td><td class=\"l\"><code>{}</code></td><td class=\"l\"><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&v.name),
            escape(v.ia32cap_env.as_deref().unwrap_or("(unset)")),
            escape(&v.cpu_settings),
            yes_no(Some(v.aesni)),
            yes_no(Some(v.pclmulqdq)),
            if v.took_effect { "<span class=\"ok\">yes</span>" } else { "<span class=\"bad\">no</span>" }
        ));
    }
    out.push_str("</table></div>");
    if !s.controls.is_empty() {
        let held = s.controls.iter().filter(|c| c.held).count();
        out.push_str(&format!(
            "<p>Control ciphers: <b>{held} of {}</b> points ran within ±10 % in both variants{}.</p>",
            s.controls.len(),
            if held == s.controls.len() {
                ", so the mask changed AES-NI and PCLMULQDQ and nothing else they use"
            } else {
                ""
            }
        ));
    }
    for u in &s.unavailable {
        out.push_str(&format!(
            "<p class=\"muted\">{} is unavailable in the {} variant: {}</p>",
            escape(&u.cipher),
            escape(&u.variant),
            escape(&u.reason)
        ));
    }
    out.push_str("<details><summary>Every measured point</summary><div class=\"scroll\"><table><tr><th class=\"l\">cipher</th><th class=\"l\">variant</th><th class=\"l\">direction</th><th>size</th><th>threads</th><th>median</th><th>spread</th><th>samples</th><th>CPU cores</th></tr>");
    for p in &s.points {
        let t = &p.throughput_bytes_per_sec;
        out.push_str(&format!(
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td{}>±{:.1} %</td><td>{}</td><td>{:.2}</td></tr>",
            escape(&p.cipher),
            escape(&p.variant),
            p.direction.as_str(),
            ByteSize(p.size_bytes),
            p.threads,
            format_bytes_per_sec(t.median),
            if t.high_spread() { " class=\"bad\"" } else { "" },
            t.rel_spread * 100.0,
            t.n,
            p.cpu_cores_used
        ));
    }
    out.push_str("</table></div></details>");
    out
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map(|v| format!("{v:.2}×")).unwrap_or_else(|| "–".into())
}
