//! Layer 4, `cipherbench tunnel`: iperf3 TCP and UDP through cipherbench's own
//! ESP-in-UDP tunnel between two network namespaces, per transform and acceleration
//! variant, after the underlay alone, as in the IIJ IPsec post (seed 004).
//!
//! The runner builds the [`topology`], starts the iperf3 server, measures the
//! underlay, then for each transform and variant starts a pair of [`gateway`]
//! processes (see [`gateways`]), runs iperf3 TCP and the UDP rate search
//! ([`search`]) and measured runs, takes both gateways' stats around every run, and
//! saves after every point. Everything is removed on the way out, whatever the way.
//! It never prints: progress goes to the observer.

pub mod analysis;
mod findings;
pub mod gateway;
pub mod gateways;
pub mod iperf;
mod lab;
mod own;
pub mod peer;
mod record;
pub mod rounds;
pub mod search;
pub mod strongswan;
pub mod tcpinfo;
pub mod topology;

pub use findings::*;
pub use lab::*;
pub(crate) use own::*;
pub use record::*;

use crate::campaign;
use crate::interrupt;
use crate::results::Session;
use crate::variant::{Baseline, Variant};
use anyhow::{bail, Context, Result};
use cipherbench_esp::Transform;
use cipherbench_model::speed::VariantRecord;
use cipherbench_model::tunnel::{
    Addresses, IperfRun, Pinning, Protocol, Stack, TunnelConfig, TunnelPoint, TunnelResults,
    TunnelRun, UnderlayPoint, VariantSide,
};
use cipherbench_model::Summary;
use gateways::{Gateway, GatewayPair, PairOptions};
use std::path::PathBuf;
use std::time::Duration;
use topology::{Names, Topology, TopologyOptions};

/// Everything `tunnel` will measure, resolved once from the flags.
#[derive(Debug, Clone)]
pub struct TunnelPlan {
    /// Transforms, in order.
    pub transforms: Vec<Transform>,
    /// Variants; the `null` transform runs only the first (it has no crypto).
    pub variants: Vec<Variant>,
    /// Which gateways run the variant.
    pub variant_side: VariantSide,
    /// `tc tbf` on the underlay: as given, and in bits per second.
    pub underlay_rate: Option<(String, u64)>,
    /// TUN MTU.
    pub mtu: u32,
    /// iperf3 `-l` of UDP runs, bytes per datagram (None: iperf3's default).
    pub length: Option<u64>,
    /// iperf3 `-l` of TCP runs, bytes per write (None: iperf3's default, 128 KiB).
    /// Small writes make a TUN tunnel's TCP figure iperf3's per-write cost: the
    /// TUN device frees each packet as it queues it, so TCP never sees a queue to
    /// coalesce writes behind (METHODOLOGY.md, layer 4).
    pub tcp_length: Option<u64>,
    /// iperf3 `-b` of TCP runs, bits per second (`--rate`): a fixed offered load, at
    /// which the gateways' cores per Gbit/s are the cost. None: as fast as it goes.
    pub tcp_rate: Option<f64>,
    /// Protocols to measure.
    pub protocols: Vec<Protocol>,
    /// iperf3 `-w` for UDP runs.
    pub udp_window: Option<u64>,
    /// iperf3 `-t` of a measured run.
    pub seconds: u64,
    /// iperf3 `-O` for TCP runs.
    pub omit_seconds: u64,
    /// Length of a UDP probe.
    pub probe_seconds: u64,
    /// Target UDP loss (fraction).
    pub target_loss: f64,
    /// Tolerance around it.
    pub loss_tolerance: f64,
    /// Most probes per search.
    pub max_probes: usize,
    /// Runs per point.
    pub repeats: usize,
    /// Measure the underlay alone first.
    pub underlay: bool,
    /// Gateway batch size.
    pub batch: usize,
    /// TUN offloads in the gateways.
    pub offload: bool,
    /// UDP GSO/GRO in the gateways.
    pub udp_offload: bool,
    /// Pin gateways and iperf3 to cores.
    pub pin: bool,
    /// Crypto workers per direction in each gateway (1: the two-thread path).
    pub gateway_threads: usize,
    /// How `gateway_threads` was chosen, for run.json.
    pub gateway_threads_from: String,
    /// iperf3 `-P`.
    pub iperf3_parallel: usize,
    /// Where the gateways log their SAs for Wireshark (`--esp-keylog`): an absolute
    /// path checked by [`gateway::keylog::check`]. Not part of the results.
    pub esp_keylog: Option<PathBuf>,
    /// The stacks to measure, in order (`--stack`).
    pub stacks: Vec<Stack>,
    /// strongSwan's crypto backends (`--strongswan-backends`).
    pub strongswan_backends: Vec<strongswan::config::Backend>,
    /// strongSwan's charon, if not where the distribution puts it (`--charon`).
    pub charon: Option<PathBuf>,
}

impl TunnelPlan {
    /// iperf3's `-l` for a run of `protocol` (None: iperf3's default).
    pub fn length_for(&self, protocol: Protocol) -> Option<u64> {
        match protocol {
            Protocol::Tcp => self.tcp_length,
            Protocol::Udp => self.length,
        }
    }

    /// The own gateways' transforms, each with the variants it measures (`null`
    /// only the first: it has no crypto).
    fn transforms_and_variants(&self) -> Vec<(Transform, Vec<Variant>)> {
        if !self.stacks.contains(&Stack::Own) {
            return Vec::new();
        }
        self.transforms
            .iter()
            .map(|&t| {
                let n = if t == Transform::Null {
                    1
                } else {
                    self.variants.len()
                };
                (t, self.variants.iter().take(n).cloned().collect())
            })
            .collect()
    }

    fn combinations(&self) -> usize {
        self.transforms_and_variants()
            .iter()
            .map(|(_, v)| v.len())
            .sum()
    }

    /// Points (transform x variant x protocol), plus the underlay.
    pub fn total_points(&self) -> usize {
        (self.combinations() + self.strongswan_combinations()) * self.protocols.len()
            + usize::from(self.underlay)
    }

    /// A rough duration, for the estimate printed before a run.
    pub fn estimate(&self) -> Duration {
        let run = self.seconds + self.omit_seconds + 1;
        let per_combination: u64 = self
            .protocols
            .iter()
            .map(|p| match p {
                Protocol::Tcp => self.repeats as u64 * run,
                Protocol::Udp => {
                    let reused = u64::from(self.probe_seconds == self.seconds);
                    (self.max_probes as u64).min(3) * (self.probe_seconds + 1)
                        + (self.repeats as u64 - reused) * (self.seconds + 1)
                }
            })
            .sum::<u64>();
        // Interleaved rounds start a pair about (repeats + 1) / 2 times per protocol
        // and variant (`rounds::order`), a second or so each.
        let starts = (self.protocols.len() * (self.repeats + 1)).div_ceil(2) as u64;
        let per_combination = per_combination + starts;
        let underlay = if self.underlay {
            self.repeats as u64 * run
        } else {
            0
        };
        // A pair of charons takes about two seconds to start and negotiate.
        let strongswan = self.strongswan_combinations() as u64 * (per_combination + starts);
        Duration::from_secs(
            self.combinations() as u64 * per_combination + strongswan + underlay + 2,
        )
    }

    fn strongswan_combinations(&self) -> usize {
        if self.stacks.contains(&Stack::Strongswan) {
            strongswan::combinations(self).len()
        } else {
            0
        }
    }

    /// The cores, from the topology planner
    /// (`cipherbench_model::topology::place_tunnel`): whole cores per gateway (as
    /// many as it has workers, at least two, while the machine has them) and per
    /// iperf3 end; on two, each gateway gets one and iperf3 shares with the gateway
    /// in its namespace (the IIJ IPsec post kept the load generators off the
    /// gateways; one machine of two cores cannot).
    pub fn pinning(&self) -> Pinning {
        self.placed(&crate::machine::topology::this_machine(None)).0
    }

    /// The pinning and the placement run.json keeps, on `topology`.
    fn placed(
        &self,
        topology: &cipherbench_model::topology::Topology,
    ) -> (Pinning, Option<cipherbench_model::topology::Placement>) {
        if !self.pin {
            return (Pinning::default(), None);
        }
        let t = cipherbench_model::topology::place_tunnel(topology, self.gateway_threads);
        (
            Pinning {
                sender_gateway: t.sender_gateway,
                receiver_gateway: t.receiver_gateway,
                iperf3_client: t.iperf3_client,
                iperf3_server: t.iperf3_server,
            },
            t.placement,
        )
    }

    fn config(&self) -> TunnelConfig {
        TunnelConfig {
            transforms: self
                .transforms
                .iter()
                .map(|t| t.name().to_string())
                .collect(),
            variants: self.variants.iter().map(|v| v.name().clone()).collect(),
            variant_side: self.variant_side,
            underlay_rate: self.underlay_rate.as_ref().map(|r| r.0.clone()),
            tunnel_mtu: self.mtu,
            length_bytes: self.length,
            tcp_length_bytes: self.tcp_length,
            tcp_rate_bits_per_sec: self.tcp_rate.map(|r| r as u64),
            protocols: self.protocols.clone(),
            udp_window_bytes: self.udp_window,
            duration_ns: self.seconds * 1_000_000_000,
            omit_ns: self.omit_seconds * 1_000_000_000,
            udp_probe_ns: self.probe_seconds * 1_000_000_000,
            udp_target_loss: self.target_loss,
            udp_loss_tolerance: self.loss_tolerance,
            udp_max_probes: self.max_probes,
            repeats: self.repeats,
            batch: self.batch,
            offload: self.offload,
            udp_offload: self.udp_offload,
            pinning: self.pinning(),
            gateway_threads: self.gateway_threads,
            gateway_threads_from: Some(self.gateway_threads_from.clone()),
            iperf3_parallel: self.iperf3_parallel,
            addresses: Addresses {
                underlay_sender: topology::UNDERLAY_SENDER.into(),
                underlay_receiver: topology::UNDERLAY_RECEIVER.into(),
                inner_sender: topology::INNER_SENDER.into(),
                inner_receiver: topology::INNER_RECEIVER.into(),
            },
            stacks: self.stacks.clone(),
            strongswan_backends: if self.stacks.contains(&Stack::Strongswan) {
                self.strongswan_backends
                    .iter()
                    .map(|b| b.name().to_string())
                    .collect()
            } else {
                Vec::new()
            },
        }
    }
}

/// The default number of gateway workers per direction on a machine of `cores`:
/// what is left once both iperf3 ends have a core, shared by the two gateways
/// (1, the two-thread path, on fewer than six cores; 7 on 16; capped at 16).
pub fn default_gateway_threads(cores: usize) -> usize {
    (cores.saturating_sub(2) / 2).clamp(1, 16)
}

/// Runs the plan, saving into the session after every point.
pub fn run(plan: &TunnelPlan, session: &mut Session) -> Result<()> {
    let lab = Lab::start(&TopologyOptions {
        underlay_rate_bits_per_sec: plan.underlay_rate.as_ref().map(|r| r.1),
        mtu: plan.mtu,
        segment_on_the_wire: false,
    })?;
    if plan.stacks.contains(&Stack::Strongswan) {
        // Before anything is measured: a missing strongSwan is one line, and the
        // lab goes again on the way out.
        strongswan::find_tools(plan.charon.as_deref())?;
    }
    // After the prerequisites (a user without root hears that first); a failure
    // here drops the lab, which removes it.
    let created_keylog = match &plan.esp_keylog {
        Some(path) => gateway::keylog::prepare(path)?,
        None => false,
    };
    let outcome = measure(plan, &lab, session);
    if let (Err(_), true, Some(path)) = (&outcome, created_keylog, &plan.esp_keylog) {
        // A file we created goes again only if no gateway wrote to it.
        gateway::keylog::remove_if_unused(path);
    }
    let stopped = lab.stop();
    outcome?;
    stopped
}

fn measure(plan: &TunnelPlan, lab: &Lab, session: &mut Session) -> Result<()> {
    note_iperf3_library(lab, session);
    // A resumed run keeps what an earlier, interrupted run of the same plan measured.
    let mut results = campaign::resume(
        session.record.tunnel.take(),
        |earlier| earlier.config == plan.config(),
        || fresh_results(plan),
    );
    place(plan, &mut results, session);
    let noise_cpus = watched_cpus(results.placement.as_ref());
    let pinning = &results.config.pinning;
    let affinity = pinning.iperf3_client.zip(pinning.iperf3_server);
    session
        .progress
        .layer("tunnel", plan.total_points(), plan.estimate());
    if plan.underlay && results.underlay(Protocol::Tcp).is_some() {
        session.progress.skip(1);
    } else if plan.underlay {
        measure_underlay(plan, lab, affinity, &mut results, session)?;
    }
    let underlay_tcp = results
        .underlay(Protocol::Tcp)
        .map(|u| u.throughput_bits_per_sec.median);

    let program = std::env::current_exe().context("finding cipherbench's own executable")?;
    let life = campaign::Variants::begin("tunnel", &plan.variants)?;
    let baseline = &life.baseline;
    let mut secret = vec![0u8; 32];
    cipherbench_crypto::random_bytes(&mut secret).context("drawing the run's secret")?;
    // Every run's place in the measuring order, after any a resumed run kept.
    let sequence = next_sequence(
        results.points.iter().chain(
            results
                .strongswan
                .iter()
                .flat_map(|s| s.points.iter().map(|p| &p.point)),
        ),
    );
    let mut stand = OwnStand {
        plan,
        lab,
        session: &mut *session,
        results: &mut results,
        baseline,
        program: &program,
        secret: &secret,
        starts: 0,
        noise_cpus: &noise_cpus,
        underlay_tcp,
        transform: Transform::Null,
        variants: Vec::new(),
        sequence,
    };
    campaign::each_unit(&plan.transforms_and_variants(), &mut stand)?;
    note_implementations(&life, plan, &mut results.variants);
    if plan.stacks.contains(&Stack::Strongswan) {
        strongswan::measure(plan, lab, session, &mut results, baseline, underlay_tcp)?;
    }
    session.record.tunnel = Some(results);
    session.save()
}

/// iperf3 only moves the bytes (its OpenSSL is for authentication, unused here): it
/// runs on the system's library, recorded, not held to the one under test.
fn note_iperf3_library(lab: &Lab, session: &mut Session) {
    if let Ok(loaded) = crate::library::of_process(lab.server_pid()) {
        crate::library::note(
            &mut session.record.environment,
            crate::library::Library::system().part(
                "tunnel",
                "iperf3 server (not swapped)",
                &loaded,
                "/proc/<pid>/maps",
                false,
            ),
        );
    }
}

/// The layer's record before anything is measured.
fn fresh_results(plan: &TunnelPlan) -> TunnelResults {
    TunnelResults {
        config: plan.config(),
        underlay: Vec::new(),
        points: Vec::new(),
        variants: Vec::new(),
        iperf3_version: iperf::version(),
        strongswan: None,
        placement: None,
        peer: None,
    }
}

/// Where the tunnel's processes go (the record's placement), and a note for each
/// thing about it that may set a figure: processes sharing CPUs, more gateway
/// threads than CPUs, `--gateway-threads` that strongSwan does not take.
fn place(plan: &TunnelPlan, results: &mut TunnelResults, session: &mut Session) {
    let topology = campaign::topology(session);
    results.placement = plan.placed(&topology).1;
    if let Some(p) = results.placement.as_ref().filter(|p| !p.disjoint) {
        for w in p
            .warnings
            .iter()
            .filter(|w| !w.starts_with("the CPUs are virtual"))
        {
            note(session, "placement_shared", w.clone());
        }
    }
    let pinning = &results.config.pinning;
    if plan.stacks.contains(&Stack::Own) {
        let cpus = |pinned: &[usize]| {
            if pinned.is_empty() {
                topology.allowed.clone()
            } else {
                pinned.to_vec()
            }
        };
        if let Some(message) = threads_over_cpus(
            plan.gateway_threads,
            &[
                ("sender", &cpus(&pinning.sender_gateway)),
                ("receiver", &cpus(&pinning.receiver_gateway)),
            ],
        ) {
            note(session, "gateway_threads_over_cpus", message);
        }
    }
    if plan.stacks.contains(&Stack::Strongswan) && plan.gateway_threads_from == "--gateway-threads"
    {
        note(
            session,
            "gateway_threads_own_only",
            strongswan_threads_note(plan.gateway_threads, &plan.stacks, &pinning.sender_gateway),
        );
    }
}

/// The underlay alone over TCP, the plan's repeats: the figure every tunnel is
/// read against.
fn measure_underlay(
    plan: &TunnelPlan,
    lab: &Lab,
    affinity: Option<(usize, usize)>,
    results: &mut TunnelResults,
    session: &mut Session,
) -> Result<()> {
    interrupt::check()?;
    let mut runs = Vec::new();
    for _ in 0..plan.repeats {
        runs.push(
            iperf_client(
                plan,
                lab,
                affinity,
                topology::UNDERLAY_RECEIVER,
                Protocol::Tcp,
                plan.seconds,
                None,
            )
            .run()?,
        );
    }
    record_underlay(session, results, "", underlay_point(Protocol::Tcp, runs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_workers_than_a_gateways_cpus_is_said_once_for_both() {
        // The reviewer's --gateway-threads 64 on 2 CPUs: one CPU per gateway.
        let note = threads_over_cpus(64, &[("sender", &[0]), ("receiver", &[1])]).unwrap();
        assert_eq!(
            note,
            "64 crypto workers per direction in each gateway, more than its CPUs (sender gateway: CPU 0; receiver gateway: CPU 1): they take turns there, which adds hand-offs, not speed"
        );
        // A worker per CPU, or fewer: nothing to say.
        assert_eq!(
            threads_over_cpus(1, &[("sender", &[0]), ("receiver", &[1])]),
            None
        );
        assert_eq!(
            threads_over_cpus(2, &[("sender", &[0, 1]), ("receiver", &[2, 3])]),
            None
        );
        // Only the gateway that is short is named.
        let one = threads_over_cpus(3, &[("sender", &[0, 1, 2]), ("receiver", &[3, 4])]).unwrap();
        assert!(
            one.contains("(receiver gateway: CPUs 3-4)") && !one.contains("sender"),
            "{one}"
        );
    }

    #[test]
    fn gateway_threads_with_strongswan_say_what_they_do_there() {
        let alone = strongswan_threads_note(4, &[Stack::Strongswan], &[2, 3]);
        assert_eq!(
            alone,
            "--gateway-threads 4 sets no strongSwan threads (charon runs kernel-libipsec's own): with --stack strongswan alone it only sets how many CPUs the planner gives each charon, as it would a gateway (here 2 CPUs each; the sender's: 2-3)"
        );
        let both = strongswan_threads_note(4, &[Stack::Own, Stack::Strongswan], &[]);
        assert!(
            both.contains("own gateways only") && both.ends_with("(here not pinned)"),
            "{both}"
        );
    }

    #[test]
    fn the_default_gateway_workers_leave_a_core_to_each_iperf3_end() {
        assert_eq!(default_gateway_threads(1), 1);
        assert_eq!(default_gateway_threads(2), 1);
        assert_eq!(default_gateway_threads(5), 1);
        assert_eq!(default_gateway_threads(6), 2);
        assert_eq!(default_gateway_threads(16), 7);
        assert_eq!(default_gateway_threads(128), 16);
    }
}
