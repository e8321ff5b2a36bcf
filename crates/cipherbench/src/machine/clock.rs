//! The core's clock, measured: a chain of dependent integer additions, one cycle
//! each on every x86-64 and AArch64 core (an addition's result is the next one's
//! input, so no core can overlap them and none takes longer), timed by the thread's
//! CPU clock, the clock the speed samples' CPU time is read from. Cycles per byte are
//! then a sample's CPU seconds times this rate over its bytes: the same clock on
//! both sides, so a VM's steal time or a frequency the guest cannot see cancels out
//! to first order. This kernel gives a KVM guest no cycle counter (no PMU in
//! /sys/bus/event_source), which is why cipherbench measures the clock this way.

use crate::host;
use std::time::Duration;

/// Additions per pass of the chain ([`host::ADD_CHAIN`]).
const CHAIN: u64 = host::ADD_CHAIN;

/// How long each of the [`WINDOWS`] runs, about.
const WINDOW: Duration = Duration::from_millis(20);

/// Windows measured; the median is kept.
const WINDOWS: usize = 7;

/// How the clock was measured, as run.json records it.
pub const METHOD: &str = "dependent-add chain timed by CLOCK_THREAD_CPUTIME_ID";

/// Cycles per CPU second on `cpu` (this thread's CPUs when None): the median of
/// [`WINDOWS`] windows. None on an architecture without the chain.
pub fn measure(cpu: Option<usize>) -> Option<f64> {
    let run = move || {
        if let Some(c) = cpu {
            // Unpinned, the figure is still this thread's clock.
            let _ = host::pin_to_core(c);
        }
        // Calibrate the passes per window on a short first pass.
        let passes = chain(1 << 16)
            .map(|ns| ((WINDOW.as_nanos() as f64 / ns.max(1) as f64) * (1 << 16) as f64) as u64)?;
        let passes = passes.max(1 << 16);
        let mut rates: Vec<f64> = (0..WINDOWS)
            .filter_map(|_| chain(passes))
            .map(|ns| (passes * CHAIN) as f64 / (ns.max(1) as f64 / 1e9))
            .collect();
        rates.sort_by(f64::total_cmp);
        rates.get(rates.len() / 2).copied()
    };
    std::thread::scope(|s| s.spawn(run).join().ok().flatten())
}

/// CPU nanoseconds for `passes` passes of the chain; None on an architecture
/// without it, or if the chain did not count what it ran.
fn chain(passes: u64) -> Option<u64> {
    let start = host::thread_cpu_ns();
    let counted = host::add_chain(passes)?;
    let ns = host::thread_cpu_ns().saturating_sub(start);
    (counted == passes * CHAIN).then_some(ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_counts_what_it_ran() {
        let ns = chain(1000).expect("a chain on this architecture");
        assert!(ns > 0);
    }

    #[test]
    fn this_machine_s_clock_is_a_clock_a_core_could_have() {
        // Not a figure to hold: a bound that a broken chain (optimised away, or
        // timed by the wrong clock) would leave by orders of magnitude.
        let hz = measure(None).expect("a clock on this architecture");
        eprintln!("this machine's clock: {:.3} GHz", hz / 1e9);
        assert!((2e8..1e10).contains(&hz), "{hz} Hz");
    }
}
