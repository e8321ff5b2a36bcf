//! Who may run beside whom. The test harness runs tests on as many threads as there
//! are CPUs, in name order, so a module's tests come one after another. Every test
//! first takes its module's turn ([`turn!`]): while one module's tests run, a test of
//! another module waits, and the tests of one module may run beside each other
//! unless they also take [`alone`].

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// The module whose tests run now, and how many of them.
struct Running {
    module: Option<&'static str>,
    tests: usize,
}

static RUNNING: Mutex<Running> = Mutex::new(Running {
    module: None,
    tests: 0,
});
static ENDED: Condvar = Condvar::new();

/// A test's share of its module's turn, given back when it ends (a panic too).
pub struct Turn;

/// The calling test's turn: `module_path!()` names its module.
#[macro_export]
macro_rules! turn {
    () => {
        $crate::turns::take(module_path!())
    };
}

/// Waits until no test of another module runs. `path` is the test's module path
/// (`it::tunnel_root`): its first module below the crate is its module.
pub fn take(path: &'static str) -> Turn {
    let module = path.split("::").nth(1).unwrap_or(path);
    let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
    while running.module.is_some_and(|m| m != module) {
        running = ENDED.wait(running).unwrap_or_else(PoisonError::into_inner);
    }
    running.module = Some(module);
    running.tests += 1;
    Turn
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
        running.tests -= 1;
        if running.tests == 0 {
            running.module = None;
            ENDED.notify_all();
        }
    }
}

/// The one lock of the tests that measure (variant judges: two at once lower each
/// other's figures, a control then moves) or that drive a tunnel, sshd hosts or
/// charon (exact counts, no loss, the processes of their own run): one at a time.
static ALONE: Mutex<()> = Mutex::new(());

/// Held for the test's length. A panicking test poisons the lock; the next may still
/// run.
pub fn alone() -> MutexGuard<'static, ()> {
    ALONE.lock().unwrap_or_else(PoisonError::into_inner)
}
