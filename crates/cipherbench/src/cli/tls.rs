//! `cipherbench tls sweep|ramp|serve`: the flags, their resolution into plans, and
//! the command. Bad input is refused here, before anything starts.

use super::flags::{parse_duration, LibraryArgs};
use super::output::{measure, summary, OutputArgs};
use crate::interrupt;
use crate::results::Session;
use crate::tls::handshake::{self, Group, HandshakePlan};
use crate::tls::keystore::{self, KeyStore};
use crate::tls::serve::ServePlan;
use crate::tls::suite::{self, KeyType, Protocol, SEED_SUITES};
use crate::tls::{ExternalUrl, RampPlan, ServerTarget, SweepPlan};
use crate::variant::{self, Variant};
use anyhow::{anyhow, bail, Result};
use cipherbench_model::units::parse_size_list;
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// `cipherbench tls`.
#[derive(Debug, Args)]
pub struct TlsArgs {
    /// Which measurement.
    #[command(subcommand)]
    pub command: TlsCommand,
}

/// The two layer 3 measurements.
#[derive(Debug, Subcommand)]
pub enum TlsCommand {
    /// After Intel's nginx study: the highest throughput nginx sustains with the time
    /// to first byte within a limit, by suite, file size, core count and variant.
    Sweep(SweepArgs),
    /// After the IXP425 offload paper: attempted, successful and unsuccessful requests
    /// under an arrival rate rising linearly to a target.
    Ramp(RampArgs),
    /// Start the nginx a measurement would use and keep it running until Ctrl-C,
    /// printing its URLs (to compare other load generators against the same server).
    Serve(ServeArgs),
    /// Full TLS handshakes per second per nginx core (keep-alive off, a tiny body):
    /// RSA-2048 against ECDSA P-256, X25519 against P-256 or X25519MLKEM768, full
    /// against resumed, by variant (the public-key masks among them).
    Handshake(HandshakeArgs),
}

/// `cipherbench tls handshake`.
#[derive(Debug, Args)]
pub struct HandshakeArgs {
    /// Protocol: tls1.3 (TLS_AES_128_GCM_SHA256) or tls1.2 (ECDHE-RSA- or
    /// ECDHE-ECDSA-AES128-GCM-SHA256, by key).
    #[arg(long, default_value = "tls1.3")]
    pub protocol: String,
    /// Server keys: rsa2048, ecdsa-p256, ml-dsa-65 (OpenSSL 3.5 and later, TLS 1.3).
    #[arg(long, value_name = "LIST", default_value = "rsa2048,ecdsa-p256")]
    pub keys: String,
    /// Key-exchange groups, as OpenSSL names them: x25519, p-256, p-384, x448, and
    /// with OpenSSL 3.5 or later X25519MLKEM768, SecP256r1MLKEM768, MLKEM768, ...
    /// (a group the load generator's library lacks is refused, naming those it has).
    #[arg(long, value_name = "LIST", default_value = "x25519,p-256")]
    pub groups: String,
    /// full (no session cache, no tickets) and/or resumed (tickets and cache on).
    #[arg(long, value_name = "LIST", default_value = "full,resumed")]
    pub sessions: String,
    /// Where nginx's key is.
    #[command(flatten)]
    pub key_store: KeyStoreArgs,
    /// Variants of the server: accel, noaesni, noifma, noadx, nopkaccel, ia32cap:MASK.
    #[arg(long, value_name = "LIST", default_value = "accel,nopkaccel")]
    pub variants: String,
    /// nginx workers (cores under test).
    #[arg(long, default_value_t = 1)]
    pub cores: usize,
    /// Size of the file each request fetches (tiny: the handshake is the work).
    #[arg(long, default_value = "64B")]
    pub size: String,
    /// The measured window at the chosen concurrency.
    #[arg(long, default_value = "4s")]
    pub window: String,
    /// Rounds the window is cut into where a point has several variants: their
    /// nginx run side by side and take turns (A B, B A, A B). Default: 3, fewer if
    /// the window would give a round under 500 ms.
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Each probe's window while searching the concurrency.
    #[arg(long, default_value = "1s")]
    pub probe: String,
    /// Warm-up before every window.
    #[arg(long, default_value = "300ms")]
    pub warmup: String,
    /// Limit on the maximum time to first byte.
    #[arg(long, default_value = "2s")]
    pub limit: String,
    /// Highest concurrency the search tries.
    #[arg(long, default_value_t = 256)]
    pub max_concurrency: usize,
    /// Measure at this concurrency only, without searching.
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// The nginx binary (default: nginx on PATH, else /usr/sbin/nginx).
    #[arg(long, value_name = "PATH")]
    pub nginx: Option<PathBuf>,
    /// Port for nginx on 127.0.0.1 (default: a free one).
    #[arg(long)]
    pub port: Option<u16>,
    /// CPUs for the load generator, a list like 0-3,8,10-11, each CPU once
    /// (default: every CPU not given to nginx).
    #[arg(long, value_name = "LIST")]
    pub generator_cpus: Option<String>,
    /// Print the results as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The library under test (nginx's).
    #[command(flatten)]
    pub library: LibraryArgs,
    /// Where results go.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Parses `--keys`: each once, in order; ML-DSA only in TLS 1.3 and only where the
/// library cipherbench runs on has it: it makes the certificate, and with one
/// `--openssl DIR` it has started itself again under DIR before this runs (with
/// several libraries it stays on the system's).
fn parse_keys(text: &str, protocol: Protocol) -> Result<Vec<KeyType>> {
    let mut keys = Vec::new();
    for k in text.split(',') {
        let k = KeyType::parse(k).map_err(|e| anyhow!("--keys: {e}"))?;
        if protocol == Protocol::Tls12 && !k.in_tls12() {
            bail!(
                "--keys {}: ML-DSA signs in TLS 1.3 only (no TLS 1.2 suite names it): drop --protocol tls1.2",
                k.name()
            );
        }
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    if keys.contains(&KeyType::MlDsa65) {
        if let Err(reason) =
            cipherbench_crypto::pk::available(cipherbench_crypto::pk::PkAlgorithm::MlDsa65)
        {
            bail!(
                "--keys ml-dsa-65: {} has no ML-DSA ({}; OpenSSL has it since 3.5), and cipherbench makes the certificate with it: give one such build with --openssl DIR",
                cipherbench_crypto::info::library_version(),
                reason.split(':').next_back().unwrap_or(&reason).trim()
            );
        }
    }
    Ok(keys)
}

/// Where nginx's key is: `tls handshake`, `tls sweep` and `tls ramp` alike.
#[derive(Debug, Args)]
pub struct KeyStoreArgs {
    /// Where nginx's key is: file, pkcs11 (a PKCS#11 module through OpenSSL's pkcs11
    /// engine; nginx then runs as one process, so at one core), or file,pkcs11 to
    /// measure each point with both and compare them.
    #[arg(long, value_name = "LIST", default_value = "file")]
    pub key_store: String,
    /// The PKCS#11 module for --key-store pkcs11 (default: SoftHSM2's); its token is
    /// initialised and the key imported through it.
    #[arg(long, value_name = "PATH")]
    pub pkcs11_module: Option<PathBuf>,
}

impl KeyStoreArgs {
    /// The stores, file first, each checked it can be set up here.
    fn stores(&self) -> Result<Vec<KeyStore>> {
        keystore::parse(&self.key_store, self.pkcs11_module.as_deref())
    }
}

fn any_single_process(stores: &[KeyStore]) -> bool {
    stores.iter().any(KeyStore::single_process)
}

impl HandshakeArgs {
    /// Resolves the flags.
    pub fn plan(&self) -> Result<HandshakePlan> {
        let protocol = match self.protocol.trim().to_ascii_lowercase().as_str() {
            "tls1.3" | "tlsv1.3" | "1.3" => Protocol::Tls13,
            "tls1.2" | "tlsv1.2" | "1.2" => Protocol::Tls12,
            t => bail!("--protocol: unknown '{t}': use tls1.3 or tls1.2"),
        };
        let keys = parse_keys(&self.keys, protocol)?;
        let mut groups = Vec::new();
        for g in self.groups.split(',') {
            let g = Group::parse(g)?;
            g.check_offered(protocol)?;
            if !groups.contains(&g) {
                groups.push(g);
            }
        }
        let sessions = handshake::parse_sessions(&self.sessions)?;
        if self.cores == 0 || self.cores > 1024 {
            bail!("--cores must be between 1 and 1024");
        }
        if self.port == Some(0) {
            bail!("--port must be between 1 and 65535 (leave it out for a free one)");
        }
        if self.max_concurrency == 0 || self.max_concurrency > 100_000 {
            bail!("--max-concurrency must be between 1 and 100000");
        }
        let size = sizes(&self.size, 1 << 20)?;
        if size.len() != 1 {
            bail!("--size takes one size");
        }
        let key_stores = self.key_store.stores()?;
        if self.cores > 1 && any_single_process(&key_stores) {
            return Err(keystore::one_process_only("use --cores 1"));
        }
        if any_single_process(&key_stores) && keys.contains(&KeyType::MlDsa65) {
            bail!("--keys ml-dsa-65 with --key-store pkcs11: the token is written with softhsm2-util, which imports RSA and EC keys only; measure ML-DSA with --key-store file");
        }
        let window = flag_duration("window", &self.window, Duration::from_millis(100))?;
        let sweep = SweepPlan {
            suites: Vec::new(),
            sizes: size.clone(),
            cores: vec![self.cores],
            variants: Vec::new(),
            key: keys[0],
            key_stores: key_stores.clone(),
            window,
            rounds: rounds(self.rounds, window)?,
            probe: flag_duration("probe", &self.probe, Duration::from_millis(100))?,
            warmup: flag_duration("warmup", &self.warmup, Duration::ZERO)?,
            limit: flag_duration("limit", &self.limit, Duration::from_millis(1))?,
            timeout: Duration::from_secs(30),
            drain: Duration::from_secs(5),
            max_concurrency: self.max_concurrency,
            fixed_concurrency: match self.concurrency {
                Some(c) if c == 0 || c > 100_000 => {
                    bail!("--concurrency must be between 1 and 100000")
                }
                c => c,
            },
            fixed_rate: None,
            resumption: false,
            generator_cpus: generator_cpus(self.generator_cpus.as_deref())?,
            target: ServerTarget::Nginx {
                binary: self.nginx.clone(),
                port: self.port,
            },
            agents: None,
            // Handshakes: small responses, read whole.
            verify: crate::tls::engine::sampled::Verify::All,
            plain_http: false,
        };
        let mut variants: Vec<Variant> = Vec::new();
        for v in variant::parse_variants(&self.variants)? {
            if !variants.contains(&v) {
                variants.push(v);
            }
        }
        let variants = variant::cross(&variants, &self.library.libraries()?)?;
        keystore::check_libraries(&variants, self.nginx.as_deref(), &key_stores)?;
        Ok(HandshakePlan {
            protocol,
            keys,
            groups,
            sessions,
            key_stores,
            variants,
            cores: self.cores,
            size: size[0],
            sweep,
            nginx: self.nginx.clone(),
            port: self.port,
        })
    }
}

/// Flags both measurements share.
#[derive(Debug, Args)]
pub struct CommonArgs {
    /// Suites, comma-separated, by OpenSSL or IANA name (default: the seeds'
    /// AES128-SHA,AES128-GCM-SHA256; ECDHE-RSA-*, TLS 1.3 and ChaCha20-Poly1305 suites
    /// by name).
    #[arg(long, value_name = "LIST")]
    pub suites: Option<String>,
    /// Variants of the server: accel, noaesni, ia32cap:MASK, provider:CONF or engine:ID.
    #[arg(long, value_name = "LIST", default_value = "accel,noaesni")]
    pub variants: String,
    /// Server key: rsa2048 or ecdsa-p256.
    #[arg(long, default_value = "rsa2048")]
    pub key: String,
    /// The nginx binary (default: nginx on PATH, else /usr/sbin/nginx).
    #[arg(long, value_name = "PATH")]
    pub nginx: Option<PathBuf>,
    /// Port for nginx on 127.0.0.1 (default: a free one). A sweep point's variants
    /// (and key stores) run side by side, on this port and the ones after it.
    #[arg(long)]
    pub port: Option<u16>,
    /// Load a server you run instead of starting nginx: https://HOST[:PORT]/PATH.
    #[arg(long, value_name = "URL", conflicts_with_all = ["nginx", "port"])]
    pub server: Option<String>,
    /// Allow --server to name a host other than this machine.
    #[arg(long)]
    pub allow_remote: bool,
    /// CPUs for the load generator, one thread each: a list like 0-3,8,10-11, each
    /// CPU once, leaving nginx its cores (default: every CPU not given to nginx).
    #[arg(long, value_name = "LIST")]
    pub generator_cpus: Option<String>,
    /// Generate the load on these hosts instead of this machine: `cipherbench agent`
    /// is started on each with OpenSSH (your ssh config, keys and known_hosts; the
    /// same build must be there: `cipherbench deploy` puts it), comma-separated
    /// `[user@]host`. The server listens on the address each agent's ssh comes from.
    #[arg(long, value_name = "HOSTS")]
    pub agents: Option<String>,
    /// ssh client config for --agents (ssh -F FILE; default: ssh's own).
    #[arg(long, value_name = "FILE", requires = "agents")]
    pub ssh_config: Option<PathBuf>,
    /// The cipherbench binary on the agents' hosts (default: this build where
    /// `cipherbench deploy` put it, else cipherbench on their PATH).
    #[arg(long, value_name = "PATH", requires = "agents")]
    pub agent_path: Option<String>,
    /// CPUs each agent's generator runs on, one thread each (default: every CPU the
    /// agent may use).
    #[arg(long, value_name = "LIST", requires = "agents")]
    pub agent_cpus: Option<String>,
    /// Print the results as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Where nginx's key is.
    #[command(flatten)]
    pub key_store: KeyStoreArgs,
    /// The library under test (nginx's).
    #[command(flatten)]
    pub library: LibraryArgs,
    /// Where results go.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `cipherbench tls sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Shared flags.
    #[command(flatten)]
    pub common: CommonArgs,
    /// File sizes, comma-separated (Intel's nginx study: 1MiB up to 4GiB by powers of 4).
    #[arg(long, value_name = "LIST", default_value = "1MiB,16MiB")]
    pub sizes: String,
    /// nginx worker counts (cores under test), comma-separated; the generator gets
    /// the remaining cores.
    #[arg(long, value_name = "LIST", default_value = "1")]
    pub cores: String,
    /// The measured window at the chosen concurrency (Intel's nginx study: 2m).
    #[arg(long, default_value = "10s")]
    pub window: String,
    /// Rounds the window is cut into where a point has several variants (or key
    /// stores): their nginx run side by side and take turns (A B, B A, A B), so a
    /// drift of the machine reaches each alike. Default: 3, fewer if the window
    /// would give a round under 500 ms.
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Each probe's window while searching the concurrency.
    #[arg(long, default_value = "2s")]
    pub probe: String,
    /// Warm-up before every window.
    #[arg(long, default_value = "500ms")]
    pub warmup: String,
    /// Limit on the maximum time to first byte (Intel's nginx study: 2s).
    #[arg(long, default_value = "2s")]
    pub limit: String,
    /// Per-request timeout.
    #[arg(long, default_value = "10m")]
    pub timeout: String,
    /// Highest concurrency the search tries.
    #[arg(long, default_value_t = 1024)]
    pub max_concurrency: usize,
    /// Resume TLS sessions instead of a full handshake per request.
    #[arg(long)]
    pub resumption: bool,
    /// Measure at this concurrency only, without searching.
    #[arg(long, conflicts_with = "rate")]
    pub concurrency: Option<usize>,
    /// Measure open loop at this constant rate, requests per second, without searching:
    /// requests start on schedule whether or not earlier ones finished (the warm-up runs
    /// at the same rate, uncounted), so nginx's CPU per response can be compared with
    /// another client's at the same load. The window must hold one request or more
    /// (rate x --window >= 1). Variants are then compared by nginx's CPU, not by
    /// throughput (the rate sets that).
    #[arg(long, value_name = "REQ_PER_S")]
    pub rate: Option<f64>,
    /// How the generator checks responses.
    #[command(flatten)]
    pub verify: VerifyArgs,
    /// Also measure the ceiling of each size and core count: the same nginx on the
    /// same cores serving the same file over plain HTTP, with `sendfile` on and off
    /// (off: nginx copies the file through its buffers, as under TLS without kTLS),
    /// in the rounds of the first suite's point. The report says what share of it
    /// TLS keeps. Not with --server, --agents or --rate.
    #[arg(long, conflicts_with_all = ["rate", "server", "agents"])]
    pub plain_http: bool,
}

/// `--verify` and `--sample-rate` (sweep and ramp).
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// How the load generator checks responses: `sampled` reads responses of 1 MiB
    /// or more record by record, opening (authenticating and decrypting) the head's,
    /// the short ones, the last, a sample of the rest (--sample-rate) and every
    /// record of one response in 64, compares them with the file, and lets the
    /// kernel discard the others unread, so it costs a fraction of the server it
    /// loads; `all` decrypts every byte through OpenSSL, as wrk does. AEAD suites
    /// only; the others are read whole either way. Agents read the same way.
    #[arg(long, value_name = "all|sampled", default_value = "sampled")]
    pub verify: String,
    /// With --verify sampled: the share of a response's full body records opened.
    #[arg(long, value_name = "SHARE", default_value_t = 1.0 / 16.0)]
    pub sample_rate: f64,
}

impl VerifyArgs {
    /// The flags, resolved.
    fn resolve(&self) -> Result<crate::tls::engine::sampled::Verify> {
        verify(&self.verify, self.sample_rate)
    }
}

/// `--verify` and `--sample-rate`, resolved.
fn verify(mode: &str, rate: f64) -> Result<crate::tls::engine::sampled::Verify> {
    use crate::tls::engine::sampled::{Sampling, Verify, DEFAULT_SAMPLING};
    if !(rate > 0.0 && rate <= 1.0) {
        bail!("--sample-rate must be above 0 and at most 1 (the share of records opened)");
    }
    match mode {
        "all" => Ok(Verify::All),
        "sampled" => Ok(Verify::Sampled(Sampling {
            rate,
            whole: DEFAULT_SAMPLING.whole,
        })),
        other => bail!("--verify {other}: use all or sampled"),
    }
}

/// `cipherbench tls serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The one suite.
    #[arg(long, default_value = "AES128-GCM-SHA256")]
    pub suite: String,
    /// File sizes to serve, comma-separated.
    #[arg(long, value_name = "LIST", default_value = "16MiB")]
    pub sizes: String,
    /// nginx worker count (pinned to the first CPUs).
    #[arg(long, default_value_t = 1)]
    pub cores: usize,
    /// Variant: accel, noaesni, ia32cap:MASK, provider:CONF or engine:ID.
    #[arg(long, default_value = "accel")]
    pub variant: String,
    /// Server key: rsa2048 or ecdsa-p256.
    #[arg(long, default_value = "rsa2048")]
    pub key: String,
    /// The nginx binary.
    #[arg(long, value_name = "PATH")]
    pub nginx: Option<PathBuf>,
    /// Port on 127.0.0.1 (default: a free one).
    #[arg(long)]
    pub port: Option<u16>,
    /// The library nginx runs with (one).
    #[command(flatten)]
    pub library: LibraryArgs,
}

impl ServeArgs {
    /// Resolves the flags.
    pub fn plan(&self) -> Result<ServePlan> {
        let key = KeyType::parse(&self.key)?;
        let suites = suite::parse_suites(&self.suite, key)?;
        if suites.len() != 1 {
            bail!("--suite takes exactly one suite");
        }
        if self.port == Some(0) {
            bail!("--port must be between 1 and 65535 (leave it out for a free one)");
        }
        let sizes = sizes(&self.sizes, 64 * (1 << 30))?;
        let cores = parse_cores(&self.cores.to_string())?[0];
        let variant = Variant::parse(&self.variant)?;
        if self
            .library
            .openssl
            .as_deref()
            .is_some_and(|t| t.contains(','))
        {
            bail!("--openssl: tls serve runs one nginx; give one library");
        }
        let library = self.library.libraries()?.remove(0);
        Ok(ServePlan {
            suite: suites[0],
            sizes,
            cores,
            variant: variant.with_library(&library),
            key,
            nginx: self.nginx.clone(),
            port: self.port,
        })
    }
}

/// `cipherbench tls ramp`.
#[derive(Debug, Args)]
pub struct RampArgs {
    /// Shared flags.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Response sizes, comma-separated (the IXP425 offload paper: 1 KB and 50 KB).
    #[arg(long, value_name = "LIST", default_value = "1KiB,50KiB")]
    pub sizes: String,
    /// nginx worker count (cores under test).
    #[arg(long, default_value_t = 1)]
    pub cores: usize,
    /// Rate reached at the end of the ramp, requests per second.
    #[arg(long, default_value_t = 50.0)]
    pub rate: f64,
    /// Ramp length.
    #[arg(long, default_value = "60s")]
    pub duration: String,
    /// A request not finished this long after its scheduled start is unsuccessful.
    #[arg(long, default_value = "2s")]
    pub timeout: String,
    /// How the generator checks responses.
    #[command(flatten)]
    pub verify: VerifyArgs,
}

fn flag_duration(name: &str, text: &str, min: Duration) -> Result<Duration> {
    let d = parse_duration(text).map_err(|e| anyhow!("--{name}: {e}"))?;
    if d < min {
        bail!("--{name} must be at least {min:?}");
    }
    Ok(d)
}

fn sizes(text: &str, max: u64) -> Result<Vec<u64>> {
    let sizes: Vec<u64> = parse_size_list(text)
        .map_err(|e| anyhow!("--sizes: {e}"))?
        .into_iter()
        .map(|s| s.bytes())
        .collect();
    if let Some(bad) = sizes.iter().find(|&&s| s == 0 || s > max) {
        bail!(
            "--sizes: {bad} bytes is out of range (1 byte to {})",
            cipherbench_model::ByteSize(max)
        );
    }
    let mut out = Vec::new();
    for s in sizes {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    Ok(out)
}

impl CommonArgs {
    fn key(&self) -> Result<KeyType> {
        KeyType::parse(&self.key)
    }

    fn suites(&self, key: KeyType) -> Result<Vec<suite::Suite>> {
        let text = self.suites.clone().unwrap_or_else(|| SEED_SUITES.join(","));
        suite::parse_suites(&text, key)
    }

    fn target(&self) -> Result<ServerTarget> {
        match &self.server {
            Some(url) => Ok(ServerTarget::External(ExternalUrl::parse(
                url,
                self.allow_remote,
            )?)),
            None => {
                if self.allow_remote {
                    bail!("--allow-remote only applies with --server URL");
                }
                if self.port == Some(0) {
                    bail!("--port must be between 1 and 65535 (leave it out for a free one)");
                }
                Ok(ServerTarget::Nginx {
                    binary: self.nginx.clone(),
                    port: self.port,
                })
            }
        }
    }

    fn agents(&self) -> Result<Option<crate::agent::fleet::Launch>> {
        let Some(hosts) = &self.agents else {
            return Ok(None);
        };
        if self.generator_cpus.is_some() {
            bail!("--generator-cpus applies to this machine's generator; with --agents each agent uses its own CPUs");
        }
        crate::agent::fleet::Launch::parse(
            hosts,
            self.ssh_config.clone(),
            self.agent_path.as_deref(),
            self.agent_cpus.as_deref(),
        )
        .map(Some)
    }

    fn generator_cpus(&self) -> Result<Option<Vec<usize>>> {
        generator_cpus(self.generator_cpus.as_deref())
    }

    /// The key stores; a PKCS#11 module only for the nginx cipherbench starts.
    fn key_stores(&self) -> Result<Vec<KeyStore>> {
        let stores = self.key_store.stores()?;
        if self.server.is_some() && any_single_process(&stores) {
            bail!("--key-store pkcs11 applies to the nginx cipherbench starts, not to a server given with --server");
        }
        Ok(stores)
    }

    /// The variants, each once, under every library of `--openssl` (resolved here,
    /// so call it last: it starts a child under each directory).
    fn variants(&self) -> Result<Vec<Variant>> {
        let mut out: Vec<Variant> = Vec::new();
        for v in variant::parse_variants(&self.variants)? {
            if !out.contains(&v) {
                out.push(v);
            }
        }
        if self.server.is_some() && self.library.openssl.is_some() {
            bail!("--openssl applies to the nginx cipherbench starts, not to a server given with --server");
        }
        let variants = variant::cross(&out, &self.library.libraries()?)?;
        keystore::check_libraries(&variants, self.nginx.as_deref(), &self.key_stores()?)?;
        Ok(variants)
    }
}

/// Parses `--generator-cpus`: CPUs of this process, each once.
fn generator_cpus(text: Option<&str>) -> Result<Option<Vec<usize>>> {
    let Some(text) = text else {
        return Ok(None);
    };
    parse_generator_cpus(text, &crate::host::allowed_cpus()).map(Some)
}

/// A taskset-style CPU list (`0-3,8,10-11`) of CPUs in `allowed`, in the order given;
/// a CPU given twice (`0,0`, `0-2,1`) is refused, as are an empty list and anything
/// that is not a number or a range.
pub(crate) fn parse_generator_cpus(text: &str, allowed: &[usize]) -> Result<Vec<usize>> {
    const FORM: &str = "give CPU numbers and ranges, e.g. 0-3,8,10-11";
    if text.trim().is_empty() {
        bail!("--generator-cpus: empty: {FORM}");
    }
    let mut out = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        if part.is_empty() {
            bail!("--generator-cpus: '{text}' has an empty entry: {FORM}");
        }
        // The kernel's list syntax, one entry at a time (so that a repeat is seen).
        let Some(cpus) = cipherbench_model::topology::parse_cpu_list(part) else {
            let ends = part
                .split_once('-')
                .map(|(a, b)| (a.trim().parse::<usize>(), b.trim().parse::<usize>()));
            if let Some((Ok(a), Ok(b))) = ends {
                if a > b {
                    bail!("--generator-cpus: range '{part}' runs backwards: {FORM}");
                }
            }
            bail!("--generator-cpus: '{part}' is not a CPU number or range: {FORM}");
        };
        for c in cpus {
            if !allowed.contains(&c) {
                bail!(
                    "--generator-cpus: CPU {c} is not one of this process's CPUs ({})",
                    cipherbench_model::topology::format_cpu_list(allowed)
                );
            }
            if out.contains(&c) {
                bail!("--generator-cpus: CPU {c} is given twice in '{text}': name each CPU once");
            }
            out.push(c);
        }
    }
    Ok(out)
}

/// An open-loop window must hold at least one request at its rate.
fn check_rate_window(rate: f64, window: Duration) -> Result<()> {
    if rate * window.as_secs_f64() < 1.0 {
        bail!(
            "--rate {rate} over --window {window:?} is {:.2} request(s): the window holds under one request at this rate: raise --rate or --window",
            rate * window.as_secs_f64()
        );
    }
    Ok(())
}

/// `--generator-cpus` checked against every core count the sweep will place (the
/// ones this machine can split, or the smallest if none), before anything starts:
/// the generator taking the CPUs nginx needs is said as that.
fn check_generator_room(cores: &[usize], generator: &[usize]) -> Result<()> {
    let topology = crate::machine::topology::this_machine(None);
    let n = topology.allowed.len();
    let smallest = cores.iter().copied().min().unwrap_or(1);
    for &c in cores.iter().filter(|&&c| c < n || c == smallest) {
        cipherbench_model::topology::place_tls(&topology, c, Some(generator))
            .map_err(|e| anyhow!(e))?;
    }
    Ok(())
}

fn parse_cores(text: &str) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for t in text.split(',') {
        let n = t
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|&n| (1..=1024).contains(&n))
            .ok_or_else(|| anyhow!("--cores: bad core count '{}': use numbers from 1", t.trim()))?;
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Ok(out)
}

/// Shortest round a default `--rounds` gives.
const MIN_DEFAULT_ROUND: Duration = Duration::from_millis(500);
/// Shortest round `--rounds` may ask for.
const MIN_ROUND: Duration = Duration::from_millis(100);

/// The sweep's rounds: `--rounds` checked against the window, or the default.
fn rounds(asked: Option<usize>, window: Duration) -> Result<usize> {
    let fits = |min: Duration| (window.as_nanos() / min.as_nanos()).max(1) as usize;
    match asked {
        None => Ok(3.min(fits(MIN_DEFAULT_ROUND))),
        Some(r) if r == 0 || r > fits(MIN_ROUND) => bail!(
            "--rounds must be between 1 and {} for --window {:?} (each round at least {:?})",
            fits(MIN_ROUND),
            window,
            MIN_ROUND
        ),
        Some(r) => Ok(r),
    }
}

impl SweepArgs {
    /// Resolves the flags.
    pub fn plan(&self) -> Result<SweepPlan> {
        let key = self.common.key()?;
        let suites = self.common.suites(key)?;
        let target = self.common.target()?;
        if matches!(target, ServerTarget::External(_)) && suites.len() != 1 {
            bail!("--server measures one suite: pass --suites with exactly one");
        }
        if self.max_concurrency == 0 || self.max_concurrency > 100_000 {
            bail!("--max-concurrency must be between 1 and 100000");
        }
        let window = flag_duration("window", &self.window, Duration::from_millis(100))?;
        let cores = parse_cores(&self.cores)?;
        let key_stores = self.common.key_stores()?;
        keystore::check_plan(
            &key_stores,
            &suites,
            &cores,
            "include 1 in --cores (that store is measured at 1 core only)",
        )?;
        let mut plan = SweepPlan {
            suites,
            sizes: sizes(&self.sizes, 64 * (1 << 30))?,
            cores,
            variants: Vec::new(),
            key,
            key_stores,
            window,
            rounds: rounds(self.rounds, window)?,
            probe: flag_duration("probe", &self.probe, Duration::from_millis(100))?,
            warmup: flag_duration("warmup", &self.warmup, Duration::ZERO)?,
            limit: flag_duration("limit", &self.limit, Duration::from_millis(1))?,
            timeout: flag_duration("timeout", &self.timeout, Duration::from_millis(10))?,
            drain: Duration::from_secs(5),
            max_concurrency: self.max_concurrency,
            fixed_concurrency: match self.concurrency {
                Some(c) if c == 0 || c > 100_000 => {
                    bail!("--concurrency must be between 1 and 100000")
                }
                c => c,
            },
            fixed_rate: match self.rate {
                Some(r) if !(r > 0.0 && r <= 1_000_000.0) => {
                    bail!("--rate must be above 0 and at most 1000000 requests per second")
                }
                r => r,
            },
            resumption: self.resumption,
            generator_cpus: self.common.generator_cpus()?,
            target,
            agents: self.common.agents()?,
            verify: self.verify.resolve()?,
            plain_http: self.plain_http,
        };
        if let Some(rate) = plan.fixed_rate {
            check_rate_window(rate, plan.window)?;
        }
        if let (ServerTarget::Nginx { .. }, Some(g)) = (&plan.target, &plan.generator_cpus) {
            check_generator_room(&plan.cores, g)?;
        }
        plan.variants = self.common.variants()?;
        Ok(plan)
    }
}

impl RampArgs {
    /// Resolves the flags.
    pub fn plan(&self) -> Result<RampPlan> {
        let key = self.common.key()?;
        let suites = self.common.suites(key)?;
        let target = self.common.target()?;
        if matches!(target, ServerTarget::External(_)) && suites.len() != 1 {
            bail!("--server measures one suite: pass --suites with exactly one");
        }
        if !(self.rate > 0.0 && self.rate <= 1_000_000.0) {
            bail!("--rate must be above 0 and at most 1000000 requests per second");
        }
        if self.cores == 0 || self.cores > 1024 {
            bail!("--cores must be between 1 and 1024");
        }
        let key_stores = self.common.key_stores()?;
        keystore::check_plan(&key_stores, &suites, &[self.cores], "use --cores 1")?;
        let mut plan = RampPlan {
            suites,
            sizes: sizes(&self.sizes, 1 << 30)?,
            variants: Vec::new(),
            cores: self.cores,
            key,
            key_stores,
            target_rate: self.rate,
            duration: flag_duration("duration", &self.duration, Duration::from_millis(100))?,
            timeout: flag_duration("timeout", &self.timeout, Duration::from_millis(10))?,
            generator_cpus: self.common.generator_cpus()?,
            target,
            agents: self.common.agents()?,
            verify: self.verify.resolve()?,
        };
        plan.variants = self.common.variants()?;
        Ok(plan)
    }
}

/// `cipherbench tls sweep|ramp|serve`: resolves the plan first (bad input fails
/// before anything starts), then measures or serves.
pub fn command(args: &TlsArgs, quiet: bool) -> Result<ExitCode> {
    // The load generator runs in this process: with one library named, on it.
    let library = match &args.command {
        TlsCommand::Sweep(a) => Some(&a.common.library),
        TlsCommand::Ramp(a) => Some(&a.common.library),
        TlsCommand::Handshake(a) => Some(&a.library),
        TlsCommand::Serve(_) => None,
    };
    if let Some(library) = library {
        if let [only] = library.libraries()?.as_slice() {
            crate::library::run_under(only)?;
        }
    }
    match &args.command {
        TlsCommand::Sweep(a) => {
            let plan = a.plan()?;
            let libraries = variant::libraries_of(&plan.variants);
            measure_tls(&a.common, quiet, &libraries, |s| {
                crate::tls::sweep::run(&plan, s)
            })
        }
        TlsCommand::Ramp(a) => {
            let plan = a.plan()?;
            let libraries = variant::libraries_of(&plan.variants);
            measure_tls(&a.common, quiet, &libraries, |s| {
                crate::tls::ramp::run(&plan, s)
            })
        }
        TlsCommand::Handshake(a) => {
            let plan = a.plan()?;
            let libraries = variant::libraries_of(&plan.variants);
            measure(
                &a.output,
                "custom",
                quiet,
                &libraries,
                false,
                |s| {
                    s.record
                        .environment
                        .tools
                        .extend(crate::probe::tool_versions(&["nginx"]));
                    crate::tls::handshake::run(&plan, s)
                },
                |s| {
                    summary(a.json, s.record.tls.as_ref(), |t| {
                        cipherbench_report::tls::text(t, s.record.target_gbps)
                    })
                },
            )
        }
        TlsCommand::Serve(a) => {
            let plan = a.plan()?;
            interrupt::install();
            crate::tls::serve::run(&plan)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A sweep or a ramp: nginx's version joins the environment record, then the run
/// and the summary.
fn measure_tls(
    common: &CommonArgs,
    quiet: bool,
    libraries: &[crate::library::Library],
    run: impl FnOnce(&mut Session) -> Result<()>,
) -> Result<ExitCode> {
    measure(
        &common.output,
        "custom",
        quiet,
        libraries,
        false,
        |s| {
            s.record
                .environment
                .tools
                .extend(crate::probe::tool_versions(&["nginx"]));
            run(s)
        },
        |s| {
            summary(common.json, s.record.tls.as_ref(), |t| {
                cipherbench_report::tls::text(t, s.record.target_gbps)
            })
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_cpus_take_taskset_lists_and_refuse_repeats_and_junk() {
        let allowed: Vec<usize> = (0..16).collect();
        let ok = |t: &str| parse_generator_cpus(t, &allowed).unwrap();
        let err = |t: &str| parse_generator_cpus(t, &allowed).unwrap_err().to_string();
        assert_eq!(ok("0-1"), vec![0, 1]);
        assert_eq!(ok("0-3,8,10-11"), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(ok(" 5 , 2 "), vec![5, 2]);
        assert!(
            err("0,0").contains("CPU 0 is given twice"),
            "{}",
            err("0,0")
        );
        assert!(err("0-2,1").contains("CPU 1 is given twice"));
        for bad in ["a", "1-b", "0,,1", "-1"] {
            assert!(err(bad).contains("e.g. 0-3,8,10-11"), "{bad}: {}", err(bad));
        }
        assert!(
            err("").starts_with("--generator-cpus: empty"),
            "{}",
            err("")
        );
        assert!(err("  ").contains("e.g. 0-3,8,10-11"));
        assert!(err("3-1").contains("runs backwards"));
        // A range too long to be CPUs is junk, not a long allocation.
        assert!(err("0-99999999999").contains("e.g. 0-3,8,10-11"));
        assert!(
            err("15-16").contains("CPU 16 is not one of this process's CPUs (0-15)"),
            "{}",
            err("15-16")
        );
    }

    #[test]
    fn an_open_loop_window_must_hold_a_request() {
        let e = check_rate_window(0.5, Duration::from_secs(1))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the window holds under one request at this rate: raise --rate or --window"),
            "{e}"
        );
        assert!(check_rate_window(0.5, Duration::from_secs(2)).is_ok());
        assert!(check_rate_window(200.0, Duration::from_millis(100)).is_ok());
    }

    #[test]
    fn rounds_default_to_three_unless_the_window_is_too_short_for_them() {
        assert_eq!(rounds(None, Duration::from_secs(4)).unwrap(), 3);
        assert_eq!(rounds(None, Duration::from_millis(1200)).unwrap(), 2);
        assert_eq!(rounds(None, Duration::from_millis(300)).unwrap(), 1);
        assert_eq!(rounds(Some(5), Duration::from_secs(1)).unwrap(), 5);
        for bad in [0, 11] {
            let e = rounds(Some(bad), Duration::from_secs(1)).unwrap_err();
            assert!(
                e.to_string()
                    .starts_with("--rounds must be between 1 and 10"),
                "{e}"
            );
        }
    }
}
