//! Reads the CPU topology from sysfs: `/sys/devices/system/cpu` (online CPUs, each
//! CPU's SMT siblings from `topology/core_cpus_list` or, on older kernels,
//! `thread_siblings_list`, its `physical_package_id` and `core_id`, the `isolated`
//! list), `/sys/devices/system/node/node*/cpulist` for NUMA nodes, and the cgroup's
//! effective cpuset. Everything is read below a root directory, so tests read the
//! fixtures in `testdata/topology/` exactly as the machine's own files.

use cipherbench_model::topology::{parse_cpu_list, Core, Topology};
use std::collections::BTreeMap;
use std::path::Path;

/// This machine's topology, with the CPUs this process may run on and the
/// hypervisor's name when the CPUs are virtual.
pub fn this_machine(hypervisor: Option<String>) -> Topology {
    let mut topo = read(Path::new("/"), Some(crate::host::allowed_cpus()));
    topo.hypervisor = hypervisor;
    topo
}

/// The topology under `root` (`/` for this machine). `allowed`: the CPUs the process
/// may use; None takes every online CPU (for fixtures). What cannot be read is
/// guessed conservatively and said: without sibling lists every CPU is a core of its
/// own and `smt_known` is false; without node lists everything is node 0.
pub fn read(root: &Path, allowed: Option<Vec<usize>>) -> Topology {
    let cpu_dir = root.join("sys/devices/system/cpu");
    let list = |path: &Path| -> Option<Vec<usize>> {
        parse_cpu_list(&std::fs::read_to_string(path).ok()?)
    };
    let number =
        |path: &Path| -> Option<usize> { std::fs::read_to_string(path).ok()?.trim().parse().ok() };
    let online = list(&cpu_dir.join("online"))
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| {
            // No `online` file: every cpuN directory.
            let mut v: Vec<usize> = std::fs::read_dir(&cpu_dir)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok())
                .collect();
            v.sort_unstable();
            if v.is_empty() {
                v = (0..crate::host::cores()).collect();
            }
            v
        });
    let mut node_of: BTreeMap<usize, usize> = BTreeMap::new();
    let node_dir = root.join("sys/devices/system/node");
    for entry in std::fs::read_dir(&node_dir).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let Some(n) = name
            .to_str()
            .and_then(|s| s.strip_prefix("node"))
            .and_then(|s| s.parse::<usize>().ok())
        else {
            continue;
        };
        for cpu in list(&entry.path().join("cpulist")).unwrap_or_default() {
            node_of.insert(cpu, n);
        }
    }
    let mut smt_known = true;
    // Cores keyed by their sibling list, which names a core uniquely (core_id repeats
    // across packages).
    let mut cores: BTreeMap<Vec<usize>, Core> = BTreeMap::new();
    for &cpu in &online {
        let t = cpu_dir.join(format!("cpu{cpu}/topology"));
        let siblings = list(&t.join("core_cpus_list"))
            .or_else(|| list(&t.join("thread_siblings_list")))
            .filter(|s| s.contains(&cpu));
        let siblings: Vec<usize> = match siblings {
            Some(s) => s.into_iter().filter(|c| online.contains(c)).collect(),
            None => {
                smt_known = false;
                vec![cpu]
            }
        };
        cores.entry(siblings.clone()).or_insert_with(|| Core {
            package: number(&t.join("physical_package_id")).unwrap_or(0),
            node: node_of.get(&cpu).copied().unwrap_or(0),
            core_id: number(&t.join("core_id")).unwrap_or(cpu),
            cpus: siblings,
        });
    }
    let mut cores: Vec<Core> = cores.into_values().collect();
    cores.sort_by_key(|c| c.cpus[0]);
    let allowed = match allowed {
        Some(a) => a.into_iter().filter(|c| online.contains(c)).collect(),
        None => online.clone(),
    };
    Topology {
        cores,
        allowed,
        isolated: list(&cpu_dir.join("isolated")).unwrap_or_default(),
        cpuset: cgroup_cpuset(root),
        smt_known,
        hypervisor: None,
    }
}

/// The effective cpuset of this process's cgroup (v2, then v1), where readable.
fn cgroup_cpuset(root: &Path) -> Option<Vec<usize>> {
    let cgroups = std::fs::read_to_string(root.join("proc/self/cgroup")).ok()?;
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let path = path.trim_start_matches('/');
        let file = if controllers.is_empty() {
            root.join("sys/fs/cgroup")
                .join(path)
                .join("cpuset.cpus.effective")
        } else if controllers.split(',').any(|c| c == "cpuset") {
            root.join("sys/fs/cgroup/cpuset")
                .join(path)
                .join("cpuset.effective_cpus")
        } else {
            continue;
        };
        if let Some(l) = std::fs::read_to_string(file)
            .ok()
            .and_then(|t| parse_cpu_list(&t))
            .filter(|l| !l.is_empty())
        {
            return Some(l);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use cipherbench_model::topology::{plan, RoleRequest, Side};
    use std::path::PathBuf;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/topology")
            .join(name)
    }

    #[test]
    fn reads_a_two_socket_machine_whose_core_ids_repeat_per_package() {
        let t = read(&fixture("two-socket-64-thread"), None);
        assert_eq!(
            t.summary(),
            "2 packages, 2 NUMA nodes, 32 cores, 64 CPUs (2 threads per core)"
        );
        assert!(t.smt_known);
        let c = &t.cores[t.core_of(17).unwrap()];
        assert_eq!((c.package, c.node, c.core_id), (1, 1, 1));
        assert_eq!(c.cpus, vec![17, 49]);
        assert_eq!(t.allowed.len(), 64);
        assert!(t.isolated.is_empty());
    }

    #[test]
    fn reads_siblings_from_thread_siblings_list_and_the_isolated_cpus() {
        let t = read(&fixture("one-socket-16-core-smt"), None);
        assert_eq!(
            t.summary(),
            "1 package, 1 NUMA node, 16 cores, 32 CPUs (2 threads per core)"
        );
        assert_eq!(t.cores[3].cpus, vec![3, 19]);
        assert_eq!(t.isolated, vec![14, 15, 30, 31]);
    }

    #[test]
    fn reads_this_machine_s_copied_files() {
        let t = read(&fixture("kvm-2-vcpu-this-machine"), None);
        assert_eq!(
            t.summary(),
            "1 package, 1 NUMA node, 2 cores, 2 CPUs (no SMT)"
        );
        assert!(t.smt_known);
    }

    #[test]
    fn a_root_without_sibling_lists_says_smt_is_unknown() {
        let dir = std::env::temp_dir().join(format!("cb-topo-{}", std::process::id()));
        let cpu = dir.join("sys/devices/system/cpu");
        std::fs::create_dir_all(cpu.join("cpu0")).unwrap();
        std::fs::create_dir_all(cpu.join("cpu1")).unwrap();
        std::fs::write(cpu.join("online"), "0-1\n").unwrap();
        let t = read(&dir, None);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(!t.smt_known);
        assert_eq!(t.cores.len(), 2);
        assert!(t.summary().contains("SMT siblings not reported"));
    }

    /// The planner on each fixture: nginx and the generator (tls), the gateways and
    /// iperf3 (tunnel), with one core spare; no core holds both sides.
    #[test]
    fn no_placement_on_the_fixtures_splits_a_core_between_the_sides() {
        for (name, allowed) in [
            ("two-socket-64-thread", None),
            // The kernel keeps isolated CPUs out of the default affinity.
            (
                "one-socket-16-core-smt",
                Some((0..32).filter(|c| ![14, 15, 30, 31].contains(c)).collect()),
            ),
            ("kvm-2-vcpu-this-machine", None),
        ] {
            let t = read(&fixture(name), allowed);
            for roles in [
                vec![
                    RoleRequest::new("nginx", Side::Sut, 4),
                    RoleRequest::new("generator", Side::Load, 4),
                ],
                vec![
                    RoleRequest::new("gateways", Side::Sut, 2),
                    RoleRequest::new("iperf3", Side::Load, 1),
                ],
                vec![
                    RoleRequest::new("nginx", Side::Sut, 1),
                    RoleRequest::new("generator", Side::Load, 1),
                ],
            ] {
                let p = plan(&t, &roles, 1);
                if !p.disjoint {
                    assert_eq!(name, "kvm-2-vcpu-this-machine");
                    assert!(p.warnings[0].starts_with("cannot give a disjoint placement"));
                    continue;
                }
                let sut: Vec<usize> = p.roles[0]
                    .cpus
                    .iter()
                    .map(|&c| t.core_of(c).unwrap())
                    .collect();
                let load: Vec<usize> = p.roles[1]
                    .cpus
                    .iter()
                    .map(|&c| t.core_of(c).unwrap())
                    .collect();
                assert!(sut.iter().all(|c| !load.contains(c)), "{name}: {p:?}");
                assert!(p.node.is_some(), "{name}");
                assert!(p.all_cpus().iter().all(|c| !t.isolated.contains(c)));
            }
        }
    }

    /// What the tls and tunnel layers apply, on each fixture: nginx's workers and the
    /// generator, the gateways and iperf3, never on siblings of one core where the
    /// machine has whole cores for them; on this 2-vCPU machine, the stated warning.
    #[test]
    fn tls_and_tunnel_placements_on_the_fixtures_never_split_a_core() {
        use cipherbench_model::topology::{place_tls, place_tunnel};
        for (name, allowed) in [
            ("two-socket-64-thread", None),
            (
                "one-socket-16-core-smt",
                Some((0..32).filter(|c| ![14, 15, 30, 31].contains(c)).collect()),
            ),
            ("kvm-2-vcpu-this-machine", None),
        ] {
            let t = read(&fixture(name), allowed);
            let core = |c: &usize| t.core_of(*c).unwrap();
            for cores in [1, 4, 8] {
                let Ok(tls) = place_tls(&t, cores, None) else {
                    assert_eq!(name, "kvm-2-vcpu-this-machine");
                    continue;
                };
                let server: Vec<usize> = tls.server.iter().map(core).collect();
                assert!(tls.generator.iter().all(|g| !server.contains(&core(g))));
                assert!(tls.placement.disjoint, "{name}: {tls:?}");
                assert!(tls
                    .placement
                    .all_cpus()
                    .iter()
                    .all(|c| !t.isolated.contains(c)));
            }
            let tunnel = place_tunnel(&t, 2);
            let p = tunnel.placement.unwrap();
            if name == "kvm-2-vcpu-this-machine" {
                assert!(!p.disjoint);
                assert!(p.warnings[0].starts_with("cannot give a disjoint placement"));
            } else {
                assert!(p.disjoint, "{name}: {p:?}");
                let sut: Vec<usize> = tunnel
                    .sender_gateway
                    .iter()
                    .chain(&tunnel.receiver_gateway)
                    .map(core)
                    .collect();
                for c in [tunnel.iperf3_client, tunnel.iperf3_server] {
                    assert!(!sut.contains(&core(&c.unwrap())), "{name}: {p:?}");
                }
            }
        }
    }
}
