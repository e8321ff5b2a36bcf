//! The one observer of a run's progress: runners report events here, and this is the
//! only place that prints them (to stderr, so stdout stays clean for results). Also
//! how an error is said in one line, for notes and for `main`, and the crate's only
//! way to write to stdout and stderr ([`outln!`], [`out!`], [`errln!`]): a closed or
//! broken stream (`| head -c1`, a `tee` killed by the same Ctrl-C, `>&-`) loses the
//! text and nothing else. Rust ignores SIGPIPE, so such a write fails with EPIPE;
//! `println!` would panic on it (exit 101, mid-cleanup), these do not.

use std::fmt;
use std::io::Write;

/// Writes to stdout, ignoring a closed or broken stdout.
pub fn write_stdout(args: fmt::Arguments<'_>) {
    let _ = std::io::stdout().lock().write_fmt(args);
}

/// Writes to stderr, ignoring a closed or broken stderr.
pub fn write_stderr(args: fmt::Arguments<'_>) {
    let _ = std::io::stderr().lock().write_fmt(args);
}

/// `println!` that survives a closed stdout.
macro_rules! outln {
    () => {
        $crate::progress::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::progress::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` that survives a closed stdout.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::progress::write_stdout(format_args!($($arg)*))
    };
}

/// `eprintln!` that survives a closed stderr.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::progress::write_stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

use std::time::{Duration, Instant};
pub(crate) use {errln, out, outln};

/// An error and its causes on one line: "what failed: why".
pub fn one_line(e: &anyhow::Error) -> String {
    format!("{e:#}").replace('\n', " ")
}

/// Progress printer.
#[derive(Debug)]
pub struct Progress {
    quiet: bool,
    layer: String,
    done: usize,
    total: usize,
    started: Instant,
}

impl Progress {
    /// A printer; `quiet` keeps only notes.
    pub fn new(quiet: bool) -> Progress {
        Progress {
            quiet,
            layer: String::new(),
            done: 0,
            total: 0,
            started: Instant::now(),
        }
    }

    /// A layer starts: how many points it has and about how long it will take.
    pub fn layer(&mut self, name: &str, total: usize, estimate: Duration) {
        self.layer = name.to_string();
        self.done = 0;
        self.total = total;
        self.started = Instant::now();
        if !self.quiet {
            errln!(
                "[{name}] {total} points, about {}",
                human_duration(estimate)
            );
        }
    }

    /// A point finished.
    pub fn point(&mut self, label: &str) {
        self.done += 1;
        if !self.quiet {
            errln!(
                "[{} {}/{} {:>4}s] {label}",
                self.layer,
                self.done,
                self.total,
                self.started.elapsed().as_secs()
            );
            let _ = std::io::stderr().flush();
        }
    }

    /// Points that will not run (a cipher unavailable in a variant).
    pub fn skip(&mut self, n: usize) {
        self.done += n;
    }

    /// Something the user should know, even in quiet mode.
    pub fn note(&mut self, message: &str) {
        errln!("note: {message}");
    }
}

/// "3 min 20 s", "45 s".
pub fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{} h {} min", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{} min {} s", s / 60, s % 60)
    } else {
        format!("{} s", s.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_durations() {
        assert_eq!(human_duration(Duration::from_secs(45)), "45 s");
        assert_eq!(human_duration(Duration::from_secs(200)), "3 min 20 s");
        assert_eq!(human_duration(Duration::from_secs(3700)), "1 h 1 min");
        assert_eq!(human_duration(Duration::from_millis(10)), "1 s");
    }
}
