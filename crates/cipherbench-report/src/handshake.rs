//! `tls handshake` renderings: the terminal table and its ratio rows, the lines of
//! summary.md, and the report section with handshake capacity beside the sweep's
//! bulk capacity. Pure functions of the record.
//!
//! Ratios are of handshakes per nginx core-second (what one busy core completes),
//! not of handshakes per second: on a machine where the load generator is the limit
//! nginx idles, and only the per-core figure still says what a core can do. A ratio
//! with a variant that did not take effect is replaced by its `n/a` line.

use crate::svg::escape;
use cipherbench_model::tls::{HandshakePoint, HandshakeResults, SweepResults};
use cipherbench_model::variant::VariantRecord;

/// One comparison the tables show.
#[derive(Debug, Clone, PartialEq)]
pub struct HandshakeRatio {
    /// `rsa2048 X25519 full file: nopkaccel / accel`.
    pub label: String,
    /// Per-core ratio, with the sum of the two points' interval spreads (shown
    /// only where there is no interval).
    pub value: Option<(f64, f64)>,
    /// Its 95 % interval, paired over the rounds where the two variants took turns
    /// (else over the two windows' per-interval rates), each point's nginx CPU as
    /// measured; None where too few rounds were kept.
    pub interval: Option<cipherbench_model::interval::RatioInterval>,
    /// What stands in its place (a variant that did not take effect).
    pub not_applicable: Option<String>,
}

fn what(p: &HandshakePoint) -> String {
    format!("{} {} {} {}", p.key, p.group, p.session, p.key_store)
}

fn per_core_ratio(a: &HandshakePoint, b: &HandshakePoint) -> Option<(f64, f64)> {
    let (x, y) = (a.handshakes_per_core_sec?, b.handshakes_per_core_sec?);
    (y > 0.0).then(|| {
        (
            x / y,
            a.point.interval_throughput_bytes_per_sec.rel_spread
                + b.point.interval_throughput_bytes_per_sec.rel_spread,
        )
    })
}

/// Every variant against its accel (same key, group, session kind and key store),
/// and every PKCS#11 point against the file point of the same variant.
pub fn ratios(h: &HandshakeResults, records: &[VariantRecord]) -> Vec<HandshakeRatio> {
    let mut out = Vec::new();
    for p in &h.points {
        let accel = accel_of(&p.point.variant);
        if p.point.variant != accel {
            if let Some(a) = h.point(&p.key, &p.group, &p.session, &p.key_store, &accel) {
                out.push(HandshakeRatio {
                    label: format!("{}: {accel} / {}", what(p), p.point.variant),
                    value: per_core_ratio(a, p),
                    interval: HandshakeResults::per_core_ratio_interval(a, p),
                    not_applicable: crate::variants::not_applicable(
                        records,
                        &[&accel, &p.point.variant],
                    ),
                });
            }
        }
        if p.key_store != "file" {
            if let Some(f) = h.point(&p.key, &p.group, &p.session, "file", &p.point.variant) {
                out.push(HandshakeRatio {
                    label: format!(
                        "{} {} {} {}: file / {}",
                        p.key, p.group, p.session, p.point.variant, p.key_store
                    ),
                    value: per_core_ratio(f, p),
                    interval: HandshakeResults::per_core_ratio_interval(f, p),
                    not_applicable: crate::variants::not_applicable(records, &[&p.point.variant]),
                });
            }
        }
    }
    out
}

/// One key, group, key store and variant measured both full and resumed: nginx's
/// CPU per handshake in each, and the difference. A resumed TLS 1.3 handshake
/// (OpenSSL's default `psk_dhe_ke`) repeats the key exchange but sends no
/// certificate and signs nothing, so full minus resumed is what the server's
/// signature and certificate cost, and resumed is the key exchange with everything
/// else a connection costs.
#[derive(Debug, Clone, PartialEq)]
pub struct CostSplit {
    /// Server key.
    pub key: String,
    /// Key-exchange group.
    pub group: String,
    /// Key store.
    pub key_store: String,
    /// Variant.
    pub variant: String,
    /// nginx CPU microseconds per full handshake (1e6 / handshakes per core-second).
    pub full_us: f64,
    /// The same per resumed handshake.
    pub resumed_us: f64,
    /// The signature's 95 % interval (low, high), over the rounds of both points
    /// resampled independently (the two were measured apart); None with fewer than 3
    /// rounds a side.
    pub signature_interval: Option<(f64, f64)>,
}

impl CostSplit {
    /// Full minus resumed: the signature and certificate.
    pub fn signature_us(&self) -> f64 {
        self.full_us - self.resumed_us
    }

    /// The signature as a table shows it: the difference, its interval where there
    /// is one, and "not clear of 0" where the interval reaches 0 or below (the two
    /// points' noise is larger than what the signature costs).
    pub fn signature_text(&self) -> String {
        match self.signature_interval {
            Some((low, high)) if low <= 0.0 => {
                format!(
                    "{:.0} [{low:.0} to {high:.0}], not clear of 0",
                    self.signature_us()
                )
            }
            Some((low, high)) => format!("{:.0} [{low:.0}-{high:.0}]", self.signature_us()),
            None if self.signature_us() <= 0.0 => {
                format!("{:.0}, below 0: noise", self.signature_us())
            }
            None => format!("{:.0}", self.signature_us()),
        }
    }
}

/// nginx's CPU microseconds per handshake in each round of a point's final window:
/// its cores times the round's CPU use, over the round's handshakes per second.
/// None where a round has no CPU figure or no handshake.
fn us_per_round(p: &HandshakePoint) -> Option<Vec<f64>> {
    if p.point.rounds.len() < cipherbench_model::interval::MIN_ROUNDS {
        return None;
    }
    p.point
        .rounds
        .iter()
        .map(|r| {
            let cpu = r.server_cpu? * p.point.cores as f64;
            let rate = r.requests as f64 * 1e9 / r.window_ns.max(1) as f64;
            (cpu > 0.0 && rate > 0.0).then(|| 1e6 * cpu / rate)
        })
        .collect()
}

/// The interval of full minus resumed, from both points' rounds.
fn signature_interval(full: &HandshakePoint, resumed: &HandshakePoint) -> Option<(f64, f64)> {
    use cipherbench_model::interval::{bootstrap_figures, Centre, Rounds, DEFAULT_SEED};
    let f = Rounds::single(us_per_round(full)?, Centre::Mean);
    let r = Rounds::single(us_per_round(resumed)?, Centre::Mean);
    let e = bootstrap_figures(&[&f, &r], |v| v[0] - v[1], DEFAULT_SEED)?;
    Some((e.low, e.high))
}

/// Every pair of full and resumed points of the same key, group, key store and
/// variant, the resumed one having resumed (90 % or more) and both with nginx's CPU.
pub fn cost_split(h: &HandshakeResults) -> Vec<CostSplit> {
    let us = |p: &HandshakePoint| {
        p.handshakes_per_core_sec
            .filter(|c| *c > 0.0)
            .map(|c| 1e6 / c)
    };
    h.points
        .iter()
        .filter(|p| p.session == "full")
        .filter_map(|f| {
            let r = h
                .points
                .iter()
                .find(|r| {
                    r.session == "resumed"
                        && r.key == f.key
                        && r.group == f.group
                        && r.key_store == f.key_store
                        && r.point.variant == f.point.variant
                })
                .filter(|r| r.resumed_fraction >= 0.9)?;
            Some(CostSplit {
                key: f.key.clone(),
                group: f.group.clone(),
                key_store: f.key_store.clone(),
                variant: f.point.variant.clone(),
                full_us: us(f)?,
                resumed_us: us(r)?,
                signature_interval: signature_interval(f, r),
            })
        })
        .collect()
}

/// The cost split as terminal lines (nothing where no pair was measured).
fn cost_split_text(h: &HandshakeResults) -> String {
    let rows = cost_split(h);
    if rows.is_empty() {
        return String::new();
    }
    let g = rows
        .iter()
        .map(|r| r.group.len())
        .chain([7])
        .max()
        .unwrap_or(7);
    let mut out = format!(
        "nginx CPU per handshake (µs = 1e6 / per core; full - resumed = the signature and certificate, as a resumed TLS 1.3 handshake repeats the key exchange; [95 % interval over both points' rounds]):\n  {:<10} {:<g$} {:<7} {:<10} {:>8} {:>10}  {}\n",
        "key", "group", "store", "variant", "full", "resumed", "signature"
    );
    for r in &rows {
        out.push_str(&format!(
            "  {:<10} {:<g$} {:<7} {:<10} {:>8.0} {:>10.0}  {}\n",
            r.key,
            r.group,
            r.key_store,
            r.variant,
            r.full_us,
            r.resumed_us,
            r.signature_text()
        ));
    }
    out
}

/// The cost split as an HTML table (nothing where no pair was measured).
fn cost_split_html(h: &HandshakeResults) -> String {
    let rows = cost_split(h);
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from("<h4>Key exchange and signature</h4><p>nginx's CPU per handshake (microseconds: one million divided by handshakes per core-second). A resumed TLS 1.3 handshake repeats the key exchange but signs nothing, so <b>full minus resumed</b> is what the signature and certificate cost; each figure is a difference of two points, with its 95 % interval where both points were measured in rounds (their rounds resampled apart); one whose interval reaches 0 is said not to be clear of it.</p><table id=\"table-tls-handshake-split\"><tr><th class=\"l\">key</th><th class=\"l\">group</th><th class=\"l\">key store</th><th class=\"l\">variant</th><th>full µs</th><th>resumed µs</th><th>signature µs [95 % interval]</th></tr>");
    for r in &rows {
        out.push_str(&format!(
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{:.0}</td><td>{:.0}</td><td><b>{}</b></td></tr>",
            escape(&r.key),
            escape(&r.group),
            escape(&r.key_store),
            escape(&r.variant),
            r.full_us,
            r.resumed_us,
            escape(&r.signature_text())
        ));
    }
    out.push_str("</table>");
    out
}

/// accel of a variant's library: `accel` or `accel@TAG`.
fn accel_of(variant: &str) -> String {
    match variant.split_once('@') {
        Some((_, tag)) => format!("accel@{tag}"),
        None => "accel".into(),
    }
}

/// `2.00x [1.91-2.10]`, `..., no clear difference` when the interval holds 1.0, or
/// `2.00x ±3 % (no interval)` from a record without per-interval rates.
fn ratio_text(r: &HandshakeRatio) -> String {
    match (&r.not_applicable, r.interval, r.value) {
        (Some(na), _, _) => na.clone(),
        (None, Some(i), _) => format!(
            "{}{}",
            i.display(),
            cipherbench_model::tls::interval_note(&i)
        ),
        (None, None, Some((v, s))) => format!("{v:.2}x ±{:.0} % (no interval)", s * 100.0),
        (None, None, None) => "-".into(),
    }
}

fn per_core(p: &HandshakePoint) -> String {
    p.handshakes_per_core_sec
        .map(|c| format!("{c:.0}"))
        .unwrap_or_else(|| "-".into())
}

/// The terminal table.
pub fn text(h: &HandshakeResults, records: &[VariantRecord]) -> String {
    let mut out = format!(
        "\nTLS handshakes: {} , {} B body, keep-alive off, {} nginx worker(s); per core = handshakes/s / nginx CPU used\n",
        h.config.protocol, h.config.size_bytes, h.config.cores
    );
    let w = h
        .points
        .iter()
        .map(|p| p.point.variant.len() + 1)
        .chain([9])
        .max()
        .unwrap_or(9);
    // The group's column fits the longest (X25519MLKEM768, SecP256r1MLKEM768).
    let g = h
        .points
        .iter()
        .map(|p| p.group.len())
        .chain([7])
        .max()
        .unwrap_or(7);
    out.push_str(&format!(
        "{:<10} {:<g$} {:<8} {:<7} {:<w$} {:>11} {:>9} {:>8} {:>7} {:>9} {:>10} {:>8}\n",
        "key",
        "group",
        "session",
        "store",
        "variant",
        "handshk/s",
        "per core",
        "resumed",
        "clients",
        "hs p50 ms",
        "nginx CPU",
        "gen CPU"
    ));
    for p in &h.points {
        out.push_str(&format!(
            "{:<10} {:<g$} {:<8} {:<7} {:<w$} {:>10.0}{} {:>9} {:>7.0}% {:>7} {:>9.2} {:>10} {:>7.0}%{}\n",
            p.key,
            p.group,
            p.session,
            p.key_store,
            crate::variants::text_name(records, &p.point.variant),
            p.handshakes_per_sec,
            if p.point.interval_throughput_bytes_per_sec.high_spread() {
                "~"
            } else {
                " "
            },
            per_core(p),
            p.resumed_fraction * 100.0,
            p.point.concurrency,
            p.point.handshake.p50_ns as f64 / 1e6,
            p.point
                .server_cpu
                .as_ref()
                .map(|c| format!("{:.0} %", c.total * 100.0))
                .unwrap_or_else(|| "-".into()),
            p.point.generator_cpu * 100.0,
            if p.point.valid {
                String::new()
            } else if p.point.generator_saturated {
                "  gen-bound (per core still valid)".into()
            } else {
                "  INVALID".into()
            }
        ));
    }
    let rs = ratios(h, records);
    if !rs.is_empty() {
        out.push_str(
            "ratios (handshakes per nginx core-second; [95 % interval, paired round by round where the two variants took turns (marked \"N rounds in turn\"), else over the two windows' per-interval rates]):\n",
        );
        for r in &rs {
            out.push_str(&format!("  {:<52} {}\n", r.label, ratio_text(r)));
        }
    }
    out.push_str(&cost_split_text(h));
    out
}

/// summary.md lines.
pub fn markdown(h: &HandshakeResults, records: &[VariantRecord]) -> String {
    let mut out = String::new();
    for p in &h.points {
        out.push_str(&format!(
            "- TLS handshakes {} {}: {:.0}/s, {} per nginx core-second ({:.0} % resumed){}\n",
            what(p),
            crate::variants::text_name(records, &p.point.variant),
            p.handshakes_per_sec,
            per_core(p),
            p.resumed_fraction * 100.0,
            if p.point.valid {
                ""
            } else {
                " (not valid: see report)"
            }
        ));
    }
    for r in ratios(h, records) {
        out.push_str(&format!(
            "- TLS handshakes {}: {}\n",
            r.label,
            ratio_text(&r)
        ));
    }
    out
}

/// The report section: the table, the ratios, and handshake capacity beside bulk
/// capacity when the same run has a sweep.
pub fn html(
    h: &HandshakeResults,
    sweep: Option<&SweepResults>,
    records: &[VariantRecord],
    target_gbps: f64,
) -> String {
    let mut out = format!(
        "<h3 id=\"tls-handshake\">Handshakes <a class=\"how\" href=\"#m-tls-handshake\">how measured</a></h3>\
<p>{}, a {}-byte file per connection (keep-alive off: one handshake per request), {} nginx worker(s), each point a fresh nginx offering one group. \
<b>Per core</b> = handshakes per second divided by the CPU nginx's workers used.</p>\
<div class=\"scroll\"><table id=\"table-tls-handshake\"><tr><th class=\"l\">key</th><th class=\"l\">group</th><th class=\"l\">session</th><th class=\"l\">key store</th><th class=\"l\">variant</th>\
<th>handshakes/s</th><th>per core</th><th>resumed</th><th>clients</th><th>handshake p50 ms</th><th>nginx CPU</th><th>generator CPU</th><th class=\"l\">valid</th></tr>",
        escape(&h.config.protocol),
        h.config.size_bytes,
        h.config.cores
    );
    for p in &h.points {
        out.push_str(&format!(
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{:.0}</td><td><b>{}</b></td><td>{:.0} %</td><td>{}</td><td>{:.2}</td><td>{}</td><td>{:.0} %</td><td class=\"l\">{}</td></tr>",
            escape(&p.key),
            escape(&p.group),
            escape(&p.session),
            escape(&p.key_store),
            crate::variants::html_name(records, &p.point.variant),
            p.handshakes_per_sec,
            per_core(p),
            p.resumed_fraction * 100.0,
            p.point.concurrency,
            p.point.handshake.p50_ns as f64 / 1e6,
            p.point
                .server_cpu
                .as_ref()
                .map(|c| format!("{:.0} %", c.total * 100.0))
                .unwrap_or_else(|| "-".into()),
            p.point.generator_cpu * 100.0,
            match &p.point.invalid_reason {
                None => "yes".to_string(),
                Some(r) => format!("<span class=\"bad\">{}</span>", escape(r)),
            }
        ));
    }
    out.push_str("</table></div>");
    let rs = ratios(h, records);
    if !rs.is_empty() {
        out.push_str("<table id=\"table-tls-handshake-ratios\"><tr><th class=\"l\">ratio (per nginx core-second)</th><th>value [95 % interval]</th></tr>");
        for r in &rs {
            out.push_str(&format!(
                "<tr><td class=\"l\">{}</td><td>{}</td></tr>",
                escape(&r.label),
                escape(&ratio_text(r))
            ));
        }
        out.push_str("</table>");
    }
    out.push_str(&cost_split_html(h));
    if let Some(s) = sweep {
        let bulk = crate::tls::capacity(s, target_gbps);
        if !bulk.is_empty() {
            out.push_str("<h4>Handshake capacity beside bulk capacity</h4><p>What one nginx core does, per variant: full handshakes per second (first key, group and key store of the handshake run) beside the Gbit/s of bulk transfer of the sweep.</p><table id=\"table-tls-handshake-bulk\"><tr><th class=\"l\">variant</th><th>full handshakes/s per core</th><th class=\"l\">of</th><th class=\"l\">bulk suite</th><th>Gbit/s per core</th></tr>");
            for c in &bulk {
                let hs = h
                    .points
                    .iter()
                    .find(|p| p.session == "full" && p.point.variant == c.variant);
                out.push_str(&format!(
                    "<tr><td class=\"l\">{}</td><td><b>{}</b></td><td class=\"l\">{}</td><td class=\"l\">{}</td><td><b>{:.2}</b></td></tr>",
                    escape(&c.variant),
                    hs.map(per_core).unwrap_or_else(|| "not measured".into()),
                    hs.map(|p| escape(&what(p))).unwrap_or_default(),
                    escape(&c.suite),
                    c.bits_per_sec_per_core / 1e9
                ));
            }
            out.push_str("</table>");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use cipherbench_model::tls::{HandshakeConfig, Latency, ServerCpu, SweepPoint};
    use cipherbench_model::Summary;

    fn point(key: &str, store: &str, variant: &str, per_core: f64) -> HandshakePoint {
        HandshakePoint {
            key: key.into(),
            group: "X25519".into(),
            session: "full".into(),
            key_store: store.into(),
            handshakes_per_sec: per_core / 2.0,
            handshakes_per_core_sec: Some(per_core),
            resumed_fraction: 0.0,
            point: SweepPoint {
                suite: "TLS_AES_128_GCM_SHA256".into(),
                protocol: "TLSv1.3".into(),
                negotiated_suite: None,
                negotiated_protocol: None,
                negotiated_group: None,
                size_bytes: 64,
                cores: 1,
                variant: variant.into(),
                key_store: store.into(),
                concurrency: 16,
                window_ns: 1,
                interval_ns: 1,
                throughput_bytes_per_sec: 1.0,
                interval_throughput_bytes_per_sec: Summary::of_or_empty(&[1.0, 1.0]),
                // Steady windows, each interval's bytes counting handshakes.
                interval_samples_bytes_per_sec: vec![per_core * 32.0; 4],
                requests_per_sec: per_core / 2.0,
                requests: 1,
                requests_sent: 1,
                server_requests: None,
                cancelled: 0,
                requests_ok_total: 1,
                requests_resumed_total: 0,
                body_bytes: 64,
                errors: 0,
                errors_by_reason: Default::default(),
                latency: Latency::default(),
                first_byte: Latency::default(),
                handshake: Latency::default(),
                connect: Latency::default(),
                max_first_byte_ns: 0,
                within_limit: true,
                server_cpu: Some(ServerCpu::default()),
                generator_cpu: 0.5,
                generator_threads: 1,
                generator_saturated: false,
                valid: true,
                invalid_reason: None,
                probes: Vec::new(),
                generator_cpu_per_thread: Vec::new(),
                search: None,
                noise: None,
                agents: Vec::new(),
                rounds: Vec::new(),
                interleave_group: None,
                open_loop_rate: None,
                verification: None,
            },
        }
    }

    fn results() -> HandshakeResults {
        HandshakeResults {
            config: HandshakeConfig {
                protocol: "TLSv1.3".into(),
                keys: vec!["rsa2048".into()],
                groups: vec!["X25519".into()],
                sessions: vec!["full".into()],
                key_stores: vec!["file".into(), "pkcs11".into()],
                variants: vec!["accel".into(), "nopkaccel".into()],
                cores: 1,
                size_bytes: 64,
                window_ns: 1,
                probe_ns: 1,
                warmup_ns: 0,
                latency_limit_ns: 1,
                max_concurrency: 16,
                rounds: 1,
            },
            points: vec![
                point("rsa2048", "file", "accel", 2000.0),
                point("rsa2048", "file", "nopkaccel", 1000.0),
                point("rsa2048", "pkcs11", "accel", 1000.0),
            ],
        }
    }

    #[test]
    fn full_minus_resumed_is_the_signature_where_both_were_measured() {
        let mut h = results();
        // rsa2048 full at 1000 per core (1000 µs), resumed at 2500 (400 µs): 600 µs
        // of signature and certificate.
        h.points = vec![
            point("rsa2048", "file", "accel", 1000.0),
            HandshakePoint {
                session: "resumed".into(),
                resumed_fraction: 0.99,
                ..point("rsa2048", "file", "accel", 2500.0)
            },
            // No resumed partner: no row.
            point("rsa2048", "file", "nopkaccel", 800.0),
            // A "resumed" point that did not resume is no partner either.
            point("rsa2048", "pkcs11", "accel", 900.0),
            HandshakePoint {
                session: "resumed".into(),
                resumed_fraction: 0.2,
                ..point("rsa2048", "pkcs11", "accel", 2000.0)
            },
        ];
        let rows = cost_split(&h);
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!((rows[0].full_us, rows[0].resumed_us), (1000.0, 400.0));
        assert_eq!(rows[0].signature_us(), 600.0);
        // Without rounds there is no interval, and the figure stands alone.
        assert_eq!(rows[0].signature_interval, None);
        assert_eq!(rows[0].signature_text(), "600");
        let mut noisy = rows[0].clone();
        noisy.signature_interval = Some((-15.0, 1200.0));
        assert_eq!(noisy.signature_text(), "600 [-15 to 1200], not clear of 0");
        noisy.resumed_us = 1010.0;
        noisy.signature_interval = None;
        assert_eq!(noisy.signature_text(), "-10, below 0: noise");
        noisy.resumed_us = 400.0;
        noisy.signature_interval = Some((450.0, 750.0));
        assert_eq!(noisy.signature_text(), "600 [450-750]");
        let t = text(&h, &[]);
        assert!(t.contains("full - resumed = the signature"), "{t}");
        assert!(t.contains("      1000        400  600\n"), "{t}");
        assert!(html(&h, None, &[], 10.0).contains("table-tls-handshake-split"));
        // Full points only: nothing to split, nothing said.
        assert!(!text(&results(), &[]).contains("signature"));
    }

    #[test]
    fn ratios_compare_variants_with_accel_and_modules_with_files_per_core() {
        let rs = ratios(&results(), &[]);
        assert_eq!(rs.len(), 2, "{rs:?}");
        assert_eq!(rs[0].label, "rsa2048 X25519 full file: accel / nopkaccel");
        assert_eq!(rs[0].value.unwrap().0, 2.0);
        assert_eq!(rs[1].label, "rsa2048 X25519 full accel: file / pkcs11");
        assert_eq!(rs[1].value.unwrap().0, 2.0);
        let t = text(&results(), &[]);
        assert!(t.contains("accel / nopkaccel"), "{t}");
        assert!(t.contains("2.00x"), "{t}");
        let m = markdown(&results(), &[]);
        assert!(m.contains("file / pkcs11: 2.00x"), "{m}");
        let h = html(&results(), None, &[], 10.0);
        assert!(h.contains("table-tls-handshake-ratios"), "{h}");
    }

    #[test]
    fn a_per_core_ratio_whose_interval_holds_one_is_no_clear_difference() {
        let mut r = results();
        // nopkaccel at 1950 per core against accel's 2000, each window's rate
        // swinging ±10 % an interval.
        r.points[1] = point("rsa2048", "file", "nopkaccel", 1950.0);
        for p in &mut r.points[..2] {
            let per_core = p.handshakes_per_core_sec.unwrap();
            p.point.interval_samples_bytes_per_sec = [0.9, 1.1, 0.95, 1.05]
                .iter()
                .map(|k| k * per_core * 32.0)
                .collect();
        }
        let rs = ratios(&r, &[]);
        let i = rs[0].interval.unwrap();
        assert!((i.point - 2000.0 / 1950.0).abs() < 1e-9, "{i:?}");
        assert!(!i.is_clear(), "{i:?}");
        let t = text(&r, &[]);
        assert!(
            t.lines()
                .any(|l| l.contains("accel / nopkaccel") && l.ends_with("no clear difference")),
            "{t}"
        );
        assert!(markdown(&r, &[]).contains("no clear difference"));
        assert!(html(&r, None, &[], 10.0).contains("no clear difference"));
        // Without the per-interval rates (an older record): the ratio, said to have
        // no interval.
        for p in &mut r.points {
            p.point.interval_samples_bytes_per_sec.clear();
        }
        assert!(text(&r, &[]).contains("(no interval)"));
    }
}
