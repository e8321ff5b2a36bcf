//! CPU accounting for layer 3: which cores the server and the generator get, the
//! generator's own CPU time, and nginx's workers' CPU time sampled from `/proc`
//! through a measurement window.
//!
//! The arithmetic ([`server_cpu`]) is a pure function of samples so it is tested
//! without processes; the sampler only reads `/proc` on a timer.

use cipherbench_model::tls::ServerCpu;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The CPUs this process may run on, in order.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: the cpu_set_t is zeroed and then written by sched_getaffinity for this
    // process (pid 0); CPU_ISSET only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return (0..crate::cli::cores()).collect();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Pins the calling thread to one CPU (best effort).
pub fn pin(cpu: usize) {
    crate::speed::worker::pin_to_core(cpu);
}

/// CPU time of the calling thread, nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write; CLOCK_THREAD_CPUTIME_ID always exists
    // on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// (CPU time, time runnable but waiting for a CPU), cumulative nanoseconds. The wait
/// comes from `/proc/PID/schedstat` and is 0 where only `/proc/PID/stat` exists.
pub fn process_times(pid: u32) -> Option<(u64, u64)> {
    if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/schedstat")) {
        let mut fields = text.split_whitespace().map(|v| v.parse::<u64>().ok());
        if let (Some(Some(cpu)), Some(Some(wait))) = (fields.next(), fields.next()) {
            return Some((cpu, wait));
        }
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_cpu_ticks(&stat).map(|ticks| (ticks * 1_000_000_000 / clock_ticks_per_sec(), 0))
}

fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// utime + stime from a `/proc/PID/stat` line (fields 14 and 15, counted after the
/// parenthesised command name, which may itself hold spaces).
pub fn parse_stat_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime is field 14 -> index 11.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Children of `parent` (from `/proc/*/stat`), sorted.
pub fn children_of(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) {
            out.push(pid);
        }
    }
    out.sort_unstable();
    out
}

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
                        .map(|&p| process_times(p).unwrap_or((0, 0)))
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
    fn reads_cpu_ticks_from_a_stat_line_with_spaces_in_the_name() {
        let stat = "1234 (nginx: worker process) S 1200 1200 1200 0 -1 4194624 500 0 0 0 250 40 0 0 20 0 1 0 100 0 0";
        assert_eq!(parse_stat_cpu_ticks(stat), Some(290));
        assert_eq!(parse_stat_cpu_ticks("garbage"), None);
    }

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

    #[test]
    fn measures_this_process_and_thread() {
        let before = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        assert!(thread_cpu_ns() > before);
        assert!(process_times(std::process::id()).unwrap().0 > 0);
        assert!(!allowed_cpus().is_empty());
    }
}
