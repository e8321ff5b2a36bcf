//! The load generator: HTTPS over one TLS suite, every request a new TCP connection
//! and a full handshake (unless resumption is asked for), the response read whole and
//! its length checked.
//!
//! One engine, two arrival policies:
//! - **closed loop** ([`Arrivals::Closed`]): C clients, each starting its next request
//!   as soon as the previous one ends ("as fast as possible" in Intel's nginx study,
//!   seeds 000/003);
//! - **open loop** ([`Arrivals::Open`]): requests start on a [`Schedule`] whether or
//!   not earlier ones finished, and latency is counted from the *scheduled* start, so
//!   a stalled server shows in every request that waited (no coordinated omission).
//!
//! Each generator thread is pinned to its own core and runs an edge-triggered epoll
//! loop (mio) over non-blocking sockets; OpenSSL is driven through its non-blocking
//! API. A thread measures its own CPU time, so a saturated generator is detected (and
//! each thread's share is reported, so one saturated thread shows). While a large
//! body streams in from a server on this kernel (loopback, or an agent's namespace of
//! the server's machine), its socket is *parked*: taken out of the
//! epoll set and read again after a nap in which about [`NAP_BYTES`] arrive. There
//! the server's `write` runs the reader's TCP input: a reader asleep in
//! `epoll_wait` costs the server a wake-up per segment, and a reader that keeps its
//! window moving (reading at once, or SO_RCVLOWAT's ACK-now rule) is ACKed every
//! second segment, so each of nginx's 16 KiB TLS records goes out alone. Parked, the
//! socket has no sleeper to wake and its window stands still, so the kernel delays
//! its ACKs, nginx's records coalesce into about half as many segments, and what nginx
//! queued meanwhile is sent when the generator's read opens the window, on the
//! generator's CPU, as under wrk (issue 12; METHODOLOGY.md, "The load generator",
//! wake-ups). The engine never prints and never touches the results: it returns a
//! [`Report`].

use super::http::{self, Parsed};
use super::suite::Suite;
use crate::host;
use crate::interrupt;
use anyhow::{anyhow, bail, Context, Result};
use cipherbench_model::tls::{FailureReason, Latency};
use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use openssl::ssl::{
    ErrorCode, Ssl, SslContext, SslMethod, SslOptions, SslSession, SslSessionCacheMode, SslStream,
    SslVerifyMode,
};
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Bytes read from a socket at once for OpenSSL's small reads, and the size of the
/// application's read buffer.
const SOCKET_BUFFER: usize = 64 * 1024;
/// While more than this of a body from a loopback server is still to come, its
/// socket is parked between reads, for a nap in which about this many bytes arrive at
/// the rate the body has come so far. The last part is read as it arrives, so the end
/// of a response is seen at once.
pub const NAP_BYTES: u64 = 256 * 1024;
/// Shortest nap: below this a fast server's bytes are read about as often as epoll
/// would report them.
const NAP_MIN: Duration = Duration::from_micros(100);
/// Longest nap: a slow body is still read every 2 ms (well inside any receive buffer's
/// room, and a small delay next to the body's own time).
const NAP_MAX: Duration = Duration::from_millis(2);
/// How often in-flight requests are checked against the timeout.
const TIMEOUT_CHECK: Duration = Duration::from_millis(5);
/// Longest sleep in the event loop, so Ctrl-C and window edges are seen promptly.
const MAX_WAIT: Duration = Duration::from_millis(10);

/// The client side of one suite: a TLS context that offers exactly that suite and
/// protocol version, with session resumption off unless asked for.
pub struct Client {
    ctx: SslContext,
    suite: String,
    protocol: &'static str,
    resumption: bool,
}

impl Client {
    /// A client for `suite`.
    pub fn new(suite: &Suite, resumption: bool) -> Result<Client> {
        Client::with_groups(suite, resumption, None)
    }

    /// A client for `suite` that offers only the key-exchange groups listed
    /// (OpenSSL's spelling, `X25519` or `P-256`; None: the library's defaults), so
    /// the group measured is the group negotiated (RFC 8446 §4.2.7; TLS 1.2's
    /// "elliptic curves" extension, RFC 8422 §5.1.1).
    pub fn with_groups(suite: &Suite, resumption: bool, groups: Option<&str>) -> Result<Client> {
        let mut b = SslContext::builder(SslMethod::tls_client())?;
        // The server's certificate is one cipherbench generated a moment ago (or the
        // user's own server); the measurement is the server's work, and a
        // verification failure would only hide it. The negotiated suite is checked
        // on every connection instead.
        b.set_verify(SslVerifyMode::NONE);
        // Read-ahead: OpenSSL asks its BIO for as much as its record buffer holds
        // instead of a 5-byte header and then the record, so [`Sock`] can read
        // straight into OpenSSL's buffer, one syscall and no extra copy per record.
        b.set_read_ahead(true);
        b.set_min_proto_version(Some(suite.protocol.version()))?;
        b.set_max_proto_version(Some(suite.protocol.version()))?;
        match suite.protocol {
            super::suite::Protocol::Tls12 => b.set_cipher_list(suite.openssl)?,
            super::suite::Protocol::Tls13 => b.set_ciphersuites(suite.openssl)?,
        }
        if resumption {
            b.set_session_cache_mode(SslSessionCacheMode::CLIENT);
        } else {
            b.set_session_cache_mode(SslSessionCacheMode::OFF);
            b.set_options(SslOptions::NO_TICKET);
        }
        if let Some(g) = groups {
            b.set_groups_list(g).map_err(|e| {
                anyhow::anyhow!("the client's library does not offer the group {g}: {e}")
            })?;
        }
        Ok(Client {
            ctx: b.build(),
            suite: suite.openssl.to_string(),
            protocol: suite.protocol.as_str(),
            resumption,
        })
    }

    fn ssl(
        &self,
        host: &str,
        session: Option<&SslSession>,
    ) -> Result<Ssl, openssl::error::ErrorStack> {
        let mut ssl = Ssl::new(&self.ctx)?;
        ssl.set_connect_state();
        if host.parse::<std::net::IpAddr>().is_err() {
            ssl.set_hostname(host)?;
        }
        if let Some(s) = session {
            // SAFETY: the session came from a connection made with this same context
            // (each thread keeps the last session of its own connections), which is
            // what SSL_set_session requires.
            unsafe { ssl.set_session(s)? };
        }
        Ok(ssl)
    }
}

/// Where requests go.
#[derive(Debug, Clone)]
pub struct Target {
    /// Server address.
    pub addr: SocketAddr,
    /// Host header (and SNI when it is a name).
    pub host: String,
    /// Path of the file.
    pub path: String,
    /// Body length every response must have, if known.
    pub expected_len: Option<u64>,
}

/// When requests start in the open loop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Schedule {
    /// A constant rate, requests per second, for a duration.
    Constant {
        /// Requests per second.
        rate: f64,
        /// Length.
        duration: Duration,
    },
    /// A rate rising linearly from 0 to `target_rate` over `duration` (the IXP425
    /// offload paper's ramp).
    Ramp {
        /// Rate at the end, requests per second.
        target_rate: f64,
        /// Length.
        duration: Duration,
    },
}

impl Schedule {
    /// Number of requests the schedule starts.
    pub fn count(&self) -> u64 {
        match *self {
            Schedule::Constant { rate, duration } => (rate * duration.as_secs_f64()).floor() as u64,
            // The integral of the rate: R * T / 2.
            Schedule::Ramp {
                target_rate,
                duration,
            } => (target_rate * duration.as_secs_f64() / 2.0).floor() as u64,
        }
    }

    /// Start of request `k` (0-based), from the start of the schedule.
    pub fn offset(&self, k: u64) -> Duration {
        match *self {
            Schedule::Constant { rate, .. } => Duration::from_secs_f64(k as f64 / rate),
            // The expected number started by t is R t^2 / (2T); request k starts when
            // that reaches k + 1/2.
            Schedule::Ramp {
                target_rate,
                duration,
            } => Duration::from_secs_f64(
                (2.0 * duration.as_secs_f64() * (k as f64 + 0.5) / target_rate).sqrt(),
            ),
        }
    }

    /// Length.
    pub fn duration(&self) -> Duration {
        match *self {
            Schedule::Constant { duration, .. } | Schedule::Ramp { duration, .. } => duration,
        }
    }
}

/// How requests arrive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrivals {
    /// C clients back to back.
    Closed {
        /// Concurrent clients.
        concurrency: usize,
    },
    /// On a schedule.
    Open(Schedule),
}

/// One load run.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Where.
    pub target: Target,
    /// How requests arrive.
    pub arrivals: Arrivals,
    /// Time before the window, not counted. Closed loop: the window starts after
    /// it. Open loop: the schedule's first `warmup` runs at its rate, and what was
    /// scheduled in it is not counted (the ramp has none).
    pub warmup: Duration,
    /// Closed loop: the measured window (open loop: the schedule's length, warm-up
    /// included).
    pub window: Duration,
    /// Closed loop: how long in-flight requests may finish after the window.
    pub drain: Duration,
    /// A request not finished this long after its (scheduled) start fails.
    pub timeout: Duration,
    /// Series bucket length.
    pub interval: Duration,
    /// One generator thread per CPU listed, pinned to it.
    pub cpus: Vec<usize>,
    /// Connections a thread may hold open at once.
    pub max_connections: usize,
    /// Park large bodies between reads ([`NAP_BYTES`]): only where the server's CPU
    /// pays for the reader's wake-ups and ACKs, a server on this very kernel: on loopback
    /// ([`pays_for_wakeups`]), or an agent's in a namespace of the server's machine.
    pub pace: bool,
}

/// Whether a server at `addr` pays for this generator's wake-ups (its `write`
/// runs the receiver's TCP input): one on loopback does; over a network the
/// server does not, and a window held still for a nap could cap a long path's
/// throughput.
pub fn pays_for_wakeups(addr: SocketAddr) -> bool {
    addr.ip().is_loopback()
}

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
    /// Suite and protocol negotiated (read back from the session).
    pub negotiated: Option<(String, String)>,
    /// Generator CPU time within the window, all threads.
    pub cpu_ns: u64,
    /// The same per thread, in the order of the CPUs given.
    pub thread_cpu_ns: Vec<u64>,
    /// Responses whose socket was parked between reads (paced), whole run.
    pub paced: u64,
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

fn micros(d: Duration) -> u64 {
    d.as_micros().max(1) as u64
}

/// Runs the load and returns what it measured; `Err(Interrupted)` on Ctrl-C.
pub fn run(client: &Client, spec: &Spec) -> Result<Report> {
    if spec.cpus.is_empty() {
        bail!("the load generator has no CPU to run on");
    }
    let threads = spec.cpus.len();
    let request = http::request(&spec.target.host, &spec.target.path);
    let t0 = Instant::now();
    let results: Vec<Result<ThreadReport>> = std::thread::scope(|scope| {
        let handles: Vec<_> = spec
            .cpus
            .iter()
            .enumerate()
            .map(|(i, &cpu)| {
                let request = &request;
                scope.spawn(move || {
                    let _ = host::pin_to_core(cpu);
                    Worker::new(client, spec, request, i, threads, t0)?.run()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a load generator thread panicked")))
            })
            .collect()
    });
    let mut merged: Option<ThreadReport> = None;
    for r in results {
        let r = r?;
        match &mut merged {
            None => merged = Some(r),
            Some(m) => m.merge(r),
        }
    }
    let m = merged.context("no generator thread reported")?;
    if m.interrupted {
        return Err(interrupt::Interrupted.into());
    }
    let (window_start, window_end) = m.window_edges;
    Ok(Report {
        window: window_end.duration_since(window_start),
        interval: spec.interval,
        buckets: m.buckets,
        window_bytes: m.window_bytes,
        ok: m.ok,
        failed: m.failed,
        failures: m.failures,
        attempted: m.attempted,
        requests_sent: m.requests_sent,
        ok_total: m.ok_total,
        resumed_total: m.resumed_total,
        body_bytes: m.body_bytes,
        cancelled: m.cancelled,
        latency: m.latency,
        first_byte: m.first_byte,
        handshake: m.handshake,
        connect: m.connect,
        max_first_byte: m.max_first_byte,
        negotiated: m.negotiated,
        cpu_ns: m.cpu_ns,
        thread_cpu_ns: m.thread_cpu_ns,
        paced: m.paced,
        threads,
        window_start,
        window_end,
    })
}

/// One thread's share of a report.
struct ThreadReport {
    buckets: Vec<Bucket>,
    window_bytes: u64,
    ok: u64,
    failed: u64,
    failures: BTreeMap<FailureReason, u64>,
    attempted: u64,
    requests_sent: u64,
    ok_total: u64,
    resumed_total: u64,
    body_bytes: u64,
    cancelled: u64,
    latency: Histogram<u64>,
    first_byte: Histogram<u64>,
    handshake: Histogram<u64>,
    connect: Histogram<u64>,
    max_first_byte: Duration,
    negotiated: Option<(String, String)>,
    cpu_ns: u64,
    thread_cpu_ns: Vec<u64>,
    paced: u64,
    window_edges: (Instant, Instant),
    interrupted: bool,
}

impl ThreadReport {
    fn new(buckets: usize, window_edges: (Instant, Instant)) -> ThreadReport {
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
            window_edges,
            interrupted: false,
        }
    }

    fn merge(&mut self, o: ThreadReport) {
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
        self.interrupted |= o.interrupted;
    }
}

/// A socket with a read buffer: OpenSSL's large reads (read-ahead fills its record
/// buffer) go straight to the socket, and any small read is served from memory so
/// that one `read` syscall serves several.
struct Sock {
    tcp: TcpStream,
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
}

/// Whether a body with `left` bytes still to read is parked between reads.
fn parks(left: u64) -> bool {
    left > NAP_BYTES
}

/// The nap after a read that drained a body's socket: the time [`NAP_BYTES`] take at
/// the rate the body has come so far (`read` bytes since its first byte, `streaming`
/// ago), within [`NAP_MIN`] and [`NAP_MAX`]. The first nap, before there is a rate,
/// is the shortest.
fn nap_for(read: u64, streaming: Duration) -> Duration {
    let secs = streaming.as_secs_f64();
    if read == 0 || secs <= 0.0 {
        return NAP_MIN;
    }
    Duration::from_secs_f64(NAP_BYTES as f64 * secs / read as f64).clamp(NAP_MIN, NAP_MAX)
}

/// A read at least this large bypasses [`Sock`]'s buffer.
const DIRECT_READ: usize = 4096;

impl Read for Sock {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.end && out.len() >= DIRECT_READ {
            return self.tcp.read(out);
        }
        if self.pos == self.end {
            let n = self.tcp.read(&mut self.buf)?;
            self.pos = 0;
            self.end = n;
            if n == 0 {
                return Ok(0);
            }
        }
        let n = out.len().min(self.end - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

impl Write for Sock {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.tcp.write(data)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.tcp.flush()
    }
}

enum Phase {
    Connecting(Option<Sock>),
    Handshaking,
    Writing(usize),
    Head,
    Body,
}

struct Conn {
    phase: Phase,
    tls: Option<SslStream<Sock>>,
    head: Vec<u8>,
    body_expected: u64,
    body_read: u64,
    scheduled: Instant,
    started: Instant,
    connected: Option<Instant>,
    handshaked: Option<Instant>,
    first_byte: Option<Instant>,
    /// Parked (out of the epoll set) until then; see [`NAP_BYTES`].
    parked_until: Option<Instant>,
    /// Set by [`Worker::advance`]: the body's socket is drained and much is still to
    /// come, so it may be parked.
    park: bool,
    /// Parked at least once (counted in [`Report::paced`]).
    paced: bool,
    resumed: bool,
}

impl Conn {
    /// A request scheduled at `scheduled` and started at `started`, nothing done yet.
    fn new(phase: Phase, scheduled: Instant, started: Instant) -> Conn {
        Conn {
            phase,
            tls: None,
            head: Vec::new(),
            body_expected: 0,
            body_read: 0,
            scheduled,
            started,
            connected: None,
            handshaked: None,
            first_byte: None,
            parked_until: None,
            park: false,
            paced: false,
            resumed: false,
        }
    }
}

enum Step {
    Pending,
    Ok,
    Failed(FailureReason),
}

fn want(e: &openssl::ssl::Error) -> bool {
    e.code() == ErrorCode::WANT_READ || e.code() == ErrorCode::WANT_WRITE
}

struct Worker<'a> {
    client: &'a Client,
    spec: &'a Spec,
    request: &'a [u8],
    index: usize,
    threads: usize,
    t0: Instant,
    window_start: Instant,
    window_end: Instant,
    poll: Poll,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    active: usize,
    buffers: Vec<Box<[u8]>>,
    scratch: Vec<u8>,
    session: Option<SslSession>,
    /// [`Spec::pace`]: park large bodies between reads.
    pace: bool,
    /// Connections parked now.
    parked: usize,
    report: ThreadReport,
}

impl<'a> Worker<'a> {
    fn new(
        client: &'a Client,
        spec: &'a Spec,
        request: &'a [u8],
        index: usize,
        threads: usize,
        t0: Instant,
    ) -> Result<Worker<'a>> {
        let (window_start, window_end, buckets) = match spec.arrivals {
            Arrivals::Closed { .. } => {
                let ws = t0 + spec.warmup;
                let n = (spec.window.as_nanos() / spec.interval.as_nanos().max(1)) as usize;
                (ws, ws + spec.window, n.max(1))
            }
            Arrivals::Open(s) => {
                let warmup = spec.warmup.min(s.duration());
                let n = (s.duration() - warmup)
                    .as_nanos()
                    .div_ceil(spec.interval.as_nanos().max(1)) as usize;
                (t0 + warmup, t0 + s.duration(), n.max(1))
            }
        };
        Ok(Worker {
            client,
            spec,
            request,
            index,
            threads,
            t0,
            window_start,
            window_end,
            poll: Poll::new().context("creating the generator's epoll instance")?,
            conns: Vec::new(),
            free: Vec::new(),
            active: 0,
            buffers: Vec::new(),
            scratch: vec![0u8; SOCKET_BUFFER],
            session: None,
            pace: spec.pace,
            parked: 0,
            report: ThreadReport::new(buckets, (window_start, window_end)),
        })
    }

    #[expect(
        clippy::too_many_lines,
        reason = "a client thread's event loop: start requests, poll, advance connections, close the window"
    )]
    fn run(mut self) -> Result<ThreadReport> {
        let mut events = Events::with_capacity(1024);
        let closed_slots = match self.spec.arrivals {
            Arrivals::Closed { concurrency } => Some(
                concurrency / self.threads + usize::from(self.index < concurrency % self.threads),
            ),
            Arrivals::Open(_) => None,
        };
        let schedule = match self.spec.arrivals {
            Arrivals::Open(s) => Some(s),
            Arrivals::Closed { .. } => None,
        };
        let total_scheduled = schedule.map(|s| s.count()).unwrap_or(0);
        // This thread's share of the schedule: every `threads`-th request.
        let mut next_k = self.index as u64;
        let mut cpu_at_start: Option<u64> = None;
        let mut cpu_at_end: Option<u64> = None;
        let mut last_timeout_check = Instant::now();
        let hard_end = match schedule {
            Some(s) => self.t0 + s.duration() + self.spec.timeout + Duration::from_secs(1),
            None => self.window_end + self.spec.drain,
        };
        loop {
            let now = Instant::now();
            if interrupt::requested() {
                self.report.interrupted = true;
                self.cancel_all();
                break;
            }
            if cpu_at_start.is_none() && now >= self.window_start {
                cpu_at_start = Some(host::thread_cpu_ns());
            }
            if let Some(slots) = closed_slots {
                if now >= self.window_end {
                    if cpu_at_end.is_none() {
                        cpu_at_end = Some(host::thread_cpu_ns());
                        self.note_waiting_at(self.window_end);
                    }
                    if self.active == 0 || now >= hard_end {
                        self.cancel_all();
                        break;
                    }
                } else {
                    // One start per free slot per turn: a start that fails at once
                    // (connection refused) frees its slot again, and must not spin.
                    for _ in self.active..slots {
                        self.start(now, now);
                    }
                }
            }
            if let Some(s) = schedule {
                while next_k < total_scheduled {
                    let at = self.t0 + s.offset(next_k);
                    if at > now {
                        break;
                    }
                    // The warm-up's requests run, uncounted.
                    if at >= self.window_start {
                        let bucket = self.bucket_of(at);
                        self.report.buckets[bucket].attempted += 1;
                        self.report.attempted += 1;
                    }
                    self.start(at, now);
                    next_k += self.threads as u64;
                }
                if next_k >= total_scheduled && self.active == 0 {
                    break;
                }
                if now >= hard_end {
                    self.cancel_all();
                    break;
                }
            }
            if now.duration_since(last_timeout_check) >= TIMEOUT_CHECK {
                last_timeout_check = now;
                self.expire(now);
            }
            // Sleep until the next event, the next scheduled start, or a window edge.
            let mut wait = MAX_WAIT;
            if let Some(s) = schedule {
                if next_k < total_scheduled {
                    let at = self.t0 + s.offset(next_k);
                    wait = wait.min(at.saturating_duration_since(now));
                }
            } else if now < self.window_end {
                wait = wait.min(self.window_end.saturating_duration_since(now));
            }
            // ... or the end of the first nap.
            let wake = self.next_unpark();
            if let Some(t) = wake {
                wait = wait.min(t.saturating_duration_since(now));
            }
            match self.poll.poll(&mut events, Some(wait)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).context("waiting for socket events"),
            }
            for event in events.iter() {
                let i = event.token().0;
                self.drive(i);
            }
            if wake.is_some() {
                self.unpark_due(Instant::now());
            }
        }
        let end_cpu = cpu_at_end.unwrap_or_else(host::thread_cpu_ns);
        self.report.cpu_ns = end_cpu.saturating_sub(cpu_at_start.unwrap_or(end_cpu));
        self.report.thread_cpu_ns = vec![self.report.cpu_ns];
        if schedule.is_some() {
            // The open loop's span: from the warm-up's end until its last request
            // finished. Its requests are those scheduled in the window, however late
            // they finish (the ramp's counts), so a server that falls behind the
            // schedule shows its real rate over the longer span, not the rate asked.
            self.report.window_edges = (self.window_start, Instant::now().max(self.window_end));
        }
        Ok(self.report)
    }

    /// When the first parked connection's nap ends.
    fn next_unpark(&self) -> Option<Instant> {
        if self.parked == 0 {
            return None;
        }
        self.conns
            .iter()
            .flatten()
            .filter_map(|c| c.parked_until)
            .min()
    }

    /// Reads every parked connection whose nap has ended.
    fn unpark_due(&mut self, now: Instant) {
        for i in 0..self.conns.len() {
            if matches!(&self.conns[i], Some(c) if c.parked_until.is_some_and(|t| t <= now)) {
                self.drive(i);
            }
        }
    }

    fn bucket_of(&self, at: Instant) -> usize {
        let i = (at.saturating_duration_since(self.window_start).as_nanos()
            / self.spec.interval.as_nanos().max(1)) as usize;
        i.min(self.report.buckets.len() - 1)
    }

    fn in_window(&self, at: Instant) -> bool {
        at >= self.window_start && at < self.window_end
    }

    /// Starts a request scheduled at `scheduled` (closed loop: now).
    fn start(&mut self, scheduled: Instant, now: Instant) {
        if matches!(self.spec.arrivals, Arrivals::Closed { .. }) {
            self.report.attempted += 1;
        }
        if self.active >= self.spec.max_connections {
            self.complete_without_conn(scheduled, now, FailureReason::Overload);
            return;
        }
        let tcp = match TcpStream::connect(self.spec.target.addr) {
            Ok(t) => t,
            Err(e) => {
                let reason = if e.raw_os_error() == Some(libc::EMFILE)
                    || e.raw_os_error() == Some(libc::ENFILE)
                {
                    FailureReason::Overload
                } else {
                    FailureReason::Connect
                };
                self.complete_without_conn(scheduled, now, reason);
                return;
            }
        };
        let _ = tcp.set_nodelay(true);
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.conns.push(None);
                self.conns.len() - 1
            }
        };
        let mut sock = Sock {
            tcp,
            buf: self
                .buffers
                .pop()
                .unwrap_or_else(|| vec![0u8; SOCKET_BUFFER].into_boxed_slice()),
            pos: 0,
            end: 0,
        };
        if self
            .poll
            .registry()
            .register(
                &mut sock.tcp,
                Token(index),
                Interest::READABLE | Interest::WRITABLE,
            )
            .is_err()
        {
            self.buffers.push(std::mem::take(&mut sock.buf));
            self.free.push(index);
            self.complete_without_conn(scheduled, now, FailureReason::Overload);
            return;
        }
        self.conns[index] = Some(Conn::new(Phase::Connecting(Some(sock)), scheduled, now));
        self.active += 1;
    }

    fn complete_without_conn(&mut self, scheduled: Instant, now: Instant, reason: FailureReason) {
        let conn = Conn::new(Phase::Handshaking, scheduled, now);
        self.account(&conn, now, Step::Failed(reason));
    }

    /// Advances connection `i` as far as it can go without blocking.
    fn drive(&mut self, i: usize) {
        let Some(Some(mut conn)) = self.conns.get_mut(i).map(Option::take) else {
            return;
        };
        conn.park = false;
        let step = self.advance(&mut conn);
        match step {
            Step::Pending => {
                self.park_or_unpark(i, &mut conn);
                self.conns[i] = Some(conn);
            }
            done => {
                let now = Instant::now();
                if self.client.resumption && matches!(done, Step::Ok) {
                    // The server closed first, after the whole body: the session is
                    // good. OpenSSL forgets a session whose connection is freed
                    // without a close_notify sent (`ssl_clear_bad_session`), so send
                    // one (non-blocking; a peer that already closed need not read it).
                    if let Some(t) = conn.tls.as_mut() {
                        let _ = t.shutdown();
                    }
                }
                self.account(&conn, now, done);
                self.release(i, conn);
            }
        }
    }

    /// After a read that drained connection `i`: parks it (out of the epoll set, so the
    /// server's writes find no sleeper to wake and no window moving) for the next nap,
    /// or, once little of its body is left, puts it back in the set. A socket
    /// registered again reports data already queued (epoll checks readiness on ADD).
    fn park_or_unpark(&mut self, i: usize, conn: &mut Conn) {
        let Some(tls) = conn.tls.as_mut() else {
            return;
        };
        let now = Instant::now();
        if conn.park {
            if conn.parked_until.is_none() {
                if self
                    .poll
                    .registry()
                    .deregister(&mut tls.get_mut().tcp)
                    .is_err()
                {
                    // Left in the set: read as before, only with more wake-ups.
                    return;
                }
                self.parked += 1;
                if !conn.paced {
                    conn.paced = true;
                    self.report.paced += 1;
                }
            }
            let streaming = conn.first_byte.map_or(Duration::ZERO, |f| now - f);
            conn.parked_until = Some(now + nap_for(conn.body_read, streaming));
        } else if conn.parked_until.take().is_some() {
            self.parked -= 1;
            if self
                .poll
                .registry()
                .register(
                    &mut tls.get_mut().tcp,
                    Token(i),
                    Interest::READABLE | Interest::WRITABLE,
                )
                .is_err()
            {
                // Out of the set for good: read at the next nap's end instead.
                conn.parked_until = Some(now + NAP_MIN);
                self.parked += 1;
            }
        }
    }

    #[expect(
        clippy::too_many_lines,
        reason = "one match arm per phase of a connection's state machine"
    )]
    fn advance(&mut self, conn: &mut Conn) -> Step {
        loop {
            match &mut conn.phase {
                Phase::Connecting(sock) => {
                    let Some(s) = sock.as_ref() else {
                        return Step::Failed(FailureReason::Connect);
                    };
                    match s.tcp.take_error() {
                        Ok(None) => {}
                        Ok(Some(_)) | Err(_) => return Step::Failed(FailureReason::Connect),
                    }
                    match s.tcp.peer_addr() {
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::NotConnected => return Step::Pending,
                        Err(_) => return Step::Failed(FailureReason::Connect),
                    }
                    conn.connected = Some(Instant::now());
                    let Some(sock) = sock.take() else {
                        return Step::Failed(FailureReason::Connect);
                    };
                    let ssl = match self
                        .client
                        .ssl(&self.spec.target.host, self.session.as_ref())
                    {
                        Ok(s) => s,
                        Err(_) => return Step::Failed(FailureReason::Handshake),
                    };
                    match SslStream::new(ssl, sock) {
                        Ok(t) => conn.tls = Some(t),
                        Err(_) => return Step::Failed(FailureReason::Handshake),
                    }
                    conn.phase = Phase::Handshaking;
                }
                Phase::Handshaking => {
                    let Some(tls) = conn.tls.as_mut() else {
                        return Step::Failed(FailureReason::Handshake);
                    };
                    match tls.do_handshake() {
                        Ok(()) => {}
                        Err(e) if want(&e) => return Step::Pending,
                        Err(_) => return Step::Failed(FailureReason::Handshake),
                    }
                    conn.handshaked = Some(Instant::now());
                    let ssl = tls.ssl();
                    let suite = ssl.current_cipher().map(|c| c.name()).unwrap_or("");
                    let version = ssl.version_str();
                    if suite != self.client.suite || version != self.client.protocol {
                        return Step::Failed(FailureReason::WrongSuite);
                    }
                    if self.report.negotiated.is_none() {
                        self.report.negotiated = Some((suite.to_string(), version.to_string()));
                    }
                    conn.resumed = ssl.session_reused();
                    if self.client.resumption && self.client.protocol != "TLSv1.3" {
                        if let Some(s) = ssl.session() {
                            self.session = Some(s.to_owned());
                        }
                    }
                    conn.phase = Phase::Writing(0);
                }
                Phase::Writing(sent) => {
                    let Some(tls) = conn.tls.as_mut() else {
                        return Step::Failed(FailureReason::Io);
                    };
                    match tls.ssl_write(&self.request[*sent..]) {
                        Ok(n) => *sent += n,
                        Err(e) if want(&e) => return Step::Pending,
                        Err(_) => return Step::Failed(FailureReason::Io),
                    }
                    if *sent >= self.request.len() {
                        self.report.requests_sent += 1;
                        conn.phase = Phase::Head;
                    }
                }
                Phase::Head | Phase::Body => {
                    let Some(tls) = conn.tls.as_mut() else {
                        return Step::Failed(FailureReason::Io);
                    };
                    let n = match tls.ssl_read(&mut self.scratch) {
                        Ok(0) => return self.eof(conn),
                        Ok(n) => n,
                        Err(e) if want(&e) => {
                            if self.pace && matches!(conn.phase, Phase::Body) {
                                conn.park =
                                    parks(conn.body_expected.saturating_sub(conn.body_read));
                            }
                            return Step::Pending;
                        }
                        Err(e) if e.code() == ErrorCode::ZERO_RETURN => return self.eof(conn),
                        Err(e) if e.code() == ErrorCode::SYSCALL && e.io_error().is_none() => {
                            return self.eof(conn)
                        }
                        Err(_) => return Step::Failed(FailureReason::Io),
                    };
                    let now = Instant::now();
                    if conn.first_byte.is_none() {
                        conn.first_byte = Some(now);
                    }
                    let body_now = if matches!(conn.phase, Phase::Head) {
                        conn.head.extend_from_slice(&self.scratch[..n]);
                        match http::parse_head(&conn.head) {
                            Parsed::Partial => continue,
                            Parsed::Invalid => return Step::Failed(FailureReason::Http),
                            Parsed::Done(head) => {
                                if head.status != 200 {
                                    return Step::Failed(FailureReason::Http);
                                }
                                let Some(len) = head.content_length else {
                                    return Step::Failed(FailureReason::Http);
                                };
                                if self.spec.target.expected_len.is_some_and(|e| e != len) {
                                    return Step::Failed(FailureReason::Length);
                                }
                                conn.body_expected = len;
                                conn.phase = Phase::Body;
                                (conn.head.len() - head.len) as u64
                            }
                        }
                    } else {
                        n as u64
                    };
                    conn.body_read += body_now;
                    // Open loop too: a sweep point at `--rate` is judged by its
                    // throughput (the ramp reads only its request counts); its span runs
                    // on past the schedule until the last request finished.
                    let open = matches!(self.spec.arrivals, Arrivals::Open(_));
                    if body_now > 0 && self.in_window(now) {
                        self.report.window_bytes += body_now;
                        let b = self.bucket_of(now);
                        self.report.buckets[b].bytes += body_now;
                    } else if body_now > 0 && open && now >= self.window_end {
                        // The tail: in the total, not in the schedule's intervals.
                        self.report.window_bytes += body_now;
                    }
                    if conn.body_read > conn.body_expected {
                        return Step::Failed(FailureReason::Length);
                    }
                    if matches!(conn.phase, Phase::Body) && conn.body_read == conn.body_expected {
                        return Step::Ok;
                    }
                }
            }
        }
    }

    fn eof(&self, conn: &Conn) -> Step {
        match conn.phase {
            Phase::Body if conn.body_read == conn.body_expected => Step::Ok,
            Phase::Body => Step::Failed(FailureReason::Length),
            _ => Step::Failed(FailureReason::Http),
        }
    }

    /// Time to first byte, for the latency limit: every request that overlapped the
    /// window counts, including the wait so far of one that never got a first byte.
    fn note_first_byte_wait(&mut self, conn: &Conn, now: Instant) {
        let fb_end = conn.first_byte.unwrap_or(now);
        if conn.scheduled < self.window_end && fb_end >= self.window_start {
            self.report.max_first_byte = self
                .report
                .max_first_byte
                .max(fb_end.duration_since(conn.scheduled));
        }
    }

    /// Books a finished request.
    fn account(&mut self, conn: &Conn, now: Instant, step: Step) {
        let closed = matches!(self.spec.arrivals, Arrivals::Closed { .. });
        self.note_first_byte_wait(conn, now);
        let counts = if closed {
            self.in_window(now)
        } else {
            conn.scheduled >= self.window_start
        };
        match step {
            Step::Pending => {}
            Step::Ok => {
                self.report.ok_total += 1;
                self.report.resumed_total += u64::from(conn.resumed);
                // TLS 1.3 sends its tickets after the handshake (RFC 8446 §4.6.1):
                // the session worth resuming is the one read to the end.
                if self.client.resumption && self.client.protocol == "TLSv1.3" {
                    if let Some(s) = conn.tls.as_ref().and_then(|t| t.ssl().session()) {
                        self.session = Some(s.to_owned());
                    }
                }
                self.report.body_bytes += conn.body_read;
                let latency = now.duration_since(conn.scheduled);
                if counts {
                    self.report.ok += 1;
                    self.report.latency.saturating_record(micros(latency));
                    if let Some(fb) = conn.first_byte {
                        self.report
                            .first_byte
                            .saturating_record(micros(fb.duration_since(conn.scheduled)));
                    }
                    if let (Some(c), Some(h)) = (conn.connected, conn.handshaked) {
                        self.report
                            .handshake
                            .saturating_record(micros(h.duration_since(c)));
                    }
                    if let Some(c) = conn.connected {
                        self.report
                            .connect
                            .saturating_record(micros(c.duration_since(conn.started)));
                    }
                    let b = self.bucket_of(if closed { now } else { conn.scheduled });
                    let bucket = &mut self.report.buckets[b];
                    bucket.ok += 1;
                    bucket.max_latency_ns = bucket.max_latency_ns.max(latency.as_nanos() as u64);
                }
            }
            Step::Failed(reason) => {
                if counts {
                    self.report.failed += 1;
                    *self.report.failures.entry(reason).or_default() += 1;
                    let b = self.bucket_of(if closed { now } else { conn.scheduled });
                    self.report.buckets[b].failed += 1;
                }
            }
        }
    }

    /// At the window's end, requests still waiting for a first byte have waited at
    /// least this long.
    fn note_waiting_at(&mut self, at: Instant) {
        for c in self.conns.iter().flatten() {
            if c.first_byte.is_none() && c.scheduled < at {
                self.report.max_first_byte = self
                    .report
                    .max_first_byte
                    .max(at.duration_since(c.scheduled));
            }
        }
    }

    fn release(&mut self, i: usize, mut conn: Conn) {
        if conn.parked_until.is_some() {
            self.parked -= 1;
        }
        if let Some(mut tls) = conn.tls.take() {
            let sock = tls.get_mut();
            let _ = self.poll.registry().deregister(&mut sock.tcp);
            self.buffers.push(std::mem::take(&mut sock.buf));
        } else if let Phase::Connecting(Some(sock)) = &mut conn.phase {
            let _ = self.poll.registry().deregister(&mut sock.tcp);
            self.buffers.push(std::mem::take(&mut sock.buf));
        }
        self.conns[i] = None;
        self.free.push(i);
        self.active -= 1;
    }

    fn expire(&mut self, now: Instant) {
        for i in 0..self.conns.len() {
            let expired = matches!(&self.conns[i], Some(c) if now.duration_since(c.scheduled) > self.spec.timeout);
            if expired {
                if let Some(conn) = self.conns[i].take() {
                    self.account(&conn, now, Step::Failed(FailureReason::Timeout));
                    self.release(i, conn);
                }
            }
        }
    }

    fn cancel_all(&mut self) {
        let now = Instant::now();
        for i in 0..self.conns.len() {
            if let Some(conn) = self.conns[i].take() {
                self.note_first_byte_wait(&conn, now);
                self.report.cancelled += 1;
                self.release(i, conn);
            }
        }
    }
}

/// What one blocking request found (readiness checks and the external server's file
/// length).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// Suite negotiated.
    pub suite: String,
    /// Protocol negotiated.
    pub protocol: String,
    /// Response status.
    pub status: u16,
    /// Body length.
    pub body_len: u64,
}

/// Makes one request synchronously: connect, handshake, GET, read the whole body.
/// Used to wait for readiness (a TLS handshake that succeeds) and to learn a file's
/// length; not for measuring.
pub fn fetch_once(client: &Client, target: &Target, timeout: Duration) -> Result<Fetched> {
    let tcp = std::net::TcpStream::connect_timeout(&target.addr, timeout)
        .with_context(|| format!("connecting to {}", target.addr))?;
    tcp.set_read_timeout(Some(timeout))?;
    tcp.set_write_timeout(Some(timeout))?;
    let ssl = client.ssl(&target.host, None)?;
    let mut tls = ssl
        .connect(tcp)
        .map_err(|e| anyhow::anyhow!("TLS handshake with {} failed: {e}", target.addr))?;
    let suite = tls
        .ssl()
        .current_cipher()
        .map(|c| c.name().to_string())
        .unwrap_or_default();
    let protocol = tls.ssl().version_str().to_string();
    tls.write_all(&http::request(&target.host, &target.path))?;
    // The head is kept until it parses; the body is only counted (it may be the
    // user's multi-gigabyte file).
    let mut head_bytes = Vec::new();
    let mut head: Option<(u16, Option<u64>)> = None;
    let mut body_len = 0u64;
    let mut buf = vec![0u8; SOCKET_BUFFER];
    loop {
        let n = match tls.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e)
                if e.kind() == io::ErrorKind::UnexpectedEof
                    || e.kind() == io::ErrorKind::ConnectionAborted =>
            {
                break
            }
            Err(e) => return Err(e).context("reading the response"),
        };
        if head.is_some() {
            body_len += n as u64;
        } else {
            head_bytes.extend_from_slice(&buf[..n]);
            if let Parsed::Done(h) = http::parse_head(&head_bytes) {
                body_len = (head_bytes.len() - h.len) as u64;
                head = Some((h.status, h.content_length));
            }
        }
        if let Some((_, Some(len))) = head {
            if body_len >= len {
                break;
            }
        }
    }
    match head {
        Some((status, _)) => Ok(Fetched {
            suite,
            protocol,
            status,
            body_len,
        }),
        None => bail!("{} did not answer with an HTTP response", target.addr),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::suite::Suite;

    fn window(ms: u64, bytes: u64, latencies_us: &[u64], cpu: [u64; 2]) -> Report {
        let now = Instant::now();
        let mut latency = histogram();
        for &l in latencies_us {
            latency.record(l).unwrap();
        }
        Report {
            window: Duration::from_millis(ms),
            interval: Duration::from_millis(250),
            buckets: vec![Bucket {
                bytes,
                ..Bucket::default()
            }],
            window_bytes: bytes,
            ok: latencies_us.len() as u64,
            failed: 0,
            failures: BTreeMap::new(),
            attempted: 0,
            requests_sent: latencies_us.len() as u64,
            ok_total: latencies_us.len() as u64,
            resumed_total: 0,
            body_bytes: bytes,
            cancelled: 0,
            first_byte: latency.clone(),
            handshake: histogram(),
            connect: histogram(),
            latency,
            max_first_byte: Duration::from_micros(*latencies_us.iter().max().unwrap()),
            negotiated: None,
            cpu_ns: cpu.iter().sum(),
            thread_cpu_ns: cpu.to_vec(),
            paced: 0,
            threads: 2,
            window_start: now,
            window_end: now + Duration::from_millis(ms),
        }
    }

    #[test]
    fn a_later_round_appended_counts_as_one_window_of_both() {
        let mut a = window(500, 1000, &[100, 200, 300], [100_000_000, 200_000_000]);
        let b = window(500, 3000, &[400, 5000], [300_000_000, 0]);
        a.append(b).unwrap();
        assert_eq!(a.window, Duration::from_secs(1));
        assert_eq!(a.window_bytes, 4000);
        assert_eq!(a.throughput_bytes_per_sec(), 4000.0);
        assert_eq!(a.ok, 5);
        assert_eq!(a.buckets.len(), 2);
        // The union of the requests: the median of 100, 200, 300, 400, 5000.
        assert_eq!(a.latency.len(), 5);
        assert_eq!(a.latency.value_at_quantile(0.5), 300);
        assert_eq!(a.max_first_byte, Duration::from_micros(5000));
        // CPU over the whole: thread 0 used 0.4 s, thread 1 0.2 s of 1 s.
        assert_eq!(a.generator_cpu_per_thread(), vec![0.4, 0.2]);
        assert!((a.generator_cpu() - 0.3).abs() < 1e-12);
    }

    #[test]
    fn rounds_of_different_shapes_are_refused() {
        let mut a = window(500, 1, &[1], [1, 1]);
        let mut b = window(500, 1, &[1], [1, 1]);
        b.interval = Duration::from_millis(100);
        assert!(a.append(b).is_err());
        let mut c = window(500, 1, &[1], [1, 1]);
        c.thread_cpu_ns.push(1);
        assert!(a.append(c).is_err());
    }

    #[test]
    fn a_ramp_starts_half_its_peak_rate_times_its_length() {
        let s = Schedule::Ramp {
            target_rate: 50.0,
            duration: Duration::from_secs(60),
        };
        // The IXP425 offload paper counted about 1510 attempted requests for 0 -> 50
        // req/s over 60 s.
        assert_eq!(s.count(), 1500);
        let offsets: Vec<f64> = (0..s.count()).map(|k| s.offset(k).as_secs_f64()).collect();
        assert!(offsets.windows(2).all(|w| w[1] > w[0]));
        assert!(*offsets.last().unwrap() < 60.0);
        // The rate rises linearly, so the first 30 s hold a quarter of the starts
        // (the area under the ramp up to half time).
        let first_half = offsets.iter().filter(|&&t| t < 30.0).count();
        assert!((first_half as i64 - 375).abs() <= 1, "{first_half}");
    }

    #[test]
    fn a_constant_schedule_is_evenly_spaced() {
        let s = Schedule::Constant {
            rate: 100.0,
            duration: Duration::from_secs(2),
        };
        assert_eq!(s.count(), 200);
        assert_eq!(s.offset(50), Duration::from_millis(500));
    }

    /// A tiny TLS server: sequential, one 100-byte response per connection, and
    /// unresponsive (not accepting) during `stall` after it starts.
    struct TinyServer {
        addr: SocketAddr,
        body: usize,
        served: std::sync::Arc<std::sync::atomic::AtomicU64>,
        stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
        handle: Option<std::thread::JoinHandle<()>>,
    }

    const BODY: usize = 100;

    impl TinyServer {
        fn start(stall: Option<(Duration, Duration)>) -> TinyServer {
            TinyServer::start_sized(stall, BODY)
        }

        fn start_sized(stall: Option<(Duration, Duration)>, body: usize) -> TinyServer {
            use openssl::ssl::SslAcceptor;
            use std::sync::atomic::Ordering;
            let key = crate::tls::cert::key(crate::tls::suite::KeyType::Rsa2048).unwrap();
            let cert = crate::tls::cert::self_signed(&key).unwrap();
            let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls()).unwrap();
            b.set_private_key(&key).unwrap();
            b.set_certificate(&cert).unwrap();
            b.set_cipher_list("AES128-GCM-SHA256").unwrap();
            let acceptor = b.build();
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.set_nonblocking(true).unwrap();
            let addr = listener.local_addr().unwrap();
            let served = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let (s2, st2) = (served.clone(), stop.clone());
            let handle = std::thread::spawn(move || {
                let started = Instant::now();
                while !st2.load(Ordering::SeqCst) {
                    if let Some((from, len)) = stall {
                        let now = started.elapsed();
                        if now >= from && now < from + len {
                            std::thread::sleep(from + len - now);
                        }
                    }
                    let Ok((tcp, _)) = listener.accept() else {
                        std::thread::sleep(Duration::from_micros(200));
                        continue;
                    };
                    tcp.set_nonblocking(false).unwrap();
                    let Ok(mut tls) = acceptor.accept(tcp) else {
                        continue;
                    };
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match tls.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    s2.fetch_add(1, Ordering::SeqCst);
                    let mut response = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {body}\r\nConnection: close\r\n\r\n"
                    )
                    .into_bytes();
                    response.resize(response.len() + body, 7u8);
                    let _ = tls.write_all(&response);
                    let _ = tls.shutdown();
                }
            });
            TinyServer {
                addr,
                body,
                served,
                stop,
                handle: Some(handle),
            }
        }

        fn target(&self) -> Target {
            Target {
                addr: self.addr,
                host: "127.0.0.1".into(),
                path: "/f/100".into(),
                expected_len: Some(self.body as u64),
            }
        }
    }

    impl Drop for TinyServer {
        fn drop(&mut self) {
            self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
            if let Some(h) = self.handle.take() {
                let _ = h.join();
            }
        }
    }

    fn spec(target: Target, arrivals: Arrivals) -> Spec {
        Spec {
            pace: pays_for_wakeups(target.addr),
            target,
            arrivals,
            warmup: Duration::from_millis(50),
            window: Duration::from_millis(400),
            drain: Duration::from_secs(2),
            timeout: Duration::from_secs(5),
            interval: Duration::from_millis(100),
            cpus: vec![*host::allowed_cpus().last().unwrap()],
            max_connections: 512,
        }
    }

    fn gcm() -> Suite {
        Suite::find("AES128-GCM-SHA256").unwrap()
    }

    #[test]
    fn an_open_loop_run_shows_a_server_stall_in_the_latencies() {
        // The server stops accepting for 600 ms, 500 ms in. Requests scheduled during
        // the stall wait for its end; counted from their scheduled start, dozens of
        // them show the wait (a generator that only sends when the previous request
        // came back would show it once).
        let server = TinyServer::start(Some((
            Duration::from_millis(500),
            Duration::from_millis(600),
        )));
        let client = Client::new(&gcm(), false).unwrap();
        let schedule = Schedule::Constant {
            rate: 100.0,
            duration: Duration::from_secs(2),
        };
        let report = run(&client, &spec(server.target(), Arrivals::Open(schedule))).unwrap();
        // The first 50 ms are the warm-up: its 5 requests run, uncounted.
        assert_eq!(report.attempted, 195);
        assert_eq!(report.ok, 195, "failures: {:?}", report.failures);
        assert_eq!(report.ok_total, 200);
        assert!(
            report.window >= Duration::from_millis(1950),
            "{:?}",
            report.window
        );
        let slow = report.latency.count_between(300_000, u64::MAX);
        assert!(slow >= 20, "only {slow} requests show the stall");
        assert!(
            report.latency.max() >= 450_000,
            "max {} µs",
            report.latency.max()
        );
        // Requests scheduled before the stall were fast.
        let early = &report.buckets[..4];
        assert!(
            early.iter().all(|b| b.max_latency_ns < 300_000_000),
            "{early:?}"
        );
    }

    #[test]
    fn an_open_loop_run_behind_its_schedule_reports_the_rate_served_not_asked() {
        // 100 requests/s for 1 s, and the server stops accepting from 0.7 s for 0.9 s:
        // every request is served, the last ones about 0.9 s late, so over the span
        // they took the rate was well under the 100/s asked.
        let server = TinyServer::start(Some((
            Duration::from_millis(700),
            Duration::from_millis(900),
        )));
        let client = Client::new(&gcm(), false).unwrap();
        let schedule = Schedule::Constant {
            rate: 100.0,
            duration: Duration::from_secs(1),
        };
        let mut spec = spec(server.target(), Arrivals::Open(schedule));
        spec.warmup = Duration::ZERO;
        let report = run(&client, &spec).unwrap();
        assert_eq!(report.ok, 100, "failures: {:?}", report.failures);
        assert!(
            report.window >= Duration::from_millis(1500),
            "{:?}",
            report.window
        );
        assert!(
            report.requests_per_sec() < 70.0,
            "{} req/s",
            report.requests_per_sec()
        );
        // The bytes over the same span: every body once.
        assert_eq!(report.window_bytes, 100 * BODY as u64);
    }

    #[test]
    fn a_closed_loop_run_counts_what_the_server_served() {
        let server = TinyServer::start(None);
        // 100-byte bodies are never parked.
        let client = Client::new(&gcm(), false).unwrap();
        let report = run(
            &client,
            &spec(server.target(), Arrivals::Closed { concurrency: 2 }),
        )
        .unwrap();
        assert_eq!(
            report.negotiated,
            Some(("AES128-GCM-SHA256".to_string(), "TLSv1.2".to_string()))
        );
        assert!(report.ok > 0 && report.failed == 0, "{:?}", report.failures);
        assert_eq!(report.cancelled, 0);
        let served = server.served.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(report.requests_sent, served);
        assert_eq!(report.ok_total, served);
        assert_eq!(report.body_bytes, served * BODY as u64);
        assert!(report.window_bytes > 0 && report.window_bytes <= report.body_bytes);
        assert_eq!(report.paced, 0);
    }

    #[test]
    fn a_suite_the_server_refuses_is_a_handshake_failure() {
        let server = TinyServer::start(None);
        let client = Client::new(&Suite::find("AES128-SHA").unwrap(), false).unwrap();
        let report = run(
            &client,
            &spec(server.target(), Arrivals::Closed { concurrency: 1 }),
        )
        .unwrap();
        assert_eq!(report.ok, 0);
        assert!(
            report
                .failures
                .get(&FailureReason::Handshake)
                .copied()
                .unwrap_or(0)
                > 0,
            "{:?}",
            report.failures
        );
        assert!(fetch_once(&client, &server.target(), Duration::from_secs(2)).is_err());
    }

    #[test]
    fn only_a_body_with_more_than_a_nap_left_is_parked() {
        assert!(!parks(0));
        assert!(!parks(100 * 1024));
        assert!(!parks(NAP_BYTES));
        assert!(parks(NAP_BYTES + 1));
        assert!(parks(16 << 20));
    }

    #[test]
    fn a_nap_lasts_as_long_as_its_bytes_take_at_the_body_rate() {
        // 64 MiB in 0.25 s: 256 MiB/s, so 256 KiB take about 1 ms.
        let nap = nap_for(64 << 20, Duration::from_millis(250));
        assert!((nap.as_secs_f64() - 1.0 / 1024.0).abs() < 1e-6, "{nap:?}");
        // Before there is a rate: the shortest nap.
        assert_eq!(nap_for(0, Duration::from_millis(5)), NAP_MIN);
        assert_eq!(nap_for(1 << 20, Duration::ZERO), NAP_MIN);
        // A very fast body: never shorter than NAP_MIN.
        assert_eq!(nap_for(1 << 30, Duration::from_millis(1)), NAP_MIN);
        // A trickle: never longer than NAP_MAX, so a slow server is still read often.
        assert_eq!(nap_for(1024, Duration::from_secs(1)), NAP_MAX);
    }

    #[test]
    fn a_large_body_is_read_whole_with_its_socket_parked_between_reads() {
        // 3 MiB through a real TLS server: sockets leave the epoll set while most of a
        // body is to come and rejoin it for the last part, and every byte arrives (a
        // socket lost out of the set would time out).
        let server = TinyServer::start_sized(None, 3 << 20);
        let client = Client::new(&gcm(), false).unwrap();
        let mut s = spec(server.target(), Arrivals::Closed { concurrency: 2 });
        s.timeout = Duration::from_secs(3);
        let report = run(&client, &s).unwrap();
        assert!(report.ok_total > 0, "{:?}", report.failures);
        assert_eq!(report.failed, 0, "{:?}", report.failures);
        assert_eq!(report.body_bytes, report.ok_total * (3 << 20));
        // Sockets were parked while bodies streamed in. (Not necessarily on every
        // response: one whose bytes always arrived ahead of the reader never drained
        // its socket early, so never needed it.)
        assert!(report.paced > 0, "{} of {}", report.paced, report.ok_total);
        assert_eq!(report.thread_cpu_ns.len(), 1);
        assert_eq!(report.generator_cpu_per_thread().len(), 1);
    }

    #[test]
    fn summarises_histograms_in_nanoseconds() {
        let mut h = histogram();
        for us in 1..=100 {
            h.saturating_record(us * 1000);
        }
        let l = latency(&h);
        assert_eq!(l.count, 100);
        assert!((l.p50_ns as i64 - 50_000_000).abs() < 100_000, "{l:?}");
        assert!(l.max_ns >= 100_000_000 && l.max_ns < 100_200_000, "{l:?}");
        assert_eq!(latency(&histogram()), Latency::default());
    }
}
