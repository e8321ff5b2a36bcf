//! What a run measured with load from several hosts (`--agents`): each agent's
//! identity, version and clock offset as checked before any load, and each agent's
//! share of a point. The merge itself is the app's (exact histogram addition); these
//! records let a reader see who produced a figure and how far apart the starts were.

use serde::{Deserialize, Serialize};

/// One agent, as the coordinator checked it before the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// It ran on the coordinator's own kernel (a namespace or container of that
    /// machine, the same boot id): its TCP receive path ran in the server's sends,
    /// so its generator paced its wake-ups as one on loopback does, and its CPUs
    /// were the server machine's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub same_kernel: bool,
}

/// One agent's share of one measured window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// Its host's noise over its window (warm-up and drain too) on its generator's
    /// CPUs, its own process being the run; judged like the coordinator's own
    /// (`noise::judge`). None from an agent that did not watch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<crate::noise::Noise>,
}

/// The judge's findings of a window measured here (`own`) and of each agent's host
/// over it, each agent's naming the agent.
pub fn noise_findings(
    own: Option<&crate::noise::Noise>,
    agents: &[AgentShare],
) -> Vec<crate::noise::Finding> {
    let mut out = crate::noise::findings_of(own);
    for a in agents {
        out.extend(crate::noise::on_host(
            "agent",
            &a.name,
            crate::noise::findings_of(a.noise.as_ref()),
        ));
    }
    out
}

impl AgentShare {
    /// The shares of a point's rounds, agent by agent (by name), each round's
    /// weighted by its window: rates average by time, counts add, lateness and skew
    /// keep the worst round's. An agent in only one list keeps its own share.
    pub fn absorb_rounds(
        this: &mut Vec<AgentShare>,
        later: &[AgentShare],
        this_ns: u64,
        later_ns: u64,
    ) {
        let total = (this_ns + later_ns).max(1) as f64;
        let (wa, wb) = (this_ns as f64 / total, later_ns as f64 / total);
        for l in later {
            match this.iter_mut().find(|a| a.name == l.name) {
                Some(a) => {
                    a.start_skew_ns = a.start_skew_ns.max(l.start_skew_ns);
                    a.started_late_ns = a.started_late_ns.max(l.started_late_ns);
                    a.throughput_bytes_per_sec =
                        a.throughput_bytes_per_sec * wa + l.throughput_bytes_per_sec * wb;
                    a.requests += l.requests;
                    a.generator_cpu = a.generator_cpu * wa + l.generator_cpu * wb;
                    a.noise = match (a.noise.take(), &l.noise) {
                        (Some(mut n), Some(m)) => {
                            n.merge(m);
                            Some(n)
                        }
                        // A round that was not watched leaves the share unwatched.
                        _ => None,
                    };
                }
                None => this.push(l.clone()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(name: &str, rate: f64, requests: u64, late: u64) -> AgentShare {
        AgentShare {
            name: name.into(),
            concurrency: 4,
            start_skew_ns: late,
            started_late_ns: late,
            throughput_bytes_per_sec: rate,
            requests,
            generator_cpu: rate / 100.0,
            noise: None,
        }
    }

    #[test]
    fn an_agent_s_rounds_add_its_requests_and_average_its_rates_by_window() {
        let mut shares = vec![share("a", 100.0, 10, 5), share("b", 50.0, 4, 1)];
        AgentShare::absorb_rounds(
            &mut shares,
            &[share("b", 150.0, 6, 9), share("a", 20.0, 2, 0)],
            1_000,
            3_000,
        );
        assert_eq!(shares.len(), 2);
        let (a, b) = (&shares[0], &shares[1]);
        assert_eq!((a.requests, b.requests), (12, 10));
        assert!((a.throughput_bytes_per_sec - 40.0).abs() < 1e-9);
        assert!((b.throughput_bytes_per_sec - 125.0).abs() < 1e-9);
        // The worst round's lateness is kept.
        assert_eq!((a.started_late_ns, b.started_late_ns), (5, 9));
    }
}
