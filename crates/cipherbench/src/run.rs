//! `cipherbench run`: the main job. Probe, then each layer in turn into one results
//! directory, saved after every scenario, and the report at the end. A layer that
//! cannot run here (no root for namespaces, a missing program) is skipped with a
//! note and a warning in the data; the rest of the run goes on.

use crate::cli::{preset_speed_plan, RunArgs};
use crate::interrupt;
use crate::progress::{human_duration, Progress};
use crate::results::{default_dir, Session};
use anyhow::Result;

/// Runs the main job. Returns the session (for the summary) and the outcome.
pub fn run(args: &RunArgs, quiet: bool) -> Result<(Session, Result<()>)> {
    let environment = crate::probe::collect();
    let dir = args
        .results
        .clone()
        .unwrap_or_else(|| default_dir(&environment.hostname));
    let mut session = Session::start(
        environment,
        args.preset.name(),
        Some(dir),
        Progress::new(quiet),
    )?;
    let speed_plan = preset_speed_plan(args.preset);
    if !quiet {
        eprintln!(
            "cipherbench run, preset {}: about {} in all; results in {}",
            args.preset.name(),
            human_duration(speed_plan.estimate()),
            session
                .dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default()
        );
    }
    let outcome = (|| -> Result<()> {
        session.save()?;
        interrupt::check()?;
        crate::speed::run(&speed_plan, &mut session)?;
        Ok(())
    })();
    Ok((session, outcome))
}
