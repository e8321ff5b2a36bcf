//! What a run measured with load from several hosts (`--agents`): each agent's
//! identity, version and clock offset as checked before any load, and each agent's
//! share of a point. The merge itself is the app's (exact histogram addition); these
//! records let a reader see who produced a figure and how far apart the starts were.

use serde::{Deserialize, Serialize};

/// One agent, as the coordinator checked it before the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentRecord {
    /// As named on the command line (`user@host`, or an ssh config alias).
    pub name: String,
    /// cipherbench version it runs (equal to the coordinator's, or it was refused).
    pub version: String,
    /// Its build identity (the SHA-256 of its executable, with the commit and
    /// profile it was built from): equal to the coordinator's, or it was refused.
    /// Empty in records of versions that compared versions only.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub build: String,
    /// Host name it reported.
    pub hostname: String,
    /// Kernel release.
    pub kernel: String,
    /// CPU model.
    pub cpu_model: String,
    /// CPUs its generator's threads ran on.
    pub cpus: Vec<usize>,
    /// OpenSSL its generator ran on.
    pub openssl: String,
    /// Its clock minus the coordinator's, ns, from the exchange with the shortest
    /// round trip.
    pub clock_offset_ns: i64,
    /// That exchange's round trip, ns: the offset is known to within half of it.
    pub clock_rtt_ns: u64,
}

/// One agent's share of one measured window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentShare {
    /// The agent.
    pub name: String,
    /// Closed loop: its clients.
    pub concurrency: usize,
    /// Its window's start after the earliest agent's, on the coordinator's clock, ns.
    pub start_skew_ns: u64,
    /// How late it began after the agreed start, by its own clock, ns.
    pub started_late_ns: u64,
    /// Body bytes per second in its window.
    pub throughput_bytes_per_sec: f64,
    /// Requests completed in its window.
    pub requests: u64,
    /// Its generator's CPU as a fraction of its cores.
    pub generator_cpu: f64,
}
