//! cipherbench, the application: command line, probe, the four layers' runners, the
//! process supervisor and the results sink.
//!
//! Data flow: `argv -> Cli -> plan -> probe -> for each scenario: run -> outcome ->
//! save -> report`. Runners return data and never print; the [`progress`] observer
//! prints; the report crate renders. See ARCHITECTURE.md.

pub mod agent;
pub mod agent_server;
pub mod campaign;
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
    say_panics_in_one_line();
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

/// A panic is a bug: after Rust's own report (where, and a backtrace with
/// `RUST_BACKTRACE=1`), one line in the form of every other failure, saying what
/// failed and what to do, so a run that ends in a panic (exit 101) is never without
/// one.
fn say_panics_in_one_line() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        let what = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        errln!(
            "cipherbench: internal error (a bug): {}{at}; please report it with the lines above (RUST_BACKTRACE=1 adds a backtrace)",
            what.replace('\n', " ")
        );
    }));
}
