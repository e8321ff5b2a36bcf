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

mod connection;
mod report;
pub mod sampled;
mod schedule;
pub mod secrets;
mod worker;

use connection::*;
pub use report::*;
pub use schedule::*;
use worker::*;

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
    /// Connections keep what opens the server's records ([`Client::sampling`]).
    keeps_secrets: bool,
    /// Plain HTTP over TCP, no TLS ([`Client::plain`]).
    plain: bool,
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
        Client::build(suite, resumption, groups, false)
    }

    /// A client for `verify`: one that keeps its connections' secrets for the
    /// sampled path, else [`Client::new`]'s.
    pub fn verifying(suite: &Suite, resumption: bool, verify: sampled::Verify) -> Result<Client> {
        match verify {
            sampled::Verify::Sampled(_) => Client::sampling(suite, resumption, None),
            sampled::Verify::All => Client::new(suite, resumption),
        }
    }

    /// A client whose connections keep what opens the server's records
    /// ([`secrets::server_keys`]), for the sampled receive path.
    pub fn sampling(suite: &Suite, resumption: bool, groups: Option<&str>) -> Result<Client> {
        Client::build(suite, resumption, groups, true)
    }

    fn build(
        suite: &Suite,
        resumption: bool,
        groups: Option<&str>,
        keep_secrets: bool,
    ) -> Result<Client> {
        let mut b = SslContext::builder(SslMethod::tls_client())?;
        if keep_secrets {
            secrets::capture(&mut b);
        }
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
            keeps_secrets: keep_secrets,
            plain: false,
        })
    }

    /// A client of plain HTTP over TCP: the same requests and checks, no TLS (the
    /// sweep's plain-HTTP ceiling, `--plain-http`).
    pub fn plain() -> Result<Client> {
        Ok(Client {
            // Never used: no connection of this client makes an `Ssl`.
            ctx: SslContext::builder(SslMethod::tls_client())?.build(),
            suite: String::new(),
            protocol: "",
            resumption: false,
            keeps_secrets: false,
            plain: true,
        })
    }

    /// Whether this client speaks plain HTTP.
    pub fn is_plain(&self) -> bool {
        self.plain
    }

    fn ssl(
        &self,
        host: &str,
        session: Option<&SslSession>,
    ) -> Result<Ssl, openssl::error::ErrorStack> {
        let mut ssl = Ssl::new(&self.ctx)?;
        ssl.set_connect_state();
        if self.keeps_secrets {
            secrets::slot(&mut ssl);
        }
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
    /// The key the file's content was made from (`nginx::Workspace`: the AES-128-CTR
    /// keystream), so the sampled path compares what it opens; None for a server
    /// cipherbench did not start.
    pub content: Option<[u8; 16]>,
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
    /// How responses are checked ([`sampled::Verify`]).
    pub verify: sampled::Verify,
}

/// Whether a server at `addr` pays for this generator's wake-ups (its `write`
/// runs the receiver's TCP input): one on loopback does; over a network the
/// server does not, and a window held still for a nap could cap a long path's
/// throughput.
pub fn pays_for_wakeups(addr: SocketAddr) -> bool {
    addr.ip().is_loopback()
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
        verified: m.verified,
        threads,
        window_start,
        window_end,
    })
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
    if client.plain {
        let mut tcp = tcp;
        return fetch_over(&mut tcp, target, String::new(), "HTTP/1.1".into());
    }
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
    fetch_over(&mut tls, target, suite, protocol)
}

/// [`fetch_once`]'s request and response over a connected stream (TLS or plain).
fn fetch_over<S: Read + Write>(
    tls: &mut S,
    target: &Target,
    suite: String,
    protocol: String,
) -> Result<Fetched> {
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
            verified: sampled::Verified::default(),
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
                content: None,
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
            verify: sampled::Verify::All,
        }
    }

    fn gcm() -> Suite {
        Suite::find("AES128-GCM-SHA256").unwrap()
    }

    /// A plain-HTTP server on a thread: every response says `Content-Length: said`
    /// and sends `sent` body bytes, then closes. Stops with its listener's owner.
    fn plain_server(said: usize, sent: usize) -> (SocketAddr, std::thread::JoinHandle<()>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let handle = std::thread::spawn(move || {
            listener.set_nonblocking(true).unwrap();
            let until = Instant::now() + Duration::from_millis(1500);
            while Instant::now() < until {
                let Ok((mut tcp, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                };
                tcp.set_nonblocking(false).unwrap();
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tcp.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let mut response =
                    format!("HTTP/1.1 200 OK\r\nContent-Length: {said}\r\n\r\n").into_bytes();
                response.resize(response.len() + sent, 7u8);
                let _ = tcp.write_all(&response);
            }
        });
        (addr, handle)
    }

    #[test]
    fn the_plain_client_counts_a_body_to_the_byte_without_copying_it() {
        // 1 MiB said: the body goes through the kernel's discard, chunk by chunk.
        const SAID: usize = 1 << 20;
        for (sent, failure) in [
            (SAID, None),
            // Past Content-Length: the discard reads beyond what is left and sees it.
            (SAID + 4096, Some(FailureReason::Length)),
            // Cut short: the close comes before the last byte.
            (SAID - 4096, Some(FailureReason::Length)),
        ] {
            let (addr, server) = plain_server(SAID, sent);
            let target = Target {
                addr,
                host: "127.0.0.1".into(),
                path: "/f/1".into(),
                expected_len: Some(SAID as u64),
                content: None,
            };
            let mut spec = spec(target, Arrivals::Closed { concurrency: 1 });
            spec.pace = false;
            let report = run(&Client::plain().unwrap(), &spec).unwrap();
            match failure {
                None => {
                    assert!(report.ok > 0 && report.failed == 0, "{:?}", report.failures);
                    assert_eq!(report.body_bytes, report.ok_total * SAID as u64);
                    // No handshake in plain HTTP, and none recorded.
                    assert_eq!(report.handshake.len(), 0);
                }
                Some(reason) => {
                    assert_eq!(
                        report.ok, 0,
                        "{sent} bytes for {SAID}: {:?}",
                        report.failures
                    );
                    assert!(report.failures.get(&reason).copied().unwrap_or(0) > 0);
                }
            }
            server.join().unwrap();
        }
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
        let (suite, protocol, group) = report.negotiated.unwrap();
        assert_eq!(
            (suite.as_str(), protocol.as_str()),
            ("AES128-GCM-SHA256", "TLSv1.2")
        );
        // TLS 1.2's AES128-GCM-SHA256 carries its key under RSA: no group to read.
        assert_eq!(group, None);
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
