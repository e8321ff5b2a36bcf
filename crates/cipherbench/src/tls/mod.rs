//! Layer 3, `cipherbench tls sweep|ramp`: TLS web serving with a real nginx and
//! cipherbench's own load generator.
//!
//! - [`suite`]: the suites, and whether the library offers them;
//! - [`nginx`] and [`cert`]: the server under test, its generated config, certificate
//!   and files, in a temporary directory removed on every exit path;
//! - [`engine`]: the load generator (closed and open loop, pinned, HDR histograms);
//! - [`cpu`]: nginx's workers' CPU accounting;
//! - [`sweep`]: Intel's nginx study (seeds 000/003), the highest throughput within a
//!   latency limit;
//! - [`ramp`]: the IXP425 offload paper (seed 002), attempted/successful/unsuccessful
//!   under a rising rate.
//!
//! Plans arrive resolved (the flags are the command line's, above this layer);
//! runners fill the session and save after every point; nothing here prints except
//! through the progress observer. The variant is [`crate::variant`]'s; cores,
//! pinning and CPU time are [`crate::host`]'s.

pub mod agents;
pub mod cert;
pub mod cpu;
pub mod defaults;
pub mod engine;
pub mod handshake;
pub mod http;
pub mod keystore;
pub mod nginx;
pub mod ramp;
pub mod serve;
mod start;
pub mod suite;
pub mod sweep;

use crate::campaign;
use crate::results::Session;
use crate::variant::Variant;
use anyhow::{anyhow, bail, Context, Result};
use cipherbench_model::tls::TlsResults;
pub(crate) use start::*;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;
use suite::{KeyType, Suite};

/// What the load goes to.
#[derive(Debug, Clone)]
pub enum ServerTarget {
    /// An nginx cipherbench starts.
    Nginx {
        /// `--nginx PATH`.
        binary: Option<PathBuf>,
        /// `--port`.
        port: Option<u16>,
    },
    /// A server the user runs (`--server URL`).
    External(ExternalUrl),
}

/// A parsed `--server https://host[:port][/path]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalUrl {
    /// Host as written.
    pub host: String,
    /// Resolved address.
    pub addr: SocketAddr,
    /// Path requested.
    pub path: String,
}

impl ExternalUrl {
    /// Parses and checks a URL: only `https`, and any host other than loopback
    /// needs `allow_remote`. Nothing is sent anywhere here (a remote name is resolved
    /// only once it is allowed).
    pub fn parse(url: &str, allow_remote: bool) -> Result<ExternalUrl> {
        let rest = url.strip_prefix("https://").ok_or_else(|| {
            anyhow!("--server {url}: use an https:// URL (cipherbench measures TLS)")
        })?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].to_string()),
            None => (rest, "/".to_string()),
        };
        let (host, port) = if let Some(inner) = authority.strip_prefix('[') {
            let (h, after) = inner
                .split_once(']')
                .ok_or_else(|| anyhow!("--server {url}: unclosed [ in the host"))?;
            (h.to_string(), after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (authority.to_string(), None),
            }
        };
        let port: u16 = match port {
            Some(p) => p
                .parse()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| anyhow!("--server {url}: bad port '{p}'"))?,
            None => 443,
        };
        if host.is_empty() {
            bail!("--server {url}: no host");
        }
        let loopback_ip = host.parse::<IpAddr>().ok().filter(|ip| ip.is_loopback());
        let is_local = loopback_ip.is_some() || host.eq_ignore_ascii_case("localhost");
        if !is_local && !allow_remote {
            bail!(
                "--server {host} is not on this machine: pass --allow-remote to load a server you run elsewhere (only servers you are allowed to load)"
            );
        }
        let addr = match (loopback_ip, host.parse::<IpAddr>()) {
            (Some(ip), _) | (None, Ok(ip)) => SocketAddr::new(ip, port),
            (None, Err(_)) if host.eq_ignore_ascii_case("localhost") => {
                SocketAddr::from(([127, 0, 0, 1], port))
            }
            _ => (host.as_str(), port)
                .to_socket_addrs()
                .with_context(|| format!("resolving {host}"))?
                .next()
                .ok_or_else(|| anyhow!("{host} has no address"))?,
        };
        Ok(ExternalUrl { host, addr, path })
    }
}

/// `tls sweep`, resolved.
#[derive(Debug, Clone)]
pub struct SweepPlan {
    /// Suites.
    pub suites: Vec<Suite>,
    /// File sizes.
    pub sizes: Vec<u64>,
    /// Core counts under test.
    pub cores: Vec<usize>,
    /// Variants.
    pub variants: Vec<Variant>,
    /// Server key.
    pub key: KeyType,
    /// Where nginx's key is, file first: each point is measured in each (a PKCS#11
    /// module only at one core: nginx serves its key from one process).
    pub key_stores: Vec<keystore::KeyStore>,
    /// Final window.
    pub window: Duration,
    /// Rounds the final window is cut into where a point has several variant x
    /// key-store slots: each slot's nginx stays up and they take turns (A B, B A,
    /// A B), each round `window / rounds` long.
    pub rounds: usize,
    /// Probe window.
    pub probe: Duration,
    /// Warm-up before every window.
    pub warmup: Duration,
    /// Limit on the maximum time to first byte.
    pub limit: Duration,
    /// Per-request timeout.
    pub timeout: Duration,
    /// How long in-flight requests may finish after a window.
    pub drain: Duration,
    /// Highest concurrency tried.
    pub max_concurrency: usize,
    /// Measure at this concurrency only (no search).
    pub fixed_concurrency: Option<usize>,
    /// Measure open loop at this constant request rate (no search).
    pub fixed_rate: Option<f64>,
    /// Generator CPUs (None: every CPU not given to nginx).
    pub generator_cpus: Option<Vec<usize>>,
    /// Resume TLS sessions.
    pub resumption: bool,
    /// Where the load goes.
    pub target: ServerTarget,
    /// `--agents`: the load comes from these hosts instead of this machine.
    pub agents: Option<crate::agent::fleet::Launch>,
    /// `--verify`: how this machine's generator checks the responses.
    pub verify: engine::sampled::Verify,
    /// `--plain-http`: nginx serving each size over plain HTTP on the same cores,
    /// `sendfile` on and off, measured in the rounds of the first suite's point:
    /// the TLS figures' ceiling.
    pub plain_http: bool,
}

/// `tls ramp`, resolved.
#[derive(Debug, Clone)]
pub struct RampPlan {
    /// Suites.
    pub suites: Vec<Suite>,
    /// Response sizes.
    pub sizes: Vec<u64>,
    /// Variants.
    pub variants: Vec<Variant>,
    /// Cores under test.
    pub cores: usize,
    /// Server key.
    pub key: KeyType,
    /// Where nginx's key is, file first: each ramp is run in each.
    pub key_stores: Vec<keystore::KeyStore>,
    /// Rate at the end of the ramp.
    pub target_rate: f64,
    /// Ramp length.
    pub duration: Duration,
    /// A request not done within this is unsuccessful.
    pub timeout: Duration,
    /// Generator CPUs (None: every CPU not given to nginx).
    pub generator_cpus: Option<Vec<usize>>,
    /// Where the load goes.
    pub target: ServerTarget,
    /// `--agents`: the load comes from these hosts instead of this machine.
    pub agents: Option<crate::agent::fleet::Launch>,
    /// `--verify`: how the generator checks the responses (this machine's, or the
    /// agents', which are told).
    pub verify: engine::sampled::Verify,
}

/// `--agents`: connects and checks every agent before any server starts (a host that
/// cannot be reached, or runs another version, is refused here), records them in the
/// session and says who they are.
pub(crate) fn connect_agents(
    launch: Option<&crate::agent::fleet::Launch>,
    session: &mut Session,
) -> Result<Option<crate::agent::fleet::Fleet>> {
    let Some(launch) = launch else {
        return Ok(None);
    };
    let fleet = crate::agent::fleet::Fleet::connect(launch)?;
    results(session).agents = fleet.records();
    session
        .progress
        .note(&format!("load from agents {}", fleet.describe()));
    Ok(Some(fleet))
}

/// Warns, once per agent, where an agent runs on this machine's own kernel (a
/// namespace or container here, as the project's test hosts are) and its generator
/// may run on nginx's CPUs: the two then share CPUs, and the figure is of neither
/// alone. An agent's CPUs are `--agent-cpus`, or all it may use.
pub(crate) fn warn_agents_on_server_cpus(
    session: &mut Session,
    fleet: Option<&crate::agent::fleet::Fleet>,
    server_cpus: &[usize],
) {
    let Some(fleet) = fleet else { return };
    for a in fleet
        .agents
        .iter()
        .filter(|a| a.hello.shares_kernel_with_us())
    {
        let cpus = fleet.cpus.as_ref().unwrap_or(&a.hello.cpus);
        let shared: Vec<usize> = cpus
            .iter()
            .copied()
            .filter(|c| server_cpus.contains(c))
            .collect();
        if !shared.is_empty() {
            let message = format!(
                "agent {} runs on this machine's kernel and its generator may use CPUs {} that nginx runs on: the two share them, so the figure is of neither alone; give the agents other CPUs with --agent-cpus",
                a.name,
                cipherbench_model::topology::format_cpu_list(&shared)
            );
            if !session.record.warnings.iter().any(|w| w.message == message) {
                session.progress.note(&message);
                session.record.warn("tls", "agent_on_server_cpus", message);
            }
        }
    }
}

/// Where an agent reaches `target`: a server on this machine (started on loopback and
/// on the agents' addresses) at the address the agent's ssh came from, any other
/// server at its own.
pub(crate) fn agent_addr(
    agent: &crate::agent::fleet::Agent,
    target: &engine::Target,
) -> SocketAddr {
    match agent
        .hello
        .coordinator_addr
        .as_deref()
        .and_then(|s| s.parse::<IpAddr>().ok())
    {
        Some(ip) if target.addr.ip().is_loopback() => SocketAddr::new(ip, target.addr.port()),
        _ => target.addr,
    }
}

/// Adds a server to the layer's record unless one of the same suite, variant, cores,
/// key and key store is there already (a point's slots share their nginx's record).
pub(crate) fn record_server(tls: &mut TlsResults, server: cipherbench_model::tls::ServerRecord) {
    if !tls.servers.iter().any(|s| {
        s.suite == server.suite
            && s.variant.name == server.variant.name
            && s.cores == server.cores
            && s.key == server.key
            && s.key_store == server.key_store
    }) {
        tls.servers.push(server);
    }
}

/// Whether a run of key store `store` is a counterpart (the first of `--key-store` is
/// the run's own; the others are compared with it).
pub(crate) fn is_counterpart_store(stores: &[String], store: &str) -> bool {
    stores.iter().skip(1).any(|k| k == store)
}

/// The session's layer 3 record, created on first use.
pub(crate) fn results(session: &mut Session) -> &mut TlsResults {
    session.record.tls.get_or_insert_with(TlsResults::default)
}

/// Raises the open-file limit to its hard maximum (every request is a socket) and
/// returns how many connections one generator thread may hold.
pub(crate) fn connection_budget(threads: usize) -> usize {
    let soft = crate::host::raise_open_file_limit();
    (soft.saturating_sub(256) / threads.max(1)).max(16)
}

/// The series interval for a window: 1 s, or a quarter of a short window.
pub(crate) fn interval_for(window: Duration) -> Duration {
    if window >= Duration::from_secs(4) {
        Duration::from_secs(1)
    } else {
        (window / 4).max(Duration::from_millis(10))
    }
}

/// The user's server, probed once: the target with the length every response must
/// have. Anything but `200` is refused (a 404 page's length would otherwise become
/// the expected one).
pub(crate) fn external_target(
    client: &engine::Client,
    url: &ExternalUrl,
) -> Result<engine::Target> {
    let probe = engine::Target {
        addr: url.addr,
        host: url.host.clone(),
        path: url.path.clone(),
        expected_len: None,
        content: None,
    };
    let f = engine::fetch_once(client, &probe, Duration::from_secs(10))?;
    if f.status != 200 {
        bail!(
            "{} answered {} for {}: point --server at a file it serves",
            url.host,
            f.status,
            url.path
        );
    }
    Ok(engine::Target {
        expected_len: Some(f.body_len),
        ..probe
    })
}

/// The record of a server cipherbench did not start (`--server URL`).
pub(crate) fn external_record(
    suite: &Suite,
    url: &ExternalUrl,
    generator_cpus: Vec<usize>,
) -> cipherbench_model::tls::ServerRecord {
    cipherbench_model::tls::ServerRecord {
        kind: "external".into(),
        version: None,
        library: None,
        suite: suite.openssl.to_string(),
        key: String::new(),
        key_store: String::new(),
        key_store_check: None,
        cores: 0,
        server_cpus: Vec::new(),
        generator_cpus,
        variant: cipherbench_model::speed::VariantRecord {
            name: "external".into(),
            ia32cap_env: None,
            cpu_settings: String::new(),
            aesni: false,
            pclmulqdq: false,
            took_effect: true,
            probes: None,
            effect: None,
            process_check: None,
            expected: None,
            provider_calls: None,
        },
        config: format!("https://{}{}", url.host, url.path),
        placement: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_servers_need_no_flag_and_others_do() {
        let u = ExternalUrl::parse("https://127.0.0.1:8443/f/1", false).unwrap();
        assert_eq!(u.addr, "127.0.0.1:8443".parse().unwrap());
        assert_eq!(u.path, "/f/1");
        let u = ExternalUrl::parse("https://localhost", false).unwrap();
        assert_eq!(u.addr.port(), 443);
        assert_eq!(u.path, "/");
        assert!(ExternalUrl::parse("https://[::1]:9443/x", false).is_ok());
        let err = ExternalUrl::parse("https://192.0.2.7/big", false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--allow-remote"), "{err}");
        // Allowed, an address literal needs no lookup (and nothing is sent).
        assert!(ExternalUrl::parse("https://192.0.2.7/big", true).is_ok());
        assert!(ExternalUrl::parse("http://127.0.0.1/", false).is_err());
        assert!(ExternalUrl::parse("https://127.0.0.1:0/", false).is_err());
    }

    #[test]
    fn short_windows_get_short_intervals() {
        assert_eq!(
            interval_for(Duration::from_secs(120)),
            Duration::from_secs(1)
        );
        assert_eq!(
            interval_for(Duration::from_secs(2)),
            Duration::from_millis(500)
        );
    }
}
