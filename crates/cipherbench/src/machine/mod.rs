//! The machine's conditions, read where the layers need them: its CPU layout
//! ([`topology`]: SMT siblings, cores, packages, NUMA nodes, isolated CPUs, the CPUs
//! this process may use) and how quiet it is ([`noise`]: snapshots of `/proc` and the
//! cpufreq files around a measured window).
//!
//! Reading only: the decisions (the placement planner, the noise judge) are pure
//! functions in `cipherbench-model`, and nothing here changes a setting.

pub mod clock;
pub mod noise;
pub mod topology;
