//! `cipherbench run`: the main job. Probe, then each layer in turn into one results
//! directory, saved after every scenario, and the report at the end. A layer that
//! cannot run here (no root for namespaces, a missing program) is skipped with a
//! note and a warning in the data; the rest of the run goes on.
//!
//! This sits above the four layers and drives them in turn; no layer imports it. It
//! gets its plan resolved (the preset's plan of every layer) from the command line.

use crate::file::bench::FilePlan;
use crate::interrupt;
use crate::library::{self, Library};
use crate::progress::errln;
use crate::progress::{human_duration, one_line, Progress};
use crate::results::{default_dir, Session};
use crate::speed::SpeedPlan;
use crate::tls::{ramp, sweep, RampPlan, SweepPlan};
use crate::tunnel::TunnelPlan;
use anyhow::Result;
use std::path::PathBuf;
use std::time::Duration;

/// Everything the main job will do, resolved before anything starts.
#[derive(Debug, Clone)]
pub struct RunPlan {
    /// The preset's name, recorded in run.json (a resumed run must match it).
    pub preset: String,
    /// A rehearsal of the preset (`--rehearse`): its plan at the tiny preset's
    /// lengths, recorded as such.
    pub rehearsal: bool,
    /// The results directory (None: `results/<timestamp>-<host>`).
    pub results: Option<PathBuf>,
    /// TLS throughput to plan for, Gbit/s (checked).
    pub target_gbps: Option<f64>,
    /// The libraries under test, resolved, the baseline first (every layer's
    /// variants are already crossed with them).
    pub libraries: Vec<Library>,
    /// (layer, why): a library a layer leaves out, because a program of that layer
    /// not built by the project cannot load it.
    pub left_out: Vec<(String, String)>,
    /// Layer 1.
    pub speed: SpeedPlan,
    /// Layer 2.
    pub file: FilePlan,
    /// Layer 3.
    pub tls: TlsPlan,
    /// Layer 4.
    pub tunnel: TunnelPlan,
}

/// Layer 3 of a preset: a sweep, then a ramp.
#[derive(Debug, Clone)]
pub struct TlsPlan {
    /// The sweep.
    pub sweep: SweepPlan,
    /// The ramp.
    pub ramp: RampPlan,
}

impl TlsPlan {
    /// A rough duration for the estimate printed before a run.
    pub fn estimate(&self) -> Duration {
        self.sweep.estimate() + self.ramp.estimate()
    }

    /// Runs the sweep, then the ramp.
    fn run(&self, session: &mut Session) -> Result<()> {
        sweep::run(&self.sweep, session)?;
        ramp::run(&self.ramp, session)
    }
}

/// Runs the main job. Returns the session (for the summary) and the outcome.
pub fn run(plan: &RunPlan, quiet: bool) -> Result<(Session, Result<()>)> {
    let mut environment = crate::probe::collect();
    library::describe(&mut environment, &plan.libraries);
    let dir = plan
        .results
        .clone()
        .unwrap_or_else(|| default_dir(&environment.hostname));
    let (mut session, resumed) =
        Session::open(environment, &plan.preset, dir.clone(), Progress::new(quiet))?;
    if resumed && !quiet {
        errln!(
            "resuming the unfinished run in {}: what it measured is kept",
            dir.display()
        );
    }
    if plan.target_gbps.is_some() {
        session.record.target_gbps = plan.target_gbps;
    }
    session.record.rehearsal = plan.rehearsal;
    if !quiet {
        errln!(
            "cipherbench run, preset {}{}: about {} in all; results in {}",
            plan.preset,
            if plan.rehearsal {
                " rehearsed (every part of it at the tiny preset's lengths; its figures are not the preset's)"
            } else {
                ""
            },
            human_duration(
                plan.speed.estimate()
                    + plan.file.estimate()
                    + plan.tls.estimate()
                    + plan.tunnel.estimate()
            ),
            session
                .dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default()
        );
    }
    // One glance at the machine before measuring (one second with nothing of ours
    // running): recorded, said in the header, and warned; it changes nothing.
    let fitness = crate::probe::fitness(std::time::Duration::from_secs(1));
    if !quiet {
        errln!("{}", cipherbench_report::machine::fitness_line(&fitness));
    }
    for f in &fitness.findings {
        session
            .record
            .warn("run", &f.kind, format!("before the run: {}", f.message));
    }
    session.record.fitness = Some(fitness);
    for (layer, why) in &plan.left_out {
        if !quiet {
            errln!("{layer}: one library left out of this layer: {why}");
        }
        session
            .record
            .warn(layer, "library_left_out", format!("left out: {why}"));
    }
    let outcome = (|| -> Result<()> {
        session.save()?;
        interrupt::check()?;
        layer(&mut session, "speed", |s| crate::speed::run(&plan.speed, s))?;
        interrupt::check()?;
        layer(&mut session, "file", |s| {
            crate::file::bench::run(&plan.file, s)
        })?;
        interrupt::check()?;
        session
            .record
            .environment
            .tools
            .extend(crate::probe::tool_versions(&["nginx"]));
        // A layer every library was left out of (plan.left_out) is not started.
        if !plan.tls.sweep.variants.is_empty() {
            layer(&mut session, "tls", |s| plan.tls.run(s))?;
        }
        interrupt::check()?;
        if !plan.tunnel.variants.is_empty() {
            layer(&mut session, "tunnel", |s| {
                crate::tunnel::run(&plan.tunnel, s)
            })?;
        }
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
            let message = format!("{name} skipped: {}", one_line(&e));
            session.progress.note(&message);
            session.record.warn(name, "layer_failed", message);
            session.save()
        }
    }
}
