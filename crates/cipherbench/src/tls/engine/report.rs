//! What a load window measured: per-second buckets, the latency histograms, each
//! generator thread's CPU, merged across threads into a [`Report`].

use super::*;

/// One series bucket: closed loop by time since the window started, open loop by
/// scheduled start.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Bucket {
    /// Body bytes read (closed loop).
    pub bytes: u64,
    /// Requests scheduled (open loop).
    pub attempted: u64,
    /// Requests that succeeded.
    pub ok: u64,
    /// Requests that failed.
    pub failed: u64,
    /// Highest latency of a successful request.
    pub max_latency_ns: u64,
}

/// What a load run measured.
pub struct Report {
    /// The window actually measured.
    pub window: Duration,
    /// Bucket length.
    pub interval: Duration,
    /// The series.
    pub buckets: Vec<Bucket>,
    /// Body bytes read within the window (completed and partial responses).
    pub window_bytes: u64,
    /// Successful requests (closed: completed in the window; open: all).
    pub ok: u64,
    /// Failed requests (closed: in the window; open: all).
    pub failed: u64,
    /// Failed requests by reason (same span as `failed`).
    pub failures: BTreeMap<FailureReason, u64>,
    /// Requests started over the whole run (open loop: scheduled).
    pub attempted: u64,
    /// Requests whose HTTP request was written, over the whole run.
    pub requests_sent: u64,
    /// Successful requests over the whole run.
    pub ok_total: u64,
    /// Of those, how many resumed a session (`SSL_session_reused`): what a
    /// "resumed" handshake measurement must show is nearly all of them.
    pub resumed_total: u64,
    /// Body bytes of the successful requests over the whole run.
    pub body_bytes: u64,
    /// Requests abandoned at the end (closed loop, after the drain).
    pub cancelled: u64,
    /// Whole-request latency of the successful requests (µs histogram).
    pub latency: Histogram<u64>,
    /// Time to first byte (µs).
    pub first_byte: Histogram<u64>,
    /// TLS handshake (µs).
    pub handshake: Histogram<u64>,
    /// TCP connect (µs).
    pub connect: Histogram<u64>,
    /// Highest time to first byte of any request that overlapped the window,
    /// counting the wait of requests that never got one.
    pub max_first_byte: Duration,
    /// Suite, protocol and key-exchange group negotiated (read back from the
    /// session; the group where the library says it).
    pub negotiated: Option<(String, String, Option<String>)>,
    /// Generator CPU time within the window, all threads.
    pub cpu_ns: u64,
    /// The same per thread, in the order of the CPUs given.
    pub thread_cpu_ns: Vec<u64>,
    /// Responses whose socket was parked between reads (paced), whole run.
    pub paced: u64,
    /// How the responses were read (by sample or whole), whole run.
    pub verified: sampled::Verified,
    /// Generator threads.
    pub threads: usize,
    /// Window start and end.
    pub window_start: Instant,
    /// End.
    pub window_end: Instant,
}

impl Report {
    /// Body bytes per second within the window.
    pub fn throughput_bytes_per_sec(&self) -> f64 {
        self.window_bytes as f64 / self.window.as_secs_f64().max(1e-9)
    }

    /// Requests completed per second within the window.
    pub fn requests_per_sec(&self) -> f64 {
        self.ok as f64 / self.window.as_secs_f64().max(1e-9)
    }

    /// Generator CPU as a fraction of its cores.
    pub fn generator_cpu(&self) -> f64 {
        self.cpu_ns as f64 / (self.window.as_nanos() as f64 * self.threads.max(1) as f64)
    }

    /// Each generator thread's CPU as a fraction of its core.
    pub fn generator_cpu_per_thread(&self) -> Vec<f64> {
        let w = self.window.as_nanos().max(1) as f64;
        self.thread_cpu_ns.iter().map(|&c| c as f64 / w).collect()
    }

    /// Adds a later window of the same load (a sweep point's next round) to this
    /// one, as if the two were one window with a pause between them: windows,
    /// counters and CPU times add, series buckets follow each other, histograms add
    /// bucket by bucket (every percentile is that of the union of both windows'
    /// requests), maxima take the maximum. `window_end` becomes the later's, so
    /// `window_start..window_end` spans the pause too: figures divide by `window`.
    pub fn append(&mut self, later: Report) -> Result<()> {
        if later.interval != self.interval {
            bail!("rounds of one point measured with different series intervals");
        }
        self.window += later.window;
        self.buckets.extend(later.buckets);
        self.window_bytes += later.window_bytes;
        self.ok += later.ok;
        self.failed += later.failed;
        for (k, v) in later.failures {
            *self.failures.entry(k).or_default() += v;
        }
        self.attempted += later.attempted;
        self.requests_sent += later.requests_sent;
        self.ok_total += later.ok_total;
        self.resumed_total += later.resumed_total;
        self.body_bytes += later.body_bytes;
        self.cancelled += later.cancelled;
        for (h, l) in [
            (&mut self.latency, &later.latency),
            (&mut self.first_byte, &later.first_byte),
            (&mut self.handshake, &later.handshake),
            (&mut self.connect, &later.connect),
        ] {
            h.add(l)
                .map_err(|e| anyhow!("adding a round's histogram: {e:?}"))?;
        }
        self.max_first_byte = self.max_first_byte.max(later.max_first_byte);
        if self.negotiated.is_none() {
            self.negotiated = later.negotiated;
        }
        self.cpu_ns += later.cpu_ns;
        if self.thread_cpu_ns.len() == later.thread_cpu_ns.len() {
            for (a, b) in self.thread_cpu_ns.iter_mut().zip(&later.thread_cpu_ns) {
                *a += b;
            }
        } else {
            bail!("rounds of one point measured with different generator threads");
        }
        self.paced += later.paced;
        self.verified.add(&later.verified);
        self.window_end = later.window_end;
        Ok(())
    }
}

/// A histogram summarised (µs histogram in, ns out).
pub fn latency(h: &Histogram<u64>) -> Latency {
    if h.is_empty() {
        return Latency::default();
    }
    let ns = |us: u64| us.saturating_mul(1000);
    Latency {
        count: h.len(),
        mean_ns: (h.mean() * 1000.0) as u64,
        p50_ns: ns(h.value_at_quantile(0.50)),
        p90_ns: ns(h.value_at_quantile(0.90)),
        p99_ns: ns(h.value_at_quantile(0.99)),
        max_ns: ns(h.max()),
    }
}

pub(crate) fn histogram() -> Histogram<u64> {
    // 1 µs to 1 hour, 3 significant digits: fixed bounds cannot fail.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

pub(super) fn micros(d: Duration) -> u64 {
    d.as_micros().max(1) as u64
}

/// One thread's share of a report.
pub(super) struct ThreadReport {
    pub(super) buckets: Vec<Bucket>,
    pub(super) window_bytes: u64,
    pub(super) ok: u64,
    pub(super) failed: u64,
    pub(super) failures: BTreeMap<FailureReason, u64>,
    pub(super) attempted: u64,
    pub(super) requests_sent: u64,
    pub(super) ok_total: u64,
    pub(super) resumed_total: u64,
    pub(super) body_bytes: u64,
    pub(super) cancelled: u64,
    pub(super) latency: Histogram<u64>,
    pub(super) first_byte: Histogram<u64>,
    pub(super) handshake: Histogram<u64>,
    pub(super) connect: Histogram<u64>,
    pub(super) max_first_byte: Duration,
    pub(super) negotiated: Option<(String, String, Option<String>)>,
    pub(super) cpu_ns: u64,
    pub(super) thread_cpu_ns: Vec<u64>,
    pub(super) paced: u64,
    pub(super) verified: sampled::Verified,
    pub(super) window_edges: (Instant, Instant),
    pub(super) interrupted: bool,
}

impl ThreadReport {
    pub(super) fn new(buckets: usize, window_edges: (Instant, Instant)) -> ThreadReport {
        ThreadReport {
            buckets: vec![Bucket::default(); buckets],
            window_bytes: 0,
            ok: 0,
            failed: 0,
            failures: BTreeMap::new(),
            attempted: 0,
            requests_sent: 0,
            ok_total: 0,
            resumed_total: 0,
            body_bytes: 0,
            cancelled: 0,
            latency: histogram(),
            first_byte: histogram(),
            handshake: histogram(),
            connect: histogram(),
            max_first_byte: Duration::ZERO,
            negotiated: None,
            cpu_ns: 0,
            thread_cpu_ns: Vec::new(),
            paced: 0,
            verified: sampled::Verified::default(),
            window_edges,
            interrupted: false,
        }
    }

    pub(super) fn merge(&mut self, o: ThreadReport) {
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            a.bytes += b.bytes;
            a.attempted += b.attempted;
            a.ok += b.ok;
            a.failed += b.failed;
            a.max_latency_ns = a.max_latency_ns.max(b.max_latency_ns);
        }
        self.window_bytes += o.window_bytes;
        self.ok += o.ok;
        self.failed += o.failed;
        for (k, v) in o.failures {
            *self.failures.entry(k).or_default() += v;
        }
        self.attempted += o.attempted;
        self.requests_sent += o.requests_sent;
        self.ok_total += o.ok_total;
        self.resumed_total += o.resumed_total;
        self.body_bytes += o.body_bytes;
        self.cancelled += o.cancelled;
        // Same bounds on both sides: adding cannot fail.
        let _ = self.latency.add(&o.latency);
        let _ = self.first_byte.add(&o.first_byte);
        let _ = self.handshake.add(&o.handshake);
        let _ = self.connect.add(&o.connect);
        self.max_first_byte = self.max_first_byte.max(o.max_first_byte);
        if self.negotiated.is_none() {
            self.negotiated = o.negotiated;
        }
        self.cpu_ns += o.cpu_ns;
        self.thread_cpu_ns.extend(o.thread_cpu_ns);
        self.paced += o.paced;
        self.verified.add(&o.verified);
        self.interrupted |= o.interrupted;
    }
}
