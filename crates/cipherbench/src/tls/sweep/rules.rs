//! The sweep's rules, pure: where a core count's search starts (the monotonicity
//! rule), when a search stops ([`next_step`]), when a final window is measured again
//! at fewer clients, and what a finished curve says.

use super::*;

/// The monotonicity rule: the probes for `cores` start at the concurrency chosen for
/// the largest smaller core count (nginx with more workers never needs fewer
/// clients to be kept busy), or at 1.
pub(crate) fn start_concurrency(chosen: &[(usize, usize)], cores: usize) -> usize {
    chosen
        .iter()
        .filter(|(c, _)| *c < cores)
        .max_by_key(|(c, _)| *c)
        .map_or(1, |(_, n)| (*n).max(1))
}

/// What the curve of one size, suite and variant says beyond its points: a throughput
/// falling with more cores, or a per-core figure rising by more than
/// [`CURVE_SUPERLINEAR`] above a point whose limit was not nginx (that point was
/// under-loaded, not the larger one efficient). `points` are (cores, throughput,
/// limit), any order.
pub(crate) fn curve_findings(points: &[(usize, f64, Option<Limit>)]) -> Vec<String> {
    let mut p: Vec<_> = points.iter().filter(|p| p.0 > 0 && p.1 > 0.0).collect();
    p.sort_by_key(|p| p.0);
    let mut out = Vec::new();
    for w in p.windows(2) {
        let (a, b) = (w[0], w[1]);
        if b.1 < a.1 * (1.0 - CURVE_FALL) {
            out.push(format!(
                "throughput falls from {} to {} cores ({:.0} % lower): the larger point was held by {}",
                a.0,
                b.0,
                (1.0 - b.1 / a.1) * 100.0,
                limit_words(b.2)
            ));
        }
        let (pa, pb) = (a.1 / a.0 as f64, b.1 / b.0 as f64);
        if pb > pa * (1.0 + CURVE_SUPERLINEAR) && a.2 != Some(Limit::Server) {
            out.push(format!(
                "per-core throughput rises {:.0} % from {} to {} cores: the {}-core point was held by {}, not by nginx's cores, so it understates them",
                (pb / pa - 1.0) * 100.0,
                a.0,
                b.0,
                a.0,
                limit_words(a.2)
            ));
        }
    }
    out
}

/// Checks each measured curve by [`curve_findings`] and warns what it finds.
pub(super) fn check_curve(session: &mut Session) {
    let Some(sweep) = session.record.tls.as_ref().and_then(|t| t.sweep.as_ref()) else {
        return;
    };
    let mut groups: std::collections::BTreeMap<(String, u64, String), Vec<_>> =
        std::collections::BTreeMap::new();
    for p in &sweep.points {
        groups
            .entry((p.suite.clone(), p.size_bytes, p.variant.clone()))
            .or_default()
            .push((
                p.cores,
                p.throughput_bytes_per_sec,
                p.search.as_ref().map(|s| s.limit),
            ));
    }
    let mut warnings = Vec::new();
    for ((suite, size, variant), pts) in groups {
        for f in curve_findings(&pts) {
            warnings.push(format!("{suite} {} {variant}: {f}", ByteSize(size)));
        }
    }
    for w in warnings {
        session.record.warn("tls", "sweep_curve", w);
    }
}

/// The search's state between probes.
#[derive(Debug, Default)]
pub(crate) struct SearchState {
    /// Best (concurrency, throughput) so far within the limit.
    pub best: Option<(usize, f64)>,
    /// Doublings in a row that gained less than [`PLATEAU_GAIN`].
    pub flat: usize,
}

/// Whether the generator was near saturation in a probe: its mean or any thread.
pub(crate) fn generator_saturated(p: &Probe) -> bool {
    saturated(p.generator_cpu, &p.generator_cpu_per_thread)
}

/// Whether a generator at `mean` of its CPUs, each thread at `per_thread` of its own,
/// is over [`GENERATOR_SATURATED`]: the mean or any one thread.
pub(crate) fn saturated(mean: f64, per_thread: &[f64]) -> bool {
    mean > GENERATOR_SATURATED || per_thread.iter().any(|&c| c > GENERATOR_SATURATED)
}

/// The search rule, pure: after `probe`, double again (None) or stop, saying why.
pub(crate) fn next_step(
    state: &mut SearchState,
    probe: &Probe,
    max_concurrency: usize,
) -> Option<(Limit, String)> {
    if !probe.within_limit {
        return Some((
            Limit::Latency,
            format!(
                "{} clients broke the first-byte limit or failed, so fewer were kept",
                probe.concurrency
            ),
        ));
    }
    let t = probe.throughput_bytes_per_sec;
    let saturated = generator_saturated(probe);
    match state.best {
        None => state.best = Some((probe.concurrency, t)),
        // A probe that saturated the generator measured the generator: the last one
        // that did not stays the choice, however much more this one carried.
        Some(_) if saturated => {}
        Some((_, b)) => {
            if t > b * (1.0 + PLATEAU_GAIN) {
                state.flat = 0;
            } else {
                state.flat += 1;
            }
            if t > b {
                state.best = Some((probe.concurrency, t));
            }
        }
    }
    let server_busy = probe.server_cpu.is_some_and(|c| c >= SERVER_BUSY);
    let nginx = |p: &Probe| {
        p.server_cpu
            .map(|c| format!("nginx {:.0} % busy", c * 100.0))
            .unwrap_or_else(|| "nginx's CPU unknown".into())
    };
    if saturated {
        return Some((
            Limit::Generator,
            format!(
                "the generator saturated at {} clients (threads {}), {}",
                probe.concurrency,
                per_thread(&probe.generator_cpu_per_thread),
                nginx(probe)
            ),
        ));
    }
    if server_busy && state.flat >= 1 {
        return Some((
            Limit::Server,
            format!(
                "{} at {} clients and doubling gained under {:.0} %",
                nginx(probe),
                probe.concurrency,
                PLATEAU_GAIN * 100.0
            ),
        ));
    }
    if !server_busy && state.flat >= FLAT_IDLE {
        return Some((
            Limit::Undetermined,
            format!(
                "{FLAT_IDLE} doublings to {} clients gained nothing with {} and the generator at {:.0} %",
                probe.concurrency,
                nginx(probe),
                probe.generator_cpu * 100.0
            ),
        ));
    }
    if probe.concurrency >= max_concurrency {
        let limit = if server_busy {
            Limit::Server
        } else {
            Limit::Undetermined
        };
        return Some((
            limit,
            format!(
                "--max-concurrency {max_concurrency} reached, {}",
                nginx(probe)
            ),
        ));
    }
    None
}

/// Why a final window is measured again at half the clients, if it must be: it broke
/// the first-byte limit (or failed requests), or it saturated the generator.
pub(crate) fn step_down_reason(window: &Probe) -> Option<&'static str> {
    if !window.within_limit {
        Some("the final window broke the first-byte limit")
    } else if generator_saturated(window) {
        Some("the final window saturated the generator")
    } else {
        None
    }
}
