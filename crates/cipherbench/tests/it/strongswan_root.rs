//! `tunnel --stack strongswan` end to end, as root, with real charons
//! (kernel-libipsec), swanctl, namespaces and iperf3. Each test prints why it skips
//! where it cannot run (not root, strongSwan not installed), so `cargo test` passes
//! anywhere.
//!
//! What they prove: every crypto backend negotiates the asked-for ESP transform,
//! registered by the expected plugin, carries iperf3 and its CHILD_SA counters agree
//! with iperf3's bytes; an IKE failure and a charon that does not come up are one
//! line each and leave no charon and no files; a missing strongSwan is one line; and
//! nothing is left (charons, namespaces with their TUN devices and routes, config
//! files, a pid file in the host's /run) after a normal run, Ctrl-C, or a charon
//! killed during the run.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use cipherbench::supervisor::wait_until;
use cipherbench::tunnel::strongswan::config::Backend;
use cipherbench::tunnel::strongswan::{find_tools, CharonPair, PairOptions};
use cipherbench::tunnel::topology::{self, Names, TopologyOptions};
use cipherbench::tunnel::{check_prerequisites, Lab};
use cipherbench::variant::Variant;
use cipherbench_esp::Transform;
use cipherbench_model::tunnel::Protocol;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_cipherbench");

/// One test at a time: they share the machine's cores, and the CLI tests look for
/// the charons of their own run.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    crate::turns::alone()
}

fn runnable(test: &str) -> bool {
    if let Err(e) = check_prerequisites() {
        eprintln!("skipping {test}: {e:#}");
        return false;
    }
    if let Err(e) = find_tools(None) {
        eprintln!("skipping {test}: {e:#}");
        return false;
    }
    true
}

fn lab() -> Lab {
    Lab::start(&TopologyOptions {
        underlay_rate_bits_per_sec: None,
        mtu: 1400,
        segment_on_the_wire: false,
    })
    .expect("building the lab")
}

fn options(lab: &Lab, backend: Backend, transform: Transform, tag: &str) -> PairOptions {
    PairOptions {
        program: BIN.into(),
        tools: find_tools(None).unwrap(),
        backend,
        transform,
        dir: lab.names().dir.join(format!("strongswan-{tag}")),
        sender_cpus: vec![],
        receiver_cpus: vec![],
        psk_hex: ("00112233".repeat(8), "00112233".repeat(8)),
    }
}

fn charons() -> Vec<u32> {
    processes_named("charon", None)
}

/// Pids of processes whose `comm` is `name` (and whose parent is `parent`).
/// A process's parent, from /proc/PID/stat.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit(')').next()?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Whether `ancestor` is `pid`'s parent or further up (children are started under
/// keepers, so a run's charon is its grandchild).
fn descends_from(pid: u32, ancestor: u32) -> bool {
    let mut at = pid;
    for _ in 0..8 {
        match parent_of(at) {
            Some(p) if p == ancestor => return true,
            Some(p) if p > 1 => at = p,
            _ => return false,
        }
    }
    false
}

fn processes_named(name: &str, ancestor: Option<u32>) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let comm = stat
                .split_once('(')
                .and_then(|(_, r)| r.rsplit_once(')'))
                .map(|(c, _)| c.to_string())
                .unwrap_or_default();
            let rest = stat.rsplit(')').next().unwrap_or("");
            let state = rest.split_whitespace().next().unwrap_or("");
            comm == name && state != "Z" && ancestor.is_none_or(|a| descends_from(*pid, a))
        })
        .collect()
}

#[test]
fn every_backend_negotiates_its_transform_and_carries_iperf3_with_matching_counters() {
    let _turn = crate::turn!();
    let _serial = serial();
    if !runnable("the strongSwan backend test") {
        return;
    }
    let lab = lab();
    for (backend, transform, negotiated, plugin) in [
        (
            Backend::Openssl,
            Transform::Aes256Sha256,
            "ESP:AES_CBC-256/HMAC_SHA2_256_128",
            "AES_CBC[openssl]",
        ),
        (
            Backend::Aesni,
            Transform::Aes128Gcm,
            "ESP:AES_GCM_16-128",
            "AES_GCM_16[aesni]",
        ),
        (
            Backend::C,
            Transform::ChaCha20Poly1305,
            "ESP:CHACHA20_POLY1305",
            "CHACHA20_POLY1305[chapoly]",
        ),
    ] {
        let what = format!("{} {}", backend.name(), transform.name());
        let options = options(&lab, backend, transform, backend.name());
        let accel = Variant::accel();
        let mut pair = CharonPair::start(lab.names(), &options, (&accel, None), (&accel, None))
            .unwrap_or_else(|e| panic!("{what}: {e:#}"));
        assert!(
            pair.negotiated.starts_with(negotiated),
            "{what}: {}",
            pair.negotiated
        );
        assert!(
            pair.served_by.iter().any(|s| s == plugin),
            "{what}: served by {:?}",
            pair.served_by
        );
        // The files live in the run's scratch directory, the PSK private.
        let swanctl = options.dir.join("sender/swanctl.conf");
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&swanctl).unwrap().permissions(),
        );
        assert_eq!(mode & 0o077, 0, "{what}: swanctl.conf is {mode:o}");
        for protocol in [Protocol::Tcp, Protocol::Udp] {
            let mut client = lab.client(topology::INNER_RECEIVER, protocol, 1);
            client.rate_bits_per_sec = Some(50e6);
            let run = cipherbench::tunnel::strongswan::measured_run(&client, &mut pair, None)
                .unwrap_or_else(|e| panic!("{what} {protocol:?}: {e:#}"));
            assert!(run.iperf.received_bytes_total > 0, "{what} {protocol:?}");
            assert!(
                run.byte_check.ok,
                "{what} {protocol:?}: {:?}",
                run.byte_check
            );
            // Every packet that reached the receiver's veth was opened or dropped
            // at the receiving charon's socket, but for the odd NAT keepalive, IKE
            // message, ARP or neighbour discovery packet, which the veth counts too.
            let (s, r) = (&run.sender, &run.receiver);
            assert!(s.sealed_packets > 0 && r.opened_packets > 0, "{what}");
            let accounted = r.opened_packets + r.socket_drops + r.link_drops;
            assert!(
                accounted <= r.esp_packets_received && r.esp_packets_received - accounted <= 10,
                "{what} {protocol:?}: {s:?} {r:?}"
            );
            assert!(
                s.tun_reads >= s.sealed_packets && s.tun_reads - s.sealed_packets <= 3,
                "{what}: one seal per packet read from TUN: {s:?}"
            );
            assert!(s.cpu_cores_used > 0.0 && r.cpu_cores_used > 0.0, "{what}");
        }
        let pids = vec![pair.sender.pid(), pair.receiver.pid()];
        pair.stop().unwrap();
        assert!(!options.dir.exists(), "{what}: files left");
        for pid in pids {
            assert!(!charons().contains(&pid), "{what}: charon {pid} left");
        }
    }
    lab.stop().unwrap();
}

#[test]
fn an_ike_failure_is_one_line_and_leaves_no_charon_and_no_files() {
    let _turn = crate::turn!();
    let _serial = serial();
    if !runnable("the IKE failure test") {
        return;
    }
    let lab = lab();
    let mut options = options(&lab, Backend::Openssl, Transform::Aes128Gcm, "badpsk");
    options.psk_hex.1 = "ff".repeat(32);
    let before = charons();
    let accel = Variant::accel();
    let e = match CharonPair::start(lab.names(), &options, (&accel, None), (&accel, None)) {
        Ok(_) => panic!("IKE succeeded with different PSKs"),
        Err(e) => format!("{e:#}"),
    };
    assert!(e.starts_with("IKE between the two charons failed"), "{e}");
    assert!(!e.contains('\n'), "one line: {e}");
    assert!(!options.dir.join("sender").exists() && !options.dir.join("receiver").exists());
    wait_until("the charons to be gone", Duration::from_secs(10), || {
        Ok(charons().iter().all(|p| before.contains(p)))
    })
    .expect("no charon left");
    lab.stop().unwrap();
}

/// Our namespaces and scratch directory owned by `pid`.
fn leftovers(pid: u32) -> (Vec<String>, bool) {
    let namespaces: Vec<String> = topology::our_namespaces()
        .unwrap()
        .into_iter()
        .filter(|n| Names::owner(n).map(|o| o.0) == Some(pid))
        .collect();
    let dir = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .any(|e| Names::owner(&e.file_name().to_string_lossy()).map(|o| o.0) == Some(pid));
    (namespaces, dir)
}

fn tunnel(extra: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args([
        "tunnel",
        "--preset",
        "tiny",
        "--stack",
        "strongswan",
        "--transforms",
        "aes128-gcm",
        "--variants",
        "accel",
        "--no-save",
        "-q",
    ]);
    c.args(extra);
    c.stdout(Stdio::null()).stderr(Stdio::piped());
    c
}

/// The lines of stderr that are not the run's notes (`note: ...`, said as the run
/// starts: on a small machine, that iperf3 shares the stacks' CPUs): an error must
/// be one of them.
fn error_lines(stderr: &str) -> usize {
    stderr
        .trim()
        .lines()
        .filter(|l| !l.starts_with("note: "))
        .count()
}

fn assert_nothing_left(pid: u32, daemons: &[u32], pid_file_before: bool, how: &str) {
    wait_until("the charons to be gone", Duration::from_secs(10), || {
        Ok(daemons.iter().all(|d| !charons().contains(d)))
    })
    .unwrap_or_else(|_| panic!("{how}: charons left: {daemons:?}"));
    let (namespaces, dir) = leftovers(pid);
    assert!(
        namespaces.is_empty(),
        "{how}: namespaces left: {namespaces:?}"
    );
    assert!(!dir, "{how}: scratch directory (configuration, PSK) left");
    assert_eq!(
        Path::new("/run/charon.pid").exists(),
        pid_file_before,
        "{how}: the host's /run/charon.pid was touched"
    );
}

/// Waits until the runner has both charons up; returns their pids.
fn wait_for_charons(child: &mut std::process::Child) -> Vec<u32> {
    let pid = child.id();
    let mut found = Vec::new();
    wait_until("the run's charons", Duration::from_secs(60), || {
        if let Some(status) = child.try_wait()? {
            anyhow::bail!("the run ended early: {status}");
        }
        found = processes_named("charon", Some(pid));
        Ok(found.len() == 2)
    })
    .unwrap();
    found
}

#[test]
fn nothing_is_left_after_a_normal_run_ctrl_c_or_a_killed_charon() {
    let _turn = crate::turn!();
    let _serial = serial();
    if !runnable("the strongSwan cleanup test") {
        return;
    }
    let pid_file_before = Path::new("/run/charon.pid").exists();

    // Normal run.
    let mut child = tunnel(&["--protocols", "tcp"]).spawn().unwrap();
    let pid = child.id();
    let daemons = wait_for_charons(&mut child);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_nothing_left(pid, &daemons, pid_file_before, "normal run");

    // Ctrl-C during the measurement.
    let mut child = tunnel(&["--protocols", "tcp", "--seconds", "8"])
        .spawn()
        .unwrap();
    let pid = child.id();
    let daemons = wait_for_charons(&mut child);
    std::thread::sleep(Duration::from_secs(2));
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
    assert_nothing_left(pid, &daemons, pid_file_before, "SIGINT");

    // A charon killed during the run: one line naming it, a failed run.
    let mut child = tunnel(&["--protocols", "tcp", "--seconds", "8"])
        .spawn()
        .unwrap();
    let pid = child.id();
    let daemons = wait_for_charons(&mut child);
    std::thread::sleep(Duration::from_secs(2));
    Command::new("kill")
        .args(["-KILL", &daemons[0].to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the run should fail when a charon dies"
    );
    assert!(err.contains("charon"), "{err}");
    assert_eq!(error_lines(&err), 1, "one line: {err}");
    assert_nothing_left(pid, &daemons, pid_file_before, "killed charon");
}

#[test]
fn a_missing_strongswan_or_a_charon_that_does_not_come_up_is_one_line() {
    let _turn = crate::turn!();
    let _serial = serial();
    if !runnable("the missing-charon test") {
        return;
    }
    for (charon, expect) in [
        (
            "/nonexistent/charon",
            "--charon /nonexistent/charon: no such executable",
        ),
        ("/bin/false", "charon exited at start"),
    ] {
        let child = tunnel(&["--protocols", "tcp", "--charon", charon])
            .spawn()
            .unwrap();
        let pid = child.id();
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{charon}");
        assert!(err.contains(expect), "{charon}: {err}");
        assert_eq!(error_lines(&err), 1, "{charon}: one line: {err}");
        let (namespaces, dir) = leftovers(pid);
        assert!(
            namespaces.is_empty() && !dir,
            "{charon}: {namespaces:?} {dir}"
        );
    }
}
