//! `cipherbench cleanup` (and its alias `tunnel cleanup`): removes what killed runs
//! left, for every layer, and says what; and [`at_start`], the same sweep that every
//! measuring command does before it starts, reported in one line.
//!
//! What is looked for (`lifetime.rs`, `tunnel/topology.rs`, `results.rs`): the
//! temporary directories under `$TMPDIR/cipherbench-<uid>/` (nginx workspaces with
//! their private keys, tunnel and file scratch) and the tunnel's network
//! namespaces, each named with its owner's pid and start time, and, for results
//! directories given on the command line, a killed write's temporary files and a
//! killed file layer's scratch. A live run's are left alone unless `--force`; a
//! results directory a live run holds is never touched.

use crate::lifetime::{self, Swept};
use crate::progress::{errln, outln};
use crate::results;
use crate::tunnel;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// `cipherbench cleanup`.
#[derive(Debug, Args)]
pub struct CleanupArgs {
    /// Also remove what live runs are using (their namespaces and temporary
    /// directories); their processes are ended. Never a live run's results
    /// directory.
    #[arg(long)]
    pub force: bool,
    /// Results directories to clean too (a killed write's temporary files, a
    /// killed file layer's scratch directory).
    #[arg(value_name = "RESULTS_DIR")]
    pub dirs: Vec<PathBuf>,
}

/// Everything of every layer, namespaces first (their processes are ended with
/// them), then the temporary directories.
fn sweep(namespaces: bool, force: bool) -> Swept {
    let mut swept = Swept::default();
    if namespaces {
        swept.merge(tunnel::topology::cleanup(force));
    }
    swept.merge(lifetime::sweep_temp(force));
    swept
}

/// At the start of a measuring command: removes what killed runs left and says so
/// in one line (nothing if there was nothing). `namespaces`: this command makes
/// network namespaces, so stale ones of ours are looked for (`ip netns list`).
pub fn at_start(namespaces: bool) {
    if let Some(note) = sweep(namespaces, false).note() {
        errln!("note: {note}");
    }
}

/// `cipherbench cleanup`.
pub fn command(args: &CleanupArgs) -> Result<ExitCode> {
    let mut swept = sweep(true, args.force);
    let mut refused = Vec::new();
    for dir in &args.dirs {
        match results::open_existing(dir) {
            Ok(opened) => swept.merge(opened.swept().clone()),
            // A live run's directory is left alone like its other things.
            Err(e) if results::held_by_another(dir) => {
                refused.push(format!("{e:#}"));
            }
            Err(e) => swept.failed.push(format!("{}: {e:#}", dir.display())),
        }
    }
    for what in &swept.removed {
        outln!("removed {what}");
    }
    if !swept.processes.is_empty() {
        outln!(
            "ended {} process(es) still running there: {:?}",
            swept.processes.len(),
            swept.processes
        );
    }
    for what in &swept.live {
        outln!(
            "left {what} alone: the cipherbench that made it is still running (--force removes it anyway)"
        );
    }
    for why in &refused {
        outln!("left a results directory alone: {why}");
    }
    for why in &swept.failed {
        outln!("could not remove {why}");
    }
    if swept.removed.is_empty() && swept.failed.is_empty() {
        outln!("nothing to clean up");
    }
    Ok(if swept.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
