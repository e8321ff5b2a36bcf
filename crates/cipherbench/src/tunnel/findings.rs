//! What a tunnel run notes and warns: placements that may set a figure, more
//! gateway threads than CPUs, and each point's findings (the sender's limit, losses,
//! drops, noise).

use super::*;

/// A run note: printed now (one line, even with --quiet) and kept in run.json's
/// warnings.
pub(crate) fn note(session: &mut Session, kind: &str, message: String) {
    session.progress.note(&message);
    session.record.warn("tunnel", kind, message);
}

/// The note when a gateway is asked for more crypto workers per direction than it
/// has CPUs (`gateways`: each one's name and CPUs): its workers then take turns on
/// them. None when every gateway has a CPU per worker.
pub fn threads_over_cpus(threads: usize, gateways: &[(&str, &[usize])]) -> Option<String> {
    let short: Vec<String> = gateways
        .iter()
        .filter(|(_, cpus)| !cpus.is_empty() && threads > cpus.len())
        .map(|(name, cpus)| {
            format!(
                "{name} gateway: {} {}",
                if cpus.len() == 1 { "CPU" } else { "CPUs" },
                cipherbench_model::topology::format_cpu_list(cpus),
            )
        })
        .collect();
    if short.is_empty() {
        return None;
    }
    Some(format!(
        "{threads} crypto workers per direction in each gateway, more than its CPUs ({}): they take turns there, which adds hand-offs, not speed",
        short.join("; "),
    ))
}

/// The note for `--gateway-threads` with strongSwan measured: charon has no such
/// setting; the number only sets how many CPUs each charon is pinned to (`cpus`:
/// the sender's, as the planner gave them for that many workers).
pub fn strongswan_threads_note(threads: usize, stacks: &[Stack], cpus: &[usize]) -> String {
    let pinned = if cpus.is_empty() {
        "here not pinned".to_string()
    } else {
        format!(
            "here {} CPU{} each; the sender's: {}",
            cpus.len(),
            if cpus.len() == 1 { "" } else { "s" },
            cipherbench_model::topology::format_cpu_list(cpus)
        )
    };
    if stacks.contains(&Stack::Own) {
        format!(
            "--gateway-threads {threads} sets the workers of cipherbench's own gateways only; strongSwan's charon runs kernel-libipsec's own threads, on the CPUs a gateway gets ({pinned})"
        )
    } else {
        format!(
            "--gateway-threads {threads} sets no strongSwan threads (charon runs kernel-libipsec's own): with --stack strongswan alone it only sets how many CPUs the planner gives each charon, as it would a gateway ({pinned})"
        )
    }
}

pub(crate) fn warn_about(point: &TunnelPoint, session: &mut Session, peer: Option<&str>) {
    let what = format!(
        "{} {} {}",
        point.transform,
        point.variant,
        point.protocol.as_str()
    );
    for f in point.noise_findings() {
        session
            .record
            .warn("tunnel", &f.kind, format!("{what}: {}", f.message));
    }
    for f in point.governor_findings() {
        session.record.warn("tunnel", &f.kind, f.message);
    }
    for run in &point.runs {
        if !run.byte_check.ok {
            session.record.warn(
                "tunnel",
                "byte_mismatch",
                format!(
                    "{what}: the receiving gateway opened {} inner bytes, outside the {}..{} that iperf3's {} payload bytes allow",
                    run.byte_check.opened_bytes,
                    run.byte_check.expected_min,
                    run.byte_check.expected_max,
                    run.byte_check.iperf_bytes
                ),
            );
        }
        for gateway in [&run.sender, &run.receiver] {
            if let Some(why) = analysis::unaccounted(gateway) {
                session
                    .record
                    .warn("tunnel", "unaccounted_datagrams", format!("{what}: {why}"));
            }
        }
        let drops = run.receiver.drops_total() + run.sender.drops_total();
        if drops > 0 {
            session.record.warn(
                "tunnel",
                "esp_drops",
                format!("{what}: the gateways dropped {drops} received datagrams (by reason in run.json)"),
            );
        }
    }
    if let Some(search) = &point.search {
        if search.outcome == cipherbench_model::tunnel::SearchOutcome::SenderLimited {
            let (kind, why) = sender_limited(point);
            session
                .record
                .warn("tunnel", kind, format!("{what}: {why}"));
        }
    }
    if point.protocol == Protocol::Tcp
        && point.underlay_share.is_some_and(|share| share > 1.05)
        && !session
            .record
            .warnings
            .iter()
            .any(|w| w.kind == "tunnel_above_underlay")
    {
        let share = point.underlay_share.unwrap_or(0.0) * 100.0;
        let message = match peer {
            None => format!(
                "{what} carried {share:.0} % of the underlay alone: on a veth with no rate limit nothing queues, so TCP sends each of iperf3's -l writes over the bare underlay as its own segment, while the tunnel's latency lets it coalesce them into large TSO packets; the underlay is then no ceiling (pass --underlay-rate, e.g. 1gbit as the IIJ IPsec post's LAN, for a wire-limited one)"
            ),
            Some(host) => format!(
                "{what} carried {share:.0} % of the underlay measured alone between this host and {host}: a tunnel cannot carry more than the path under it when that path is the limit, so one of the two figures is off (the underlay run was disturbed, or the path is not the limit: a virtual link such as veth or a bridge, where nothing queues and TCP over the bare path sends each -l write as its own segment while the tunnel's latency coalesces them); measure the underlay again (iperf3 between the two addresses) before reading the tunnel's share"
            ),
        };
        session
            .record
            .warn("tunnel", "tunnel_above_underlay", message);
    }
    if point.interval_bits_per_sec.high_spread() {
        session.record.warn(
            "tunnel",
            "high_spread",
            format!(
                "{what}: per-second throughput spread ±{:.1} %",
                point.interval_bits_per_sec.rel_spread * 100.0
            ),
        );
    }
}

/// Why a UDP search ended with the client sending less than asked, from its last
/// run: (warning kind, sentence). A datagram the iperf3 client writes into the
/// tunnel stays charged to its socket until the sending gateway reads it from the
/// TUN queue, so when that gateway reads slower than asked the client's writes
/// block: it sends less with no loss and little CPU, and the rate found is the
/// tunnel's sending side (`sender_backpressure`). Only a client busy near a whole
/// core is the load generator's own limit (`load_generator_saturated`).
pub fn sender_limited(point: &TunnelPoint) -> (&'static str, String) {
    let Some(run) = point.runs.last() else {
        return (
            "load_generator_saturated",
            "the iperf3 client could not send fast enough to reach the target loss".into(),
        );
    };
    let client = run.iperf.cpu_client_percent.unwrap_or(100.0);
    let gateway = run.sender.busiest_thread();
    let asked = run.iperf.target_bits_per_sec.unwrap_or(0.0) / 1e6;
    let sent = run.iperf.sender_bits_per_sec / 1e6;
    if run.iperf.client_busy() {
        (
            "load_generator_saturated",
            format!(
                "the iperf3 client sent {sent:.0} of {asked:.0} Mbit/s asked at {client:.0} % of a core: the figure is the load generator's limit, not the tunnel's (try --parallel or fewer gateway cores)"
            ),
        )
    } else {
        (
            "sender_backpressure",
            format!(
                "the iperf3 client sent {sent:.0} of {asked:.0} Mbit/s asked using only {client:.0} % of a core: its writes were held back by the sending gateway ({} at {:.2} of a core), so the figure is the tunnel's sending side, without loss; on a shared machine a client starved of CPU looks the same",
                gateway.map_or("?", |t| t.name.as_str()),
                gateway.map_or(0.0, |t| t.cpu_cores_used)
            ),
        )
    }
}
