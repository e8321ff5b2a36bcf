//! When requests start: the closed loop's clients, or the open loop's schedule
//! (a fixed rate, a ramp, Poisson arrivals).

use super::*;

/// When requests start in the open loop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Schedule {
    /// A constant rate, requests per second, for a duration.
    Constant {
        /// Requests per second.
        rate: f64,
        /// Length.
        duration: Duration,
    },
    /// A rate rising linearly from 0 to `target_rate` over `duration` (the IXP425
    /// offload paper's ramp).
    Ramp {
        /// Rate at the end, requests per second.
        target_rate: f64,
        /// Length.
        duration: Duration,
    },
}

impl Schedule {
    /// Number of requests the schedule starts.
    pub fn count(&self) -> u64 {
        match *self {
            Schedule::Constant { rate, duration } => (rate * duration.as_secs_f64()).floor() as u64,
            // The integral of the rate: R * T / 2.
            Schedule::Ramp {
                target_rate,
                duration,
            } => (target_rate * duration.as_secs_f64() / 2.0).floor() as u64,
        }
    }

    /// Start of request `k` (0-based), from the start of the schedule.
    pub fn offset(&self, k: u64) -> Duration {
        match *self {
            Schedule::Constant { rate, .. } => Duration::from_secs_f64(k as f64 / rate),
            // The expected number started by t is R t^2 / (2T); request k starts when
            // that reaches k + 1/2.
            Schedule::Ramp {
                target_rate,
                duration,
            } => Duration::from_secs_f64(
                (2.0 * duration.as_secs_f64() * (k as f64 + 0.5) / target_rate).sqrt(),
            ),
        }
    }

    /// Length.
    pub fn duration(&self) -> Duration {
        match *self {
            Schedule::Constant { duration, .. } | Schedule::Ramp { duration, .. } => duration,
        }
    }
}

/// How requests arrive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrivals {
    /// C clients back to back.
    Closed {
        /// Concurrent clients.
        concurrency: usize,
    },
    /// On a schedule.
    Open(Schedule),
}
