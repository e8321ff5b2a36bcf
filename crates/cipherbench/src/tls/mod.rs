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
pub mod engine;
pub mod handshake;
pub mod http;
pub mod keystore;
pub mod nginx;
pub mod ramp;
pub mod serve;
pub mod suite;
pub mod sweep;

use crate::campaign;
use crate::results::Session;
use crate::variant::Variant;
use anyhow::{anyhow, bail, Context, Result};
use cipherbench_model::tls::TlsResults;
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
}

/// Server and generator CPUs from the topology planner: nginx's workers on whole
/// cores of their own (one worker per core), the generator on other whole cores, or
/// on those asked for; where the machine cannot keep them apart the placement says
/// so (`cipherbench_model::topology::place_tls`).
pub(crate) fn assign_cpus(
    topology: &cipherbench_model::topology::Topology,
    cores: usize,
    generator: Option<&[usize]>,
) -> Result<cipherbench_model::topology::TlsCpus> {
    cipherbench_model::topology::place_tls(topology, cores, generator).map_err(|e| anyhow!(e))
}

/// Applies nginx's side of a placement to a started server: its master (and so
/// anything it forks later) to the workers' CPUs, each worker already pinned to its
/// own by `worker_cpu_affinity`; then checks by effect that every process is on the
/// CPUs the placement gives nginx. Returns what did not hold, one sentence.
pub(crate) fn apply_placement(server: &nginx::Server, cpus: &[usize]) -> Option<String> {
    if let Err(e) = crate::host::set_process_affinity(server.pid(), cpus) {
        return Some(format!(
            "could not restrict nginx's master (pid {}) to CPUs {}: {e}",
            server.pid(),
            cipherbench_model::topology::format_cpu_list(cpus)
        ));
    }
    let mut pids = vec![server.pid()];
    pids.extend_from_slice(server.workers());
    for pid in pids {
        match crate::host::process_affinity(pid) {
            Ok(set) if set.iter().all(|c| cpus.contains(c)) => {}
            Ok(set) => {
                return Some(format!(
                    "nginx process {pid} may run on CPUs {}, outside its placement {}",
                    cipherbench_model::topology::format_cpu_list(&set),
                    cipherbench_model::topology::format_cpu_list(cpus)
                ))
            }
            Err(e) => return Some(format!("reading nginx process {pid}'s CPUs: {e}")),
        }
    }
    None
}

/// The placement's warnings that change figures, once per run (every point of a
/// sweep shares them): a placement that is not disjoint, and no core left for the
/// rest of the machine. What only qualifies a placement (virtual CPUs, siblings not
/// reported) stays in the placement's record.
pub(crate) fn warn_placement(
    session: &mut Session,
    placement: &cipherbench_model::topology::Placement,
) {
    let matters = |w: &&String| {
        !placement.disjoint && !w.starts_with("the CPUs are virtual")
            || w.starts_with("no whole core left")
    };
    for w in placement.warnings.iter().filter(matters) {
        session.record.warn(
            "tls",
            if placement.disjoint {
                "placement"
            } else {
                "placement_shared"
            },
            format!(
                "nginx on CPUs {}, load generator on CPUs {}: {w}",
                cipherbench_model::topology::format_cpu_list(
                    placement.cpus_of("nginx").unwrap_or_default()
                ),
                cipherbench_model::topology::format_cpu_list(
                    placement.cpus_of("generator").unwrap_or_default()
                )
            ),
        );
    }
}

/// What run.json keeps of a point's nginx beyond what its [`nginx::ServerSpec`] says.
pub(crate) struct SlotRecord<'a> {
    /// The server key's type.
    pub key: KeyType,
    /// Where the key is.
    pub store: &'a keystore::KeyStore,
    /// Cores under test.
    pub cores: usize,
    /// The generator's CPUs as recorded (empty when agents make the load).
    pub generator_cpus: Vec<usize>,
    /// The placement planned for the point.
    pub placement: &'a cipherbench_model::topology::Placement,
}

/// Starts the nginx of one variant x key-store slot of a point (sweep, ramp and
/// handshake alike): restricts its master to the workers' CPUs (a failure is a
/// placement warning), notes the libraries it mapped, and gives the record run.json
/// keeps of it (the variant judged on it, the key store checked by effect) and the
/// target that fetches the `size` file from it.
pub(crate) fn start_nginx(
    session: &mut Session,
    spec: &nginx::ServerSpec<'_>,
    client: &engine::Client,
    variants: &NginxVariants,
    slot: SlotRecord<'_>,
    size: u64,
) -> Result<(
    nginx::Server,
    cipherbench_model::tls::ServerRecord,
    engine::Target,
)> {
    let server = nginx::Server::start(spec, client)?;
    let mut placement = slot.placement.clone();
    if let Some(why) = apply_placement(&server, &spec.cpus) {
        placement.disjoint = false;
        placement.warnings.push(why);
    }
    warn_placement(session, &placement);
    note_libraries(session, spec.variant, &server);
    let record = cipherbench_model::tls::ServerRecord {
        kind: "nginx".into(),
        version: Some(spec.info.version.clone()),
        library: server_library(spec.info, spec.variant),
        suite: spec.suite.openssl.to_string(),
        key: slot.key.name().to_string(),
        key_store: slot.store.name().into(),
        key_store_check: keystore::check_served(&spec.key_source, &server),
        cores: slot.cores,
        server_cpus: spec.cpus.clone(),
        generator_cpus: slot.generator_cpus,
        variant: variants.record(spec.variant, &server, &spec.suite),
        config: server.config().to_string(),
        placement: Some(placement),
    };
    let target = engine::Target {
        addr: server.addr(),
        host: "127.0.0.1".into(),
        path: nginx::Workspace::url_path(size),
        expected_len: Some(size),
    };
    Ok((server, record, target))
}

/// Records which library a started nginx's master and workers mapped (checked by
/// [`nginx::Server::start`]), and, once, the load generator's own: it runs in this
/// process, on the system's library whatever `--openssl` says (the variant and the
/// library are the server's).
pub(crate) fn note_libraries(session: &mut Session, variant: &Variant, server: &nginx::Server) {
    let env = &mut session.record.environment;
    for (part, loaded) in server.loaded() {
        crate::library::note(
            env,
            variant
                .library
                .part("tls", part, loaded, "/proc/<pid>/maps", true),
        );
    }
    let generator = crate::library::Library::system().part(
        "tls",
        "load generator (cipherbench, not swapped)",
        &crate::library::this_process(),
        "its own report",
        false,
    );
    crate::library::note(env, generator);
}

/// The library nginx runs with under `variant`: nginx's own `-V` for the system's,
/// the version the library reported for a directory's.
pub(crate) fn server_library(info: &nginx::NginxInfo, variant: &Variant) -> Option<String> {
    if variant.library.is_system() {
        info.library.clone()
    } else {
        Some(variant.library.version())
    }
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

/// The key stores of a run, set up once in its workspace (a PKCS#11 token is made
/// and the key imported here), each with what nginx is given.
pub(crate) fn key_sources(
    stores: &[keystore::KeyStore],
    workspace: &nginx::Workspace,
) -> Result<Vec<(keystore::KeyStore, keystore::KeySource)>> {
    stores
        .iter()
        .map(|s| Ok((s.clone(), keystore::prepare(s, workspace)?)))
        .collect()
}

/// Warns when an nginx given a module's key did not show that it used the module
/// ([`keystore::check_served`]), and when its variant did not take effect for nginx.
pub(crate) fn warn_server(
    session: &mut Session,
    what: &str,
    server: &cipherbench_model::tls::ServerRecord,
) {
    if let Some(c) = server.key_store_check.as_ref().filter(|c| !c.served) {
        session.record.warn(
            "tls",
            "key_store_not_effective",
            format!("{what}: key store {}: {}", server.key_store, c.explanation),
        );
    }
    campaign::warn_not_effective(&mut session.record, "tls", &server.variant, "for nginx");
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

/// The variants of a sweep or a ramp, judged by effect once per command: nginx cannot
/// run the probes, so a `cipherbench __variant-probe` child with the environment each
/// nginx gets measures them, and every nginx started is checked to run under that
/// environment (its master's and workers' `OPENSSL_ia32cap`).
pub(crate) struct NginxVariants {
    life: campaign::Variants,
    records: std::collections::BTreeMap<String, cipherbench_model::variant::VariantRecord>,
}

impl NginxVariants {
    /// Measures accel's probes and each variant's with nginx's environment.
    pub(crate) fn judge(variants: &[Variant]) -> Result<NginxVariants> {
        let life = campaign::Variants::begin("tls", variants)?;
        let records = crate::variant::stand_in_records(variants, &life.baseline, "nginx");
        Ok(NginxVariants { life, records })
    }

    /// After a server's load: the provider's tally so far in this layer, in every
    /// server record of the variant (one tally per variant, all of nginx's workers).
    pub(crate) fn note_counter(session: &mut Session, variant: &Variant) {
        if variant.counter().is_none() {
            return;
        }
        for s in results(session)
            .servers
            .iter_mut()
            .filter(|s| s.variant.name == variant.name())
        {
            variant.note_counter(&mut s.variant);
        }
    }

    /// The `OPENSSL_ia32cap` nginx runs under for a variant.
    pub(crate) fn mask(&self, variant: &Variant) -> Option<String> {
        self.life.baseline.mask(variant)
    }

    /// The record of one running nginx: the variant's, judged again with the check of
    /// that nginx's own processes.
    /// A provider or engine variant is judged on the suite's cipher: the record
    /// keeps who served it, and a fallback there is a fallback of this server.
    pub(crate) fn record(
        &self,
        variant: &Variant,
        server: &nginx::Server,
        suite: &Suite,
    ) -> cipherbench_model::variant::VariantRecord {
        let known: Vec<_> = self.records.values().cloned().collect();
        let Some(record) = self.records.get(&variant.name()) else {
            return self.life.baseline.judge(variant, None, &known, None);
        };
        let mut pids = vec![server.pid()];
        pids.extend_from_slice(server.workers());
        let mask = self.mask(variant);
        let check =
            crate::variant::check_environ("nginx's master and workers", &pids, mask.as_deref());
        let mut record =
            crate::variant::with_check(&self.life.baseline, variant, record, &known, check);
        if let Some(cipher) = suite.catalogue_cipher() {
            crate::variant::judge_layer_fallback(&mut record, &[cipher]);
        }
        record
    }
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
