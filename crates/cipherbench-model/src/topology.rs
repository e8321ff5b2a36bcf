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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[expect(
    clippy::too_many_lines,
    reason = "the placement rules in order, each with its fallback"
)]
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

/// The placement of roles on CPUs given explicitly (by the user's flags, or by a
/// fallback when [`plan`] cannot give whole cores), judged as the planner judges its
/// own: `disjoint` only when no core holds CPUs of both the system under test and the
/// load and no CPU is given to two roles; a warning names every core that is split.
/// `warnings` come first (what led to these CPUs).
pub fn placement_of(
    topo: &Topology,
    roles: &[(&str, Side, Vec<usize>)],
    mut warnings: Vec<String>,
) -> Placement {
    let cores_of = |cpus: &[usize]| -> Vec<usize> {
        let mut c: Vec<usize> = cpus.iter().filter_map(|&cpu| topo.core_of(cpu)).collect();
        c.sort_unstable();
        c.dedup();
        c
    };
    let mut disjoint = true;
    let mut split_cores: Vec<usize> = Vec::new();
    for (i, (_, side_a, a)) in roles.iter().enumerate() {
        for (_, side_b, b) in &roles[i + 1..] {
            if a.iter().any(|c| b.contains(c)) {
                disjoint = false;
            }
            if side_a != side_b {
                let cb = cores_of(b);
                for k in cores_of(a).into_iter().filter(|k| cb.contains(k)) {
                    disjoint = false;
                    if !split_cores.contains(&k) {
                        split_cores.push(k);
                    }
                }
            }
        }
    }
    split_cores.sort_unstable();
    if !split_cores.is_empty() {
        let cpus: Vec<usize> = split_cores
            .iter()
            .flat_map(|&k| topo.cores[k].cpus.clone())
            .collect();
        warnings.push(format!(
            "the system under test and the load share {} (CPUs {}): on one CPU they take turns, on SMT siblings they share the core's execution units; either way each slows the other",
            if split_cores.len() == 1 { "a core".to_string() } else { format!("{} cores", split_cores.len()) },
            format_cpu_list(&cpus)
        ));
    }
    if !topo.smt_known {
        warnings.push("the kernel does not say which CPUs are SMT siblings: two roles may share a physical core".to_string());
    }
    if let Some(h) = &topo.hypervisor {
        warnings.push(format!(
            "the CPUs are virtual ({h}): the placement is disjoint in the guest's view only; the host may run two of them on siblings of one physical core"
        ));
    }
    let used: Vec<usize> = roles.iter().flat_map(|(_, _, c)| cores_of(c)).collect();
    let mut nodes: Vec<usize> = used.iter().map(|&k| topo.cores[k].node).collect();
    nodes.sort_unstable();
    nodes.dedup();
    Placement {
        roles: roles
            .iter()
            .map(|(role, side, cpus)| {
                let cores = cores_of(cpus);
                let mut sorted = cpus.clone();
                sorted.sort_unstable();
                sorted.dedup();
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
                RoleCpus {
                    role: role.to_string(),
                    side: *side,
                    cores_wanted: cores.len(),
                    cores,
                    cpus: sorted,
                    first_threads: first,
                }
            })
            .collect(),
        disjoint,
        node: (nodes.len() == 1).then(|| nodes[0]),
        spare_cores: (0..topo.cores.len())
            .filter(|k| {
                !used.contains(k) && topo.cores[*k].cpus.iter().any(|c| topo.allowed.contains(c))
            })
            .collect(),
        warnings,
    }
}

/// Where a TLS point runs: nginx's workers (one per core under test, on the first
/// thread of each of its whole cores, the siblings left idle) and the load
/// generator's threads (one per CPU of its cores).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsCpus {
    /// One CPU per nginx worker.
    pub server: Vec<usize>,
    /// The generator's CPUs.
    pub generator: Vec<usize>,
    /// What run.json keeps: roles `nginx` and `generator`.
    pub placement: Placement,
}

/// Places nginx (`cores` workers) and the load generator on `topo`. The generator
/// gets `generator` when the user named its CPUs (nginx then takes whole cores among
/// the others), else every whole core nginx does not take, less one spare core for
/// the rest of the machine when at least three remain. Where the machine has fewer
/// whole cores than nginx's plus one, the CPUs are split as the kernel numbers them
/// (nginx first in [`spread_order`]) and the placement says which cores the two
/// sides share. Errors (one line for the user): no core for nginx, or none left for
/// the generator.
#[expect(
    clippy::too_many_lines,
    reason = "the TLS placement rules in order, each with its fallback and error"
)]
pub fn place_tls(
    topo: &Topology,
    cores: usize,
    generator: Option<&[usize]>,
) -> Result<TlsCpus, String> {
    if cores == 0 {
        return Err("--cores must be at least 1".into());
    }
    let allowed = &topo.allowed;
    if let Some(g) = generator {
        if g.is_empty() {
            return Err("--generator-cpus: no CPU given".into());
        }
        if let Some(c) = g.iter().find(|c| !allowed.contains(c)) {
            return Err(format!(
                "--generator-cpus: CPU {c} is not one this process may use (CPUs {})",
                format_cpu_list(allowed)
            ));
        }
    }
    // The CPUs nginx may take: all, or all but the generator's.
    let for_server: Vec<usize> = allowed
        .iter()
        .copied()
        .filter(|c| generator.is_none_or(|g| !g.contains(c)))
        .collect();
    if let Some(g) = generator.filter(|_| cores > for_server.len()) {
        // The generator's CPUs are what leave nginx too few: say so, not --cores.
        let g = format_cpu_list(g);
        return Err(match for_server.len() {
            0 => format!(
                "--generator-cpus {g} takes every one of this machine's {} CPU(s), leaving none for nginx: leave at least {cores} CPU(s) out of --generator-cpus (or leave it out)",
                allowed.len()
            ),
            left => format!(
                "--generator-cpus {g} leaves {left} of this machine's {} CPU(s) for nginx, fewer than --cores {cores}: leave more CPUs out of --generator-cpus, or use --cores {left} or fewer",
                allowed.len()
            ),
        });
    }
    if generator.is_none() && cores >= for_server.len() {
        let most = for_server.len().saturating_sub(1);
        return Err(format!(
            "{cores} core(s) for nginx leaves none of this machine's {} CPU(s) for the load generator: use --cores {} or fewer (server and generator are pinned to disjoint cores)",
            allowed.len(),
            most.max(1)
        ));
    }
    // With the generator's CPUs named, nginx keeps off their cores' siblings too
    // where enough whole cores remain.
    let whole: Vec<usize> = match generator {
        Some(g) => for_server
            .iter()
            .copied()
            .filter(|c| !g.iter().any(|x| topo.core_of(*x) == topo.core_of(*c)))
            .collect(),
        None => for_server.clone(),
    };
    let whole_cores = topo
        .cores
        .iter()
        .filter(|c| c.cpus.iter().any(|cpu| whole.contains(cpu)))
        .count();
    let server_topo = Topology {
        allowed: if whole_cores >= cores {
            whole
        } else {
            for_server.clone()
        },
        ..topo.clone()
    };
    let usable = server_topo
        .cores
        .iter()
        .filter(|c| c.cpus.iter().any(|cpu| server_topo.allowed.contains(cpu)))
        .count();
    let roles: Vec<RoleRequest> = match generator {
        Some(_) => vec![RoleRequest::new("nginx", Side::Sut, cores)],
        None => {
            let rest = usable.saturating_sub(cores);
            let spare = usize::from(rest >= 3);
            vec![
                RoleRequest::new("nginx", Side::Sut, cores),
                RoleRequest::new("generator", Side::Load, rest.saturating_sub(spare).max(1)),
            ]
        }
    };
    let planned = plan(&server_topo, &roles, 1);
    let (server, gen_cpus, mut warnings) = if planned.disjoint {
        let server = planned.roles[0].first_threads.clone();
        let gen_cpus = match generator {
            Some(g) => g.to_vec(),
            None => planned.roles[1].cpus.clone(),
        };
        // The planner's own warnings, but for those about the topology, which
        // `placement_of` says again.
        let w: Vec<String> = planned
            .warnings
            .into_iter()
            .filter(|w| {
                // Said again by `placement_of`, or (the generator's own CPUs) below.
                let repeated = w.starts_with("the kernel does not say")
                    || w.starts_with("the CPUs are virtual")
                    || generator.is_some() && w.contains("outside this process's CPU set");
                !repeated
            })
            .collect();
        (server, gen_cpus, w)
    } else {
        let order: Vec<usize> = spread_order(&server_topo);
        let server: Vec<usize> = order[..cores].to_vec();
        let gen_cpus = match generator {
            Some(g) => g.to_vec(),
            None => order[cores..].to_vec(),
        };
        let why = format!(
            "cannot give a disjoint placement: nginx's {cores} core(s) and the load generator want {} whole cores, this process may use {usable}",
            cores + 1
        );
        (server, gen_cpus, vec![why])
    };
    if let Some(g) = generator {
        let split: Vec<usize> = g
            .iter()
            .copied()
            .filter(|c| server.iter().any(|s| topo.core_of(*s) == topo.core_of(*c)))
            .collect();
        if !split.is_empty() {
            warnings.insert(
                0,
                format!(
                    "--generator-cpus {} are SMT siblings of nginx's cores",
                    format_cpu_list(&split)
                ),
            );
        }
    }
    let mut server_sorted = server.clone();
    server_sorted.sort_unstable();
    let placement = placement_of(
        topo,
        &[
            ("nginx", Side::Sut, server_sorted.clone()),
            ("generator", Side::Load, gen_cpus.clone()),
        ],
        warnings,
    );
    Ok(TlsCpus {
        server: server_sorted,
        generator: gen_cpus,
        placement,
    })
}

/// Where the tunnel layer's processes run: each ESP gateway's two threads (TUN to
/// UDP, UDP to TUN) and each iperf3 end.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TunnelCpus {
    /// The sending gateway's threads' CPUs (the first for TUN to UDP, the second for
    /// UDP to TUN).
    pub sender_gateway: Vec<usize>,
    /// The receiving gateway's.
    pub receiver_gateway: Vec<usize>,
    /// iperf3's client.
    pub iperf3_client: Option<usize>,
    /// iperf3's server.
    pub iperf3_server: Option<usize>,
    /// What run.json keeps (None when nothing is pinned).
    pub placement: Option<Placement>,
}

/// Places the tunnel layer on `topo` for gateways of `gateway_threads` workers:
/// the gateways are the system under test, iperf3 the load. Each iperf3 end gets a
/// whole core and each gateway as many whole cores as it has workers (at least two,
/// one thread per core) while the machine has them, fewer where it does not (four
/// or five cores: one each); fewer than four: each gateway a CPU of its own and each
/// iperf3 end beside the gateway in its namespace (the IIJ IPsec post, seed 004, kept
/// the load off the gateways; a machine of two cores cannot), said in the placement's
/// warnings. One CPU: nothing pinned.
pub fn place_tunnel(topo: &Topology, gateway_threads: usize) -> TunnelCpus {
    let usable = topo
        .cores
        .iter()
        .filter(|c| c.cpus.iter().any(|cpu| topo.allowed.contains(cpu)))
        .count();
    let request = |gateway_cores: usize| {
        vec![
            RoleRequest::new("sender gateway", Side::Sut, gateway_cores),
            RoleRequest::new("receiver gateway", Side::Sut, gateway_cores),
            RoleRequest::new("iperf3 client", Side::Load, 1),
            RoleRequest::new("iperf3 server", Side::Load, 1),
        ]
    };
    if usable >= 4 {
        let per_gateway = gateway_threads.max(2).min((usable - 2) / 2);
        let p = plan(topo, &request(per_gateway), 1);
        if p.disjoint {
            // Two cores: a thread per core; one core: its siblings, one per thread.
            let gateway = |r: &RoleCpus| {
                if r.first_threads.len() >= 2 {
                    r.first_threads.clone()
                } else {
                    r.cpus.clone()
                }
            };
            return TunnelCpus {
                sender_gateway: gateway(&p.roles[0]),
                receiver_gateway: gateway(&p.roles[1]),
                iperf3_client: p.roles[2].first_threads.first().copied(),
                iperf3_server: p.roles[3].first_threads.first().copied(),
                placement: Some(p),
            };
        }
    }
    let order = spread_order(topo);
    if order.len() < 2 {
        return TunnelCpus::default();
    }
    let (a, b) = (order[0], order[1]);
    let why = format!(
        "cannot give a disjoint placement: the gateways and iperf3 want 4 whole cores, this process may use {usable}; each iperf3 end shares a CPU with the gateway in its namespace, so the load slows the system under test"
    );
    let placement = placement_of(
        topo,
        &[
            ("sender gateway", Side::Sut, vec![a]),
            ("receiver gateway", Side::Sut, vec![b]),
            ("iperf3 client", Side::Load, vec![a]),
            ("iperf3 server", Side::Load, vec![b]),
        ],
        vec![why],
    );
    TunnelCpus {
        sender_gateway: vec![a],
        receiver_gateway: vec![b],
        iperf3_client: Some(a),
        iperf3_server: Some(b),
        placement: Some(placement),
    }
}

/// Where one end of a two-host tunnel runs on its own host (`tunnel --peer`): the
/// gateway's threads and that host's iperf3 end.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TunnelEndCpus {
    /// The gateway's threads' CPUs (with one worker per direction: the first for
    /// TUN to UDP, the second for UDP to TUN).
    pub gateway: Vec<usize>,
    /// iperf3's.
    pub iperf3: Option<usize>,
    /// What run.json keeps (None when nothing is pinned).
    pub placement: Option<Placement>,
}

/// Places one end of a two-host tunnel on its host's `topo`, as [`place_tunnel`]
/// places both ends on one machine: the gateway (the system under test, role
/// `gateway`) gets as many whole cores as it has workers (at least two, one thread
/// per core) while the host has them, keeping one for iperf3 (the load, role
/// `iperf3`) and, where it can, one spare; with one usable core the gateway has a
/// CPU and iperf3 shares it, said in the placement's warnings. No CPU: nothing
/// pinned.
pub fn place_tunnel_end(
    topo: &Topology,
    gateway_threads: usize,
    gateway: &str,
    iperf3: &str,
) -> TunnelEndCpus {
    let usable = topo
        .cores
        .iter()
        .filter(|c| c.cpus.iter().any(|cpu| topo.allowed.contains(cpu)))
        .count();
    if usable >= 2 {
        let per_gateway = gateway_threads.max(2).min(usable - 1);
        let p = plan(
            topo,
            &[
                RoleRequest::new(gateway, Side::Sut, per_gateway),
                RoleRequest::new(iperf3, Side::Load, 1),
            ],
            1,
        );
        if p.disjoint {
            let g = &p.roles[0];
            return TunnelEndCpus {
                gateway: if g.first_threads.len() >= 2 {
                    g.first_threads.clone()
                } else {
                    g.cpus.clone()
                },
                iperf3: p.roles[1].first_threads.first().copied(),
                placement: Some(p),
            };
        }
    }
    let Some(&a) = spread_order(topo).first() else {
        return TunnelEndCpus::default();
    };
    let why = format!(
        "cannot give a disjoint placement: the gateway and iperf3 want 2 whole cores, this process may use {usable}; iperf3 shares a CPU with the gateway, so the load slows the system under test"
    );
    TunnelEndCpus {
        gateway: vec![a],
        iperf3: Some(a),
        placement: Some(placement_of(
            topo,
            &[(gateway, Side::Sut, vec![a]), (iperf3, Side::Load, vec![a])],
            vec![why],
        )),
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

    /// nginx's workers and the generator's CPUs, as cores.
    fn tls_cores(topo: &Topology, t: &TlsCpus) -> (Vec<usize>, Vec<usize>) {
        let of = |cpus: &[usize]| -> Vec<usize> {
            cpus.iter().map(|&c| topo.core_of(c).unwrap()).collect()
        };
        (of(&t.server), of(&t.generator))
    }

    #[test]
    fn tls_places_nginx_and_the_generator_on_separate_whole_cores() {
        for topo in [
            machine(2, 1, 16, 2),
            machine(1, 1, 16, 2),
            machine(1, 1, 2, 1),
        ] {
            for cores in [1, 4] {
                if cores + 1 > topo.cores.len() {
                    continue;
                }
                let t = place_tls(&topo, cores, None).unwrap();
                let (server, load) = tls_cores(&topo, &t);
                assert_eq!(t.server.len(), cores, "one worker per core under test");
                let mut distinct = server.clone();
                distinct.dedup();
                assert_eq!(distinct.len(), cores, "one worker per core: {t:?}");
                assert!(server.iter().all(|c| !load.contains(c)), "{t:?}");
                assert!(t.placement.disjoint, "{t:?}");
                assert_eq!(t.placement.roles[0].role, "nginx");
                assert_eq!(t.placement.roles[1].side, Side::Load);
                assert!(t.placement.node.is_some() || topo.nodes().len() > 1);
            }
        }
        // Big machines keep a core for the rest of the machine; two cores cannot, and
        // say so.
        let big = place_tls(&machine(1, 1, 16, 2), 4, None).unwrap();
        assert_eq!(big.placement.spare_cores.len(), 1, "{big:?}");
        let small = place_tls(&machine(1, 1, 2, 1), 1, None).unwrap();
        assert_eq!(small.server, vec![1], "CPU 0's core goes last");
        assert_eq!(small.generator, vec![0]);
        assert!(
            small
                .placement
                .warnings
                .iter()
                .any(|w| w.starts_with("no whole core left")),
            "{small:?}"
        );
    }

    #[test]
    fn tls_on_one_smt_core_splits_it_and_says_so() {
        let topo = machine(1, 1, 1, 2);
        let t = place_tls(&topo, 1, None).unwrap();
        assert_eq!((t.server.clone(), t.generator.clone()), (vec![0], vec![1]));
        assert!(!t.placement.disjoint);
        assert!(t.placement.warnings[0].starts_with("cannot give a disjoint placement"));
        assert!(
            t.placement
                .warnings
                .iter()
                .any(|w| w.contains("share a core (CPUs 0-1)")),
            "{t:?}"
        );
    }

    #[test]
    fn tls_refuses_what_leaves_no_cpu_for_the_generator() {
        let topo = machine(1, 1, 2, 1);
        let e = place_tls(&topo, 2, None).unwrap_err();
        assert!(e.contains("use --cores 1 or fewer"), "{e}");
        assert!(place_tls(&topo, 0, None).is_err());
        assert!(place_tls(&topo, 1, Some(&[])).is_err());
        assert!(place_tls(&topo, 1, Some(&[7]))
            .unwrap_err()
            .contains("CPU 7"));
        // The generator's CPUs taking every CPU is said as that, not as --cores.
        let e = place_tls(&topo, 1, Some(&[0, 1])).unwrap_err();
        assert!(
            e.starts_with("--generator-cpus 0-1 takes every one of this machine's 2 CPU(s), leaving none for nginx"),
            "{e}"
        );
        assert!(!e.contains("use --cores"), "{e}");
        let e = place_tls(&machine(1, 1, 4, 1), 2, Some(&[0, 1, 2])).unwrap_err();
        assert!(
            e.contains("--generator-cpus 0-2 leaves 1 of this machine's 4 CPU(s) for nginx, fewer than --cores 2")
                && e.contains("use --cores 1 or fewer"),
            "{e}"
        );
    }

    #[test]
    fn tls_with_generator_cpus_named_keeps_nginx_off_their_cores_where_it_can() {
        // 16 cores, siblings k and k+16: the generator on CPUs 0-1.
        let topo = machine(1, 1, 16, 2);
        let t = place_tls(&topo, 2, Some(&[0, 1])).unwrap();
        assert_eq!(t.generator, vec![0, 1]);
        let (server, load) = tls_cores(&topo, &t);
        // The planner gives nginx whole cores among the CPUs left: not cores 0 and 1,
        // whose siblings 16 and 17 are free but would split them.
        assert!(server.iter().all(|c| !load.contains(c)), "{t:?}");
        assert!(t.placement.disjoint, "{t:?}");
        // A generator named on the siblings of every core cannot be kept apart.
        let two = machine(1, 1, 2, 2);
        let t = place_tls(&two, 1, Some(&[2, 3])).unwrap();
        assert!(!t.placement.disjoint, "{t:?}");
        assert!(
            t.placement.warnings[0].starts_with("--generator-cpus "),
            "{t:?}"
        );
    }

    #[test]
    fn tunnel_keeps_the_gateways_and_iperf3_on_separate_whole_cores() {
        for (topo, threads, per_gateway) in [
            (machine(2, 1, 16, 2), 1, 2),
            (machine(1, 1, 16, 2), 2, 2),
            (machine(1, 1, 16, 2), 7, 7),
            (machine(1, 1, 16, 2), 16, 7),
            (machine(1, 1, 4, 2), 7, 1),
        ] {
            let t = place_tunnel(&topo, threads);
            let p = t.placement.clone().unwrap();
            assert!(p.disjoint, "{p:?}");
            let core = |c: usize| topo.core_of(c).unwrap();
            let mut gateway_cores: Vec<usize> = t
                .sender_gateway
                .iter()
                .chain(&t.receiver_gateway)
                .map(|&c| core(c))
                .collect();
            gateway_cores.sort_unstable();
            gateway_cores.dedup();
            assert_eq!(gateway_cores.len(), 2 * per_gateway, "{t:?}");
            for iperf in [t.iperf3_client.unwrap(), t.iperf3_server.unwrap()] {
                assert!(!gateway_cores.contains(&core(iperf)), "{t:?}");
            }
            assert_ne!(
                core(t.iperf3_client.unwrap()),
                core(t.iperf3_server.unwrap())
            );
        }
    }

    #[test]
    fn tunnel_gives_each_gateway_a_core_per_worker_while_the_machine_has_them() {
        for cores in 4..=128 {
            // The tunnel layer's default workers: a core for each iperf3 end, the
            // rest halved between the gateways, at most 16.
            let threads = ((cores - 2) / 2).clamp(1, 16);
            let topo = machine(1, 1, cores, 1);
            let t = place_tunnel(&topo, threads);
            assert!(t.placement.as_ref().unwrap().disjoint, "{cores}: {t:?}");
            let per_gateway = threads.max(2).min((cores - 2) / 2);
            assert_eq!(t.sender_gateway.len(), per_gateway, "{cores}: {t:?}");
            assert_eq!(t.receiver_gateway.len(), per_gateway, "{cores}: {t:?}");
            let mut used: Vec<usize> = t
                .sender_gateway
                .iter()
                .chain(&t.receiver_gateway)
                .copied()
                .chain(t.iperf3_client)
                .chain(t.iperf3_server)
                .collect();
            used.sort_unstable();
            used.dedup();
            assert_eq!(used.len(), 2 * per_gateway + 2, "{cores}: {t:?}");
            assert!(used.iter().all(|&c| c < cores), "{cores}: {t:?}");
        }
    }

    #[test]
    fn tunnel_on_two_cores_shares_and_says_so() {
        let t = place_tunnel(&machine(1, 1, 2, 1), 1);
        assert_eq!(t.sender_gateway, vec![1]);
        assert_eq!(t.receiver_gateway, vec![0]);
        assert_eq!((t.iperf3_client, t.iperf3_server), (Some(1), Some(0)));
        let p = t.placement.unwrap();
        assert!(!p.disjoint);
        assert!(p.warnings[0].starts_with("cannot give a disjoint placement"));
        assert_eq!(place_tunnel(&machine(1, 1, 1, 1), 1), TunnelCpus::default());
    }

    #[test]
    fn a_tunnel_end_keeps_its_gateway_and_iperf3_on_separate_cores_of_its_host() {
        for (topo, threads, per_gateway) in [
            (machine(1, 1, 2, 1), 1, 1),
            (machine(1, 1, 4, 2), 1, 2),
            (machine(1, 1, 16, 1), 7, 7),
            (machine(1, 1, 16, 1), 16, 15),
        ] {
            let t = place_tunnel_end(&topo, threads, "receiver gateway", "iperf3 server");
            let p = t.placement.clone().unwrap();
            assert!(p.disjoint, "{p:?}");
            let core = |c: usize| topo.core_of(c).unwrap();
            let mut cores: Vec<usize> = t.gateway.iter().map(|&c| core(c)).collect();
            cores.sort_unstable();
            cores.dedup();
            assert_eq!(cores.len(), per_gateway, "{t:?}");
            assert!(!cores.contains(&core(t.iperf3.unwrap())), "{t:?}");
            assert_eq!(p.roles[0].role, "receiver gateway");
        }
        // One CPU: the gateway has it and iperf3 shares it, said so.
        let t = place_tunnel_end(&machine(1, 1, 1, 1), 1, "sender gateway", "iperf3 client");
        assert_eq!((t.gateway.clone(), t.iperf3), (vec![0], Some(0)));
        let p = t.placement.unwrap();
        assert!(!p.disjoint);
        assert!(p.warnings[0].starts_with("cannot give a disjoint placement"));
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
