//! `cipherbench deploy --agents HOSTS`: this build onto each host over ssh
//! (`agent::deploy`), so `--agents` and `--peer` then start it there.

use crate::progress::{errln, outln};
use anyhow::{bail, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// `cipherbench deploy`.
#[derive(Debug, Args)]
pub struct DeployArgs {
    /// The hosts, comma-separated `[user@]host` or ssh config aliases, as for
    /// `tls --agents` and `tunnel --peer`.
    #[arg(long, value_name = "HOSTS")]
    pub agents: String,
    /// ssh client config (ssh -F FILE; default: ssh's own).
    #[arg(long, value_name = "FILE")]
    pub ssh_config: Option<PathBuf>,
}

/// Runs `deploy`: one line per host; non-zero when any host failed.
pub fn command(args: &DeployArgs, quiet: bool) -> Result<ExitCode> {
    let launch =
        crate::agent::fleet::Launch::parse(&args.agents, args.ssh_config.clone(), None, None)?;
    let sha = crate::agent::executable_digest()?;
    if !quiet {
        errln!(
            "deploy: cipherbench {} (sha256:{}) to {}",
            crate::agent::version(),
            &sha[..16],
            launch.hosts.join(", ")
        );
    }
    let mut failed = Vec::new();
    for outcome in crate::agent::deploy::deploy(&launch) {
        match outcome {
            Ok(p) => outln!(
                "{}: {} {} ({}), checked: SHA-256 matches, runs ({}), {:.1} s",
                p.host,
                if p.copied { "copied to" } else { "already at" },
                p.path,
                if p.copied {
                    format!("{:.1} MB sent", p.bytes as f64 / 1e6)
                } else {
                    "nothing sent".to_string()
                },
                p.version,
                p.took.as_secs_f64()
            ),
            Err(e) => {
                errln!("cipherbench: {}", crate::progress::one_line(&e));
                failed.push(());
            }
        }
    }
    if !failed.is_empty() {
        let others = if failed.len() < launch.hosts.len() {
            "; the others have it"
        } else {
            ""
        };
        bail!(
            "{} of {} hosts did not get this build (above){others}",
            failed.len(),
            launch.hosts.len()
        );
    }
    if !quiet {
        errln!(
            "deploy: `--agents {}` (tls) and `--peer HOST` (tunnel) now start this build there, without --agent-path",
            launch.hosts.join(",")
        );
    }
    Ok(ExitCode::SUCCESS)
}
