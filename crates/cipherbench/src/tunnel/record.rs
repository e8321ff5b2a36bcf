//! A tunnel run and point as the record keeps them: one measured run with both
//! gateways' snapshots and the byte check, the underlay's and a transform's points,
//! and every run's place in the measuring order.

use super::*;

/// The next place in the measuring order after every run of `points` (a resumed
/// run continues the numbering).
pub(crate) fn next_sequence<'a>(points: impl Iterator<Item = &'a TunnelPoint>) -> usize {
    points
        .flat_map(|p| &p.runs)
        .filter_map(|r| r.sequence)
        .max()
        .map_or(0, |n| n + 1)
}

/// The warnings a point deserves, saved with the run: noise, bytes that do not
/// reconcile, drops, a sender-limited search, a tunnel above its underlay, a high
/// spread. `peer`: the tunnel ran to this host (`tunnel --peer`), whose underlay
/// is the real network between the two.
/// Records a finished point: its warnings (`peer`: the other host of a two-host
/// run), the progress line, and run.json saved with it.
pub(crate) fn record_point(
    session: &mut Session,
    results: &mut TunnelResults,
    point: TunnelPoint,
    peer: Option<&str>,
) -> Result<()> {
    warn_about(&point, session, peer);
    session.progress.point(&format!(
        "{} {} {}: {}{}",
        point.transform,
        point.variant,
        point.protocol.as_str(),
        cipherbench_model::units::format_bits_per_sec(point.throughput_bits_per_sec.median / 8.0),
        point
            .runs
            .last()
            .and_then(|r| r.iperf.lost_percent)
            .map(|l| format!(" at {l:.1} % loss"))
            .unwrap_or_default()
    ));
    results.points.push(point);
    session.record.tunnel = Some(results.clone());
    session.save()
}

/// One iperf3 run with both gateways' stats (and the sending TUN queue's drops)
/// taken just before and just after it, and the noise of every CPU this process may
/// use over it.
pub fn measured_run(
    client: &iperf::ClientRun,
    pair: &mut GatewayPair,
    names: &Names,
    underlay_rate_bits_per_sec: Option<u64>,
) -> Result<TunnelRun> {
    measured_run_on(
        client,
        pair,
        names,
        underlay_rate_bits_per_sec,
        &crate::host::allowed_cpus(),
    )
}

/// [`measured_run`] with the noise window on `cpus` (the placement's).
pub fn measured_run_on(
    client: &iperf::ClientRun,
    pair: &mut GatewayPair,
    names: &Names,
    underlay_rate_bits_per_sec: Option<u64>,
    cpus: &[usize],
) -> Result<TunnelRun> {
    let counters = |pair: &GatewayPair| -> Result<_> {
        Ok((
            gateways::NamespaceCounters::read(&names.sender_ns, &pair.sender)?,
            gateways::NamespaceCounters::read(&names.receiver_ns, &pair.receiver)?,
        ))
    };
    let (sn0, rn0) = counters(pair)?;
    let (s0, r0) = pair.snapshot()?;
    // The gateways and iperf3 run under this process (keepers, `ip netns exec`).
    let window = crate::machine::noise::Window::open(cpus, &[std::process::id()]);
    let (iperf, tcp) = client.run_sampled(|| pair.check_alive(), &spare_cpus(cpus))?;
    let noise = window.close();
    let (s1, r1) = pair.snapshot()?;
    let (sn1, rn1) = counters(pair)?;
    let sender = gateways::gateway_run(
        "sender",
        &pair.sender.variant.name(),
        (&s0, sn0),
        (&s1, sn1),
    );
    let receiver = gateways::gateway_run(
        "receiver",
        &pair.receiver.variant.name(),
        (&r0, rn0),
        (&r1, rn1),
    );
    let mut run = analysis::judged_run(
        iperf,
        sender,
        receiver,
        underlay_rate_bits_per_sec,
        pair.sender.mtu,
        noise,
    );
    run.tcp = tcp.map(Box::new);
    Ok(run)
}

/// The CPUs this process may use that none of `placed` (the system under test's
/// and iperf3's) is: where a helper such as the mid-run `ss` runs without taking
/// a measured core. Empty when every allowed CPU is placed (two cores) or nothing
/// is pinned: the helper then runs wherever the scheduler puts it.
pub(crate) fn spare_cpus(placed: &[usize]) -> Vec<usize> {
    crate::host::allowed_cpus()
        .into_iter()
        .filter(|c| !placed.contains(c))
        .collect()
}

/// Says the underlay's figure (`path`, e.g. " (a -> b)", after "underlay tcp"), keeps
/// it in `results` and saves the session.
pub(crate) fn record_underlay(
    session: &mut Session,
    results: &mut TunnelResults,
    path: &str,
    point: UnderlayPoint,
) -> Result<()> {
    session.progress.point(&format!(
        "underlay {}{path}: {}",
        point.protocol.as_str(),
        cipherbench_model::units::format_bits_per_sec(point.throughput_bits_per_sec.median / 8.0)
    ));
    results.underlay.push(point);
    session.record.tunnel = Some(results.clone());
    session.save()
}

/// The CPUs a run's noise windows watch: the placed ones, or every CPU this process
/// may use when nothing is pinned.
pub(crate) fn watched_cpus(
    placement: Option<&cipherbench_model::topology::Placement>,
) -> Vec<usize> {
    match placement {
        Some(p) => p.all_cpus(),
        None => crate::host::allowed_cpus(),
    }
}

pub(crate) fn underlay_point(protocol: Protocol, runs: Vec<IperfRun>) -> UnderlayPoint {
    let totals: Vec<f64> = runs.iter().map(|r| r.receiver_bits_per_sec).collect();
    let intervals: Vec<f64> = runs
        .iter()
        .flat_map(|r| r.interval_bits_per_sec.clone())
        .collect();
    UnderlayPoint {
        protocol,
        throughput_bits_per_sec: Summary::of_or_empty(&totals),
        interval_bits_per_sec: Summary::of_or_empty(&intervals),
        runs,
    }
}

pub(crate) fn tunnel_point(
    transform: Transform,
    variant: &Variant,
    variant_side: VariantSide,
    protocol: Protocol,
    search: Option<cipherbench_model::tunnel::UdpSearch>,
    runs: Vec<TunnelRun>,
    underlay_tcp: Option<f64>,
) -> TunnelPoint {
    let totals: Vec<f64> = runs.iter().map(|r| r.iperf.receiver_bits_per_sec).collect();
    let intervals: Vec<f64> = runs
        .iter()
        .flat_map(|r| r.iperf.interval_bits_per_sec.clone())
        .collect();
    let throughput = Summary::of_or_empty(&totals);
    TunnelPoint {
        transform: transform.name().to_string(),
        variant: variant.name().clone(),
        variant_side,
        protocol,
        search,
        underlay_share: underlay_tcp
            .filter(|u| *u > 0.0)
            .map(|u| throughput.median / u),
        throughput_bits_per_sec: throughput,
        interval_bits_per_sec: Summary::of_or_empty(&intervals),
        runs,
    }
}
