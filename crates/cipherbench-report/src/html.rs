//! `report.html`: one self-contained page (inline CSS and SVG, no scripts, no
//! network) rendered from the run record alone.

use crate::ratio;
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
td.l { white-space: normal; min-width: 12em; }
.scroll { overflow-x: auto; }
table.ladder th, table.ladder td { white-space: normal; } table.ladder td.l { min-width: 0; }
table.ladder td.what { min-width: 12em; } .nw, table.ladder td.nw { white-space: nowrap; }
.chart { width: 100%; height: auto; max-width: 760px; display: block; }
.chart .grid { stroke: #eaeef2; } .chart .axisline { stroke: #57606a; } .chart .reference { stroke: #cf222e; stroke-dasharray: 4 3; }
.chart text { font: 11px system-ui, sans-serif; fill: #24292f; } .chart .axis { font-size: 12px; }
a.how { font-size: 0.75em; font-weight: normal; margin-left: 0.5em; }
.banner { border-left: 4px solid var(--warn); background: #fff8c5; padding: 8px 12px; margin: 12px 0; }
.ok { color: #1a7f37; } .bad { color: #cf222e; font-weight: 600; }
figure { margin: 16px 0; } figcaption { color: var(--muted); font-size: 0.9em; }
details summary { cursor: pointer; color: var(--accent); }
@media print { body { max-width: none; } details { display: block; } .scroll { overflow: visible; } }
"#;

/// The crypto offload devices found, escaped, or "none".
fn offload_devices(env: &cipherbench_model::env::Environment) -> String {
    if env.offload_devices.is_empty() {
        return "none".into();
    }
    escape(
        &env.offload_devices
            .iter()
            .map(|d| d.description.clone())
            .collect::<Vec<_>>()
            .join(", "),
    )
}

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
    if record.rehearsal {
        body.push_str(&format!(
            "<p class=\"banner\">A rehearsal: {}</p>",
            escape(crate::REHEARSAL)
        ));
    }
    if record.interrupted {
        body.push_str("<p class=\"banner\">This run was interrupted: the page shows what was measured before it stopped.</p>");
    }
    body.push_str(&summary(record));
    if let Some(speed) = &record.speed {
        if speed.points.is_empty() && !speed.pk_points.is_empty() {
            body.push_str("<h2 id=\"speed\">Layer 1: the primitive <a class=\"how\" href=\"#m-speed\">how measured</a></h2>");
            body.push_str(&crate::variants::html_table(&speed.variants));
        } else {
            body.push_str(&speed_section(speed));
        }
        body.push_str(&crate::pk::html(speed));
        body.push_str(&layer_warnings(record, "speed"));
    }
    if let Some(file) = &record.file {
        body.push_str(&crate::file::html_section(file));
        body.push_str(&layer_warnings(record, "file"));
    }
    if let Some(tls) = &record.tls {
        body.push_str(&crate::tls::section(tls, record.target_gbps));
        body.push_str(&layer_warnings(record, "tls"));
    }
    if let Some(t) = &record.tunnel {
        body.push_str(&crate::tunnel::html(t));
        body.push_str(&layer_warnings(record, "tunnel"));
    }
    body.push_str(&machine(record));
    body.push_str(METHODOLOGY);
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>cipherbench report: {}</title><style>{STYLE}</style></head><body>{body}\
<footer class=\"muted\"><p>Rendered from run.json by <code>cipherbench report</code>. \
Throughput in decimal units (1 GB/s = 10<sup>9</sup> bytes/s); sizes in binary units (1 KiB = 1024 bytes).</p></footer></body></html>\n",
        escape(&env.hostname)
    )
}

/// The summary at the top: the machine in a sentence, who uses AES-NI, the ladder.
#[expect(
    clippy::too_many_lines,
    reason = "the report's summary in reading order: machine, AES-NI users, ladder"
)]
fn summary(record: &RunRecord) -> String {
    let env = &record.environment;
    let mut s = String::from("<section id=\"summary\"><h2>Summary</h2>");
    s.push_str(&format!(
        "<p>{} ({} logical cores{}), {}, kernel {}, {}.</p>",
        escape(&env.cpu.model),
        env.cpu.logical_cores,
        env.cpu
            .hypervisor
            .as_ref()
            .map(|h| format!(", under {}", escape(h)))
            .unwrap_or_default(),
        escape(&env.os),
        escape(&env.kernel),
        escape(&env.libraries_phrase())
    ));
    let aes = env
        .verdicts
        .iter()
        .find(|v| v.capability.starts_with("AES"));
    if let Some(v) = aes {
        let who = |b: Option<bool>| match b {
            Some(true) => "uses it",
            Some(false) => "does not use it",
            None => "n/a",
        };
        s.push_str(&format!(
            "<p><b>{}</b>: {} in the CPU; OpenSSL {}; the kernel {} ({}). Offload devices: {}.</p>",
            escape(&v.capability),
            if v.in_cpu { "present" } else { "absent" },
            who(v.used_by_openssl),
            who(v.used_by_kernel),
            escape(&v.note),
            offload_devices(env)
        ));
    }
    let ladder = crate::ladder::build(record);
    if ladder.steps.is_empty() {
        s.push_str("<p>No ladder: AES-GCM was not measured with and without AES-NI.</p>");
    } else {
        s.push_str("<h3 id=\"ladder\">The ladder: how much of AES-NI's gain survives each layer <a class=\"how\" href=\"#m-ladder\">how measured</a></h3>");
        s.push_str("<div class=\"scroll\"><table class=\"ladder\" id=\"table-ladder\"><tr><th class=\"l\">layer</th><th class=\"l\">what</th><th>with <span class=\"nw\">AES-NI</span></th><th>without</th><th><a href=\"#m-ladder\">gain</a> <a href=\"#m-intervals\">[95 % interval]</a></th><th><a href=\"#m-ladder\">keeps</a></th><th><a href=\"#m-ladder\">cipher share</a></th><th class=\"l\"><a href=\"#m-ceilings\">with AES-NI, of ceiling</a></th></tr>");
        for step in &ladder.steps {
            s.push_str(&format!(
                "<tr><td class=\"l\">{}</td><td class=\"l what\">{}</td><td class=\"nw\">{}</td><td class=\"nw\">{}</td><td>{}</td><td>{}</td><td class=\"nw\">{}</td><td class=\"l\">{}</td></tr>",
                step.layer,
                escape(&step.what),
                escape(&step.accel),
                escape(&step.noaesni),
                if step.lower_bound.is_some() {
                    format!(
                        "≥ {} <span class=\"bad\">lower bound</span>",
                        gain_cell(step.gain, step.gain_interval.as_ref())
                    )
                } else {
                    gain_cell(step.gain, step.gain_interval.as_ref())
                },
                unbroken_pieces(&ladder.keeps_text(step)),
                ladder.share_of_time_text(step),
                escape(&crate::ladder::ceiling_text(step))
            ));
        }
        s.push_str("</table></div>");
        for step in ladder.steps.iter().filter(|st| st.lower_bound.is_some()) {
            s.push_str(&format!(
                "<p class=\"bad\">{}: a lower bound: {}</p>",
                step.layer,
                escape(step.lower_bound.as_deref().unwrap_or_default())
            ));
        }
        let chart = BarChart {
            id: "fig-ladder".into(),
            title: "Gain from AES-NI at each layer".into(),
            description: format!(
                "Throughput with AES-NI divided by throughput without, for AES-GCM at each layer: {}.",
                ladder
                    .steps
                    .iter()
                    .map(|st| format!("{} {:.1} times", st.layer, st.gain))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            categories: ladder
                .steps
                .iter()
                .map(|st| {
                    if st.lower_bound.is_some() {
                        format!("{} (lower bound)", st.layer)
                    } else {
                        st.layer.to_string()
                    }
                })
                .collect(),
            series: vec![Series::new(
                "accel / noaesni",
                ladder.steps.iter().map(|st| Some(st.gain)).collect(),
            )
            .with_intervals(
                ladder
                    .steps
                    .iter()
                    .map(|st| st.gain_interval.map(|i| (i.low, i.high)))
                    .collect(),
            )],
            y_label: "gain (×)".into(),
            reference: Some(1.0),
            format: |v| format!("{v:.1}×"),
        };
        s.push_str("<figure>");
        s.push_str(&chart.render());
        s.push_str("<figcaption>The ladder: AES-NI's gain for AES-GCM from the primitive up to the tunnel. The dashed line is no gain; a whisker is the gain's 95 % interval over the layer's rounds (none where the record kept too few).</figcaption></figure><ul>");
        for line in crate::ladder::sentences(&ladder) {
            s.push_str(&format!("<li>{}</li>", escape(&line)));
        }
        s.push_str("</ul>");
        s.push_str(&ceiling_chart(&ladder));
    }
    for (layer, why) in &ladder.missing {
        let class =
            if why.starts_with("n/a:") || why.starts_with(crate::ladder::INSTRUMENT_LEFT_OUT) {
                "bad"
            } else {
                "muted"
            };
        s.push_str(&format!(
            "<p class=\"{class}\">{layer}: {}</p>",
            escape(why)
        ));
    }
    s.push_str(&library_steps(&ladder));
    let general: Vec<_> = record
        .warnings
        .iter()
        .filter(|w| w.layer == "run")
        .collect();
    let count = record.warnings.len();
    if count > 0 {
        s.push_str(&format!(
            "<p class=\"banner\">{count} warning{} in this run: each is shown beside the layer it concerns.</p>",
            if count == 1 { "" } else { "s" }
        ));
    }
    for w in general {
        s.push_str(&format!("<p class=\"banner\">{}</p>", escape(&w.message)));
    }
    s.push_str("</section>");
    s
}

/// The warnings of one layer, shown under its section.
fn layer_warnings(record: &RunRecord, layer: &str) -> String {
    let ws: Vec<_> = record
        .warnings
        .iter()
        .filter(|w| w.layer == layer)
        .collect();
    if ws.is_empty() {
        return String::new();
    }
    // Grouped by kind, in order of first appearance; a long group shows its first
    // few and folds the rest, so that one noisy kind does not bury the others.
    const SHOWN: usize = 3;
    let mut kinds: Vec<&str> = Vec::new();
    for w in &ws {
        if !kinds.contains(&w.kind.as_str()) {
            kinds.push(&w.kind);
        }
    }
    let mut s = format!(
        "<div class=\"banner\" id=\"warnings-{layer}\"><b>Warnings ({})</b>",
        ws.len()
    );
    for kind in kinds {
        let group: Vec<_> = ws.iter().filter(|w| w.kind == kind).collect();
        let item = |w: &&&cipherbench_model::Warning| format!("<li>{}</li>", escape(&w.message));
        s.push_str(&format!(
            "<p><b>{}</b> ({})</p><ul>",
            escape(&kind.replace('_', " ")),
            group.len()
        ));
        for w in group.iter().take(SHOWN) {
            s.push_str(&item(w));
        }
        s.push_str("</ul>");
        if group.len() > SHOWN {
            s.push_str(&format!(
                "<details><summary>{} more</summary><ul>",
                group.len() - SHOWN
            ));
            for w in group.iter().skip(SHOWN) {
                s.push_str(&item(w));
            }
            s.push_str("</ul></details>");
        }
    }
    s.push_str("</div>");
    s
}

/// What every number means, in the page itself (the page must stand alone); the
/// same definitions as METHODOLOGY.md.
const METHODOLOGY: &str = r#"<section id="methodology"><h2>How these numbers are measured</h2>
<h3 id="m-statistics">Samples, median, spread</h3><p>Every point is a set of samples after a warm-up. The figure shown is the median; the spread (±) is the median absolute deviation divided by the median. Above 5 % a point is flagged. Raw samples are in run.json.</p>
<h3 id="m-intervals">Ratios and their intervals</h3><p>A ratio is shown with its 95 % interval in brackets, from a seeded percentile bootstrap (2,000 resamples): speed, over each point's samples; file, over each run's time (paired by pass); TLS sweep, paired round by round where a point's variants (or key stores) took turns in its final window's rounds, else (points measured apart, such as GCM against CBC) over the per-interval throughputs of the two final windows at the concurrency each search chose; handshakes likewise, their variants taking turns in rounds (per core: each point's nginx CPU taken as measured); the tunnel, over its runs, paired round by round where the variants alternated (the ladder's tunnel rung, with fewer than 3 runs, over their per-second intervals); the ladder's <b>keeps</b>, with both layers' sets resampled together. A ratio whose interval holds 1.0 reads <b>no clear difference</b> and is never called a gain; a ladder layer whose gain holds 1.0 gets no keep share. Bars that plot a ratio carry the interval as a whisker. "No interval" marks fewer than 3 rounds a side (or a record written before the rounds were kept).</p>
<h3 id="m-variants">accel and noaesni, judged by effect</h3><p><b>accel</b> runs with the library's defaults (<code>OPENSSL_ia32cap</code> removed). <b>noaesni</b> runs the same program in a child process with every AES and GHASH hardware path masked: AES-NI, PCLMULQDQ, VAES and VPCLMULQDQ (<code>~0x200000200000000:~0x60000000000</code> for OpenSSL 3.0 to 3.4, with <code>:~0:~0:~0</code> added for 3.5 and later, which read five fields), every other feature as detected. A variant is judged by effect in every layer: its process (or a probe child with exactly its environment, for nginx and the <code>openssl</code> tool) measures AES-128-GCM (the treatment) and ChaCha20-Poly1305 and 3DES (the controls) on 16 KiB messages for a few interleaved rounds of 20 ms of CPU time each, as bytes per CPU second. It took effect if the treatment ran at least 3× slower than accel's and each control stayed within ±25 %. A variant that did not take effect is marked wherever its figures appear, with the reason and the mask that works, and no ratio from it is shown.</p>
<h3 id="m-speed">Layer 1: primitive</h3><p>Payload bytes per second of wall time (decimal units), one operation per buffer: for AEADs a fresh nonce, 13 bytes of additional data and the tag, as a TLS record or an ESP packet uses them; decryption verifies a genuine tag every time.</p>
<h3 id="m-file">Layer 2: file</h3><p>Wall time from starting the tool to its output being on disk (with fsync) or written (without), for a file of the given size; throughput is the plaintext size over that time. Every tool's output is decrypted once and compared with the input.</p>
<h3 id="m-tls">Layer 3: TLS sweep and ramp</h3><p>A real nginx serves one file per TLS connection (full handshake, keep-alive off). The sweep reports the highest throughput over the window at which the maximum time to first byte stays within the limit, searching over the number of concurrent clients. A point's variants (and key stores) each get their own nginx, started side by side, each searched in turn; then the window is cut into rounds (3 by default) and the variants take turns (A B, B A, A B), so a drift of the machine reaches each alike; each variant's figure is over all its rounds. nginx CPU is its workers' CPU time over the window. The ramp starts requests on a schedule rising linearly to the target rate; latency counts from the scheduled start, and a request that fails or exceeds the timeout is unsuccessful.</p>
<h4 id="m-tls-handshake">TLS handshakes</h4><p>Each point is a fresh nginx offering one key-exchange group, with a certificate of one key type, serving a tiny file per connection (keep-alive off: one handshake per request), measured as a sweep point (concurrency searched, same window and limit). Resumed points turn nginx's session cache and tickets on and have each generator thread offer its last session; the client counts the handshakes that resumed. Per core = handshakes per second divided by the CPU nginx's workers used; ratios are of that figure, with a 95 % interval paired over the rounds in which the variants of a point took turns (each point's nginx CPU taken as measured).</p><h4 id="m-tls-key-store">TLS key stores</h4><p>With <code>--key-store file,pkcs11</code> the sweep and the ramp measure each point with nginx's key in a PEM file and in a PKCS#11 module (SoftHSM2 unless <code>--pkcs11-module</code> names another), reached through OpenSSL's pkcs11 engine; the token is made in the run's directory and removed with it. Module handles do not survive fork, so that nginx runs as one process (<code>master_process off</code>): the module is measured at one core only. The two stores of a sweep point run side by side and take turns in the point's rounds, as its variants do. The module is judged by effect: its library and the engine must be mapped in the serving process, whose config names the key only by its PKCS#11 URI. Sweep ratios are module ÷ file, with a 95 % interval paired over those rounds; the ramp's are of successful requests.</p><h4 id="m-tls-capacity">TLS capacity</h4><p>Gbit/s per core = the sweep's throughput at the largest file size divided by the CPU nginx's workers used over the window (cores under test × their mean utilisation), taking the core count with the best rate. Cores for a target = target ÷ that rate, rounded up: linear scaling is assumed, and the line says where the sweep saw nginx stop being CPU-bound (below 85 % of its cores), beyond which the rate was limited by something else.</p>
<h3 id="m-tunnel">Layer 4: tunnel</h3><p>iperf3 TCP (iperf3's 128 KiB writes) and UDP (1220-byte datagrams) between two network namespaces through cipherbench's userspace ESP-in-UDP gateways; UDP at the highest rate with about 5 % loss. The underlay is measured alone first; it is the tunnel's ceiling only when rate-limited (<code>--underlay-rate</code>).</p>
<h3 id="m-library">The library under test</h3><p>A run measures the system's OpenSSL unless <code>--openssl DIR</code> names another OpenSSL 3.x build: its directory goes first on <code>LD_LIBRARY_PATH</code> of every part a variant applies to (speed workers, the <code>openssl</code> tool and <code>cipherbench seal</code>/<code>open</code>, nginx, the ESP gateways), and the build's own <code>bin/openssl</code> runs in place of the one on PATH. Under an OpenSSL 4 build (<code>libcrypto.so.4</code>, which nothing built for OpenSSL 3 loads) cipherbench's children and nginx run as the builds against it in its <code>libexec/cipherbench/</code>, and what has none (strongSwan's charon, engines) is refused or left out of its layer, said under the library step. Each part is checked from itself: cipherbench's children report <code>OpenSSL_version()</code> and the files they mapped, nginx's master and workers are read from <code>/proc/&lt;pid&gt;/maps</code>, the <code>openssl</code> tool from <code>openssl version</code>; a part on another library stops its layer. The TLS load generator runs in this process: under one <code>--openssl DIR</code>, cipherbench starts itself again under DIR so that the generator runs on it too (and is checked like the other parts); with several libraries it stays on the system's, as iperf3 always does, and says so. With several libraries the first is the baseline; the <b>library step</b> is accel on a later library over accel on the baseline, and <b>keeps</b> is ln(gain of the layer) / ln(gain of the primitive), as for AES-NI.</p>
<h3 id="m-ceilings">Ceilings</h3><p>Each rung of the ladder is also set against what the layer could do at all on this machine, measured in the same run: the file layer against <code>cp</code> of the same file in the same cache state and durability mode; the tunnel against the null transform (ESP framing with no cipher, the same gateways and placement), over TCP; the primitive against the cycles per byte OpenSSL's implementers published for the same path on this microarchitecture (only Haswell, Broadwell, Skylake and Zen 1 have one), at the core clock measured in the run; the TLS rung against nginx serving the same file over plain HTTP on the same cores with <code>sendfile off</code> (nginx reads the file into its buffers and writes it, the same copies as under TLS without kTLS), measured in the rounds of the same point (<code>--plain-http</code>, on in the presets), with <code>sendfile on</code> beside it; the plain client checks each response's status and length and lets the kernel discard the body unread. A share above 100 % is possible for the primitive (a newer path than the published one) and reads as such.</p><h3 id="m-ladder">The ladder</h3><p><b>gain</b> = throughput with AES-NI / without, same work, same run. <b>keeps</b> = ln(gain of the layer) / ln(gain of the primitive): the share of the primitive's speed-up, on a multiplicative scale, that survives to the layer. <b>cipher share</b> = (1 − 1/layer gain) / (1 − 1/primitive gain): by Amdahl's law, the fraction of the layer's time without AES-NI that was spent in the cipher, if only the cipher sped up.</p>
</section>"#;

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
            "AES-GCM path",
            escape(
                env.openssl
                    .aes_gcm_path
                    .as_ref()
                    .map(|p| p.sentence.as_str())
                    .unwrap_or("not probed"),
            ),
        ),
        ("Offload devices", offload_devices(env)),
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
    s.push_str(&libraries(env));
    s
}

/// A gain cell: `<b>3.10×</b> [2.95–3.26]`, with "no clear difference" when its
/// interval holds 1.0 and "(no interval)" without one. The cell may wrap between
/// the gain and its interval, never inside either (the ladder's table fits the
/// page so).
fn gain_cell(gain: f64, interval: Option<&cipherbench_model::interval::RatioInterval>) -> String {
    match interval {
        Some(i) => {
            let base = format!(
                "<b class=\"nw\">{:.2}×</b> <span class=\"muted nw\">[{:.2}–{:.2}]</span>",
                i.point, i.low, i.high
            );
            if i.is_clear() {
                base
            } else {
                format!("{base} <span class=\"bad\">no clear difference</span>")
            }
        }
        None => {
            format!("<b class=\"nw\">{gain:.2}×</b> <span class=\"muted nw\">(no interval)</span>")
        }
    }
}

/// Text escaped, its pieces before ` [` and ` (` each kept on one line (`45 %
/// [38-52 %]` may wrap before its interval only).
fn unbroken_pieces(text: &str) -> String {
    if !text.contains(" [") && !text.contains(" (") {
        return escape(text);
    }
    let mut out = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        // Past the first character: a piece is never empty.
        let first = rest.chars().next().map_or(0, char::len_utf8);
        let cut = [" [", " ("]
            .iter()
            .filter_map(|m| rest[first..].find(m).map(|i| i + first))
            .min()
            .unwrap_or(rest.len());
        let (piece, tail) = rest.split_at(cut);
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&format!(
            "<span class=\"nw\">{}</span>",
            escape(piece.trim_start())
        ));
        rest = tail;
    }
    out
}

/// The library step: accel on each later library over accel on the baseline, per
/// layer.
/// The ladder's "of ceiling" column as a chart: each rung's figure with AES-NI as a
/// share of its own ceiling, measured in the same run. Empty when no rung has one.
fn ceiling_chart(ladder: &crate::ladder::Ladder) -> String {
    let rungs: Vec<(&str, &crate::ladder::Ceiling)> = ladder
        .steps
        .iter()
        .filter_map(|st| st.ceiling.as_ref().ok().map(|c| (st.layer, c)))
        .collect();
    if rungs.is_empty() {
        return String::new();
    }
    let chart = BarChart {
        id: "fig-ladder-ceiling".into(),
        title: "With AES-NI, the share of each layer's ceiling".into(),
        description: format!(
            "Each layer's figure with AES-NI over its ceiling on this machine: {}.",
            rungs
                .iter()
                .map(|(layer, c)| format!("{layer} {}", c.text()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        categories: rungs
            .iter()
            .map(|(layer, c)| format!("{layer}: of {}", c.of))
            .collect(),
        series: vec![Series::new(
            "with AES-NI / ceiling",
            rungs.iter().map(|(_, c)| Some(c.share * 100.0)).collect(),
        )],
        y_label: "share of ceiling (%)".into(),
        reference: Some(100.0),
        format: |v| format!("{v:.0} %"),
    };
    format!(
        "<figure>{}<figcaption>Each layer against its own ceiling, measured in the same run: the file against cp, the tunnel against the null transform (no crypto, the same gateways), the primitive against the cycles per byte OpenSSL published for this core where it published any. The dashed line is the ceiling. <a href=\"#m-ceilings\">How the ceilings are measured</a>.</figcaption></figure>",
        chart.render()
    )
}

fn library_steps(ladder: &crate::ladder::Ladder) -> String {
    let steps = &ladder.libraries;
    let mut tags: Vec<&str> = steps.iter().map(|s| s.tag.as_str()).collect();
    tags.dedup();
    let mut s = String::new();
    for tag in tags {
        let rows: Vec<_> = steps.iter().filter(|s| s.tag == tag).collect();
        s.push_str(&format!(
            "<h3 id=\"library-step-{}\">The library step: accel on {} over accel on {} <a class=\"how\" href=\"#m-library\">how measured</a></h3>",
            escape(tag),
            escape(&rows[0].library),
            escape(&rows[0].baseline)
        ));
        s.push_str(&format!("<div class=\"scroll\"><table class=\"ladder\"><tr><th class=\"l\">layer</th><th class=\"l\">what</th><th>baseline</th><th>on {}</th><th>gain</th><th><a href=\"#m-library\">keeps</a></th></tr>", escape(tag)));
        for step in rows {
            s.push_str(&format!(
                "<tr><td class=\"l\">{}</td><td class=\"l what\">{}</td><td class=\"nw\">{}</td><td class=\"nw\">{}</td><td>{}</td><td>{}</td></tr>",
                step.layer,
                escape(&step.what),
                escape(&step.baseline_figure),
                escape(&step.library_figure),
                gain_cell(step.gain, step.gain_interval.as_ref()),
                unbroken_pieces(&ladder.library_keeps_text(step))
            ));
        }
        s.push_str("</table></div>");
    }
    for (layer, why) in &ladder.libraries_left_out {
        s.push_str(&format!(
            "<p class=\"muted\">library step, {}: <b>{}</b></p>",
            escape(layer),
            escape(why)
        ));
    }
    s
}

/// The libraries under test and which one each part loaded, when the record says.
fn libraries(env: &cipherbench_model::env::Environment) -> String {
    if env.libraries.is_empty() {
        return String::new();
    }
    let mut s = String::from("<h3 id=\"libraries\">OpenSSL under test</h3><div class=\"scroll\"><table><tr><th class=\"l\">library</th><th class=\"l\">variants</th><th class=\"l\">version</th><th class=\"l\">libcrypto</th><th class=\"l\">openssl CLI</th></tr>");
    for l in &env.libraries {
        s.push_str(&format!(
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\"><code>{}</code></td><td class=\"l\">{}</td></tr>",
            escape(&l.name),
            l.tag
                .as_ref()
                .map(|t| format!("accel@{}, …", escape(t)))
                .unwrap_or_else(|| "accel, … (baseline)".into()),
            escape(&l.version),
            escape(l.libcrypto.as_deref().unwrap_or("-")),
            escape(l.cli.as_deref().unwrap_or("the one on PATH"))
        ));
    }
    s.push_str("</table></div>");
    if !env.loaded.is_empty() {
        s.push_str("<p>Which library each part loaded, as the part itself showed it (<a href=\"#m-library\">how</a>):</p><div class=\"scroll\"><table><tr><th class=\"l\">layer</th><th class=\"l\">part</th><th class=\"l\">asked for</th><th class=\"l\">version</th><th class=\"l\">libcrypto</th><th class=\"l\">how</th><th>held to it</th></tr>");
        for p in &env.loaded {
            s.push_str(&format!(
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\"><code>{}</code></td><td class=\"l\">{}</td><td>{}</td></tr>",
                escape(&p.layer),
                escape(&p.part),
                escape(&p.asked),
                escape(p.version.as_deref().unwrap_or("-")),
                escape(p.libcrypto.as_deref().unwrap_or("-")),
                escape(&p.source),
                if p.checked { "yes" } else { "recorded only" }
            ));
        }
        s.push_str("</table></div>");
    }
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

#[expect(
    clippy::too_many_lines,
    reason = "the layer 1 section in reading order, one block per table or chart"
)]
fn speed_section(s: &SpeedResults) -> String {
    let mut out = String::from("<h2 id=\"speed\">Layer 1: the primitive <a class=\"how\" href=\"#m-speed\">how measured</a></h2>\
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
    // No ratio from a variant that did not take effect: the cells say why instead.
    let na = crate::variants::not_applicable(&s.variants, &["accel", "noaesni"]);
    let gcm_accel: Vec<Option<f64>> = sizes
        .iter()
        .map(|&z| {
            ratio(
                median(s, "aes-128-gcm", "accel", z),
                median(s, "aes-128-gcm", "noaesni", z),
            )
            .filter(|_| na.is_none())
        })
        .collect();
    let na_cell = |r: Option<f64>| match (&na, r) {
        (Some(na), _) => format!("<span class=\"bad\">{}</span>", escape(na)),
        (None, r) => fmt_ratio(r),
    };
    // The same, with the ratio's interval over the samples where they allow one.
    let enc = Direction::Encrypt;
    let na_interval_cell = |r: Option<f64>, cipher: &str, size: u64| match &na {
        Some(_) => na_cell(r),
        None => interval_cell(
            r,
            s.ratio_interval(cipher, "accel", "noaesni", enc, size, 1),
        ),
    };
    let chart = BarChart {
        id: "fig-relative".into(),
        title: "Relative throughput by buffer size".into(),
        description: "For each buffer size: AES-128-GCM throughput divided by AES-128-CBC-HMAC-SHA1 throughput with AES-NI, and AES-128-GCM with AES-NI divided by AES-128-GCM with AES-NI masked. Above 1 means the first is faster.".into(),
        categories: categories.clone(),
        series: vec![
            Series::new(
                "aes-128-gcm / aes-128-cbc-hmac-sha1 (accel)",
                gcm_vs_cbc.clone(),
            )
            .with_intervals(
                sizes
                    .iter()
                    .map(|&z| {
                        s.ratio_interval_between(
                            ("aes-128-gcm", "accel"),
                            ("aes-128-cbc-hmac-sha1", "accel"),
                            enc,
                            z,
                            1,
                        )
                        .map(|i| (i.low, i.high))
                    })
                    .collect(),
            ),
            Series::new(
                match &na {
                    Some(na) => format!("aes-128-gcm accel / noaesni ({na})"),
                    None => "aes-128-gcm accel / noaesni".into(),
                },
                gcm_accel.clone(),
            )
            .with_intervals(
                sizes
                    .iter()
                    .map(|&z| {
                        na.is_none()
                            .then(|| s.ratio_interval("aes-128-gcm", "accel", "noaesni", enc, z, 1))
                            .flatten()
                            .map(|i| (i.low, i.high))
                    })
                    .collect(),
            ),
        ],
        y_label: "ratio (×)".into(),
        reference: Some(1.0),
        format: |v| format!("{v:.1}×"),
    };
    out.push_str("<figure>");
    out.push_str(&chart.render());
    out.push_str("<figcaption>After Figure 1 of Intel's AES-GCM study: how much faster AES-GCM is than the stitched AES-CBC + HMAC-SHA1, and how much AES-NI buys AES-GCM, by buffer size (encrypt, 1 thread). The dashed line is parity; a whisker is the ratio's 95 % interval over the samples.</figcaption></figure>");
    out.push_str("<div class=\"scroll\"><table><tr><th>size</th><th>GCM / CBC-HMAC-SHA1 (accel)</th><th>GCM accel / noaesni</th></tr>");
    for (i, c) in categories.iter().enumerate() {
        out.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(c),
            interval_cell(
                gcm_vs_cbc[i],
                s.ratio_interval_between(
                    ("aes-128-gcm", "accel"),
                    ("aes-128-cbc-hmac-sha1", "accel"),
                    enc,
                    sizes[i],
                    1
                )
            ),
            na_interval_cell(gcm_accel[i], "aes-128-gcm", sizes[i])
        ));
    }
    out.push_str("</table></div>");

    // The EC2 AES-NI blog post (seed 001): AES-256-CBC and 3DES, accel vs noaesni, at
    // 256 bytes (its figure's size) or the nearest measured size.
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
                intervals: Vec::new(),
                name: if crate::variants::ineffective(&s.variants, v).is_some() {
                    format!("{v} (did not take effect)")
                } else {
                    (*v).to_string()
                },
                values: rows.iter().map(|r| median(s, r.0, v, size).map(|x| x / 1e6)).collect(),
            })
            .collect(),
        y_label: "MB/s (10^6 bytes/s)".into(),
        reference: None,
        format: |v| format!("{v:.0}"),
    };
    out.push_str("<figure>");
    out.push_str(&chart.render());
    out.push_str("<figcaption>After the EC2 AES-NI blog post: AES-NI speeds up AES-256-CBC; 3DES, which AES-NI does not touch, shows whether anything else changed between the variants.</figcaption></figure>");
    out.push_str("<div class=\"scroll\"><table><tr><th>cipher</th><th>accel</th><th>noaesni</th><th>accel / noaesni</th></tr>");
    for (cipher, label) in rows {
        let a = median(s, cipher, "accel", size);
        let n = median(s, cipher, "noaesni", size);
        out.push_str(&format!(
            "<tr><td>{label}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            a.map(format_bytes_per_sec).unwrap_or("–".into()),
            n.map(format_bytes_per_sec).unwrap_or("–".into()),
            na_interval_cell(ratio(a, n), cipher, size)
        ));
    }
    out.push_str("</table></div>");

    out.push_str("<h3>Variants</h3>");
    if s.variants.iter().any(|v| v.probes.is_some()) {
        out.push_str("<p>Each variant's worker measured the effect probes before its real work: AES-128-GCM must fall at least 3× against accel's and the controls stay within ±25 %. <a class=\"how\" href=\"#m-variants\">how judged</a></p>");
    }
    out.push_str(&crate::variants::html_table(&s.variants));
    out.push_str(&implementation_table(s));
    out.push_str(&async_table(s));
    if !s.controls.is_empty() {
        let held = s.controls.iter().filter(|c| c.held).count();
        out.push_str(&format!(
            "<p>Control ciphers: <b>{held} of {}</b> points ran within ±{:.0} % in both variants{}.</p>",
            s.controls.len(),
            cipherbench_model::speed::CONTROL_TOLERANCE * 100.0,
            if held == s.controls.len() && na.is_none() {
                ", so the mask changed AES and nothing else they use"
            } else {
                ""
            }
        ));
    }
    // Public-key algorithms the library lacks are the public-key table's to say.
    for u in s
        .unavailable
        .iter()
        .filter(|u| s.config.ciphers.contains(&u.cipher))
    {
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
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}{}</td><td{}>±{:.1} %</td><td>{}</td><td>{:.2}</td></tr>",
            escape(&p.cipher),
            crate::variants::html_name(&s.variants, &p.variant),
            p.direction.as_str(),
            ByteSize(p.size_bytes),
            p.threads,
            format_bytes_per_sec(t.median),
            noise_mark(p),
            if t.high_spread() { " class=\"bad\"" } else { "" },
            t.rel_spread * 100.0,
            t.n,
            p.cpu_cores_used
        ));
    }
    out.push_str("</table></div></details>");
    out
}

/// A mark beside a point measured while the machine was busy.
fn noise_mark(p: &cipherbench_model::speed::SpeedPoint) -> String {
    crate::machine::noise_mark_html(&p.noise_findings())
}

/// A ratio cell with its 95 % interval where the samples allow one (`5.38×
/// [5.06–5.57]`), and "no clear difference" when the interval holds 1.0; the bare
/// ratio otherwise.
pub(crate) fn interval_cell(
    point: Option<f64>,
    interval: Option<cipherbench_model::interval::RatioInterval>,
) -> String {
    match interval {
        Some(i) => {
            let base = format!(
                "{:.2}× <span class=\"muted\">[{:.2}–{:.2}]</span>",
                i.point, i.low, i.high
            );
            if i.is_clear() {
                base
            } else {
                format!("{base} <span class=\"bad\">no clear difference</span>")
            }
        }
        None => fmt_ratio(point),
    }
}

/// Provider and engine variants against their library's accel, per cipher and size
/// (encrypt, 1 thread): the module's gain where it served the cipher, and in red
/// where the work fell back (no ratio is drawn from a fallback).
fn implementation_table(s: &SpeedResults) -> String {
    let rows: Vec<(String, String, String)> = crate::text::ratio_rows(&s.config.variants)
        .into_iter()
        .filter(|(_, top, _)| {
            let kind = cipherbench_model::env::split_variant_name(top).0;
            kind.starts_with("provider:") || kind.starts_with("engine:")
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from("<h3>Provider and engine variants</h3><p>Each variant's process said which implementation served each cipher it fetched (<code>EVP_CIPHER_get0_provider</code>, the engine bound to the algorithm). A cipher the default provider served is a <span class=\"bad\">fallback</span>: its figures are accel's, and no ratio is drawn from it. <a class=\"how\" href=\"#m-variants\">how judged</a></p><div class=\"scroll\"><table><tr><th class=\"l\">variant / accel</th><th class=\"l\">cipher</th>");
    for &z in &s.config.sizes_bytes {
        out.push_str(&format!("<th>{}</th>", escape(&ByteSize(z).to_string())));
    }
    out.push_str("</tr>");
    for (label, top, bottom) in &rows {
        for cipher in &s.config.ciphers {
            out.push_str(&format!(
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td>",
                escape(label),
                escape(cipher)
            ));
            let na = crate::variants::not_applicable_for(&s.variants, &[top, bottom], cipher);
            for &z in &s.config.sizes_bytes {
                let cell = match &na {
                    Some(na) => format!("<span class=\"bad\">{}</span>", escape(na)),
                    None => fmt_ratio(ratio(
                        median(s, cipher, top, z),
                        median(s, cipher, bottom, z),
                    )),
                };
                out.push_str(&format!("<td>{cell}</td>"));
            }
            out.push_str("</tr>");
        }
    }
    out.push_str("</table></div>");
    out
}

/// `--async-jobs`: openssl speed with N async jobs per variant, cipher and size.
fn async_table(s: &SpeedResults) -> String {
    if s.async_points.is_empty() {
        return String::new();
    }
    let mut out = String::from("<h3>openssl speed -async_jobs</h3><p>One thread, per CPU second of openssl, under each variant's environment: what a provider or engine that works asynchronously gains from jobs in flight (0: synchronous).</p><div class=\"scroll\"><table><tr><th class=\"l\">cipher</th><th class=\"l\">variant</th><th>size</th><th>async jobs</th><th>throughput</th><th class=\"l\">implementation</th></tr>");
    for a in &s.async_points {
        let served = match crate::variants::find_fallback(&s.variants, &a.variant, &a.cipher) {
            Some(f) => format!("<span class=\"bad\">{}</span>", escape(&f)),
            None => "–".into(),
        };
        out.push_str(&format!(
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{served}</td></tr>",
            escape(&a.cipher),
            escape(&a.variant),
            escape(&ByteSize(a.size_bytes).to_string()),
            a.async_jobs,
            escape(&format_bytes_per_sec(a.bytes_per_sec)),
        ));
    }
    out.push_str("</table></div>");
    out
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map(|v| format!("{v:.2}×")).unwrap_or_else(|| "–".into())
}
