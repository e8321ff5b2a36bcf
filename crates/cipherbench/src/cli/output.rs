//! Where a measuring command's results go (`--results`, `--no-save`), its session
//! from start to finish, and how its results are shown (a table, or JSON).

use crate::interrupt;
use crate::library::{self, Library};
use crate::progress::Progress;
use crate::progress::{errln, out, outln};
use crate::results::Session;
use anyhow::Result;
use clap::Args;
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;

/// Where results go.
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Results directory (default: results/<timestamp>-<host>).
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,
    /// Measure and print, but write no results directory.
    #[arg(long, conflicts_with = "results")]
    pub no_save: bool,
}

impl OutputArgs {
    /// The results directory to write: none with `--no-save`, else `--results` or
    /// the default for this host.
    pub fn dir(&self, hostname: &str) -> Option<PathBuf> {
        if self.no_save {
            return None;
        }
        Some(
            self.results
                .clone()
                .unwrap_or_else(|| crate::results::default_dir(hostname)),
        )
    }
}

/// A single-layer measurement, once its flags are resolved: Ctrl-C handling, what
/// an earlier killed run left (removed, in one line), the machine's probe with the libraries under test, a
/// session writing where `output` says (resuming the unfinished run of this same
/// command there), the run, and the summary. `namespaces`: the layer makes
/// network namespaces, so stale ones are looked for too.
pub fn measure(
    output: &OutputArgs,
    preset: &str,
    quiet: bool,
    libraries: &[Library],
    namespaces: bool,
    run: impl FnOnce(&mut Session) -> Result<()>,
    show: impl FnOnce(&Session),
) -> Result<ExitCode> {
    interrupt::install();
    super::cleanup::at_start(namespaces);
    let mut environment = crate::probe::collect();
    library::describe(&mut environment, libraries);
    let mut session = match output.dir(&environment.hostname) {
        None => Session::start(environment, preset, None, Progress::new(quiet))?,
        Some(dir) => {
            let (session, resumed) =
                Session::open(environment, preset, dir.clone(), Progress::new(quiet))?;
            if resumed && !quiet {
                errln!(
                    "resuming the unfinished run in {}: what it measured is kept",
                    dir.display()
                );
            }
            session
        }
    };
    let outcome = run(&mut session);
    finish(&mut session, outcome, show)
}

/// Set once a command printed its results as JSON: stdout then holds that document
/// alone, and where the results went is said on stderr.
static JSON_ON_STDOUT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Prints one layer's results: pretty JSON with `--json`, else the text table;
/// nothing if the layer has none.
pub fn summary<T: Serialize>(json: bool, value: Option<&T>, text: impl FnOnce(&T) -> String) {
    let Some(value) = value else {
        return;
    };
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(value).unwrap_or_default()
        );
        JSON_ON_STDOUT.store(true, std::sync::atomic::Ordering::Relaxed);
    } else {
        out!("{}", text(value));
    }
}

/// Saves the session whatever the outcome, prints the summary of what was measured,
/// and turns the outcome into an exit code.
pub fn finish(
    session: &mut Session,
    outcome: Result<()>,
    summary: impl FnOnce(&Session),
) -> Result<ExitCode> {
    if let Err(saving) = session.finish(&outcome) {
        // Both said, in one line: why the run stopped, and why its results could not
        // be saved (an interruption stays one, for its exit status).
        return Err(match outcome {
            Ok(()) => saving,
            Err(e) => e.context(format!(
                "saving what was measured failed too ({}); the run stopped",
                crate::progress::one_line(&saving)
            )),
        });
    }
    if session.has_measurements() {
        summary(session);
        if let Some(dir) = session.dir() {
            let report = dir.join("report.html");
            if JSON_ON_STDOUT.load(std::sync::atomic::Ordering::Relaxed) {
                errln!("results: {}", dir.display());
                errln!("report:  {}", report.display());
            } else {
                outln!("\nresults: {}", dir.display());
                outln!("report:  {}", report.display());
            }
        }
    }
    outcome.map(|()| ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use crate::interrupt::Interrupted;

    #[test]
    fn an_interruption_with_a_failed_save_is_still_an_interruption() {
        // `finish` adds the failed save as context; `main` reads the exit status
        // (130) through it.
        let e = anyhow::Error::from(Interrupted).context("saving what was measured failed too");
        assert!(e.downcast_ref::<Interrupted>().is_some());
        let line = crate::progress::one_line(&e);
        assert!(
            line.starts_with("saving what was measured failed too: interrupted"),
            "{line}"
        );
    }
}
