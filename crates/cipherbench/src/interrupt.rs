//! Ctrl-C, SIGTERM and SIGHUP (a terminal that went away; left alone when ignored,
//! as under `nohup`), counted together, so that none of them ends a run without
//! saving, cleaning up and saying so:
//!
//! 1. the first asks the run to stop after saving what it has measured: runners poll
//!    [`requested`] between units of work and return early; the results sink saves
//!    the record marked `interrupted`, everything the run made is removed, and
//!    `main` exits with 130 (for SIGTERM too: 130 is this tool's one status for
//!    "stopped on request, cleaned up", and the message names the signal);
//! 2. the second is "hurry" ([`hurry`]): graceful waits are skipped (a child gets
//!    SIGKILL at once instead of SIGTERM and a grace period), and everything is
//!    still removed;
//! 3. the third exits at once from the handler, with 130, after one line naming
//!    what the run leaves behind ([`set_left_behind`] keeps that line current) and
//!    how to remove it (`cipherbench cleanup`). Its processes do not stay: they die
//!    with it (`supervisor.rs`).
//!
//! `seal` and `open` need more: an input that a signal cut short must never be
//! taken for a whole one. They install the handlers with
//! [`install_interrupting`] (no `SA_RESTART`), keep the signals off their helper
//! threads ([`keep_off_this_thread`]) so that only the main thread takes them, and
//! ask [`requested_or_pending`] before they publish anything.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);
/// The first stop signal received (0 before any).
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// Stop signals received so far.
static COUNT: AtomicU32 = AtomicU32::new(0);
/// The line the third signal prints: what the run leaves behind. Replaced whole
/// (the old one is leaked, never freed, since a handler may be reading it).
static LEFT_BEHIND: AtomicPtr<Vec<u8>> = AtomicPtr::new(std::ptr::null_mut());

/// The signals that ask us to stop.
const STOP_SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Exit status of a run stopped on request (128 + SIGINT, as shells report Ctrl-C).
pub const EXIT_STOPPED: i32 = 130;

const HURRY_LINE: &[u8] = b"\ncipherbench: hurrying: no more graceful waits; still removing what this run made (a third Ctrl-C exits at once)\n";
const NOTHING_LEFT_LINE: &[u8] =
    b"\ncipherbench: exiting at once (third signal); its processes end with it and it leaves nothing else behind\n";

extern "C" fn on_signal(signal: libc::c_int) {
    // The name first, so that whoever sees REQUESTED can name the signal.
    let _ = SIGNAL.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
    REQUESTED.store(true, Ordering::SeqCst);
    let n = COUNT.fetch_add(1, Ordering::SeqCst) + 1;
    if n == 2 {
        write_stderr(HURRY_LINE);
    } else if n >= 3 {
        let note = LEFT_BEHIND.load(Ordering::SeqCst);
        if note.is_null() {
            write_stderr(NOTHING_LEFT_LINE);
        } else {
            // SAFETY: a non-null pointer here came from Box::into_raw in
            // set_left_behind and is never freed; reading its bytes allocates
            // nothing.
            write_stderr(unsafe { &*note });
        }
        // SAFETY: _exit is async-signal-safe and has no preconditions.
        unsafe { libc::_exit(EXIT_STOPPED) };
    }
}

/// write(2) to stderr from a signal handler: async-signal-safe, errors ignored (a
/// closed stderr must not stop us).
fn write_stderr(bytes: &[u8]) {
    // SAFETY: write is async-signal-safe; the buffer is valid for its length.
    unsafe {
        libc::write(2, bytes.as_ptr().cast(), bytes.len());
    }
}

/// Keeps the third signal's line current: `items` is what this run has made that
/// would stay if it exited at once (namespaces, temporary directories), empty for
/// nothing.
pub fn set_left_behind(items: &[String]) {
    let line = if items.is_empty() {
        std::ptr::null_mut()
    } else {
        let text = format!(
            "\ncipherbench: exiting at once (third signal); its processes end with it, and it leaves behind {}; `cipherbench cleanup` removes what is left\n",
            items.join(", ")
        );
        Box::into_raw(Box::new(text.into_bytes()))
    };
    // The previous line is leaked on purpose: a handler may be writing it now.
    LEFT_BEHIND.swap(line, Ordering::SeqCst);
}

fn install_with(flags: libc::c_int) {
    for signal in STOP_SIGNALS {
        if signal == libc::SIGHUP && ignored(signal) {
            // `nohup`: the user asked for the run to outlive its terminal.
            continue;
        }
        // SAFETY: we install a handler that only touches atomics, reads a buffer
        // that is never freed, and calls write and _exit, all async-signal-safe; the sigaction struct is zero-initialised and then
        // filled in as sigaction(2) requires.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut action.sa_mask);
            action.sa_flags = flags;
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// Whether `signal` is ignored (as `nohup` leaves SIGHUP).
fn ignored(signal: libc::c_int) -> bool {
    // SAFETY: sigaction with a null new action only reads the current one into a
    // zero-initialised struct.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_IGN
    }
}

/// Installs the handlers for SIGINT, SIGTERM and SIGHUP. Call once from `main`. Blocking
/// system calls the signal lands in are restarted (`SA_RESTART`): the layers that
/// wait for children, sockets or servers poll [`requested`] on their own schedule.
pub fn install() {
    install_with(libc::SA_RESTART);
}

/// Installs the handlers without `SA_RESTART`, for `seal` and `open`: a `read` or
/// `write` the signal lands in fails with EINTR instead of carrying on, so a
/// `write` to a stalled pipe or a `read` of a silent terminal on the main thread
/// ends at once. Every blocking call of those commands is a loop that asks
/// [`requested`] on EINTR (the file layer's `pipeline` and `sys`); `std`'s own
/// loops (`read_to_end`, channels, joins) retry EINTR themselves.
pub fn install_interrupting() {
    install_with(0);
}

/// Whether the user asked to stop.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// Whether the user asked twice: skip graceful waits, still clean up.
pub fn hurry() -> bool {
    COUNT.load(Ordering::SeqCst) >= 2
}

/// Whether the user asked to stop, or a stop signal is queued for this process
/// and not yet handled. Asked on the main thread before something is made
/// permanent: when every other thread keeps the signals off
/// ([`keep_off_this_thread`]), a signal the kernel queued before this call is
/// either handled already (this thread ran the handler) or still pending, so none
/// slips through. (Ctrl-C signals the producer of a pipe and us together; the
/// producer's death may reach our reader as end-of-input first.)
pub fn requested_or_pending() -> bool {
    requested() || stop_signal_pending()
}

fn stop_signal_pending() -> bool {
    // SAFETY: sigset_t is plain data that sigemptyset initialises; sigpending
    // writes into it; sigismember only reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        if libc::sigpending(&mut set) != 0 {
            return false;
        }
        STOP_SIGNALS
            .iter()
            .any(|&s| libc::sigismember(&set, s) == 1)
    }
}

/// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread, so that the process's main
/// thread is the one that takes them (POSIX delivers a process-directed signal to
/// a thread that does not block it). Call first thing in a helper thread of `seal`
/// or `open`: its blocking calls then never see EINTR, and
/// [`requested_or_pending`] on the main thread cannot miss a signal that another
/// thread is halfway through handling.
pub fn keep_off_this_thread() {
    // SAFETY: the set is initialised by sigemptyset/sigaddset before use;
    // pthread_sigmask only changes this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in STOP_SIGNALS {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// The error a runner returns when it stopped because the user asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match SIGNAL.load(Ordering::SeqCst) {
            libc::SIGINT => f.write_str("interrupted by SIGINT (Ctrl-C)"),
            libc::SIGTERM => f.write_str("interrupted by SIGTERM"),
            libc::SIGHUP => f.write_str("interrupted by SIGHUP (its terminal went away)"),
            _ => f.write_str("interrupted"),
        }
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
