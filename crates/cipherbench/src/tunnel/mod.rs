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
pub mod gateway;
pub mod gateways;
pub mod iperf;
pub mod peer;
pub mod rounds;
pub mod search;
pub mod strongswan;
pub mod tcpinfo;
pub mod topology;

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
    /// iperf3 `-l` (None: iperf3's default).
    pub length: Option<u64>,
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

/// Refuses to start where the layer cannot run, saying why.
pub fn check_prerequisites() -> Result<()> {
    if !crate::host::is_root() {
        bail!("the tunnel layer needs root (network namespaces, veth and TUN devices); run cipherbench as root or with sudo");
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        bail!("/dev/net/tun is missing: this kernel or container has no TUN support (modprobe tun, or give the container the device)");
    }
    for (program, flag) in [("ip", "-V"), ("tc", "-V"), ("iperf3", "--version")] {
        crate::supervisor::Spawn::new(program)
            .args([flag])
            .output(Duration::from_secs(5))
            .with_context(|| format!("the tunnel layer needs {program}"))?;
    }
    Ok(())
}

/// The topology with its iperf3 server running: what [`run`] measures in, and what
/// the root-only tests drive directly. Dropping it stops the server and removes the
/// topology.
pub struct Lab {
    // Field order is drop order: the server goes before its namespace.
    server: crate::supervisor::Child,
    topology: Topology,
}

impl Lab {
    /// Checks the prerequisites, builds a fresh topology and starts the server.
    pub fn start(options: &TopologyOptions) -> Result<Lab> {
        check_prerequisites()?;
        let topology = Topology::build(Names::new()?, options)?;
        let names = topology.names();
        let server =
            iperf::start_server(&names.receiver_ns, &names.dir.join("iperf3-server.json"))?;
        Ok(Lab { server, topology })
    }

    /// The iperf3 server's pid (`ip netns exec` becomes iperf3 in place).
    pub fn server_pid(&self) -> u32 {
        self.server.pid()
    }

    /// The names of its objects.
    pub fn names(&self) -> &Names {
        self.topology.names()
    }

    /// An iperf3 client run from the sender's namespace to `server`.
    pub fn client(&self, server: &str, protocol: Protocol, seconds: u64) -> iperf::ClientRun {
        iperf::ClientRun {
            netns: self.names().sender_ns.clone(),
            server: server.to_string(),
            protocol,
            seconds,
            omit_seconds: 0,
            length_bytes: Some(1220),
            rate_bits_per_sec: None,
            window_bytes: None,
            affinity: None,
            parallel: 1,
        }
    }

    /// Stops the server and removes the topology, reporting failures.
    pub fn stop(self) -> Result<()> {
        let Lab {
            mut server,
            topology,
        } = self;
        server.stop();
        topology.teardown()
    }
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
    // iperf3 only moves the bytes (its OpenSSL is for authentication, unused here):
    // it runs on the system's library, recorded, not held to the one under test.
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
    // A resumed run keeps what an earlier, interrupted run of the same plan measured.
    let mut results = campaign::resume(
        session.record.tunnel.take(),
        |earlier| earlier.config == plan.config(),
        || TunnelResults {
            config: plan.config(),
            underlay: Vec::new(),
            points: Vec::new(),
            variants: Vec::new(),
            iperf3_version: iperf::version(),
            strongswan: None,
            placement: None,
            peer: None,
        },
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

/// The iperf3 client every stack measures with: the plan's length, UDP window,
/// `-O` for TCP and `-P`, from the sender's namespace to `server`.
pub(crate) fn iperf_client(
    plan: &TunnelPlan,
    lab: &Lab,
    affinity: Option<(usize, usize)>,
    server: &str,
    protocol: Protocol,
    seconds: u64,
    rate: Option<f64>,
) -> iperf::ClientRun {
    iperf::ClientRun {
        omit_seconds: if protocol == Protocol::Tcp {
            plan.omit_seconds
        } else {
            0
        },
        length_bytes: plan.length,
        rate_bits_per_sec: rate,
        window_bytes: if protocol == Protocol::Udp {
            plan.udp_window
        } else {
            None
        },
        affinity,
        parallel: plan.iperf3_parallel,
        ..lab.client(server, protocol, seconds)
    }
}

/// The next place in the measuring order after every run of `points` (a resumed
/// run continues the numbering).
pub(crate) fn next_sequence<'a>(points: impl Iterator<Item = &'a TunnelPoint>) -> usize {
    points
        .flat_map(|p| &p.runs)
        .filter_map(|r| r.sequence)
        .max()
        .map_or(0, |n| n + 1)
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

/// The own stack's units: a transform with its variants, measured in interleaved
/// rounds through fresh gateway pairs ([`rounds::interleaved`]). A half-measured
/// transform is measured again whole: its variants' rounds belong together.
impl campaign::Units for OwnStand<'_> {
    type Unit = (Transform, Vec<Variant>);

    fn done(&self, (transform, variants): &Self::Unit) -> bool {
        transform_done(self.plan, self.results.points.iter(), *transform, variants)
    }

    fn skip(&mut self, (_, variants): &Self::Unit) {
        self.session
            .progress
            .skip(variants.len() * self.plan.protocols.len());
    }

    fn forget(&mut self, (transform, _): &Self::Unit) {
        self.results
            .points
            .retain(|p| p.transform != transform.name());
    }

    fn measure(&mut self, (transform, variants): &Self::Unit) -> Result<()> {
        self.transform = *transform;
        self.variants.clone_from(variants);
        let (plan, underlay_tcp) = (self.plan, self.underlay_tcp);
        let mut sequence = self.sequence;
        let outcome = rounds::interleaved(plan, variants.len(), self, underlay_tcp, &mut sequence);
        self.sequence = sequence;
        outcome
    }
}

/// Whether `points` hold a point of every one of `variants` and every protocol of
/// the plan for `transform`: a transform a resumed run skips.
pub(crate) fn transform_done<'p>(
    plan: &TunnelPlan,
    points: impl Iterator<Item = &'p TunnelPoint> + Clone,
    transform: Transform,
    variants: &[Variant],
) -> bool {
    variants.iter().all(|v| {
        plan.protocols.iter().all(|protocol| {
            points.clone().any(|p| {
                p.transform == transform.name() && p.variant == v.name() && p.protocol == *protocol
            })
        })
    })
}

/// One transform through cipherbench's own gateways, for [`rounds::interleaved`]:
/// a fresh pair per variant change, each with a key label of its own.
struct OwnStand<'a> {
    plan: &'a TunnelPlan,
    lab: &'a Lab,
    session: &'a mut Session,
    results: &'a mut TunnelResults,
    baseline: &'a Baseline,
    program: &'a std::path::Path,
    secret: &'a [u8],
    /// Pairs started so far in the layer: part of each start's key label.
    starts: usize,
    noise_cpus: &'a [usize],
    underlay_tcp: Option<f64>,
    /// The transform being measured, and its variants.
    transform: Transform,
    variants: Vec<Variant>,
    /// The next run's place in the measuring order.
    sequence: usize,
}

/// The sender's and the receiver's variant when `variant` runs on `side`: the
/// other side runs accel on the same library (the library is the whole tunnel's,
/// the variant one side's).
pub(crate) fn side_variants(side: VariantSide, variant: &Variant) -> (Variant, Variant) {
    match side {
        VariantSide::Both => (variant.clone(), variant.clone()),
        VariantSide::Sender => (variant.clone(), variant.its_accel()),
        VariantSide::Receiver => (variant.its_accel(), variant.clone()),
    }
}

impl rounds::Stand for OwnStand<'_> {
    type Pair = GatewayPair;
    type Run = TunnelRun;

    fn start(&mut self, v: usize) -> Result<GatewayPair> {
        let (plan, names) = (self.plan, self.lab.names());
        let variant = &self.variants[v];
        let (sender_variant, receiver_variant) = &side_variants(plan.variant_side, variant);
        let pinning = &self.results.config.pinning;
        let options = PairOptions {
            program: self.program.to_path_buf(),
            transform: self.transform,
            secret: self.secret.to_vec(),
            // Unique per start: no two starts key an SA alike.
            label: format!(
                "{}/{}/{}/{}",
                names.run,
                self.transform.name(),
                variant.name(),
                self.starts
            ),
            batch: plan.batch,
            offload: plan.offload,
            udp_offload: plan.udp_offload,
            mtu: plan.mtu as usize,
            sender_cpus: pinning.sender_gateway.clone(),
            receiver_cpus: pinning.receiver_gateway.clone(),
            threads: plan.gateway_threads,
            replay_window: gateway::REPLAY_WINDOW,
            sender_peer: None,
            esp_keylog: plan.esp_keylog.clone(),
        };
        self.starts += 1;
        let baseline = self.baseline;
        let pair = GatewayPair::start(names, &options, sender_variant, receiver_variant, |v| {
            baseline.mask(v)
        })?;
        for (side, gateway) in [("sender", &pair.sender), ("receiver", &pair.receiver)] {
            crate::library::note(
                &mut self.session.record.environment,
                gateway.variant.library.part(
                    "tunnel",
                    &format!("ESP gateway ({side})"),
                    &gateway.loaded,
                    "its own report",
                    true,
                ),
            );
            note_variant(&mut self.results.variants, gateway, baseline, self.session);
        }
        Ok(pair)
    }

    fn stop(&mut self, pair: GatewayPair) -> Result<()> {
        pair.stop().map(|_| ())
    }

    fn run(
        &mut self,
        pair: &mut GatewayPair,
        protocol: Protocol,
        seconds: u64,
        rate: Option<f64>,
    ) -> Result<TunnelRun> {
        let pinning = &self.results.config.pinning;
        let affinity = pinning.iperf3_client.zip(pinning.iperf3_server);
        let client = iperf_client(
            self.plan,
            self.lab,
            affinity,
            topology::INNER_RECEIVER,
            protocol,
            seconds,
            rate,
        );
        measured_run_on(
            &client,
            pair,
            self.lab.names(),
            self.plan.underlay_rate.as_ref().map(|r| r.1),
            self.noise_cpus,
        )
    }

    fn point(
        &mut self,
        v: usize,
        protocol: Protocol,
        search: Option<cipherbench_model::tunnel::UdpSearch>,
        runs: Vec<TunnelRun>,
    ) -> Result<()> {
        let point = tunnel_point(
            self.transform,
            &self.variants[v],
            self.plan.variant_side,
            protocol,
            search,
            runs,
            self.underlay_tcp,
        );
        record_point(self.session, self.results, point, None)
    }
}

/// The catalogue cipher an ESP transform encrypts with: what a provider variant is
/// judged on in the tunnel layer.
fn transform_cipher(t: Transform) -> Option<&'static str> {
    match t {
        Transform::Null => None,
        Transform::Aes256Sha256 => Some("aes-256-cbc-hmac-sha256"),
        Transform::Aes128Gcm => Some("aes-128-gcm"),
        Transform::Aes256Gcm => Some("aes-256-gcm"),
        Transform::ChaCha20Poly1305 => Some("chacha20-poly1305"),
    }
}

/// After a stack's work: each provider variant's tally over it, and the variant
/// judged on the transforms' own ciphers (a fallback on all of them: not taken).
pub(crate) fn note_implementations(
    life: &campaign::Variants,
    plan: &TunnelPlan,
    records: &mut [VariantRecord],
) {
    let ciphers: Vec<&str> = plan
        .transforms
        .iter()
        .filter_map(|&t| transform_cipher(t))
        .collect();
    life.end(records, &ciphers);
}

/// Judges a gateway's variant by the probes it measured, the first time the variant
/// runs (every gateway of a variant loads the same library under the same
/// environment).
fn note_variant(
    known: &mut Vec<VariantRecord>,
    gateway: &Gateway,
    baseline: &Baseline,
    session: &mut Session,
) {
    let variant = &gateway.variant;
    if known.iter().any(|v| v.name == variant.name()) {
        return;
    }
    let mut record = baseline.judge(variant, gateway.probes.as_ref(), known, None);
    if gateway.probes.is_none() {
        record.cpu_settings = gateway.cpu_settings.clone();
    }
    campaign::warn_not_effective(&mut session.record, "tunnel", &record, "in the gateway");
    known.push(record);
}

/// A run note: printed now (one line, even with --quiet) and kept in run.json's
/// warnings.
pub(crate) fn note(session: &mut Session, kind: &str, message: String) {
    session.progress.note(&message);
    session.record.warn("tunnel", kind, message);
}

/// The note when a gateway is asked for more crypto workers per direction than it
/// has CPUs (`gateways`: each one's name and CPUs): its workers then take turns on
/// them. None when every gateway has a CPU per worker.
pub fn threads_over_cpus(threads: usize, gateways: &[(&str, &[usize])]) -> Option<String> {
    let short: Vec<String> = gateways
        .iter()
        .filter(|(_, cpus)| !cpus.is_empty() && threads > cpus.len())
        .map(|(name, cpus)| {
            format!(
                "{name} gateway: {} {}",
                if cpus.len() == 1 { "CPU" } else { "CPUs" },
                cipherbench_model::topology::format_cpu_list(cpus),
            )
        })
        .collect();
    if short.is_empty() {
        return None;
    }
    Some(format!(
        "{threads} crypto workers per direction in each gateway, more than its CPUs ({}): they take turns there, which adds hand-offs, not speed",
        short.join("; "),
    ))
}

/// The note for `--gateway-threads` with strongSwan measured: charon has no such
/// setting; the number only sets how many CPUs each charon is pinned to (`cpus`:
/// the sender's, as the planner gave them for that many workers).
pub fn strongswan_threads_note(threads: usize, stacks: &[Stack], cpus: &[usize]) -> String {
    let pinned = if cpus.is_empty() {
        "here not pinned".to_string()
    } else {
        format!(
            "here {} CPU{} each; the sender's: {}",
            cpus.len(),
            if cpus.len() == 1 { "" } else { "s" },
            cipherbench_model::topology::format_cpu_list(cpus)
        )
    };
    if stacks.contains(&Stack::Own) {
        format!(
            "--gateway-threads {threads} sets the workers of cipherbench's own gateways only; strongSwan's charon runs kernel-libipsec's own threads, on the CPUs a gateway gets ({pinned})"
        )
    } else {
        format!(
            "--gateway-threads {threads} sets no strongSwan threads (charon runs kernel-libipsec's own): with --stack strongswan alone it only sets how many CPUs the planner gives each charon, as it would a gateway ({pinned})"
        )
    }
}

/// The warnings a point deserves, saved with the run: noise, bytes that do not
/// reconcile, drops, a sender-limited search, a tunnel above its underlay, a high
/// spread. `peer`: the tunnel ran to this host (`tunnel --peer`), whose underlay
/// is the real network between the two.
/// Records a finished point: its warnings (`peer`: the other host of a two-host
/// run), the progress line, and run.json saved with it.
pub(crate) fn record_point(
    session: &mut Session,
    results: &mut TunnelResults,
    point: TunnelPoint,
    peer: Option<&str>,
) -> Result<()> {
    warn_about(&point, session, peer);
    session.progress.point(&format!(
        "{} {} {}: {}{}",
        point.transform,
        point.variant,
        point.protocol.as_str(),
        cipherbench_model::units::format_bits_per_sec(point.throughput_bits_per_sec.median / 8.0),
        point
            .runs
            .last()
            .and_then(|r| r.iperf.lost_percent)
            .map(|l| format!(" at {l:.1} % loss"))
            .unwrap_or_default()
    ));
    results.points.push(point);
    session.record.tunnel = Some(results.clone());
    session.save()
}

pub(crate) fn warn_about(point: &TunnelPoint, session: &mut Session, peer: Option<&str>) {
    let what = format!(
        "{} {} {}",
        point.transform,
        point.variant,
        point.protocol.as_str()
    );
    for f in point.noise_findings() {
        session
            .record
            .warn("tunnel", &f.kind, format!("{what}: {}", f.message));
    }
    for f in point.governor_findings() {
        session.record.warn("tunnel", &f.kind, f.message);
    }
    for run in &point.runs {
        if !run.byte_check.ok {
            session.record.warn(
                "tunnel",
                "byte_mismatch",
                format!(
                    "{what}: the receiving gateway opened {} inner bytes, outside the {}..{} that iperf3's {} payload bytes allow",
                    run.byte_check.opened_bytes,
                    run.byte_check.expected_min,
                    run.byte_check.expected_max,
                    run.byte_check.iperf_bytes
                ),
            );
        }
        for gateway in [&run.sender, &run.receiver] {
            if let Some(why) = analysis::unaccounted(gateway) {
                session
                    .record
                    .warn("tunnel", "unaccounted_datagrams", format!("{what}: {why}"));
            }
        }
        let drops = run.receiver.drops_total() + run.sender.drops_total();
        if drops > 0 {
            session.record.warn(
                "tunnel",
                "esp_drops",
                format!("{what}: the gateways dropped {drops} received datagrams (by reason in run.json)"),
            );
        }
    }
    if let Some(search) = &point.search {
        if search.outcome == cipherbench_model::tunnel::SearchOutcome::SenderLimited {
            let (kind, why) = sender_limited(point);
            session
                .record
                .warn("tunnel", kind, format!("{what}: {why}"));
        }
    }
    if point.protocol == Protocol::Tcp
        && point.underlay_share.is_some_and(|share| share > 1.05)
        && !session
            .record
            .warnings
            .iter()
            .any(|w| w.kind == "tunnel_above_underlay")
    {
        let share = point.underlay_share.unwrap_or(0.0) * 100.0;
        let message = match peer {
            None => format!(
                "{what} carried {share:.0} % of the underlay alone: on a veth with no rate limit nothing queues, so TCP sends each of iperf3's -l writes over the bare underlay as its own segment, while the tunnel's latency lets it coalesce them into large TSO packets; the underlay is then no ceiling (pass --underlay-rate, e.g. 1gbit as the IIJ IPsec post's LAN, for a wire-limited one)"
            ),
            Some(host) => format!(
                "{what} carried {share:.0} % of the underlay measured alone between this host and {host}: a tunnel cannot carry more than the path under it when that path is the limit, so one of the two figures is off (the underlay run was disturbed, or the path is not the limit: a virtual link such as veth or a bridge, where nothing queues and TCP over the bare path sends each -l write as its own segment while the tunnel's latency coalesces them); measure the underlay again (iperf3 between the two addresses) before reading the tunnel's share"
            ),
        };
        session
            .record
            .warn("tunnel", "tunnel_above_underlay", message);
    }
    if point.interval_bits_per_sec.high_spread() {
        session.record.warn(
            "tunnel",
            "high_spread",
            format!(
                "{what}: per-second throughput spread ±{:.1} %",
                point.interval_bits_per_sec.rel_spread * 100.0
            ),
        );
    }
}

/// Why a UDP search ended with the client sending less than asked, from its last
/// run: (warning kind, sentence). A datagram the iperf3 client writes into the
/// tunnel stays charged to its socket until the sending gateway reads it from the
/// TUN queue, so when that gateway reads slower than asked the client's writes
/// block: it sends less with no loss and little CPU, and the rate found is the
/// tunnel's sending side (`sender_backpressure`). Only a client busy near a whole
/// core is the load generator's own limit (`load_generator_saturated`).
pub fn sender_limited(point: &TunnelPoint) -> (&'static str, String) {
    let Some(run) = point.runs.last() else {
        return (
            "load_generator_saturated",
            "the iperf3 client could not send fast enough to reach the target loss".into(),
        );
    };
    let client = run.iperf.cpu_client_percent.unwrap_or(100.0);
    let gateway = run.sender.busiest_thread();
    let asked = run.iperf.target_bits_per_sec.unwrap_or(0.0) / 1e6;
    let sent = run.iperf.sender_bits_per_sec / 1e6;
    if run.iperf.client_busy() {
        (
            "load_generator_saturated",
            format!(
                "the iperf3 client sent {sent:.0} of {asked:.0} Mbit/s asked at {client:.0} % of a core: the figure is the load generator's limit, not the tunnel's (try --parallel or fewer gateway cores)"
            ),
        )
    } else {
        (
            "sender_backpressure",
            format!(
                "the iperf3 client sent {sent:.0} of {asked:.0} Mbit/s asked using only {client:.0} % of a core: its writes were held back by the sending gateway ({} at {:.2} of a core), so the figure is the tunnel's sending side, without loss; on a shared machine a client starved of CPU looks the same",
                gateway.map_or("?", |t| t.name.as_str()),
                gateway.map_or(0.0, |t| t.cpu_cores_used)
            ),
        )
    }
}

/// One iperf3 run with both gateways' stats (and the sending TUN queue's drops)
/// taken just before and just after it, and the noise of every CPU this process may
/// use over it.
pub fn measured_run(
    client: &iperf::ClientRun,
    pair: &mut GatewayPair,
    names: &Names,
    underlay_rate_bits_per_sec: Option<u64>,
) -> Result<TunnelRun> {
    measured_run_on(
        client,
        pair,
        names,
        underlay_rate_bits_per_sec,
        &crate::host::allowed_cpus(),
    )
}

/// [`measured_run`] with the noise window on `cpus` (the placement's).
pub fn measured_run_on(
    client: &iperf::ClientRun,
    pair: &mut GatewayPair,
    names: &Names,
    underlay_rate_bits_per_sec: Option<u64>,
    cpus: &[usize],
) -> Result<TunnelRun> {
    let counters = |pair: &GatewayPair| -> Result<_> {
        Ok((
            gateways::NamespaceCounters::read(&names.sender_ns, &pair.sender)?,
            gateways::NamespaceCounters::read(&names.receiver_ns, &pair.receiver)?,
        ))
    };
    let (sn0, rn0) = counters(pair)?;
    let (s0, r0) = pair.snapshot()?;
    // The gateways and iperf3 run under this process (keepers, `ip netns exec`).
    let window = crate::machine::noise::Window::open(cpus, &[std::process::id()]);
    let (iperf, tcp) = client.run_sampled(|| pair.check_alive(), &spare_cpus(cpus))?;
    let noise = window.close();
    let (s1, r1) = pair.snapshot()?;
    let (sn1, rn1) = counters(pair)?;
    let sender = gateways::gateway_run(
        "sender",
        &pair.sender.variant.name(),
        (&s0, sn0),
        (&s1, sn1),
    );
    let receiver = gateways::gateway_run(
        "receiver",
        &pair.receiver.variant.name(),
        (&r0, rn0),
        (&r1, rn1),
    );
    let mut run = analysis::judged_run(
        iperf,
        sender,
        receiver,
        underlay_rate_bits_per_sec,
        pair.sender.mtu,
        noise,
    );
    run.tcp = tcp.map(Box::new);
    Ok(run)
}

/// The CPUs this process may use that none of `placed` (the system under test's
/// and iperf3's) is: where a helper such as the mid-run `ss` runs without taking
/// a measured core. Empty when every allowed CPU is placed (two cores) or nothing
/// is pinned: the helper then runs wherever the scheduler puts it.
pub(crate) fn spare_cpus(placed: &[usize]) -> Vec<usize> {
    crate::host::allowed_cpus()
        .into_iter()
        .filter(|c| !placed.contains(c))
        .collect()
}

/// Says the underlay's figure (`path`, e.g. " (a -> b)", after "underlay tcp"), keeps
/// it in `results` and saves the session.
pub(crate) fn record_underlay(
    session: &mut Session,
    results: &mut TunnelResults,
    path: &str,
    point: UnderlayPoint,
) -> Result<()> {
    session.progress.point(&format!(
        "underlay {}{path}: {}",
        point.protocol.as_str(),
        cipherbench_model::units::format_bits_per_sec(point.throughput_bits_per_sec.median / 8.0)
    ));
    results.underlay.push(point);
    session.record.tunnel = Some(results.clone());
    session.save()
}

/// The CPUs a run's noise windows watch: the placed ones, or every CPU this process
/// may use when nothing is pinned.
pub(crate) fn watched_cpus(
    placement: Option<&cipherbench_model::topology::Placement>,
) -> Vec<usize> {
    match placement {
        Some(p) => p.all_cpus(),
        None => crate::host::allowed_cpus(),
    }
}

pub(crate) fn underlay_point(protocol: Protocol, runs: Vec<IperfRun>) -> UnderlayPoint {
    let totals: Vec<f64> = runs.iter().map(|r| r.receiver_bits_per_sec).collect();
    let intervals: Vec<f64> = runs
        .iter()
        .flat_map(|r| r.interval_bits_per_sec.clone())
        .collect();
    UnderlayPoint {
        protocol,
        throughput_bits_per_sec: Summary::of_or_empty(&totals),
        interval_bits_per_sec: Summary::of_or_empty(&intervals),
        runs,
    }
}

pub(crate) fn tunnel_point(
    transform: Transform,
    variant: &Variant,
    variant_side: VariantSide,
    protocol: Protocol,
    search: Option<cipherbench_model::tunnel::UdpSearch>,
    runs: Vec<TunnelRun>,
    underlay_tcp: Option<f64>,
) -> TunnelPoint {
    let totals: Vec<f64> = runs.iter().map(|r| r.iperf.receiver_bits_per_sec).collect();
    let intervals: Vec<f64> = runs
        .iter()
        .flat_map(|r| r.iperf.interval_bits_per_sec.clone())
        .collect();
    let throughput = Summary::of_or_empty(&totals);
    TunnelPoint {
        transform: transform.name().to_string(),
        variant: variant.name().clone(),
        variant_side,
        protocol,
        search,
        underlay_share: underlay_tcp
            .filter(|u| *u > 0.0)
            .map(|u| throughput.median / u),
        throughput_bits_per_sec: throughput,
        interval_bits_per_sec: Summary::of_or_empty(&intervals),
        runs,
    }
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
