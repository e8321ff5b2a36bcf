//! `cipherbench tunnel --peer HOST`: the tunnel between two real hosts. One gateway
//! runs here and one on the peer (started by the peer's `cipherbench agent` over
//! ssh), over the real network: ESP in UDP on port 4500 (RFC 3948 section 2), the
//! same `__gateway` and the same ESP as between namespaces. iperf3 runs on both ends.
//!
//! Order, as in the IIJ IPsec post (seed 004): UDP 4500 checked both ways (a firewall
//! dropping it is one line), each host places its end on its own topology (the gateway
//! and iperf3 on separate whole cores where it can,
//! `cipherbench_model::topology::place_tunnel_end`), the underlay measured first
//! (iperf3 TCP between the hosts' own addresses), then per transform: the peer's end up
//! (its TUN, the responder gateway, an iperf3 server on its inner address), this end up
//! (TUN, initiator gateway), iperf3 through the tunnel with both gateways' stats taken
//! around every run, both ends down. The SAs' secret is drawn here and handed to the
//! peer over the ssh channel only (never a file, never a command line).
//!
//! The results go into the session as the namespace tunnel's do ([`TunnelResults`],
//! saved after every point), with [`PeerRecord`]: the peer as checked (fingerprint,
//! build, clock offset), each host's end (address, placement, the gateway's
//! affinity read from /proc), and the variants as judged on the peer.
//!
//! Every end is an [`End`], removed on drop: its TUN device (and with it the inner
//! address and route), gateway and iperf3. The agent drops its end when asked, when
//! the coordinator's connection closes (Ctrl-C, a killed coordinator), or at exit; a
//! killed agent cannot, so after any failure the coordinator connects again and asks
//! a fresh agent to remove the TUN by name ([`Request`]`::PeerSweep`).

use crate::agent::fleet::{Agent, Fleet, Launch};
use crate::agent::{EndSpec, Reply, Request};
use crate::campaign;
use crate::results::Session;
use crate::supervisor::{Child, Spawn};
use crate::tunnel::gateway::stats::GatewayStats;
use crate::tunnel::gateway::{to_hex, GatewayConfig};
use crate::tunnel::gateways::{Gateway, NamespaceCounters};
use crate::tunnel::iperf::ClientRun;
use crate::tunnel::rounds;
use crate::variant::{Baseline, Variant};
use anyhow::{anyhow, bail, Context, Result};
use cipherbench_esp::Transform;
use cipherbench_model::agents::AgentRecord;
use cipherbench_model::topology::{place_tunnel_end, Topology};
use cipherbench_model::tunnel::{
    HostEnd, IperfRun, PeerRecord, Protocol, TunnelResults, TunnelRun, VariantSide,
};
use cipherbench_model::variant::VariantRecord;
use serde::{Deserialize, Serialize};
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
/// How long the peer's agent listens for the UDP check (the coordinator sends until
/// it answers).
const UDP_LISTEN: Duration = Duration::from_secs(5);
/// The longest the peer's agent may take over one request (placing, bringing its
/// end up or down, a snapshot, the UDP check). Its own steps fail well before, each
/// with its reason (a gateway's start, snapshot or stop in 10 s, iperf3 listening
/// in 10 s); this bounds a busy host's slowness, not a frozen agent's, which its
/// missing heartbeat names within [`crate::agent::fleet::SILENCE`].
const PEER_REQUEST_LIMIT: Duration = Duration::from_secs(300);

/// A running end: removed on drop (iperf3, gateway, TUN with its address and route,
/// scratch directory).
pub struct End {
    tun: String,
    dir: PathBuf,
    gateway: Option<Gateway>,
    iperf: Option<Child>,
    tun_made: bool,
    /// The device the underlay leaves by (toward the other host), for its drops.
    underlay_device: Option<String>,
}

fn ip(args: &[&str]) -> Result<()> {
    crate::tunnel::topology::command("ip", args).map(|_| ())
}

/// What a gateway snapshot is taken with on its host: its stats and the host's
/// counters around it (the TUN's and the underlay device's drops, UDP receive
/// buffer drops). Sent from the peer as its agent's `EndStats`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EndSnapshot {
    /// The gateway's own.
    pub stats: GatewayStats,
    /// The host's.
    pub counters: NamespaceCounters,
    /// The host's noise since the last snapshot, on its end's CPUs, the agent's own
    /// processes (its gateway and iperf3) being the run: a run's window is the one
    /// its closing snapshot carries. None: the first snapshot of an end, or an older
    /// agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<cipherbench_model::noise::Noise>,
}

impl End {
    /// Brings an end up with its gateway under `variant` (masked as `baseline` says
    /// for this host's library), its threads on `placed`'s CPUs, and judges the
    /// variant by the probes the gateway measured, against this host's accel; on
    /// any failure, what was made is removed. Also returns the CPUs the gateway's
    /// worker threads may run on, read from /proc (the pinning, by effect).
    pub fn up(
        spec: &EndSpec,
        placed: &HostEnd,
        variant: &Variant,
        baseline: &Baseline,
    ) -> Result<(End, VariantRecord, Vec<usize>)> {
        let dir = std::env::temp_dir().join(format!("cipherbench-peer-{}", spec.tun));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut end = End {
            tun: spec.tun.clone(),
            dir,
            gateway: None,
            iperf: None,
            tun_made: false,
            underlay_device: underlay_device(spec.peer.ip()),
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
            batch: spec.batch,
            offload: spec.offload,
            udp_offload: spec.udp_offload,
            cpus: placed.gateway_cpus.clone(),
            socket_buffer_bytes: 8 << 20,
            replay_window: crate::tunnel::gateway::REPLAY_WINDOW,
            mtu: spec.mtu as usize,
            esp_keylog: None,
            threads: placed.gateway_threads,
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
        let affinity = worker_affinity(gateway.pid());
        end.gateway = Some(gateway);
        if spec.iperf_server {
            end.iperf = Some(iperf_server(spec.inner, placed.iperf3_cpu)?);
        }
        Ok((end, record, affinity))
    }

    /// A snapshot of the gateway with this host's counters around it.
    pub fn snapshot(&mut self) -> Result<EndSnapshot> {
        let gateway = self
            .gateway
            .as_mut()
            .context("the tunnel's end has no gateway")?;
        let stats = gateway.snapshot()?;
        let tun = link_stats_here(&self.tun)?;
        let underlay = match &self.underlay_device {
            Some(d) => link_stats_here(d)?,
            None => Default::default(),
        };
        Ok(EndSnapshot {
            stats,
            counters: NamespaceCounters {
                tun_queue_drops: tun.tx_dropped,
                link_drops: tun.rx_dropped + underlay.tx_dropped + underlay.rx_dropped,
                udp_rcvbuf_errors: crate::tunnel::topology::udp_rcvbuf_errors(gateway.pid()),
            },
            noise: None,
        })
    }

    /// The gateway's variant, and whether it is still running.
    fn gateway(&mut self) -> Result<&mut Gateway> {
        let g = self
            .gateway
            .as_mut()
            .context("the tunnel's end has no gateway")?;
        g.check_alive()?;
        Ok(g)
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

/// A link's counters in this process's namespace.
fn link_stats_here(device: &str) -> Result<crate::tunnel::topology::LinkStats> {
    let out = crate::tunnel::topology::command("ip", &["-s", "-j", "link", "show", "dev", device])?;
    crate::tunnel::topology::parse_link_stats(&out)
        .with_context(|| format!("reading {device}'s counters"))
}

/// The device packets to `to` leave by (`ip route get`), if the route says.
fn underlay_device(to: &Ipv4Addr) -> Option<String> {
    let out =
        crate::tunnel::topology::command("ip", &["-o", "route", "get", &to.to_string()]).ok()?;
    device_of_route(&out)
}

/// The word after `dev` in a route.
fn device_of_route(route: &str) -> Option<String> {
    let words: Vec<&str> = route.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "dev")?;
    words.get(at + 1).map(|d| d.to_string())
}

/// The CPUs `pid`'s threads other than its main thread may run on (the union of
/// their `Cpus_allowed_list`): a gateway's workers, which pin themselves; the main
/// thread only waits for signals and is not pinned.
pub fn worker_affinity(pid: u32) -> Vec<usize> {
    let mut cpus: Vec<usize> = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return cpus;
    };
    for task in tasks.flatten() {
        if task.file_name().to_string_lossy() == pid.to_string() {
            continue;
        }
        cpus.extend(allowed_list(&task.path().join("status")).unwrap_or_default());
    }
    cpus.sort_unstable();
    cpus.dedup();
    cpus
}

/// `Cpus_allowed_list` of a `/proc/.../status` file.
fn allowed_list(status: &std::path::Path) -> Option<Vec<usize>> {
    let text = std::fs::read_to_string(status).ok()?;
    let line = text.lines().find(|l| l.starts_with("Cpus_allowed_list:"))?;
    cipherbench_model::topology::parse_cpu_list(line.split_once(':')?.1)
}

/// An iperf3 server bound to `addr` (on `cpu`, `-A`, when placed), ready when its
/// socket listens (read from `/proc/PID/net/tcp`, as the namespace tunnel's: a test
/// connection would be taken for a client and reset the next one).
fn iperf_server(addr: Ipv4Addr, cpu: Option<usize>) -> Result<Child> {
    let mut args = vec![
        "-s".to_string(),
        "-B".into(),
        addr.to_string(),
        "-p".into(),
        IPERF_PORT.to_string(),
    ];
    if let Some(c) = cpu {
        args.extend(["-A".into(), c.to_string()]);
    }
    let mut child = Spawn::new("iperf3")
        .args(&args)
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

/// This host's end placed on `topology`: the gateway's workers (`threads`, or this
/// host's default) and, with `pin`, its CPUs and iperf3's from the planner; the
/// host name and address are the caller's to fill where it knows them.
pub fn place_here(
    topology: &Topology,
    pin: bool,
    threads: Option<usize>,
    initiator: bool,
) -> HostEnd {
    let threads =
        threads.unwrap_or_else(|| crate::tunnel::default_gateway_threads(crate::host::cores()));
    let (gateway, iperf3) = if initiator {
        ("sender gateway", "iperf3 client")
    } else {
        ("receiver gateway", "iperf3 server")
    };
    let cpus = if pin {
        place_tunnel_end(topology, threads, gateway, iperf3)
    } else {
        Default::default()
    };
    HostEnd {
        hostname: crate::agent::Hello::here().hostname,
        address: String::new(),
        gateway: if initiator { "sender" } else { "receiver" }.into(),
        gateway_threads: threads,
        gateway_cpus: cpus.gateway,
        iperf3_cpu: cpus.iperf3,
        placement: cpus.placement,
        gateway_affinity: Vec::new(),
    }
}

/// What the peer keeps between requests; dropped (so removed) at the agent's exit.
#[derive(Default)]
pub struct PeerState {
    underlay_iperf: Option<Child>,
    end: Option<End>,
    /// This host's accel probes, measured at the first end brought up.
    baseline: Option<Baseline>,
    /// Where this host's end runs (`PeerPlace`).
    placed: Option<HostEnd>,
    /// The noise window opened at the last snapshot of the end that is up, closed
    /// at the next (`PeerStats`).
    window: Option<crate::machine::noise::Window>,
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
            Request::PeerPlace {
                pin,
                gateway_threads,
            } => {
                let topology = crate::machine::topology::this_machine(None);
                let placed = place_here(&topology, pin, gateway_threads, false);
                self.placed = Some(placed.clone());
                return Ok(Reply::Placed(Box::new(placed)));
            }
            Request::PeerIperf { bind } => {
                self.underlay_iperf = None;
                let cpu = self.placed.as_ref().and_then(|p| p.iperf3_cpu);
                self.underlay_iperf = Some(iperf_server(bind, cpu)?);
            }
            Request::PeerUp(spec) => {
                self.end = None;
                self.window = None;
                let variant = peer_variant(&spec.variant)?;
                let placed = self
                    .placed
                    .clone()
                    .context("asked to bring an end up before placing it")?;
                if self.baseline.is_none() {
                    self.baseline = Some(Baseline::measure(&[Variant::accel()])?);
                }
                let baseline = self.baseline.as_ref().expect("measured above");
                let (end, record, affinity) = End::up(&spec, &placed, &variant, baseline)?;
                self.end = Some(end);
                return Ok(Reply::EndUp {
                    variant: Box::new(record),
                    gateway_affinity: affinity,
                });
            }
            Request::PeerStats => {
                let end = self.end.as_mut().context("no end is up")?;
                let mut snapshot = end.snapshot()?;
                // This host's noise, watched as the coordinator watches its own:
                // from one snapshot to the next, on the end's CPUs, this process
                // (and so its gateway and iperf3) being the run.
                snapshot.noise = self.window.take().map(|w| w.close());
                let cpus = crate::tunnel::watched_cpus(
                    self.placed.as_ref().and_then(|p| p.placement.as_ref()),
                );
                self.window = Some(crate::machine::noise::Window::open(
                    &cpus,
                    &[std::process::id()],
                ));
                return Ok(Reply::EndStats {
                    snapshot: serde_json::to_value(snapshot)?,
                });
            }
            Request::PeerDown => {
                self.end = None;
                self.window = None;
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
                    _ => bail!("{NOTHING_ARRIVED} {port} within {timeout_ms} ms"),
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
    /// length, rounds (`repeats`), the UDP search's settings, the gateways' batch,
    /// offloads and workers, pinning, iperf3's `-P`. The underlay's rate limit,
    /// the variant side, the stacks and the ESP key log do not apply between two
    /// hosts (refused by the command line).
    pub plan: crate::tunnel::TunnelPlan,
}

/// Runs the two-host tunnel into `session` (saved after every point). After a
/// failure (a killed peer, Ctrl-C), the peer's TUN is removed through a fresh
/// agent, and this host's by [`End`]'s drop.
pub fn run(plan: &PeerPlan, session: &mut Session) -> Result<()> {
    if !crate::host::is_root() {
        bail!("tunnel --peer needs root here (TUN devices): run it with sudo");
    }
    let tun = format!("cbp{:x}", std::process::id());
    let mut fleet = Fleet::connect(&plan.launch)?;
    let result = measure(plan, &mut fleet, &tun, session);
    if result.is_err() {
        drop(fleet);
        // The agent we had may be dead, and with it the chance to remove its TUN:
        // ask a fresh one. Best effort: the error that brought us here is the one
        // to report.
        let swept = Fleet::connect(&plan.launch).and_then(|mut again| {
            again.agents[0].ask(&Request::PeerSweep { tun: tun.clone() }, PEER_REQUEST_LIMIT)
        });
        if let Err(e) = swept {
            session.progress.note(&format!(
                "the peer's TUN device {tun} may be left there: removing it failed ({}); `ip link del {tun}` on the peer removes it",
                crate::progress::one_line(&e)
            ));
        }
    }
    result
}

/// The gateway workers asked of both hosts: `--gateway-threads` when given, else
/// each host's own default for its cores.
fn asked_threads(plan: &crate::tunnel::TunnelPlan) -> Option<usize> {
    (plan.gateway_threads_from == "--gateway-threads").then_some(plan.gateway_threads)
}

fn measure(peer: &PeerPlan, fleet: &mut Fleet, tun: &str, session: &mut Session) -> Result<()> {
    let plan = &peer.plan;
    let (here, there) = addresses(fleet)?;
    let agent = &mut fleet.agents[0];
    let long = PEER_REQUEST_LIMIT;

    let (here_end, there_end) = place_ends(plan, agent, (here, there), session)?;
    note_ends(session, &[&here_end, &there_end]);
    let mut results = new_results(plan, (here, there), (&here_end, &there_end), agent.record());
    // A resumed run keeps what an earlier, interrupted run measured with the same
    // plan, to the same peer (host and build), with both ends placed the same way.
    if let Some(earlier) = session
        .record
        .tunnel
        .take()
        .filter(|e| same_stand(e, &results))
    {
        results = earlier;
    }
    // iperf3 on both ends pinned where each host placed it (`-A client,server`:
    // the server's CPU is the peer's own number, and its server was started there).
    let affinity = here_end.iperf3_cpu.zip(there_end.iperf3_cpu);
    session
        .progress
        .layer("tunnel", plan.total_points(), plan.estimate());

    if results.underlay(Protocol::Tcp).is_some() {
        session.progress.skip(1);
    } else {
        agent.ask(&Request::PeerIperf { bind: there }, long)?;
        let underlay = iperf_client(
            agent,
            client(plan, there, Protocol::Tcp, plan.seconds, None, affinity),
        )?;
        agent.ask(&Request::PeerDown, long)?;
        crate::tunnel::record_underlay(
            session,
            &mut results,
            &format!(" ({here} -> {there})"),
            crate::tunnel::underlay_point(Protocol::Tcp, vec![underlay]),
        )?;
    }
    let underlay_tcp = results
        .underlay(Protocol::Tcp)
        .map(|u| u.throughput_bits_per_sec.median);

    let noise_cpus = crate::tunnel::watched_cpus(here_end.placement.as_ref());
    let mut stand = PeerStand {
        agent,
        plan,
        session,
        results: &mut results,
        baseline: campaign::Variants::begin("tunnel", &plan.variants)?.baseline,
        tun,
        here,
        there,
        here_end,
        there_end,
        affinity,
        noise_cpus,
        underlay_tcp,
        transform: Transform::Null,
        sequence: 0,
    };
    // Every run's place in the measuring order, after any a resumed run kept.
    stand.sequence = crate::tunnel::next_sequence(stand.results.points.iter());
    campaign::each_unit(&plan.transforms, &mut stand)?;
    session.record.tunnel = Some(results);
    session.save()
}

/// Whether an earlier record was measured by the same stand as `now`'s: the same
/// plan, the same peer host and build, both ends placed alike.
fn same_stand(earlier: &TunnelResults, now: &TunnelResults) -> bool {
    earlier.config == now.config
        && match (&earlier.peer, &now.peer) {
            (Some(a), Some(b)) => {
                // The gateways' affinity is read back while they run.
                let placed = |e: &HostEnd| HostEnd {
                    gateway_affinity: Vec::new(),
                    ..e.clone()
                };
                a.agent.hostname == b.agent.hostname
                    && a.agent.build == b.agent.build
                    && placed(&a.here) == placed(&b.here)
                    && placed(&a.there) == placed(&b.there)
            }
            _ => false,
        }
}

/// The two-host tunnel as the rounds driver sees it: a pair is this host's end
/// and the peer's, brought up for one transform under one variant.
struct PeerStand<'a> {
    agent: &'a mut Agent,
    plan: &'a crate::tunnel::TunnelPlan,
    session: &'a mut Session,
    results: &'a mut TunnelResults,
    baseline: Baseline,
    tun: &'a str,
    here: Ipv4Addr,
    there: Ipv4Addr,
    /// This host's end and the peer's, as placed.
    here_end: HostEnd,
    there_end: HostEnd,
    /// iperf3's `-A client,server`.
    affinity: Option<(usize, usize)>,
    /// This host's CPUs the noise window watches.
    noise_cpus: Vec<usize>,
    underlay_tcp: Option<f64>,
    /// The transform being measured.
    transform: Transform,
    /// The next run's place in the measuring order.
    sequence: usize,
}

impl PeerStand<'_> {
    /// `transform`'s variants: `null` has no crypto, so only the first variant, as
    /// on one machine.
    fn variants_of(&self, transform: Transform) -> usize {
        if transform == Transform::Null {
            1
        } else {
            self.plan.variants.len()
        }
    }
}

/// This host's and the peer's addresses, as the agent's SSH connection says them,
/// once the agent is known to run as root and UDP crosses between them.
fn addresses(fleet: &mut Fleet) -> Result<(Ipv4Addr, Ipv4Addr)> {
    let agent = &fleet.agents[0];
    let name = &agent.name;
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
    Ok((here, there))
}

/// Each host places its own end, from its own topology: this host's end and the
/// peer's, with their addresses.
fn place_ends(
    plan: &crate::tunnel::TunnelPlan,
    agent: &mut Agent,
    (here, there): (Ipv4Addr, Ipv4Addr),
    session: &Session,
) -> Result<(HostEnd, HostEnd)> {
    let topology = campaign::topology(session);
    let mut here_end = place_here(&topology, plan.pin, asked_threads(plan), true);
    here_end.address = here.to_string();
    let mut there_end = match agent.ask(
        &Request::PeerPlace {
            pin: plan.pin,
            gateway_threads: asked_threads(plan),
        },
        PEER_REQUEST_LIMIT,
    )? {
        Reply::Placed(p) => *p,
        other => bail!(
            "agent {}: answered {other:?} to placing its end",
            agent.name
        ),
    };
    there_end.address = there.to_string();
    Ok((here_end, there_end))
}

/// A note for each end whose placement may set a figure: processes sharing CPUs,
/// more gateway threads than CPUs.
fn note_ends(session: &mut Session, ends: &[&HostEnd]) {
    for end in ends {
        if let Some(p) = end.placement.as_ref().filter(|p| !p.disjoint) {
            for w in p
                .warnings
                .iter()
                .filter(|w| !w.starts_with("the CPUs are virtual"))
            {
                crate::tunnel::note(
                    session,
                    "placement_shared",
                    format!("on {} ({} gateway): {w}", end.hostname, end.gateway),
                );
            }
        }
        if let Some(message) = crate::tunnel::threads_over_cpus(
            end.gateway_threads,
            &[(
                &format!("{} ({})", end.gateway, end.hostname),
                &end.gateway_cpus,
            )],
        ) {
            crate::tunnel::note(session, "gateway_threads_over_cpus", message);
        }
    }
}

/// The layer's results for a tunnel from `here` to `there`, with both ends as
/// placed, before anything is measured.
fn new_results(
    plan: &crate::tunnel::TunnelPlan,
    (here, there): (Ipv4Addr, Ipv4Addr),
    (here_end, there_end): (&HostEnd, &HostEnd),
    agent: AgentRecord,
) -> TunnelResults {
    let mut config = plan.config();
    config.variant_side = VariantSide::Both;
    config.underlay_rate = None;
    config.gateway_threads = here_end.gateway_threads;
    config.addresses = cipherbench_model::tunnel::Addresses {
        underlay_sender: here.to_string(),
        underlay_receiver: there.to_string(),
        inner_sender: INNER_HERE.to_string(),
        inner_receiver: INNER_PEER.to_string(),
    };
    config.pinning = cipherbench_model::tunnel::Pinning {
        sender_gateway: here_end.gateway_cpus.clone(),
        receiver_gateway: there_end.gateway_cpus.clone(),
        iperf3_client: here_end.iperf3_cpu,
        iperf3_server: there_end.iperf3_cpu,
    };
    TunnelResults {
        config,
        underlay: Vec::new(),
        points: Vec::new(),
        variants: Vec::new(),
        iperf3_version: crate::tunnel::iperf::version(),
        placement: here_end.placement.clone(),
        strongswan: None,
        peer: Some(PeerRecord {
            agent,
            here: here_end.clone(),
            there: there_end.clone(),
            variants: Vec::new(),
        }),
    }
}

/// The two-host tunnel's units: a transform with its variants, measured again
/// whole if an earlier run measured part of it (its variants' rounds belong
/// together).
impl campaign::Units for PeerStand<'_> {
    type Unit = Transform;

    fn done(&self, &t: &Transform) -> bool {
        let variants = &self.plan.variants[..self.variants_of(t)];
        crate::tunnel::transform_done(self.plan, self.results.points.iter(), t, variants)
    }

    fn skip(&mut self, &t: &Transform) {
        let n = self.variants_of(t) * self.plan.protocols.len();
        self.session.progress.skip(n);
    }

    fn forget(&mut self, &t: &Transform) {
        self.results.points.retain(|p| p.transform != t.name());
    }

    fn measure(&mut self, &t: &Transform) -> Result<()> {
        self.transform = t;
        let (plan, variants, underlay_tcp) = (self.plan, self.variants_of(t), self.underlay_tcp);
        let mut sequence = self.sequence;
        let outcome = rounds::interleaved(plan, variants, self, underlay_tcp, &mut sequence);
        self.sequence = sequence;
        outcome
    }
}

impl PeerStand<'_> {
    /// The peer's gateway snapshot.
    fn peer_snapshot(&mut self) -> Result<EndSnapshot> {
        match self.agent.ask(&Request::PeerStats, PEER_REQUEST_LIMIT)? {
            Reply::EndStats { snapshot } => serde_json::from_value(snapshot)
                .with_context(|| format!("agent {}: its gateway's snapshot", self.agent.name)),
            other => bail!(
                "agent {}: answered {other:?} to a stats request",
                self.agent.name
            ),
        }
    }

    /// Records a host's judgement of a variant the first time it ran there, and
    /// warns if it did not take effect or the gateway's threads are not where its
    /// host placed them (read from /proc).
    fn note(&mut self, here: bool, record: VariantRecord, affinity: Vec<usize>) {
        let end = if here {
            &mut self.here_end
        } else {
            &mut self.there_end
        };
        let host = end.hostname.clone();
        if !end.gateway_cpus.is_empty() && affinity != end.gateway_cpus {
            let message = format!(
                "the {} gateway on {host} runs on CPUs {} where its host placed it on {}: the pinning did not take effect",
                end.gateway,
                cipherbench_model::topology::format_cpu_list(&affinity),
                cipherbench_model::topology::format_cpu_list(&end.gateway_cpus)
            );
            if !self
                .session
                .record
                .warnings
                .iter()
                .any(|w| w.message == message)
            {
                self.session
                    .record
                    .warn("tunnel", "pinning_not_effective", message);
            }
        }
        if end.gateway_affinity.is_empty() {
            end.gateway_affinity = affinity;
        }
        let (here_end, there_end) = (self.here_end.clone(), self.there_end.clone());
        let peer = self.results.peer.as_mut().expect("set by measure");
        peer.here = here_end;
        peer.there = there_end;
        let known = if here {
            &mut self.results.variants
        } else {
            &mut peer.variants
        };
        if known.iter().any(|v| v.name == record.name) {
            return;
        }
        campaign::warn_not_effective(
            &mut self.session.record,
            "tunnel",
            &record,
            &format!("in the gateway on {host}"),
        );
        known.push(record);
    }
}

impl rounds::Stand for PeerStand<'_> {
    type Pair = End;
    type Run = TunnelRun;

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
            batch: self.plan.batch,
            offload: self.plan.offload,
            udp_offload: self.plan.udp_offload,
        };
        let long = PEER_REQUEST_LIMIT;
        // The receiver first, so the sender's first packets find it.
        let (there, there_affinity) = match self
            .agent
            .ask(&Request::PeerUp(Box::new(spec(false))), long)?
        {
            Reply::EndUp {
                variant,
                gateway_affinity,
            } => (*variant, gateway_affinity),
            other => bail!(
                "agent {}: answered {other:?} to bringing its end up",
                self.agent.name
            ),
        };
        let (end, here, here_affinity) =
            End::up(&spec(true), &self.here_end, variant, &self.baseline)?;
        if let Some(g) = &end.gateway {
            crate::library::note(
                &mut self.session.record.environment,
                g.variant.library.part(
                    "tunnel",
                    "ESP gateway (sender, this host)",
                    &g.loaded,
                    "its own report",
                    true,
                ),
            );
        }
        self.note(true, here, here_affinity);
        self.note(false, there, there_affinity);
        Ok(end)
    }

    fn stop(&mut self, end: End) -> Result<()> {
        drop(end);
        self.agent
            .ask(&Request::PeerDown, PEER_REQUEST_LIMIT)
            .map(|_| ())
    }

    fn run(
        &mut self,
        end: &mut End,
        protocol: Protocol,
        seconds: u64,
        rate: Option<f64>,
    ) -> Result<TunnelRun> {
        let (s0, r0) = (end.snapshot()?, self.peer_snapshot()?);
        // The gateway and iperf3 here run under this process.
        let window = crate::machine::noise::Window::open(&self.noise_cpus, &[std::process::id()]);
        let (iperf, tcp) = iperf_client_sampled(
            self.agent,
            client(
                self.plan,
                INNER_PEER,
                protocol,
                seconds,
                rate,
                self.affinity,
            ),
            Some(&crate::tunnel::spare_cpus(&self.noise_cpus)),
        )?;
        let noise = window.close();
        let (s1, mut r1) = (end.snapshot()?, self.peer_snapshot()?);
        let variant = end.gateway()?.variant.name();
        let gateway = |side: &str, host: &str, a: EndSnapshot, b: EndSnapshot| {
            let mut g = crate::tunnel::gateways::gateway_run(
                side,
                &variant,
                (&a.stats, a.counters),
                (&b.stats, b.counters),
            );
            g.host = Some(host.to_string());
            g
        };
        // The peer's window is the one its closing snapshot carries: from r0 to r1.
        let peer_noise = r1.noise.take().map(|noise| {
            Box::new(cipherbench_model::noise::HostNoise {
                host: self.agent.name.clone(),
                noise,
            })
        });
        let sender = gateway("sender", &self.here_end.hostname, s0, s1);
        let receiver = gateway("receiver", &self.there_end.hostname, r0, r1);
        let mut run = crate::tunnel::analysis::judged_run(
            iperf,
            sender,
            receiver,
            None,
            self.plan.mtu,
            noise,
        );
        run.peer_noise = peer_noise;
        run.tcp = tcp.map(Box::new);
        Ok(run)
    }

    fn point(
        &mut self,
        v: usize,
        protocol: Protocol,
        search: Option<cipherbench_model::tunnel::UdpSearch>,
        runs: Vec<TunnelRun>,
    ) -> Result<()> {
        let point = crate::tunnel::tunnel_point(
            self.transform,
            &self.plan.variants[v],
            VariantSide::Both,
            protocol,
            search,
            runs,
            self.underlay_tcp,
        );
        crate::tunnel::record_point(
            self.session,
            self.results,
            point,
            Some(&self.there_end.hostname),
        )
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
    affinity: Option<(usize, usize)>,
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
        length_bytes: plan.length_for(protocol),
        rate_bits_per_sec: rate,
        window_bytes: (protocol == Protocol::Udp)
            .then_some(plan.udp_window)
            .flatten(),
        affinity,
        parallel: plan.iperf3_parallel,
    }
}

/// UDP 4500 both ways, before any gateway: a firewall that drops it is one line.
/// Each direction waits for the agent's own answer (it listens for [`UDP_LISTEN`],
/// or sends its datagrams, then answers), not a fixed time, so a busy host's slow
/// channel is not taken for a dropped port; and an answer is never left unread for
/// the next request to find.
fn udp_check(fleet: &mut Fleet, here: Ipv4Addr, there: Ipv4Addr) -> Result<()> {
    let agent = &mut fleet.agents[0];
    let name = agent.name.clone();
    let dropped = |from: Ipv4Addr, to: Ipv4Addr| {
        anyhow!("agent {name}: UDP port 4500 from {from} to {to} is dropped (a firewall?): the tunnel needs ESP in UDP 4500 open both ways")
    };
    let unanswered = |what: &str| {
        anyhow!("agent {name}: no answer to the UDP 4500 check ({what}) within {PEER_REQUEST_LIMIT:.0?}; is its host overloaded? run again")
    };
    // Here to there: the agent listens while we send, until it answers.
    agent.send_only(&Request::UdpListen {
        port: ESP_PORT,
        timeout_ms: UDP_LISTEN.as_millis() as u64,
    })?;
    let s = UdpSocket::bind((here, ESP_PORT)).context("binding UDP port 4500 here")?;
    let asked = Instant::now();
    let heard = loop {
        let _ = s.send_to(UDP_PROBE, (there, ESP_PORT));
        if let Some(answer) = agent.poll(Duration::from_millis(100)) {
            break answer;
        }
        if asked.elapsed() > PEER_REQUEST_LIMIT {
            return Err(unanswered("listening"));
        }
    };
    match heard {
        Ok(Reply::Done) => {}
        Ok(other) => bail!("agent {name}: answered {other:?} to the UDP 4500 check"),
        Err(e) if e.to_string().contains(NOTHING_ARRIVED) => return Err(dropped(here, there)),
        Err(e) => return Err(e.context("checking UDP port 4500 toward the peer")),
    }
    // There to here: we listen while the agent sends, until it has answered (after
    // its last datagram) and a moment more for datagrams in flight.
    s.set_read_timeout(Some(Duration::from_millis(50)))?;
    agent.send_only(&Request::UdpSend {
        to: SocketAddrV4::new(here, ESP_PORT),
        port: ESP_PORT,
    })?;
    let asked = Instant::now();
    let mut buf = [0u8; 64];
    let mut got = false;
    let mut answered: Option<Instant> = None;
    loop {
        if let Ok((n, _)) = s.recv_from(&mut buf) {
            got |= &buf[..n] == UDP_PROBE;
        }
        if answered.is_none() {
            match agent.poll(Duration::from_millis(1)) {
                None => {}
                Some(Ok(Reply::Done)) => answered = Some(Instant::now()),
                Some(Ok(other)) => bail!("agent {name}: answered {other:?} to the UDP 4500 check"),
                Some(Err(e)) => return Err(e.context("checking UDP port 4500 from the peer")),
            }
        }
        match answered {
            Some(_) if got => return Ok(()),
            Some(at) if at.elapsed() > Duration::from_secs(1) => return Err(dropped(there, here)),
            None if asked.elapsed() > PEER_REQUEST_LIMIT => return Err(unanswered("sending")),
            _ => {}
        }
    }
}

/// The agent's answer to a UDP check on which nothing arrived.
const NOTHING_ARRIVED: &str = "nothing arrived on UDP port";

/// Runs `run`, watching the peer's agent: if it goes away (a killed agent takes its
/// gateway and iperf3 with it, and a stream into a dead tunnel would hang until its
/// timeout), iperf3 is stopped at once and the error names the peer.
fn iperf_client(agent: &mut Agent, run: ClientRun) -> Result<IperfRun> {
    iperf_client_sampled(agent, run, None).map(|(run, _)| run)
}

/// [`iperf_client`], and for TCP the client's data connection sampled mid-run
/// by `ss` on `spare_cpus` (`Some`; see [`ClientRun::run_sampled`]).
fn iperf_client_sampled(
    agent: &mut Agent,
    run: ClientRun,
    spare_cpus: Option<&[usize]>,
) -> Result<(IperfRun, Option<cipherbench_model::tunnel::TcpSample>)> {
    let gone = |e: &anyhow::Error| {
        anyhow!(
            "{}: the peer went away during the iperf3 run",
            crate::progress::one_line(e)
        )
    };
    let name = agent.name.clone();
    let mut watch_failed = false;
    let watch = || {
        let failure = match agent.poll(Duration::from_millis(1)) {
            None => return Ok(()),
            Some(Err(e)) => gone(&e),
            // Nothing was asked: the conversation is out of step (a bug), and every
            // later answer would be taken for another's.
            Some(Ok(r)) => anyhow!(
                "agent {name}: answered {r:?} when nothing was asked, during the iperf3 run: the coordinator and the agent are out of step (a bug; please report it); run again"
            ),
        };
        watch_failed = true;
        Err(failure)
    };
    let result = match spare_cpus {
        Some(cpus) => run.run_sampled(watch, cpus),
        None => run.run_watching(watch).map(|r| (r, None)),
    };
    result.map_err(|e| {
        if watch_failed || e.is::<crate::interrupt::Interrupted>() {
            return e;
        }
        // An iperf3 that failed because the peer went away: say so, naming it.
        match agent.poll(Duration::from_secs(3)) {
            Some(Err(g)) => gone(&g),
            _ => e,
        }
    })
}
