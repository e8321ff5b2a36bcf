//! A sweep point as the record keeps it: found, saved, warned about; and what an
//! earlier, interrupted run of the plan already measured.

use super::*;

/// Records the core counts skipped, and those a key store was not measured at (the
/// sweep's record is created if needed).
pub(super) fn note_skipped(
    session: &mut Session,
    config: &SweepConfig,
    skipped: Vec<SkippedCores>,
    store_skipped: Vec<cipherbench_model::tls::KeyStoreSkip>,
) -> Result<()> {
    if skipped.is_empty() && store_skipped.is_empty() {
        return Ok(());
    }
    for s in &skipped {
        session
            .progress
            .note(&format!("--cores {}: skipped: {}", s.cores, s.reason));
    }
    for s in &store_skipped {
        session
            .progress
            .note(&format!("{}: {}", s.what(), s.reason));
    }
    let tls = crate::tls::results(session);
    let sweep = tls.sweep.get_or_insert_with(|| new_results(config));
    sweep.skipped_cores = skipped;
    sweep.key_store_skipped = store_skipped;
    session.save()
}

pub(super) fn new_results(config: &SweepConfig) -> SweepResults {
    SweepResults {
        config: config.clone(),
        points: Vec::new(),
        skipped_cores: Vec::new(),
        key_store_points: Vec::new(),
        key_store_skipped: Vec::new(),
        plain_points: Vec::new(),
    }
}

/// Every point of the sweep so far, whichever key store, and the plain-HTTP ones.
pub(super) fn all_points(session: &Session) -> impl Iterator<Item = &SweepPoint> {
    session
        .record
        .tls
        .as_ref()
        .and_then(|t| t.sweep.as_ref())
        .into_iter()
        .flat_map(|s| {
            s.points
                .iter()
                .chain(&s.key_store_points)
                .chain(&s.plain_points)
        })
}

/// A point already measured ([`run`] kept the sweep only if it was of this plan).
pub(super) fn find_point<'a>(
    session: &'a Session,
    suite: &str,
    size: u64,
    cores: usize,
    variant: &str,
    key_store: &str,
) -> Option<&'a SweepPoint> {
    all_points(session).find(|p| {
        p.suite == suite
            && p.size_bytes == size
            && p.cores == cores
            && p.variant == variant
            && p.key_store == key_store
    })
}

/// (cores, chosen concurrency) of the points already measured for this size, suite,
/// variant and key store.
pub(super) fn chosen_so_far(
    session: &Session,
    suite: &str,
    size: u64,
    variant: &str,
    key_store: &str,
) -> Vec<(usize, usize)> {
    all_points(session)
        .filter(|p| {
            p.suite == suite
                && p.size_bytes == size
                && p.variant == variant
                && p.key_store == key_store
        })
        .map(|p| (p.cores, p.concurrency))
        .collect()
}

pub(super) fn record_point(
    session: &mut Session,
    config: &SweepConfig,
    server: ServerRecord,
    point: SweepPoint,
) -> Result<()> {
    let label = format!(
        "{}: {} ({} req/s) at {} client(s), first byte max {:.0} ms, nginx {}, generator {} per thread{}{}{}",
        point_name(&point),
        format_bits_per_sec(point.throughput_bytes_per_sec),
        format_rate(point.requests_per_sec),
        point.concurrency,
        point.max_first_byte_ns as f64 / 1e6,
        point
            .server_cpu
            .as_ref()
            .map(|c| format!("{:.0} %", c.total * 100.0))
            .unwrap_or_else(|| "-".into()),
        per_thread(&point.generator_cpu_per_thread),
        point
            .search
            .as_ref()
            .map(|s| format!("; {}", s.explanation))
            .unwrap_or_default(),
        // Failed requests on the terminal, not only in run.json.
        cipherbench_model::tls::failures_note(point.errors, &point.errors_by_reason)
            .map(|f| format!("; {f}"))
            .unwrap_or_default(),
        if point.valid { "" } else { " [INVALID]" }
    );
    session.progress.point(&label);
    // A plain-HTTP slot's nginx has no suite, key or variant to judge: its server
    // record would only shadow the TLS server of the same suite and variant.
    let plain = cipherbench_model::tls::is_plain(&point.variant);
    warn_point(session, &point, (!plain).then_some(&server));
    let tls = crate::tls::results(session);
    if !plain {
        crate::tls::record_server(tls, server);
    }
    let sweep = tls.sweep.get_or_insert_with(|| new_results(config));
    // The first key store's points are the sweep's; the others', its counterparts;
    // the plain-HTTP ceiling's, its own.
    if cipherbench_model::tls::is_plain(&point.variant) {
        sweep.plain_points.push(point);
    } else if crate::tls::is_counterpart_store(&config.key_stores, &point.key_store) {
        sweep.key_store_points.push(point);
    } else {
        sweep.points.push(point);
    }
    session.save()
}

pub(super) fn warn_point(session: &mut Session, p: &SweepPoint, server: Option<&ServerRecord>) {
    let what = point_name(p);
    if let Some(server) = server {
        crate::tls::warn_server(session, &what, server);
    }
    if let Some(reason) = &p.invalid_reason {
        let kind = if p.generator_saturated {
            "generator_saturated"
        } else {
            "latency_limit"
        };
        session
            .record
            .warn("tls", kind, format!("{what}: invalid point: {reason}"));
    }
    if p.errors > 0 {
        session.record.warn(
            "tls",
            "request_errors",
            format!(
                "{what}: {} in the window",
                cipherbench_model::tls::failures_note(p.errors, &p.errors_by_reason)
                    .unwrap_or_default()
            ),
        );
    }
    if let Some(n) = p.server_requests {
        if n != p.requests_sent && p.cancelled == 0 {
            session.record.warn(
                "tls",
                "count_mismatch",
                format!(
                    "{what}: nginx counted {n} requests, the generator sent {}",
                    p.requests_sent
                ),
            );
        }
    }
    if let Some(cpu) = p
        .server_cpu
        .as_ref()
        .filter(|c| c.runqueue_wait > CONTENDED)
    {
        session.record.warn(
            "tls",
            "server_contended",
            format!(
                "{what}: nginx's workers waited for a CPU {:.0} % of the window: another program was using the cores under test, so the throughput is below what this machine can do",
                cpu.runqueue_wait * 100.0
            ),
        );
    }
    for f in p.noise_findings() {
        session
            .record
            .warn("tls", &f.kind, format!("{what}: {}", f.message));
    }
    if let Some(f) = cipherbench_model::noise::governor_finding(p.noise.as_deref()) {
        session.record.warn("tls", &f.kind, f.message);
    }
    if p.interval_throughput_bytes_per_sec.high_spread() {
        session.record.warn(
            "tls",
            "high_spread",
            format!(
                "{what}: throughput spread ±{:.1} % across intervals",
                p.interval_throughput_bytes_per_sec.rel_spread * 100.0
            ),
        );
    }
}

/// What a point is, for its record.
#[derive(Clone, Copy)]
pub(crate) struct Labels<'a> {
    pub suite: &'a str,
    pub protocol: &'a str,
    pub size: u64,
    pub cores: usize,
    pub variant: &'a str,
    /// Where nginx's key is (`file`, `pkcs11`; empty for a server not ours).
    pub key_store: &'a str,
    /// The CPUs the point runs on (nginx's and the generator's): its noise window's.
    pub cpus: &'a [usize],
}
