//! Layer 4 renderings: the terminal table, `tunnel.csv` and the report's section
//! with seed 004's table (TCP and UDP Mbit/s per transform and engine, next to the
//! underlay) and its chart. Pure functions of [`TunnelResults`].

use crate::csv::field;
use crate::svg::{escape, BarChart, Series};
use cipherbench_model::tunnel::{GatewayRun, Protocol, TunnelPoint, TunnelResults};

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

fn setup_line(t: &TunnelResults) -> String {
    let c = &t.config;
    format!(
        "ESP in UDP 4500 between two network namespaces over veth{}; tunnel MTU {}; iperf3 {}{} {} s{}; UDP at the rate giving about {:.0} % loss; variant on {} gateway{}",
        c.underlay_rate
            .as_ref()
            .map(|r| format!(" (tbf {r})"))
            .unwrap_or_default(),
        c.tunnel_mtu,
        c.length_bytes
            .map(|l| format!("-l {l}"))
            .unwrap_or_else(|| "default -l".into()),
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
        c.udp_target_loss * 100.0,
        c.variant_side.as_str(),
        if c.variant_side == cipherbench_model::tunnel::VariantSide::Both {
            "s"
        } else {
            " only"
        }
    )
}

/// The terminal table, after seed 004's.
pub fn text(t: &TunnelResults) -> String {
    let mut out = format!("\ntunnel: {}\n", setup_line(t));
    if let Some(u) = t.underlay(Protocol::Tcp) {
        out.push_str(&format!(
            "underlay alone: TCP {} Mbit/s ±{:.1} %\n",
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
    out.push_str(&format!(
        "\n{:<18} {:<w$} {:>14} {:>14} {:>7} {:>9} {:>8} {:>8}  {}\n",
        "transform",
        "variant",
        "TCP Mbit/s",
        "UDP Mbit/s",
        "loss",
        "underlay",
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
                    "{} ±{:.0}%{}",
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
            "{:<18} {:<w$} {:>14} {:>14} {:>7} {:>9} {:>8} {:>8}  {} / {}\n",
            transform,
            crate::variants::text_name(&t.variants, &variant),
            cell(tcp),
            cell(udp),
            udp.and_then(loss)
                .map(|l| format!("{l:.1}%"))
                .unwrap_or_else(|| "-".into()),
            tcp.and_then(|p| p.underlay_share)
                .map(|s| format!("{:.0}%", s * 100.0))
                .unwrap_or_else(|| "-".into()),
            cpu(tcp, true),
            cpu(tcp, false),
            saturated(tcp),
            saturated(udp)
        ));
    }
    out.push_str("\n(Mbit/s = 10^6 bit/s received by iperf3's server; ± = spread; underlay = TCP share of the underlay alone; CPU = gateway cores used during the TCP run)\n");
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
    out.push_str(&crate::variants::text_legend(
        &t.variants,
        &t.config.variants,
    ));
    for v in &t.variants {
        out.push_str(&crate::variants::line(v));
    }
    out.push_str(&crate::strongswan::text(t));
    out
}

/// One gateway's threads as `name cores`, a pipeline's pool of workers as one
/// entry with each worker's share (`seal 0.41/0.40`).
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
        out.push_str(&format!(
            "  {transform} {} {}: sender {} | receiver {}\n",
            crate::variants::text_name(&t.variants, &variant),
            point.map_or("", |p| p.protocol.as_str()),
            thread_loads(&run.sender),
            thread_loads(&run.receiver)
        ));
    }
    out
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
/// `underlay`).
pub fn csv(t: &TunnelResults) -> String {
    let mut out = String::from(
        "transform,variant,variant_side,protocol,run,target_bits_per_sec,receiver_bits_per_sec,sender_bits_per_sec,lost_percent,retransmits,sender_cpu_cores,receiver_cpu_cores,sender_busiest_thread_cores,receiver_busiest_thread_cores,sealed_packets,opened_packets,esp_drops,socket_drops,tun_queue_drops,byte_check_ok,saturated,underlay_share,nat_keepalives,non_esp,unaccounted_datagrams\n",
    );
    let opt = |v: Option<f64>| v.map(|v| format!("{v:.4}")).unwrap_or_default();
    for u in &t.underlay {
        for (i, r) in u.runs.iter().enumerate() {
            out.push_str(&format!(
                "underlay,,,{},{},{},{:.0},{:.0},{},{},,,,,,,,,,,,,,,\n",
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
            let busiest = |g: &cipherbench_model::tunnel::GatewayRun| {
                g.busiest_thread()
                    .map(|t| format!("{:.3}", t.cpu_cores_used))
                    .unwrap_or_default()
            };
            out.push_str(&format!(
                "{},{},{},{},{},{},{:.0},{:.0},{},{},{:.3},{:.3},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
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
            ));
        }
    }
    out
}

/// The report's layer 4 section.
pub fn html(t: &TunnelResults) -> String {
    let mut out = String::from("<h2 id=\"tunnel\">Layer 4: the IPsec tunnel</h2>");
    out.push_str(&format!("<p>{}.</p>", escape(&setup_line(t))));
    let underlay = t.underlay(Protocol::Tcp);
    if t.points.is_empty() && t.strongswan.is_some() {
        // Only strongSwan ran (--stack strongswan).
        if let Some(u) = underlay {
            out.push_str(&format!(
                "<p>Underlay alone: TCP {} Mbit/s.</p>",
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
    let mut categories = Vec::new();
    if underlay.is_some() {
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
                        if crate::variants::ineffective(&t.variants, variant).is_some() {
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
        description: "iperf3 throughput in Mbit/s through the ESP tunnel for each transform, TCP and UDP (at about 5 % loss), with AES-NI available and masked, next to the underlay alone.".into(),
        categories,
        series,
        y_label: "Mbit/s (10^6 bit/s)".into(),
        reference: None,
        format: |v| format!("{v:.0}"),
    };
    out.push_str("<figure>");
    out.push_str(&chart.render());
    out.push_str("<figcaption>After seed 004's tables: what iperf3's server received through the tunnel, per transform and engine; the first bar is the underlay alone (TCP).</figcaption></figure>");
    out.push_str("<div class=\"scroll\"><table><tr><th class=\"l\">transform</th><th class=\"l\">engine</th><th>TCP [Mbps]</th><th>UDP [Mbps]</th><th>UDP loss</th><th>share of underlay (TCP)</th><th>gateway CPU send / receive</th><th>ESP drops</th><th class=\"l\">saturated first (TCP / UDP)</th></tr>");
    if let Some(u) = underlay {
        out.push_str(&format!(
            "<tr><td class=\"l\">underlay alone</td><td class=\"l\">–</td><td>{} <span class=\"muted\">±{:.1} %</span></td><td>–</td><td>–</td><td>100 %</td><td>–</td><td>–</td><td class=\"l\">–</td></tr>",
            mbit(u.throughput_bits_per_sec.median),
            u.interval_bits_per_sec.rel_spread * 100.0
        ));
    }
    for (transform, variant) in &rows {
        let tcp = t.point(transform, variant, Protocol::Tcp);
        let udp = t.point(transform, variant, Protocol::Udp);
        let cell = |p: Option<&TunnelPoint>| {
            p.map(|p| {
                format!(
                    "{} <span class=\"{}\">±{:.1} %</span>{}",
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
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{} / {}</td></tr>",
            escape(transform),
            crate::variants::html_name(&t.variants, variant),
            cell(tcp),
            cell(udp),
            udp.and_then(loss).map(|l| format!("{l:.1} %")).unwrap_or_else(|| "–".into()),
            tcp.and_then(|p| p.underlay_share).map(|s| format!("{:.0} %", s * 100.0)).unwrap_or_else(|| "–".into()),
            run.map(|r| format!("{:.2} / {:.2}", r.sender.cpu_cores_used, r.receiver.cpu_cores_used)).unwrap_or_else(|| "–".into()),
            drops,
            side(tcp),
            side(udp)
        ));
    }
    out.push_str("</table></div>");
    out.push_str(&crate::variants::html_table(&t.variants));
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
