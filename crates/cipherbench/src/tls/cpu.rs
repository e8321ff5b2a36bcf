//! CPU accounting for layer 3: nginx's workers' CPU time sampled from `/proc`
//! through a measurement window. (Cores, pinning and the generator's own CPU time
//! are [`crate::host`]'s.)
//!
//! The arithmetic ([`server_cpu`]) is a pure function of samples so it is tested
//! without processes; the sampler only reads `/proc` on a timer.

use cipherbench_model::tls::ServerCpu;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One reading of every worker's cumulative CPU time.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuSample {
    /// When.
    pub at: Instant,
    /// Cumulative CPU ns per worker, in worker order.
    pub cpu_ns: Vec<u64>,
    /// Cumulative ns each worker was runnable but waiting for a CPU.
    pub wait_ns: Vec<u64>,
}

/// Reads the workers' CPU time every `interval` on a thread until stopped.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<CpuSample>>>,
    handle: Option<JoinHandle<()>>,
    interval: Duration,
}

impl Sampler {
    /// Starts sampling `pids`.
    pub fn start(pids: Vec<u32>, interval: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let handle = {
            let stop = Arc::clone(&stop);
            let samples = Arc::clone(&samples);
            std::thread::spawn(move || {
                let mut next = Instant::now();
                loop {
                    let times: Vec<(u64, u64)> = pids
                        .iter()
                        .map(|&p| crate::host::process_times(p).unwrap_or((0, 0)))
                        .collect();
                    let sample = CpuSample {
                        at: Instant::now(),
                        cpu_ns: times.iter().map(|t| t.0).collect(),
                        wait_ns: times.iter().map(|t| t.1).collect(),
                    };
                    samples
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(sample);
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    next += interval;
                    // A sampling cadence, not a readiness wait: the samples are
                    // time-stamped, so a late wake-up costs nothing but resolution.
                    let now = Instant::now();
                    if next > now {
                        std::thread::sleep(next - now);
                    } else {
                        next = now;
                    }
                }
            })
        };
        Sampler {
            stop,
            samples,
            handle: Some(handle),
            interval,
        }
    }

    /// Stops the sampler (after one last sample) and returns the samples.
    pub fn finish(mut self) -> (Vec<CpuSample>, Duration) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        let samples = std::mem::take(&mut *self.samples.lock().unwrap_or_else(|p| p.into_inner()));
        (samples, self.interval)
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// nginx's CPU use over `[start, end]` from samples: per worker and in total from the
/// samples nearest inside the window, and the peak over intervals of about
/// `peak_interval`. None if fewer than two samples fall in the window.
pub fn server_cpu(
    samples: &[CpuSample],
    start: Instant,
    end: Instant,
    peak_interval: Duration,
) -> Option<ServerCpu> {
    let inside: Vec<&CpuSample> = samples
        .iter()
        .filter(|s| s.at >= start && s.at <= end)
        .collect();
    let (first, last) = (inside.first()?, inside.last()?);
    let span = last.at.duration_since(first.at).as_nanos() as f64;
    if span <= 0.0 || first.cpu_ns.is_empty() {
        return None;
    }
    let workers = first.cpu_ns.len();
    let per_worker: Vec<f64> = (0..workers)
        .map(|w| last.cpu_ns[w].saturating_sub(first.cpu_ns[w]) as f64 / span)
        .collect();
    let total = per_worker.iter().sum::<f64>() / workers as f64;
    let waited: u64 = (0..workers)
        .map(|w| {
            let at = |s: &CpuSample| s.wait_ns.get(w).copied().unwrap_or(0);
            at(last).saturating_sub(at(first))
        })
        .sum();
    let runqueue_wait = waited as f64 / (span * workers as f64);
    let mut peak: f64 = 0.0;
    let mut from = *first;
    for s in &inside[1..] {
        let dt = s.at.duration_since(from.at);
        if dt >= peak_interval.mul_f64(0.9) || std::ptr::eq(*s, *last) {
            let used: u64 = (0..workers)
                .map(|w| s.cpu_ns[w].saturating_sub(from.cpu_ns[w]))
                .sum();
            if dt.as_nanos() > 0 && dt >= peak_interval.mul_f64(0.5) {
                peak = peak.max(used as f64 / (dt.as_nanos() as f64 * workers as f64));
            }
            from = s;
        }
    }
    Some(ServerCpu {
        per_worker,
        total,
        peak: peak.max(total),
        interval_ns: peak_interval.as_nanos() as u64,
        runqueue_wait,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn computes_per_worker_total_and_peak() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // Two workers: the first busy all the time, the second half the time, and
        // in the second second both fully busy.
        let samples = vec![
            CpuSample {
                at: at(0),
                cpu_ns: vec![0, 0],
                wait_ns: vec![0, 0],
            },
            CpuSample {
                at: at(1000),
                cpu_ns: vec![1_000_000_000, 0],
                wait_ns: vec![0, 0],
            },
            CpuSample {
                at: at(2000),
                cpu_ns: vec![2_000_000_000, 1_000_000_000],
                wait_ns: vec![0, 400_000_000],
            },
            CpuSample {
                at: at(5000),
                cpu_ns: vec![9_000_000_000, 9_000_000_000],
                wait_ns: vec![0, 400_000_000],
            },
        ];
        let cpu = server_cpu(&samples, at(0), at(2000), Duration::from_secs(1)).unwrap();
        assert_eq!(cpu.per_worker, vec![1.0, 0.5]);
        assert!((cpu.total - 0.75).abs() < 1e-9);
        assert!((cpu.peak - 1.0).abs() < 1e-9, "{}", cpu.peak);
        // 0.4 s of waiting over 2 s and 2 workers.
        assert!(
            (cpu.runqueue_wait - 0.1).abs() < 1e-9,
            "{}",
            cpu.runqueue_wait
        );
        assert!(server_cpu(&samples, at(100), at(900), Duration::from_secs(1)).is_none());
    }
}
