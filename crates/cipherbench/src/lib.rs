//! cipherbench, the application: command line, probe, the four layers' runners, the
//! process supervisor and the results sink.
//!
//! Data flow: `argv -> Cli -> plan -> probe -> for each scenario: run -> outcome ->
//! save -> report`. Runners return data and never print; the [`progress`] observer
//! prints; the report crate renders. See ARCHITECTURE.md.

pub mod agent;
pub mod agent_server;
pub mod cli;
pub mod effect;
pub mod file;
pub mod host;
pub mod interrupt;
pub mod library;
pub mod lifetime;
pub mod machine;
pub mod probe;
pub mod progress;
pub mod results;
pub mod run;
pub mod speed;
pub mod supervisor;
pub mod tls;
pub mod tunnel;
pub mod variant;

use cli::Cli;
use progress::errln;
use progress::one_line;
use std::process::ExitCode;

/// Exit code for an interrupted run (128 + SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: u8 = 130;

/// Runs a parsed command line; returns the process exit code. Errors are printed
/// here, as one line on stderr.
pub fn main(cli: Cli) -> ExitCode {
    host::ensure_standard_fds();
    // Every child starts under a keeper run from this very binary (supervisor.rs).
    supervisor::use_keeper("/proc/self/exe");
    let outcome = cli::dispatch(cli);
    // Counter files and generated configurations of provider and engine variants.
    variant::implementation::release();
    match outcome {
        Ok(code) => code,
        Err(e) => {
            if e.downcast_ref::<interrupt::Interrupted>().is_some() {
                // With what was being done and what was left, when the layer says.
                errln!("cipherbench: {}", one_line(&e));
                return ExitCode::from(EXIT_INTERRUPTED);
            }
            errln!("cipherbench: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}
