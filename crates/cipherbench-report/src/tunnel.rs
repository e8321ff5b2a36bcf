//! Layer 4 renderings: the terminal table, `tunnel.csv` and the report's section
//! with the IIJ IPsec post's table (seed 004: TCP and UDP Mbit/s per transform and
//! engine, next to the underlay) and its chart, and the variants' throughput ratios
//! with their 95 % intervals over the rounds. Pure functions of [`TunnelResults`].

use crate::csv::field;
use crate::svg::{escape, BarChart, Series};
use cipherbench_model::interval::{Pairing, RatioInterval, LEVEL, MIN_ROUNDS};
use cipherbench_model::speed::VariantRecord;
use cipherbench_model::tunnel::{GatewayRun, Protocol, TcpSample, TunnelPoint, TunnelResults};
use cipherbench_model::units::format_bits_per_sec;

/// `Underlay alone ...` from `underlay alone ...`.
fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

fn mbit(bits_per_sec: f64) -> String {
    format!("{:.0}", bits_per_sec / 1e6)
}

fn spread(p: &TunnelPoint) -> f64 {
    // Across runs when there are several, else across the per-second intervals.
    if p.throughput_bits_per_sec.n > 1 {
        p.throughput_bits_per_sec.rel_spread
    } else {
        p.interval_bits_per_sec.rel_spread
    }
}

fn loss(p: &TunnelPoint) -> Option<f64> {
    let losses: Vec<f64> = p.runs.iter().filter_map(|r| r.iperf.lost_percent).collect();
    (!losses.is_empty()).then(|| losses.iter().sum::<f64>() / losses.len() as f64)
}

/// The rows of the table: (transform, variant) in measured order.
fn rows(t: &TunnelResults) -> Vec<(String, String)> {
    let mut rows: Vec<(String, String)> = Vec::new();
    for p in &t.points {
        let key = (p.transform.clone(), p.variant.clone());
        if !rows.contains(&key) {
            rows.push(key);
        }
    }
    rows
}

/// What the header says was measured: only the protocols asked for, UDP with the
/// loss its rate search aimed at (both: TCP, and UDP at that rate).
fn measured(c: &cipherbench_model::tunnel::TunnelConfig) -> String {
    let loss = c.udp_target_loss * 100.0;
    match (
        c.protocols.contains(&Protocol::Tcp),
        c.protocols.contains(&Protocol::Udp),
    ) {
        (true, true) => format!("UDP at the rate giving about {loss:.0} % loss"),
        (false, true) => format!("UDP only, at the rate giving about {loss:.0} % loss"),
        _ => "TCP only".into(),
    }
}

/// Whether the underlay measured alone is the tunnel's ceiling: only when rate-limited
/// (`--underlay-rate`, `tc tbf`). A bare veth is none: nothing queues on it, so TCP
/// over it sends each write as its own segment while a tunnel's latency lets the
/// inner TCP coalesce them, and tunnels carry more than it (METHODOLOGY.md, "Share
/// of the underlay").
pub fn underlay_is_ceiling(c: &cipherbench_model::tunnel::TunnelConfig) -> bool {
    c.underlay_rate.is_some()
}

/// How the underlay measured alone is named: `underlay alone`, or without a rate
/// limit `underlay alone (no rate limit: not a ceiling)`.
pub fn underlay_label(c: &cipherbench_model::tunnel::TunnelConfig) -> &'static str {
    if underlay_is_ceiling(c) {
        "underlay alone"
    } else {
        "underlay alone (no rate limit: not a ceiling)"
    }
}

fn setup_line(t: &TunnelResults) -> String {
    let c = &t.config;
    let between = match &t.peer {
        Some(p) => format!(
            "between {} ({}) and the peer {} ({}, {}) over the real network",
            p.here.hostname, p.here.address, p.agent.name, p.there.hostname, p.there.address
        ),
        None => format!(
            "between two network namespaces over veth{}",
            c.underlay_rate
                .as_ref()
                .map(|r| format!(" (tbf {r})"))
                .unwrap_or_default()
        ),
    };
    format!(
        "ESP in UDP 4500 {between}; tunnel MTU {}; iperf3 {}{} {} s{}; {}; variant on {} gateway{}",
        c.tunnel_mtu,
        lengths(t),
        if c.iperf3_parallel > 1 {
            format!(" -P {}", c.iperf3_parallel)
        } else {
            String::new()
        },
        c.duration_ns / 1_000_000_000,
        if c.repeats > 1 {
            format!(" x{}", c.repeats)
        } else {
            String::new()
        },
        measured(c),
        c.variant_side.as_str(),
        if c.variant_side == cipherbench_model::tunnel::VariantSide::Both {
            "s"
        } else {
            " only"
        }
    )
}

/// Each TCP point's median as a share of the null transform's (no crypto, the same
/// gateways and placement): how much of this machine's own tunnel ceiling the
/// cipher keeps. Empty without a null TCP point, or at a fixed load (`--rate`).
pub fn null_shares(t: &TunnelResults) -> Vec<(String, String, f64)> {
    // At a fixed load every point that carried it is 100 %: nothing to say.
    if t.config.tcp_rate_bits_per_sec.is_some() {
        return Vec::new();
    }
    let Some(null) = t.point("null", "accel", Protocol::Tcp) else {
        return Vec::new();
    };
    let ceiling = null.throughput_bits_per_sec.median;
    if ceiling <= 0.0 || !ceiling.is_finite() {
        return Vec::new();
    }
    t.points
        .iter()
        .filter(|p| p.protocol == Protocol::Tcp && p.transform != "null")
        .map(|p| {
            (
                p.transform.clone(),
                p.variant.clone(),
                p.throughput_bits_per_sec.median / ceiling,
            )
        })
        .collect()
}

/// Cells per transform, in order: `aes128-gcm accel 78 %, noaesni 18 %; null ...`.
fn grouped(cells: &[(String, String)]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut last: Option<&str> = None;
    for (transform, cell) in cells {
        if last == Some(transform.as_str()) {
            if let Some(p) = parts.last_mut() {
                p.push_str(&format!(", {cell}"));
            }
        } else {
            parts.push(format!("{transform} {cell}"));
        }
        last = Some(transform.as_str());
    }
    parts.join("; ")
}

/// One line: `TCP as a share of the null transform's (...): aes128-gcm accel 78 %,
/// noaesni 18 %; ...`, or empty. `name` renders a variant (marking one that did not
/// take effect).
pub fn null_share_line(t: &TunnelResults, name: &dyn Fn(&str) -> String) -> String {
    let cells: Vec<(String, String)> = null_shares(t)
        .into_iter()
        .map(|(transform, variant, share)| {
            (
                transform,
                format!("{} {:.0} %", name(&variant), share * 100.0),
            )
        })
        .collect();
    if cells.is_empty() {
        return String::new();
    }
    let bound = t
        .point("null", "accel", Protocol::Tcp)
        .is_some_and(|p| p.instrument_limit().is_some());
    format!(
        "TCP as a share of the null transform's (no crypto, the same gateways: this machine's tunnel ceiling{}): {}",
        if bound {
            "; null's own figure is a lower bound, so these shares are upper bounds"
        } else {
            ""
        },
        grouped(&cells)
    )
}

/// Both gateways' cores per Gbit/s carried: the median over a point's runs of
/// (sender's + receiver's cores) / the Gbit/s iperf3's server received. None
/// without a run that carried anything.
pub fn cores_per_gbit(p: &TunnelPoint) -> Option<f64> {
    let per_run: Vec<f64> = p
        .runs
        .iter()
        .filter(|r| r.iperf.receiver_bits_per_sec > 0.0)
        .map(|r| {
            (r.sender.cpu_cores_used + r.receiver.cpu_cores_used)
                / (r.iperf.receiver_bits_per_sec / 1e9)
        })
        .collect();
    (!per_run.is_empty()).then(|| cipherbench_model::Summary::of_or_empty(&per_run).median)
}

/// A TCP point carried the fixed load asked (`--rate`): its median at least
/// [`cipherbench_model::tunnel::CARRIED_SHARE`] of it.
pub fn carried(p: &TunnelPoint, rate_bits_per_sec: u64) -> bool {
    p.throughput_bits_per_sec.median
        >= cipherbench_model::tunnel::CARRIED_SHARE * rate_bits_per_sec as f64
}

/// One line: what the gateways cost per Gbit/s of TCP, by transform and variant; at
/// a fixed load (`--rate`) with the points that did not carry it marked, and the
/// cores AES-NI saves at that load where both variants carried it. Empty without
/// TCP points.
pub fn cost_line(t: &TunnelResults, name: &dyn Fn(&str) -> String) -> String {
    let rate = t.config.tcp_rate_bits_per_sec;
    let tcp: Vec<&TunnelPoint> = t
        .points
        .iter()
        .filter(|p| p.protocol == Protocol::Tcp)
        .collect();
    let mut cells: Vec<(String, String)> = Vec::new();
    for p in &tcp {
        let Some(cost) = cores_per_gbit(p) else {
            continue;
        };
        let short = rate.filter(|&r| !carried(p, r)).map(|_| {
            format!(
                " (carried {}: saturated below the load)",
                format_bits_per_sec(p.throughput_bits_per_sec.median / 8.0)
            )
        });
        cells.push((
            p.transform.clone(),
            format!(
                "{} {cost:.2}{}",
                name(&p.variant),
                short.unwrap_or_default()
            ),
        ));
    }
    if cells.is_empty() {
        return String::new();
    }
    let mut saved = Vec::new();
    if let Some(r) = rate {
        for a in tcp.iter().filter(|p| p.variant == "accel") {
            let Some(n) = tcp
                .iter()
                .find(|p| p.transform == a.transform && p.variant == "noaesni")
            else {
                continue;
            };
            if let (true, true, Some(ca), Some(cn)) = (
                carried(a, r),
                carried(n, r),
                cores_per_gbit(a),
                cores_per_gbit(n),
            ) {
                saved.push(format!("{} {:.2}", a.transform, (cn - ca) * r as f64 / 1e9));
            }
        }
    }
    format!(
        "gateway cores per Gbit/s (both gateways, TCP{}): {}{}",
        rate.map(|r| format!(
            " at a fixed {} offered, iperf3 -b",
            format_bits_per_sec(r as f64 / 8.0)
        ))
        .unwrap_or_default(),
        grouped(&cells),
        if saved.is_empty() {
            String::new()
        } else {
            format!(
                "\ncores AES-NI saves at {} (noaesni's cost less accel's, both gateways): {}",
                format_bits_per_sec(rate.unwrap_or(0) as f64 / 8.0),
                saved.join("; ")
            )
        }
    )
}

/// iperf3's `-l` per protocol measured, as its runs reported it: `TCP -l 131072,
/// UDP -l 1220`.
fn lengths(t: &TunnelResults) -> String {
    t.config
        .protocols
        .iter()
        .map(|&p| {
            let name = match p {
                Protocol::Tcp => "TCP",
                Protocol::Udp => "UDP",
            };
            let rate = match (p, t.config.tcp_rate_bits_per_sec) {
                (Protocol::Tcp, Some(r)) => format!(" -b {r}"),
                _ => String::new(),
            };
            match t.iperf_length(p) {
                Some(l) => format!("{name} -l {l}{rate}"),
                None => format!("{name} default -l{rate}"),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The two-host tunnel's hosts, a line each: the peer as checked (fingerprint,
/// build, clock), then each host's end (its gateway's workers and CPUs, the
/// affinity read back, iperf3's CPU). Empty between namespaces.
pub fn peer_lines(t: &TunnelResults) -> Vec<String> {
    let Some(p) = &t.peer else {
        return Vec::new();
    };
    let a = &p.agent;
    let mut lines = vec![format!(
        "peer {}: host {}, kernel {}, {}, {} CPUs, {}, cipherbench {} {}; its clock {:+.3} ms from this host's (±{:.3} ms)",
        a.name,
        a.hostname,
        a.kernel,
        a.cpu_model,
        a.cpus.len(),
        a.openssl,
        a.version,
        a.build,
        a.clock_offset_ns as f64 / 1e6,
        a.clock_rtt_ns as f64 / 2e6
    )];
    for (what, end) in [("this host", &p.here), ("the peer", &p.there)] {
        let list = cipherbench_model::topology::format_cpu_list;
        let pinned = if end.gateway_cpus.is_empty() {
            "not pinned".to_string()
        } else {
            format!(
                "on CPUs {} (read back: {}), iperf3 on CPU {}{}",
                list(&end.gateway_cpus),
                if end.gateway_affinity.is_empty() {
                    "-".to_string()
                } else {
                    list(&end.gateway_affinity)
                },
                end.iperf3_cpu.map_or("-".to_string(), |c| c.to_string()),
                match &end.placement {
                    Some(pl) if !pl.disjoint => ", sharing: not a disjoint placement",
                    _ => "",
                }
            )
        };
        lines.push(format!(
            "{what} ({}, {}): the {} gateway, {} worker{} per direction, {pinned}",
            end.hostname,
            end.address,
            end.gateway,
            end.gateway_threads,
            if end.gateway_threads == 1 { "" } else { "s" },
        ));
    }
    lines
}

/// The terminal table, after the IIJ IPsec post's.
#[expect(
    clippy::too_many_lines,
    reason = "layer 4's terminal table in reading order, one block per column group and note"
)]
pub fn text(t: &TunnelResults) -> String {
    let judged = t.judged_variants();
    let mut out = format!("\ntunnel: {}\n", setup_line(t));
    for l in peer_lines(t) {
        out.push_str(&format!("  {l}\n"));
    }
    let ceiling = underlay_is_ceiling(&t.config);
    if let Some(u) = t.underlay(Protocol::Tcp) {
        out.push_str(&format!(
            "{}: TCP {} Mbit/s ±{:.1} %\n",
            underlay_label(&t.config),
            mbit(u.throughput_bits_per_sec.median),
            u.interval_bits_per_sec.rel_spread * 100.0
        ));
    }
    if t.points.is_empty() && t.strongswan.is_some() {
        // Only strongSwan ran (--stack strongswan).
        out.push_str(&crate::strongswan::text(t));
        return out;
    }
    let w = rows(t)
        .iter()
        .map(|(_, v)| v.len())
        .chain([8])
        .max()
        .unwrap_or(8);
    // The share of the underlay only where the underlay is a ceiling.
    let share_column = |share: String| {
        if ceiling {
            format!(" {share:>9}")
        } else {
            String::new()
        }
    };
    out.push_str(&format!(
        "\n{:<18} {:<w$} {:>14} {:>14} {:>7}{} {:>8} {:>8}  {}\n",
        "transform",
        "variant",
        "TCP Mbit/s",
        "UDP Mbit/s",
        "loss",
        share_column("underlay".into()),
        "CPU snd",
        "CPU rcv",
        "saturated first (TCP / UDP)"
    ));
    for (transform, variant) in rows(t) {
        let tcp = t.point(&transform, &variant, Protocol::Tcp);
        let udp = t.point(&transform, &variant, Protocol::Udp);
        let cell = |p: Option<&TunnelPoint>| {
            p.map(|p| {
                format!(
                    "{}{} ±{:.0}%{}",
                    if p.instrument_limit().is_some() {
                        "≥"
                    } else {
                        ""
                    },
                    mbit(p.throughput_bits_per_sec.median),
                    spread(p) * 100.0,
                    crate::machine::flag(&p.noise_findings(), false).trim()
                )
            })
            .unwrap_or_else(|| "-".into())
        };
        let cpu = |p: Option<&TunnelPoint>, sender: bool| {
            p.and_then(|p| p.runs.last())
                .map(|r| {
                    let g = if sender { &r.sender } else { &r.receiver };
                    format!("{:.2}", g.cpu_cores_used)
                })
                .unwrap_or_else(|| "-".into())
        };
        let saturated = |p: Option<&TunnelPoint>| {
            p.and_then(|p| p.runs.last())
                .map(|r| r.saturation.side.replace('_', " "))
                .unwrap_or_else(|| "-".into())
        };
        out.push_str(&format!(
            "{:<18} {:<w$} {:>14} {:>14} {:>7}{} {:>8} {:>8}  {} / {}\n",
            transform,
            crate::variants::text_name(&judged, &variant),
            cell(tcp),
            cell(udp),
            udp.and_then(loss)
                .map(|l| format!("{l:.1}%"))
                .unwrap_or_else(|| "-".into()),
            share_column(
                tcp.and_then(|p| p.underlay_share)
                    .map(|s| format!("{:.0}%", s * 100.0))
                    .unwrap_or_else(|| "-".into())
            ),
            cpu(tcp, true),
            cpu(tcp, false),
            saturated(tcp),
            saturated(udp)
        ));
    }
    out.push_str(&format!(
        "\n(Mbit/s = 10^6 bit/s received by iperf3's server; ± = spread; {}CPU = gateway cores used during the TCP run)\n",
        if ceiling {
            "underlay = TCP share of the rate-limited underlay alone; "
        } else {
            "no share of the underlay: without --underlay-rate the bare veth is no ceiling; "
        }
    ));
    out.push_str(&lower_bounds_text(t));
    let name = |v: &str| crate::variants::text_name(&judged, v);
    for line in [null_share_line(t, &name), cost_line(t, &name)] {
        if !line.is_empty() {
            out.push_str(&format!("\n{line}\n"));
        }
    }
    out.push_str(&ratio_text(&ratios(t)));
    out.push_str(&threads_block(t));
    if t.points.iter().any(|p| !p.noise_findings().is_empty()) {
        out.push_str(&crate::machine::noise_legend());
    }
    let bad: usize = t
        .points
        .iter()
        .flat_map(|p| &p.runs)
        .filter(|r| !r.byte_check.ok)
        .count();
    let drops: u64 = t
        .points
        .iter()
        .flat_map(|p| &p.runs)
        .map(|r| {
            r.sender
                .drops_total()
                .saturating_add(r.receiver.drops_total())
        })
        .fold(0, u64::saturating_add);
    let runs: usize = t.points.iter().map(|p| p.runs.len()).sum();
    out.push_str(&format!(
        "byte check: {} of {runs} runs agree with the gateways' counters; ESP drops: {drops}; {}\n",
        runs - bad,
        not_esp_sentence(t)
    ));
    out.push_str(&crate::variants::text_legend(&judged, &t.config.variants));
    for v in &t.variants {
        out.push_str(&crate::variants::line(v));
        // Between two hosts: this host's verdict, then the peer's (each judged
        // against its own accel).
        if let Some(there) = t
            .peer
            .as_ref()
            .and_then(|p| p.variants.iter().find(|r| r.name == v.name))
        {
            out.push_str(&format!(
                "  on the peer: {}",
                crate::variants::line(there).trim_start_matches("variant ")
            ));
        }
    }
    out.push_str(&crate::strongswan::text(t));
    out
}

/// The points whose figure the instrument set (`aes128-gcm accel UDP`, why), in
/// measured order: their figures are lower bounds
/// ([`TunnelPoint::instrument_limit`]).
pub fn lower_bounds(t: &TunnelResults) -> Vec<(String, String)> {
    t.points
        .iter()
        .filter_map(|p| {
            p.instrument_limit().map(|why| {
                (
                    format!(
                        "{} {} {}",
                        p.transform,
                        p.variant,
                        p.protocol.as_str().to_uppercase()
                    ),
                    why,
                )
            })
        })
        .collect()
}

/// The terminal's lines for [`lower_bounds`], marked `≥` in the table; empty
/// without any.
fn lower_bounds_text(t: &TunnelResults) -> String {
    lower_bounds(t)
        .iter()
        .map(|(what, why)| format!("≥ {what}: LOWER BOUND: {why}\n"))
        .collect()
}

/// One variant's throughput over another's at a point, as the tables show it: the
/// ratio of the medians of their runs, with the 95 % bootstrap interval over the
/// rounds where there are enough.
#[derive(Debug, Clone, PartialEq)]
pub struct PointRatio {
    /// median(top) / median(bottom).
    pub point: f64,
    /// The interval (None under [`MIN_ROUNDS`] runs a side).
    pub interval: Option<RatioInterval>,
    /// The fewer runs of the two points.
    pub rounds: usize,
    /// Whether the instrument, not the tunnel, set the top or the bottom figure
    /// ([`TunnelPoint::instrument_limit`]): then the ratio is a bound, not a value.
    pub limited: (bool, bool),
}

impl PointRatio {
    /// `top` over `bottom`, `pairing` as [`TunnelPoint::ratio_interval`] takes it;
    /// None when `bottom` carried nothing.
    pub fn of(top: &TunnelPoint, bottom: &TunnelPoint, pairing: Pairing) -> Option<PointRatio> {
        let b = bottom.throughput_bits_per_sec.median;
        (b > 0.0).then(|| PointRatio {
            point: top.throughput_bits_per_sec.median / b,
            interval: top.ratio_interval(bottom, pairing),
            rounds: top.runs.len().min(bottom.runs.len()),
            limited: (
                top.instrument_limit().is_some(),
                bottom.instrument_limit().is_some(),
            ),
        })
    }

    /// The mark before a ratio one of whose figures the instrument set: `≥ ` when
    /// the top's (it could only be higher), `≤ ` when the bottom's, `≶ ` when both
    /// (no direction), nothing otherwise.
    pub fn bound_mark(&self) -> &'static str {
        match self.limited {
            (false, false) => "",
            (true, false) => "≥ ",
            (false, true) => "≤ ",
            (true, true) => "≶ ",
        }
    }

    /// For a narrow column: `0.41x [0.38-0.44]`, with `?` when the interval holds
    /// 1.0, or the bare `0.41x` without an interval.
    pub fn compact(&self) -> String {
        let mark = self.bound_mark();
        match &self.interval {
            Some(i) => format!(
                "{mark}{:.2}x [{:.2}-{:.2}]{}",
                i.point,
                i.low,
                i.high,
                if i.is_clear() { "" } else { "?" }
            ),
            None => format!("{mark}{:.2}x", self.point),
        }
    }

    /// Whether the ratio may be read as a gain or a loss: its interval leaves out 1.0.
    /// Without an interval nothing says it is clear.
    pub fn is_clear(&self) -> bool {
        self.interval.is_some_and(|i| i.is_clear())
    }

    /// `3.06x [2.90-3.20]`, `1.02x [0.97-1.08], no clear difference`, or
    /// `3.06x (1 round: no interval)`.
    pub fn text(&self) -> String {
        let ratio = match &self.interval {
            Some(i) => i.display(),
            None => format!("{:.2}x ({}: no interval)", self.point, rounds(self.rounds)),
        };
        format!("{}{ratio}", self.bound_mark())
    }

    /// The same for report.html.
    pub fn html(&self) -> String {
        let ratio = match self.interval {
            Some(_) => crate::html::interval_cell(Some(self.point), self.interval),
            None => format!(
                "{:.2}× <span class=\"muted\">({}: no interval)</span>",
                self.point,
                rounds(self.rounds)
            ),
        };
        match self.bound_mark() {
            "" => ratio,
            mark => format!(
                "<span class=\"bad\" title=\"{}\">{}</span>{ratio}",
                escape(BOUND_LEGEND),
                mark.trim_end()
            ),
        }
    }
}

/// What the marks of [`PointRatio::bound_mark`] mean, for the tables' notes.
pub const BOUND_LEGEND: &str = "≥: the upper variant's figure was set by the instrument (a load generator at its limit, or a run stalled outside the gateways), so the ratio is a lower bound; ≤: the lower variant's, an upper bound; ≶: both, no bound";

fn rounds(n: usize) -> String {
    format!("{n} round{}", if n == 1 { "" } else { "s" })
}

/// A cell of a ratio table.
#[derive(Debug, Clone, PartialEq)]
pub enum RatioCell {
    /// The ratio.
    Ratio(PointRatio),
    /// No ratio: a variant did not take effect (`n/a: noaesni did not take effect`).
    NotApplicable(String),
}

impl RatioCell {
    fn text(&self) -> String {
        match self {
            RatioCell::Ratio(r) => r.text(),
            RatioCell::NotApplicable(na) => na.clone(),
        }
    }

    fn html(&self) -> String {
        match self {
            RatioCell::Ratio(r) => r.html(),
            RatioCell::NotApplicable(na) => format!("<span class=\"bad\">{}</span>", escape(na)),
        }
    }
}

/// One row of a ratio table: `top` over `bottom` (`accel`, `noaesni`) through a
/// transform, TCP and UDP.
#[derive(Debug, Clone, PartialEq)]
pub struct RatioRow {
    /// The variant on top.
    pub top: String,
    /// The variant below.
    pub bottom: String,
    /// The transform.
    pub transform: String,
    /// TCP's ratio, if both variants measured TCP.
    pub tcp: Option<RatioCell>,
    /// UDP's.
    pub udp: Option<RatioCell>,
}

/// The ratio rows of a stack's points: every pair of variants the speed tables
/// divide (accel/noaesni per library, a later library over the baseline, a
/// provider over its library's accel; [`crate::text::ratio_rows`]), per transform
/// in `transforms` where both were measured. `find` looks a point up by transform,
/// variant and protocol.
pub fn ratio_table<'a>(
    variants: &[String],
    records: &[VariantRecord],
    transforms: &[String],
    find: impl Fn(&str, &str, Protocol) -> Option<&'a TunnelPoint>,
) -> Vec<RatioRow> {
    let mut rows = Vec::new();
    for (_, top, bottom) in crate::text::ratio_rows(variants) {
        let na = crate::variants::not_applicable(records, &[&top, &bottom]);
        for transform in transforms {
            let cell = |protocol| {
                let (t, b) = (
                    find(transform, &top, protocol)?,
                    find(transform, &bottom, protocol)?,
                );
                match &na {
                    Some(na) => Some(RatioCell::NotApplicable(na.clone())),
                    // Variants of one transform through one stack: measured in turn.
                    None => PointRatio::of(t, b, Pairing::Paired).map(RatioCell::Ratio),
                }
            };
            let (tcp, udp) = (cell(Protocol::Tcp), cell(Protocol::Udp));
            if tcp.is_some() || udp.is_some() {
                rows.push(RatioRow {
                    top: top.clone(),
                    bottom: bottom.clone(),
                    transform: transform.clone(),
                    tcp,
                    udp,
                });
            }
        }
    }
    rows
}

/// The own gateways' ratio rows.
pub fn ratios(t: &TunnelResults) -> Vec<RatioRow> {
    ratio_table(
        &t.config.variants,
        &t.judged_variants(),
        &t.config.transforms,
        |transform, variant, protocol| t.point(transform, variant, protocol),
    )
}

/// The terminal block of ratio rows, with what its marks mean; empty without rows.
pub fn ratio_text(rows: &[RatioRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    let mut heading = None;
    for r in rows {
        let h = format!("{} / {}", r.top, r.bottom);
        if heading.as_ref() != Some(&h) {
            out.push_str(&format!(
                "\n{:<18} {:<40} {}\n",
                format!("{h}:"),
                "TCP",
                "UDP"
            ));
            heading = Some(h);
        }
        let cell = |c: &Option<RatioCell>| c.as_ref().map_or("-".to_string(), RatioCell::text);
        out.push_str(&format!(
            "{:<18} {:<40} {}\n",
            r.transform,
            cell(&r.tcp),
            cell(&r.udp)
        ));
    }
    out.push_str(&format!(
        "(ratio of the medians of the runs; [..] = {:.0} % bootstrap interval over the rounds, paired round by round where the variants were measured in turn; \"no clear difference\" where it holds 1.0{})\n",
        LEVEL * 100.0,
        if any_without_interval(rows) {
            format!(
                "; an interval needs {MIN_ROUNDS} rounds or more a side: --repeats {MIN_ROUNDS}, as the full preset"
            )
        } else {
            String::new()
        }
    ));
    if any_bound(rows) {
        out.push_str(&format!("({BOUND_LEGEND})\n"));
    }
    out
}

/// Whether a row's ratio has a side the instrument set ([`PointRatio::bound_mark`]).
fn any_bound(rows: &[RatioRow]) -> bool {
    rows.iter()
        .flat_map(|r| [&r.tcp, &r.udp])
        .any(|c| matches!(c, Some(RatioCell::Ratio(r)) if !r.bound_mark().is_empty()))
}

fn any_without_interval(rows: &[RatioRow]) -> bool {
    rows.iter()
        .flat_map(|r| [&r.tcp, &r.udp])
        .flatten()
        .any(|c| matches!(c, RatioCell::Ratio(r) if r.interval.is_none()))
}

/// The report's table of ratio rows; empty without rows.
pub fn ratio_html(rows: &[RatioRow], caption: &str) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<div class=\"scroll\"><table><tr><th class=\"l\">ratio</th><th class=\"l\">transform</th><th>TCP</th><th>UDP</th></tr>",
    );
    for r in rows {
        let cell = |c: &Option<RatioCell>| c.as_ref().map_or("–".to_string(), RatioCell::html);
        out.push_str(&format!(
            "<tr><td class=\"l\">{} / {}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td></tr>",
            escape(&r.top),
            escape(&r.bottom),
            escape(&r.transform),
            cell(&r.tcp),
            cell(&r.udp)
        ));
    }
    out.push_str(&format!(
        "</table></div><p class=\"muted\">{} Ratio of the medians of the runs; in brackets the {:.0} % bootstrap interval over the rounds (paired round by round where the variants were measured in turn, METHODOLOGY.md \"Ratios and their intervals\"); a ratio whose interval holds 1.0 is no clear difference, not a gain. An interval needs {MIN_ROUNDS} rounds or more a side (<code>--repeats {MIN_ROUNDS}</code>).{}</p>",
        escape(caption),
        LEVEL * 100.0,
        if any_bound(rows) {
            format!(" {}.", escape(BOUND_LEGEND))
        } else {
            String::new()
        }
    ));
    out
}

/// summary.md's lines for ratio rows: `- tunnel aes128-gcm tcp accel/noaesni: 3.06x [2.90-3.20]`.
pub fn ratio_markdown(rows: &[RatioRow], stack: &str) -> String {
    let mut out = String::new();
    for r in rows {
        for (protocol, cell) in [("tcp", &r.tcp), ("udp", &r.udp)] {
            if let Some(c) = cell {
                out.push_str(&format!(
                    "- tunnel{stack} {} {protocol} {}/{}: {}\n",
                    r.transform,
                    r.top,
                    r.bottom,
                    c.text()
                ));
            }
        }
    }
    out
}

/// Pools of more workers than this are summed up (count, sum, least-most) instead
/// of listing every worker's share.
pub const LISTED_WORKERS: usize = 8;

/// One gateway's threads as `name cores`, a pipeline's pool of workers as one
/// entry with each worker's share (`seal 0.41/0.40`), or beyond
/// [`LISTED_WORKERS`] workers their count, sum and range
/// (`open 64 workers 1.02 (0.01-0.03 each)`).
pub fn thread_loads(g: &GatewayRun) -> String {
    let mut stages: Vec<(String, Vec<f64>)> = Vec::new();
    for t in &g.threads {
        let stage = t.name.split_once('/').map_or(t.name.as_str(), |(s, _)| s);
        match stages.iter_mut().find(|(name, _)| name == stage) {
            Some((_, loads)) => loads.push(t.cpu_cores_used),
            None => stages.push((stage.to_string(), vec![t.cpu_cores_used])),
        }
    }
    stages
        .iter()
        .map(|(name, loads)| {
            if loads.len() > LISTED_WORKERS {
                let min = loads.iter().copied().fold(f64::INFINITY, f64::min);
                let max = loads.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = loads.iter().sum();
                return format!(
                    "{name} {} workers {sum:.2} ({min:.2}-{max:.2} each)",
                    loads.len()
                );
            }
            let loads: Vec<String> = loads.iter().map(|l| format!("{l:.2}")).collect();
            format!("{name} {}", loads.join("/"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Per-thread CPU of both gateways in each row's TCP run (or its UDP run without
/// TCP), so a saturated thread or pool is visible at every point.
fn threads_block(t: &TunnelResults) -> String {
    let c = &t.config;
    let mut out = format!(
        "gateway threads (cores used; {} crypto worker{} per direction, {}):\n",
        c.gateway_threads,
        if c.gateway_threads == 1 { "" } else { "s" },
        c.gateway_threads_from.as_deref().unwrap_or("as recorded")
    );
    for (transform, variant) in rows(t) {
        let point = t
            .point(&transform, &variant, Protocol::Tcp)
            .or_else(|| t.point(&transform, &variant, Protocol::Udp));
        let Some(run) = point.and_then(|p| p.runs.last()) else {
            continue;
        };
        let runs = point.map_or(&[][..], |p| &p.runs[..]);
        out.push_str(&format!(
            "  {transform} {} {}: sender {}{} | receiver {}{}\n",
            crate::variants::text_name(&t.judged_variants(), &variant),
            point.map_or("", |p| p.protocol.as_str()),
            thread_loads(&run.sender),
            split_note(runs.iter().map(|r| &r.sender)),
            thread_loads(&run.receiver),
            split_note(runs.iter().map(|r| &r.receiver)),
        ));
        let tcp = t.point(&transform, &variant, Protocol::Tcp);
        for line in tcp.map(tcp_lines).unwrap_or_default() {
            out.push_str(&format!("    {line}\n"));
        }
    }
    out
}

/// One line per TCP run of `point` with its sender's connection as sampled
/// mid-run (`tcp run 1 (4612 Mbit/s): cwnd 312 rtt 0.21 ms pacing 6.10 Gbit/s
/// rwnd-limited 0 % (mid-run); 31.0 pkts/TUN read`); none when no run has a sample
/// (UDP, or a record from before the sample).
pub fn tcp_lines(point: &TunnelPoint) -> Vec<String> {
    if point.runs.iter().all(|r| r.tcp.is_none()) {
        return Vec::new();
    }
    point
        .runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            format!(
                "tcp run {} ({} Mbit/s): {}",
                i + 1,
                mbit(r.iperf.receiver_bits_per_sec),
                r.tcp.as_deref().map_or("not sampled".into(), |s| {
                    tcp_state(s, r.sender.sealed_per_tun_read())
                })
            )
        })
        .collect()
}

/// `cwnd 312 rtt 0.21 ms pacing 6.10 Gbit/s rwnd-limited 0 % (mid-run)`, with the
/// sending gateway's inner packets per TUN read after it when known.
pub fn tcp_state(s: &TcpSample, per_read: Option<f64>) -> String {
    let mut parts = vec![format!(
        "cwnd {}",
        s.cwnd.map_or("?".into(), |c| c.to_string())
    )];
    if let Some(rtt) = s.rtt_ms {
        parts.push(format!("rtt {rtt:.2} ms"));
    }
    if let Some(pacing) = s.pacing_bits_per_sec {
        parts.push(format!(
            "pacing {}",
            cipherbench_model::units::format_bits_per_sec(pacing / 8.0)
        ));
    }
    if let Some(share) = s.rwnd_limited_share() {
        parts.push(format!("rwnd-limited {:.0} %", share * 100.0));
    }
    let mut line = format!("{} (mid-run)", parts.join(" "));
    if let Some(n) = per_read {
        line.push_str(&format!("; {n:.1} pkts/TUN read"));
    }
    line
}

/// ` (split in run 2 at 0.62 s, waited 37 %)`: where one gateway's runs (in order)
/// first show its one-core `tun<->udp` thread split into two; empty if none did.
pub fn split_note<'a>(runs: impl Iterator<Item = &'a GatewayRun>) -> String {
    for (i, g) in runs.enumerate() {
        let Some(split) = g.split else { continue };
        let when = if split.during_run() {
            format!("in run {} at {:.2} s", i + 1, split.at_seconds)
        } else {
            format!("before run {}", i + 1)
        };
        return format!(" (split {when}, waited {:.0} %)", split.wait_share * 100.0);
    }
    String::new()
}

/// Both gateways of every run: (NAT keepalives, non-ESP datagrams, datagrams
/// without exactly one outcome).
fn not_esp(t: &TunnelResults) -> (u64, u64, i128) {
    let gateways = t
        .points
        .iter()
        .flat_map(|p| &p.runs)
        .flat_map(|r| [&r.sender, &r.receiver]);
    gateways.fold((0, 0, 0), |(k, n, u), g| {
        (
            k.saturating_add(g.nat_keepalives),
            n.saturating_add(g.non_esp),
            u + g.unaccounted(),
        )
    })
}

/// The gateways' received datagrams that were not ESP, and any they did not
/// account for (RFC 3948: each is opened, dropped, a keepalive or IKE).
fn not_esp_sentence(t: &TunnelResults) -> String {
    let (keepalives, non_esp, unaccounted) = not_esp(t);
    let accounted = if unaccounted == 0 {
        "every received datagram accounted for".to_string()
    } else {
        format!("{unaccounted} received datagrams NOT accounted for")
    };
    format!("{accounted} ({keepalives} NAT keepalives, {non_esp} non-ESP)")
}

/// `tunnel.csv`: one row per measured run (the underlay's with transform
/// `underlay`), with its round and place in the measuring order.
pub fn csv(t: &TunnelResults) -> String {
    let mut out = String::from(
        "transform,variant,variant_side,protocol,run,target_bits_per_sec,receiver_bits_per_sec,sender_bits_per_sec,lost_percent,retransmits,sender_cpu_cores,receiver_cpu_cores,sender_busiest_thread_cores,receiver_busiest_thread_cores,sealed_packets,opened_packets,esp_drops,socket_drops,tun_queue_drops,byte_check_ok,saturated,underlay_share,nat_keepalives,non_esp,unaccounted_datagrams,round,sequence,tcp_cwnd,tcp_rtt_ms,tcp_pacing_bits_per_sec,tcp_delivery_bits_per_sec,tcp_rwnd_limited_share,sender_packets_per_tun_read,receiver_packets_per_tun_write\n",
    );
    let opt = |v: Option<f64>| v.map(|v| format!("{v:.4}")).unwrap_or_default();
    let whole = |v: Option<f64>| v.map(|v| format!("{v:.0}")).unwrap_or_default();
    for u in &t.underlay {
        for (i, r) in u.runs.iter().enumerate() {
            out.push_str(&format!(
                "underlay,,,{},{},{},{:.0},{:.0},{},{},,,,,,,,,,,,,,,,,,,,,,,,\n",
                u.protocol.as_str(),
                i + 1,
                opt(r.target_bits_per_sec),
                r.receiver_bits_per_sec,
                r.sender_bits_per_sec,
                opt(r.lost_percent),
                r.retransmits.map(|x| x.to_string()).unwrap_or_default(),
            ));
        }
    }
    for p in &t.points {
        for (i, r) in p.runs.iter().enumerate() {
            let tcp = r.tcp.as_deref();
            let busiest = |g: &cipherbench_model::tunnel::GatewayRun| {
                g.busiest_thread()
                    .map(|t| format!("{:.3}", t.cpu_cores_used))
                    .unwrap_or_default()
            };
            out.push_str(&format!(
                "{},{},{},{},{},{},{:.0},{:.0},{},{},{:.3},{:.3},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                field(&p.transform),
                field(&p.variant),
                p.variant_side.as_str(),
                p.protocol.as_str(),
                i + 1,
                opt(r.iperf.target_bits_per_sec),
                r.iperf.receiver_bits_per_sec,
                r.iperf.sender_bits_per_sec,
                opt(r.iperf.lost_percent),
                r.iperf
                    .retransmits
                    .map(|x| x.to_string())
                    .unwrap_or_default(),
                r.sender.cpu_cores_used,
                r.receiver.cpu_cores_used,
                busiest(&r.sender),
                busiest(&r.receiver),
                r.sender.sealed_packets,
                r.receiver.opened_packets,
                r.sender.drops_total().saturating_add(r.receiver.drops_total()),
                r.receiver.socket_drops,
                r.sender.tun_queue_drops,
                r.byte_check.ok,
                field(&r.saturation.side),
                opt(p.underlay_share),
                r.sender.nat_keepalives.saturating_add(r.receiver.nat_keepalives),
                r.sender.non_esp.saturating_add(r.receiver.non_esp),
                r.sender.unaccounted() + r.receiver.unaccounted(),
                r.round.map(|n| n.to_string()).unwrap_or_default(),
                r.sequence.map(|n| n.to_string()).unwrap_or_default(),
                tcp.and_then(|s| s.cwnd)
                    .map(|c| c.to_string())
                    .unwrap_or_default(),
                opt(tcp.and_then(|s| s.rtt_ms)),
                whole(tcp.and_then(|s| s.pacing_bits_per_sec)),
                whole(tcp.and_then(|s| s.delivery_bits_per_sec)),
                opt(tcp.and_then(TcpSample::rwnd_limited_share)),
                opt(r.sender.sealed_per_tun_read()),
                opt(r.receiver.opened_per_tun_write()),
            ));
        }
    }
    out
}

/// The report's layer 4 section.
#[expect(
    clippy::too_many_lines,
    reason = "the layer 4 section in reading order, one block per table or chart"
)]
pub fn html(t: &TunnelResults) -> String {
    let judged = t.judged_variants();
    let mut out = String::from("<h2 id=\"tunnel\">Layer 4: the IPsec tunnel</h2>");
    out.push_str(&format!("<p>{}.</p>", escape(&setup_line(t))));
    let hosts = peer_lines(t);
    if !hosts.is_empty() {
        out.push_str("<ul>");
        for l in &hosts {
            out.push_str(&format!("<li>{}</li>", escape(l)));
        }
        out.push_str("</ul>");
    }
    let underlay = t.underlay(Protocol::Tcp);
    if t.points.is_empty() && t.strongswan.is_some() {
        // Only strongSwan ran (--stack strongswan).
        if let Some(u) = underlay {
            out.push_str(&format!(
                "<p>{}: TCP {} Mbit/s.</p>",
                escape(&capitalised(underlay_label(&t.config))),
                mbit(u.throughput_bits_per_sec.median)
            ));
        }
        out.push_str(&crate::strongswan::html(t));
        return out;
    }
    let rows = rows(t);
    let mut transforms: Vec<String> = Vec::new();
    for (transform, _) in &rows {
        if !transforms.contains(transform) {
            transforms.push(transform.clone());
        }
    }
    // The underlay's bar only where it is a ceiling (the table still shows it).
    let ceiling = underlay_is_ceiling(&t.config);
    let mut categories = Vec::new();
    if underlay.is_some() && ceiling {
        categories.push("underlay".to_string());
    }
    categories.extend(transforms.iter().cloned());
    let mut series = Vec::new();
    for variant in &t.config.variants {
        for protocol in [Protocol::Tcp, Protocol::Udp] {
            let values: Vec<Option<f64>> = categories
                .iter()
                .map(|c| {
                    if c == "underlay" {
                        return (protocol == Protocol::Tcp && variant == &t.config.variants[0])
                            .then(|| underlay.map(|u| u.throughput_bits_per_sec.median / 1e6))
                            .flatten();
                    }
                    t.point(c, variant, protocol)
                        .map(|p| p.throughput_bits_per_sec.median / 1e6)
                })
                .collect();
            if values.iter().any(Option::is_some) {
                series.push(Series {
                    intervals: Vec::new(),
                    name: format!(
                        "{} {}{}",
                        protocol.as_str().to_uppercase(),
                        variant,
                        if crate::variants::ineffective(&judged, variant).is_some() {
                            " (did not take effect)"
                        } else {
                            ""
                        }
                    ),
                    values,
                });
            }
        }
    }
    let chart = BarChart {
        id: "fig-tunnel".into(),
        title: "Tunnel throughput by transform".into(),
        description: format!(
            "iperf3 throughput in Mbit/s through the ESP tunnel for each transform, TCP and UDP (at about 5 % loss), with AES-NI available and masked{}.",
            if ceiling && underlay.is_some() {
                ", next to the rate-limited underlay alone"
            } else {
                ""
            }
        ),
        categories,
        series,
        y_label: "Mbit/s (10^6 bit/s)".into(),
        reference: None,
        format: |v| format!("{v:.0}"),
    };
    out.push_str("<figure>");
    out.push_str(&chart.render());
    out.push_str(&format!(
        "<figcaption>After the IIJ IPsec post's tables: what iperf3's server received through the tunnel, per transform and engine; {}</figcaption></figure>",
        match (underlay.is_some(), ceiling) {
            (true, true) => "the first bar is the rate-limited underlay alone (TCP).",
            (true, false) => "the underlay alone is left out: without <code>--underlay-rate</code> the bare veth is no ceiling (its figure is in the table).",
            (false, _) => "the underlay alone was not measured.",
        }
    ));
    let share_cell = |cell: String| {
        if ceiling {
            format!("<td>{cell}</td>")
        } else {
            String::new()
        }
    };
    out.push_str(&format!(
        "<div class=\"scroll\"><table><tr><th class=\"l\">transform</th><th class=\"l\">engine</th><th>TCP [Mbps]</th><th>UDP [Mbps]</th><th>UDP loss</th>{}<th>gateway CPU send / receive</th><th>ESP drops</th><th class=\"l\">saturated first (TCP / UDP)</th></tr>",
        if ceiling {
            "<th>share of underlay (TCP)</th>"
        } else {
            ""
        }
    ));
    if let Some(u) = underlay {
        out.push_str(&format!(
            "<tr><td class=\"l\">{}</td><td class=\"l\">–</td><td>{} <span class=\"muted\">±{:.1} %</span></td><td>–</td><td>–</td>{}<td>–</td><td>–</td><td class=\"l\">–</td></tr>",
            escape(underlay_label(&t.config)),
            mbit(u.throughput_bits_per_sec.median),
            u.interval_bits_per_sec.rel_spread * 100.0,
            share_cell("100 %".into())
        ));
    }
    for (transform, variant) in &rows {
        let tcp = t.point(transform, variant, Protocol::Tcp);
        let udp = t.point(transform, variant, Protocol::Udp);
        let cell = |p: Option<&TunnelPoint>| {
            p.map(|p| {
                format!(
                    "{}{} <span class=\"{}\">±{:.1} %</span>{}",
                    match p.instrument_limit() {
                        Some(why) =>
                            format!("<span class=\"bad\" title=\"{}\">≥</span> ", escape(&why)),
                        None => String::new(),
                    },
                    mbit(p.throughput_bits_per_sec.median),
                    if spread(p) > cipherbench_model::stats::HIGH_SPREAD {
                        "bad"
                    } else {
                        "muted"
                    },
                    spread(p) * 100.0,
                    crate::machine::noise_mark_html(&p.noise_findings())
                )
            })
            .unwrap_or_else(|| "–".into())
        };
        let run = tcp.or(udp).and_then(|p| p.runs.last());
        let drops: u64 = [tcp, udp]
            .iter()
            .flatten()
            .flat_map(|p| &p.runs)
            .map(|r| {
                r.sender
                    .drops_total()
                    .saturating_add(r.receiver.drops_total())
            })
            .fold(0, u64::saturating_add);
        let side = |p: Option<&TunnelPoint>| {
            p.and_then(|p| p.runs.last())
                .map(|r| {
                    format!(
                        "<span title=\"{}\">{}</span>",
                        escape(&r.saturation.evidence),
                        escape(&r.saturation.side.replace('_', " "))
                    )
                })
                .unwrap_or_else(|| "–".into())
        };
        out.push_str(&format!(
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td>{}<td>{}</td><td>{}</td><td class=\"l\">{} / {}</td></tr>",
            escape(transform),
            crate::variants::html_name(&judged, variant),
            cell(tcp),
            cell(udp),
            udp.and_then(loss).map(|l| format!("{l:.1} %")).unwrap_or_else(|| "–".into()),
            share_cell(tcp.and_then(|p| p.underlay_share).map(|s| format!("{:.0} %", s * 100.0)).unwrap_or_else(|| "–".into())),
            run.map(|r| format!("{:.2} / {:.2}", r.sender.cpu_cores_used, r.receiver.cpu_cores_used)).unwrap_or_else(|| "–".into()),
            drops,
            side(tcp),
            side(udp)
        ));
    }
    out.push_str("</table></div>");
    for (what, why) in lower_bounds(t) {
        out.push_str(&format!(
            "<p class=\"bad\">{}: a lower bound (≥): {}</p>",
            escape(&what),
            escape(&why)
        ));
    }
    out.push_str(&ratio_html(
        &ratios(t),
        "Throughput of one variant over another through the same transform.",
    ));
    out.push_str(&crate::variants::html_table(&t.variants));
    if let Some(p) = &t.peer {
        out.push_str(&format!(
            "<p>The same variants as judged on the peer {} ({}), against its own accel:</p>",
            escape(&p.agent.name),
            escape(&p.there.hostname)
        ));
        out.push_str(&crate::variants::html_table(&p.variants));
    }
    out.push_str("<p class=\"muted\">Mbit/s received by iperf3's server (10<sup>6</sup> bit/s). ± is the spread across runs, or across per-second intervals for a single run. Gateway CPU: cores used by each gateway process during the TCP run (1.00 = one full core). Saturated first: where UDP datagrams were lost (the sending TUN queue, the receiving gateway's socket, or past both), or without losses the gateway thread nearest a full core; hover for the evidence.</p>");
    out.push_str("<details><summary>Every run</summary><div class=\"scroll\"><table><tr><th class=\"l\">transform</th><th class=\"l\">variant</th><th class=\"l\">protocol</th><th>-b</th><th>Mbit/s</th><th>loss</th><th>retransmits</th><th>sealed</th><th>opened</th><th>bytes check</th><th class=\"l\">drops by reason</th></tr>");
    for p in &t.points {
        for r in &p.runs {
            let mut reasons: Vec<String> = r
                .sender
                .drops
                .iter()
                .chain(r.receiver.drops.iter())
                .filter(|(_, n)| **n > 0)
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            // Not drops, but received and counted: say so where drops are.
            let (keepalives, non_esp) = (
                r.sender
                    .nat_keepalives
                    .saturating_add(r.receiver.nat_keepalives),
                r.sender.non_esp.saturating_add(r.receiver.non_esp),
            );
            if keepalives > 0 || non_esp > 0 {
                reasons.push(format!(
                    "(not ESP: {keepalives} NAT keepalives, {non_esp} IKE)"
                ));
            }
            let unaccounted = r.sender.unaccounted() + r.receiver.unaccounted();
            out.push_str(&format!(
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}{}</td></tr>",
                escape(&p.transform),
                escape(&p.variant),
                p.protocol.as_str(),
                r.iperf.target_bits_per_sec.map(mbit).unwrap_or_else(|| "–".into()),
                mbit(r.iperf.receiver_bits_per_sec),
                r.iperf.lost_percent.map(|l| format!("{l:.1} %")).unwrap_or_else(|| "–".into()),
                r.iperf.retransmits.map(|x| x.to_string()).unwrap_or_else(|| "–".into()),
                r.sender.sealed_packets,
                r.receiver.opened_packets,
                if r.byte_check.ok { "<span class=\"ok\">agrees</span>" } else { "<span class=\"bad\">differs</span>" },
                escape(&if reasons.is_empty() { "none".to_string() } else { reasons.join(", ") }),
                if unaccounted == 0 {
                    String::new()
                } else {
                    format!(" <span class=\"bad\">{unaccounted} received datagrams not accounted for</span>")
                }
            ));
        }
    }
    out.push_str("</table></div></details>");
    out.push_str(&crate::strongswan::html(t));
    out
}
