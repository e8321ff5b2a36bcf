//! The server under test: a real nginx, started by cipherbench from a generated
//! config in a per-run temporary directory, and stopped (with the directory removed)
//! on every exit path.
//!
//! - [`Workspace`]: the temporary directory with the generated certificate and the
//!   incompressible files to serve; removed when dropped, or by the next run if
//!   this one is killed (`lifetime.rs`).
//! - [`render_config`]: `nginx.conf` as a pure function of its settings (tested on
//!   its text).
//! - [`Server`]: one running nginx (through the supervisor: own process group, stopped
//!   on drop), ready when a TLS handshake with the asked-for suite succeeds, with its
//!   workers' pids for CPU sampling and its request counter (`stub_status` on a Unix
//!   socket) for cross-checking what the generator counted. Once ready, the
//!   libraries its master and workers mapped are held to the variant's library.
//!
//! It does not measure: the sweep and the ramp drive it.

use super::engine::{self, Client, Target};
use super::keystore::KeySource;
use super::suite::{KeyType, Protocol, Suite};
use crate::library::Loaded;
use crate::lifetime::RunDir;
use crate::supervisor::{wait_until, Child, Spawn};
use crate::variant::Variant;
use anyhow::{anyhow, bail, Context, Result};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long nginx gets to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(15);
/// Attempts at a free port when cipherbench picks it (another program may take the
/// port between our check and nginx's bind).
const PORT_ATTEMPTS: usize = 4;

/// Where nginx is: `--nginx PATH`, else PATH, else Debian's `/usr/sbin/nginx`.
pub fn resolve_nginx(flag: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = flag {
        if p.is_file() {
            return Ok(p.to_path_buf());
        }
        bail!(
            "nginx not found at {}: install the distribution's nginx package (`cipherbench doctor` gives the command) or pass --nginx with the path of an nginx binary",
            p.display()
        );
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let candidates = std::env::split_paths(&path).map(|d| d.join("nginx")).chain(
        [
            "/usr/sbin/nginx",
            "/usr/local/sbin/nginx",
            "/usr/local/nginx/sbin/nginx",
        ]
        .map(PathBuf::from),
    );
    for c in candidates {
        if c.is_file() {
            return Ok(c);
        }
    }
    bail!("nginx is not installed: install the distribution's nginx package (`cipherbench doctor` gives the command), or pass --nginx with the path of an nginx binary")
}

/// What `nginx -V` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NginxInfo {
    /// `nginx version: nginx/1.22.1`.
    pub version: String,
    /// The OpenSSL it runs with (or was built with).
    pub library: Option<String>,
    /// Built with the SSL module.
    pub ssl: bool,
    /// Built with the stub_status module.
    pub stub_status: bool,
}

/// Parses `nginx -V` output.
pub fn parse_nginx_v(text: &str) -> NginxInfo {
    let version = text
        .lines()
        .find(|l| l.starts_with("nginx version"))
        .unwrap_or("nginx version: unknown")
        .trim()
        .to_string();
    let library = text.lines().find_map(|l| {
        if let Some(i) = l.find("running with ") {
            let rest = &l[i + "running with ".len()..];
            return Some(rest.trim_end_matches(')').trim().to_string());
        }
        l.strip_prefix("built with ").map(|r| r.trim().to_string())
    });
    NginxInfo {
        version,
        library,
        ssl: text.contains("--with-http_ssl_module"),
        stub_status: text.contains("--with-http_stub_status_module"),
    }
}

/// Runs `nginx -V`.
pub fn nginx_info(nginx: &Path) -> Result<NginxInfo> {
    let out = Spawn::new(nginx)
        .args(["-V"])
        .output(Duration::from_secs(10))
        .with_context(|| format!("running {} -V", nginx.display()))?;
    let info = parse_nginx_v(&format!("{}{}", out.stdout, out.stderr));
    if !info.ssl {
        bail!(
            "{} was built without the SSL module: install Debian's nginx package",
            nginx.display()
        );
    }
    Ok(info)
}

/// The per-run temporary directory: certificate, key, files to serve, configs. A
/// [`RunDir`] (`$TMPDIR/cipherbench-<uid>/tls-<pid>-<start>-<nonce>`): removed on
/// drop, and by the next run if this one is killed.
pub struct Workspace {
    dir: PathBuf,
    sizes: Vec<u64>,
    /// The files' content is this key's AES-128-CTR keystream.
    content: [u8; 16],
    _run_dir: RunDir,
}

impl Workspace {
    /// Creates the directory with a certificate for `key` and one incompressible
    /// file per size.
    pub fn create(sizes: &[u64], key: KeyType) -> Result<Workspace> {
        let run_dir = RunDir::create("tls", "nginx workspace")?;
        let dir = run_dir.path().to_path_buf();
        std::fs::create_dir_all(dir.join("www/f"))
            .with_context(|| format!("creating {}", dir.display()))?;
        // From here on, Drop removes the directory whatever fails.
        let mut content = [0u8; 16];
        cipherbench_crypto::random_bytes(&mut content).map_err(|e| anyhow!("{e}"))?;
        let ws = Workspace {
            dir,
            sizes: sizes.to_vec(),
            content,
            _run_dir: run_dir,
        };
        // nginx's workers run as an unprivileged user when started as root: they must
        // be able to reach the files.
        for d in [ws.dir.clone(), ws.dir.join("www"), ws.dir.join("www/f")] {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755))?;
        }
        std::fs::create_dir_all(ws.dir.join("tmp"))?;
        super::cert::write(key, &ws.dir.join("cert.pem"), &ws.dir.join("key.pem"))?;
        for &size in sizes {
            let path = ws.file(size);
            write_content_file(&path, size, &ws.content).with_context(|| {
                format!(
                    "writing the {} test file {} (set TMPDIR to a file system with room for it)",
                    cipherbench_model::ByteSize(size),
                    path.display()
                )
            })?;
        }
        Ok(ws)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// File sizes served.
    pub fn sizes(&self) -> &[u64] {
        &self.sizes
    }

    fn file(&self, size: u64) -> PathBuf {
        self.dir.join("www/f").join(size.to_string())
    }

    /// The key whose AES-128-CTR keystream the files hold (each file the stream's
    /// first bytes), for the load generator's sampled path to compare with.
    pub fn content_key(&self) -> [u8; 16] {
        self.content
    }

    /// URL path of the file of `size` bytes.
    pub fn url_path(size: u64) -> String {
        format!("/f/{size}")
    }
}

/// Writes the first `size` bytes of `key`'s AES-128-CTR keystream: incompressible,
/// so no layer below can shortcut the transfer, and known at any offset to whoever
/// holds the key (the load generator compares the records it opens with it).
fn write_content_file(path: &Path, size: u64, key: &[u8; 16]) -> Result<()> {
    let mut f = std::fs::File::create(path)?;
    let mut keystream = cipherbench_crypto::ctr::Keystream::new(key).map_err(|e| anyhow!("{e}"))?;
    keystream
        .stream(size, 1 << 20, |chunk| f.write_all(chunk))
        .map_err(|e| anyhow!("{e}"))?;
    f.sync_all()?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644))?;
    Ok(())
}

/// Everything `nginx.conf` depends on.
#[derive(Debug, Clone)]
pub struct ConfigSettings {
    /// Temporary directory (pid file, temp paths).
    pub dir: PathBuf,
    /// One worker per CPU listed, pinned to it.
    pub cpus: Vec<usize>,
    /// Port on 127.0.0.1.
    pub port: u16,
    /// The one suite.
    pub suite: Suite,
    /// Session cache and tickets on (resumption measured on purpose).
    pub resumption: bool,
    /// `ssl_ecdh_curve`: the one key-exchange group offered (None: nginx's default).
    pub groups: Option<String>,
    /// Where the private key is (a PKCS#11 key makes nginx one process).
    pub key: KeySource,
    /// Unix socket for `stub_status`, if the module is there.
    pub status_socket: Option<PathBuf>,
    /// Addresses of this machine to listen on as well (`--agents`: where the agents
    /// reach it), same port.
    pub also_listen: Vec<std::net::IpAddr>,
    /// `user` directive when started as root.
    pub user: Option<(String, String)>,
    /// Plain HTTP with `sendfile` on or off ([`ServerSpec::plain`]); None: TLS.
    pub plain: Option<bool>,
}

/// `worker_cpu_affinity` masks: one bit per worker, CPU 0 rightmost.
pub fn affinity_masks(cpus: &[usize]) -> String {
    cpus.iter()
        .map(|&c| format!("1{}", "0".repeat(c)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Renders `nginx.conf`.
pub fn render_config(s: &ConfigSettings) -> String {
    let d = s.dir.display();
    let mut c = String::new();
    c.push_str("# Generated by cipherbench for one measurement; removed when it ends.\n");
    if s.key.single_process() && s.plain.is_none() {
        // Key handles of a PKCS#11 module do not survive fork: one process serves.
        c.push_str("daemon off;\nmaster_process off;\n");
    } else {
        c.push_str("daemon off;\nmaster_process on;\n");
    }
    if let Some((user, group)) = &s.user {
        c.push_str(&format!("user {user} {group};\n"));
    }
    c.push_str(&format!(
        "worker_processes {};\nworker_cpu_affinity {};\nworker_rlimit_nofile 65536;\n",
        s.cpus.len(),
        affinity_masks(&s.cpus)
    ));
    c.push_str(&format!("pid {d}/nginx-{}.pid;\n", s.port));
    c.push_str("error_log stderr warn;\n");
    c.push_str("# The acceleration variant reaches the workers through the environment.\n");
    c.push_str("env OPENSSL_ia32cap;\n");
    for (k, _) in s.key.env() {
        c.push_str(&format!("env {k};\n"));
    }
    c.push_str("events {\n    worker_connections 16384;\n    multi_accept on;\n}\n");
    c.push_str("http {\n");
    c.push_str("    access_log off;\n    sendfile on;\n    tcp_nopush on;\n    keepalive_timeout 0;\n    server_tokens off;\n");
    c.push_str("    default_type application/octet-stream;\n");
    for t in ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"] {
        c.push_str(&format!("    {t}_temp_path {d}/tmp/{t};\n"));
    }
    if s.resumption {
        c.push_str("    ssl_session_cache shared:cipherbench:10m;\n    ssl_session_tickets on;\n");
    } else {
        c.push_str("    ssl_session_cache off;\n    ssl_session_tickets off;\n");
    }
    c.push_str("    server {\n");
    let ssl = if s.plain.is_some() { "" } else { " ssl" };
    c.push_str(&format!(
        "        listen 127.0.0.1:{}{ssl} backlog=4096;\n",
        s.port
    ));
    for ip in &s.also_listen {
        let ip = match ip {
            std::net::IpAddr::V6(v6) => format!("[{v6}]"),
            v4 => v4.to_string(),
        };
        c.push_str(&format!(
            "        listen {ip}:{}{ssl} backlog=4096;\n",
            s.port
        ));
    }
    if let Some(sendfile) = s.plain {
        // The plain-HTTP ceiling: the same files and workers, no TLS; `sendfile off`
        // makes nginx read each file into its buffers and write it, as it must
        // under TLS without kTLS.
        c.push_str(&format!(
            "        sendfile {};\n        root {d}/www;\n        location /f/ {{ }}\n    }}\n",
            if sendfile { "on" } else { "off" }
        ));
        if let Some(sock) = &s.status_socket {
            c.push_str(&format!(
                "    server {{\n        listen unix:{};\n        location = /status {{ stub_status; }}\n    }}\n",
                sock.display()
            ));
        }
        c.push_str("}\n");
        return c;
    }
    c.push_str(&format!(
        "        ssl_certificate {d}/cert.pem;\n        ssl_certificate_key {};\n",
        s.key.directive()
    ));
    c.push_str(&format!(
        "        ssl_protocols {};\n",
        s.suite.protocol.nginx()
    ));
    match s.suite.protocol {
        Protocol::Tls12 => c.push_str(&format!("        ssl_ciphers {};\n", s.suite.openssl)),
        Protocol::Tls13 => c.push_str(&format!(
            "        ssl_conf_command Ciphersuites {};\n",
            s.suite.openssl
        )),
    }
    if let Some(g) = &s.groups {
        c.push_str(&format!("        ssl_ecdh_curve {g};\n"));
    }
    c.push_str("        ssl_prefer_server_ciphers on;\n");
    c.push_str(&format!("        root {d}/www;\n"));
    c.push_str("        location /f/ { }\n");
    c.push_str("    }\n");
    if let Some(sock) = &s.status_socket {
        c.push_str(&format!(
            "    server {{\n        listen unix:{};\n        location = /status {{ stub_status; }}\n    }}\n",
            sock.display()
        ));
    }
    c.push_str("}\n");
    c
}

/// A running nginx.
pub struct Server {
    child: Child,
    port: u16,
    workers: Vec<u32>,
    status_socket: Option<PathBuf>,
    config: String,
    loaded: Vec<(&'static str, Loaded)>,
    binary: PathBuf,
}

/// How to start one.
pub struct ServerSpec<'a> {
    /// nginx binary.
    pub nginx: &'a Path,
    /// What `nginx -V` said.
    pub info: &'a NginxInfo,
    /// Files and certificate.
    pub workspace: &'a Workspace,
    /// The one suite.
    pub suite: Suite,
    /// Worker CPUs.
    pub cpus: Vec<usize>,
    /// The acceleration variant: its library is the one nginx is started under and
    /// held to.
    pub variant: &'a Variant,
    /// The variant's `OPENSSL_ia32cap` for the library nginx loads (None: removed
    /// from nginx's environment).
    pub ia32cap: Option<String>,
    /// Port asked for (None: a free one).
    pub port: Option<u16>,
    /// Session resumption on.
    pub resumption: bool,
    /// Addresses of this machine to listen on besides 127.0.0.1 (`--agents`).
    pub also_listen: Vec<std::net::IpAddr>,
    /// The one key-exchange group (None: nginx's default).
    pub groups: Option<String>,
    /// Where the private key is.
    pub key_source: KeySource,
    /// Plain HTTP instead of TLS, with `sendfile` on (true) or off: the sweep's
    /// plain-HTTP ceiling on the same cores. None: TLS.
    pub plain: Option<bool>,
}

/// The one-line error for a port someone else holds.
pub fn port_in_use(port: u16) -> anyhow::Error {
    anyhow!("port {port} on 127.0.0.1 is in use: pass another --port, or leave --port out to let cipherbench pick a free one")
}

/// Refuses `--port P` for `slots` servers run side by side (a point's variants and
/// key stores: P, P+1, ...) when a port is past 65535 or cannot be bound now.
pub fn check_ports(port: u16, slots: usize) -> Result<()> {
    let slots = slots.max(1);
    if port as usize + slots - 1 > u16::MAX as usize {
        bail!(
            "--port {port}: a point's {slots} variant x key-store servers run side by side on {port} and the ports after it; pass a port at most {}",
            u16::MAX as usize + 1 - slots
        );
    }
    for k in 0..slots {
        check_port(port + k as u16)?;
    }
    Ok(())
}

/// Refuses a port that cannot be bound now.
pub fn check_port(port: u16) -> Result<()> {
    match TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Err(port_in_use(port)),
        Err(e) => Err(anyhow!(
            "cannot bind 127.0.0.1:{port} ({e}): pass another --port"
        )),
    }
}

fn free_port() -> Result<u16> {
    let l =
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("finding a free port on 127.0.0.1")?;
    Ok(l.local_addr()?.port())
}

fn unprivileged_user() -> Option<(String, String)> {
    if !crate::host::is_root() {
        return None;
    }
    let groups = std::fs::read_to_string("/etc/group").unwrap_or_default();
    let has = |g: &str| groups.lines().any(|l| l.split(':').next() == Some(g));
    let group = if has("nogroup") { "nogroup" } else { "nobody" };
    Some(("nobody".into(), group.into()))
}

impl Server {
    /// Starts nginx and waits until a TLS handshake with the suite succeeds.
    pub fn start(spec: &ServerSpec<'_>, client: &Client) -> Result<Server> {
        let mut last = None;
        for _ in 0..if spec.port.is_some() {
            1
        } else {
            PORT_ATTEMPTS
        } {
            let port = match spec.port {
                Some(p) => p,
                None => free_port()?,
            };
            match Server::start_on(spec, client, port) {
                Ok(s) => return Ok(s),
                Err(StartError::PortInUse) if spec.port.is_none() => last = Some(port_in_use(port)),
                Err(StartError::PortInUse) => return Err(port_in_use(port)),
                Err(StartError::Other(e)) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| anyhow!("nginx could not bind a port")))
    }

    #[expect(
        clippy::too_many_lines,
        reason = "starting nginx in order (config, spawn, wait ready, check what it loaded), each with its error"
    )]
    fn start_on(spec: &ServerSpec<'_>, client: &Client, port: u16) -> Result<Server, StartError> {
        let dir = spec.workspace.dir();
        let status_socket = spec
            .info
            .stub_status
            .then(|| dir.join(format!("status-{port}.sock")));
        let settings = ConfigSettings {
            dir: dir.to_path_buf(),
            cpus: spec.cpus.clone(),
            port,
            suite: spec.suite,
            resumption: spec.resumption,
            groups: spec.groups.clone(),
            key: spec.key_source.clone(),
            status_socket: status_socket.clone(),
            user: unprivileged_user(),
            also_listen: spec.also_listen.clone(),
            plain: spec.plain,
        };
        let config = render_config(&settings);
        let conf_path = dir.join(format!("nginx-{port}.conf"));
        std::fs::write(&conf_path, &config)
            .with_context(|| format!("writing {}", conf_path.display()))?;
        // Under a library the nginx asked for cannot load (an OpenSSL 4), the one
        // built against it.
        let binary = spec
            .variant
            .library
            .nginx_for(spec.nginx)
            .map_err(StartError::Other)?;
        let mut spawn = Spawn::new(&binary);
        for (k, v) in spec.key_source.env() {
            spawn = spawn.env(k, v);
        }
        let mut child = spawn
            .args(["-p"])
            .args([dir])
            .args(["-c"])
            .args([&conf_path])
            .args(["-e", "stderr"])
            .cwd(dir)
            .ia32cap(spec.ia32cap.as_deref())
            .envs(spec.variant.environment())
            .loader(spec.variant.library.loader())
            .start()
            .map_err(StartError::Other)?;
        let smallest = spec.workspace.sizes().iter().min().copied().unwrap_or(0);
        let target = Target {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            host: "127.0.0.1".into(),
            path: Workspace::url_path(smallest),
            expected_len: Some(smallest),
            content: None,
        };
        let mut exited = false;
        let mut fetched = None;
        let ready = wait_until(
            &format!(
                "nginx accepting {} on 127.0.0.1:{port}",
                if spec.plain.is_some() { "HTTP" } else { "TLS" }
            ),
            READY_TIMEOUT,
            || {
                if child.try_wait()?.is_some() {
                    exited = true;
                    return Ok(true);
                }
                let f = engine::fetch_once(client, &target, Duration::from_secs(2))?;
                fetched = Some(f);
                Ok(true)
            },
        );
        if exited {
            // Give the drain thread a moment to deliver nginx's last words.
            let _ = wait_until("nginx's error output", Duration::from_millis(500), || {
                Ok(!child.stderr_tail().is_empty())
            });
            return Err(classify_failure(&child.stderr_tail(), spec, port));
        }
        ready.map_err(|e| {
            anyhow!(
                "nginx did not become ready: {e:#}; nginx said: {}",
                child.stderr_tail()
            )
        })?;
        let Some(f) = fetched else {
            return Err(StartError::Other(anyhow!("nginx did not answer")));
        };
        if spec.plain.is_none()
            && (f.suite != spec.suite.openssl || f.protocol != spec.suite.protocol.as_str())
        {
            return Err(StartError::Other(anyhow!(
                "nginx negotiated {} {} instead of {} {}",
                f.protocol,
                f.suite,
                spec.suite.protocol.as_str(),
                spec.suite.openssl
            )));
        }
        if f.status != 200 || f.body_len != smallest {
            return Err(StartError::Other(anyhow!(
                "nginx answered {} with {} bytes for a {smallest}-byte file",
                f.status,
                f.body_len
            )));
        }
        let master = child.pid();
        let want = spec.cpus.len();
        let mut workers = Vec::new();
        if spec.key_source.single_process() {
            // One process serves, and nginx pins only workers: pin it here.
            crate::host::set_process_affinity(master, &spec.cpus)
                .map_err(|e| StartError::Other(anyhow!("pinning nginx to {:?}: {e}", spec.cpus)))?;
            workers.push(master);
        } else {
            wait_until("nginx's workers", Duration::from_secs(5), || {
                workers = crate::host::children_of(master);
                Ok(workers.len() >= want)
            })
            .map_err(StartError::Other)?;
        }
        // The workers are forks of the master: both show what the loader gave nginx.
        let mut loaded = Vec::new();
        let parts = std::iter::once(("nginx master", master))
            .chain(workers.iter().map(|&w| ("nginx worker", w)));
        for (part, pid) in parts {
            let l = crate::library::of_process(pid).map_err(StartError::Other)?;
            spec.variant
                .library
                .check(&format!("{part} (pid {pid})"), &l)
                .map_err(StartError::Other)?;
            loaded.push((part, l));
        }
        Ok(Server {
            child,
            port,
            workers,
            status_socket,
            config,
            loaded,
            binary,
        })
    }

    /// The libraries nginx's master and workers mapped (already held to the
    /// variant's library), for the environment record.
    pub fn loaded(&self) -> &[(&'static str, Loaded)] {
        &self.loaded
    }

    /// The nginx binary that runs (the one asked for, or the one built against the
    /// variant's library).
    pub fn binary(&self) -> &Path {
        &self.binary
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The master's pid.
    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// Worker pids.
    pub fn workers(&self) -> &[u32] {
        &self.workers
    }

    /// The config it runs.
    pub fn config(&self) -> &str {
        &self.config
    }

    /// nginx's request counter (`stub_status`), which counts every status query
    /// too, this one included: requests served between two readings `a` and `b` are
    /// `b - a - 1`.
    pub fn requests(&self) -> Option<u64> {
        let path = self.status_socket.as_ref()?;
        let mut s = std::os::unix::net::UnixStream::connect(path).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        s.write_all(b"GET /status HTTP/1.0\r\nHost: status\r\n\r\n")
            .ok()?;
        let mut text = String::new();
        s.read_to_string(&mut text).ok()?;
        parse_stub_status(&text)
    }

    /// Whether nginx is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Stops nginx (also done on drop).
    pub fn stop(mut self) {
        self.child.stop();
    }
}

enum StartError {
    PortInUse,
    Other(anyhow::Error),
}

impl From<anyhow::Error> for StartError {
    fn from(e: anyhow::Error) -> StartError {
        StartError::Other(e)
    }
}

fn classify_failure(stderr: &str, spec: &ServerSpec<'_>, port: u16) -> StartError {
    if stderr.contains("Address already in use") {
        return StartError::PortInUse;
    }
    if stderr.contains("no cipher match")
        || stderr.contains("set_cipher_list")
        || stderr.contains("Ciphersuites")
    {
        return StartError::Other(anyhow!(
            "suite {} is not offered by {} (the library nginx runs with): choose another suite",
            spec.suite.display(),
            spec.info.library.as_deref().unwrap_or("nginx's OpenSSL")
        ));
    }
    if let KeySource::Pkcs11 { module, .. } = &spec.key_source {
        if stderr.contains("ENGINE") || stderr.contains("certificate key") {
            // nginx's emerg line names what failed; the rest is OpenSSL's error stack.
            let said = stderr
                .lines()
                .find(|l| l.contains("[emerg]"))
                .unwrap_or_else(|| stderr.lines().last().unwrap_or(""));
            return StartError::Other(anyhow!(
                "nginx could not take its key from the PKCS#11 module {} (log-in or key lookup failed; check the module works with softhsm2-util --module {} --show-slots): {}",
                module.display(),
                module.display(),
                said.trim()
            ));
        }
    }
    StartError::Other(anyhow!(
        "nginx exited while starting on 127.0.0.1:{port}: {}",
        if stderr.is_empty() {
            "(it printed nothing)"
        } else {
            stderr
        }
    ))
}

/// The `requests` counter from a `stub_status` response.
pub fn parse_stub_status(text: &str) -> Option<u64> {
    let mut lines = text.lines();
    lines.find(|l| {
        l.trim_start()
            .starts_with("server accepts handled requests")
    })?;
    let numbers: Vec<u64> = lines
        .next()?
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    numbers.get(2).copied()
}

/// Server CPUs (the first `cores` allowed CPUs) and generator CPUs (the rest), or an
/// error if nothing is left for the generator.
pub fn split_cpus(allowed: &[usize], cores: usize) -> Result<(Vec<usize>, Vec<usize>)> {
    if cores == 0 {
        bail!("--cores must be at least 1");
    }
    if cores >= allowed.len() {
        bail!(
            "{cores} core(s) for nginx leaves none of this machine's {} for the load generator: use --cores {} or fewer (server and generator are pinned to disjoint cores)",
            allowed.len(),
            allowed.len().saturating_sub(1).max(1)
        );
    }
    Ok((allowed[..cores].to_vec(), allowed[cores..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(suite: &str) -> ConfigSettings {
        ConfigSettings {
            dir: PathBuf::from("/tmp/cb-x"),
            cpus: vec![0, 2],
            port: 8443,
            suite: Suite::find(suite).unwrap(),
            resumption: false,
            groups: None,
            key: KeySource::File(PathBuf::from("/tmp/cb-x/key.pem")),
            status_socket: Some(PathBuf::from("/tmp/cb-x/status.sock")),
            user: Some(("nobody".into(), "nogroup".into())),
            also_listen: Vec::new(),
            plain: None,
        }
    }

    #[test]
    fn the_plain_http_ceiling_serves_the_same_files_without_tls_sendfile_on_or_off() {
        for (sendfile, line) in [(true, "sendfile on;"), (false, "sendfile off;")] {
            let c = render_config(&ConfigSettings {
                plain: Some(sendfile),
                ..settings("AES128-GCM-SHA256")
            });
            assert!(c.contains("listen 127.0.0.1:8443 backlog=4096;"), "{c}");
            assert!(c.contains(line), "{c}");
            assert!(c.contains("root /tmp/cb-x/www;") && c.contains("location /f/ { }"));
            // The same workers and placement as the TLS servers beside it.
            assert!(c.contains("worker_processes 2;") && c.contains("worker_cpu_affinity 1 100;"));
            assert!(
                !c.contains(" ssl ") && !c.contains("ssl_certificate"),
                "{c}"
            );
            assert!(c.contains("location = /status"));
        }
    }

    #[test]
    fn renders_the_methodology_into_the_config() {
        let c = render_config(&settings("AES128-GCM-SHA256"));
        for line in [
            "worker_processes 2;",
            "worker_cpu_affinity 1 100;",
            "env OPENSSL_ia32cap;",
            "access_log off;",
            "sendfile on;",
            "keepalive_timeout 0;",
            "listen 127.0.0.1:8443 ssl",
            "ssl_protocols TLSv1.2;",
            "ssl_ciphers AES128-GCM-SHA256;",
            "ssl_session_cache off;",
            "ssl_session_tickets off;",
            "stub_status;",
            "user nobody nogroup;",
            "daemon off;",
        ] {
            assert!(c.contains(line), "missing {line:?} in\n{c}");
        }
        let t13 = render_config(&settings("TLS_CHACHA20_POLY1305_SHA256"));
        assert!(t13.contains("ssl_protocols TLSv1.3;"));
        assert!(t13.contains("ssl_conf_command Ciphersuites TLS_CHACHA20_POLY1305_SHA256;"));
        assert!(!t13.contains("ssl_ciphers"));
    }

    #[test]
    fn affinity_masks_have_one_bit_per_worker() {
        assert_eq!(affinity_masks(&[0]), "1");
        assert_eq!(affinity_masks(&[0, 1]), "1 10");
        assert_eq!(affinity_masks(&[3]), "1000");
    }

    #[test]
    fn parses_nginx_v_and_stub_status() {
        let v = "nginx version: nginx/1.22.1\nbuilt with OpenSSL 3.0.22 25 Aug 2026 (running with OpenSSL 3.0.19 27 Jan 2026)\nTLS SNI support enabled\nconfigure arguments: --with-http_ssl_module --with-http_stub_status_module\n";
        let info = parse_nginx_v(v);
        assert_eq!(info.version, "nginx version: nginx/1.22.1");
        assert_eq!(info.library.as_deref(), Some("OpenSSL 3.0.19 27 Jan 2026"));
        assert!(info.ssl && info.stub_status);
        let status = "HTTP/1.1 200 OK\r\n\r\nActive connections: 1 \nserver accepts handled requests\n 16 16 31 \nReading: 0 Writing: 1 Waiting: 0 \n";
        assert_eq!(parse_stub_status(status), Some(31));
        assert_eq!(parse_stub_status("nothing"), None);
    }

    #[test]
    fn splits_cpus_between_server_and_generator() {
        assert_eq!(split_cpus(&[0, 1], 1).unwrap(), (vec![0], vec![1]));
        let err = split_cpus(&[0, 1], 2).unwrap_err().to_string();
        assert!(err.contains("--cores 1"), "{err}");
    }

    #[test]
    fn a_missing_nginx_is_named() {
        let err = resolve_nginx(Some(Path::new("/nonexistent/nginx")))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/nonexistent/nginx") && err.contains("nginx package"),
            "{err}"
        );
    }
}
