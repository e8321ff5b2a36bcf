//! `cipherbench run`: the main job. Probe, then each layer in turn into one results
//! directory, saved after every scenario, and the report at the end. A layer that
//! cannot run here (no root for namespaces, a missing program) is skipped with a
//! note and a warning in the data; the rest of the run goes on.

use crate::cli::{preset_file_plan, preset_speed_plan, preset_tunnel_plan, RunArgs};
use crate::interrupt;
use crate::progress::{human_duration, Progress};
use crate::results::{default_dir, Session};
use anyhow::Result;

/// Runs the main job. Returns the session (for the summary) and the outcome.
pub fn run(args: &RunArgs, quiet: bool) -> Result<(Session, Result<()>)> {
    let target_gbps = args.target_gbps.map(crate::cli::target_gbps).transpose()?;
    let environment = crate::probe::collect();
    let dir = args
        .results
        .clone()
        .unwrap_or_else(|| default_dir(&environment.hostname));
    let mut session =
        match Session::resume(&dir, &environment, args.preset.name(), Progress::new(quiet))? {
            Some(resumed) => {
                if !quiet {
                    eprintln!(
                        "resuming the unfinished run in {}: what it measured is kept",
                        dir.display()
                    );
                }
                resumed
            }
            None => Session::start(
                environment,
                args.preset.name(),
                Some(dir),
                Progress::new(quiet),
            )?,
        };
    if target_gbps.is_some() {
        session.record.target_gbps = target_gbps;
    }
    let speed_plan = preset_speed_plan(args.preset);
    let file_plan = preset_file_plan(args.preset);
    let tls_plan = crate::tls::args::preset_plan(args.preset)?;
    let tunnel_plan = preset_tunnel_plan(args.preset);
    if !quiet {
        eprintln!(
            "cipherbench run, preset {}: about {} in all; results in {}",
            args.preset.name(),
            human_duration(
                speed_plan.estimate()
                    + file_plan.estimate()
                    + tls_plan.estimate()
                    + tunnel_plan.estimate()
            ),
            session
                .dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default()
        );
    }
    let outcome = (|| -> Result<()> {
        session.save()?;
        interrupt::check()?;
        layer(&mut session, "speed", |s| crate::speed::run(&speed_plan, s))?;
        interrupt::check()?;
        layer(&mut session, "file", |s| {
            crate::file::bench::run(&file_plan, s)
        })?;
        interrupt::check()?;
        session
            .record
            .environment
            .tools
            .extend(crate::probe::tool_versions(&["nginx"]));
        layer(&mut session, "tls", |s| crate::tls::run(&tls_plan, s))?;
        interrupt::check()?;
        layer(&mut session, "tunnel", |s| {
            crate::tunnel::run(&tunnel_plan, s)
        })?;
        Ok(())
    })();
    Ok((session, outcome))
}

/// Runs one layer of the main job. A layer that fails (a missing program, no root
/// for namespaces) becomes a note and a `layer_failed` warning in the record, and the
/// run goes on; Ctrl-C stops the whole run.
fn layer(
    session: &mut Session,
    name: &str,
    run: impl FnOnce(&mut Session) -> Result<()>,
) -> Result<()> {
    if session.record.completed_layers.iter().any(|l| l == name) {
        session.progress.note(&format!(
            "{name}: measured by the run being resumed, skipped"
        ));
        return Ok(());
    }
    match run(session) {
        Ok(()) => {
            session.record.completed_layers.push(name.to_string());
            session.save()
        }
        Err(e) if e.downcast_ref::<interrupt::Interrupted>().is_some() => Err(e),
        Err(e) => {
            let message = format!("{name} skipped: {}", crate::one_line(&e));
            session.progress.note(&message);
            session.record.warn(name, "layer_failed", message);
            session.save()
        }
    }
}
