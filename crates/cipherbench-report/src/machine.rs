//! The machine's conditions as text: the CPU topology (`probe`), a placement, and the
//! one-glance fitness verdict of `probe --check`.

use cipherbench_model::fitness::Fitness;
use cipherbench_model::topology::{format_cpu_list, Placement, Topology};

/// The topology block of `probe`: the layout, each NUMA node's CPUs with an example
/// of sibling numbering, and the CPUs this process may use.
pub fn topology(t: &Topology) -> String {
    let mut out = format!(
        "topology   {}{}\n",
        t.summary(),
        t.hypervisor
            .as_ref()
            .map(|h| format!("; virtual CPUs ({h}): the host's layout is not visible"))
            .unwrap_or_default()
    );
    for node in t.nodes() {
        let cores: Vec<_> = t.cores.iter().filter(|c| c.node == node).collect();
        let cpus: Vec<usize> = cores.iter().flat_map(|c| c.cpus.clone()).collect();
        let siblings = cores
            .iter()
            .find(|c| c.cpus.len() > 1)
            .map(|c| format!("; siblings e.g. {}", format_cpu_list(&c.cpus)))
            .unwrap_or_default();
        out.push_str(&format!(
            "  node {node}   {} core(s), CPUs {}{siblings}\n",
            cores.len(),
            format_cpu_list(&cpus)
        ));
    }
    out.push_str(&format!(
        "allowed    CPUs {}{}; isolated (isolcpus): {}\n",
        format_cpu_list(&t.allowed),
        t.cpuset
            .as_ref()
            .map(|c| format!(" (cgroup cpuset {})", format_cpu_list(c)))
            .unwrap_or_default(),
        format_cpu_list(&t.isolated)
    ));
    out
}

/// A placement, one role a line, then (when `warnings`) what it cannot promise.
pub fn placement(p: &Placement, warnings: bool) -> String {
    let mut out = String::new();
    for r in &p.roles {
        out.push_str(&format!(
            "  {:<18} {} ({}) CPUs {}\n",
            r.role,
            if p.disjoint {
                format!("{} whole core(s)", r.cores.len())
            } else {
                "shares all".to_string()
            },
            r.side.as_str(),
            format_cpu_list(&r.cpus)
        ));
    }
    if let Some(n) = p.node {
        out.push_str(&format!("  all on NUMA node {n}\n"));
    }
    for w in p.warnings.iter().filter(|_| warnings) {
        out.push_str(&format!("  ! {w}\n"));
    }
    out
}

/// The one line a run's header gives the machine: fit, or what to change first.
pub fn fitness_line(f: &Fitness) -> String {
    match f.advice.split_first() {
        None => "machine: fit to benchmark now".to_string(),
        Some((first, rest)) => format!(
            "machine: not fit to benchmark now: {first}{} (`cipherbench probe --check` says more)",
            if rest.is_empty() {
                String::new()
            } else {
                format!("; and {} more", rest.len())
            }
        ),
    }
}

/// `probe --check`: the verdict first, then what was seen, then what to change.
pub fn fitness(f: &Fitness) -> String {
    let n = &f.noise;
    let pct = |x: f64| format!("{:.0} %", x * 100.0);
    let mut out = format!(
        "fit to benchmark now: {}\n",
        if f.fit {
            "yes".to_string()
        } else {
            format!("no ({} thing(s) to change)", f.advice.len())
        }
    );
    out.push_str(&format!("topology   {}\n", f.topology));
    let busiest: Vec<String> = n
        .busiest
        .iter()
        .map(|p| format!("{} (pid {}) {:.2} CPU", p.name, p.pid, p.cpu_share))
        .collect();
    out.push_str(&format!(
        "load       other processes took {} of CPUs {} over {:.1} s{}\n",
        pct(n.foreign_share),
        format_cpu_list(&n.cpus),
        n.window_ns as f64 / 1e9,
        if busiest.is_empty() {
            String::new()
        } else {
            format!("; busiest: {}", busiest.join(", "))
        }
    ));
    out.push_str(&format!(
        "           steal {}, iowait {}, interrupts {}\n",
        pct(n.steal_share),
        pct(n.iowait_share),
        pct(n.irq_share)
    ));
    out.push_str(&format!(
        "frequency  governor {}; boost {}; throttling {}\n",
        if n.governors.is_empty() {
            "not exposed".to_string()
        } else {
            n.governors.join(", ")
        },
        match n.boost {
            Some(true) => "on",
            Some(false) => "off",
            None => "not exposed",
        },
        n.throttle_events
            .map(|t| format!("{t} event(s) in the window"))
            .unwrap_or_else(|| "not exposed".to_string())
    ));
    out.push_str("placement  one core each for a server and its load, one spare:\n");
    out.push_str(&placement(&f.placement, false));
    if !f.advice.is_empty() {
        out.push_str("change:\n");
        for a in &f.advice {
            out.push_str(&format!("  - {a}\n"));
        }
    }
    if !f.notes.is_empty() {
        out.push_str("cannot tell:\n");
        for a in &f.notes {
            out.push_str(&format!("  - {a}\n"));
        }
    }
    out
}

/// The one-character mark beside a figure in a terminal table: `!` for a point
/// measured while the machine was busy (the noise judge's findings), else `~` for a
/// spread past the threshold, else a space.
pub fn flag(findings: &[cipherbench_model::noise::Finding], high_spread: bool) -> &'static str {
    if !findings.is_empty() {
        "!"
    } else if high_spread {
        "~"
    } else {
        " "
    }
}

/// The legend of the `!` mark, for a table that shows one.
pub fn noise_legend() -> String {
    format!(
        "(! marks a point measured while other processes took more than {:.0} % of its CPUs, steal passed {:.0} %, or the CPU throttled; the warnings name them)\n",
        cipherbench_model::noise::NOISY_SHARE * 100.0,
        cipherbench_model::noise::STEAL_SHARE * 100.0,
    )
}

/// A "busy machine" mark for report.html, the judge's sentences as its tooltip;
/// nothing for a quiet point or one without a noise record.
pub fn noise_mark_html(findings: &[cipherbench_model::noise::Finding]) -> String {
    if findings.is_empty() {
        return String::new();
    }
    let why: Vec<String> = findings.iter().map(|f| f.message.clone()).collect();
    format!(
        " <span class=\"bad\" title=\"{}\">busy machine</span>",
        crate::svg::escape(&why.join("; "))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use cipherbench_model::noise::{ForeignProcess, Noise};
    use cipherbench_model::topology::Core;

    fn two_socket() -> Topology {
        Topology {
            cores: (0..4)
                .map(|k| Core {
                    package: k / 2,
                    node: k / 2,
                    core_id: k % 2,
                    cpus: vec![k, k + 4],
                })
                .collect(),
            allowed: (0..8).collect(),
            isolated: vec![7],
            cpuset: Some((0..8).collect()),
            smt_known: true,
            hypervisor: None,
        }
    }

    #[test]
    fn shows_nodes_siblings_and_the_allowed_cpus() {
        let text = topology(&two_socket());
        assert!(text.starts_with(
            "topology   2 packages, 2 NUMA nodes, 4 cores, 8 CPUs (2 threads per core)\n"
        ));
        assert!(
            text.contains("  node 1   2 core(s), CPUs 2-3,6-7; siblings e.g. 2,6\n"),
            "{text}"
        );
        assert!(
            text.contains("allowed    CPUs 0-7 (cgroup cpuset 0-7); isolated (isolcpus): 7\n"),
            "{text}"
        );
    }

    #[test]
    fn the_verdict_leads_and_names_the_busy_process() {
        let noise = Noise {
            window_ns: 1_000_000_000,
            cpus: (0..8).collect(),
            capacity_ticks: 800,
            run_ticks: 0,
            foreign_share: 0.25,
            steal_share: 0.0,
            iowait_share: 0.0,
            irq_share: 0.0,
            busiest: vec![ForeignProcess {
                pid: 9,
                name: "stress".into(),
                cpu_share: 2.0,
            }],
            governors: vec!["performance".into()],
            boost: None,
            throttle_events: None,
        };
        let f = cipherbench_model::fitness::assess(noise, &two_socket());
        let text = fitness(&f);
        assert!(
            text.starts_with("fit to benchmark now: no (1 thing(s) to change)\n"),
            "{text}"
        );
        assert!(text.contains("busiest: stress (pid 9) 2.00 CPU"), "{text}");
        assert!(
            text.contains("  - wait for or stop stress (pid 9)"),
            "{text}"
        );
        assert!(text.contains("all on NUMA node 0"), "{text}");
        assert!(fitness_line(&f)
            .starts_with("machine: not fit to benchmark now: wait for or stop stress (pid 9)"));
    }
}
