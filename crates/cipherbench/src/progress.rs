//! The one observer of a run's progress: runners report events here, and this is the
//! only place that prints them (to stderr, so stdout stays clean for results). Also
//! how an error is said in one line, for notes and for `main`.

use std::io::Write;
use std::time::{Duration, Instant};

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
            eprintln!(
                "[{name}] {total} points, about {}",
                human_duration(estimate)
            );
        }
    }

    /// A point finished.
    pub fn point(&mut self, label: &str) {
        self.done += 1;
        if !self.quiet {
            eprintln!(
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
        eprintln!("note: {message}");
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
