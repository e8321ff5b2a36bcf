//! The ESP gateway, `cipherbench __gateway`: one process per tunnel end, started by
//! the runner with its configuration as JSON on stdin (the shared secret never
//! appears on a command line) and its acceleration variant in `OPENSSL_ia32cap`.
//!
//! It joins its network namespace, attaches a queue of the TUN device, binds UDP
//! 4500, keys one SA per direction from the run's secret, and runs two threads:
//! TUN -> seal -> UDP and UDP -> open -> TUN ([`pump`]), or one thread taking both
//! in turn (and a spare standing in for it while it waits for its core) when it is
//! given one core and one worker per direction; with `threads` N >= 2,
//! each of them feeds an ordered pipeline of N workers ([`parallel`]) that seal or
//! open one SA in parallel and keep the packets in order. The main thread handles
//! signals: SIGUSR1 writes a stats snapshot and answers `stats N` on stdout, SIGTERM
//! stops, and a snapshot is written once a second and at exit ([`stats`]).
//!
//! Before its real work it measures the effect probes ([`crate::effect`]), so the
//! runner can judge its variant by effect in this very process.
//!
//! Protocol on stdout: `ready {"cpu_settings": ..., "library": ..., "probes": ...}` once
//! both paths run, then one `stats N` line per SIGUSR1. Errors go to stderr and a
//! non-zero exit. Asked to, it
//! appends the SA it seals with to the ESP key log ([`keylog`]) before it starts.

pub mod keylog;
pub mod offload;
pub mod parallel;
pub mod pump;
pub mod stats;
pub mod sys;

use anyhow::{bail, Context, Result};
use cipherbench_crypto::secret::SecretBytes;
use cipherbench_esp::pipeline::Stage;
use cipherbench_esp::{derive_sa_pair, InboundSa, InboundSet, OutboundSa, Role, Transform};
use serde::{Deserialize, Serialize};
use stats::{GatewayStats, ThreadCpu};
use std::io::{Read, Write};
use std::net::SocketAddrV4;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Everything a gateway needs, sent by the runner on stdin.
#[derive(Clone, Serialize, Deserialize)]
pub struct GatewayConfig {
    /// For messages: `sender` or `receiver` (the iperf3 client's side is the sender).
    pub name: String,
    /// The network namespace to join (`/run/netns/NAME`); None stays where started.
    pub netns: Option<String>,
    /// The TUN device (already created, multi-queue, by the runner).
    pub tun: String,
    /// Local ESP-in-UDP address.
    pub local: SocketAddrV4,
    /// The peer gateway's.
    pub peer: SocketAddrV4,
    /// The transform.
    pub transform: Transform,
    /// The run's shared secret, hex.
    pub secret_hex: String,
    /// The key-derivation label (unique per run and transform).
    pub label: String,
    /// Which SA pair this end takes.
    pub initiator: bool,
    /// Where to write stats.
    pub stats_path: PathBuf,
    /// Datagrams per batched system call.
    pub batch: usize,
    /// TUN offloads (virtio header, TSO in, GRO out).
    pub offload: bool,
    /// UDP offloads: GSO sends of equal-length ESP datagrams, `UDP_GRO` receives.
    pub udp_offload: bool,
    /// Cores for the TUN-to-UDP and UDP-to-TUN threads (empty: not pinned; one:
    /// both on it).
    pub cpus: Vec<usize>,
    /// UDP socket buffers, bytes.
    pub socket_buffer_bytes: usize,
    /// Anti-replay window, packets.
    pub replay_window: u32,
    /// The tunnel MTU.
    pub mtu: usize,
    /// Crypto workers per direction (`tunnel --gateway-threads`): 1 runs the
    /// two-thread data path, N >= 2 the ordered pipelines with N workers each.
    #[serde(default = "one")]
    pub threads: usize,
    /// The ESP key log to append the outbound SA to (`tunnel --esp-keylog`), an
    /// absolute path the runner has prepared.
    #[serde(default)]
    pub esp_keylog: Option<PathBuf>,
}

fn one() -> usize {
    1
}

/// The most crypto workers per direction a gateway takes.
pub const MAX_THREADS: usize = 64;

/// The anti-replay window the tunnel gives its gateways, in packets. However many
/// workers open in parallel, the window moves in arrival order
/// ([`parallel`]), so only reordering on the underlay needs room: between hosts
/// (`tunnel --peer`), a NIC's several queues can deliver out of order.
pub const REPLAY_WINDOW: u32 = 1024;

pub use cipherbench_crypto::digest::{from_hex, to_hex};

/// Entry point of `cipherbench __gateway`.
pub fn main() -> Result<()> {
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .context("reading the gateway configuration from stdin")?;
    let config: GatewayConfig =
        serde_json::from_str(&input).context("parsing the gateway configuration")?;
    run(config)
}

#[expect(
    clippy::too_many_lines,
    reason = "the gateway's setup in order (signals, namespace, SAs, TUN, socket) before its threads start"
)]
fn run(config: GatewayConfig) -> Result<()> {
    // Before any thread exists, so that every thread inherits both.
    let signals = sys::Signals::block().context("blocking signals")?;
    if let Some(ns) = &config.netns {
        sys::enter_netns(ns).with_context(|| format!("joining network namespace {ns}"))?;
    }
    // Before the data path exists: the probes measure the cipher code alone.
    let probes = crate::effect::measure("tunnel gateway").ok();
    let secret = SecretBytes::new(from_hex(&config.secret_hex).context("the secret is not hex")?);
    let role = if config.initiator {
        Role::Initiator
    } else {
        Role::Responder
    };
    let mut pair = derive_sa_pair(secret.expose(), &config.label, config.transform, role)
        .context("deriving the SAs")?;
    pair.inbound.replay_window = config.replay_window;
    if let Some(path) = &config.esp_keylog {
        // The SA this gateway seals with, from this address to the peer's: the two
        // gateways together log both directions, each SA once.
        let record = cipherbench_esp::keylog::esp_sa_record(
            &pair.outbound,
            *config.local.ip(),
            *config.peer.ip(),
        );
        keylog::append(path, &record)?;
    }
    let outbound = OutboundSa::new(pair.outbound).context("keying the outbound SA")?;
    let mut inbound = InboundSet::new();
    inbound
        .insert(InboundSa::new(pair.inbound).context("keying the inbound SA")?)
        .context("installing the inbound SA")?;
    if config.batch == 0 || config.batch > 1024 {
        bail!("batch must be 1 to 1024, not {}", config.batch);
    }
    if config.threads == 0 || config.threads > MAX_THREADS {
        bail!(
            "gateway threads must be 1 to {MAX_THREADS}, not {}",
            config.threads
        );
    }

    let tun = sys::attach_tun(&config.tun, config.offload)
        .with_context(|| format!("attaching to TUN device {}", config.tun))?;
    let socket = sys::bind_udp(config.local, config.socket_buffer_bytes)
        .with_context(|| format!("binding UDP {}", config.local))?;
    if config.udp_offload {
        sys::enable_udp_gro(&socket).context("enabling UDP_GRO")?;
    }
    let inode = sys::socket_inode(&socket).unwrap_or(0);
    let shared = Arc::new(pump::Shared::new().context("creating the wakeup eventfd")?);
    let cpu_settings = cipherbench_crypto::info::cpu_settings().unwrap_or_default();

    let tx_path = pump::TxPath {
        tun: tun.try_clone().context("duplicating the TUN descriptor")?,
        socket: socket.try_clone().context("duplicating the UDP socket")?,
        peer: config.peer,
        sa: outbound,
        batch: config.batch,
        vnet_hdr: config.offload,
        mtu: config.mtu,
        udp_gso: config.udp_offload,
    };
    let rx_path = pump::RxPath {
        tun,
        socket,
        sas: inbound,
        batch: config.batch,
        vnet_hdr: config.offload,
        mtu: config.mtu,
        udp_gro: config.udp_offload,
    };
    // One worker per direction confined to one core: both directions on one
    // thread (pump::run_both), which then takes no wakeup or switch from the other.
    let one_thread = config.threads == 1 && config.cpus.len() == 1;
    let mut one_core_turns = None;
    let (tx, rx) = if one_thread {
        let cpu = config.cpus.first().copied();
        let rx = Arc::new(std::sync::Mutex::new(pump::RxLoop::new(rx_path)));
        let turns = Arc::new(pump::Turns::default());
        one_core_turns = Some(Arc::clone(&turns));
        let (rx_both, turns_both) = (Arc::clone(&rx), Arc::clone(&turns));
        let both = spawn_worker("tun<->udp", Placement::Core(cpu), &shared, move |s| {
            pump::run_both(tx_path, &rx_both, &turns_both, s)
        })?;
        let spare = spawn_worker(SPARE_NAME, Placement::Core(cpu), &shared, move |s| {
            pump::run_spare(&rx, &turns, s)
        })?;
        (both, spare)
    } else if config.threads == 1 {
        // One core each where there are two: the two directions apart.
        let tx_cpu = config.cpus.first().copied();
        let rx_cpu = config.cpus.get(1).or(config.cpus.first()).copied();
        let tx = spawn_worker("tun->udp", Placement::Core(tx_cpu), &shared, move |s| {
            pump::run_tx(tx_path, s)
        })?;
        let rx = spawn_worker("udp->tun", Placement::Core(rx_cpu), &shared, move |s| {
            pump::run_rx(rx_path, s)
        })?;
        (tx, rx)
    } else {
        // Every thread of both pipelines may run on any of the gateway's cores:
        // the scheduler puts the busy ones apart.
        let workers = config.threads;
        let tx_cpus = config.cpus.clone();
        let tx = spawn_worker(
            "tun->udp",
            Placement::Set(&config.cpus),
            &shared,
            move |s| {
                let on_start = |_: Stage| place(Placement::Set(&tx_cpus), s);
                parallel::run_tx(tx_path, workers, s, &on_start)
            },
        )?;
        let rx_cpus = config.cpus.clone();
        let rx = spawn_worker(
            "udp->tun",
            Placement::Set(&config.cpus),
            &shared,
            move |s| {
                let on_start = |_: Stage| place(Placement::Set(&rx_cpus), s);
                parallel::run_rx(rx_path, workers, s, &on_start)
            },
        )?;
        (tx, rx)
    };

    // Every thread registers itself as it starts: wait for all of them (the
    // pipelines' too) before the first snapshot, so that each thread's CPU time is
    // in every snapshot the runner compares.
    let expected = if config.threads == 1 {
        2
    } else {
        2 * (config.threads + 2)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while pump::lock(&shared.threads).len() < expected && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }

    let mut snapshot = 0u64;
    let take = |snapshot: &mut u64| -> GatewayStats {
        *snapshot += 1;
        let (outbound, inbound, tx, rx) = shared.totals();
        let threads = pump::lock(&shared.threads)
            .iter()
            .map(|(name, cpu, clock)| ThreadCpu {
                name: name.clone(),
                cpu_ns: clock.read_ns(),
                pinned_cpu: *cpu,
            })
            .collect();
        GatewayStats {
            snapshot: *snapshot,
            monotonic_ns: crate::host::monotonic_ns(),
            transform: config.transform.name().into(),
            cpu_settings: cpu_settings.clone(),
            outbound,
            inbound,
            tx,
            rx,
            socket_drops: std::fs::read_to_string("/proc/self/net/udp")
                .ok()
                .and_then(|t| stats::socket_drops(&t, inode))
                .unwrap_or(0),
            process_cpu_ns: crate::host::process_cpu_ns(),
            threads,
            split: one_core_turns.as_ref().and_then(|t| t.split_record()).map(
                |(monotonic_ns, wait_share)| stats::ThreadSplit {
                    monotonic_ns,
                    wait_share,
                },
            ),
        }
    };
    take(&mut snapshot)
        .write(&config.stats_path)
        .with_context(|| format!("writing {}", config.stats_path.display()))?;
    say(&format!(
        "ready {}",
        serde_json::json!({
            "cpu_settings": cpu_settings,
            "pid": std::process::id(),
            "library": crate::library::this_process(),
            "probes": probes,
        })
    ))?;

    let mut failure = None;
    loop {
        let signal = signals.wait(Duration::from_secs(1));
        if tx.is_finished() || rx.is_finished() {
            failure = Some("a data path thread stopped unexpectedly");
            break;
        }
        match signal {
            Some(sys::Signal::Stop) => break,
            Some(sys::Signal::Snapshot) => {
                take(&mut snapshot).write(&config.stats_path)?;
                say(&format!("stats {snapshot}"))?;
            }
            None => take(&mut snapshot).write(&config.stats_path)?,
        }
    }
    shared.stop.store(true, Ordering::Relaxed);
    shared.wakeup.wake();
    let tx_ok = tx.join().is_ok();
    let rx_ok = rx.join().is_ok();
    take(&mut snapshot).write(&config.stats_path)?;
    if let Some(why) = failure {
        let (first, second) = if one_thread {
            ("tun<->udp", SPARE_NAME)
        } else {
            ("tun->udp", "udp->tun")
        };
        bail!("{why} ({first} {}, {second} {})", ok(tx_ok), ok(rx_ok));
    }
    Ok(())
}

/// The thread that stands by beside the one taking both directions
/// ([`pump::run_spare`]).
pub const SPARE_NAME: &str = "udp->tun spare";

fn ok(b: bool) -> &'static str {
    if b {
        "returned"
    } else {
        "panicked"
    }
}

fn say(line: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()?;
    Ok(())
}

/// Where a data-path thread runs.
#[derive(Clone, Copy)]
enum Placement<'a> {
    /// On this core (or anywhere with None).
    Core(Option<usize>),
    /// Anywhere in this set (anywhere if empty).
    Set(&'a [usize]),
}

/// Places the calling thread and registers it for the per-thread CPU figures.
fn place(placement: Placement<'_>, shared: &pump::Shared) {
    // Pinning is an optimisation: a failure (a core outside our cpuset) leaves the
    // thread where the scheduler put it.
    let pinned = match placement {
        Placement::Core(Some(cpu)) => crate::host::pin_to_core(cpu).ok().map(|_| cpu),
        Placement::Set(cpus) if cpus.len() == 1 => {
            crate::host::pin_to_core(cpus[0]).ok().map(|_| cpus[0])
        }
        Placement::Set(cpus) if !cpus.is_empty() => {
            let _ = crate::host::pin_to_cores(cpus);
            None
        }
        _ => None,
    };
    shared.register_thread(pinned);
}

fn spawn_worker(
    name: &str,
    placement: Placement<'_>,
    shared: &Arc<pump::Shared>,
    work: impl FnOnce(&pump::Shared) + Send + 'static,
) -> Result<std::thread::JoinHandle<()>> {
    let shared = Arc::clone(shared);
    let placement = match placement {
        Placement::Core(cpu) => (cpu, Vec::new()),
        Placement::Set(cpus) => (None, cpus.to_vec()),
    };
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            match &placement {
                (Some(cpu), _) => place(Placement::Core(Some(*cpu)), &shared),
                (None, cpus) => place(Placement::Set(cpus), &shared),
            }
            work(&shared)
        })
        .with_context(|| format!("starting the {name} thread"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_refuses_junk() {
        assert_eq!(to_hex(&[0, 0xab, 0x10]), "00ab10");
        assert_eq!(from_hex("00AB10"), Some(vec![0, 0xab, 0x10]));
        assert_eq!(from_hex("abc"), None);
        assert_eq!(from_hex("zz"), None);
        assert_eq!(from_hex(""), Some(vec![]));
    }
}
