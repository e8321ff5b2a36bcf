//! One slot's concurrency search and final window: short probes at doubling
//! concurrency, then the full window at the best, and the point they make.

use super::*;

/// One measurement at a fixed concurrency.
pub(super) struct Measured {
    pub(super) report: Report,
    pub(super) server_cpu: Option<ServerCpu>,
    pub(super) server_requests: Option<u64>,
    /// The machine's noise over the measurement, on the point's CPUs.
    pub(super) noise: cipherbench_model::noise::Noise,
    /// With agents: the one that failed the window, named, if one did.
    pub(super) agent_failure: Option<String>,
    /// With agents: each one's share.
    pub(super) agents: Vec<cipherbench_model::agents::AgentShare>,
}

impl Measured {
    /// Adds a later round of the same point: the report appended
    /// ([`Report::append`]), nginx's CPU and the agents' shares weighted by window,
    /// the server's count added, the noise windows merged.
    pub(super) fn absorb(&mut self, later: Measured) -> Result<()> {
        let (this_ns, later_ns) = (
            self.report.window.as_nanos() as u64,
            later.report.window.as_nanos() as u64,
        );
        self.server_cpu = match (self.server_cpu.take(), later.server_cpu) {
            (Some(mut a), Some(b)) => {
                a.absorb(&b, this_ns, later_ns);
                Some(a)
            }
            // A round without a figure leaves the point without one.
            _ => None,
        };
        self.server_requests = match (self.server_requests, later.server_requests) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        self.noise.merge(&later.noise);
        if self.agent_failure.is_none() {
            self.agent_failure = later.agent_failure;
        }
        cipherbench_model::agents::AgentShare::absorb_rounds(
            &mut self.agents,
            &later.agents,
            this_ns,
            later_ns,
        );
        self.report.append(later.report)
    }

    pub(super) fn within(&self, limit: Duration) -> bool {
        self.report.max_first_byte <= limit
            && self.report.failed == 0
            && self.agent_failure.is_none()
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn measure(
    plan: &SweepPlan,
    client: &Client,
    target: &Target,
    generator_cpus: &[usize],
    server: Option<&Server>,
    fleet: &mut Option<Fleet>,
    suite: &str,
    concurrency: usize,
    window: Duration,
    cpus: &[usize],
) -> Result<Measured> {
    let interval = crate::tls::interval_for(window);
    let spec = Spec {
        target: target.clone(),
        arrivals: match plan.fixed_rate {
            // The warm-up at the same rate first, not counted (engine::Spec::warmup).
            Some(rate) => Arrivals::Open(engine::Schedule::Constant {
                rate,
                duration: plan.warmup + window,
            }),
            None => Arrivals::Closed { concurrency },
        },
        warmup: plan.warmup,
        window,
        drain: plan.drain,
        timeout: plan.timeout,
        interval,
        cpus: generator_cpus.to_vec(),
        max_connections: crate::tls::connection_budget(generator_cpus.len()),
        pace: crate::tls::engine::pays_for_wakeups(target.addr),
        verify: plan.verify,
    };
    let before = server.and_then(Server::requests);
    let sampler = server.map(|s| {
        Sampler::start(
            s.workers().to_vec(),
            (interval / 4).min(Duration::from_millis(250)),
        )
    });
    // Around the whole measurement (warm-up and drain too), closed while nginx runs;
    // this process, its keeper and nginx under it are the run.
    let noise_window = crate::machine::noise::Window::open(cpus, &[std::process::id()]);
    let (report, agent_failure, agents) = match fleet {
        None => (engine::run(client, &spec)?, None, Vec::new()),
        Some(f) => match crate::tls::agents::run(f, &spec, suite, plan.resumption, &|a| {
            crate::tls::agent_addr(a, target)
        }) {
            Ok((r, shares)) => (r, None, shares),
            Err(e) => match e.downcast::<AgentFailure>() {
                Ok(failure) => (
                    crate::tls::agents::empty_report(&spec),
                    Some(failure.0),
                    Vec::new(),
                ),
                Err(e) => return Err(e),
            },
        },
    };
    let noise = noise_window.close();
    let server_cpu = sampler.and_then(|s| {
        let (samples, _) = s.finish();
        cpu::server_cpu(&samples, report.window_start, report.window_end, interval)
    });
    let after = server.and_then(Server::requests);
    let server_requests = match (before, after) {
        // The second status query counts the first one.
        (Some(b), Some(a)) => Some(a.saturating_sub(b).saturating_sub(1)),
        _ => None,
    };
    Ok(Measured {
        report,
        server_cpu,
        server_requests,
        noise,
        agent_failure,
        agents,
    })
}

pub(super) fn probe_of(m: &Measured, concurrency: usize, limit: Duration) -> Probe {
    Probe {
        concurrency,
        window_ns: m.report.window.as_nanos() as u64,
        throughput_bytes_per_sec: m.report.throughput_bytes_per_sec(),
        requests_per_sec: m.report.requests_per_sec(),
        max_first_byte_ns: m.report.max_first_byte.as_nanos() as u64,
        errors: m.report.failed,
        within_limit: m.within(limit),
        generator_cpu: m.report.generator_cpu(),
        generator_cpu_per_thread: m.report.generator_cpu_per_thread(),
        server_cpu: m.server_cpu.as_ref().map(|c| c.total),
    }
}

/// What the concurrency search found, before the final window.
pub(crate) struct Searched {
    /// The concurrency the probes started at.
    start: usize,
    /// The concurrency kept (halved by the final window's step-downs).
    chosen: usize,
    /// The probes, then the final window's attempts.
    probes: Vec<Probe>,
    /// What stopped the search, and why.
    stop: Option<(Limit, String)>,
    step_downs: usize,
    /// Why the final window stepped down, one line per step.
    step_notes: Vec<String>,
}

/// Searches the concurrency and measures the final window, in one window.
#[allow(clippy::too_many_arguments)]
pub(crate) fn search(
    plan: &SweepPlan,
    client: &Client,
    target: &Target,
    generator_cpus: &[usize],
    server: Option<&Server>,
    start: usize,
    fleet: &mut Option<Fleet>,
    labels: Labels<'_>,
) -> Result<SweepPoint> {
    let mut searched = search_concurrency(
        plan,
        client,
        target,
        generator_cpus,
        server,
        start,
        fleet,
        labels,
    )?;
    let m = final_window(
        plan,
        client,
        target,
        generator_cpus,
        server,
        fleet,
        &mut searched,
        plan.window,
        true,
        labels,
    )?;
    Ok(finish(plan, labels, searched, m))
}

/// The search: short probes at doubling concurrency until [`next_step`] stops it.
#[allow(clippy::too_many_arguments)]
pub(super) fn search_concurrency(
    plan: &SweepPlan,
    client: &Client,
    target: &Target,
    generator_cpus: &[usize],
    server: Option<&Server>,
    start: usize,
    fleet: &mut Option<Fleet>,
    labels: Labels<'_>,
) -> Result<Searched> {
    let mut probes = Vec::new();
    let mut state = SearchState {
        best: plan.fixed_concurrency.map(|c| (c, 0.0)),
        flat: 0,
    };
    let start = start.clamp(1, plan.max_concurrency.max(1));
    let mut concurrency = start;
    let mut stop: Option<(Limit, String)> = match (plan.fixed_concurrency, plan.fixed_rate) {
        (_, Some(r)) => Some((
            Limit::Fixed,
            format!("open loop at {r} requests/s given with --rate"),
        )),
        (Some(c), None) => Some((
            Limit::Fixed,
            format!("{c} clients given with --concurrency"),
        )),
        (None, None) => None,
    };
    while stop.is_none() {
        interrupt::check()?;
        let m = measure(
            plan,
            client,
            target,
            generator_cpus,
            server,
            fleet,
            labels.suite,
            concurrency,
            plan.probe,
            labels.cpus,
        )?;
        let probe = probe_of(&m, concurrency, plan.limit);
        let next = next_step(&mut state, &probe, plan.max_concurrency);
        probes.push(probe);
        if let Some(s) = next {
            stop = Some(s);
            break;
        }
        concurrency = (concurrency * 2).min(plan.max_concurrency);
    }
    // A search stopped by the limit at its first probe keeps that probe's (smaller
    // is not searched below the start: the start came from fewer cores).
    Ok(Searched {
        start,
        chosen: state.best.map(|b| b.0).unwrap_or(start),
        probes,
        stop,
        step_downs: 0,
        step_notes: Vec::new(),
    })
}

/// One final window (or round of it) at the chosen concurrency. With `step_down`
/// (a point's first), a window that breaks the limit or saturates the generator
/// halves the concurrency and is measured again, up to [`STEP_DOWNS`] times, each
/// attempt kept with the probes and its reason in the point's explanation. (The
/// probes are shorter than the window: a generator at 85 % in a probe can pass 90 %
/// over the window, and a point that measures the generator is no point.)
#[allow(clippy::too_many_arguments)]
pub(super) fn final_window(
    plan: &SweepPlan,
    client: &Client,
    target: &Target,
    generator_cpus: &[usize],
    server: Option<&Server>,
    fleet: &mut Option<Fleet>,
    s: &mut Searched,
    window: Duration,
    step_down: bool,
    labels: Labels<'_>,
) -> Result<Measured> {
    loop {
        interrupt::check()?;
        let m = measure(
            plan,
            client,
            target,
            generator_cpus,
            server,
            fleet,
            labels.suite,
            s.chosen,
            window,
            labels.cpus,
        )?;
        if !step_down {
            return Ok(m);
        }
        let probe = probe_of(&m, s.chosen, plan.limit);
        let why = step_down_reason(&probe);
        s.probes.push(probe);
        let Some(why) = why else { return Ok(m) };
        if s.chosen == 1
            || s.step_downs >= STEP_DOWNS
            || plan.fixed_concurrency.is_some()
            || plan.fixed_rate.is_some()
        {
            return Ok(m);
        }
        let fewer = (s.chosen / 2).max(1);
        s.step_notes.push(format!(
            "{why} at {} clients, so {fewer} were measured",
            s.chosen
        ));
        s.chosen = fewer;
        s.step_downs += 1;
    }
}

/// The point of a search and its final window (all its rounds, merged).
pub(super) fn finish(plan: &SweepPlan, labels: Labels<'_>, s: Searched, m: Measured) -> SweepPoint {
    let (mut limit, why) = s.stop.unwrap_or((Limit::Undetermined, "no probe".into()));
    // The final window can find what the probes did not.
    let last = probe_of(&m, s.chosen, plan.limit);
    if generator_saturated(&last) {
        limit = Limit::Generator;
    } else if !last.within_limit && limit != Limit::Fixed {
        limit = Limit::Latency;
    } else if limit == Limit::Generator && last.server_cpu.is_some_and(|c| c >= SERVER_BUSY) {
        // More clients saturated the generator, but at the clients kept nginx was
        // busy and the generator was not: nginx is what the figure measures.
        limit = Limit::Server;
    }
    let stepped: String = s.step_notes.iter().map(|n| format!("; {n}")).collect();
    let final_window = format!(
        "final window: nginx {}, generator threads {}",
        last.server_cpu
            .map(|c| format!("{:.0} %", c * 100.0))
            .unwrap_or_else(|| "-".into()),
        per_thread(&last.generator_cpu_per_thread)
    );
    let mut p = point(plan, labels, s.chosen, m, s.probes);
    let explanation = match plan.fixed_rate {
        Some(rate) => {
            // Open loop: the requests in flight on average (Little's law), not clients.
            let mean_s = p.latency.mean_ns as f64 / 1e9;
            p.concurrency = ((p.requests_per_sec * mean_s).ceil() as usize).max(1);
            p.open_loop_rate = Some(rate);
            // Its window's attempt too, which was kept with the search's start (the
            // clients of the point before, meaningless here).
            if let Some(window) = p.probes.last_mut() {
                window.concurrency = p.concurrency;
            }
            // A server behind the schedule finished the window's requests late: the
            // rate over their span is what it served.
            let behind = if p.requests_per_sec < rate * RATE_KEPT {
                format!(
                    "; served {:.1} requests/s of the {rate} asked: the server fell behind the schedule, so this is over its capacity",
                    p.requests_per_sec
                )
            } else {
                String::new()
            };
            format!(
                "about {} request(s) in flight: {why}{behind}; {final_window}",
                p.concurrency
            )
        }
        None => format!(
            "{} clients (probes from {}): {why}{stepped}; {final_window}",
            s.chosen, s.start
        ),
    };
    p.search = Some(SearchOutcome {
        started_at: s.start,
        limit,
        explanation,
    });
    p
}

/// Why a measured point is not valid (None: it is): an agent failed, the generator
/// was the limit, requests failed, or the first byte was over the limit even at
/// this concurrency. Failed requests are said whatever else made it invalid.
fn invalid_reason(
    plan: &SweepPlan,
    concurrency: usize,
    m: &Measured,
    within_limit: bool,
) -> Option<String> {
    let r = &m.report;
    let generator_cpu = r.generator_cpu();
    let generator_cpu_per_thread = r.generator_cpu_per_thread();
    let failures = cipherbench_model::tls::failures_note(r.failed, &r.failures);
    let why = if let Some(failure) = &m.agent_failure {
        Some(format!("failed: {failure}"))
    } else if saturated(generator_cpu, &generator_cpu_per_thread) {
        Some(format!(
            "the load generator used {:.0} % of its cores (threads {}): the point measures the generator, not nginx",
            generator_cpu * 100.0,
            per_thread(&generator_cpu_per_thread)
        ))
    } else if let Some(f) = &failures {
        Some(format!("{f} in the window"))
    } else if !within_limit {
        Some(format!(
            "even at {concurrency} client(s) the first byte took up to {:.2} s, over the {:.2} s limit",
            r.max_first_byte.as_secs_f64(),
            plan.limit.as_secs_f64()
        ))
    } else {
        None
    };
    why.map(|why| with_failures(why, failures.as_deref()))
}

pub(super) fn point(
    plan: &SweepPlan,
    l: Labels<'_>,
    concurrency: usize,
    m: Measured,
    probes: Vec<Probe>,
) -> SweepPoint {
    let r = &m.report;
    let interval_s = r.interval.as_secs_f64().max(1e-9);
    let rates: Vec<f64> = r
        .buckets
        .iter()
        .map(|b| b.bytes as f64 / interval_s)
        .collect();
    let generator_cpu = r.generator_cpu();
    let generator_cpu_per_thread = r.generator_cpu_per_thread();
    let generator_saturated = saturated(generator_cpu, &generator_cpu_per_thread);
    let within_limit = m.within(plan.limit);
    let invalid_reason = invalid_reason(plan, concurrency, &m, within_limit);
    // Agents read as this machine's generator does, and report their counts.
    // Plain HTTP has nothing to open: its points say nothing of verification.
    let verification =
        (!cipherbench_model::tls::is_plain(l.variant)).then(|| plan.verify.record(&r.verified));
    SweepPoint {
        suite: l.suite.to_string(),
        protocol: l.protocol.to_string(),
        negotiated_suite: r.negotiated.as_ref().map(|n| n.0.clone()),
        negotiated_protocol: r.negotiated.as_ref().map(|n| n.1.clone()),
        negotiated_group: r.negotiated.as_ref().and_then(|n| n.2.clone()),
        size_bytes: l.size,
        cores: l.cores,
        variant: l.variant.to_string(),
        key_store: l.key_store.to_string(),
        concurrency,
        window_ns: r.window.as_nanos() as u64,
        interval_ns: r.interval.as_nanos() as u64,
        throughput_bytes_per_sec: r.throughput_bytes_per_sec(),
        interval_throughput_bytes_per_sec: Summary::of_or_empty(&rates),
        // Kept: the rounds a ratio's interval resamples.
        interval_samples_bytes_per_sec: rates,
        requests_per_sec: r.requests_per_sec(),
        requests: r.ok,
        requests_sent: r.requests_sent,
        server_requests: m.server_requests,
        cancelled: r.cancelled,
        requests_ok_total: r.ok_total,
        requests_resumed_total: r.resumed_total,
        body_bytes: r.body_bytes,
        errors: r.failed,
        errors_by_reason: r.failures.clone(),
        latency: engine::latency(&r.latency),
        first_byte: engine::latency(&r.first_byte),
        handshake: engine::latency(&r.handshake),
        connect: engine::latency(&r.connect),
        max_first_byte_ns: r.max_first_byte.as_nanos() as u64,
        within_limit,
        server_cpu: m.server_cpu,
        generator_cpu,
        generator_cpu_per_thread,
        generator_threads: r.threads,
        generator_saturated,
        valid: invalid_reason.is_none(),
        invalid_reason,
        probes,
        search: None,
        noise: Some(Box::new(m.noise)),
        agents: m.agents,
        rounds: Vec::new(),
        interleave_group: None,
        open_loop_rate: None,
        verification,
    }
}
