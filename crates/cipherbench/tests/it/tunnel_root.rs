//! Layer 4 end to end, as root: real network namespaces, veth, TUN devices, the
//! `__gateway` processes and iperf3. Kept apart from the other tests because they
//! need root and a few programs (ip, tc, iperf3, dumpcap/tshark, nft); each test
//! prints why it skips where it cannot run, so `cargo test` passes anywhere.
//!
//! What they prove: every transform carries iperf3 TCP and UDP and the gateways'
//! counters agree with iperf3's bytes; packets on the wire decrypt with tshark
//! (AES-GCM, AES-CBC + HMAC-SHA-256, null) given nothing but the `--esp-keylog` file,
//! and with RustCrypto's `chacha20poly1305` (ChaCha20-Poly1305, which this tshark
//! cannot do); loss, duplicates, replays, forgeries, keepalives, IKE, empty and short
//! datagrams are counted exactly, each under one outcome, and nothing is delivered
//! twice; and nothing of ours is left after a normal run, an error, SIGINT, or SIGKILL
//! plus `tunnel cleanup`.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]
#![allow(
    clippy::too_many_lines,
    reason = "each end-to-end test reads top to bottom as one scenario, setup to teardown"
)]

use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Nonce, Tag};
use cipherbench::supervisor::{wait_until, Spawn};
use cipherbench::tunnel::gateway::keylog;
use cipherbench::tunnel::gateway::sys::enter_netns;
use cipherbench::tunnel::gateways::{GatewayPair, PairOptions};
use cipherbench::tunnel::iperf::received_datagrams;
use cipherbench::tunnel::topology::{self, Names, TopologyOptions};
use cipherbench::tunnel::{analysis, check_prerequisites, measured_run, Lab};
use cipherbench::variant::Variant;
use cipherbench_esp::{derive_sa_pair, Role, Transform};
use cipherbench_model::tunnel::{GatewayRun, Protocol, TunnelRun};
use std::net::{SocketAddrV4, UdpSocket};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_cipherbench");

/// One tunnel test at a time: they share two cores with everything else, and the
/// exact counts (no socket drops, no loss) must not depend on how busy they are.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    crate::turns::alone()
}
const SECRET: [u8; 32] = [0x5a; 32];

/// A fresh lab, or None (with the reason printed) where the tunnel cannot run.
/// Tests that capture or filter on the underlay want one ESP packet per frame.
fn lab(test: &str, needs: &[&str]) -> Option<Lab> {
    lab_with(test, needs, false)
}

fn wire_lab(test: &str, needs: &[&str]) -> Option<Lab> {
    lab_with(test, needs, true)
}

fn lab_with(test: &str, needs: &[&str], segment_on_the_wire: bool) -> Option<Lab> {
    if let Err(e) = check_prerequisites() {
        eprintln!("skipping {test}: {e:#}");
        return None;
    }
    for program in needs {
        let found = Command::new(program)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !found {
            eprintln!("skipping {test}: {program} is not installed (scripts/install-deps.sh test)");
            return None;
        }
    }
    Some(
        Lab::start(&TopologyOptions {
            underlay_rate_bits_per_sec: None,
            mtu: 1400,
            segment_on_the_wire,
        })
        .expect("building the lab"),
    )
}

fn pair(lab: &Lab, transform: Transform, label: &str, peer: Option<SocketAddrV4>) -> GatewayPair {
    pair_logging(lab, transform, label, peer, None)
}

fn pair_logging(
    lab: &Lab,
    transform: Transform,
    label: &str,
    peer: Option<SocketAddrV4>,
    esp_keylog: Option<&Path>,
) -> GatewayPair {
    pair_with(lab, transform, label, peer, esp_keylog, 1)
}

fn pair_with(
    lab: &Lab,
    transform: Transform,
    label: &str,
    peer: Option<SocketAddrV4>,
    esp_keylog: Option<&Path>,
    threads: usize,
) -> GatewayPair {
    pair_placed(lab, transform, label, peer, esp_keylog, threads, None)
}

/// One core for each gateway: the first and the last this machine has (the same
/// one on a single-core machine), as the default placement gives on 2 cores. A
/// gateway given one core and one worker per direction runs both directions on
/// one thread, with a spare beside it.
fn one_core_each() -> (Vec<usize>, Vec<usize>) {
    let last = std::thread::available_parallelism().map_or(1, |n| n.get()) - 1;
    (vec![0], vec![last])
}

fn pair_placed(
    lab: &Lab,
    transform: Transform,
    label: &str,
    peer: Option<SocketAddrV4>,
    esp_keylog: Option<&Path>,
    threads: usize,
    cpus: Option<(Vec<usize>, Vec<usize>)>,
) -> GatewayPair {
    let (sender_cpus, receiver_cpus) = cpus.unwrap_or_default();
    GatewayPair::start(
        lab.names(),
        &PairOptions {
            program: BIN.into(),
            transform,
            secret: SECRET.to_vec(),
            label: label.to_string(),
            batch: 64,
            offload: true,
            udp_offload: true,
            mtu: 1400,
            sender_cpus,
            receiver_cpus,
            threads,
            replay_window: cipherbench::tunnel::gateway::REPLAY_WINDOW,
            sender_peer: peer,
            esp_keylog: esp_keylog.map(Path::to_path_buf),
        },
        &Variant::accel(),
        &Variant::accel(),
        |v: &Variant| v.mask(&cipherbench_crypto::info::library_version()),
    )
    .expect("starting the gateways")
}

fn udp_run(lab: &Lab, pair: &mut GatewayPair, seconds: u64, rate: f64) -> TunnelRun {
    let mut client = lab.client(topology::INNER_RECEIVER, Protocol::Udp, seconds);
    client.rate_bits_per_sec = Some(rate);
    measured_run(&client, pair, lab.names(), None).expect("a UDP run")
}

#[test]
fn every_transform_carries_tcp_and_udp_and_the_counters_match_iperf3() {
    let _turn = crate::turn!();
    let _serial = serial();
    let Some(lab) = lab("every_transform_carries_tcp_and_udp", &[]) else {
        return;
    };
    for transform in Transform::ALL {
        let mut gateways = pair(&lab, transform, &format!("e2e/{transform}"), None);

        let tcp = lab.client(topology::INNER_RECEIVER, Protocol::Tcp, 2);
        let run = measured_run(&tcp, &mut gateways, lab.names(), None).expect("a TCP run");
        let (s, r, i) = (&run.sender, &run.receiver, &run.iperf);
        assert!(i.received_bytes_total > 1_000_000, "{transform}: {i:?}");
        assert!(run.byte_check.ok, "{transform} tcp: {:?}", run.byte_check);
        assert_eq!(
            s.drops_total() + r.drops_total(),
            0,
            "{transform} tcp drops: {}",
            drops_by_reason(s, r)
        );
        // Every inner packet the sender sealed, the receiver opened (a few may be in
        // flight at a snapshot: the connection's closing segments).
        assert!(
            s.sealed_packets.abs_diff(r.opened_packets) <= 4,
            "{transform}: {s:?} {r:?}"
        );
        // The data direction carries iperf3's payload in segments with 52 bytes of
        // headers (IPv4 20, TCP 20, timestamps 12); what is left after them is at
        // least what the server read and at most what the client wrote, plus
        // retransmissions and the control connection's few KiB.
        let payload = r.opened_bytes.saturating_sub(52 * r.opened_packets);
        let mss = i.tcp_mss_bytes.unwrap_or(1348);
        let most = i.sent_bytes_total + i.retransmits_total.unwrap_or(0) * mss + 64 * 1024;
        assert!(
            payload >= i.received_bytes_total && payload <= most,
            "{transform}: payload {payload}, iperf3 read {}, wrote {}",
            i.received_bytes_total,
            i.sent_bytes_total
        );
        // ESP adds the same overhead to every packet of a size: the bytes on the wire
        // are the inner bytes plus header, IV, padding, trailer and ICV.
        assert!(s.esp_bytes_sent > s.sealed_bytes, "{transform}");
        // The sender's data connection was sampled mid-run (`ss` in its namespace):
        // the one carrying the data, not iperf3's control connection.
        let tcp = run
            .tcp
            .as_deref()
            .unwrap_or_else(|| panic!("{transform}: no TCP sample"));
        assert!(tcp.cwnd.is_some_and(|c| c > 0), "{transform}: {tcp:?}");
        assert!(tcp.rtt_ms.is_some_and(|r| r > 0.0), "{transform}: {tcp:?}");
        assert!(tcp.mss.is_some_and(|m| m > 1000), "{transform}: {tcp:?}");
        assert!(
            tcp.bytes_acked.is_some_and(|b| b > 1_000_000),
            "{transform}: {tcp:?}"
        );
        assert!(
            tcp.connections >= 2 && (0.5..1.9).contains(&tcp.at_seconds),
            "{transform}: {tcp:?}"
        );
        // With TUN offloads each read is a super-packet of several segments.
        assert!(
            s.sealed_per_tun_read().is_some_and(|n| n > 1.0),
            "{transform}: {s:?}"
        );

        let run = udp_run(&lab, &mut gateways, 2, 50e6);
        assert!(run.tcp.is_none(), "{transform}: UDP has no TCP sample");
        let (s, r, i) = (&run.sender, &run.receiver, &run.iperf);
        let received = received_datagrams(i);
        assert!(received > 5_000, "{transform} udp: {i:?}");
        assert!(run.byte_check.ok, "{transform} udp: {:?}", run.byte_check);
        assert_eq!(
            s.drops_total() + r.drops_total(),
            0,
            "{transform} udp drops: {}",
            drops_by_reason(s, r)
        );
        // Each datagram is 1220 bytes of payload + UDP 8 + IPv4 20 = 1248 inner
        // bytes; beyond them only the control connection crossed (a few KiB), and
        // datagrams lost after the gateway (counted by iperf3).
        let datagrams = 1248 * received;
        let lost = i.lost_packets.unwrap_or(0);
        assert!(
            r.opened_bytes >= datagrams && r.opened_bytes <= datagrams + 1248 * lost + 64 * 1024,
            "{transform}: opened {} for {received} datagrams",
            r.opened_bytes
        );
        let (sender, receiver) = gateways.stop().expect("both gateways stop cleanly");
        assert_eq!(sender.transform, transform.name());
        assert!(receiver.inbound.opened_packets > 0);
        // The offloads were used: TCP super-packets from the TUN device, ESP sent in
        // GSO messages, received coalesced and split again.
        assert!(
            sender.tx.segmented_reads > 0,
            "{transform}: {:?}",
            sender.tx
        );
        assert!(sender.tx.gso_datagrams > 0, "{transform}: {:?}", sender.tx);
        assert!(
            receiver.rx.gro_datagrams > 0,
            "{transform}: {:?}",
            receiver.rx
        );
        assert!(receiver.rx.coalesced > 0, "{transform}: {:?}", receiver.rx);
    }
    lab.stop().expect("teardown");
}

#[test]
fn udp_datagrams_above_the_tunnel_mtu_cross_in_fragments_and_the_byte_check_counts_them() {
    let _turn = crate::turn!();
    let _serial = serial();
    let Some(lab) = lab("udp_fragments", &[]) else {
        return;
    };
    let mut gateways = pair(&lab, Transform::Aes128Gcm, "fragments", None);
    assert_eq!(gateways.sender.mtu, 1400);
    // 8000 bytes: 8008 bytes of UDP datagram, at MTU 1400 five fragments of 1376
    // and one of 1128, each with its IPv4 header. A rate well below the tunnel's
    // (nothing lost), high enough that 100 bytes a datagram exceed the control
    // connection's allowance.
    let mut client = lab.client(topology::INNER_RECEIVER, Protocol::Udp, 2);
    client.length_bytes = Some(8000);
    client.rate_bits_per_sec = Some(200e6);
    let run = measured_run(&client, &mut gateways, lab.names(), None).expect("a UDP run");
    let (r, i) = (&run.receiver, &run.iperf);
    let received = i.received_bytes_total / 8000;
    assert!(received > 5_000, "{i:?}");
    // Nearly nothing lost at this rate; a busy 2-vCPU guest lost 24 of 6,248 once
    // (0.38 %), so a lost datagram is allowed, and the bounds below take its
    // fragments: some of them may have crossed the gateway before the rest were lost.
    let lost = i.lost_packets.unwrap_or(0);
    assert!(lost * 100 <= i.packets.unwrap_or(0), "{i:?}");
    assert!(run.byte_check.ok, "{:?}", run.byte_check);
    let per_datagram = analysis::udp_datagram_inner_bytes(8000, 1400);
    assert_eq!(per_datagram, 8008 + 6 * 20);
    // The kernel cut each datagram into 6 packets, as the check assumes; beyond
    // them only the control connection's few packets (and a lost datagram's
    // fragments) crossed.
    assert!(
        r.opened_packets >= 6 * received && r.opened_packets <= 6 * (received + lost) + 64,
        "opened {} packets for {received} datagrams, {lost} lost",
        r.opened_packets
    );
    assert!(
        r.opened_bytes >= per_datagram * received
            && r.opened_bytes <= per_datagram * (received + lost) + 64 * 1024,
        "opened {} bytes for {received} datagrams, {lost} lost",
        r.opened_bytes
    );
    // With 28 bytes of headers per datagram (the old check) the bytes do not add
    // up: above even its upper bound.
    assert!(
        r.opened_bytes > 8028 * i.packets.unwrap_or(0) + analysis::CONTROL_ALLOWANCE,
        "{:?}",
        run.byte_check
    );
    gateways.stop().expect("both gateways stop cleanly");
    lab.stop().expect("teardown");
}

/// The drops of a run by side and reason, the non-zero ones, for a failure message.
fn drops_by_reason(sender: &GatewayRun, receiver: &GatewayRun) -> String {
    [("sender", sender), ("receiver", receiver)]
        .iter()
        .map(|(side, g)| {
            let reasons: Vec<String> = g
                .drops
                .iter()
                .filter(|(_, &n)| n > 0)
                .map(|(reason, n)| format!("{reason} {n}"))
                .collect();
            format!("{side} [{}]", reasons.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The names of a process's threads, from `/proc/PID/task/*/comm`.
fn thread_names(pid: u32) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("reading the gateway's tasks")
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .collect();
    names.sort();
    names
}

/// Asserts a gateway's threads include every one of `expected`, by name.
fn assert_has_threads(names: &[String], expected: &[&str], transform: Transform) {
    for e in expected {
        assert!(
            names.iter().any(|n| n == e),
            "{transform}: no {e} thread in {names:?}"
        );
    }
}

#[test]
fn gateways_run_the_workers_asked_for_and_keep_one_flow_in_order() {
    let _turn = crate::turn!();
    let _serial = serial();
    let Some(lab) = lab("gateways_run_the_workers_asked_for", &[]) else {
        return;
    };
    for transform in [Transform::ChaCha20Poly1305, Transform::Aes128Gcm] {
        let mut gateways = pair_with(
            &lab,
            transform,
            &format!("threads/{transform}"),
            None,
            None,
            3,
        );
        // The kernel's own list of each gateway's threads: both pipelines with
        // three workers each, besides the reader threads and the main thread.
        for pid in [gateways.sender.pid(), gateways.receiver.pid()] {
            let names = thread_names(pid);
            assert_has_threads(
                &names,
                &[
                    "tun->udp", "seal/0", "seal/1", "seal/2", "seal-out", "udp->tun", "open/0",
                    "open/1", "open/2", "open-out",
                ],
                transform,
            );
            assert_eq!(names.iter().filter(|n| n.starts_with("seal/")).count(), 3);
            assert_eq!(names.len(), 11, "{transform}: {names:?}");
        }

        let tcp = lab.client(topology::INNER_RECEIVER, Protocol::Tcp, 2);
        let run = measured_run(&tcp, &mut gateways, lab.names(), None).expect("a TCP run");
        let (s, r, i) = (&run.sender, &run.receiver, &run.iperf);
        assert!(i.received_bytes_total > 1_000_000, "{transform}: {i:?}");
        assert!(run.byte_check.ok, "{transform} tcp: {:?}", run.byte_check);
        assert_eq!(
            s.drops_total() + r.drops_total(),
            0,
            "{transform} tcp drops: {}",
            drops_by_reason(s, r)
        );
        assert!(
            s.sealed_packets.abs_diff(r.opened_packets) <= 4,
            "{transform}: {s:?} {r:?}"
        );
        // Every worker's CPU is in the run's figures, and the data went through them.
        for (gateway, pool) in [(s, "seal/"), (r, "open/")] {
            let workers: Vec<_> = gateway
                .threads
                .iter()
                .filter(|t| t.name.starts_with(pool))
                .collect();
            assert_eq!(workers.len(), 3, "{transform}: {:?}", gateway.threads);
            assert!(
                workers.iter().any(|t| t.cpu_cores_used > 0.01),
                "{transform}: {:?}",
                gateway.threads
            );
        }

        // One UDP flow through both pipelines: iperf3 sees its datagrams in order.
        let run = udp_run(&lab, &mut gateways, 2, 50e6);
        let (s, r, i) = (&run.sender, &run.receiver, &run.iperf);
        assert!(received_datagrams(i) > 5_000, "{transform} udp: {i:?}");
        assert!(run.byte_check.ok, "{transform} udp: {:?}", run.byte_check);
        assert_eq!(
            s.drops_total() + r.drops_total(),
            0,
            "{transform} udp drops: {}",
            drops_by_reason(s, r)
        );
        assert_eq!(i.out_of_order, Some(0), "{transform}: datagrams reordered");
        assert!(analysis::unaccounted(r).is_none(), "{transform}: {r:?}");
        gateways.stop().expect("both gateways stop cleanly");
    }
    lab.stop().expect("teardown");
}

#[test]
fn a_gateway_on_one_core_takes_both_directions_on_one_thread_and_keeps_order() {
    let _turn = crate::turn!();
    let _serial = serial();
    let Some(lab) = lab("a_gateway_on_one_core_takes_both_directions", &[]) else {
        return;
    };
    for transform in [Transform::ChaCha20Poly1305, Transform::Aes256Sha256] {
        let mut gateways = pair_placed(
            &lab,
            transform,
            &format!("one-thread/{transform}"),
            None,
            None,
            1,
            Some(one_core_each()),
        );
        for pid in [gateways.sender.pid(), gateways.receiver.pid()] {
            let names = thread_names(pid);
            // The main thread, the one taking both directions and its spare.
            assert_eq!(names.len(), 3, "{transform}: {names:?}");
            assert_has_threads(
                &names,
                &["tun<->udp", cipherbench::tunnel::gateway::SPARE_NAME],
                transform,
            );
        }
        // TCP both ways at once (data one way, acknowledgements the other), every
        // byte accounted for and every ESP packet opened.
        let tcp = lab.client(topology::INNER_RECEIVER, Protocol::Tcp, 2);
        let run = measured_run(&tcp, &mut gateways, lab.names(), None).expect("a TCP run");
        let (s, r, i) = (&run.sender, &run.receiver, &run.iperf);
        assert!(i.received_bytes_total > 1_000_000, "{transform}: {i:?}");
        assert!(run.byte_check.ok, "{transform} tcp: {:?}", run.byte_check);
        assert_eq!(
            s.drops_total() + r.drops_total(),
            0,
            "{transform} tcp drops: {}",
            drops_by_reason(s, r)
        );
        assert!(
            s.opened_packets > 0,
            "{transform}: no acknowledgement came back"
        );
        // Both threads are in the figures, and the one taking both directions
        // did the work (the spare only stands in while it waits for its core).
        for g in [s, r] {
            assert_eq!(g.threads.len(), 2, "{transform}: {:?}", g.threads);
            assert!(
                g.threads
                    .iter()
                    .any(|t| t.name == "tun<->udp" && t.cpu_cores_used > 0.01),
                "{transform}: {:?}",
                g.threads
            );
        }
        let run = udp_run(&lab, &mut gateways, 2, 50e6);
        let (r, i) = (&run.receiver, &run.iperf);
        assert!(received_datagrams(i) > 5_000, "{transform} udp: {i:?}");
        assert!(run.byte_check.ok, "{transform} udp: {:?}", run.byte_check);
        assert_eq!(i.out_of_order, Some(0), "{transform}: datagrams reordered");
        assert!(analysis::unaccounted(r).is_none(), "{transform}: {r:?}");
        gateways.stop().expect("both gateways stop cleanly");
    }
    lab.stop().expect("teardown");
}

/// A shell busy loop pinned to one core, at the priority of everything else, for as
/// long as this lives: another program wanting the gateway's core.
struct BusyLoop(std::process::Child);

impl BusyLoop {
    fn on(cpu: usize) -> BusyLoop {
        let child = Command::new("taskset")
            .args(["-c", &cpu.to_string(), "sh", "-c", "while :; do :; done"])
            .stdin(Stdio::null())
            .spawn()
            .expect("starting a busy loop (taskset)");
        BusyLoop(child)
    }
}

impl Drop for BusyLoop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_one_core_gateway_that_waits_for_its_core_splits_and_the_run_records_when() {
    let _turn = crate::turn!();
    let _serial = serial();
    let Some(lab) = lab(
        "a_one_core_gateway_that_waits_for_its_core_splits",
        &["taskset"],
    ) else {
        return;
    };
    let (sender_cpus, receiver_cpus) = one_core_each();
    let mut gateways = pair_placed(
        &lab,
        Transform::ChaCha20Poly1305,
        "split",
        None,
        None,
        1,
        Some((sender_cpus.clone(), receiver_cpus)),
    );
    // The sending gateway's core shared with a busy loop of equal weight: its
    // `tun<->udp` thread, busy with TCP, waits for the core about half the time,
    // over the quarter at which it leaves the socket's side to its spare. Idle
    // before iperf3 starts, it waits for nothing, so it splits during the run.
    let busy = BusyLoop::on(sender_cpus[0]);
    let tcp = lab.client(topology::INNER_RECEIVER, Protocol::Tcp, 3);
    let run = measured_run(&tcp, &mut gateways, lab.names(), None).expect("a TCP run");
    drop(busy);
    let s = &run.sender;
    let split = s.split.unwrap_or_else(|| {
        panic!(
            "the sender did not split beside a busy loop: {:?}",
            s.threads
        )
    });
    assert!(
        split.during_run() && split.at_seconds < s.seconds,
        "split at {} s of a {} s run",
        split.at_seconds,
        s.seconds
    );
    assert!(
        split.wait_share > 0.25 && split.wait_share <= 1.0,
        "waited {}",
        split.wait_share
    );
    assert!(run.byte_check.ok, "{:?}", run.byte_check);
    assert!(s.opened_packets > 0, "no acknowledgement came back");
    // For good: the next run had two threads from its start, and says so with the
    // same split (before it, by about the first run's length).
    let tcp = lab.client(topology::INNER_RECEIVER, Protocol::Tcp, 1);
    let again = measured_run(&tcp, &mut gateways, lab.names(), None).expect("a TCP run");
    let later = again.sender.split.expect("the split is kept in later runs");
    assert!(!later.during_run(), "{later:?}");
    assert_eq!(later.wait_share, split.wait_share);
    assert!(
        later.at_seconds < -(s.seconds - split.at_seconds),
        "{later:?} after {split:?}"
    );
    assert!(again.byte_check.ok, "{:?}", again.byte_check);
    gateways.stop().expect("both gateways stop cleanly");
    lab.stop().expect("teardown");
}

/// Captures ESP-in-UDP on the receiver's veth into a classic pcap file while
/// `traffic` runs; returns when `count` frames are in or the capture's deadline
/// passes.
fn capture(lab: &Lab, file: &Path, count: usize, traffic: impl FnOnce()) {
    let mut dumpcap = Spawn::new("ip")
        .args([
            "netns",
            "exec",
            &lab.names().receiver_ns,
            "dumpcap",
            "-q",
            "-P",
        ])
        .args([
            "-i",
            topology::VETH,
            "-f",
            "udp port 4500",
            "-c",
            &count.to_string(),
        ])
        .args(["-a", "duration:20", "-w"])
        .args([file.as_os_str()])
        .start()
        .expect("starting dumpcap");
    wait_until("dumpcap capturing", Duration::from_secs(10), || {
        Ok(dumpcap.stderr_tail().contains("Capturing on"))
    })
    .expect("dumpcap starts");
    traffic();
    let status = dumpcap.wait(Duration::from_secs(25)).expect("dumpcap ends");
    assert!(status.success(), "dumpcap: {}", dumpcap.stderr_tail());
}

/// tshark's SA table entry for one direction.
fn esp_sa(src: &str, dst: &str, spi: u32, transform: Transform, keymat: &[u8]) -> String {
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let (encryption, key, auth, auth_key) = match transform {
        Transform::Aes128Gcm | Transform::Aes256Gcm => (
            "AES-GCM with 16 octet ICV [RFC4106]",
            format!("0x{}", hex(keymat)),
            "NULL",
            String::new(),
        ),
        Transform::Aes256Sha256 => (
            "AES-CBC [RFC3602]",
            format!("0x{}", hex(&keymat[..32])),
            "HMAC-SHA-256-128 [RFC4868]",
            format!("0x{}", hex(&keymat[32..])),
        ),
        other => panic!("tshark cannot check {other}"),
    };
    format!("uat:esp_sa:\"IPv4\",\"{src}\",\"{dst}\",\"0x{spi:08x}\",\"{encryption}\",\"{key}\",\"{auth}\",\"{auth_key}\"")
}

/// Runs tshark over a capture with the run's SAs; returns (spi, icv_good) per frame.
fn tshark_icv(
    file: &Path,
    transform: Transform,
    label: &str,
    wrong_key: bool,
) -> Vec<(String, bool)> {
    let sas = derive_sa_pair(&SECRET, label, transform, Role::Initiator).unwrap();
    let mut out_key = sas.outbound.keymat.expose().to_vec();
    if wrong_key {
        out_key[0] ^= 1;
    }
    let args = vec![
        "-r".to_string(),
        file.display().to_string(),
        "-o".into(),
        "esp.enable_encryption_decode:TRUE".into(),
        "-o".into(),
        "esp.enable_authentication_check:TRUE".into(),
        "-o".into(),
        esp_sa(
            topology::UNDERLAY_SENDER,
            topology::UNDERLAY_RECEIVER,
            sas.outbound.spi,
            transform,
            &out_key,
        ),
        "-o".into(),
        esp_sa(
            topology::UNDERLAY_RECEIVER,
            topology::UNDERLAY_SENDER,
            sas.inbound.spi,
            transform,
            sas.inbound.keymat.expose(),
        ),
        "-T".into(),
        "fields".into(),
        "-e".into(),
        "esp.spi".into(),
        "-e".into(),
        "esp.icv_good".into(),
    ];
    let out = Spawn::new("tshark")
        .args(&args)
        .output(Duration::from_secs(60))
        .expect("running tshark")
        .success("tshark")
        .expect("tshark reads the capture");
    out.stdout
        .lines()
        .map(|l| {
            let mut f = l.split('\t');
            let spi = f.next().unwrap_or("").to_string();
            let good = matches!(f.next(), Some("1") | Some("True"));
            (spi, good)
        })
        .collect()
}

#[test]
fn tshark_verifies_the_icv_of_every_esp_frame() {
    let _turn = crate::turn!();
    let _serial = serial();
    let Some(lab) = wire_lab(
        "tshark_verifies_the_icv_of_every_esp_frame",
        &["tshark", "dumpcap"],
    ) else {
        return;
    };
    for transform in [
        Transform::Aes128Gcm,
        Transform::Aes256Gcm,
        Transform::Aes256Sha256,
    ] {
        let label = format!("wire/{transform}");
        // One core each, as on 2 cores by default: both directions on one thread
        // (the other tests on the wire check the two-thread data path).
        let mut gateways = pair_placed(
            &lab,
            transform,
            &label,
            None,
            None,
            1,
            Some(one_core_each()),
        );
        let file = lab.names().dir.join(format!("{transform}.pcap"));
        capture(&lab, &file, 1500, || {
            udp_run(&lab, &mut gateways, 1, 5e6);
            // TCP too: offloaded segments are split before sealing, so they must
            // look like any other ESP packet on the wire.
            let tcp = lab.client(topology::INNER_RECEIVER, Protocol::Tcp, 1);
            measured_run(&tcp, &mut gateways, lab.names(), None).expect("tcp");
        });
        let frames = tshark_icv(&file, transform, &label, false);
        assert!(
            frames.len() >= 1000,
            "{transform}: only {} frames",
            frames.len()
        );
        let bad: Vec<_> = frames.iter().filter(|(_, good)| !good).collect();
        assert!(
            bad.is_empty(),
            "{transform}: {} of {} frames without a good ICV: {:?}",
            bad.len(),
            frames.len(),
            &bad[..bad.len().min(5)]
        );
        // The veth segmented every GSO send: one ESP packet per frame, as captured,
        // and nothing arrived coalesced.
        let (_, receiver) = gateways.stop().expect("stop");
        assert_eq!(receiver.rx.gro_datagrams, 0);
        // The check can fail: with one key bit flipped, the data direction's frames
        // no longer verify.
        let wrong = tshark_icv(&file, transform, &label, true);
        assert!(
            wrong.iter().any(|(_, good)| !good),
            "{transform}: a wrong key still verified"
        );
    }
    lab.stop().expect("teardown");
}

/// The UDP payloads of a classic pcap file of Ethernet frames (pcap(5)).
fn pcap_udp_payloads(file: &Path) -> Vec<Vec<u8>> {
    let data = std::fs::read(file).expect("reading the capture");
    assert_eq!(
        &data[..4],
        &[0xd4, 0xc3, 0xb2, 0xa1],
        "a little-endian classic pcap"
    );
    let mut at = 24;
    let mut payloads = Vec::new();
    while at + 16 <= data.len() {
        let incl = u32::from_le_bytes(data[at + 8..at + 12].try_into().unwrap()) as usize;
        let frame = &data[at + 16..at + 16 + incl];
        at += 16 + incl;
        // Ethernet (14) / IPv4 (IHL) / UDP (8).
        if frame.len() < 14 + 20 + 8 || frame[12..14] != [0x08, 0x00] {
            continue;
        }
        let ip = &frame[14..];
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        if ip[9] != 17 || total > ip.len() {
            continue;
        }
        payloads.push(ip[ihl + 8..total].to_vec());
    }
    payloads
}

#[test]
fn chacha20_poly1305_frames_open_with_an_independent_implementation() {
    let _turn = crate::turn!();
    let _serial = serial();
    // tshark here has no ChaCha20-Poly1305; RustCrypto's chacha20poly1305 (a pure
    // Rust implementation, not OpenSSL) opens the captured frames instead.
    let Some(lab) = wire_lab("chacha20_poly1305_frames_open_independently", &["dumpcap"]) else {
        return;
    };
    let transform = Transform::ChaCha20Poly1305;
    let label = "wire/chacha";
    let mut gateways = pair(&lab, transform, label, None);
    let file = lab.names().dir.join("chacha.pcap");
    capture(&lab, &file, 1000, || {
        udp_run(&lab, &mut gateways, 1, 20e6);
    });
    let sas = derive_sa_pair(&SECRET, label, transform, Role::Initiator).unwrap();
    let mut opened = 0;
    for sa in [&sas.outbound, &sas.inbound] {
        let keymat = sa.keymat.expose();
        let cipher = ChaCha20Poly1305::new_from_slice(&keymat[..32]).unwrap();
        for esp in pcap_udp_payloads(&file) {
            if esp.len() < 8 + 8 + 16 || esp[..4] != sa.spi.to_be_bytes() {
                continue;
            }
            // RFC 7634 §2: nonce = salt (4) || IV (8); AAD = SPI || sequence (§2.1,
            // no ESN); the ICV is the 16-byte tag.
            let mut nonce = [0u8; 12];
            nonce[..4].copy_from_slice(&keymat[32..36]);
            nonce[4..].copy_from_slice(&esp[8..16]);
            let (body, tag) = esp[16..].split_at(esp.len() - 16 - 16);
            let mut plain = body.to_vec();
            cipher
                .decrypt_in_place_detached(
                    Nonce::from_slice(&nonce),
                    &esp[..8],
                    &mut plain,
                    Tag::from_slice(tag),
                )
                .unwrap_or_else(|_| panic!("frame with sequence {:?} did not open", &esp[4..8]));
            // RFC 4303 §2.4-2.6: padding 1, 2, 3..., pad length, next header 4
            // (IPv4), and an inner IPv4 packet whose length field fits.
            let n = plain.len();
            let pad = usize::from(plain[n - 2]);
            assert_eq!(plain[n - 1], 4, "next header");
            assert!((1..=pad).all(|i| usize::from(plain[n - 2 - pad + i - 1]) == i));
            let inner = &plain[..n - 2 - pad];
            assert_eq!(inner[0] >> 4, 4);
            assert_eq!(
                usize::from(u16::from_be_bytes([inner[2], inner[3]])),
                inner.len()
            );
            opened += 1;
        }
    }
    assert!(opened >= 900, "only {opened} frames opened");
    gateways.stop().expect("stop");
    lab.stop().expect("teardown");
}

/// One ESP frame as tshark dissected it with an SA table.
#[derive(Debug)]
struct Dissected {
    /// The inner IP destination, when tshark decrypted the frame: IPv4 (iperf3's
    /// traffic) or IPv6 (what the kernel sends on any new link: router
    /// solicitations, link-local).
    inner_destination: Option<String>,
    /// An inner TCP or UDP segment to or from iperf3's port.
    inner_tcp_iperf: bool,
    inner_udp_iperf: bool,
    /// tshark verified the ICV.
    icv_good: bool,
}

/// Runs tshark over a capture with `esp_sa` as its whole ESP SA table: a fresh
/// configuration directory (`XDG_CONFIG_HOME`) holding only that file.
fn tshark_with_esp_sa(file: &Path, esp_sa: &Path, config: &Path) -> Vec<Dissected> {
    let dir = config.join("wireshark");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(esp_sa, dir.join("esp_sa")).unwrap();
    let out = Spawn::new("tshark")
        .env("XDG_CONFIG_HOME", config)
        .args(["-r"])
        .args([file.as_os_str()])
        .args([
            "-o",
            "esp.enable_encryption_decode:TRUE",
            "-o",
            "esp.enable_authentication_check:TRUE",
            "-Y",
            "esp",
            "-T",
            "fields",
            "-E",
            "occurrence=a",
            "-e",
            "ip.dst",
            "-e",
            "tcp.port",
            "-e",
            "udp.port",
            "-e",
            "esp.icv_good",
            "-e",
            "ipv6.dst",
        ])
        .output(Duration::from_secs(60))
        .expect("running tshark")
        .success("tshark")
        .expect("tshark reads the capture");
    // Wireshark refuses a whole table at a record it cannot parse: say so loudly.
    assert!(
        !out.stderr.contains("Error loading table"),
        "tshark refused the key log: {}",
        out.stderr
    );
    let iperf = cipherbench::tunnel::iperf::PORT.to_string();
    out.stdout
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let field = |i: usize| f.get(i).copied().unwrap_or("");
            // Several occurrences of a field are joined with commas.
            let ips: Vec<&str> = field(0).split(',').collect();
            let udp: Vec<&str> = field(2).split(',').filter(|p| !p.is_empty()).collect();
            Dissected {
                // The outer header first, a decrypted inner IPv4 one second.
                inner_destination: ips
                    .get(1)
                    .or(Some(&field(4)).filter(|v6| !v6.is_empty()))
                    .map(|s| s.to_string()),
                inner_tcp_iperf: field(1).split(',').any(|p| p == iperf),
                // The outer UDP is 4500 <-> 4500; an inner one follows it.
                inner_udp_iperf: udp.len() > 2 && udp[2..].contains(&iperf.as_str()),
                icv_good: matches!(field(3), "1" | "True"),
            }
        })
        .collect()
}

/// The key log's records for one transform: (SPI, cipher key) of every record,
/// commented out or not.
fn keylog_records(text: &str) -> Vec<(u32, Vec<u8>)> {
    text.lines()
        .map(|l| l.trim_start_matches("# "))
        .filter(|l| l.starts_with("\"IPv4\""))
        .map(|l| {
            let fields: Vec<&str> = l.split(',').map(|f| f.trim_matches('"')).collect();
            assert_eq!(fields.len(), 8, "{l}");
            let spi = u32::from_str_radix(fields[3].trim_start_matches("0x"), 16).unwrap();
            let key = fields[5].trim_start_matches("0x");
            let key = (0..key.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&key[i..i + 2], 16).unwrap())
                .collect();
            (spi, key)
        })
        .collect()
}

#[test]
fn tshark_decrypts_the_tunnel_with_nothing_but_the_esp_keylog() {
    let _turn = crate::turn!();
    let _serial = serial();
    let Some(lab) = wire_lab(
        "tshark_decrypts_the_tunnel_with_nothing_but_the_esp_keylog",
        &["tshark", "dumpcap"],
    ) else {
        return;
    };
    let dir = lab.names().dir.clone();
    let empty = dir.join("empty-esp_sa");
    std::fs::write(&empty, "").unwrap();
    for transform in Transform::ALL {
        let keylog = dir.join(format!("{transform}.keys"));
        assert!(keylog::prepare(&keylog).unwrap(), "created");
        let mut gateways = pair_logging(
            &lab,
            transform,
            &format!("keylog/{transform}"),
            None,
            Some(&keylog),
        );
        let file = dir.join(format!("keylog-{transform}.pcap"));
        let mut tcp_run = None;
        capture(&lab, &file, 3000, || {
            udp_run(&lab, &mut gateways, 1, 5e6);
            let tcp = lab.client(topology::INNER_RECEIVER, Protocol::Tcp, 1);
            tcp_run = Some(measured_run(&tcp, &mut gateways, lab.names(), None).expect("tcp"));
        });
        gateways.stop().expect("stop");
        let mode = std::fs::metadata(&keylog).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{transform}: the key log is private");
        let text = std::fs::read_to_string(&keylog).unwrap();
        let records = keylog_records(&text);
        assert_eq!(records.len(), 2, "{transform}: one record per SA:\n{text}");

        if !cipherbench_esp::keylog::wireshark_4_0_decrypts(transform) {
            // This tshark has no ChaCha20-Poly1305 for ESP: the record is a comment,
            // the table still loads, and an independent implementation (RustCrypto)
            // opens the frames with the key and salt from the key log alone.
            assert!(text
                .lines()
                .filter(|l| l.contains("IPv4"))
                .all(|l| l.starts_with('#')));
            tshark_with_esp_sa(&file, &keylog, &dir.join(format!("{transform}-config")));
            let mut opened = 0;
            for esp in pcap_udp_payloads(&file) {
                let spi = esp.get(..4).unwrap_or_default();
                let Some((_, keymat)) = records.iter().find(|(s, _)| spi == s.to_be_bytes()) else {
                    continue;
                };
                let cipher = ChaCha20Poly1305::new_from_slice(&keymat[..32]).unwrap();
                let mut nonce = [0u8; 12];
                nonce[..4].copy_from_slice(&keymat[32..36]);
                nonce[4..].copy_from_slice(&esp[8..16]);
                let (body, tag) = esp[16..].split_at(esp.len() - 32);
                let mut plain = body.to_vec();
                cipher
                    .decrypt_in_place_detached(
                        Nonce::from_slice(&nonce),
                        &esp[..8],
                        &mut plain,
                        Tag::from_slice(tag),
                    )
                    .expect("a frame opens with the logged key");
                opened += 1;
            }
            assert!(opened >= 1000, "{transform}: only {opened} frames opened");
            eprintln!("{transform}: RustCrypto opened {opened} ESP frames with the key log's commented record");
            continue;
        }

        let frames = tshark_with_esp_sa(&file, &keylog, &dir.join(format!("{transform}-config")));
        assert!(
            frames.len() >= 1000,
            "{transform}: only {} ESP frames",
            frames.len()
        );
        let undecrypted: Vec<_> = frames
            .iter()
            .filter(|f| f.inner_destination.is_none())
            .collect();
        assert!(
            undecrypted.is_empty(),
            "{transform}: {} of {} frames not decrypted: {:?}",
            undecrypted.len(),
            frames.len(),
            &undecrypted[..undecrypted.len().min(3)]
        );
        // Inside: the TUN addresses, or the kernel's IPv6 link-local chatter.
        let inner = |f: &Dissected| f.inner_destination.clone().unwrap_or_default();
        assert!(
            frames.iter().all(|f| {
                let to = inner(f);
                to == topology::INNER_RECEIVER
                    || to == topology::INNER_SENDER
                    || to.starts_with("fe80:")
                    || to.starts_with("ff02:")
            }),
            "{transform}: {:?}",
            frames
                .iter()
                .map(inner)
                .collect::<std::collections::BTreeSet<_>>()
        );
        // iperf3's own traffic, inside: UDP datagrams and TCP segments on its port.
        let udp = frames.iter().filter(|f| f.inner_udp_iperf).count();
        let tcp = frames.iter().filter(|f| f.inner_tcp_iperf).count();
        assert!(
            udp >= 300 && tcp >= 300,
            "{transform}: {udp} UDP, {tcp} TCP inner iperf3 frames"
        );
        if transform != Transform::Null && !frames.iter().all(|f| f.icv_good) {
            // Seen once in a clean-clone CI (aes256-gcm), not reproduced since. Say
            // whether the packets themselves were bad (our own opener refuses them
            // too, and the receiving gateway counted drops) or only tshark's check
            // failed, and keep the capture and the key log for a look.
            let label = format!("keylog/{transform}");
            let sas = derive_sa_pair(&SECRET, &label, transform, Role::Initiator).unwrap();
            let (mut ours_total, mut ours_refused) = (0, Vec::new());
            for esp in pcap_udp_payloads(&file) {
                for params in [&sas.outbound, &sas.inbound] {
                    if esp.len() < 8 || esp[..4] != params.spi.to_be_bytes() {
                        continue;
                    }
                    ours_total += 1;
                    let mut sa = cipherbench_esp::InboundSa::new(params.clone()).unwrap();
                    let mut out = vec![0u8; esp.len()];
                    if let Err(reason) = sa.open(&esp, &mut out) {
                        ours_refused.push((esp[4..8].to_vec(), esp.len(), reason));
                    }
                }
            }
            let kept = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("icv-{transform}"));
            let _ = std::fs::create_dir_all(&kept);
            let _ = std::fs::copy(&file, kept.join("capture.pcap"));
            let _ = std::fs::copy(&keylog, kept.join("esp_sa"));
            let bad: Vec<_> = frames
                .iter()
                .enumerate()
                .filter(|(_, f)| !f.icv_good)
                .collect();
            panic!(
                "{transform}: tshark failed the ICV of {} of {} frames (first: {:?}); cipherbench-esp refuses {} of {ours_total} ESP frames of the capture (first: {:?}); TCP run drops: sender {:?}, receiver {:?}; capture and key log kept in {}",
                bad.len(),
                frames.len(),
                &bad[..bad.len().min(3)],
                ours_refused.len(),
                &ours_refused[..ours_refused.len().min(3)],
                tcp_run.as_ref().map(|r| &r.sender.drops),
                tcp_run.as_ref().map(|r| &r.receiver.drops),
                kept.display()
            );
        }
        eprintln!(
            "{transform}: tshark decrypted {} of {} ESP frames with the key log ({udp} iperf3 UDP, {tcp} iperf3 TCP inside)",
            frames.len() - undecrypted.len(),
            frames.len()
        );
        // The check can fail: without the key log, nothing decrypts.
        let blind = tshark_with_esp_sa(&file, &empty, &dir.join(format!("{transform}-blind")));
        assert_eq!(blind.len(), frames.len());
        assert!(
            blind.iter().all(|f| f.inner_destination.is_none()),
            "{transform}: decrypted without keys"
        );
    }
    lab.stop().expect("teardown");
}

fn nft(netns: &str, args: &[&str]) -> String {
    let mut full = vec!["netns", "exec", netns, "nft"];
    full.extend_from_slice(args);
    Spawn::new("ip")
        .args(&full)
        .output(Duration::from_secs(10))
        .unwrap()
        .success("nft")
        .unwrap()
        .stdout
}

#[test]
fn loss_on_the_underlay_is_counted_exactly_and_the_gateways_carry_on() {
    let _turn = crate::turn!();
    let _serial = serial();
    let Some(lab) = wire_lab("loss_on_the_underlay", &["nft"]) else {
        return;
    };
    let receiver_ns = lab.names().receiver_ns.clone();
    nft(&receiver_ns, &["add", "table", "ip", "cbtfault"]);
    nft(
        &receiver_ns,
        &[
            "add",
            "chain",
            "ip",
            "cbtfault",
            "in",
            "{ type filter hook input priority -300 ; }",
        ],
    );
    nft(
        &receiver_ns,
        &[
            "add", "rule", "ip", "cbtfault", "in", "udp", "dport", "4500", "numgen", "random",
            "mod", "100", "<", "5", "counter", "drop",
        ],
    );
    let mut gateways = pair(&lab, Transform::Aes128Gcm, "fault/loss", None);
    let dropped = || -> u64 {
        let json = nft(&receiver_ns, &["-j", "list", "table", "ip", "cbtfault"]);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v["nftables"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["rule"]["expr"].as_array())
            .flatten()
            .filter_map(|x| x["counter"]["packets"].as_u64())
            .sum()
    };
    let run = udp_run(&lab, &mut gateways, 2, 30e6);
    // Let the last packets (TCP's closing handshake) land, then compare totals
    // since the gateways started: the rule was there before them.
    let mut last = 0;
    wait_until("the tunnel to fall quiet", Duration::from_secs(10), || {
        let sent = gateways.sender.snapshot()?.tx.udp_packets;
        let quiet = sent == last;
        last = sent;
        std::thread::sleep(Duration::from_millis(200));
        Ok(quiet)
    })
    .unwrap();
    let (sender, receiver) = gateways.snapshot().unwrap();
    let injected = dropped();
    assert!(injected > 100, "numgen dropped only {injected}");
    // Exactly what nftables took is missing between the gateways, and nothing else.
    assert_eq!(
        sender.tx.udp_packets,
        receiver.rx.udp_packets + injected,
        "{:?} {:?}",
        sender.tx,
        receiver.rx
    );
    assert_eq!(receiver.inbound.opened_packets, receiver.rx.udp_packets);
    assert_eq!(receiver.inbound.drops.total(), 0);
    // iperf3 lost what was dropped of its datagrams (the rest were control packets).
    let lost = run.iperf.lost_packets.unwrap();
    assert!(
        lost > 0 && lost <= injected,
        "iperf3 lost {lost}, nft dropped {injected}"
    );
    // TCP gets through the lossy underlay too, and the gateways are still running.
    let tcp = lab.client(topology::INNER_RECEIVER, Protocol::Tcp, 1);
    let run = measured_run(&tcp, &mut gateways, lab.names(), None).unwrap();
    assert!(run.iperf.received_bytes_total > 100_000);
    assert!(run.iperf.retransmits_total.unwrap_or(0) > 0);
    gateways.stop().expect("both gateways survived");
    lab.stop().expect("teardown");
}

#[derive(Default, Debug, Clone, Copy)]
struct Injected {
    forwarded: u64,
    duplicates: u64,
    in_window_replays: u64,
    stale_replays: u64,
    forged: u64,
    truncated: u64,
    unknown_spi: u64,
    keepalives: u64,
    /// IKE behind the non-ESP marker (RFC 3948 §2.2), the bare marker included.
    ike: u64,
    /// Fewer than 4 bytes and not a keepalive, the empty datagram included.
    unclassifiable: u64,
    /// 4 to 7 bytes that are not the marker: an SPI but no whole ESP header.
    short_esp: u64,
    /// Noise behind an SPI no SA has.
    garbage: u64,
}

impl Injected {
    /// Every datagram the relay sent to the receiving gateway.
    fn sent(&self) -> u64 {
        self.forwarded
            + self.duplicates
            + self.in_window_replays
            + self.stale_replays
            + self.forged
            + self.truncated
            + self.unknown_spi
            + self.keepalives
            + self.ike
            + self.unclassifiable
            + self.short_esp
            + self.garbage
    }
}

/// A relay in the receiver's namespace between the sending gateway and the
/// receiving one: forwards every ESP datagram once, and around it injects exact
/// numbers of duplicates, replays (inside and beyond the 1024-packet window),
/// forgeries, truncations, an unknown SPI, and what else port 4500 may receive: NAT
/// keepalives, IKE behind the non-ESP marker, datagrams too short to classify (the
/// empty one too), short ESP headers and noise.
fn relay(
    netns: String,
    listen: SocketAddrV4,
    to: SocketAddrV4,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Injected> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        enter_netns(&netns).expect("joining the receiver's namespace");
        let socket = UdpSocket::bind(listen).expect("binding the relay");
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        ready_tx.send(()).unwrap();
        let mut history: Vec<Vec<u8>> = Vec::new();
        let mut n = Injected::default();
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            let Ok(len) = socket.recv(&mut buf) else {
                continue;
            };
            let d = buf[..len].to_vec();
            let i = history.len();
            if i % 25 == 7 {
                let mut forged = d.clone();
                let at = forged.len() / 2;
                forged[at] ^= 0x80;
                socket.send_to(&forged, to).unwrap();
                n.forged += 1;
            }
            socket.send_to(&d, to).unwrap();
            n.forwarded += 1;
            if i % 10 == 3 {
                socket.send_to(&d, to).unwrap();
                n.duplicates += 1;
            }
            if i % 50 == 11 && i >= 300 {
                socket.send_to(&history[i - 300], to).unwrap();
                n.in_window_replays += 1;
            }
            if i % 100 == 17 && i >= 1500 {
                socket.send_to(&history[i - 1500], to).unwrap();
                n.stale_replays += 1;
            }
            if i % 40 == 5 {
                socket.send_to(&d[..12], to).unwrap();
                n.truncated += 1;
            }
            if i % 200 == 9 {
                let mut other = d.clone();
                other[..4].copy_from_slice(&0x0bad_cafe_u32.to_be_bytes());
                socket.send_to(&other, to).unwrap();
                n.unknown_spi += 1;
                socket.send_to(&[0xff], to).unwrap();
                n.keepalives += 1;
            }
            if i % 150 == 20 {
                // An IKE_SA_INIT-sized message and the bare marker.
                let mut ike = vec![0u8; 4];
                ike.extend((0..300u32).map(|b| (b * 7 + i as u32) as u8));
                socket.send_to(&ike, to).unwrap();
                socket.send_to(&[0, 0, 0, 0], to).unwrap();
                n.ike += 2;
                for short in [&[][..], &[0x12], &[0xff, 0xff], &[0, 0, 0]] {
                    socket.send_to(short, to).unwrap();
                    n.unclassifiable += 1;
                }
                socket.send_to(&[9, 9, 9, 9, 9], to).unwrap();
                n.short_esp += 1;
                let noise: Vec<u8> = (0..64u32)
                    .map(|b| (b.wrapping_mul(2_654_435_761) >> 13) as u8 | 1)
                    .collect();
                socket.send_to(&noise, to).unwrap();
                n.garbage += 1;
            }
            history.push(d);
        }
        n
    });
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the relay is ready");
    handle
}

#[test]
fn every_datagram_sent_to_a_gateway_is_counted_once_by_outcome_and_none_delivered_twice() {
    let _turn = crate::turn!();
    let _serial = serial();
    let Some(lab) = lab("duplicated_replayed_and_forged_packets", &[]) else {
        return;
    };
    let relay_at: SocketAddrV4 = format!("{}:4501", topology::UNDERLAY_RECEIVER)
        .parse()
        .unwrap();
    let receiver_at: SocketAddrV4 = format!("{}:4500", topology::UNDERLAY_RECEIVER)
        .parse()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let relay = relay(
        lab.names().receiver_ns.clone(),
        relay_at,
        receiver_at,
        Arc::clone(&stop),
    );
    let mut gateways = pair(&lab, Transform::Aes256Gcm, "fault/replay", Some(relay_at));
    let run = udp_run(&lab, &mut gateways, 2, 20e6);
    // The closing packets have crossed the relay; stop it and count.
    stop.store(true, Ordering::Relaxed);
    let n = relay.join().expect("the relay");
    let after = gateways.receiver.snapshot().unwrap();
    let r = &run.receiver;
    assert!(n.forwarded > 3000 && n.stale_replays > 0, "{n:?}");
    let drops = |reason: &str| {
        after
            .inbound
            .drops
            .iter()
            .find(|(k, _)| k.name() == reason)
            .map_or(0, |(_, v)| v)
    };
    assert_eq!(
        drops("replayed"),
        n.duplicates + n.in_window_replays,
        "{n:?}"
    );
    assert_eq!(drops("too_old"), n.stale_replays, "{n:?}");
    assert_eq!(drops("authentication_failed"), n.forged, "{n:?}");
    assert_eq!(drops("truncated"), n.truncated + n.short_esp, "{n:?}");
    assert_eq!(drops("unknown_spi"), n.unknown_spi + n.garbage, "{n:?}");
    assert_eq!(drops("unclassifiable"), n.unclassifiable, "{n:?}");
    assert_eq!(after.inbound.nat_keepalives, n.keepalives);
    assert_eq!(after.inbound.non_esp, n.ike);
    // Every datagram the relay sent arrived (none dropped at the socket), and the
    // gateway's two counts agree: what its socket loop read, and the outcomes the
    // ESP core gave them, one each.
    assert!(
        n.ike > 0 && n.unclassifiable > 0 && n.keepalives > 0,
        "{n:?}"
    );
    assert_eq!(
        after.socket_drops, 0,
        "the exact counts need a lossless socket"
    );
    assert_eq!(after.rx.udp_packets, n.sent(), "{n:?} {:?}", after.rx);
    assert_eq!(after.inbound.received, n.sent(), "{:?}", after.inbound);
    assert_eq!(after.inbound.unaccounted(), 0, "{:?}", after.inbound);
    // The same identity over the measured run, as run.json carries it.
    assert!(r.nat_keepalives > 0 && r.non_esp > 0, "{r:?}");
    assert_eq!(r.unaccounted(), 0, "{r:?}");
    assert_eq!(analysis::unaccounted(r), None);
    // Every genuine datagram was opened exactly once: as many as were forwarded,
    // and iperf3 received every datagram it sent, once.
    assert_eq!(after.inbound.opened_packets, n.forwarded, "{n:?}");
    assert_eq!(run.iperf.lost_packets, Some(0));
    assert_eq!(received_datagrams(&run.iperf), run.iperf.packets.unwrap());
    assert!(r.opened_packets <= n.forwarded);
    assert!(run.byte_check.ok, "{:?}", run.byte_check);
    gateways
        .stop()
        .expect("the receiving gateway survived every bad packet");
    lab.stop().expect("teardown");
}

/// Our namespaces owned by `pid`, and whether its scratch directory exists.
fn leftovers(pid: u32) -> (Vec<String>, bool) {
    let namespaces: Vec<String> = topology::our_namespaces()
        .unwrap()
        .into_iter()
        .filter(|n| Names::owner(n).map(|o| o.0) == Some(pid))
        .collect();
    // The scratch directory is under the temp root (cipherbench::lifetime).
    let dir = std::fs::read_dir(cipherbench::lifetime::temp_root_path())
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| Names::owner(&e.file_name().to_string_lossy()).map(|o| o.0) == Some(pid));
    (namespaces, dir)
}

fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
    }
}

/// Pids of `__gateway` processes descended from `ancestor` (each runs under a
/// keeper, the runner's child).
fn gateway_children(ancestor: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|&pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let mut up = pid;
            let mut descended = false;
            for _ in 0..4 {
                match cipherbench::host::parent_of(up) {
                    Some(p) if p == ancestor => {
                        descended = true;
                        break;
                    }
                    Some(p) if p > 1 => up = p,
                    _ => break,
                }
            }
            descended
                && String::from_utf8_lossy(&cmd)
                    .split('\0')
                    .nth(1)
                    .is_some_and(|a| a == "__gateway")
        })
        .collect()
}

fn tunnel_command(extra: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args([
        "tunnel",
        "--preset",
        "tiny",
        "--transforms",
        "null",
        "--protocols",
        "tcp",
        "--no-save",
        "-q",
    ]);
    c.args(extra);
    c.stdout(Stdio::null()).stderr(Stdio::piped());
    c
}

/// Waits until the runner has both gateways up; returns their pids.
fn wait_for_gateways(child: &mut std::process::Child) -> Vec<u32> {
    let pid = child.id();
    let mut found = Vec::new();
    wait_until("the run's gateways", Duration::from_secs(30), || {
        if let Some(status) = child.try_wait()? {
            anyhow::bail!("the run ended early: {status}");
        }
        found = gateway_children(pid);
        Ok(found.len() == 2)
    })
    .unwrap();
    found
}

fn assert_nothing_left(pid: u32, gateways: &[u32], how: &str) {
    let (namespaces, dir) = leftovers(pid);
    assert!(
        namespaces.is_empty(),
        "{how}: namespaces left: {namespaces:?}"
    );
    assert!(!dir, "{how}: scratch directory left");
    wait_until("the gateways to be gone", Duration::from_secs(10), || {
        Ok(gateways.iter().all(|g| !alive(*g)))
    })
    .unwrap_or_else(|_| panic!("{how}: gateway processes left: {gateways:?}"));
}

#[test]
fn nothing_is_left_after_a_normal_run_an_error_sigint_or_sigkill_and_cleanup() {
    let _turn = crate::turn!();
    let _serial = serial();
    if let Err(e) = check_prerequisites() {
        eprintln!("skipping the cleanup test: {e:#}");
        return;
    }
    // Normal run.
    let mut child = tunnel_command(&["--seconds", "1"]).spawn().unwrap();
    let pid = child.id();
    let gateways = wait_for_gateways(&mut child);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_nothing_left(pid, &gateways, "normal run");

    // An error in the middle: a gateway dies under the runner.
    let mut child = tunnel_command(&["--seconds", "4"]).spawn().unwrap();
    let pid = child.id();
    let gateways = wait_for_gateways(&mut child);
    Command::new("kill")
        .args(["-KILL", &gateways[0].to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the run should fail when a gateway dies"
    );
    assert!(err.contains("gateway"), "{err}");
    assert_nothing_left(pid, &gateways, "error");

    // Ctrl-C.
    let mut child = tunnel_command(&["--seconds", "5"]).spawn().unwrap();
    let pid = child.id();
    let gateways = wait_for_gateways(&mut child);
    Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_nothing_left(pid, &gateways, "SIGINT");

    // SIGKILL: the gateways die with the runner (their keeper ends them); the
    // namespaces stay until `tunnel cleanup` (or the next run), which leaves live
    // runs alone.
    let mut child = tunnel_command(&["--seconds", "5"]).spawn().unwrap();
    let pid = child.id();
    let gateways = wait_for_gateways(&mut child);
    child.kill().unwrap();
    child.wait().unwrap();
    wait_until(
        "the gateways to die with the runner",
        Duration::from_secs(10),
        || Ok(gateways.iter().all(|g| !alive(*g))),
    )
    .unwrap();
    assert!(
        !leftovers(pid).0.is_empty(),
        "a SIGKILLed run cannot clean up after itself"
    );
    let out = Command::new(BIN)
        .args(["tunnel", "cleanup"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains(&format!("cbtun-{pid}-")), "{said}");
    assert_nothing_left(pid, &gateways, "SIGKILL + tunnel cleanup");
}

#[test]
fn more_gateway_workers_than_cpus_is_a_printed_note_and_a_long_pool_one_short_entry() {
    let _turn = crate::turn!();
    let _serial = serial();
    if let Err(e) = check_prerequisites() {
        eprintln!("skipping the gateway workers note test: {e:#}");
        return;
    }
    // More workers than the machine has CPUs, so more than any gateway gets, and
    // more than the 8 a thread line lists one by one.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = (cpus + 1).clamp(9, 64).to_string();
    let out = tunnel_command(&["--seconds", "1", "--gateway-threads", &workers])
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    let notes: Vec<&str> = stderr
        .lines()
        .filter(|l| {
            l.starts_with(&format!(
                "note: {workers} crypto workers per direction in each gateway, more than its CPUs ("
            ))
        })
        .collect();
    assert_eq!(notes.len(), 1, "{stderr}");
    if cpus < 4 {
        // iperf3 shares the gateways' CPUs: said where the run's notes are.
        assert!(
            stderr
                .lines()
                .any(|l| l.starts_with("note: cannot give a disjoint placement")),
            "{stderr}"
        );
    }
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("null accel tcp: sender"))
        .unwrap_or_else(|| panic!("no thread line in\n{stdout}"));
    assert!(
        line.contains(&format!("seal {workers} workers ")) && line.len() < 400,
        "{line}"
    );
}

#[test]
fn the_esp_keylog_flag_logs_every_sa_privately_and_appends_across_runs() {
    let _turn = crate::turn!();
    let _serial = serial();
    if let Err(e) = check_prerequisites() {
        eprintln!("skipping the key log flag test: {e:#}");
        return;
    }
    let dir = std::env::temp_dir().join(format!("cb-keylog-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let keys = dir.join("esp.keys");
    let records = |text: &str| -> Vec<Vec<String>> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                l.split(',')
                    .map(|f| f.trim_matches('"').to_string())
                    .collect()
            })
            .collect()
    };
    for (run, expected) in [(1, 2), (2, 4)] {
        let out = tunnel_command(&["--seconds", "1", "--esp-keylog"])
            .arg(&keys)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "run {run}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mode = std::fs::metadata(&keys).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let text = std::fs::read_to_string(&keys).unwrap();
        assert!(text.starts_with("# cipherbench ESP key log") && text.contains("SECRET"));
        let all = records(&text);
        // The null transform, one pair of gateways per run: one SA each way.
        assert_eq!(all.len(), expected, "run {run}:\n{text}");
        for pair in all.chunks(2) {
            let ways: Vec<(&str, &str)> = pair
                .iter()
                .map(|r| (r[1].as_str(), r[2].as_str()))
                .collect();
            assert!(ways.contains(&(topology::UNDERLAY_SENDER, topology::UNDERLAY_RECEIVER)));
            assert!(ways.contains(&(topology::UNDERLAY_RECEIVER, topology::UNDERLAY_SENDER)));
            assert_ne!(pair[0][3], pair[1][3], "two SPIs");
            assert!(
                pair.iter().all(|r| r.len() == 8 && r[4] == "NULL"),
                "{pair:?}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The upstream OpenSSL build under `target/openssl-upstream/` (`make test` makes it).
fn upstream_openssl() -> std::path::PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let base = target.join("openssl-upstream");
    let mut builds: Vec<_> = std::fs::read_dir(&base)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    builds.retain(|p| p.join("lib/libcrypto.so.3").is_file());
    builds.sort();
    builds
        .pop()
        .map(|p| p.canonicalize().unwrap())
        .unwrap_or_else(|| {
            panic!(
                "no upstream OpenSSL build in {}: run `make openssl-upstream` first; `make test` does",
                base.display()
            )
        })
}

#[test]
fn both_gateways_load_the_library_asked_for_and_iperf3_is_recorded() {
    let _turn = crate::turn!();
    let _serial = serial();
    if let Err(e) = check_prerequisites() {
        eprintln!("skipping the --openssl tunnel test: {e:#}");
        return;
    }
    let up = upstream_openssl();
    let dir = std::env::temp_dir().join(format!("cb-tunnel-openssl-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(BIN)
        .args([
            "-q",
            "tunnel",
            "--preset",
            "tiny",
            "--transforms",
            "aes128-gcm",
            "--variants",
            "accel",
            "--protocols",
            "tcp",
            "--seconds",
            "1",
            // Two rounds: the variants alternate (asserted below).
            "--repeats",
            "2",
            "--no-underlay",
            "--openssl",
        ])
        .arg(format!("system,{}", up.display()))
        .arg("--results")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let record = cipherbench_model::RunRecord::from_json(
        &std::fs::read_to_string(dir.join("run.json")).unwrap(),
    )
    .unwrap();
    let env = &record.environment;
    let tag = up.file_name().unwrap().to_string_lossy().into_owned();
    let variants: Vec<&str> = record
        .tunnel
        .as_ref()
        .unwrap()
        .points
        .iter()
        .map(|p| p.variant.as_str())
        .collect();
    assert_eq!(variants, ["accel".to_string(), format!("accel@{tag}")]);
    // The two variants ran in interleaved rounds, A B then B A, each run's round and
    // place in the measuring order in run.json.
    let mut runs: Vec<(usize, usize, &str)> = record
        .tunnel
        .as_ref()
        .unwrap()
        .points
        .iter()
        .flat_map(|p| {
            p.runs
                .iter()
                .map(move |r| (r.sequence.unwrap(), r.round.unwrap(), p.variant.as_str()))
        })
        .collect();
    runs.sort();
    let accel_tag = format!("accel@{tag}");
    assert_eq!(
        runs.iter()
            .map(|(_, round, v)| (*round, *v))
            .collect::<Vec<_>>(),
        [
            (0, "accel"),
            (0, accel_tag.as_str()),
            (1, accel_tag.as_str()),
            (1, "accel")
        ],
        "{runs:?}"
    );
    for (asked, version) in [
        ("system", &env.libraries[0].version),
        (&*up.display().to_string(), &env.libraries[1].version),
    ] {
        let gateways: Vec<_> = env
            .loaded
            .iter()
            .filter(|p| p.asked == asked && p.part.starts_with("ESP gateway"))
            .collect();
        assert_eq!(gateways.len(), 2, "{asked}: {:?}", env.loaded);
        for g in gateways {
            assert!(g.checked);
            assert_eq!(g.version.as_ref(), Some(version), "{g:?}");
            let inside = Path::new(g.libcrypto.as_deref().unwrap()).starts_with(&up);
            assert_eq!(inside, asked != "system", "{g:?}");
        }
    }
    let iperf3 = env
        .loaded
        .iter()
        .find(|p| p.part.starts_with("iperf3 server"))
        .expect("iperf3 recorded");
    assert!(!iperf3.checked && iperf3.asked == "system", "{iperf3:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The upstream OpenSSL 3.6.3 of scripts/build-openssl.sh (`make test` builds it).
fn upstream_lib() -> std::path::PathBuf {
    let lib = Path::new(BIN)
        .parent()
        .and_then(Path::parent)
        .expect("the target directory")
        .join("openssl-upstream/3.6.3/lib");
    assert!(
        lib.join("libcrypto.so.3").exists(),
        "the upstream OpenSSL 3.6.3 this test needs is missing at {}: run scripts/build-openssl.sh (make test builds it)",
        lib.display()
    );
    lib
}

#[test]
fn the_gateways_measure_the_effect_probes_and_each_variant_is_judged_by_them() {
    let _turn = crate::turn!();
    let _serial = serial();
    if let Err(e) = check_prerequisites() {
        eprintln!("skipping the gateway probe test: {e:#}");
        return;
    }
    let dir = std::env::temp_dir().join(format!("cb-gateway-probes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // Upstream 3.6.3 takes the VAES path: noaesni must mask it, the old mask must not.
    let out = Command::new(BIN)
        .env("LD_LIBRARY_PATH", upstream_lib())
        .env_remove("OPENSSL_ia32cap")
        .args([
            "tunnel",
            "--preset",
            "tiny",
            "--transforms",
            "aes128-gcm",
            "--protocols",
            "tcp",
            "--seconds",
            "1",
            "--variants",
            "accel,noaesni,ia32cap:~0x200000200000000:~0x0",
            "-q",
            "--results",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.join("run.json")).unwrap();
    let record = cipherbench_model::RunRecord::from_json(&text).unwrap();
    let tunnel = record.tunnel.expect("tunnel results");
    let names: Vec<&str> = tunnel.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        names,
        ["accel", "noaesni", "ia32cap:~0x200000200000000:~0x0"]
    );
    for v in &tunnel.variants {
        let probes = v.probes.as_ref().expect("the gateway's probes");
        assert_eq!(probes.measured_in, "tunnel gateway");
        assert!(
            probes.library_version.starts_with("OpenSSL 3.6.3"),
            "{probes:?}"
        );
    }
    let by_name = |n: &str| tunnel.variants.iter().find(|v| v.name == n).unwrap();
    assert!(by_name("accel").took_effect);
    assert!(
        by_name("noaesni").took_effect,
        "{}",
        by_name("noaesni").explanation()
    );
    let old = by_name("ia32cap:~0x200000200000000:~0x0");
    assert!(!old.took_effect);
    assert!(
        old.explanation().contains("the mask that works here"),
        "{}",
        old.explanation()
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("ia32cap:~0x200000200000000:~0x0!"),
        "{stdout}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn without_root_the_tunnel_says_why_and_run_skips_the_layer() {
    let _turn = crate::turn!();
    let _serial = serial();
    let as_root = check_prerequisites().is_ok();
    // As root, drop to nobody with setpriv (util-linux) to see what a user sees.
    let user = |args: &[&str]| -> Command {
        let mut c = if as_root {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", BIN]);
            c
        } else {
            Command::new(BIN)
        };
        c.args(args);
        c
    };
    if as_root && Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipping the non-root test: setpriv is not installed");
        return;
    }
    let out = user(&["tunnel", "--preset", "tiny", "--no-save"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("needs root"), "{err}");
    assert_eq!(err.lines().count(), 1, "one clear line: {err}");

    // The main job goes on without the layer and records why.
    let dir = std::env::temp_dir().join(format!("cb-noroot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let results = dir.join("results");
    if as_root {
        Command::new("chown")
            .args(["nobody", &dir.display().to_string()])
            .status()
            .unwrap();
    }
    let out = user(&[
        "run",
        "--preset",
        "tiny",
        "-q",
        "--results",
        &results.display().to_string(),
    ])
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("tunnel skipped") && err.contains("needs root"),
        "{err}"
    );
    let record = std::fs::read_to_string(results.join("run.json")).unwrap();
    let record: serde_json::Value = serde_json::from_str(&record).unwrap();
    assert!(record["speed"].is_object(), "the other layers still ran");
    assert!(record.get("tunnel").is_none());
    assert!(record["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w["layer"] == "tunnel" && w["kind"] == "layer_failed"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 32's cost at a fixed load: `tunnel --rate 400mbit` runs TCP at iperf3
/// `-b`, every run carries about that load with its byte check agreeing, and the
/// table gives both gateways' cores per Gbit/s by variant. Masking AES-NI makes the
/// same load cost aes128-gcm more cores (the software AES is measured, in this
/// run, at least 3x slower), so the saving printed is positive.
#[test]
fn at_a_fixed_tcp_load_the_table_gives_the_gateways_cost_and_what_aes_ni_saves() {
    let _turn = crate::turn!();
    let _serial = serial();
    if let Err(e) = check_prerequisites() {
        eprintln!("skipping the fixed-load cost test: {e:#}");
        return;
    }
    let rate = 400e6;
    let out = Command::new(BIN)
        .args(["tunnel", "--preset", "tiny", "--transforms", "aes128-gcm"])
        .args(["--variants", "accel,noaesni", "--protocols", "tcp"])
        .args(["--seconds", "3", "--rate", "400mbit", "--no-underlay"])
        .args(["--no-save", "--json"])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    let t: cipherbench_model::tunnel::TunnelResults = serde_json::from_str(&stdout).unwrap();
    assert_eq!(t.config.tcp_rate_bits_per_sec, Some(400_000_000));
    assert_eq!(t.points.len(), 2, "{stdout}");
    for p in &t.points {
        for r in &p.runs {
            let got = r.iperf.receiver_bits_per_sec;
            assert!(
                (0.9 * rate..1.1 * rate).contains(&got),
                "{} {}: {got} bit/s at -b {rate}",
                p.transform,
                p.variant
            );
            assert_eq!(r.iperf.target_bits_per_sec, Some(rate), "{:?}", r.iperf);
            assert!(r.byte_check.ok, "{:?}", r.byte_check);
        }
    }
    let cost = |v: &str| {
        cipherbench_report::tunnel::cores_per_gbit(
            t.point("aes128-gcm", v, cipherbench_model::tunnel::Protocol::Tcp)
                .unwrap(),
        )
        .unwrap()
    };
    let (accel, noaesni) = (cost("accel"), cost("noaesni"));
    assert!(
        noaesni > accel,
        "noaesni {noaesni} <= accel {accel} cores per Gbit/s"
    );
    let table = cipherbench_report::tunnel::text(&t);
    assert!(
        table.contains("gateway cores per Gbit/s (both gateways, TCP at a fixed 400 Mbit/s offered, iperf3 -b): aes128-gcm accel "),
        "{table}"
    );
    assert!(
        table.contains("cores AES-NI saves at 400 Mbit/s (noaesni's cost less accel's, both gateways): aes128-gcm 0."),
        "{table}"
    );
}
