//! The key-store comparison of `tls sweep` and `tls ramp` (`--key-store
//! file,pkcs11`): each point measured with nginx's key in a PKCS#11 module beside
//! the same point with the key in a file, in the same run, as the ratio
//! module / file, with whether the module was seen to serve the key. Terminal,
//! summary.md and report.html. Pure functions of the record.

use crate::svg::escape;
use cipherbench_model::interval::RatioInterval;
use cipherbench_model::tls::{RampResults, RampRun, ServerRecord, SweepPoint, SweepResults};
use cipherbench_model::units::{format_bits_per_sec, ByteSize};

/// One sweep point in two key stores.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepRow {
    /// `AES128-GCM-SHA256 1.0 MiB x1 accel`.
    pub label: String,
    /// The other store (`pkcs11`).
    pub store: String,
    /// Throughput with the key in a file, bytes/s.
    pub file_bytes_per_sec: f64,
    /// Throughput with the key in the other store, bytes/s.
    pub other_bytes_per_sec: f64,
    /// other / file throughput.
    pub ratio: Option<f64>,
    /// The sum of the two points' interval spreads (shown only without an
    /// interval).
    pub rel_spread: f64,
    /// other / file with its 95 % interval, as every other ratio of the sweep
    /// ([`SweepResults::ratio_interval`]: paired over the rounds the two stores took
    /// in turn).
    pub interval: Option<RatioInterval>,
    /// other / file of throughput per CPU nginx used (None without nginx's CPU).
    pub per_cpu_ratio: Option<f64>,
    /// Whether both points are valid.
    pub valid: bool,
    /// What the check by effect said of the other store's nginx.
    pub served: Served,
}

impl SweepRow {
    /// `0.80x [0.74-0.86]`, `..., no clear difference`, or without an interval
    /// `0.80x ±3 % (no interval)`, as the sweep's other ratios read.
    pub fn ratio_text(&self) -> String {
        match (self.interval, self.ratio) {
            (Some(i), _) => format!(
                "{}{}",
                i.display(),
                cipherbench_model::tls::interval_note(&i)
            ),
            (None, Some(v)) => format!("{v:.2}x ±{:.0} % (no interval)", self.rel_spread * 100.0),
            (None, None) => "-".into(),
        }
    }
}

/// What the check by effect said of a module's nginx.
#[derive(Debug, Clone, PartialEq)]
pub enum Served {
    /// The module and the engine or provider (named) were mapped in the serving
    /// process.
    Yes(String),
    /// They were not; the explanation.
    No(String),
    /// No check recorded (an older record).
    Unknown,
}

impl Served {
    fn of(servers: &[ServerRecord], suite: &str, variant: &str, cores: usize, store: &str) -> Self {
        match servers
            .iter()
            .find(|s| {
                s.suite == suite
                    && s.variant.name == variant
                    && s.cores == cores
                    && s.key_store == store
            })
            .and_then(|s| s.key_store_check.as_ref())
        {
            Some(c) if c.served => Served::Yes(c.through.clone()),
            Some(c) => Served::No(c.explanation.clone()),
            None => Served::Unknown,
        }
    }

    fn text(&self) -> String {
        match self {
            Served::Yes(through) => format!("module served the key, through the {through}"),
            Served::No(why) => format!("NOT SHOWN TO SERVE THE KEY: {why}"),
            Served::Unknown => "module not checked".into(),
        }
    }

    fn html(&self) -> String {
        match self {
            Served::Yes(through) => format!(
                "<span class=\"ok\">yes</span>, through the {}",
                escape(through)
            ),
            Served::No(why) => format!("<span class=\"bad\">no</span>: {}", escape(why)),
            Served::Unknown => "not checked".into(),
        }
    }
}

fn per_cpu(p: &SweepPoint) -> Option<f64> {
    let c = p.server_cpu.as_ref()?;
    // A single-process nginx has one worker, whatever the cores of the point.
    let used = c.total * c.per_worker.len().max(1) as f64;
    (used > 0.0).then(|| p.throughput_bytes_per_sec / used)
}

/// The sweep's points in two key stores, in measuring order.
pub fn sweep_rows(s: &SweepResults, servers: &[ServerRecord]) -> Vec<SweepRow> {
    s.key_store_pairs()
        .into_iter()
        .map(|(f, o)| SweepRow {
            label: format!(
                "{} {} x{} {}",
                f.suite,
                ByteSize(f.size_bytes),
                f.cores,
                f.variant
            ),
            store: o.key_store.clone(),
            file_bytes_per_sec: f.throughput_bytes_per_sec,
            other_bytes_per_sec: o.throughput_bytes_per_sec,
            ratio: SweepResults::ratio(o, f).map(|r| r.value),
            rel_spread: f.interval_throughput_bytes_per_sec.rel_spread
                + o.interval_throughput_bytes_per_sec.rel_spread,
            interval: SweepResults::ratio_interval(o, f),
            per_cpu_ratio: per_cpu(o).zip(per_cpu(f)).map(|(a, b)| a / b),
            valid: f.valid && o.valid,
            served: Served::of(servers, &o.suite, &o.variant, o.cores, &o.key_store),
        })
        .collect()
}

fn ramp_ratio(f: &RampRun, o: &RampRun) -> Option<f64> {
    (f.successful > 0).then(|| o.successful as f64 / f.successful as f64)
}

const HOW: &str = "the key in a PKCS#11 module through pkcs11-provider or OpenSSL's pkcs11 engine, nginx one process (master_process off), against the key in a PEM file, same run, the two taking turns in the point's rounds";

fn first_store(stores: &[String]) -> &str {
    stores.first().map(String::as_str).unwrap_or("file")
}

/// One line per way the module's key was reached and judged, for the handshake
/// table: which module, through the provider or the engine, in how many of the
/// servers started with it; a server not shown to serve its key from the module is
/// said with what was seen. Empty without a key in a module.
pub fn text_served(tls: &cipherbench_model::tls::TlsResults) -> String {
    let mut lines: Vec<(String, usize)> = Vec::new();
    for c in tls
        .servers
        .iter()
        .filter_map(|s| s.key_store_check.as_ref())
    {
        let line = if c.served {
            format!(
                "key store pkcs11: the module {} served nginx's key, through the {} {}",
                c.module, c.through, c.engine
            )
        } else {
            format!(
                "key store pkcs11: NOT SHOWN TO SERVE THE KEY: {}",
                c.explanation
            )
        };
        match lines.iter_mut().find(|(l, _)| *l == line) {
            Some((_, n)) => *n += 1,
            None => lines.push((line, 1)),
        }
    }
    lines
        .into_iter()
        .map(|(l, n)| {
            format!(
                "{l} ({n} nginx start{} checked)\n",
                if n == 1 { "" } else { "s" }
            )
        })
        .collect()
}

/// The sweep's terminal lines (empty when the run had one key store).
pub fn text_sweep(tls: &cipherbench_model::tls::TlsResults) -> String {
    let mut out = String::new();
    if let Some(s) = &tls.sweep {
        let rows = sweep_rows(s, &tls.servers);
        if !rows.is_empty() || !s.key_store_skipped.is_empty() {
            out.push_str(&format!(
                "key stores, sweep ({HOW}; ratio = {} throughput / {} throughput, [95 % interval, {}]):\n",
                rows.first().map(|r| r.store.as_str()).unwrap_or("pkcs11"),
                first_store(&s.config.key_stores),
                cipherbench_model::tls::SWEEP_INTERVAL_BASIS
            ));
        }
        for r in &rows {
            out.push_str(&format!(
                "  {:<40} {} {:>11}  {} {:>11}  {}/{} {}  per CPU {}  {}{}\n",
                r.label,
                first_store(&s.config.key_stores),
                format_bits_per_sec(r.file_bytes_per_sec),
                r.store,
                format_bits_per_sec(r.other_bytes_per_sec),
                r.store,
                first_store(&s.config.key_stores),
                r.ratio_text(),
                r.per_cpu_ratio
                    .map(|v| format!("{v:.2}x"))
                    .unwrap_or_else(|| "-".into()),
                r.served.text(),
                if r.valid {
                    ""
                } else {
                    "  (a point is INVALID)"
                }
            ));
        }
        for k in &s.key_store_skipped {
            out.push_str(&format!("  {}: {}\n", k.what(), k.reason));
        }
    }
    out
}

/// The ramp's terminal lines (empty when the run had one key store).
pub fn text_ramp(tls: &cipherbench_model::tls::TlsResults) -> String {
    let mut out = String::new();
    if let Some(r) = &tls.ramp {
        let pairs = r.key_store_pairs();
        if !pairs.is_empty() || !r.key_store_skipped.is_empty() {
            out.push_str(&format!(
                "key stores, ramp ({HOW}; ratio = successful requests {} / {}):\n",
                pairs
                    .first()
                    .map(|p| p.1.key_store.as_str())
                    .unwrap_or("pkcs11"),
                first_store(&r.config.key_stores)
            ));
        }
        for (f, o) in pairs {
            out.push_str(&format!(
                "  {} {} {}: {} {} ok, {} unsuccessful, p99 {:.1} ms; {} {} ok, {} unsuccessful, p99 {:.1} ms; {}/{} {}  {}\n",
                f.suite,
                ByteSize(f.size_bytes),
                f.variant,
                f.key_store,
                f.successful,
                f.unsuccessful,
                f.latency.p99_ns as f64 / 1e6,
                o.key_store,
                o.successful,
                o.unsuccessful,
                o.latency.p99_ns as f64 / 1e6,
                o.key_store,
                f.key_store,
                ramp_ratio(f, o)
                    .map(|v| format!("{v:.2}x"))
                    .unwrap_or_else(|| "-".into()),
                Served::of(&tls.servers, &o.suite, &o.variant, o.cores, &o.key_store).text()
            ));
        }
        for k in &r.key_store_skipped {
            out.push_str(&format!("  {}: {}\n", k.what(), k.reason));
        }
    }
    out
}

/// summary.md lines (empty when the run had one key store).
pub fn markdown(tls: &cipherbench_model::tls::TlsResults) -> String {
    let mut out = String::new();
    if let Some(s) = &tls.sweep {
        for r in sweep_rows(s, &tls.servers) {
            out.push_str(&format!(
                "- TLS key store {}/{} {}: {} ({} against {}), {}{}\n",
                r.store,
                first_store(&s.config.key_stores),
                r.label,
                r.ratio_text(),
                format_bits_per_sec(r.other_bytes_per_sec),
                format_bits_per_sec(r.file_bytes_per_sec),
                r.served.text(),
                if r.valid {
                    ""
                } else {
                    " (invalid: see report)"
                }
            ));
        }
        for k in &s.key_store_skipped {
            out.push_str(&format!("- TLS key store, {}: {}\n", k.what(), k.reason));
        }
    }
    if let Some(r) = &tls.ramp {
        for (f, o) in r.key_store_pairs() {
            out.push_str(&format!(
                "- TLS ramp key store {}/{} {} {} {}: {} successful ({} against {}), {}\n",
                o.key_store,
                f.key_store,
                f.suite,
                ByteSize(f.size_bytes),
                f.variant,
                ramp_ratio(f, o)
                    .map(|v| format!("{v:.2}x"))
                    .unwrap_or_else(|| "-".into()),
                o.successful,
                f.successful,
                Served::of(&tls.servers, &o.suite, &o.variant, o.cores, &o.key_store).text()
            ));
        }
        for k in &r.key_store_skipped {
            out.push_str(&format!(
                "- TLS ramp key store, {}: {}\n",
                k.what(),
                k.reason
            ));
        }
    }
    out
}

/// The report.html section (empty when the run had one key store).
pub fn html(tls: &cipherbench_model::tls::TlsResults) -> String {
    let mut out = String::new();
    let sweep_rows = tls
        .sweep
        .as_ref()
        .map(|s| sweep_rows(s, &tls.servers))
        .unwrap_or_default();
    let skipped = tls
        .sweep
        .as_ref()
        .map(|s| s.key_store_skipped.as_slice())
        .unwrap_or_default();
    let ramp_pairs = tls
        .ramp
        .as_ref()
        .map(RampResults::key_store_pairs)
        .unwrap_or_default();
    let ramp_skipped = tls
        .ramp
        .as_ref()
        .map(|r| r.key_store_skipped.as_slice())
        .unwrap_or_default();
    if sweep_rows.is_empty()
        && skipped.is_empty()
        && ramp_pairs.is_empty()
        && ramp_skipped.is_empty()
    {
        return out;
    }
    out.push_str(&format!(
        "<h3 id=\"tls-key-store\">Key stores <a class=\"how\" href=\"#m-tls-key-store\">how measured</a></h3><p>Each point with {HOW} (after the IXP425 offload paper, whose server handed its crypto to a module). A ratio under 1 is the module's cost; \"served\" says whether the module was seen mapped in the nginx that served, whose config named the key only by its PKCS#11 URI.</p>"
    ));
    if !sweep_rows.is_empty() || !skipped.is_empty() {
        out.push_str("<div class=\"scroll\"><table id=\"table-tls-key-store\"><tr><th class=\"l\">sweep point</th><th>key in file</th><th>key in module</th><th>module / file</th><th>per CPU used</th><th class=\"l\">module served</th></tr>");
        for r in &sweep_rows {
            out.push_str(&format!(
                "<tr><td class=\"l\">{}</td><td>{}</td><td>{} ({})</td><td{}>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
                escape(&r.label),
                format_bits_per_sec(r.file_bytes_per_sec),
                format_bits_per_sec(r.other_bytes_per_sec),
                escape(&r.store),
                if r.valid { "" } else { " class=\"bad\"" },
                crate::html::interval_cell(r.ratio, r.interval),
                r.per_cpu_ratio
                    .map(|v| format!("{v:.2}×"))
                    .unwrap_or_else(|| "–".into()),
                r.served.html()
            ));
        }
        for k in skipped {
            out.push_str(&format!(
                "<tr><td class=\"l\">{}</td><td colspan=\"5\" class=\"l\">{}</td></tr>",
                escape(&k.what()),
                escape(&k.reason)
            ));
        }
        out.push_str("</table></div>");
    }
    if !ramp_pairs.is_empty() || !ramp_skipped.is_empty() {
        out.push_str("<div class=\"scroll\"><table id=\"table-tls-key-store-ramp\"><tr><th class=\"l\">ramp</th><th>successful / unsuccessful, key in file</th><th>successful / unsuccessful, key in module</th><th>module / file successful</th><th>p99 file / module</th><th class=\"l\">module served</th></tr>");
        for (f, o) in ramp_pairs {
            out.push_str(&format!(
                "<tr><td class=\"l\">{} {} {}</td><td>{} / {}</td><td>{} / {} ({})</td><td>{}</td><td>{:.1} / {:.1} ms</td><td class=\"l\">{}</td></tr>",
                escape(&f.suite),
                ByteSize(f.size_bytes),
                escape(&f.variant),
                f.successful,
                f.unsuccessful,
                o.successful,
                o.unsuccessful,
                escape(&o.key_store),
                ramp_ratio(f, o)
                    .map(|v| format!("{v:.2}×"))
                    .unwrap_or_else(|| "–".into()),
                f.latency.p99_ns as f64 / 1e6,
                o.latency.p99_ns as f64 / 1e6,
                Served::of(&tls.servers, &o.suite, &o.variant, o.cores, &o.key_store).html()
            ));
        }
        for k in ramp_skipped {
            out.push_str(&format!(
                "<tr><td class=\"l\">{}</td><td colspan=\"5\" class=\"l\">{}</td></tr>",
                escape(&k.what()),
                escape(&k.reason)
            ));
        }
        out.push_str("</table></div>");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use cipherbench_model::tls::{KeyStoreCheck, KeyStoreSkip};

    /// The sweep and ramp of the tls fixture with the key also in a module: the GCM
    /// accel point at 0.8 of the file's, its server checked, and a 2-core note.
    fn with_module(served: bool) -> cipherbench_model::tls::TlsResults {
        let mut t = crate::tls::tests::results();
        let s = t.sweep.as_mut().unwrap();
        s.config.key_stores = vec!["file".into(), "pkcs11".into()];
        let mut p = crate::tls::tests::point("AES128-GCM-SHA256", "accel", 4.8);
        p.key_store = "pkcs11".into();
        s.key_store_points.push(p);
        s.key_store_skipped.push(KeyStoreSkip {
            key_store: "pkcs11".into(),
            cores: Some(2),
            suite: None,
            reason: "not measured with the key in pkcs11: one process".into(),
        });
        let r = t.ramp.as_mut().unwrap();
        let mut run = r.runs[0].clone();
        run.key_store = "pkcs11".into();
        run.successful = 24;
        r.key_store_runs.push(run);
        let server = |suite: &str| {
            let mut rec: ServerRecord = serde_json::from_value(serde_json::json!({
                "kind": "nginx", "version": null, "library": null, "suite": suite,
                "key": "rsa2048", "key_store": "pkcs11", "cores": 1, "server_cpus": [0],
                "generator_cpus": [1],
                "variant": {"name": "accel", "ia32cap_env": null, "cpu_settings": "",
                    "aesni": true, "pclmulqdq": true, "took_effect": true}
            }))
            .unwrap();
            rec.key_store_check = Some(KeyStoreCheck {
                module: "/m.so".into(),
                engine: "/e.so".into(),
                through: "engine".into(),
                pids: vec![7],
                served,
                explanation: if served {
                    "mapped".into()
                } else {
                    "pid 7 has no module /m.so mapped".into()
                },
            });
            rec
        };
        t.servers = vec![server("AES128-GCM-SHA256"), server("AES128-SHA")];
        t
    }

    #[test]
    fn each_module_point_is_compared_with_its_file_point_in_every_rendering() {
        let t = with_module(true);
        let rows = sweep_rows(t.sweep.as_ref().unwrap(), &t.servers);
        assert_eq!(rows.len(), 1);
        assert!((rows[0].ratio.unwrap() - 0.8).abs() < 1e-9);
        assert_eq!(rows[0].served, Served::Yes("engine".into()));
        let text = text_sweep(&t) + &text_ramp(&t);
        assert!(text.contains("pkcs11/file 0.80x"), "{text}");
        assert!(text.contains("module served the key"), "{text}");
        assert!(
            text.contains("x2: not measured with the key in pkcs11"),
            "{text}"
        );
        assert!(text.contains("pkcs11/file 0.50x"), "{text}");
        let md = markdown(&t);
        assert!(
            md.contains("- TLS key store pkcs11/file AES128-GCM-SHA256"),
            "{md}"
        );
        assert!(
            md.contains("- TLS ramp key store pkcs11/file AES128-SHA"),
            "{md}"
        );
        let html = html(&t);
        assert!(html.contains("table-tls-key-store\""), "{html}");
        assert!(html.contains("table-tls-key-store-ramp"), "{html}");
        assert!(html.contains("0.80×"), "{html}");
        // With the windows' per-interval throughputs kept, the ratio carries its
        // interval like the sweep's other ratios, in every rendering.
        let mut t = with_module(true);
        let s = t.sweep.as_mut().unwrap();
        let gcm = |p: &&mut SweepPoint| p.suite == "AES128-GCM-SHA256" && p.variant == "accel";
        for (p, rates) in s
            .points
            .iter_mut()
            .filter(gcm)
            .map(|p| (p, [5.9e8, 6.0e8, 6.1e8, 6.0e8]))
            .chain(
                s.key_store_points
                    .iter_mut()
                    .map(|p| (p, [4.7e8, 4.8e8, 4.9e8, 4.8e8])),
            )
        {
            p.interval_samples_bytes_per_sec = rates.to_vec();
        }
        let row = &sweep_rows(t.sweep.as_ref().unwrap(), &t.servers)[0];
        let i = row.interval.expect("an interval over the kept intervals");
        assert!(i.low < 0.8 && 0.8 < i.high && i.high < 1.0, "{i:?}");
        assert!(text_sweep(&t).contains(&format!("pkcs11/file {}", i.display())));
        assert!(markdown(&t).contains(&i.display()));
        assert!(super::html(&t).contains(&format!("[{:.2}–{:.2}]", i.low, i.high)));
        // The whole report carries it, beside the variant ratios.
        let section = crate::tls::section(&t, None);
        assert!(section.contains("id=\"tls-key-store\""));
        assert!(crate::tls::text(&t, None).contains("key stores, sweep"));
    }

    #[test]
    fn a_module_not_seen_serving_is_said_and_one_store_shows_nothing() {
        let t = with_module(false);
        assert!(text_sweep(&t).contains("NOT SHOWN TO SERVE THE KEY: pid 7"));
        assert!(html(&t).contains("<span class=\"bad\">no</span>"));
        let plain = crate::tls::tests::results();
        assert!(text_sweep(&plain).is_empty());
        assert!(text_ramp(&plain).is_empty());
        assert!(markdown(&plain).is_empty());
        assert!(html(&plain).is_empty());
    }
}
