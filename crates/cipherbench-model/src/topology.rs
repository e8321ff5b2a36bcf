//! The CPU topology (which logical CPUs are SMT siblings of one core, which cores sit
//! on which package and NUMA node, which CPUs this process may use) and the placement
//! of a run's processes on it.
//!
//! Two CPUs that are siblings of one core share its execution units: placing nginx on
//! one and the load generator on the other halves both without a word, and two CPUs
//! on different NUMA nodes pay for every shared cache line. [`plan`] is the pure
//! planner: it gives each role whole cores, never lets the system under test and the
//! load share a core, keeps everything on one NUMA node where it fits, and says so
//! when the machine cannot give a disjoint placement. Reading the topology from
//! `/sys` is the app's job (`machine::topology`); this module only describes and
//! decides.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One physical core: the logical CPUs that are its SMT siblings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Core {
    /// Physical package (socket), `physical_package_id`.
    pub package: usize,
    /// NUMA node (0 where the machine has no node information).
    pub node: usize,
    /// `core_id` as the kernel numbers it (unique only within a package).
    pub core_id: usize,
    /// Its online logical CPUs, ascending: one per SMT thread.
    pub cpus: Vec<usize>,
}

/// The machine's CPUs as the kernel describes them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// Physical cores, ordered by their first CPU.
    pub cores: Vec<Core>,
    /// The CPUs this process may run on (its affinity, which a cgroup cpuset and
    /// `taskset` narrow), ascending.
    pub allowed: Vec<usize>,
    /// CPUs the kernel keeps out of scheduling (`isolcpus`), ascending.
    #[serde(default)]
    pub isolated: Vec<usize>,
    /// The cgroup's effective cpuset, where one is set and readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpuset: Option<Vec<usize>>,
    /// Whether the kernel said which CPUs are SMT siblings (`topology/` in sysfs).
    /// Without it every CPU is taken for a core of its own, which may be wrong.
    pub smt_known: bool,
    /// The hypervisor, when the CPUs are virtual: the topology is then the guest's
    /// view, and two virtual CPUs may be siblings of one physical core on the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hypervisor: Option<String>,
}

impl Topology {
    /// Online logical CPUs.
    pub fn logical_cpus(&self) -> usize {
        self.cores.iter().map(|c| c.cpus.len()).sum()
    }

    /// The largest number of threads any core has (1: no SMT).
    pub fn threads_per_core(&self) -> usize {
        self.cores.iter().map(|c| c.cpus.len()).max().unwrap_or(1)
    }

    /// Packages, ascending.
    pub fn packages(&self) -> Vec<usize> {
        let mut p: Vec<usize> = self.cores.iter().map(|c| c.package).collect();
        p.sort_unstable();
        p.dedup();
        p
    }

    /// NUMA nodes, ascending.
    pub fn nodes(&self) -> Vec<usize> {
        let mut n: Vec<usize> = self.cores.iter().map(|c| c.node).collect();
        n.sort_unstable();
        n.dedup();
        n
    }

    /// The core holding `cpu`, by index into [`Topology::cores`].
    pub fn core_of(&self, cpu: usize) -> Option<usize> {
        self.cores.iter().position(|c| c.cpus.contains(&cpu))
    }

    /// One line for a person: `2 packages, 2 NUMA nodes, 32 cores, 64 CPUs (2 threads
    /// per core)`.
    pub fn summary(&self) -> String {
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let smt = if !self.smt_known {
            "SMT siblings not reported".to_string()
        } else if self.threads_per_core() > 1 {
            format!("{} threads per core", self.threads_per_core())
        } else {
            "no SMT".to_string()
        };
        format!(
            "{}, {}, {}, {} ({smt})",
            plural(self.packages().len(), "package", "packages"),
            plural(self.nodes().len(), "NUMA node", "NUMA nodes"),
            plural(self.cores.len(), "core", "cores"),
            plural(self.logical_cpus(), "CPU", "CPUs"),
        )
    }
}

/// Which side of the measurement a role is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The system under test: nginx, the ESP gateways, the speed worker.
    Sut,
    /// What drives it: the load generator, iperf3.
    Load,
}

impl Side {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Sut => "system under test",
            Side::Load => "load",
        }
    }
}

/// One role a run wants placed: a name, its side, and how many whole cores.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleRequest {
    /// `nginx`, `generator`, `gateways`, `iperf3`, `speed worker`.
    pub role: String,
    /// Its side.
    pub side: Side,
    /// Whole cores wanted (at least 1).
    pub cores: usize,
}

impl RoleRequest {
    /// A request for `cores` whole cores.
    pub fn new(role: &str, side: Side, cores: usize) -> RoleRequest {
        RoleRequest {
            role: role.to_string(),
            side,
            cores: cores.max(1),
        }
    }
}

/// Where one role runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleCpus {
    /// The role's name.
    pub role: String,
    /// Its side.
    pub side: Side,
    /// Whole cores asked for.
    pub cores_wanted: usize,
    /// The cores given, by index into [`Topology::cores`] (empty when shared).
    pub cores: Vec<usize>,
    /// The logical CPUs it may run on: every allowed sibling of its cores, or every
    /// allowed CPU when the placement is shared.
    pub cpus: Vec<usize>,
    /// One CPU per core (the first allowed sibling): where to put one worker per core
    /// and leave the sibling idle.
    pub first_threads: Vec<usize>,
}

/// The planner's answer: where every role runs, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// One entry per requested role, in request order.
    pub roles: Vec<RoleCpus>,
    /// True when no core holds CPUs of both the system under test and the load, and no
    /// CPU is given to two roles. False: the machine could not, and every role shares
    /// every allowed CPU (see `warnings`).
    pub disjoint: bool,
    /// The NUMA node everything is on, when it all fits on one.
    pub node: Option<usize>,
    /// Whole cores left over for everything else (the OS, cipherbench itself).
    pub spare_cores: Vec<usize>,
    /// What the placement cannot promise, one sentence each.
    pub warnings: Vec<String>,
}

impl Placement {
    /// The CPUs of a role, by name.
    pub fn cpus_of(&self, role: &str) -> Option<&[usize]> {
        self.roles
            .iter()
            .find(|r| r.role == role)
            .map(|r| r.cpus.as_slice())
    }

    /// Every CPU the run uses (all roles), ascending.
    pub fn all_cpus(&self) -> Vec<usize> {
        let mut all: Vec<usize> = self
            .roles
            .iter()
            .flat_map(|r| r.cpus.iter().copied())
            .collect();
        all.sort_unstable();
        all.dedup();
        all
    }
}

/// Places `roles` on whole cores of `topo`, keeping `spare` whole cores free for
/// everything else where the machine has them.
///
/// Rules, in order: only CPUs this process may use; each role gets whole cores (all
/// their allowed siblings); no core is shared between roles, so the system under test
/// and the load never sit on siblings of one core; everything on one NUMA node where
/// it fits (the lowest-numbered node that fits), else the fewest nodes, the system
/// under test first; the core of CPU 0 (which takes most interrupts and housekeeping)
/// is given last. When there are fewer usable cores than the roles want, the
/// placement is not disjoint: every role gets every allowed CPU, and a warning says so.
pub fn plan(topo: &Topology, roles: &[RoleRequest], spare: usize) -> Placement {
    let mut warnings = Vec::new();
    // Usable cores: those with at least one allowed CPU, restricted to those CPUs.
    let usable: Vec<(usize, Vec<usize>)> = topo
        .cores
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let cpus: Vec<usize> = c
                .cpus
                .iter()
                .copied()
                .filter(|cpu| topo.allowed.contains(cpu))
                .collect();
            (!cpus.is_empty()).then_some((i, cpus))
        })
        .collect();
    let wanted: usize = roles.iter().map(|r| r.cores.max(1)).sum();
    if !topo.smt_known {
        warnings.push(
            "the kernel does not say which CPUs are SMT siblings: each CPU is taken for a core of its own, and two roles may share a physical core".to_string(),
        );
    }
    if let Some(h) = &topo.hypervisor {
        warnings.push(format!(
            "the CPUs are virtual ({h}): the placement is disjoint in the guest's view only; the host may run two of them on siblings of one physical core"
        ));
    }
    let all_allowed: Vec<usize> = usable.iter().flat_map(|(_, c)| c.clone()).collect();
    if usable.len() < wanted {
        let names: Vec<String> = roles
            .iter()
            .map(|r| format!("{} {}", r.role, r.cores.max(1)))
            .collect();
        warnings.push(format!(
            "cannot give a disjoint placement: the roles want {wanted} whole cores ({}), this process may use {} core(s) (CPUs {}); the system under test and the load share every CPU, so each slows the other",
            names.join(", "),
            usable.len(),
            format_cpu_list(&all_allowed)
        ));
        let first: Vec<usize> = usable.iter().map(|(_, c)| c[0]).collect();
        return Placement {
            roles: roles
                .iter()
                .map(|r| RoleCpus {
                    role: r.role.clone(),
                    side: r.side,
                    cores_wanted: r.cores.max(1),
                    cores: Vec::new(),
                    cpus: all_allowed.clone(),
                    first_threads: first.clone(),
                })
                .collect(),
            disjoint: false,
            node: None,
            spare_cores: Vec::new(),
            warnings,
        };
    }
    if usable.len() < wanted + spare {
        warnings.push(format!(
            "no whole core left for the rest of the machine (wanted {spare} spare): the OS and cipherbench itself run on the measured cores"
        ));
    }

    // Cores per node, and the order to take them in.
    let mut by_node: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (pos, (i, _)) in usable.iter().enumerate() {
        by_node.entry(topo.cores[*i].node).or_default().push(pos);
    }
    let cpu0_last = |positions: &mut Vec<usize>| {
        // Stable: keeps core order, moves the core holding CPU 0 to the end.
        positions.sort_by_key(|&p| usable[p].1.contains(&0));
    };
    let fits = |need: usize| by_node.iter().find(|(_, cores)| cores.len() >= need);
    let (node, mut order): (Option<usize>, Vec<usize>) = match fits(wanted + spare)
        .or_else(|| fits(wanted))
    {
        Some((&n, cores)) => {
            let mut own = cores.clone();
            cpu0_last(&mut own);
            // The other nodes' cores after, only as spares.
            let mut rest: Vec<usize> = by_node
                .iter()
                .filter(|(&m, _)| m != n)
                .flat_map(|(_, c)| c.clone())
                .collect();
            cpu0_last(&mut rest);
            own.extend(rest);
            (Some(n), own)
        }
        None => {
            // Fewest nodes: the largest first.
            let mut nodes: Vec<(&usize, &Vec<usize>)> = by_node.iter().collect();
            nodes.sort_by_key(|(n, cores)| (std::cmp::Reverse(cores.len()), **n));
            let mut order = Vec::new();
            for (_, cores) in nodes {
                let mut c = cores.clone();
                cpu0_last(&mut c);
                order.extend(c);
            }
            warnings.push(format!(
                    "the roles want {wanted} whole cores, more than any NUMA node has: they span nodes, and traffic between them crosses the interconnect"
                ));
            (None, order)
        }
    };
    // Cores whose siblings are not all ours: the others may be busy with anything.
    let partial: Vec<usize> = usable
        .iter()
        .filter(|(i, cpus)| cpus.len() < topo.cores[*i].cpus.len())
        .map(|(i, _)| *i)
        .collect();

    // The system under test first, then the load, each from the front of the order.
    let mut indexed: Vec<(usize, &RoleRequest)> = roles.iter().enumerate().collect();
    indexed.sort_by_key(|(k, r)| (r.side == Side::Load, *k));
    let mut given: Vec<Option<RoleCpus>> = vec![None; roles.len()];
    let mut next = 0;
    for (k, r) in indexed {
        let n = r.cores.max(1);
        let take = &order[next..next + n];
        next += n;
        let mut cpus: Vec<usize> = take.iter().flat_map(|&p| usable[p].1.clone()).collect();
        cpus.sort_unstable();
        let mut cores: Vec<usize> = take.iter().map(|&p| usable[p].0).collect();
        cores.sort_unstable();
        let mut first: Vec<usize> = take.iter().map(|&p| usable[p].1[0]).collect();
        first.sort_unstable();
        given[k] = Some(RoleCpus {
            role: r.role.clone(),
            side: r.side,
            cores_wanted: n,
            cores,
            cpus,
            first_threads: first,
        });
    }
    let roles: Vec<RoleCpus> = given.into_iter().flatten().collect();
    let used: Vec<usize> = roles.iter().flat_map(|r| r.cores.clone()).collect();
    let partial_used: Vec<usize> = partial.into_iter().filter(|c| used.contains(c)).collect();
    if !partial_used.is_empty() {
        let cpus: Vec<usize> = partial_used
            .iter()
            .flat_map(|&c| topo.cores[c].cpus.clone())
            .filter(|cpu| !topo.allowed.contains(cpu))
            .collect();
        warnings.push(format!(
            "CPUs {} are siblings of cores this run uses but outside this process's CPU set: whatever runs there shares those cores",
            format_cpu_list(&cpus)
        ));
    }
    order.drain(..next);
    let mut spare_cores: Vec<usize> = order.iter().map(|&p| usable[p].0).collect();
    spare_cores.sort_unstable();
    Placement {
        roles,
        disjoint: true,
        node,
        spare_cores,
        warnings,
    }
}

/// The CPUs this process may use, in the order to give them to threads that each
/// want a core of their own (the speed worker's): the first allowed thread of every
/// core, then the second threads, and so on; cores by NUMA node, then in order, with
/// CPU 0's core (which takes most interrupts) last in each round. So `n` threads get
/// `n` different cores while there are cores, and siblings only after.
pub fn spread_order(topo: &Topology) -> Vec<usize> {
    let mut cores: Vec<(usize, Vec<usize>)> = topo
        .cores
        .iter()
        .map(|c| {
            let cpus: Vec<usize> = c
                .cpus
                .iter()
                .copied()
                .filter(|cpu| topo.allowed.contains(cpu))
                .collect();
            (c.node, cpus)
        })
        .filter(|(_, cpus)| !cpus.is_empty())
        .collect();
    cores.sort_by_key(|(node, cpus)| (cpus.contains(&0), *node, cpus[0]));
    let deepest = cores.iter().map(|(_, c)| c.len()).max().unwrap_or(0);
    (0..deepest)
        .flat_map(|rank| cores.iter().filter_map(move |(_, c)| c.get(rank).copied()))
        .collect()
}

/// The placement of one role on given CPUs (the speed worker's threads on the first
/// CPUs of [`spread_order`]): its cores, the node when all are on one, the cores left
/// over, and what it cannot promise.
pub fn placement_on(topo: &Topology, role: &str, side: Side, cpus: &[usize]) -> Placement {
    let mut cores: Vec<usize> = cpus.iter().filter_map(|&c| topo.core_of(c)).collect();
    cores.sort_unstable();
    cores.dedup();
    let mut first: Vec<usize> = cores
        .iter()
        .filter_map(|&k| {
            topo.cores[k]
                .cpus
                .iter()
                .find(|c| cpus.contains(c))
                .copied()
        })
        .collect();
    first.sort_unstable();
    let nodes: Vec<usize> = {
        let mut n: Vec<usize> = cores.iter().map(|&k| topo.cores[k].node).collect();
        n.sort_unstable();
        n.dedup();
        n
    };
    let mut warnings = Vec::new();
    if !topo.smt_known {
        warnings.push("the kernel does not say which CPUs are SMT siblings: threads may share a physical core".to_string());
    }
    if let Some(h) = &topo.hypervisor {
        warnings.push(format!(
            "the CPUs are virtual ({h}): the host may run two of them on siblings of one physical core"
        ));
    }
    if cores.len() < cpus.len() {
        warnings.push(format!(
            "{} threads on {} cores: some share a core with their SMT sibling",
            cpus.len(),
            cores.len()
        ));
    }
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    Placement {
        roles: vec![RoleCpus {
            role: role.to_string(),
            side,
            cores_wanted: cores.len(),
            cores: cores.clone(),
            cpus: sorted,
            first_threads: first,
        }],
        disjoint: true,
        node: (nodes.len() == 1).then(|| nodes[0]),
        spare_cores: (0..topo.cores.len())
            .filter(|k| {
                !cores.contains(k) && topo.cores[*k].cpus.iter().any(|c| topo.allowed.contains(c))
            })
            .collect(),
        warnings,
    }
}

/// Parses a kernel CPU list (`0-3,8,10-11`; empty for none).
pub fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a || b - a > 1 << 16 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().ok()?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// Formats CPUs as a kernel CPU list (`0-3,8`), `none` when empty.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.is_empty() {
        return "none".to_string();
    }
    let mut parts = Vec::new();
    let mut start = sorted[0];
    let mut prev = start;
    for &c in &sorted[1..] {
        if c != prev + 1 {
            parts.push(range(start, prev));
            start = c;
        }
        prev = c;
    }
    parts.push(range(start, prev));
    parts.join(",")
}

fn range(a: usize, b: usize) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("{a}-{b}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `packages` x `nodes_per_package` x `cores` x `threads`, numbered the Intel way:
    /// the first thread of every core first, then the second threads.
    fn machine(
        packages: usize,
        nodes_per: usize,
        cores_per_node: usize,
        threads: usize,
    ) -> Topology {
        let total_cores = packages * nodes_per * cores_per_node;
        let mut cores = Vec::new();
        for k in 0..total_cores {
            let node = k / cores_per_node;
            cores.push(Core {
                package: node / nodes_per,
                node,
                core_id: k % (nodes_per * cores_per_node),
                cpus: (0..threads).map(|t| k + t * total_cores).collect(),
            });
        }
        let allowed = (0..total_cores * threads).collect();
        Topology {
            cores,
            allowed,
            isolated: vec![],
            cpuset: None,
            smt_known: true,
            hypervisor: None,
        }
    }

    fn sides_per_core(topo: &Topology, p: &Placement) -> Vec<Vec<Side>> {
        let mut sides = vec![Vec::new(); topo.cores.len()];
        for r in &p.roles {
            for &cpu in &r.cpus {
                let core = topo.core_of(cpu).unwrap();
                if !sides[core].contains(&r.side) {
                    sides[core].push(r.side);
                }
            }
        }
        sides
    }

    #[test]
    fn parses_and_formats_kernel_cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("\n"), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_cpu_list(&[]), "none");
    }

    #[test]
    fn gives_whole_cores_on_one_node_of_a_two_socket_machine() {
        let topo = machine(2, 1, 16, 2);
        assert_eq!(
            topo.summary(),
            "2 packages, 2 NUMA nodes, 32 cores, 64 CPUs (2 threads per core)"
        );
        let p = plan(
            &topo,
            &[
                RoleRequest::new("nginx", Side::Sut, 4),
                RoleRequest::new("generator", Side::Load, 8),
            ],
            1,
        );
        assert!(p.disjoint, "{:?}", p.warnings);
        assert_eq!(p.node, Some(0));
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        let nginx = p.cpus_of("nginx").unwrap();
        // Four cores, each with both of its threads (k and k + 32), none on core 0.
        assert_eq!(nginx, &[1, 2, 3, 4, 33, 34, 35, 36]);
        assert_eq!(p.roles[0].first_threads, vec![1, 2, 3, 4]);
        assert_eq!(p.cpus_of("generator").unwrap().len(), 16);
        assert!(p.spare_cores.contains(&0));
    }

    #[test]
    fn spans_nodes_only_when_no_node_is_big_enough_and_says_so() {
        let topo = machine(2, 1, 16, 2);
        let p = plan(
            &topo,
            &[
                RoleRequest::new("nginx", Side::Sut, 12),
                RoleRequest::new("generator", Side::Load, 12),
            ],
            0,
        );
        assert!(p.disjoint);
        assert_eq!(p.node, None);
        assert!(
            p.warnings.iter().any(|w| w.contains("span nodes")),
            "{:?}",
            p.warnings
        );
    }

    #[test]
    fn two_vcpus_without_room_share_every_cpu_with_a_stated_warning() {
        let mut topo = machine(1, 1, 2, 1);
        topo.hypervisor = Some("KVM".into());
        let p = plan(
            &topo,
            &[
                RoleRequest::new("nginx", Side::Sut, 2),
                RoleRequest::new("generator", Side::Load, 1),
            ],
            1,
        );
        assert!(!p.disjoint);
        assert_eq!(p.cpus_of("nginx").unwrap(), &[0, 1]);
        assert_eq!(p.cpus_of("generator").unwrap(), &[0, 1]);
        assert!(p
            .warnings
            .iter()
            .any(|w| w.starts_with("cannot give a disjoint placement")));
        assert!(p.warnings.iter().any(|w| w.contains("virtual (KVM)")));
        // One core each fits, but nothing is left for the machine: said, still disjoint.
        let q = plan(
            &topo,
            &[
                RoleRequest::new("nginx", Side::Sut, 1),
                RoleRequest::new("generator", Side::Load, 1),
            ],
            1,
        );
        assert!(q.disjoint);
        assert!(q
            .warnings
            .iter()
            .any(|w| w.starts_with("no whole core left")));
    }

    #[test]
    fn a_machine_without_smt_information_is_warned_about() {
        let mut topo = machine(1, 1, 4, 1);
        topo.smt_known = false;
        let p = plan(&topo, &[RoleRequest::new("speed worker", Side::Sut, 1)], 0);
        assert!(p.warnings.iter().any(|w| w.contains("SMT siblings")));
    }

    #[test]
    fn a_core_half_outside_the_cpuset_is_used_with_a_warning() {
        let mut topo = machine(1, 1, 4, 2);
        // CPU 5 (sibling of 1) is outside the set.
        topo.allowed.retain(|&c| c != 5);
        let p = plan(
            &topo,
            &[
                RoleRequest::new("a", Side::Sut, 3),
                RoleRequest::new("b", Side::Load, 1),
            ],
            0,
        );
        assert!(p.disjoint);
        assert!(!p.all_cpus().contains(&5));
        assert!(
            p.warnings
                .iter()
                .any(|w| w.starts_with("CPUs 5 are siblings")),
            "{:?}",
            p.warnings
        );
    }

    #[test]
    fn spread_order_gives_every_core_one_thread_before_any_sibling() {
        // Intel numbering: siblings k and k + 4.
        let intel = machine(1, 1, 4, 2);
        assert_eq!(spread_order(&intel), vec![1, 2, 3, 0, 5, 6, 7, 4]);
        // Siblings adjacent (0,1), (2,3), ... as some ARM and POWER machines number them.
        let mut adjacent = machine(1, 1, 4, 1);
        for (k, core) in adjacent.cores.iter_mut().enumerate() {
            core.cpus = vec![2 * k, 2 * k + 1];
        }
        adjacent.allowed = (0..8).collect();
        let order = spread_order(&adjacent);
        assert_eq!(order, vec![2, 4, 6, 0, 3, 5, 7, 1]);
        let p = placement_on(&adjacent, "speed worker", Side::Sut, &order[..2]);
        assert_eq!(p.roles[0].cores, vec![1, 2]);
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        assert_eq!(p.spare_cores, vec![0, 3]);
        let all = placement_on(&adjacent, "speed worker", Side::Sut, &order);
        assert!(
            all.warnings[0].starts_with("8 threads on 4 cores"),
            "{:?}",
            all.warnings
        );
    }

    fn arb_topology() -> impl Strategy<Value = Topology> {
        (1usize..3, 1usize..3, 1usize..9, 1usize..3, any::<u64>()).prop_map(
            |(packages, nodes, cores, threads, mask)| {
                let mut t = machine(packages, nodes, cores, threads);
                // Drop some CPUs from the allowed set (a cpuset, taskset), keeping one.
                let all = t.allowed.clone();
                t.allowed = all
                    .iter()
                    .copied()
                    .filter(|&c| mask >> (c % 64) & 1 == 1 || c == all[0])
                    .collect();
                t
            },
        )
    }

    proptest! {
        #[test]
        fn no_placement_splits_a_core_between_the_system_under_test_and_the_load(
            topo in arb_topology(),
            sut in prop::collection::vec(1usize..5, 1..3),
            load in prop::collection::vec(1usize..5, 1..3),
            spare in 0usize..3,
        ) {
            let mut roles: Vec<RoleRequest> = sut.iter().enumerate()
                .map(|(i, &n)| RoleRequest::new(&format!("sut{i}"), Side::Sut, n)).collect();
            roles.extend(load.iter().enumerate()
                .map(|(i, &n)| RoleRequest::new(&format!("load{i}"), Side::Load, n)));
            let p = plan(&topo, &roles, spare);
            prop_assert_eq!(p.roles.len(), roles.len());
            for r in &p.roles {
                prop_assert!(r.cpus.iter().all(|c| topo.allowed.contains(c)));
                prop_assert!(!r.cpus.is_empty());
            }
            if p.disjoint {
                for sides in sides_per_core(&topo, &p) {
                    prop_assert!(sides.len() <= 1, "a core holds both sides");
                }
                let mut seen = std::collections::HashSet::new();
                for r in &p.roles {
                    prop_assert_eq!(r.cores.len(), r.cores_wanted);
                    for &c in &r.cores {
                        prop_assert!(seen.insert(c), "core {} given twice", c);
                        // Whole cores: every allowed sibling of a given core is the role's.
                        for cpu in &topo.cores[c].cpus {
                            prop_assert_eq!(topo.allowed.contains(cpu), r.cpus.contains(cpu));
                        }
                    }
                }
                let wanted: usize = roles.iter().map(|r| r.cores).sum();
                let usable_on = |n: usize| topo.cores.iter()
                    .filter(|c| c.node == n && c.cpus.iter().any(|x| topo.allowed.contains(x)))
                    .count();
                if topo.nodes().iter().any(|&n| usable_on(n) >= wanted) {
                    let node = p.node;
                    prop_assert!(node.is_some());
                    for r in &p.roles {
                        for &c in &r.cores {
                            prop_assert_eq!(Some(topo.cores[c].node), node);
                        }
                    }
                }
            } else {
                prop_assert!(p.warnings.iter().any(|w| w.starts_with("cannot give a disjoint placement")));
            }
        }
    }
}
