//! The command line, on top of everything: clap's types, and [`dispatch`], one call
//! per command. Each command's flags, their resolution into a plan and the command
//! itself are in a file of their own ([`speed`], [`file`](mod@file), [`tls`],
//! [`tunnel`], [`run`], [`report`], [`cleanup`]); the flag values they share are in [`flags`],
//! where results go and how they are shown in [`output`], and every layer's presets
//! in [`preset`]. Raw flags are parsed and checked here once: the layers below never
//! see clap, only resolved plans.

pub mod cleanup;
pub mod deploy;
pub mod doctor;
pub mod file;
pub mod flags;
pub mod manual;
pub mod output;
pub mod preset;
pub mod report;
pub mod run;
pub mod speed;
pub mod tls;
pub mod tunnel;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// What `--version` prints: the version and the commit built from (with
/// `-dirty.HASH` for a tree with changes; `unknown` from a source tarball).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("CIPHERBENCH_COMMIT"),
    ")"
);

/// cipherbench: what does hardware crypto acceleration buy, on this machine, for my
/// workload?
#[derive(Debug, Parser)]
#[command(name = "cipherbench", version = VERSION, about, long_about = None)]
pub struct Cli {
    /// Print only results and notes, not progress.
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// CPU crypto features, hypervisor, OpenSSL build and capability vector, engines and
    /// providers, kernel crypto drivers, offload devices.
    Probe {
        /// Print JSON instead of the human report.
        #[arg(long)]
        json: bool,
        /// Say in one glance whether this machine is fit to benchmark now (other
        /// processes' load over one second, steal, the frequency governor, whether the
        /// server and its load can have cores of their own), and what to change;
        /// changes nothing. Exit status 3 when it is not fit.
        #[arg(long)]
        check: bool,
    },
    /// Every program and kernel feature each layer drives, whether this machine has
    /// it, and the command that installs what is missing on this distribution (apt,
    /// tested; dnf, from the package lists). Exit status 3 when the main job lacks
    /// something.
    Doctor,
    /// Layer 1: cipher throughput by buffer size, with AES-NI available and masked.
    Speed(speed::SpeedArgs),
    /// Layer 2: the time to encrypt a file through the disk, by tool and variant.
    File(file::FileArgs),
    /// Encrypt a file (or stdin) into cipherbench's streaming format, in parallel.
    Seal(file::SealArgs),
    /// Decrypt a sealed file; the output appears only if every chunk verified.
    Open(file::OpenArgs),
    /// Layer 3: TLS web serving with a real nginx: the throughput sweep and the ramp.
    Tls(tls::TlsArgs),
    /// Layer 4: iperf3 TCP and UDP through cipherbench's ESP-in-UDP tunnel between two
    /// network namespaces, per transform, with AES-NI available and masked (root).
    Tunnel(tunnel::TunnelArgs),
    /// The main job: probe and every layer, into a results directory with a report.
    Run(run::RunArgs),
    /// Remove what killed runs left, for every layer (namespaces, nginx workspaces,
    /// scratch directories; in results directories given, temporary files), and say
    /// what; live runs' are left alone unless --force.
    Cleanup(cleanup::CleanupArgs),
    /// Re-render report.html and the CSV files of a results directory, without measuring.
    Report {
        /// A results directory (holding run.json).
        dir: PathBuf,
        /// TLS throughput to plan for, Gbit/s: the capacity line gives the cores each
        /// suite needs for it (default: the run's, else 10). run.json is not changed.
        #[arg(long, value_name = "GBPS")]
        target_gbps: Option<f64>,
    },
    /// Two or more results directories side by side: environment differences, then
    /// per-layer ratios, with 3DES as the control that separates CPU speed from
    /// acceleration.
    Compare {
        /// Results directories; the first is the baseline.
        #[arg(required = true, num_args = 2..)]
        dirs: Vec<PathBuf>,
        /// Also write compare.md and compare.html into this directory.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// The regression gate: exit 4 when a figure of the second run (NEW) fell
        /// below the first's (BASELINE) by more than this share, such as 5%, beyond
        /// the runs' noise: its whole 95 % interval of NEW / BASELINE lies below
        /// 1 - the share. Two runs only.
        #[arg(long, value_name = "PERCENT")]
        fail_above: Option<String>,
        /// With --fail-above: print the gate's verdict as JSON instead.
        #[arg(long, requires = "fail_above")]
        json: bool,
    },
    /// Print the completion script of a shell (bash: save it as
    /// /usr/share/bash-completion/completions/cipherbench; the package installs it).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Internal: writes the man pages (cipherbench.1, one per command) into DIR.
    #[command(name = "__manpages", hide = true)]
    Manpages {
        /// The directory to write them into.
        dir: PathBuf,
    },
    /// Put this build on other hosts over ssh (checked by its SHA-256 there, then run
    /// once), where `tls --agents` and `tunnel --peer` then start it.
    Deploy(deploy::DeployArgs),
    /// Run as an agent of another cipherbench: answer its requests (line-delimited
    /// JSON) on stdin and stdout until stdin closes. Started by the coordinator over
    /// ssh (`tls sweep --agents`), not by hand.
    Agent,
    /// Internal: the measuring child of `speed` (reads a request on stdin).
    #[command(name = "__speed-worker", hide = true)]
    SpeedWorker,
    /// Internal: one ESP gateway of `tunnel` (reads its configuration on stdin).
    #[command(name = "__gateway", hide = true)]
    Gateway,
    /// Internal: reports the OpenSSL this process loaded, as JSON (how `--openssl DIR`
    /// is checked), or with --open FILE what that file says it is.
    #[command(name = "__library", hide = true)]
    Library {
        /// A libcrypto file to open beside this process's own and ask its version.
        #[arg(long, value_name = "FILE")]
        open: Option<PathBuf>,
    },
    /// Internal: one TLS handshake with the library's defaults, as JSON: what its
    /// client offered and which group the two sides agreed on.
    #[command(name = "__tls-defaults", hide = true)]
    TlsDefaults,
    /// Internal: between `ip netns exec` and strongSwan's charon: a private /run
    /// (charon's pid file) and the CPUs, then exec.
    #[command(name = "__charon", hide = true)]
    Charon {
        /// Bound over /run for charon.
        #[arg(long)]
        run_dir: PathBuf,
        /// CPUs, comma-separated.
        #[arg(long, value_delimiter = ',')]
        cpus: Vec<usize>,
        /// charon and its arguments.
        #[arg(last = true, required = true)]
        program: Vec<String>,
    },
    /// Internal: the effect probe, run with the environment of a process that cannot
    /// run it itself (nginx, the `openssl` CLI); prints one JSON line.
    #[command(name = "__variant-probe", hide = true)]
    VariantProbe {
        /// Measure AES-128-GCM only.
        #[arg(long)]
        treatment_only: bool,
    },
}

/// Runs one parsed command; returns its exit code.
pub fn dispatch(cli: Cli) -> Result<ExitCode> {
    let quiet = cli.quiet;
    // A parent checking which library its child loaded (`seal` and `open` in the
    // file layer) asks through the environment.
    crate::library::report_if_asked();
    match cli.command {
        Command::Library { open } => {
            crate::library::child_main(open.as_deref()).map(|()| ExitCode::SUCCESS)
        }
        Command::TlsDefaults => crate::tls::defaults::child_main().map(|()| ExitCode::SUCCESS),
        Command::Agent => crate::agent_server::main().map(|()| ExitCode::SUCCESS),
        Command::SpeedWorker => crate::speed::worker::main().map(|()| ExitCode::SUCCESS),
        Command::Gateway => crate::tunnel::gateway::main().map(|()| ExitCode::SUCCESS),
        Command::Charon {
            run_dir,
            cpus,
            program,
        } => crate::tunnel::strongswan::charon_main(&run_dir, &cpus, &program)
            .map(|()| ExitCode::SUCCESS),
        Command::VariantProbe { treatment_only } => {
            crate::effect::child_main(treatment_only).map(|()| ExitCode::SUCCESS)
        }
        Command::Probe { json, check } => report::probe(json, check),
        Command::Doctor => doctor::command(),
        Command::Deploy(args) => deploy::command(&args, quiet),
        Command::Report { dir, target_gbps } => report::report(&dir, target_gbps),
        Command::Compare {
            dirs,
            out,
            fail_above,
            json,
        } => report::compare(&dirs, out.as_deref(), fail_above.as_deref(), json),
        Command::Speed(args) => speed::command(&args, quiet),
        Command::File(args) => file::command(&args, quiet),
        Command::Seal(args) => file::seal(&args),
        Command::Open(args) => file::open(&args),
        Command::Tls(args) => tls::command(&args, quiet),
        Command::Tunnel(args) => tunnel::command(&args, quiet),
        Command::Run(args) => run::command(&args, quiet),
        Command::Cleanup(args) => cleanup::command(&args),
        Command::Completions { shell } => manual::completions(shell),
        Command::Manpages { dir } => manual::manpages(&dir),
    }
}
