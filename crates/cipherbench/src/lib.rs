//! cipherbench, the application: command line, probe, the four layers' runners, the
//! process supervisor and the results sink.
//!
//! Data flow: `argv -> Cli -> plan -> probe -> for each scenario: run -> outcome ->
//! save -> report`. Runners return data and never print; the [`progress`] observer
//! prints; the report crate renders. See ARCHITECTURE.md.

pub mod cli;
pub mod file;
pub mod interrupt;
pub mod probe;
pub mod progress;
pub mod results;
pub mod run;
pub mod speed;
pub mod supervisor;
pub mod tls;
pub mod tunnel;

use anyhow::{Context, Result};
use cli::{Cli, Command};
use progress::Progress;
use results::Session;
use std::process::ExitCode;

/// Exit code for an interrupted run (128 + SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: u8 = 130;

/// Runs a parsed command line; returns the process exit code. Errors are printed
/// here, as one line on stderr.
pub fn main(cli: Cli) -> ExitCode {
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            if e.downcast_ref::<interrupt::Interrupted>().is_some() {
                // With what was being done and what was left, when the layer says.
                eprintln!("cipherbench: {}", one_line(&e));
                return ExitCode::from(EXIT_INTERRUPTED);
            }
            eprintln!("cipherbench: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// An error and its causes on one line: "what failed: why".
pub fn one_line(e: &anyhow::Error) -> String {
    format!("{e:#}").replace('\n', " ")
}

fn dispatch(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::SpeedWorker => {
            speed::worker::main()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Gateway => {
            tunnel::gateway::main()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Probe { json } => {
            let env = probe::collect();
            if json {
                println!("{}", serde_json::to_string_pretty(&env)?);
            } else {
                print!("{}", cipherbench_report::text::probe(&env));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Report { dir, target_gbps } => {
            let mut record = results::load(&dir)?;
            if let Some(t) = target_gbps {
                record.target_gbps = Some(cli::target_gbps(t)?);
            }
            for file in cipherbench_report::render_all(&record) {
                results::write_atomic(&dir.join(&file.name), file.contents.as_bytes())?;
            }
            println!("{}", dir.join("report.html").display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Compare { dirs, out } => {
            let records = dirs
                .iter()
                .map(|d| results::load(d))
                .collect::<Result<Vec<_>>>()?;
            let labels = compare_labels(&records, &dirs);
            let comparison = cipherbench_report::compare::analyze(&records, &labels);
            print!("{}", cipherbench_report::compare::text(&comparison));
            if let Some(out) = out {
                std::fs::create_dir_all(&out)
                    .with_context(|| format!("creating {}", out.display()))?;
                results::write_atomic(
                    &out.join("compare.md"),
                    cipherbench_report::compare::markdown(&comparison).as_bytes(),
                )?;
                results::write_atomic(
                    &out.join("compare.html"),
                    cipherbench_report::compare::html(&comparison).as_bytes(),
                )?;
                println!("\nwritten: {}", out.join("compare.html").display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Speed(args) => {
            let plan = args.plan()?;
            let mut session = start_session(&args.output, "custom", cli.quiet)?;
            let outcome = speed::run(&plan, &mut session);
            finish(&mut session, outcome, |s| {
                if let Some(speed) = &s.record.speed {
                    if args.json {
                        println!(
                            "{}",
                            serde_json::to_string_pretty(speed).unwrap_or_default()
                        );
                    } else {
                        print!("{}", cipherbench_report::text::speed(speed));
                    }
                }
            })
        }
        Command::Seal(args) => {
            file::seal_command(&args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Open(args) => {
            file::open_command(&args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::File(args) => {
            let (mut session, outcome) = file::file_command(&args, cli.quiet)?;
            finish(&mut session, outcome, |s| {
                if let Some(results) = &s.record.file {
                    if args.json {
                        println!(
                            "{}",
                            serde_json::to_string_pretty(results).unwrap_or_default()
                        );
                    } else {
                        print!("{}", cipherbench_report::file::text(results));
                    }
                }
            })
        }
        Command::Tls(tls::args::TlsArgs {
            command: tls::args::TlsCommand::Serve(a),
        }) => {
            let plan = a.plan()?;
            interrupt::install();
            tls::serve::run(&plan)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Tls(args) => {
            // Resolve the plan first: bad input fails before anything starts.
            let (output, json, sweep, ramp) = match &args.command {
                tls::args::TlsCommand::Sweep(a) => {
                    (a.output(), a.common.json, Some(a.plan()?), None)
                }
                tls::args::TlsCommand::Ramp(a) => {
                    (a.output(), a.common.json, None, Some(a.plan()?))
                }
                tls::args::TlsCommand::Serve(_) => return Ok(ExitCode::SUCCESS),
            };
            let mut session = start_session(output, "custom", cli.quiet)?;
            session
                .record
                .environment
                .tools
                .extend(probe::tool_versions(&["nginx"]));
            let outcome = match (&sweep, &ramp) {
                (Some(plan), _) => tls::sweep::run(plan, &mut session),
                (_, Some(plan)) => tls::ramp::run(plan, &mut session),
                (None, None) => Ok(()),
            };
            finish(&mut session, outcome, |s| {
                if let Some(t) = &s.record.tls {
                    if json {
                        println!("{}", serde_json::to_string_pretty(t).unwrap_or_default());
                    } else {
                        print!("{}", cipherbench_report::tls::text(t, s.record.target_gbps));
                    }
                }
            })
        }
        Command::Tunnel(args) => {
            if let Some(cli::TunnelAction::Cleanup { force }) = args.action {
                return tunnel_cleanup(force);
            }
            let plan = args.plan()?;
            let mut session = start_session(&args.output, args.preset.name(), cli.quiet)?;
            let outcome = tunnel::run(&plan, &mut session);
            finish(&mut session, outcome, |s| {
                if let Some(t) = &s.record.tunnel {
                    if args.json {
                        println!("{}", serde_json::to_string_pretty(t).unwrap_or_default());
                    } else {
                        print!("{}", cipherbench_report::tunnel::text(t));
                    }
                }
            })
        }
        Command::Run(args) => {
            interrupt::install();
            let (mut session, outcome) = run::run(&args, cli.quiet)?;
            finish(&mut session, outcome, |s| {
                if let Some(speed) = &s.record.speed {
                    print!("{}", cipherbench_report::text::speed(speed));
                }
                if let Some(results) = &s.record.file {
                    print!("\n{}", cipherbench_report::file::text(results));
                }
                if let Some(t) = &s.record.tls {
                    print!("{}", cipherbench_report::tls::text(t, s.record.target_gbps));
                }
                if let Some(t) = &s.record.tunnel {
                    print!("{}", cipherbench_report::tunnel::text(t));
                }
            })
        }
    }
}

/// `cipherbench tunnel cleanup`: removes what killed runs left, says what.
/// The start of every single-layer command, once its flags are resolved: Ctrl-C
/// handling, the machine's probe, and a session writing where `output` says.
pub(crate) fn start_session(
    output: &cli::OutputArgs,
    preset: &str,
    quiet: bool,
) -> Result<Session> {
    interrupt::install();
    let environment = probe::collect();
    let dir = output.dir(&environment.hostname);
    Session::start(environment, preset, dir, Progress::new(quiet))
}

fn tunnel_cleanup(force: bool) -> Result<ExitCode> {
    let cleaned = tunnel::topology::cleanup(force)?;
    for ns in &cleaned.namespaces {
        println!("removed network namespace {ns}");
    }
    if !cleaned.processes.is_empty() {
        println!(
            "killed {} process(es) inside them: {:?}",
            cleaned.processes.len(),
            cleaned.processes
        );
    }
    for d in &cleaned.directories {
        println!("removed {}", d.display());
    }
    for run in &cleaned.live_runs {
        println!("left {run} alone: the cipherbench that made it is still running (--force removes it anyway)");
    }
    if cleaned.is_empty() && cleaned.live_runs.is_empty() {
        println!("nothing to clean up");
    }
    Ok(ExitCode::SUCCESS)
}

/// A label per record: the host name, or the directory name where hosts repeat.
fn compare_labels(
    records: &[cipherbench_model::RunRecord],
    dirs: &[std::path::PathBuf],
) -> Vec<String> {
    let hosts: Vec<String> = records
        .iter()
        .map(|r| r.environment.hostname.clone())
        .collect();
    let unique = hosts
        .iter()
        .all(|h| hosts.iter().filter(|x| *x == h).count() == 1);
    if unique {
        return hosts;
    }
    dirs.iter()
        .map(|d| {
            d.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| d.display().to_string())
        })
        .collect()
}

/// Saves the session whatever the outcome, prints the summary of what was measured,
/// and turns the outcome into an exit code.
fn finish(
    session: &mut Session,
    outcome: Result<()>,
    summary: impl FnOnce(&Session),
) -> Result<ExitCode> {
    session.finish(&outcome)?;
    if session.has_measurements() {
        summary(session);
        if let Some(dir) = session.dir() {
            println!("\nresults: {}", dir.display());
            println!("report:  {}", dir.join("report.html").display());
        }
    }
    outcome.map(|()| ExitCode::SUCCESS)
}
