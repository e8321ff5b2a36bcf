//! Whether the machine is fit to benchmark now, in one glance (`cipherbench probe
//! --check`): what the noise judge says of a short window with nothing of ours
//! running, whether the topology can keep the system under test and the load on
//! separate whole cores with one to spare, and what to change. The app measures; this
//! module only decides, so the advice is tested on synthetic windows.

use crate::noise::{judge, Finding, Noise};
use crate::topology::{plan, Placement, RoleRequest, Side, Topology};
use serde::{Deserialize, Serialize};

/// The verdict of `probe --check`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Fitness {
    /// True when nothing below needs changing.
    pub fit: bool,
    /// The machine's layout in one line.
    pub topology: String,
    /// The window watched.
    pub noise: Noise,
    /// The noise judge's warnings for it.
    pub findings: Vec<Finding>,
    /// The smallest useful placement: one core for the system under test, one for the
    /// load, one spare.
    pub placement: Placement,
    /// What to change, one sentence each (empty when fit).
    pub advice: Vec<String>,
    /// What cannot be known here, one sentence each (not counted against fitness).
    pub notes: Vec<String>,
}

/// Judges the window `noise` (taken with nothing of ours running) and the topology.
pub fn assess(noise: Noise, topo: &Topology) -> Fitness {
    let findings = judge(&noise);
    let placement = plan(
        topo,
        &[
            RoleRequest::new("server", Side::Sut, 1),
            RoleRequest::new("load generator", Side::Load, 1),
        ],
        1,
    );
    let mut advice = Vec::new();
    let mut notes = Vec::new();
    for f in &findings {
        match f.kind.as_str() {
            "noisy_machine" => advice.push(match noise.busiest.first() {
                Some(p) => format!(
                    "wait for or stop {} (pid {}), which took {:.2} CPU; other processes took {:.0} % of CPUs this process may use",
                    p.name,
                    p.pid,
                    p.cpu_share,
                    noise.foreign_share * 100.0
                ),
                None => format!(
                    "other processes took {:.0} % of the CPUs; find them with `top`",
                    noise.foreign_share * 100.0
                ),
            }),
            "steal" => advice.push(format!(
                "the hypervisor took {:.0} % of the CPUs (steal): a host without CPU overcommit, or dedicated vCPUs, measures steadier",
                noise.steal_share * 100.0
            )),
            "frequency_scaling" if f.message.contains("governor") => advice.push(
                "set the performance governor (as root: `cpupower frequency-set -g performance`, or write `performance` to /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor)".to_string(),
            ),
            "frequency_scaling" => advice.push(
                "the CPU throttled for heat: let it cool, or check its cooling, before measuring".to_string(),
            ),
            _ => advice.push(f.message.clone()),
        }
    }
    for w in &placement.warnings {
        if w.starts_with("cannot give a disjoint placement") || w.starts_with("no whole core left")
        {
            advice.push(format!(
                "{w}: a machine or cpuset with at least 3 whole cores keeps the server and its load apart with one to spare"
            ));
        } else {
            notes.push(w.clone());
        }
    }
    if noise.governors.is_empty() {
        notes.push(
            "the CPU frequency is not exposed here (no cpufreq: a VM, or a driver that hides it): scaling and turbo cannot be checked".to_string(),
        );
    }
    Fitness {
        fit: advice.is_empty(),
        topology: topo.summary(),
        noise,
        findings,
        placement,
        advice,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noise::ForeignProcess;
    use crate::topology::Core;

    fn topo(cores: usize, threads: usize) -> Topology {
        Topology {
            cores: (0..cores)
                .map(|k| Core {
                    package: 0,
                    node: 0,
                    core_id: k,
                    cpus: (0..threads).map(|t| k + t * cores).collect(),
                })
                .collect(),
            allowed: (0..cores * threads).collect(),
            isolated: vec![],
            cpuset: None,
            smt_known: true,
            hypervisor: None,
        }
    }

    fn quiet() -> Noise {
        Noise {
            window_ns: 1_000_000_000,
            cpus: vec![0, 1, 2, 3],
            capacity_ticks: 400,
            run_ticks: 0,
            foreign_share: 0.01,
            steal_share: 0.0,
            iowait_share: 0.0,
            irq_share: 0.0,
            busiest: vec![],
            governors: vec!["performance".into()],
            boost: Some(true),
            throttle_events: Some(0),
        }
    }

    #[test]
    fn a_quiet_four_core_machine_is_fit() {
        let f = assess(quiet(), &topo(4, 2));
        assert!(f.fit, "{f:?}");
        assert!(f.advice.is_empty() && f.notes.is_empty(), "{f:?}");
        assert!(f.placement.disjoint);
    }

    #[test]
    fn a_busy_process_and_powersave_are_named_with_what_to_change() {
        let mut n = quiet();
        n.foreign_share = 0.3;
        n.busiest = vec![ForeignProcess {
            pid: 77,
            name: "ffmpeg".into(),
            cpu_share: 1.2,
        }];
        n.governors = vec!["powersave".into()];
        let f = assess(n, &topo(4, 2));
        assert!(!f.fit);
        assert!(
            f.advice[0].starts_with("wait for or stop ffmpeg (pid 77), which took 1.20 CPU"),
            "{:?}",
            f.advice
        );
        assert!(
            f.advice[1].contains("performance governor"),
            "{:?}",
            f.advice
        );
    }

    #[test]
    fn two_vcpus_cannot_keep_a_core_spare_and_say_so() {
        let mut t = topo(2, 1);
        t.hypervisor = Some("KVM".into());
        let mut n = quiet();
        n.governors.clear();
        let f = assess(n, &t);
        assert!(!f.fit);
        assert!(
            f.advice.iter().any(|a| a.starts_with("no whole core left")),
            "{:?}",
            f.advice
        );
        assert!(
            f.notes.iter().any(|a| a.contains("virtual (KVM)")),
            "{:?}",
            f.notes
        );
        assert!(
            f.notes.iter().any(|a| a.contains("not exposed")),
            "{:?}",
            f.notes
        );
    }
}
