//! Layer 3 results: TLS web serving with a real nginx (the sweep for the highest
//! throughput within a latency limit, after Intel's nginx study, seeds 000/003; the
//! ramp's attempted, successful and unsuccessful requests under a rising load, after
//! the IXP425 offload paper, seed 002).
//!
//! Plain data. Durations are integer nanoseconds (`_ns`), rates carry their unit in
//! the key (`_bytes_per_sec`, `requests_per_sec`), CPU use is a fraction of one core
//! or of a set of cores, as each field says. How each number is measured is in
//! METHODOLOGY.md, "Layer 3".

use crate::interval::{bootstrap_figures, Centre, Pairing, RatioInterval, Rounds, DEFAULT_SEED};
use crate::speed::VariantRecord;
use crate::stats::{Ratio, Summary};
use serde::{Deserialize, Serialize};

/// The catalogue cipher a suite's records are encrypted with (OpenSSL's or IANA's
/// suite name), what a provider variant is judged on; None for a suite whose
/// record cipher the catalogue lacks. Pure.
pub fn suite_cipher(suite: &str) -> Option<&'static str> {
    if suite.contains("CHACHA20") {
        Some("chacha20-poly1305")
    } else if suite.contains("AES128-GCM") || suite.contains("AES_128_GCM") {
        Some("aes-128-gcm")
    } else if suite.contains("AES256-GCM") || suite.contains("AES_256_GCM") {
        Some("aes-256-gcm")
    } else if suite == "AES128-SHA" {
        Some("aes-128-cbc-hmac-sha1")
    } else {
        None
    }
}
use std::collections::BTreeMap;

/// Everything layer 3 measured in one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TlsResults {
    /// Every server cipherbench started (or the external one it was pointed at).
    #[serde(default)]
    pub servers: Vec<ServerRecord>,
    /// `tls sweep`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepResults>,
    /// `tls ramp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp: Option<RampResults>,
    /// The agents that generated the load (`--agents`); empty when this machine did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<crate::agents::AgentRecord>,
    /// `tls handshake`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handshake: Option<HandshakeResults>,
    /// The key-exchange groups each side's library uses at its defaults: nginx's
    /// under each library of the run, and the load generator's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub default_groups: Vec<SideGroups>,
}

/// One side's library at its defaults ([`DefaultGroups`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SideGroups {
    /// `nginx` or `load generator`.
    pub side: String,
    /// The library, as it names itself (`OpenSSL 3.6.3 ...`).
    pub library: String,
    /// What it does at its defaults.
    pub groups: DefaultGroups,
}

/// A library's key-exchange groups as its defaults have them, read from one TLS 1.3
/// handshake between a client and a server both left at the library's defaults
/// (nginx's `ssl_ecdh_curve auto` leaves them): what the client offered and sent
/// key shares for (its ClientHello), and what the two agreed on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DefaultGroups {
    /// The groups the client offered (`supported_groups`), in its order of
    /// preference, as the library names them (`X25519MLKEM768`, `x25519`,
    /// `secp256r1`).
    pub offered: Vec<String>,
    /// The groups it sent a key share for, in order: the ones a server that supports
    /// them picks without a second round trip.
    pub key_shares: Vec<String>,
    /// The group the handshake used.
    pub negotiated: Option<String>,
}

impl TlsResults {
    /// Whether anything was measured or started: a record holding only the
    /// libraries' default groups (read before the first server) is not a run's data.
    pub fn has_data(&self) -> bool {
        !self.servers.is_empty()
            || self.sweep.is_some()
            || self.ramp.is_some()
            || !self.agents.is_empty()
            || self.handshake.is_some()
    }
}

impl SideGroups {
    /// One line: the side, its library, what a default handshake negotiates and
    /// what the client offers.
    pub fn line(&self) -> String {
        let g = &self.groups;
        format!(
            "{} on {}: a default handshake negotiates {}; its client offers {} (key shares: {})",
            self.side,
            self.library,
            g.negotiated
                .as_deref()
                .unwrap_or("a group it could not name"),
            g.offered.join(", "),
            g.key_shares.join(", ")
        )
    }
}

/// One server under test: which nginx, which suite, which variant, and whether the
/// variant took effect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerRecord {
    /// What served: `nginx` (started by cipherbench) or `external`.
    pub kind: String,
    /// `nginx -v`, such as `nginx version: nginx/1.22.1`.
    pub version: Option<String>,
    /// The OpenSSL nginx runs with (from `nginx -V`), such as `OpenSSL 3.0.19 27 Jan 2026`.
    pub library: Option<String>,
    /// OpenSSL suite name served.
    pub suite: String,
    /// Server key: `rsa2048` or `ecdsa-p256`.
    pub key: String,
    /// Where the private key was: `file` or `pkcs11`.
    #[serde(default = "file_store")]
    pub key_store: String,
    /// With the key in a PKCS#11 module: whether that nginx did use the module,
    /// checked by effect (None: the key was in a file, or an older record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_store_check: Option<KeyStoreCheck>,
    /// Worker processes (= cores under test).
    pub cores: usize,
    /// The CPUs the workers were pinned to.
    pub server_cpus: Vec<usize>,
    /// The CPUs the load generator's threads were pinned to.
    pub generator_cpus: Vec<usize>,
    /// The acceleration variant and the capability vector the library reported under
    /// the same environment (`openssl info -cpusettings`).
    pub variant: VariantRecord,
    /// The generated `nginx.conf`, for reproduction.
    #[serde(default)]
    pub config: String,
    /// Where nginx and the load generator ran (whole cores per side) and what that
    /// placement cannot promise; None for an external server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<crate::topology::Placement>,
}

/// How a server with its key in a PKCS#11 module was checked to have served it:
/// the module and the engine mapped into every process that serves (read from
/// `/proc/<pid>/maps` while it runs), and a config that names no key file, so the
/// handshakes it completed were signed (or decrypted) by the module's key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct KeyStoreCheck {
    /// The PKCS#11 module (`--pkcs11-module`, or SoftHSM2's).
    pub module: String,
    /// What loaded the module: OpenSSL's pkcs11 engine (libp11), or pkcs11-provider's
    /// module (see `through`).
    pub engine: String,
    /// `provider` (pkcs11-provider) or `engine` (libp11's engine); `engine` in records
    /// written before the provider was used.
    #[serde(default = "engine_name")]
    pub through: String,
    /// The processes checked (nginx's one serving process).
    pub pids: Vec<u32>,
    /// Every one of them had the module and the engine or provider mapped, and the
    /// config named the key only by its PKCS#11 URI.
    pub served: bool,
    /// One sentence: what was seen.
    pub explanation: String,
}

fn engine_name() -> String {
    "engine".into()
}

/// A latency distribution, from an HDR histogram with microsecond resolution and
/// three significant digits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Latency {
    /// Requests recorded.
    pub count: u64,
    /// Mean.
    pub mean_ns: u64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// Maximum.
    pub max_ns: u64,
}

/// CPU use of nginx over a measurement window, from `/proc/<pid>/stat` of each
/// worker sampled through the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerCpu {
    /// Each worker's CPU time over the window divided by the window: 1.0 is one core
    /// fully busy.
    pub per_worker: Vec<f64>,
    /// All workers' CPU time divided by (window x workers): 1.0 is every core under
    /// test fully busy.
    pub total: f64,
    /// The highest `total` over the sampling intervals within the window (Figure 7 of
    /// Intel's nginx study plots the maximum).
    pub peak: f64,
    /// Sampling interval.
    pub interval_ns: u64,
    /// Time the workers were runnable but waiting for a CPU (`/proc/PID/schedstat`)
    /// divided by (window x workers): above a few percent, something else was using
    /// the cores under test and the throughput is below what this machine can do.
    #[serde(default)]
    pub runqueue_wait: f64,
}

impl ServerCpu {
    /// The use over two windows of one point (its rounds), each weighted by its
    /// window's length: fractions average by time, the peak is the higher peak.
    /// Worker lists of different lengths (nginx restarted with other workers) keep
    /// this one's.
    pub fn absorb(&mut self, later: &ServerCpu, this_ns: u64, later_ns: u64) {
        let total = (this_ns + later_ns).max(1) as f64;
        let (wa, wb) = (this_ns as f64 / total, later_ns as f64 / total);
        if self.per_worker.len() == later.per_worker.len() {
            for (a, b) in self.per_worker.iter_mut().zip(&later.per_worker) {
                *a = *a * wa + b * wb;
            }
        }
        self.total = self.total * wa + later.total * wb;
        self.runqueue_wait = self.runqueue_wait * wa + later.runqueue_wait * wb;
        self.peak = self.peak.max(later.peak);
    }
}

/// Why a request did not succeed.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum FailureReason {
    /// The TCP connection failed (refused, reset, unreachable).
    Connect,
    /// The TLS handshake failed.
    Handshake,
    /// The negotiated suite or protocol is not the one asked for.
    WrongSuite,
    /// The response was not `200`, or its head could not be parsed.
    Http,
    /// The body was shorter or longer than announced or expected.
    Length,
    /// The connection broke after the handshake.
    Io,
    /// The request did not finish within the timeout.
    Timeout,
    /// The generator refused to open more connections (descriptor limit).
    Overload,
    /// A record the generator opened itself did not authenticate, or its bytes were
    /// not the file's (the sampled receive path).
    Integrity,
}

impl FailureReason {
    /// Every reason, in report order.
    pub const ALL: [FailureReason; 9] = [
        FailureReason::Connect,
        FailureReason::Handshake,
        FailureReason::WrongSuite,
        FailureReason::Http,
        FailureReason::Length,
        FailureReason::Io,
        FailureReason::Timeout,
        FailureReason::Overload,
        FailureReason::Integrity,
    ];

    /// The JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::Connect => "connect",
            FailureReason::Handshake => "handshake",
            FailureReason::WrongSuite => "wrong_suite",
            FailureReason::Http => "http",
            FailureReason::Length => "length",
            FailureReason::Io => "io",
            FailureReason::Timeout => "timeout",
            FailureReason::Overload => "overload",
            FailureReason::Integrity => "integrity",
        }
    }
}

/// `tls sweep` settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SweepConfig {
    /// Suites (OpenSSL names).
    pub suites: Vec<String>,
    /// File sizes.
    pub sizes_bytes: Vec<u64>,
    /// Core counts under test (nginx workers).
    pub cores: Vec<usize>,
    /// Variant names.
    pub variants: Vec<String>,
    /// The measured window at the chosen concurrency.
    pub window_ns: u64,
    /// Each probe's window during the search.
    pub probe_ns: u64,
    /// Warm-up before each window (not counted).
    pub warmup_ns: u64,
    /// The latency limit on time to first byte.
    pub latency_limit_ns: u64,
    /// Highest concurrency the search tries.
    pub max_concurrency: usize,
    /// Per-request timeout.
    pub timeout_ns: u64,
    /// Whether TLS sessions were resumed (default: every request a full handshake).
    pub resumption: bool,
    /// Server key type.
    pub key: String,
    /// Where nginx's key was, the first the one whose points are `points` (file
    /// whenever it is measured), the rest in `key_store_points`.
    #[serde(default = "file_stores")]
    pub key_stores: Vec<String>,
    /// Rounds each point's final window is cut into, the variants of a point taking
    /// turns (A B, B A, A B): 1 in records written before rounds were kept.
    #[serde(default = "one_round")]
    pub rounds: usize,
    /// With `--rate`: the constant open-loop request rate every point was measured at
    /// instead of searching a concurrency (None: the search).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_loop_rate: Option<f64>,
    /// `--plain-http`: each size and core count also measured with nginx serving the
    /// same file over plain HTTP, `sendfile` on and off ([`SweepResults::plain_points`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub plain_http: bool,
}

/// One round of a point's final window. The variant x key-store slots of a point
/// are measured in turns within a group (each slot's nginx up for the whole group),
/// so round `r` of one slot sits next to round `r` of the others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WindowRound {
    /// Round number, from 0.
    pub round: usize,
    /// Position in the group's measuring order, from 0.
    pub sequence: usize,
    /// The round's window.
    pub window_ns: u64,
    /// Body bytes read in the round's window / its window.
    pub throughput_bytes_per_sec: f64,
    /// Requests completed in the round's window.
    pub requests: u64,
    /// The round's highest time to first byte.
    pub max_first_byte_ns: u64,
    /// nginx's CPU use over the round's window (fraction of its cores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu: Option<f64>,
}

/// One probe of the concurrency search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Probe {
    /// Concurrent clients (a `--rate` point's window: the requests in flight, as the
    /// point's `concurrency`).
    pub concurrency: usize,
    /// Window length.
    pub window_ns: u64,
    /// Response body bytes read in the window / window.
    pub throughput_bytes_per_sec: f64,
    /// Requests completed in the window / window.
    pub requests_per_sec: f64,
    /// Highest time to first byte (or age of a request still waiting at the end).
    pub max_first_byte_ns: u64,
    /// Failed requests.
    pub errors: u64,
    /// Within the latency limit and without errors.
    pub within_limit: bool,
    /// The generator's CPU use (fraction of its cores).
    pub generator_cpu: f64,
    /// Each generator thread's CPU use (fraction of its core), in CPU order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generator_cpu_per_thread: Vec<f64>,
    /// nginx's CPU use over the probe (fraction of its cores), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu: Option<f64>,
}

/// What held a point's throughput where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// nginx's workers were busy on their cores: the figure is the server's.
    Server,
    /// A generator thread was near saturation: the figure is the generator's.
    Generator,
    /// More clients broke the time-to-first-byte limit (or failed).
    Latency,
    /// Neither side was busy and more clients gained nothing: something else (the
    /// loopback, memory, another program) held it.
    Undetermined,
    /// The concurrency was given (`--concurrency`), not searched.
    Fixed,
}

/// Why the search chose a point's concurrency, and what limited it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SearchOutcome {
    /// The concurrency the probes started at (the previous core count's choice, by
    /// the monotonicity rule, or 1).
    pub started_at: usize,
    /// What stopped the doubling.
    pub limit: Limit,
    /// One sentence for the reader.
    pub explanation: String,
}

/// A core count the sweep could not measure on this machine, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SkippedCores {
    /// nginx cores asked for.
    pub cores: usize,
    /// Why not.
    pub reason: String,
}

/// The result for one suite x size x core count x variant: the highest throughput
/// found within the latency limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SweepPoint {
    /// Suite asked for (OpenSSL name).
    pub suite: String,
    /// Protocol asked for (`TLSv1.2`, `TLSv1.3`).
    pub protocol: String,
    /// Suite the client negotiated, read back from its session.
    pub negotiated_suite: Option<String>,
    /// Protocol the client negotiated.
    pub negotiated_protocol: Option<String>,
    /// Key-exchange group the client negotiated, as the library names it
    /// (`x25519`, `secp256r1`, `X25519MLKEM768`); absent in records made before it
    /// was read back, and where the library could not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub negotiated_group: Option<String>,
    /// File size.
    pub size_bytes: u64,
    /// Cores under test (nginx workers).
    pub cores: usize,
    /// Variant name.
    pub variant: String,
    /// Where nginx's private key was: `file` (PEM) or `pkcs11` (a PKCS#11 module
    /// through the engine, nginx one process).
    #[serde(default = "file_store")]
    pub key_store: String,
    /// The concurrency that reached the reported throughput.
    pub concurrency: usize,
    /// The measured window.
    pub window_ns: u64,
    /// Interval of the per-interval throughput samples.
    pub interval_ns: u64,
    /// Response body bytes read in the window (completed and partial responses) /
    /// window.
    pub throughput_bytes_per_sec: f64,
    /// The same, per interval of the window: its spread is the point's spread.
    pub interval_throughput_bytes_per_sec: Summary,
    /// Each interval's throughput, in order: the rounds a ratio's interval resamples
    /// ([`SweepResults::ratio_interval`]). Empty in records written before they were
    /// kept: such a point's ratios have no interval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interval_samples_bytes_per_sec: Vec<f64>,
    /// Requests completed in the window / window.
    pub requests_per_sec: f64,
    /// Requests completed successfully in the window.
    pub requests: u64,
    /// Requests over the whole measurement (warm-up, window and drain) whose request
    /// was sent: what the server should have counted.
    pub requests_sent: u64,
    /// Requests the server counted over the same span (nginx `stub_status`), if known.
    pub server_requests: Option<u64>,
    /// Requests still in flight when the drain after the window ended, abandoned
    /// (then the server's count may differ from `requests_sent`).
    #[serde(default)]
    pub cancelled: u64,
    /// Successful requests over the whole measurement (warm-up, window and drain).
    #[serde(default)]
    pub requests_ok_total: u64,
    /// Of those, the requests whose TLS handshake resumed a session
    /// (`SSL_session_reused` on the client): the proof that `--resumption` resumed.
    #[serde(default)]
    pub requests_resumed_total: u64,
    /// Body bytes of all successful responses over the whole measurement, each
    /// checked against the file's size.
    pub body_bytes: u64,
    /// Failed requests in the window.
    pub errors: u64,
    /// Failed requests by reason.
    pub errors_by_reason: BTreeMap<FailureReason, u64>,
    /// Whole request: from connect to the last body byte.
    pub latency: Latency,
    /// Time to first byte of the response (the latency limit applies to its maximum).
    pub first_byte: Latency,
    /// TLS handshake.
    pub handshake: Latency,
    /// TCP connect.
    pub connect: Latency,
    /// The highest time to first byte, counting requests still waiting at the end.
    pub max_first_byte_ns: u64,
    /// Max time to first byte within the limit, and no errors.
    pub within_limit: bool,
    /// nginx's CPU use over the window (None for an external server).
    pub server_cpu: Option<ServerCpu>,
    /// The generator's CPU time / (window x generator threads).
    pub generator_cpu: f64,
    /// Each generator thread's CPU time / window, in CPU order: one saturated thread
    /// shows even when the mean does not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generator_cpu_per_thread: Vec<f64>,
    /// Generator threads (each on its own core).
    pub generator_threads: usize,
    /// The generator was near saturation: the point measures the generator, not the
    /// server, and is invalid.
    pub generator_saturated: bool,
    /// The point is usable: within the limit and the generator not saturated.
    pub valid: bool,
    /// Why not, if not.
    pub invalid_reason: Option<String>,
    /// The search that chose the concurrency, in order.
    pub probes: Vec<Probe>,
    /// Why the search chose this concurrency and what limited the point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchOutcome>,
    /// How quiet the machine was on the CPUs the server and the generator used during the final
    /// window (its warm-up and drain included)
    /// (None: not recorded, as by an older cipherbench).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<Box<crate::noise::Noise>>,
    /// With `--agents`: each agent's share of the final window (the point's figures
    /// are their exact merge).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<crate::agents::AgentShare>,
    /// The rounds of the final window, in the order measured (empty in records
    /// written before rounds were kept, and for a point measured alone in one window).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<WindowRound>,
    /// The group the point's rounds were interleaved in: the wall-clock start of its
    /// first round (ns since the Unix epoch), shared by every slot measured in turn
    /// with it. Two points pair round by round only when they share it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interleave_group: Option<u64>,
    /// With `--rate`: the open-loop request rate the point was measured at. Its
    /// `concurrency` is then the mean number of requests in flight (the rate done
    /// times the mean latency, Little's law, rounded up), not a client count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_loop_rate: Option<f64>,
    /// How the load generator (this machine's, or the agents' added up) read the
    /// final window's responses: by sample or whole (absent: plain HTTP, or written
    /// before the sampled path; before agent protocol 7, absent when the load came
    /// from agents, which then read every response whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<Verification>,
}

/// How a point's responses were read and checked by the load generator (`tls sweep
/// --verify`). The sampled path opens (authenticates and decrypts) each response's
/// head record, every short record, its last record, a sample of the body's full
/// records and every record of a sample of responses, compares what it opens with
/// the file's content, and lets the kernel discard the rest unread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Verification {
    /// `--verify sampled`: responses of at least 1 MiB by sample where the suite
    /// allows (AEAD); false: every response whole through OpenSSL.
    pub sampled: bool,
    /// The share of full body records opened.
    pub rate: f64,
    /// The share of responses opened whole.
    pub whole: f64,
    /// Responses read by the sampled path.
    pub sampled_responses: u64,
    /// Responses read whole through OpenSSL (every byte decrypted there).
    pub openssl_responses: u64,
    /// Records the sampled path opened, and their bytes on the wire.
    pub records_opened: u64,
    /// Their bytes on the wire (headers included).
    pub bytes_opened: u64,
    /// Records discarded unread.
    pub records_discarded: u64,
    /// Their bytes on the wire.
    pub bytes_discarded: u64,
    /// Body bytes compared with the file's known content.
    pub bytes_compared: u64,
}

impl Verification {
    /// The share of the sampled responses' bytes that were opened.
    pub fn opened_share(&self) -> Option<f64> {
        let all = self.bytes_opened + self.bytes_discarded;
        (all > 0).then(|| self.bytes_opened as f64 / all as f64)
    }
}

impl SweepPoint {
    /// What the noise judge says of the final window: `noisy_machine`, `steal`,
    /// `frequency_scaling`; with agents, of each agent's host as well (the message
    /// names the agent).
    pub fn noise_findings(&self) -> Vec<crate::noise::Finding> {
        crate::agents::noise_findings(self.noise.as_deref(), &self.agents)
    }

    /// Throughput in bits per second.
    pub fn bits_per_sec(&self) -> f64 {
        self.throughput_bytes_per_sec * 8.0
    }

    /// Why the load generator, not nginx, set this point's figure, if it did: a
    /// valid point whose search ended at [`Limit::Generator`] (more clients
    /// saturated a generator thread, and the final window did not find nginx's
    /// workers busy, or the sweep would have called it [`Limit::Server`]). nginx had
    /// cycles to spare, so the figure is a lower bound on what it serves. None for
    /// an invalid point (its `invalid_reason` says why) and for every other limit.
    pub fn instrument_limit(&self) -> Option<String> {
        let search = self.search.as_ref()?;
        if !self.valid || search.limit != Limit::Generator {
            return None;
        }
        Some(format!(
            "the load generator, not nginx, set the {} {} figure: more clients saturated it while nginx's workers {}",
            self.variant,
            crate::units::ByteSize(self.size_bytes),
            self.server_cpu
                .as_ref()
                .map_or("had no CPU figure".to_string(), |c| format!(
                    "were {:.0} % busy",
                    c.total * 100.0
                ))
        ))
    }
}

/// Failed requests as a person reads them: `39800 failed request(s): handshake
/// 30000, timeout 9000, overload 800`, the three most frequent reasons first (then
/// `and N more`); None when none failed.
pub fn failures_note(count: u64, by_reason: &BTreeMap<FailureReason, u64>) -> Option<String> {
    if count == 0 {
        return None;
    }
    let mut reasons: Vec<(&FailureReason, &u64)> = by_reason.iter().filter(|r| *r.1 > 0).collect();
    // Most frequent first; a tie keeps the report order.
    reasons.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let mut listed: Vec<String> = reasons
        .iter()
        .take(3)
        .map(|(k, v)| format!("{} {v}", k.as_str()))
        .collect();
    if reasons.len() > 3 {
        listed.push(format!(
            "and {} more",
            reasons[3..].iter().map(|r| r.1).sum::<u64>()
        ));
    }
    Some(if listed.is_empty() {
        format!("{count} failed request(s)")
    } else {
        format!("{count} failed request(s): {}", listed.join(", "))
    })
}

/// `tls ramp` settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RampConfig {
    /// Suites (OpenSSL names).
    pub suites: Vec<String>,
    /// Response sizes.
    pub sizes_bytes: Vec<u64>,
    /// Variant names.
    pub variants: Vec<String>,
    /// Cores under test.
    pub cores: usize,
    /// The rate reached at the end of the ramp, requests per second.
    pub target_rate: f64,
    /// Ramp length.
    pub duration_ns: u64,
    /// A request not finished within this is unsuccessful (`timeout`).
    pub timeout_ns: u64,
    /// Server key type.
    pub key: String,
    /// Where nginx's key was, the first the one whose runs are `runs` (file whenever
    /// it is measured), the rest in `key_store_runs`.
    #[serde(default = "file_stores")]
    pub key_stores: Vec<String>,
}

/// One second of a ramp, by scheduled start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RampSecond {
    /// Second since the ramp started.
    pub second: u32,
    /// Requests scheduled to start in this second.
    pub attempted: u64,
    /// Of those, successful.
    pub successful: u64,
    /// Of those, unsuccessful.
    pub unsuccessful: u64,
    /// Highest latency among the successful ones, from the scheduled start.
    pub max_latency_ns: u64,
}

/// One ramp: suite x size x variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RampRun {
    /// Suite (OpenSSL name).
    pub suite: String,
    /// Suite negotiated, read back.
    pub negotiated_suite: Option<String>,
    /// Response size.
    pub size_bytes: u64,
    /// Variant name.
    pub variant: String,
    /// Where nginx's private key was: `file` or `pkcs11`.
    #[serde(default = "file_store")]
    pub key_store: String,
    /// Cores under test.
    pub cores: usize,
    /// Requests scheduled (the whole ramp).
    pub attempted: u64,
    /// Requests that returned the whole file within the timeout.
    pub successful: u64,
    /// The rest.
    pub unsuccessful: u64,
    /// Unsuccessful by reason.
    pub unsuccessful_by_reason: BTreeMap<FailureReason, u64>,
    /// Requests the server counted (nginx `stub_status`), if known.
    pub server_requests: Option<u64>,
    /// Requests whose request was sent.
    pub requests_sent: u64,
    /// Body bytes of the successful responses.
    pub body_bytes: u64,
    /// Successful requests, from the scheduled start to the last byte.
    pub latency: Latency,
    /// Successful requests: TLS handshake.
    pub handshake: Latency,
    /// Per second.
    pub series: Vec<RampSecond>,
    /// nginx's CPU over the ramp.
    pub server_cpu: Option<ServerCpu>,
    /// Generator CPU, fraction of its cores.
    pub generator_cpu: f64,
    /// Each generator thread's CPU, fraction of its core, in CPU order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generator_cpu_per_thread: Vec<f64>,
    /// Generator saturated (the mean or one thread): the counts describe the
    /// generator, not the server.
    pub generator_saturated: bool,
    /// How quiet the machine was on the CPUs the server and the generator used during the ramp
    /// (None: not recorded, as by an older cipherbench).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<Box<crate::noise::Noise>>,
    /// With `--agents`: each agent's share of the ramp (its arrival rate, counters
    /// and its host's noise; the ramp's figures are their exact merge).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<crate::agents::AgentShare>,
    /// How the generator (this machine's, or the agents' added up) read and checked
    /// the responses (`--verify`); None in records written before (and, before agent
    /// protocol 7, with agents, which then read whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<Verification>,
}

impl RampRun {
    /// What the noise judge says of the ramp's window; with agents, of each agent's
    /// host as well (the message names the agent).
    pub fn noise_findings(&self) -> Vec<crate::noise::Finding> {
        crate::agents::noise_findings(self.noise.as_deref(), &self.agents)
    }
}

/// `tls ramp` output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RampResults {
    /// Settings.
    pub config: RampConfig,
    /// One per suite x size x variant, with the key in the first key store.
    pub runs: Vec<RampRun>,
    /// The same ramps with the key in the other key stores (`pkcs11`), each the
    /// counterpart of one of `runs`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key_store_runs: Vec<RampRun>,
    /// What the other key stores were not measured at, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key_store_skipped: Vec<KeyStoreSkip>,
}

/// `tls sweep` output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SweepResults {
    /// Settings.
    pub config: SweepConfig,
    /// One per suite x size x core count x variant, with the key in the first key
    /// store (`config.key_stores`): what every table and the ladder read.
    pub points: Vec<SweepPoint>,
    /// Core counts asked for that this machine could not measure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_cores: Vec<SkippedCores>,
    /// The same points with the key in the other key stores (`pkcs11`), each the
    /// counterpart of one of `points`, compared with it in the key-store table.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key_store_points: Vec<SweepPoint>,
    /// What the other key stores were not measured at, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key_store_skipped: Vec<KeyStoreSkip>,
    /// The plain-HTTP ceiling (`--plain-http`): the same nginx on the same cores
    /// serving the same file without TLS, variant [`PLAIN_SENDFILE`] or
    /// [`PLAIN_COPY`], measured in the rounds of the first suite's point of each
    /// size and core count (its `suite` is that point's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plain_points: Vec<SweepPoint>,
}

/// A plain-HTTP point's variant: nginx with `sendfile on`, the file going from the
/// page cache to the socket in the kernel.
pub const PLAIN_SENDFILE: &str = "http-sendfile";
/// A plain-HTTP point's variant: nginx with `sendfile off`, reading the file into its
/// buffers and writing it, as it must under TLS without kTLS: the same copies as
/// TLS, without the cipher.
pub const PLAIN_COPY: &str = "http-copy";

/// Whether a point's variant is one of the plain-HTTP ceiling's.
pub fn is_plain(variant: &str) -> bool {
    variant == PLAIN_SENDFILE || variant == PLAIN_COPY
}

/// Points a key store was not measured at: a core count (nginx serves a module's
/// key from one process) or a suite (RSA key exchange, which the pkcs11 engine
/// cannot decrypt for OpenSSL 3's TLS).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct KeyStoreSkip {
    /// The store (`pkcs11`).
    pub key_store: String,
    /// The core count, when that is what was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<usize>,
    /// The suite, when that is what was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite: Option<String>,
    /// Why, one sentence.
    pub reason: String,
}

impl KeyStoreSkip {
    /// "x2" or "AES128-SHA".
    pub fn what(&self) -> String {
        match (&self.suite, self.cores) {
            (Some(s), Some(c)) => format!("{s} x{c}"),
            (Some(s), None) => s.clone(),
            (None, Some(c)) => format!("x{c}"),
            (None, None) => "all".into(),
        }
    }
}

impl SweepResults {
    /// The plain-HTTP point (`variant`: [`PLAIN_SENDFILE`] or [`PLAIN_COPY`]) at this
    /// size and core count, whichever suite's point it was measured beside (no suite
    /// runs in it).
    pub fn plain_point(&self, size: u64, cores: usize, variant: &str) -> Option<&SweepPoint> {
        self.plain_points
            .iter()
            .find(|p| p.size_bytes == size && p.cores == cores && p.variant == variant)
    }

    /// The point for a suite, size, core count and variant.
    pub fn point(
        &self,
        suite: &str,
        size: u64,
        cores: usize,
        variant: &str,
    ) -> Option<&SweepPoint> {
        self.points.iter().find(|p| {
            p.suite == suite && p.size_bytes == size && p.cores == cores && p.variant == variant
        })
    }

    /// Each point of another key store with its counterpart in `points` (same suite,
    /// size, cores and variant): (first store's, other store's).
    pub fn key_store_pairs(&self) -> Vec<(&SweepPoint, &SweepPoint)> {
        self.key_store_points
            .iter()
            .filter_map(|o| {
                self.point(&o.suite, o.size_bytes, o.cores, &o.variant)
                    .map(|f| (f, o))
            })
            .collect()
    }

    /// Throughput ratio of two points with the sum of their interval spreads.
    pub fn ratio(a: &SweepPoint, b: &SweepPoint) -> Option<Ratio> {
        if b.throughput_bytes_per_sec <= 0.0 {
            return None;
        }
        Some(Ratio {
            value: a.throughput_bytes_per_sec / b.throughput_bytes_per_sec,
            rel_spread: a.interval_throughput_bytes_per_sec.rel_spread
                + b.interval_throughput_bytes_per_sec.rel_spread,
        })
    }

    /// The throughput ratio of two points with its 95 % interval ([`gain_rounds`]:
    /// paired over the rounds where the two were measured in turn, else over their
    /// final windows' per-interval throughputs; METHODOLOGY.md, "Ratios and their
    /// intervals"); None for the interval where too few rounds were kept.
    pub fn ratio_interval(a: &SweepPoint, b: &SweepPoint) -> Option<RatioInterval> {
        if b.throughput_bytes_per_sec <= 0.0 {
            return None;
        }
        window_interval(
            a,
            b,
            a.throughput_bytes_per_sec / b.throughput_bytes_per_sec,
        )
    }
}

impl SweepResults {
    /// `b`'s nginx CPU over `a`'s with its 95 % interval, for points measured at one
    /// fixed rate (`--rate`), where the CPU the load cost is the comparison that
    /// means something: paired round by round where the two took turns in one group
    /// with at least [`crate::interval::MIN_ROUNDS`] rounds each, every round with
    /// its CPU figure; None otherwise (one window each says no interval).
    pub fn cpu_ratio_interval(a: &SweepPoint, b: &SweepPoint) -> Option<RatioInterval> {
        let (ca, cb) = (a.server_cpu.as_ref()?.total, b.server_cpu.as_ref()?.total);
        if ca <= 0.0 || a.cores != b.cores {
            return None;
        }
        if !took_turns(a, b) {
            return None;
        }
        let cpu = |p: &SweepPoint| {
            p.rounds
                .iter()
                .map(|r| r.server_cpu)
                .collect::<Option<Vec<f64>>>()
        };
        let rounds = Rounds::ratio(cpu(b)?, cpu(a)?, Pairing::Paired, Centre::Mean);
        let counts = (rounds.num.len(), rounds.den.as_ref().map_or(0, Vec::len));
        let e = bootstrap_figures(&[&rounds], |v| v[0], DEFAULT_SEED)?;
        Some(RatioInterval::from_estimate(e, Pairing::Paired, counts).scaled_to(cb / ca))
    }
}

/// How a sweep ratio's interval is taken, as the tables' headers say it.
pub const SWEEP_INTERVAL_BASIS: &str = "paired round by round where the two points took turns (marked \"N rounds in turn\"), else over the two final windows' per-interval throughputs";

/// ` (3 rounds in turn)` after a sweep ratio whose interval pairs rounds; empty
/// otherwise.
pub fn interval_note(i: &RatioInterval) -> String {
    if i.pairing == Pairing::Paired {
        format!(" ({} rounds in turn)", i.rounds.0)
    } else {
        String::new()
    }
}

/// Whether `a` and `b` were measured in turn, round by round, in one group of at
/// least [`crate::interval::MIN_ROUNDS`] rounds each: their rounds pair.
fn took_turns(a: &SweepPoint, b: &SweepPoint) -> bool {
    a.interleave_group.is_some()
        && a.interleave_group == b.interleave_group
        && a.rounds.len() == b.rounds.len()
        && a.rounds.len() >= crate::interval::MIN_ROUNDS
        && a.rounds
            .iter()
            .zip(&b.rounds)
            .all(|(x, y)| x.round == y.round)
}

/// The rounds behind `a`'s figure over `b`'s. Where both were measured in turn in
/// one group with at least [`crate::interval::MIN_ROUNDS`] rounds each (and as many),
/// their rounds' throughputs, paired round by round: round `r` of each sat next to
/// the other's, so a drift of the machine shared by a pair cancels. Otherwise each
/// final window's per-interval throughputs, resampled independently (the windows
/// were apart: an older record, or a point measured alone), which understates the
/// uncertainty a drift between them adds. Each set's figure is its mean (the
/// rounds' windows are of one length; a window's total over its length is the mean
/// of its intervals).
pub fn gain_rounds(a: &SweepPoint, b: &SweepPoint) -> Rounds {
    if took_turns(a, b) {
        let rates = |p: &SweepPoint| {
            p.rounds
                .iter()
                .map(|r| r.throughput_bytes_per_sec)
                .collect()
        };
        Rounds::ratio(rates(a), rates(b), Pairing::Paired, Centre::Mean)
    } else {
        Rounds::ratio(
            a.interval_samples_bytes_per_sec.clone(),
            b.interval_samples_bytes_per_sec.clone(),
            Pairing::Independent,
            Centre::Mean,
        )
    }
}

/// The 95 % interval of `a`'s figure over `b`'s from [`gain_rounds`], moved to
/// `point` (the figure the tables show). None when a side kept too few rounds
/// (records written before they were kept keep none).
fn window_interval(a: &SweepPoint, b: &SweepPoint, point: f64) -> Option<RatioInterval> {
    let rounds = gain_rounds(a, b);
    let counts = (rounds.num.len(), rounds.den.as_ref().map_or(0, Vec::len));
    let pairing = rounds.pairing;
    let e = bootstrap_figures(&[&rounds], |v| v[0], DEFAULT_SEED)?;
    Some(RatioInterval::from_estimate(e, pairing, counts).scaled_to(point))
}

impl RampResults {
    /// The run for a suite, size and variant.
    pub fn run(&self, suite: &str, size: u64, variant: &str) -> Option<&RampRun> {
        self.runs
            .iter()
            .find(|r| r.suite == suite && r.size_bytes == size && r.variant == variant)
    }

    /// Each ramp of another key store with its counterpart in `runs`: (first
    /// store's, other store's).
    pub fn key_store_pairs(&self) -> Vec<(&RampRun, &RampRun)> {
        self.key_store_runs
            .iter()
            .filter_map(|o| self.run(&o.suite, o.size_bytes, &o.variant).map(|f| (f, o)))
            .collect()
    }
}

/// `tls handshake` settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HandshakeConfig {
    /// Protocol (`TLSv1.3`, `TLSv1.2`).
    pub protocol: String,
    /// Server keys (`rsa2048`, `ecdsa-p256`).
    pub keys: Vec<String>,
    /// Key-exchange groups (`X25519`, `P-256`).
    pub groups: Vec<String>,
    /// `full` and/or `resumed`.
    pub sessions: Vec<String>,
    /// Where nginx's key is: `file`, `pkcs11`.
    pub key_stores: Vec<String>,
    /// Variant names.
    pub variants: Vec<String>,
    /// nginx workers (cores under test).
    pub cores: usize,
    /// Response body size (tiny: the handshake is the work).
    pub size_bytes: u64,
    /// The measured window.
    pub window_ns: u64,
    /// Each probe's window during the concurrency search.
    pub probe_ns: u64,
    /// Warm-up before each window.
    pub warmup_ns: u64,
    /// The latency limit on time to first byte.
    pub latency_limit_ns: u64,
    /// Highest concurrency tried.
    pub max_concurrency: usize,
    /// Rounds the window is cut into, the variants of a point taking turns (1 in
    /// records written before rounds were kept).
    #[serde(default = "one_round")]
    pub rounds: usize,
}

/// One handshake point: key x group x full/resumed x key store x variant, measured as
/// a sweep point (closed loop, concurrency searched, keep-alive off, one request per
/// connection) on a tiny file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HandshakePoint {
    /// Server key (`rsa2048`, `ecdsa-p256`).
    pub key: String,
    /// Key-exchange group offered by both sides (`X25519`, `P-256`).
    pub group: String,
    /// `full` (no session cache, no tickets) or `resumed` (tickets and cache on, each
    /// client thread offering its last session).
    pub session: String,
    /// Where nginx's private key was: `file` (PEM) or `pkcs11` (a PKCS#11 module
    /// through pkcs11-provider or the engine).
    #[serde(default = "file_store")]
    pub key_store: String,
    /// Handshakes (= requests, one per connection) completed per second in the window.
    pub handshakes_per_sec: f64,
    /// Handshakes per second per nginx core fully busy: handshakes per second divided
    /// by the CPU nginx's workers used (cores x mean utilisation). None without the
    /// workers' CPU.
    pub handshakes_per_core_sec: Option<f64>,
    /// Successful requests over the measurement whose handshake resumed a session
    /// (`SSL_session_reused`), as a fraction of all successful ones: near 1 for
    /// `resumed`, 0 for `full`.
    pub resumed_fraction: f64,
    /// The measurement itself (suite, variant, latencies, CPU, probes, validity).
    pub point: SweepPoint,
}

fn file_store() -> String {
    "file".into()
}

fn file_stores() -> Vec<String> {
    vec![file_store()]
}

fn one_round() -> usize {
    1
}

/// `tls handshake` output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HandshakeResults {
    /// Settings.
    pub config: HandshakeConfig,
    /// Points as measured.
    pub points: Vec<HandshakePoint>,
}

impl HandshakeResults {
    /// The point for a key, group, session kind, key store and variant.
    pub fn point(
        &self,
        key: &str,
        group: &str,
        session: &str,
        key_store: &str,
        variant: &str,
    ) -> Option<&HandshakePoint> {
        self.points.iter().find(|p| {
            p.key == key
                && p.group == group
                && p.session == session
                && p.key_store == key_store
                && p.point.variant == variant
        })
    }

    /// Handshakes-per-second ratio of two points with the sum of their spreads
    /// (per-interval request rates).
    pub fn ratio(a: &HandshakePoint, b: &HandshakePoint) -> Option<Ratio> {
        (b.handshakes_per_sec > 0.0).then(|| Ratio {
            value: a.handshakes_per_sec / b.handshakes_per_sec,
            rel_spread: a.point.interval_throughput_bytes_per_sec.rel_spread
                + b.point.interval_throughput_bytes_per_sec.rel_spread,
        })
    }

    /// The ratio of two points' handshakes per nginx core-second with its 95 %
    /// interval: the per-interval rates of the two windows resampled (the body is a
    /// constant size, so bytes per interval count handshakes), the CPU each window's
    /// workers used taken as measured (one figure per window). None without both
    /// per-core figures or with fewer than 3 intervals a window.
    pub fn per_core_ratio_interval(
        a: &HandshakePoint,
        b: &HandshakePoint,
    ) -> Option<RatioInterval> {
        let (x, y) = (a.handshakes_per_core_sec?, b.handshakes_per_core_sec?);
        (y > 0.0).then_some(())?;
        window_interval(&a.point, &b.point, x / y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_said_with_their_main_reasons_most_frequent_first() {
        use FailureReason::*;
        let map = |v: &[(FailureReason, u64)]| v.iter().copied().collect::<BTreeMap<_, _>>();
        assert_eq!(failures_note(0, &map(&[])), None);
        assert_eq!(
            failures_note(
                39800,
                &map(&[(Overload, 800), (Handshake, 30000), (Timeout, 9000)])
            )
            .unwrap(),
            "39800 failed request(s): handshake 30000, timeout 9000, overload 800"
        );
        assert_eq!(
            failures_note(10, &map(&[(Connect, 1), (Io, 2), (Timeout, 3), (Http, 4)])).unwrap(),
            "10 failed request(s): http 4, timeout 3, io 2, and 1 more"
        );
        assert_eq!(failures_note(2, &map(&[])).unwrap(), "2 failed request(s)");
    }

    fn rounds_point(variant: &str, group: Option<u64>, rates: &[f64]) -> SweepPoint {
        let mut p: SweepPoint = serde_json::from_value(serde_json::json!({
            "suite": "AES128-GCM-SHA256", "protocol": "TLSv1.2",
            "negotiated_suite": null, "negotiated_protocol": null,
            "size_bytes": 1024, "cores": 1, "variant": variant, "concurrency": 2,
            "window_ns": 3_000_000_000u64, "interval_ns": 250_000_000u64,
            "throughput_bytes_per_sec": rates.iter().sum::<f64>() / rates.len() as f64,
            "interval_throughput_bytes_per_sec": Summary::of_or_empty(rates),
            "requests_per_sec": 1.0, "requests": 3, "requests_sent": 3,
            "server_requests": null, "body_bytes": 0, "errors": 0,
            "errors_by_reason": {}, "latency": Latency::default(),
            "first_byte": Latency::default(), "handshake": Latency::default(),
            "connect": Latency::default(), "max_first_byte_ns": 0,
            "within_limit": true, "server_cpu": null, "generator_cpu": 0.1,
            "generator_threads": 1, "generator_saturated": false, "valid": true,
            "invalid_reason": null, "probes": []
        }))
        .unwrap();
        // Twelve 250 ms intervals, each window's rate split four ways.
        p.interval_samples_bytes_per_sec = rates.iter().flat_map(|&r| [r; 4]).collect();
        p.interleave_group = group;
        p.rounds = rates
            .iter()
            .enumerate()
            .map(|(k, &r)| WindowRound {
                round: k,
                sequence: 2 * k,
                window_ns: 1_000_000_000,
                throughput_bytes_per_sec: r,
                requests: 1,
                max_first_byte_ns: 0,
                server_cpu: None,
            })
            .collect();
        p
    }

    #[test]
    fn rounds_taken_in_turn_pair_and_a_shared_drift_cancels() {
        // The machine slows 20 % per round; each round accel is 2x noaesni.
        let a = rounds_point("accel", Some(7), &[10.0, 8.0, 6.4]);
        let b = rounds_point("noaesni", Some(7), &[5.0, 4.0, 3.2]);
        let paired = gain_rounds(&a, &b);
        assert_eq!(paired.pairing, Pairing::Paired);
        let i = SweepResults::ratio_interval(&a, &b).unwrap();
        assert_eq!((i.pairing, i.rounds), (Pairing::Paired, (3, 3)));
        assert!(
            (i.low - 2.0).abs() < 1e-9 && (i.high - 2.0).abs() < 1e-9,
            "{i:?}"
        );
        // The same figures measured apart (other groups): the drift is noise, and
        // the interval resamples each window's intervals on its own.
        let b_apart = rounds_point("noaesni", Some(8), &[5.0, 4.0, 3.2]);
        let apart = SweepResults::ratio_interval(&a, &b_apart).unwrap();
        assert_eq!(apart.pairing, Pairing::Independent);
        assert_eq!(apart.rounds, (12, 12));
        assert!(apart.high - apart.low > 0.3, "{apart:?}");
    }

    #[test]
    fn an_agent_s_noisy_host_flags_the_point_naming_the_agent() {
        let mut p = rounds_point("accel", None, &[10.0]);
        let noise = |foreign: f64| crate::noise::test_window(0, foreign, &[]);
        let share = |name: &str, foreign: f64| crate::agents::AgentShare {
            name: name.into(),
            concurrency: 2,
            noise: Some(noise(foreign)),
            ..Default::default()
        };
        // The coordinator's own host quiet, agent b's busy: flagged, naming b.
        p.noise = Some(Box::new(noise(0.0)));
        p.agents = vec![share("a", 0.02), share("b", 0.30)];
        let f = p.noise_findings();
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].kind, "noisy_machine");
        assert!(f[0].message.starts_with("agent b: "), "{}", f[0].message);
        // Every host quiet: nothing.
        p.agents[1] = share("b", 0.01);
        assert!(p.noise_findings().is_empty());
    }

    #[test]
    fn too_few_or_unmatched_rounds_do_not_pair() {
        let a = rounds_point("accel", Some(7), &[10.0, 8.0, 6.4]);
        // Cut short (Ctrl-C): two rounds.
        let short = rounds_point("noaesni", Some(7), &[5.0, 4.0]);
        assert_eq!(gain_rounds(&a, &short).pairing, Pairing::Independent);
        // No group (a record written before rounds were kept).
        let mut old = rounds_point("noaesni", None, &[5.0, 4.0, 3.2]);
        assert_eq!(gain_rounds(&a, &old).pairing, Pairing::Independent);
        old.rounds.clear();
        let mut a_old = a.clone();
        a_old.interleave_group = None;
        assert_eq!(gain_rounds(&a_old, &old).pairing, Pairing::Independent);
    }

    #[test]
    fn a_server_s_cpu_over_two_rounds_is_weighted_by_their_windows() {
        let mut a = ServerCpu {
            per_worker: vec![0.5, 1.0],
            total: 0.75,
            peak: 0.9,
            interval_ns: 1,
            runqueue_wait: 0.0,
        };
        let b = ServerCpu {
            per_worker: vec![1.0, 1.0],
            total: 1.0,
            peak: 1.0,
            interval_ns: 1,
            runqueue_wait: 0.3,
        };
        a.absorb(&b, 1_000, 3_000);
        assert_eq!(a.per_worker, vec![0.875, 1.0]);
        assert!((a.total - 0.9375).abs() < 1e-12);
        assert!((a.runqueue_wait - 0.225).abs() < 1e-12);
        assert_eq!(a.peak, 1.0);
    }

    #[test]
    fn failure_reasons_serialise_as_their_names() {
        for r in FailureReason::ALL {
            assert_eq!(
                serde_json::to_string(&r).unwrap(),
                format!("\"{}\"", r.as_str())
            );
        }
        let mut m = BTreeMap::new();
        m.insert(FailureReason::WrongSuite, 3u64);
        assert_eq!(serde_json::to_string(&m).unwrap(), "{\"wrong_suite\":3}");
    }

    #[test]
    fn a_sweep_recorded_before_key_stores_reads_as_the_key_in_a_file() {
        let old = serde_json::json!({
            "config": {"suites": ["AES128-SHA"], "sizes_bytes": [1024], "cores": [1],
                "variants": ["accel"], "window_ns": 1, "probe_ns": 1, "warmup_ns": 0,
                "latency_limit_ns": 1, "max_concurrency": 1, "timeout_ns": 1,
                "resumption": false, "key": "rsa2048"},
            "points": []
        });
        let s: SweepResults = serde_json::from_value(old).unwrap();
        assert_eq!(s.config.key_stores, vec!["file".to_string()]);
        assert!(s.key_store_points.is_empty() && s.key_store_pairs().is_empty());
        // And a new one writes no empty key-store lists.
        let json = serde_json::to_string(&s).unwrap();
        assert!(!json.contains("key_store_points") && json.contains("\"key_stores\":[\"file\"]"));
    }
}
