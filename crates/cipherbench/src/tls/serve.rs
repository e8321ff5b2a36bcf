//! `cipherbench tls serve`: the nginx a measurement would start, kept running until
//! Ctrl-C, so that another load generator (wrk, h2load) can be run against exactly
//! the same server and pinning. Its URLs go to stdout; everything is stopped and the
//! temporary directory removed when it ends.

use super::engine::Client;
use super::nginx::{self, Server, ServerSpec, Workspace};
use super::suite::{self, KeyType};
use crate::interrupt;
use crate::progress::errln;
use crate::variant::Variant;
use anyhow::{bail, Result};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// `tls serve`, resolved.
#[derive(Debug, Clone)]
pub struct ServePlan {
    /// Suite.
    pub suite: suite::Suite,
    /// Sizes.
    pub sizes: Vec<u64>,
    /// Workers.
    pub cores: usize,
    /// Variant.
    pub variant: Variant,
    /// Key.
    pub key: KeyType,
    /// nginx binary.
    pub nginx: Option<PathBuf>,
    /// Port.
    pub port: Option<u16>,
}

/// Serves until Ctrl-C (or until nginx exits, which is an error).
pub fn run(plan: &ServePlan) -> Result<()> {
    let binary = nginx::resolve_nginx(plan.nginx.as_deref())?;
    let info = nginx::nginx_info(&binary)?;
    if let Some(p) = plan.port {
        nginx::check_port(p)?;
    }
    let allowed = crate::host::allowed_cpus();
    let (server_cpus, generator_cpus) = nginx::split_cpus(&allowed, plan.cores)?;
    let workspace = Workspace::create(&plan.sizes, plan.key)?;
    let client = Client::new(&plan.suite, false)?;
    let baseline = crate::variant::Baseline::measure(std::slice::from_ref(&plan.variant))?;
    let mut server = Server::start(
        &ServerSpec {
            nginx: &binary,
            info: &info,
            workspace: &workspace,
            suite: plan.suite,
            cpus: server_cpus.clone(),
            variant: &plan.variant,
            ia32cap: baseline.mask(&plan.variant),
            port: plan.port,
            resumption: false,
            also_listen: Vec::new(),
            groups: None,
            key_source: super::keystore::KeySource::File(workspace.dir().join("key.pem")),
            plain: None,
        },
        &client,
    )?;
    let mut out = std::io::stdout().lock();
    for &size in &plan.sizes {
        writeln!(
            out,
            "https://{}{}",
            server.addr(),
            Workspace::url_path(size)
        )?;
    }
    out.flush()?;
    drop(out);
    errln!(
        "nginx ({} on {}, {} {}, {} worker(s) on CPU {:?}) is serving; load generators belong on CPU {:?}. Ctrl-C stops it.",
        info.version,
        super::server_library(&info, &plan.variant).unwrap_or_else(|| "its OpenSSL".into()),
        plan.suite.openssl,
        plan.variant.name(),
        plan.cores,
        server_cpus,
        generator_cpus
    );
    loop {
        if interrupt::requested() {
            server.stop();
            return Ok(());
        }
        if !server.running() {
            bail!("nginx exited on its own");
        }
        // Waiting for the user, not for readiness: poll the Ctrl-C flag.
        std::thread::sleep(Duration::from_millis(100));
    }
}
