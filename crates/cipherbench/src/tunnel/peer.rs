//! `cipherbench tunnel --peer HOST`: the tunnel between two real hosts. One gateway
//! runs here and one on the peer (started by the peer's `cipherbench agent` over
//! ssh), over the real network: ESP in UDP on port 4500 (RFC 3948 section 2), the
//! same `__gateway` and the same ESP as between namespaces. iperf3 runs on both ends.
//!
//! Order, as seed 004: UDP 4500 checked both ways (a firewall dropping it is one
//! line), the underlay measured first (iperf3 TCP between the hosts' own addresses),
//! then per transform: the peer's end up (its TUN, the responder gateway, an iperf3
//! server on its inner address), this end up (TUN, initiator gateway), iperf3 TCP
//! through the tunnel, both ends down. The SAs' secret is drawn here and handed to the
//! peer over the ssh channel only (never a file, never a command line).
//!
//! Every end is an [`End`], removed on drop: its TUN device (and with it the inner
//! address and route), gateway and iperf3. The agent drops its end when asked, when
//! the coordinator's connection closes (Ctrl-C, a killed coordinator), or at exit; a
//! killed agent cannot, so after any failure the coordinator connects again and asks
//! a fresh agent to remove the TUN by name ([`Request`]`::PeerSweep`).

use crate::agent::fleet::{Agent, Fleet, Launch};
use crate::agent::{EndSpec, Reply, Request};
use crate::supervisor::{Child, Spawn};
use crate::tunnel::gateway::{to_hex, GatewayConfig};
use crate::tunnel::gateways::Gateway;
use crate::tunnel::iperf::ClientRun;
use crate::tunnel::rounds::{self, Placed};
use crate::variant::{Baseline, Variant};
use anyhow::{anyhow, bail, Context, Result};
use cipherbench_esp::Transform;
use cipherbench_model::tunnel::{IperfRun, Protocol};
use cipherbench_model::variant::VariantRecord;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// ESP in UDP (RFC 3948 section 2, the NAT-traversal port).
pub const ESP_PORT: u16 = 4500;
/// This end's inner address (RFC 2544's benchmarking range, as the namespace tunnel).
pub const INNER_HERE: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 1);
/// The peer's.
pub const INNER_PEER: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 2);
/// iperf3's port on the peer.
const IPERF_PORT: u16 = crate::tunnel::iperf::PORT;
/// What the UDP check sends.
const UDP_PROBE: &[u8] = b"cipherbench udp 4500 check";

/// A running end: removed on drop (iperf3, gateway, TUN with its address and route,
/// scratch directory).
pub struct End {
    tun: String,
    dir: PathBuf,
    gateway: Option<Gateway>,
    iperf: Option<Child>,
    tun_made: bool,
}

fn ip(args: &[&str]) -> Result<()> {
    crate::tunnel::topology::command("ip", args).map(|_| ())
}

impl End {
    /// Brings an end up with its gateway under `variant` (masked as `baseline` says
    /// for this host's library) and judges the variant by the probes the gateway
    /// measured, against this host's accel; on any failure, what was made is
    /// removed.
    pub fn up(
        spec: &EndSpec,
        variant: &Variant,
        baseline: &Baseline,
    ) -> Result<(End, VariantRecord)> {
        let dir = std::env::temp_dir().join(format!("cipherbench-peer-{}", spec.tun));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut end = End {
            tun: spec.tun.clone(),
            dir,
            gateway: None,
            iperf: None,
            tun_made: false,
        };
        ip(&[
            "tuntap",
            "add",
            "dev",
            &spec.tun,
            "mode",
            "tun",
            "multi_queue",
        ])?;
        end.tun_made = true;
        let mtu = spec.mtu.to_string();
        let queue = crate::tunnel::topology::TUN_QUEUE_LEN.to_string();
        // One TUN super-packet per UDP GSO send (offload::tun_gso_max_segs).
        let gso_segs =
            crate::tunnel::gateway::offload::tun_gso_max_segs(spec.mtu as usize).to_string();
        ip(&[
            "link",
            "set",
            &spec.tun,
            "mtu",
            &mtu,
            "txqueuelen",
            &queue,
            "gso_max_segs",
            &gso_segs,
            "up",
        ])?;
        ip(&[
            "addr",
            "add",
            &spec.inner.to_string(),
            "peer",
            &spec.peer_inner.to_string(),
            "dev",
            &spec.tun,
        ])?;
        let side = if spec.initiator { "sender" } else { "receiver" };
        let config = GatewayConfig {
            name: side.to_string(),
            netns: None,
            tun: spec.tun.clone(),
            local: spec.local,
            peer: spec.peer,
            transform: spec.transform,
            secret_hex: spec.secret_hex.clone(),
            label: spec.label.clone(),
            initiator: spec.initiator,
            stats_path: end.dir.join("stats.json"),
            batch: 64,
            offload: true,
            udp_offload: true,
            cpus: Vec::new(),
            socket_buffer_bytes: 8 << 20,
            replay_window: crate::tunnel::gateway::REPLAY_WINDOW,
            mtu: spec.mtu as usize,
            esp_keylog: None,
            // The host's default, as on one machine (`tunnel --gateway-threads`).
            threads: crate::tunnel::default_gateway_threads(crate::host::cores()),
        };
        let gateway = Gateway::start(
            std::path::Path::new("/proc/self/exe"),
            &config,
            variant,
            baseline.mask(variant),
            side,
        )?;
        let mut record = baseline.judge(variant, gateway.probes.as_ref(), &[], None);
        if gateway.probes.is_none() {
            record.cpu_settings = gateway.cpu_settings.clone();
        }
        end.gateway = Some(gateway);
        if spec.iperf_server {
            end.iperf = Some(iperf_server(spec.inner)?);
        }
        Ok((end, record))
    }
}

impl Drop for End {
    fn drop(&mut self) {
        if let Some(mut c) = self.iperf.take() {
            c.stop();
        }
        if let Some(g) = self.gateway.take() {
            let _ = g.stop();
        }
        if self.tun_made {
            // Deleting the device deletes its address and route.
            let _ = ip(&["link", "del", &self.tun]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// An iperf3 server bound to `addr`, ready when its socket listens (read from
/// `/proc/PID/net/tcp`, as the namespace tunnel's: a test connection would be taken
/// for a client and reset the next one).
fn iperf_server(addr: Ipv4Addr) -> Result<Child> {
    let mut child = Spawn::new("iperf3")
        .args(["-s", "-B", &addr.to_string(), "-p", &IPERF_PORT.to_string()])
        .start()
        .context("starting iperf3 -s")?;
    let pid = child.pid();
    crate::supervisor::wait_until(
        &format!("iperf3 -s listening on {addr}:{IPERF_PORT}"),
        Duration::from_secs(10),
        || {
            if child.try_wait()?.is_some() {
                bail!("iperf3 -s on {addr} exited: {}", child.stderr_tail());
            }
            let table = std::fs::read_to_string(format!("/proc/{pid}/net/tcp"))?;
            Ok(crate::tunnel::iperf::listening(&table, IPERF_PORT))
        },
    )?;
    Ok(child)
}

/// What the peer keeps between requests; dropped (so removed) at the agent's exit.
#[derive(Default)]
pub struct PeerState {
    underlay_iperf: Option<Child>,
    end: Option<End>,
    /// This host's accel probes, measured at the first end brought up.
    baseline: Option<Baseline>,
}

/// A `--peer` variant: a mask, which both hosts can apply to their own library. A
/// provider or engine names files of this host, which the peer need not have.
pub fn peer_variant(name: &str) -> Result<Variant> {
    let v = Variant::parse(name)?;
    if v.expected().is_some() {
        bail!("tunnel --peer runs mask variants only (accel, noaesni, ia32cap:MASK, noifma, noadx, nopkaccel), not {name}: a provider or engine would have to be set up on the peer too");
    }
    if !v.library.is_system() {
        bail!("tunnel --peer runs each host's own OpenSSL; --openssl is not supported with --peer");
    }
    Ok(v)
}

impl PeerState {
    /// Whether anything is up (the agent then cleans up on EOF instead of exiting).
    pub fn busy(&self) -> bool {
        self.underlay_iperf.is_some() || self.end.is_some()
    }

    /// Answers a tunnel request.
    pub fn handle(&mut self, req: Request) -> Result<Reply> {
        match req {
            Request::PeerIperf { bind } => {
                self.underlay_iperf = None;
                self.underlay_iperf = Some(iperf_server(bind)?);
            }
            Request::PeerUp(spec) => {
                self.end = None;
                let variant = peer_variant(&spec.variant)?;
                if self.baseline.is_none() {
                    self.baseline = Some(Baseline::measure(&[Variant::accel()])?);
                }
                let baseline = self.baseline.as_ref().expect("measured above");
                let (end, record) = End::up(&spec, &variant, baseline)?;
                self.end = Some(end);
                return Ok(Reply::EndUp {
                    variant: Box::new(record),
                });
            }
            Request::PeerDown => {
                self.end = None;
                self.underlay_iperf = None;
            }
            Request::PeerSweep { tun } => {
                self.end = None;
                if std::path::Path::new("/sys/class/net").join(&tun).exists() {
                    ip(&["link", "del", &tun])?;
                }
                let _ = std::fs::remove_dir_all(
                    std::env::temp_dir().join(format!("cipherbench-peer-{tun}")),
                );
            }
            Request::UdpListen { port, timeout_ms } => {
                let s = UdpSocket::bind(("0.0.0.0", port))
                    .with_context(|| format!("binding UDP port {port}"))?;
                s.set_read_timeout(Some(Duration::from_millis(timeout_ms)))?;
                let mut buf = [0u8; 64];
                match s.recv_from(&mut buf) {
                    Ok((n, _)) if &buf[..n] == UDP_PROBE => {}
                    _ => bail!("nothing arrived on UDP port {port} within {timeout_ms} ms"),
                }
            }
            Request::UdpSend { to, port } => {
                let s = UdpSocket::bind(("0.0.0.0", port))
                    .with_context(|| format!("binding UDP port {port}"))?;
                for _ in 0..30 {
                    let _ = s.send_to(UDP_PROBE, to);
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            _ => bail!("not a tunnel request"),
        }
        Ok(Reply::Done)
    }
}

/// `tunnel --peer`, resolved.
#[derive(Debug, Clone)]
pub struct PeerPlan {
    /// The peer (one host).
    pub launch: Launch,
    /// What to measure, as the namespace tunnel reads it from the flags: transforms,
    /// variants (mask variants only, [`peer_variant`]), protocols, seconds, MTU,
    /// length, rounds (`repeats`) and the UDP search's settings. The rest (pinning,
    /// underlay rate, stacks) does not apply between two hosts.
    pub plan: crate::tunnel::TunnelPlan,
}

/// One iperf3 run through the tunnel.
#[derive(Debug, Clone)]
pub struct PeerRun {
    /// Transform.
    pub transform: Transform,
    /// Variant name (both gateways).
    pub variant: String,
    /// Round, from 0: the variants alternate within a transform's rounds (None
    /// only while the driver has not placed it).
    pub round: Option<usize>,
    /// Its place in the measuring order.
    pub sequence: Option<usize>,
    /// iperf3 through the tunnel (TCP, or UDP at the rate its search chose).
    pub iperf: IperfRun,
}

impl Placed for PeerRun {
    fn iperf(&self) -> &IperfRun {
        &self.iperf
    }
    fn round(&self) -> Option<usize> {
        self.round
    }
    fn set_round(&mut self, round: usize) {
        self.round = Some(round);
    }
    fn set_sequence(&mut self, sequence: usize) {
        self.sequence = Some(sequence);
    }
}

/// What `tunnel --peer` measured.
#[derive(Debug, Clone)]
pub struct PeerOutcome {
    /// The peer as named.
    pub peer: String,
    /// This host's and the peer's underlay addresses.
    pub addresses: (Ipv4Addr, Ipv4Addr),
    /// iperf3 TCP between the hosts' own addresses.
    pub underlay: IperfRun,
    /// iperf3 through the tunnel, point by point, each point's runs in round order.
    pub tunnel: Vec<PeerRun>,
    /// Each variant as judged on this host, then on the peer (the first time each
    /// ran there; a variant is judged against the accel of the host it ran on).
    pub judged: Vec<(VariantRecord, VariantRecord)>,
}

/// Runs the two-host tunnel. After a failure (a killed peer, Ctrl-C), the peer's
/// TUN is removed through a fresh agent, and this host's by [`End`]'s drop.
pub fn run(plan: &PeerPlan) -> Result<PeerOutcome> {
    if !crate::host::is_root() {
        bail!("tunnel --peer needs root here (TUN devices): run it with sudo");
    }
    let tun = format!("cbp{:x}", std::process::id());
    let mut fleet = Fleet::connect(&plan.launch)?;
    let result = measure(plan, &mut fleet, &tun);
    if result.is_err() {
        drop(fleet);
        // The agent we had may be dead, and with it the chance to remove its TUN:
        // ask a fresh one. Best effort: the error that brought us here is the one
        // to report.
        if let Ok(mut again) = Fleet::connect(&plan.launch) {
            let _ = again.agents[0].ask(&Request::PeerSweep { tun }, Duration::from_secs(20));
        }
    }
    result
}

fn measure(peer: &PeerPlan, fleet: &mut Fleet, tun: &str) -> Result<PeerOutcome> {
    let plan = &peer.plan;
    let agent = &mut fleet.agents[0];
    let name = agent.name.clone();
    if !agent.hello.root {
        bail!("agent {name}: runs without root there, and the tunnel needs root on the peer too (TUN devices): ssh to it as root");
    }
    let parse = |what: &str, v: &Option<String>| -> Result<Ipv4Addr> {
        v.as_deref()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| anyhow!("agent {name}: no IPv4 {what} address in its SSH_CONNECTION (the two-host tunnel is IPv4)"))
    };
    let here = parse("client", &agent.hello.coordinator_addr)?;
    let there = parse("server", &agent.hello.agent_addr)?;
    udp_check(fleet, here, there)?;
    let agent = &mut fleet.agents[0];
    let long = Duration::from_secs(plan.seconds + 30);
    agent.ask(&Request::PeerIperf { bind: there }, long)?;
    let underlay = iperf_client(
        agent,
        client(plan, there, Protocol::Tcp, plan.seconds, None),
    )?;
    agent.ask(&Request::PeerDown, long)?;
    let mut stand = PeerStand {
        agent,
        plan,
        baseline: Baseline::measure(&plan.variants)?,
        tun,
        here,
        there,
        transform: Transform::Null,
        judged: Vec::new(),
        runs: Vec::new(),
    };
    let mut sequence = 0;
    for &transform in &plan.transforms {
        stand.transform = transform;
        // `null` has no crypto: only the first variant, as on one machine.
        let variants = if transform == Transform::Null {
            1
        } else {
            plan.variants.len()
        };
        rounds::interleaved(
            plan,
            variants,
            &mut stand,
            Some(underlay.receiver_bits_per_sec),
            &mut sequence,
        )?;
    }
    Ok(PeerOutcome {
        peer: name,
        addresses: (here, there),
        underlay,
        tunnel: stand.runs,
        judged: stand.judged,
    })
}

/// The two-host tunnel as the rounds driver sees it: a pair is this host's end
/// and the peer's, brought up for one transform under one variant.
struct PeerStand<'a> {
    agent: &'a mut Agent,
    plan: &'a crate::tunnel::TunnelPlan,
    baseline: Baseline,
    tun: &'a str,
    here: Ipv4Addr,
    there: Ipv4Addr,
    /// The transform being measured.
    transform: Transform,
    /// Each variant as judged here, then on the peer, the first time it ran.
    judged: Vec<(VariantRecord, VariantRecord)>,
    /// Every measured run.
    runs: Vec<PeerRun>,
}

impl rounds::Stand for PeerStand<'_> {
    type Pair = End;
    type Run = PeerRun;

    fn start(&mut self, v: usize) -> Result<End> {
        let variant = &self.plan.variants[v];
        let transform = self.transform;
        let mut secret = [0u8; 32];
        openssl::rand::rand_bytes(&mut secret).context("drawing the tunnel's secret")?;
        let spec = |initiator: bool| EndSpec {
            tun: self.tun.to_string(),
            inner: if initiator { INNER_HERE } else { INNER_PEER },
            peer_inner: if initiator { INNER_PEER } else { INNER_HERE },
            mtu: self.plan.mtu,
            local: SocketAddrV4::new(if initiator { self.here } else { self.there }, ESP_PORT),
            peer: SocketAddrV4::new(if initiator { self.there } else { self.here }, ESP_PORT),
            transform,
            secret_hex: to_hex(&secret),
            label: format!("cipherbench peer {} {}", self.tun, transform.name()),
            initiator,
            iperf_server: !initiator,
            variant: variant.name(),
        };
        let long = Duration::from_secs(self.plan.seconds + 30);
        // The receiver first, so the sender's first packets find it.
        let there = match self
            .agent
            .ask(&Request::PeerUp(Box::new(spec(false))), long)?
        {
            Reply::EndUp { variant } => *variant,
            other => bail!(
                "agent {}: answered {other:?} to bringing its end up",
                self.agent.name
            ),
        };
        let (end, here) = End::up(&spec(true), variant, &self.baseline)?;
        if !self.judged.iter().any(|(h, _)| h.name == here.name) {
            self.judged.push((here, there));
        }
        Ok(end)
    }

    fn stop(&mut self, end: End) -> Result<()> {
        drop(end);
        let long = Duration::from_secs(self.plan.seconds + 30);
        self.agent.ask(&Request::PeerDown, long).map(|_| ())
    }

    fn run(
        &mut self,
        _: &mut End,
        protocol: Protocol,
        seconds: u64,
        rate: Option<f64>,
    ) -> Result<PeerRun> {
        let iperf = iperf_client(
            self.agent,
            client(self.plan, INNER_PEER, protocol, seconds, rate),
        )?;
        Ok(PeerRun {
            transform: self.transform,
            variant: String::new(),
            round: None,
            sequence: None,
            iperf,
        })
    }

    fn point(
        &mut self,
        v: usize,
        _: Protocol,
        _: Option<cipherbench_model::tunnel::UdpSearch>,
        runs: Vec<PeerRun>,
    ) -> Result<()> {
        let variant = self.plan.variants[v].name();
        self.runs.extend(runs.into_iter().map(|r| PeerRun {
            variant: variant.clone(),
            ..r
        }));
        Ok(())
    }
}

/// An iperf3 client in this process's namespace to the peer's server at `server`,
/// with the plan's length (and UDP window).
fn client(
    plan: &crate::tunnel::TunnelPlan,
    server: Ipv4Addr,
    protocol: Protocol,
    seconds: u64,
    rate: Option<f64>,
) -> ClientRun {
    ClientRun {
        netns: String::new(),
        server: server.to_string(),
        protocol,
        seconds,
        // As the namespace tunnel: TCP's slow start left out.
        omit_seconds: if protocol == Protocol::Tcp {
            plan.omit_seconds
        } else {
            0
        },
        length_bytes: plan.length,
        rate_bits_per_sec: rate,
        window_bytes: (protocol == Protocol::Udp)
            .then_some(plan.udp_window)
            .flatten(),
        affinity: None,
        parallel: 1,
    }
}

/// UDP 4500 both ways, before any gateway: a firewall that drops it is one line.
fn udp_check(fleet: &mut Fleet, here: Ipv4Addr, there: Ipv4Addr) -> Result<()> {
    let agent = &mut fleet.agents[0];
    let name = agent.name.clone();
    // Here to there: the agent listens while we send.
    agent.send_only(&Request::UdpListen {
        port: ESP_PORT,
        timeout_ms: 3000,
    })?;
    let s = UdpSocket::bind((here, ESP_PORT)).context("binding UDP port 4500 here")?;
    let deadline = Instant::now() + Duration::from_secs(5);
    let heard = loop {
        let _ = s.send_to(UDP_PROBE, (there, ESP_PORT));
        match agent.poll(Duration::from_millis(100)) {
            Some(r) => break r,
            None if Instant::now() > deadline => break Err(anyhow!("no answer")),
            None => {}
        }
    };
    if heard.is_err() {
        bail!("agent {name}: UDP port 4500 from {here} to {there} is dropped (a firewall?): the tunnel needs ESP in UDP 4500 open both ways");
    }
    // There to here.
    s.set_read_timeout(Some(Duration::from_millis(200)))?;
    agent.send_only(&Request::UdpSend {
        to: SocketAddrV4::new(here, ESP_PORT),
        port: ESP_PORT,
    })?;
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut buf = [0u8; 64];
    let mut got = false;
    while Instant::now() < deadline {
        if let Ok((n, _)) = s.recv_from(&mut buf) {
            if &buf[..n] == UDP_PROBE {
                got = true;
                break;
            }
        }
    }
    // The agent's answer to the send, whatever came.
    let _ = agent.poll(Duration::from_secs(5));
    if !got {
        bail!("agent {name}: UDP port 4500 from {there} to {here} is dropped (a firewall?): the tunnel needs ESP in UDP 4500 open both ways");
    }
    Ok(())
}

/// Runs `run`, watching the peer's agent: if it goes away (a killed agent takes its
/// gateway and iperf3 with it, and a stream into a dead tunnel would hang until its
/// timeout), iperf3 is stopped at once and the error names the peer.
fn iperf_client(agent: &mut Agent, run: ClientRun) -> Result<IperfRun> {
    let gone = |e: &anyhow::Error| {
        anyhow!(
            "{}: the peer went away during the iperf3 run",
            crate::progress::one_line(e)
        )
    };
    let mut died = None;
    let result = run.run_watching(|| match agent.poll(Duration::from_millis(1)) {
        Some(Err(e)) => {
            let e = gone(&e);
            died = Some(e.to_string());
            Err(e)
        }
        _ => Ok(()),
    });
    result.map_err(|e| {
        if died.is_some() || e.is::<crate::interrupt::Interrupted>() {
            return e;
        }
        // An iperf3 that failed because the peer went away: say so, naming it.
        match agent.poll(Duration::from_secs(3)) {
            Some(Err(g)) => gone(&g),
            _ => e,
        }
    })
}
