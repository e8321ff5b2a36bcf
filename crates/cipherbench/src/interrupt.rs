//! Ctrl-C and SIGTERM: the first one asks the run to stop after saving what it has
//! measured; a second one exits at once (children die with us via PDEATHSIG and
//! their process groups are in our signal's path).
//!
//! Runners poll [`requested`] between units of work and return early; the results
//! sink then saves the record marked `interrupted`, and `main` exits with 130.

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(signal: libc::c_int) {
    if REQUESTED.swap(true, Ordering::SeqCst) {
        // Second signal: leave now. _exit is async-signal-safe.
        // SAFETY: _exit has no preconditions.
        unsafe { libc::_exit(128 + signal) };
    }
}

/// Installs the handlers for SIGINT and SIGTERM. Call once from `main`.
pub fn install() {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: we install a handler that only touches an atomic and calls _exit,
        // both async-signal-safe; the sigaction struct is zero-initialised and then
        // filled in as sigaction(2) requires.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut action.sa_mask);
            action.sa_flags = libc::SA_RESTART;
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// Whether the user asked to stop.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// The error a runner returns when it stopped because the user asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// Returns `Err(Interrupted)` if the user asked to stop.
pub fn check() -> Result<(), Interrupted> {
    if requested() {
        Err(Interrupted)
    } else {
        Ok(())
    }
}
