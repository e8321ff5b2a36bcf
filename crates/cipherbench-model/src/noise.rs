//! How quiet the machine was during a measured window: CPU time other processes took
//! on the CPUs the run used, steal time (a VM's host running someone else), iowait,
//! interrupt time, and the frequency governor, boost and throttling, judged against
//! stated thresholds into the warnings `noisy_machine`, `steal` and
//! `frequency_scaling`.
//!
//! The app snapshots `/proc/stat`, every `/proc/<pid>/stat` and the cpufreq files at
//! the two ends of a window ([`Snapshot`]); [`Noise::between`] turns two snapshots
//! into the record run.json keeps and [`judge`] into warnings. Both are pure, so the
//! thresholds are tested on synthetic samples (METHODOLOGY.md, "Noise").

use crate::topology::format_cpu_list;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

/// Other processes' share of the run's CPU capacity above which a window is
/// `noisy_machine` (10 %). The per-CPU counters of `/proc/stat` and the per-process
/// ones of `/proc/<pid>/stat` are both sampled on the timer tick and disagree by a few
/// per cent on a busy machine, so the threshold sits above that.
pub const NOISY_SHARE: f64 = 0.10;
/// Steal's share of the run's CPU capacity above which a window is `steal` (5 %, the
/// spread at which a point is flagged `high_spread`: steal that large can move a
/// figure by as much).
pub const STEAL_SHARE: f64 = 0.05;
/// Fewest clock ticks of CPU capacity (all the run's CPUs over the window) for the
/// shares to be judged: at 100 ticks per second, 0.2 CPU-seconds, so that one tick is
/// at most 5 %.
pub const MIN_CAPACITY_TICKS: u64 = 20;
/// Processes named in a record: the busiest few that are not part of the run.
pub const BUSIEST_KEPT: usize = 5;

/// One CPU's counters from a `cpuN` line of `/proc/stat`, in clock ticks.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct CpuTicks {
    /// The CPU.
    pub cpu: usize,
    /// User time (includes guest time).
    pub user: u64,
    /// Niced user time.
    pub nice: u64,
    /// Kernel time.
    pub system: u64,
    /// Idle.
    pub idle: u64,
    /// Idle while I/O was outstanding.
    pub iowait: u64,
    /// Hard interrupts.
    pub irq: u64,
    /// Soft interrupts (most of the network stack's receive work).
    pub softirq: u64,
    /// Time the hypervisor ran something else while this virtual CPU wanted to run.
    pub steal: u64,
}

impl CpuTicks {
    /// Every tick, busy or not.
    pub fn total(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
    }

    /// Time spent running processes (user, nice, system): what processes' own
    /// counters add up to.
    pub fn process_time(&self) -> u64 {
        self.user + self.nice + self.system
    }

    fn minus(&self, earlier: &CpuTicks) -> CpuTicks {
        CpuTicks {
            cpu: self.cpu,
            user: self.user.saturating_sub(earlier.user),
            nice: self.nice.saturating_sub(earlier.nice),
            system: self.system.saturating_sub(earlier.system),
            idle: self.idle.saturating_sub(earlier.idle),
            iowait: self.iowait.saturating_sub(earlier.iowait),
            irq: self.irq.saturating_sub(earlier.irq),
            softirq: self.softirq.saturating_sub(earlier.softirq),
            steal: self.steal.saturating_sub(earlier.steal),
        }
    }
}

/// The per-CPU lines of `/proc/stat` (not the `cpu` total).
pub fn parse_proc_stat(text: &str) -> Vec<CpuTicks> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let cpu = fields.next()?.strip_prefix("cpu")?.parse().ok()?;
            let v: Vec<u64> = fields.map_while(|f| f.parse().ok()).collect();
            let at = |i: usize| v.get(i).copied().unwrap_or(0);
            (v.len() >= 4).then(|| CpuTicks {
                cpu,
                user: at(0),
                nice: at(1),
                system: at(2),
                idle: at(3),
                iowait: at(4),
                irq: at(5),
                softirq: at(6),
                steal: at(7),
            })
        })
        .collect()
}

/// One process as its `/proc/<pid>/stat` line describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProcTicks {
    /// Process id.
    pub pid: u32,
    /// Parent's id.
    pub ppid: u32,
    /// Command name (`comm`, at most 15 bytes).
    pub name: String,
    /// utime + stime, clock ticks.
    pub ticks: u64,
    /// cutime + cstime: the ticks of its children that exited and were waited for.
    #[serde(default)]
    pub reaped: u64,
    /// Start time after boot, clock ticks: tells a reused pid from the same process.
    pub start: u64,
    /// The CPU it last ran on.
    pub last_cpu: Option<usize>,
}

/// Parses a `/proc/<pid>/stat` line (the name is in parentheses and may hold spaces
/// and parentheses itself, so fields are counted after the last `)`).
pub fn parse_pid_stat(text: &str) -> Option<ProcTicks> {
    let (head, rest) = text.rsplit_once(')')?;
    let (pid, name) = head.split_once(" (")?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state): field n is f[n - 3].
    let num = |n: usize| f.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    Some(ProcTicks {
        pid: pid.trim().parse().ok()?,
        ppid: num(4)? as u32,
        name: name.to_string(),
        ticks: num(14)? + num(15)?,
        reaped: num(16).unwrap_or(0) + num(17).unwrap_or(0),
        start: num(22)?,
        last_cpu: num(39).map(|c| c as usize),
    })
}

/// The CPU frequency settings at one moment, where the machine exposes them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FreqState {
    /// `scaling_governor` per CPU that has one.
    pub governors: Vec<(usize, String)>,
    /// Turbo/boost enabled (`cpufreq/boost`, or not `intel_pstate/no_turbo`).
    pub boost: Option<bool>,
    /// Thermal throttling events so far per CPU (`thermal_throttle/*_throttle_count`,
    /// core and package summed).
    pub throttle_counts: Vec<(usize, u64)>,
}

/// Everything read at one end of a window.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Snapshot {
    /// CLOCK_MONOTONIC, nanoseconds.
    pub at_ns: u64,
    /// Per-CPU counters.
    pub cpus: Vec<CpuTicks>,
    /// Every process readable.
    pub procs: Vec<ProcTicks>,
    /// Frequency settings.
    pub freq: FreqState,
}

/// A process that is not part of the run, and its CPU in the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ForeignProcess {
    /// Process id.
    pub pid: u32,
    /// Command name.
    pub name: String,
    /// CPU seconds per second of the window (1.0: one CPU all the time).
    pub cpu_share: f64,
}

/// How quiet the run's CPUs were during one measured window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Noise {
    /// The window's length.
    pub window_ns: u64,
    /// The CPUs the run used.
    pub cpus: Vec<usize>,
    /// Their capacity over the window, clock ticks (every counter's delta summed).
    pub capacity_ticks: u64,
    /// Ticks the run's own processes took (anywhere).
    pub run_ticks: u64,
    /// Process time on the run's CPUs that the run's processes did not take, as a
    /// share of the capacity.
    pub foreign_share: f64,
    /// Steal as a share of the capacity.
    pub steal_share: f64,
    /// Iowait as a share of the capacity.
    pub iowait_share: f64,
    /// Hard and soft interrupts as a share of the capacity (for the network layers
    /// mostly the run's own packets, so not counted as foreign).
    pub irq_share: f64,
    /// The busiest processes not part of the run that last ran on the run's CPUs.
    pub busiest: Vec<ForeignProcess>,
    /// The scaling governors of the run's CPUs (distinct, sorted); empty: not exposed.
    #[serde(default)]
    pub governors: Vec<String>,
    /// Turbo/boost, where exposed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boost: Option<bool>,
    /// Thermal throttling events on the run's CPUs during the window, where exposed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttle_events: Option<u64>,
}

impl Noise {
    /// The record of two windows of one measurement taken as one (a point measured
    /// in several rounds): lengths, capacities and the run's ticks add, shares are
    /// weighted by each window's capacity, each foreign process's share by its
    /// window's length (a process in both adds up), throttling events add; the
    /// governors and CPUs are the union, boost known if either knew it.
    pub fn merge(&mut self, other: &Noise) {
        let (a, b) = (self.capacity_ticks as f64, other.capacity_ticks as f64);
        let weighted = |x: f64, y: f64| {
            if a + b > 0.0 {
                (x * a + y * b) / (a + b)
            } else {
                x.max(y)
            }
        };
        self.foreign_share = weighted(self.foreign_share, other.foreign_share);
        self.steal_share = weighted(self.steal_share, other.steal_share);
        self.iowait_share = weighted(self.iowait_share, other.iowait_share);
        self.irq_share = weighted(self.irq_share, other.irq_share);
        let (ta, tb) = (self.window_ns as f64, other.window_ns as f64);
        let total = (ta + tb).max(1.0);
        let mut busiest: Vec<ForeignProcess> = self
            .busiest
            .iter()
            .map(|p| ForeignProcess {
                cpu_share: p.cpu_share * ta / total,
                ..p.clone()
            })
            .collect();
        for p in &other.busiest {
            let share = p.cpu_share * tb / total;
            match busiest
                .iter_mut()
                .find(|q| q.pid == p.pid && q.name == p.name)
            {
                Some(q) => q.cpu_share += share,
                None => busiest.push(ForeignProcess {
                    cpu_share: share,
                    ..p.clone()
                }),
            }
        }
        busiest.sort_by(|x, y| y.cpu_share.total_cmp(&x.cpu_share).then(x.pid.cmp(&y.pid)));
        busiest.truncate(BUSIEST_KEPT);
        self.busiest = busiest;
        self.window_ns += other.window_ns;
        self.capacity_ticks += other.capacity_ticks;
        self.run_ticks += other.run_ticks;
        for c in &other.cpus {
            if !self.cpus.contains(c) {
                self.cpus.push(*c);
            }
        }
        self.cpus.sort_unstable();
        for g in &other.governors {
            if !self.governors.contains(g) {
                self.governors.push(g.clone());
            }
        }
        self.governors.sort();
        self.boost = self.boost.or(other.boost);
        self.throttle_events = match (self.throttle_events, other.throttle_events) {
            (None, None) => None,
            (x, y) => Some(x.unwrap_or(0) + y.unwrap_or(0)),
        };
    }

    /// The record of the window from `start` to `end`, for a run on `cpus` whose own
    /// processes are `own` and all their descendants. The window must close while
    /// the run's processes are alive: a process that exits inside it takes its ticks
    /// along, and they would count as another's.
    #[expect(
        clippy::too_many_lines,
        reason = "the CPU ticks, then the run's processes, then foreign ones, from the same two snapshots"
    )]
    pub fn between(start: &Snapshot, end: &Snapshot, cpus: &[usize], own: &[u32]) -> Noise {
        let mut cpus = cpus.to_vec();
        cpus.sort_unstable();
        cpus.dedup();
        let before: HashMap<usize, &CpuTicks> = start.cpus.iter().map(|c| (c.cpu, c)).collect();
        let mut delta = CpuTicks::default();
        for c in end.cpus.iter().filter(|c| cpus.contains(&c.cpu)) {
            let d = match before.get(&c.cpu) {
                Some(b) => c.minus(b),
                None => continue,
            };
            delta.user += d.user;
            delta.nice += d.nice;
            delta.system += d.system;
            delta.idle += d.idle;
            delta.iowait += d.iowait;
            delta.irq += d.irq;
            delta.softirq += d.softirq;
            delta.steal += d.steal;
        }
        let capacity = delta.total();
        let ours = descendants(&end.procs, &start.procs, own);
        let earlier: HashMap<u32, &ProcTicks> = start.procs.iter().map(|p| (p.pid, p)).collect();
        let window_ticks = |p: &ProcTicks| match earlier.get(&p.pid) {
            Some(b) if b.start == p.start => p.ticks.saturating_sub(b.ticks),
            // Started inside the window (or a reused pid): all its time is the window's.
            _ => p.ticks,
        };
        let mut run_ticks = 0;
        let mut foreign = Vec::new();
        // A child of the run that exited inside the window (a file tool's run, a
        // probe) is gone from the end snapshot; its ticks reach its parent's reaped
        // count, whole: less what it had taken before the window, when it was there.
        let alive: HashSet<(u32, u64)> = end.procs.iter().map(|p| (p.pid, p.start)).collect();
        let mut before_window = 0;
        for p in start.procs.iter().filter(|p| ours.contains(&p.pid)) {
            if !alive.contains(&(p.pid, p.start)) {
                before_window += p.ticks;
            }
        }
        for p in &end.procs {
            let t = window_ticks(p);
            if ours.contains(&p.pid) {
                run_ticks += t;
                run_ticks += match earlier.get(&p.pid) {
                    Some(b) if b.start == p.start => p.reaped.saturating_sub(b.reaped),
                    _ => p.reaped,
                };
            } else if t > 0 && p.last_cpu.is_none_or(|c| cpus.contains(&c)) {
                foreign.push((p, t));
            }
        }
        let run_ticks = run_ticks.saturating_sub(before_window);
        let share = |ticks: u64| {
            if capacity == 0 {
                0.0
            } else {
                ticks as f64 / capacity as f64
            }
        };
        // Ticks per second from the counters themselves: capacity over CPUs and time.
        let seconds = end.at_ns.saturating_sub(start.at_ns) as f64 / 1e9;
        let ticks_per_cpu_sec = if seconds > 0.0 && !cpus.is_empty() {
            capacity as f64 / cpus.len() as f64 / seconds
        } else {
            0.0
        };
        foreign.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.pid.cmp(&b.0.pid)));
        let busiest = foreign
            .iter()
            .take(BUSIEST_KEPT)
            .map(|(p, t)| ForeignProcess {
                pid: p.pid,
                name: p.name.clone(),
                cpu_share: if ticks_per_cpu_sec > 0.0 {
                    *t as f64 / ticks_per_cpu_sec / seconds
                } else {
                    0.0
                },
            })
            .collect();
        let mut governors: Vec<String> = end
            .freq
            .governors
            .iter()
            .filter(|(c, _)| cpus.contains(c))
            .map(|(_, g)| g.clone())
            .collect();
        governors.sort();
        governors.dedup();
        let throttle = |s: &Snapshot| -> Option<u64> {
            let v: Vec<u64> = s
                .freq
                .throttle_counts
                .iter()
                .filter(|(c, _)| cpus.contains(c))
                .map(|(_, n)| *n)
                .collect();
            (!v.is_empty()).then(|| v.iter().sum())
        };
        let throttle_events = match (throttle(start), throttle(end)) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        Noise {
            window_ns: end.at_ns.saturating_sub(start.at_ns),
            capacity_ticks: capacity,
            run_ticks,
            foreign_share: share(delta.process_time().saturating_sub(run_ticks)),
            steal_share: share(delta.steal),
            iowait_share: share(delta.iowait),
            irq_share: share(delta.irq + delta.softirq),
            busiest,
            governors,
            boost: end.freq.boost,
            throttle_events,
            cpus,
        }
    }
}

/// `own` and every process descended from one of them, in either snapshot.
fn descendants(end: &[ProcTicks], start: &[ProcTicks], own: &[u32]) -> HashSet<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for p in end.iter().chain(start) {
        children.entry(p.ppid).or_default().push(p.pid);
    }
    let mut out: HashSet<u32> = HashSet::new();
    let mut todo: Vec<u32> = own.to_vec();
    while let Some(pid) = todo.pop() {
        if out.insert(pid) {
            if let Some(c) = children.get(&pid) {
                todo.extend(c.iter().copied());
            }
        }
    }
    out
}

/// Another host's window, watched there by its agent: the host as the user named it
/// (an agent's name, such as `tunnel --peer`'s) and its noise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostNoise {
    /// The agent's name (`user@host`, or the host as given on the command line).
    pub host: String,
    /// Its host's noise on the CPUs its part of the run used.
    pub noise: Noise,
}

/// `findings`, each message naming the host it was found on (`peer h1: ...`).
pub fn on_host(role: &str, host: &str, findings: Vec<Finding>) -> Vec<Finding> {
    findings
        .into_iter()
        .map(|f| Finding {
            message: format!("{role} {host}: {}", f.message),
            ..f
        })
        .collect()
}

/// A 4 s window of 400 ticks on CPU `cpu`, half of them the run's, with `foreign` of
/// it taken by other processes and `governors`: for tests of the judge's callers.
#[cfg(test)]
pub(crate) fn test_window(cpu: usize, foreign: f64, governors: &[&str]) -> Noise {
    Noise {
        window_ns: 4_000_000_000,
        cpus: vec![cpu],
        capacity_ticks: 400,
        run_ticks: 200,
        foreign_share: foreign,
        steal_share: 0.0,
        iowait_share: 0.0,
        irq_share: 0.0,
        busiest: Vec::new(),
        governors: governors.iter().map(|g| g.to_string()).collect(),
        boost: None,
        throttle_events: None,
    }
}

/// A judgement of a window: a warning kind and one sentence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Finding {
    /// `noisy_machine`, `steal` or `frequency_scaling`.
    pub kind: String,
    /// One sentence for a person.
    pub message: String,
}

/// The warnings a window earns, against [`NOISY_SHARE`], [`STEAL_SHARE`], a governor
/// other than `performance`, and any thermal throttling. Shares are not judged on a
/// window shorter than [`MIN_CAPACITY_TICKS`].
pub fn judge(n: &Noise) -> Vec<Finding> {
    let mut out = Vec::new();
    let cpus = format!(
        "{} {}",
        if n.cpus.len() == 1 { "CPU" } else { "CPUs" },
        format_cpu_list(&n.cpus)
    );
    let pct = |x: f64| format!("{:.0} %", x * 100.0);
    if n.capacity_ticks >= MIN_CAPACITY_TICKS {
        if n.foreign_share > NOISY_SHARE {
            let busiest = match n.busiest.first() {
                Some(p) => format!(
                    "; busiest: {} (pid {}) at {:.2} CPU",
                    p.name, p.pid, p.cpu_share
                ),
                None => String::new(),
            };
            out.push(Finding {
                kind: "noisy_machine".into(),
                message: format!(
                    "other processes took {} of {cpus} during the measurement{busiest}",
                    pct(n.foreign_share)
                ),
            });
        }
        if n.steal_share > STEAL_SHARE {
            out.push(Finding {
                kind: "steal".into(),
                message: format!(
                    "the hypervisor gave {} of {cpus} to someone else (steal time) during the measurement",
                    pct(n.steal_share)
                ),
            });
        }
    }
    let scaling: Vec<&String> = n.governors.iter().filter(|g| *g != "performance").collect();
    if !scaling.is_empty() {
        out.push(Finding {
            kind: "frequency_scaling".into(),
            message: format!(
                "CPU frequency scaling is on (governor {} on {cpus}): the clock follows the load, so figures depend on what ran before",
                scaling.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            ),
        });
    }
    if let Some(t) = n.throttle_events.filter(|&t| t > 0) {
        out.push(Finding {
            kind: "frequency_scaling".into(),
            message: format!(
                "the CPU throttled {t} time(s) for heat on {cpus} during the measurement"
            ),
        });
    }
    out
}

/// The judge's findings for a point's record, none without one: `noisy_machine`,
/// `steal`, and throttling (the governor is the machine's, said once per run by
/// [`governor_finding`] instead).
pub fn findings_of(noise: Option<&Noise>) -> Vec<Finding> {
    noise
        .map(judge)
        .unwrap_or_default()
        .into_iter()
        .filter(|f| !is_governor(f))
        .collect()
}

fn is_governor(f: &Finding) -> bool {
    f.kind == "frequency_scaling" && f.message.contains("governor")
}

/// The governor's finding, once for all the windows of a run that has one.
pub fn governor_finding<'a>(windows: impl IntoIterator<Item = &'a Noise>) -> Option<Finding> {
    windows.into_iter().flat_map(judge).find(is_governor)
}

/// The findings of several windows of one point (a tunnel point's runs): each kind
/// once, from the window where the machine was busiest.
pub fn findings_over<'a>(windows: impl IntoIterator<Item = &'a Noise>) -> Vec<Finding> {
    let mut windows: Vec<&Noise> = windows.into_iter().collect();
    windows.sort_by(|a, b| {
        (b.foreign_share + b.steal_share).total_cmp(&(a.foreign_share + a.steal_share))
    });
    let mut out: Vec<Finding> = Vec::new();
    for f in windows.into_iter().flat_map(|n| findings_of(Some(n))) {
        if !out.iter().any(|o| o.kind == f.kind) {
            out.push(f);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(cpu: usize, user: u64, system: u64, idle: u64, steal: u64) -> CpuTicks {
        CpuTicks {
            cpu,
            user,
            system,
            idle,
            steal,
            ..CpuTicks::default()
        }
    }

    fn proc_(pid: u32, ppid: u32, name: &str, ticks: u64, last_cpu: usize) -> ProcTicks {
        ProcTicks {
            pid,
            ppid,
            name: name.into(),
            ticks,
            reaped: 0,
            start: 1000 + u64::from(pid),
            last_cpu: Some(last_cpu),
        }
    }

    fn record(ns: u64, capacity: u64, foreign: f64, hog: Option<(u32, f64)>) -> Noise {
        Noise {
            window_ns: ns,
            cpus: vec![1],
            capacity_ticks: capacity,
            run_ticks: capacity / 2,
            foreign_share: foreign,
            steal_share: 0.0,
            iowait_share: 0.0,
            irq_share: 0.0,
            busiest: hog
                .map(|(pid, share)| ForeignProcess {
                    pid,
                    name: "hog".into(),
                    cpu_share: share,
                })
                .into_iter()
                .collect(),
            governors: vec!["performance".into()],
            boost: None,
            throttle_events: None,
        }
    }

    #[test]
    fn rounds_too_short_to_judge_alone_are_judged_together() {
        // Three 100 ms rounds at 100 ticks/s: 10 ticks each, too few to judge; a
        // busy loop took half of each.
        let mut n = record(100_000_000, 10, 0.5, Some((7, 0.5)));
        assert!(judge(&n).is_empty());
        n.merge(&record(100_000_000, 10, 0.5, Some((7, 0.5))));
        n.merge(&record(100_000_000, 10, 0.5, Some((7, 0.5))));
        assert_eq!((n.window_ns, n.capacity_ticks), (300_000_000, 30));
        assert!((n.foreign_share - 0.5).abs() < 1e-9);
        assert_eq!(n.busiest.len(), 1);
        assert!((n.busiest[0].cpu_share - 0.5).abs() < 1e-9, "{n:?}");
        assert!(judge(&n).iter().any(|f| f.kind == "noisy_machine"), "{n:?}");
        // A quiet round dilutes a noisy one by its capacity.
        let mut n = record(100_000_000, 30, 0.0, None);
        n.merge(&record(100_000_000, 10, 0.4, Some((9, 0.4))));
        assert!((n.foreign_share - 0.1).abs() < 1e-9);
        assert!((n.busiest[0].cpu_share - 0.2).abs() < 1e-9);
    }

    /// A 1 s window over two CPUs at 100 ticks/s: the run (pid 10 and its child 11)
    /// busy on CPU 0, and `others` on CPU 1 taking the given ticks.
    fn window(run: u64, other: u64, steal: u64) -> (Snapshot, Snapshot) {
        let start = Snapshot {
            at_ns: 0,
            cpus: vec![cpu(0, 0, 0, 0, 0), cpu(1, 0, 0, 0, 0)],
            procs: vec![
                proc_(10, 1, "cipherbench", 0, 0),
                proc_(11, 10, "worker", 0, 0),
                proc_(20, 1, "yes", 0, 1),
            ],
            freq: FreqState::default(),
        };
        let end = Snapshot {
            at_ns: 1_000_000_000,
            cpus: vec![
                cpu(0, run, 0, 100 - run, 0),
                cpu(1, other, 0, 100 - other - steal, steal),
            ],
            procs: vec![
                proc_(10, 1, "cipherbench", 1, 0),
                proc_(11, 10, "worker", run - 1, 0),
                proc_(20, 1, "yes", other, 1),
            ],
            freq: FreqState::default(),
        };
        (start, end)
    }

    fn kinds(n: &Noise) -> Vec<String> {
        judge(n).into_iter().map(|f| f.kind).collect()
    }

    #[test]
    fn reads_proc_stat_per_cpu_lines() {
        let text = "cpu  10 0 5 100 1 0 0 0 0 0\ncpu0 4 1 2 50 1 3 4 7 0 0\ncpu1 6 0 3 50 0 0 0 0\nintr 5\n";
        let c = parse_proc_stat(text);
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[0].cpu, c[0].user, c[0].softirq, c[0].steal),
            (0, 4, 4, 7)
        );
        assert_eq!(c[0].total(), 4 + 1 + 2 + 50 + 1 + 3 + 4 + 7);
        assert_eq!(c[1].process_time(), 9);
    }

    #[test]
    fn reads_a_pid_stat_line_whose_name_holds_parentheses_and_spaces() {
        let line = "4242 (a (b) c) R 17 4242 4242 0 -1 4194304 100 0 0 0 250 40 3 4 20 0 1 0 5555 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let p = parse_pid_stat(line).unwrap();
        assert_eq!(p.pid, 4242);
        assert_eq!(p.ppid, 17);
        assert_eq!(p.name, "a (b) c");
        assert_eq!(p.ticks, 290);
        assert_eq!(p.start, 5555);
        assert_eq!(p.last_cpu, Some(1));
        assert_eq!(parse_pid_stat("garbage"), None);
    }

    #[test]
    fn a_quiet_window_earns_no_warning() {
        let (s, e) = window(100, 2, 0);
        let n = Noise::between(&s, &e, &[0, 1], &[10]);
        assert_eq!(n.run_ticks, 100);
        assert!((n.foreign_share - 0.01).abs() < 1e-9, "{}", n.foreign_share);
        assert!(kinds(&n).is_empty(), "{:?}", judge(&n));
    }

    #[test]
    fn a_hog_on_the_run_s_cpus_is_named_with_its_share() {
        let (s, e) = window(100, 90, 0);
        let n = Noise::between(&s, &e, &[0, 1], &[10]);
        assert!((n.foreign_share - 0.45).abs() < 1e-9);
        assert_eq!(n.busiest[0].name, "yes");
        assert!((n.busiest[0].cpu_share - 0.9).abs() < 1e-9);
        let f = judge(&n);
        assert_eq!(f[0].kind, "noisy_machine");
        assert!(
            f[0].message.contains("45 % of CPUs 0-1"),
            "{}",
            f[0].message
        );
        assert!(
            f[0].message.contains("yes (pid 20) at 0.90 CPU"),
            "{}",
            f[0].message
        );
    }

    #[test]
    fn a_hog_on_a_cpu_the_run_does_not_use_is_not_noise() {
        let (s, e) = window(100, 90, 0);
        let n = Noise::between(&s, &e, &[0], &[10]);
        assert_eq!(n.foreign_share, 0.0);
        assert!(n.busiest.is_empty());
        assert!(kinds(&n).is_empty());
    }

    #[test]
    fn the_run_s_own_descendants_are_never_foreign() {
        // The worker (child of 10) is busy; without knowing the tree it would count.
        let (s, e) = window(100, 0, 0);
        let n = Noise::between(&s, &e, &[0, 1], &[10]);
        assert!(n.busiest.iter().all(|p| p.pid != 11));
        let stranger = Noise::between(&s, &e, &[0, 1], &[999]);
        assert!(kinds(&stranger).contains(&"noisy_machine".to_string()));
    }

    #[test]
    fn the_threshold_is_the_stated_one() {
        // 10 % exactly is not past the threshold; 11 % is.
        let (s, e) = window(100, 20, 0);
        assert!(kinds(&Noise::between(&s, &e, &[0, 1], &[10])).is_empty());
        let (s, e) = window(100, 22, 0);
        assert_eq!(
            kinds(&Noise::between(&s, &e, &[0, 1], &[10])),
            vec!["noisy_machine"]
        );
    }

    #[test]
    fn steal_past_its_threshold_is_warned() {
        let (s, e) = window(100, 0, 12);
        let n = Noise::between(&s, &e, &[0, 1], &[10]);
        assert!((n.steal_share - 0.06).abs() < 1e-9);
        assert_eq!(kinds(&n), vec!["steal"]);
        let (s, e) = window(100, 0, 8);
        assert!(kinds(&Noise::between(&s, &e, &[0, 1], &[10])).is_empty());
    }

    #[test]
    fn a_window_too_short_to_judge_earns_no_share_warning() {
        let (mut s, mut e) = window(100, 90, 0);
        for c in s.cpus.iter_mut().chain(e.cpus.iter_mut()) {
            c.idle = 0;
        }
        // 9 ticks of capacity in all.
        e.cpus = vec![cpu(0, 5, 0, 0, 0), cpu(1, 4, 0, 0, 0)];
        let n = Noise::between(&s, &e, &[0, 1], &[10]);
        assert!(n.capacity_ticks < MIN_CAPACITY_TICKS);
        assert!(kinds(&n).is_empty());
    }

    #[test]
    fn a_governor_other_than_performance_and_throttling_are_frequency_scaling() {
        let (mut s, mut e) = window(100, 0, 0);
        e.freq.governors = vec![(0, "schedutil".into()), (1, "performance".into())];
        let n = Noise::between(&s, &e, &[0, 1], &[10]);
        assert_eq!(n.governors, vec!["performance", "schedutil"]);
        let f = judge(&n);
        assert_eq!(f.len(), 1);
        assert!(
            f[0].message.contains("governor schedutil"),
            "{}",
            f[0].message
        );
        e.freq.governors = vec![(0, "performance".into()), (1, "performance".into())];
        assert!(judge(&Noise::between(&s, &e, &[0, 1], &[10])).is_empty());
        s.freq.throttle_counts = vec![(0, 5), (1, 5)];
        e.freq.throttle_counts = vec![(0, 7), (1, 5)];
        let n = Noise::between(&s, &e, &[0, 1], &[10]);
        assert_eq!(n.throttle_events, Some(2));
        assert_eq!(kinds(&n), vec!["frequency_scaling"]);
    }

    #[test]
    fn a_child_of_the_run_that_exited_in_the_window_is_the_run_s_through_its_parent() {
        // The run's child 11 took 60 ticks, 10 of them before the window, and was
        // waited for: gone at the end, its 60 in its parent's reaped count.
        let (s, mut e) = window(100, 0, 0);
        let mut s = s;
        s.procs[1].ticks = 10;
        e.procs.remove(1);
        e.procs[0].reaped = 60;
        e.cpus[0] = cpu(0, 51, 0, 49, 0);
        let n = Noise::between(&s, &e, &[0, 1], &[10]);
        assert_eq!(n.run_ticks, 1 + 60 - 10);
        assert_eq!(n.foreign_share, 0.0, "{n:?}");
        assert!(kinds(&n).is_empty());
    }

    #[test]
    fn a_reused_pid_counts_from_zero() {
        let (s, mut e) = window(100, 0, 0);
        // pid 20 exited and a new process took its number, 30 ticks old.
        e.procs[2] = ProcTicks {
            start: 99_999,
            ticks: 30,
            ..e.procs[2].clone()
        };
        e.cpus[1] = cpu(1, 30, 0, 70, 0);
        let n = Noise::between(&s, &e, &[0, 1], &[10]);
        assert_eq!(n.busiest[0].pid, 20);
        assert!((n.busiest[0].cpu_share - 0.3).abs() < 1e-9);
    }
}
