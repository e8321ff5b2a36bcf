//! strongSwan beside cipherbench's own gateways: the terminal table, its rows in
//! `tunnel-strongswan.csv`, and the report's subsection with a chart that puts both
//! stacks' TCP throughput side by side per transform. strongSwan runs here with
//! kernel-libipsec (ESP in userspace over TUN), so it is labelled everywhere as a
//! userspace reference stack, not kernel IPsec. Pure functions of
//! [`TunnelResults`].

use crate::csv::field;
use crate::svg::{escape, BarChart, Series};
use crate::tunnel::{PointRatio, RatioRow};
use cipherbench_model::interval::Pairing;
use cipherbench_model::tunnel::{
    Protocol, StrongswanPoint, StrongswanResults, TunnelPoint, TunnelResults,
};

/// The label used wherever strongSwan's figures appear.
pub const LABEL: &str =
    "strongSwan (charon + kernel-libipsec: a userspace reference stack, not kernel IPsec)";

fn mbit(bits_per_sec: f64) -> String {
    format!("{:.0}", bits_per_sec / 1e6)
}

/// The rows: (backend, transform, variant) in measured order.
fn rows(s: &StrongswanResults) -> Vec<(String, String, String)> {
    let mut rows = Vec::new();
    for p in &s.points {
        let key = (
            p.backend.clone(),
            p.point.transform.clone(),
            p.point.variant.clone(),
        );
        if !rows.contains(&key) {
            rows.push(key);
        }
    }
    rows
}

/// strongSwan's point for a backend, transform, variant and protocol.
pub fn point<'a>(
    s: &'a StrongswanResults,
    backend: &str,
    transform: &str,
    variant: &str,
    protocol: Protocol,
) -> Option<&'a StrongswanPoint> {
    s.points.iter().find(|p| {
        p.backend == backend
            && p.point.transform == transform
            && p.point.variant == variant
            && p.point.protocol == protocol
    })
}

/// strongSwan / own gateways, same transform, variant and protocol, same run, with
/// its interval: the two stacks ran one after the other, so their runs are
/// resampled independently.
fn versus_own(t: &TunnelResults, p: &TunnelPoint) -> Option<PointRatio> {
    let own = t.point(&p.transform, &p.variant, p.protocol)?;
    PointRatio::of(p, own, Pairing::Independent)
}

/// strongSwan's ratio rows per backend (accel/noaesni and the others of the speed
/// tables, per transform): only a backend that takes the variants has any.
pub fn ratios(s: &StrongswanResults, variants: &[String]) -> Vec<(String, Vec<RatioRow>)> {
    let mut backends: Vec<&str> = Vec::new();
    let mut transforms: Vec<String> = Vec::new();
    for p in &s.points {
        if !backends.contains(&p.backend.as_str()) {
            backends.push(&p.backend);
        }
        if !transforms.contains(&p.point.transform) {
            transforms.push(p.point.transform.clone());
        }
    }
    backends
        .into_iter()
        .map(|b| {
            let rows =
                crate::tunnel::ratio_table(variants, &s.variants, &transforms, |tr, v, pr| {
                    point(s, b, tr, v, pr).map(|p| &p.point)
                });
            (b.to_string(), rows)
        })
        .filter(|(_, rows)| !rows.is_empty())
        .collect()
}

fn cpu(p: Option<&StrongswanPoint>) -> String {
    p.and_then(|p| p.point.runs.last())
        .map(|r| {
            format!(
                "{:.2} / {:.2}",
                r.sender.cpu_cores_used, r.receiver.cpu_cores_used
            )
        })
        .unwrap_or_else(|| "-".into())
}

fn saturated(p: Option<&StrongswanPoint>) -> String {
    p.and_then(|p| p.point.runs.last())
        .map(|r| charon_words(&r.saturation.side.replace('_', " ")))
        .unwrap_or_else(|| "-".into())
}

/// The analysis names the sides as gateways; here they are charons.
fn charon_words(text: &str) -> String {
    text.replace("gateway", "charon")
}

fn loss(p: Option<&StrongswanPoint>) -> Option<f64> {
    let losses: Vec<f64> = p?
        .point
        .runs
        .iter()
        .filter_map(|r| r.iperf.lost_percent)
        .collect();
    (!losses.is_empty()).then(|| losses.iter().sum::<f64>() / losses.len() as f64)
}

/// The terminal table, after the own gateways' one.
pub fn text(t: &TunnelResults) -> String {
    let Some(s) = &t.strongswan else {
        return String::new();
    };
    let rows = rows(s);
    let w = rows
        .iter()
        .map(|(_, _, v)| crate::variants::text_name(&s.variants, v).chars().count())
        .chain([8])
        .max()
        .unwrap_or(8);
    let mut out = format!(
        "\n{LABEL}\n{}; ESP via {}; {}\n\n{:<8} {:<18} {:<w$} {:>10} {:>10} {:>7} {:>18} {:>11}  {:<28} {}\n",
        s.version,
        s.esp_path,
        s.kernel_xfrm,
        "backend",
        "transform",
        "variant",
        "TCP Mbit/s",
        "UDP Mbit/s",
        "loss",
        "vs own",
        "CPU snd/rcv",
        "saturated first (TCP / UDP)",
        "ESP served by"
    );
    for (backend, transform, variant) in rows {
        let tcp = point(s, &backend, &transform, &variant, Protocol::Tcp);
        let udp = point(s, &backend, &transform, &variant, Protocol::Udp);
        let cell = |p: Option<&StrongswanPoint>| {
            p.map(|p| mbit(p.point.throughput_bits_per_sec.median))
                .unwrap_or_else(|| "-".into())
        };
        out.push_str(&format!(
            "{:<8} {:<18} {:<w$} {:>10} {:>10} {:>7} {:>18} {:>11}  {:<28} {}\n",
            backend,
            transform,
            crate::variants::text_name(&s.variants, &variant),
            cell(tcp),
            cell(udp),
            loss(udp)
                .map(|l| format!("{l:.1}%"))
                .unwrap_or_else(|| "-".into()),
            tcp.and_then(|p| versus_own(t, &p.point))
                .map(|r| r.compact())
                .unwrap_or_else(|| "-".into()),
            cpu(tcp),
            format!("{} / {}", saturated(tcp), saturated(udp)),
            tcp.or(udp)
                .map(|p| format!("{} {}", p.negotiated, p.served_by.join(" ")))
                .unwrap_or_default()
        ));
        // The sender's connection as sampled mid-run, as under the own gateways'.
        for line in tcp
            .map(|p| crate::tunnel::tcp_lines(&p.point))
            .unwrap_or_default()
        {
            out.push_str(&format!("    {line}\n"));
        }
    }
    out.push_str(&format!("(vs own = strongSwan's TCP / cipherbench's gateways' TCP, same transform and variant, same run, [{:.0} % bootstrap interval over the runs] where each has {} or more, ? where it holds 1.0: no clear difference; CPU = charon cores during the TCP run; variants reach only the openssl backend)\n", cipherbench_model::interval::LEVEL * 100.0, cipherbench_model::interval::MIN_ROUNDS));
    for (backend, rows) in ratios(s, &t.config.variants) {
        out.push_str(&format!("\nstrongSwan {backend}:"));
        out.push_str(&crate::tunnel::ratio_text(&rows));
    }
    out.push_str(&crate::variants::text_legend(
        &s.variants,
        &t.config.variants,
    ));
    for v in &s.variants {
        out.push_str(&crate::variants::line(v));
    }
    out
}

/// `tunnel-strongswan.csv`: one row per measured run.
pub fn csv(s: &StrongswanResults) -> String {
    let mut out = String::from(
        "backend,transform,variant,variant_side,protocol,run,target_bits_per_sec,receiver_bits_per_sec,sender_bits_per_sec,lost_percent,retransmits,sender_cpu_cores,receiver_cpu_cores,sealed_packets,opened_packets,socket_drops,tun_queue_drops,byte_check_ok,saturated,underlay_share,negotiated,served_by,ike_ms,round,sequence\n",
    );
    let opt = |v: Option<f64>| v.map(|v| format!("{v:.4}")).unwrap_or_default();
    for sp in &s.points {
        let p = &sp.point;
        for (i, r) in p.runs.iter().enumerate() {
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{:.0},{:.0},{},{},{:.3},{:.3},{},{},{},{},{},{},{},{},{},{:.1},{},{}\n",
                field(&sp.backend),
                field(&p.transform),
                field(&p.variant),
                p.variant_side.as_str(),
                p.protocol.as_str(),
                i + 1,
                opt(r.iperf.target_bits_per_sec),
                r.iperf.receiver_bits_per_sec,
                r.iperf.sender_bits_per_sec,
                opt(r.iperf.lost_percent),
                r.iperf.retransmits.map(|x| x.to_string()).unwrap_or_default(),
                r.sender.cpu_cores_used,
                r.receiver.cpu_cores_used,
                r.sender.sealed_packets,
                r.receiver.opened_packets,
                r.receiver.socket_drops,
                r.sender.tun_queue_drops,
                r.byte_check.ok,
                r.saturation.side,
                opt(p.underlay_share),
                field(&sp.negotiated),
                field(&sp.served_by.join(" ")),
                sp.ike_ns as f64 / 1e6,
                r.round.map(|n| n.to_string()).unwrap_or_default(),
                r.sequence.map(|n| n.to_string()).unwrap_or_default(),
            ));
        }
    }
    out
}

/// The report's subsection: both stacks' TCP throughput per transform in one
/// chart, then strongSwan's table.
#[expect(
    clippy::too_many_lines,
    reason = "the subsection in reading order: the chart, then strongSwan's table"
)]
pub fn html(t: &TunnelResults) -> String {
    let Some(s) = &t.strongswan else {
        return String::new();
    };
    let mut out = format!(
        "<h3 id=\"tunnel-strongswan\">{} beside cipherbench's gateways</h3><p>{}. ESP via {}. {}. IKEv2 with a pre-shared key drawn for each pair of charons, UDP encapsulation forced; the same namespaces, iperf3 runs and loss search as the gateways above. Hover a backend for charon's plugin list.</p>",
        escape(LABEL),
        escape(&s.version),
        escape(&s.esp_path),
        escape(&s.kernel_xfrm),
    );
    let rows = rows(s);
    let mut transforms: Vec<String> = Vec::new();
    for (_, transform, _) in &rows {
        if !transforms.contains(transform) {
            transforms.push(transform.clone());
        }
    }
    let mut series = Vec::new();
    for variant in &t.config.variants {
        let values: Vec<Option<f64>> = transforms
            .iter()
            .map(|tr| {
                t.point(tr, variant, Protocol::Tcp)
                    .map(|p| p.throughput_bits_per_sec.median / 1e6)
            })
            .collect();
        if values.iter().any(Option::is_some) {
            series.push(Series {
                intervals: Vec::new(),
                name: format!("own gateways {variant}"),
                values,
            });
        }
    }
    let mut arms: Vec<(String, String)> = Vec::new();
    for (backend, _, variant) in &rows {
        let arm = (backend.clone(), variant.clone());
        if !arms.contains(&arm) {
            arms.push(arm);
        }
    }
    for (backend, variant) in &arms {
        series.push(Series {
            intervals: Vec::new(),
            name: format!(
                "strongSwan {backend} {variant}{}",
                if crate::variants::ineffective(&s.variants, variant).is_some() {
                    " (did not take effect)"
                } else {
                    ""
                }
            ),
            values: transforms
                .iter()
                .map(|tr| {
                    point(s, backend, tr, variant, Protocol::Tcp)
                        .map(|p| p.point.throughput_bits_per_sec.median / 1e6)
                })
                .collect(),
        });
    }
    let chart = BarChart {
        id: "fig-tunnel-strongswan".into(),
        title: "TCP through cipherbench's gateways and strongSwan".into(),
        description: "iperf3 TCP throughput in Mbit/s per transform: cipherbench's own ESP gateways per variant, and strongSwan (charon with kernel-libipsec, a userspace reference stack) per crypto backend and variant, same run.".into(),
        categories: transforms,
        series,
        y_label: "Mbit/s (10^6 bit/s)".into(),
        reference: None,
        format: |v| format!("{v:.0}"),
    };
    out.push_str("<figure>");
    out.push_str(&chart.render());
    out.push_str("<figcaption>The same iperf3 TCP runs through both stacks. strongSwan's ESP is libipsec in userspace over a TUN device, one packet per read and write; it is a reference for a real IKE stack's userspace path, not for kernel IPsec.</figcaption></figure>");
    out.push_str("<div class=\"scroll\"><table><tr><th class=\"l\">backend</th><th class=\"l\">transform</th><th class=\"l\">variant</th><th>TCP [Mbps]</th><th>UDP [Mbps]</th><th>UDP loss</th><th>vs own gateways (TCP)</th><th>charon CPU send / receive</th><th class=\"l\">saturated first (TCP / UDP)</th><th class=\"l\">negotiated, served by</th><th>IKE</th></tr>");
    for (backend, transform, variant) in &rows {
        let tcp = point(s, backend, transform, variant, Protocol::Tcp);
        let udp = point(s, backend, transform, variant, Protocol::Udp);
        let cell = |p: Option<&StrongswanPoint>| {
            p.map(|p| {
                format!(
                    "{} <span class=\"muted\">±{:.1} %</span>",
                    mbit(p.point.throughput_bits_per_sec.median),
                    p.point.interval_bits_per_sec.rel_spread * 100.0
                )
            })
            .unwrap_or_else(|| "–".into())
        };
        let side = |p: Option<&StrongswanPoint>| {
            p.and_then(|p| p.point.runs.last())
                .map(|r| {
                    format!(
                        "<span title=\"{}\">{}</span>",
                        escape(&charon_words(&r.saturation.evidence)),
                        escape(&charon_words(&r.saturation.side.replace('_', " ")))
                    )
                })
                .unwrap_or_else(|| "–".into())
        };
        let any = tcp.or(udp);
        out.push_str(&format!(
            "<tr><td class=\"l\"><span title=\"charon.load = {}\">{}</span></td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{} / {}</td><td class=\"l\">{}</td><td>{}</td></tr>",
            escape(any.map(|p| p.plugins.as_str()).unwrap_or_default()),
            escape(backend),
            escape(transform),
            crate::variants::html_name(&s.variants, variant),
            cell(tcp),
            cell(udp),
            loss(udp).map(|l| format!("{l:.1} %")).unwrap_or_else(|| "–".into()),
            tcp.and_then(|p| versus_own(t, &p.point)).map(|r| r.html()).unwrap_or_else(|| "–".into()),
            cpu(tcp),
            side(tcp),
            side(udp),
            any.map(|p| escape(&format!("{}; {}", p.negotiated, p.served_by.join(", ")))).unwrap_or_default(),
            any.map(|p| format!("{:.0} ms", p.ike_ns as f64 / 1e6)).unwrap_or_else(|| "–".into()),
        ));
    }
    out.push_str("</table></div>");
    for (backend, rows) in ratios(s, &t.config.variants) {
        out.push_str(&crate::tunnel::ratio_html(
            &rows,
            &format!("strongSwan's {backend} backend: throughput of one variant over another through the same transform."),
        ));
    }
    out.push_str(&crate::variants::html_table(&s.variants));
    out.push_str("<p class=\"muted\">Backends: openssl (every algorithm from libcrypto; the only one the variants reach, through charon's environment), aesni (strongSwan's AES-NI plugin, chosen by CPUID; SHA-2 and HMAC in C), c (strongSwan's C implementations; chapoly picks SSSE3 by CPUID). Negotiated: the CHILD_SA's algorithms as charon reports them; served by: the plugin that registered each (swanctl --list-algs). vs own gateways: strongSwan's TCP throughput / cipherbench's gateways', same transform and variant, with the 95 % bootstrap interval over the runs of each (resampled apart: the stacks ran one after the other) where each has 3 or more. charon counts no ESP drops by reason; its losses are located from the TUN queue, socket and link counters as for the gateways.</p>");
    out
}
