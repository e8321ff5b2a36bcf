//! Beyond one machine, end to end on the project's own test hosts ([`hosts`]):
//! network namespaces with a real sshd each, reached with OpenSSH and a config of
//! the test's own. Needs root and openssh-server; each test prints why it skips
//! where it cannot run.
//!
//! What they prove: the hosts are real SSH hosts and leave nothing; `cipherbench
//! agent` is launched over SSH on each, its version, clock offset and environment are
//! checked and recorded; a wrong launch or an unreachable host is one clear line; a
//! sweep split over three agents merges their histograms exactly and measures what one
//! generator does.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]
#![allow(
    clippy::too_many_lines,
    reason = "each end-to-end test reads top to bottom as one scenario, setup to teardown"
)]

use crate::hosts::{self, Hosts};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_cipherbench");

/// One test at a time: they share two cores and a bridge each.
fn serial() -> MutexGuard<'static, ()> {
    crate::turns::alone()
}

fn skip(test: &str) -> bool {
    if let Some(why) = hosts::unavailable() {
        eprintln!("skipping {test}: {why}");
        return true;
    }
    false
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `n` test hosts for `test` and their SSH config, one test at a time: the lock is
/// dropped after the hosts (bind the tuple in this order). None, having said why,
/// where they cannot run.
fn start_hosts(test: &str, n: usize) -> Option<(MutexGuard<'static, ()>, Hosts, String)> {
    if skip(test) {
        return None;
    }
    let serial = serial();
    let hosts = Hosts::start(n);
    let config = hosts.ssh_config().display().to_string();
    Some((serial, hosts, config))
}

/// The output of a run that succeeded; if it did not, the message says how it
/// ended (an exit code, or the signal that killed it) and whether it said why, with
/// its stderr and stdout.
fn succeeded(out: &Output) -> (String, String) {
    let (stdout, stderr) = text(out);
    assert!(
        out.status.success(),
        "{}\n--- its stderr ---\n{stderr}\n--- its stdout ---\n{stdout}",
        how_it_ended(out)
    );
    (stdout, stderr)
}

/// How a cipherbench that failed ended, and whether it said why in its one line.
fn how_it_ended(out: &Output) -> String {
    use std::os::unix::process::ExitStatusExt;
    let (_, stderr) = text(out);
    let said = stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("cipherbench: "));
    match (out.status.signal(), said) {
        (Some(signal), _) => format!(
            "cipherbench was killed by signal {signal} ({}): it could not say why; something outside it sent the signal (the OOM killer? `dmesg` says)",
            out.status
        ),
        (None, Some(line)) => format!("cipherbench failed ({}), saying: {line}", out.status),
        (None, None) => format!(
            "cipherbench failed ({}) WITHOUT its one error line (a bug: every failure must say what failed)",
            out.status
        ),
    }
}

/// The stderr of a run that failed.
fn failed(out: &Output) -> String {
    let (_, stderr) = text(out);
    assert!(!out.status.success(), "{stderr}");
    stderr
}

/// The stderr of a run that failed saying one line.
fn failed_in_one_line(out: &Output) -> String {
    let stderr = failed(out);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    stderr
}

/// Ctrl-C to a child of ours.
fn ctrl_c(child: &Child) {
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
}

/// Calls `check` every `every` until it gives a value; after `limit`, fails with
/// what it last said instead.
fn poll<T>(limit: Duration, every: Duration, mut check: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        match check() {
            Ok(v) => return v,
            Err(why) => assert!(Instant::now() < deadline, "{why}"),
        }
        std::thread::sleep(every);
    }
}

/// Waits up to 20 s for `left` to find nothing; fails naming what it still finds.
fn assert_none_left_within_20s(mut left: impl FnMut() -> Vec<String>) {
    poll(Duration::from_secs(20), Duration::from_millis(100), || {
        let left = left();
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("left behind: {left:?}"))
        }
    })
}

/// The processes in network namespace `netns`: their pids and command lines (NUL
/// between the arguments).
fn processes_in(netns: &str) -> Vec<(String, String)> {
    let pids = Command::new("ip")
        .args(["netns", "pids", netns])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    pids.split_whitespace()
        .map(|pid| {
            let cmd = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            (pid.to_string(), cmd)
        })
        .collect()
}

/// A results directory's run.json.
fn run_json(dir: &Path) -> serde_json::Value {
    read_run(dir).unwrap_or_else(|| panic!("no readable run.json in {}", dir.display()))
}

fn read_run(dir: &Path) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).ok()?).ok()
}

/// Puts `new` where `old` stands in `args`.
fn replace_arg<'a>(args: &mut [&'a str], old: &str, new: &'a str) {
    let i = args
        .iter()
        .position(|a| *a == old)
        .unwrap_or_else(|| panic!("no {old} in {args:?}"));
    args[i] = new;
}

#[test]
fn test_hosts_are_separate_ssh_hosts_and_leave_nothing() {
    let _turn = crate::turn!();
    let Some((_s, hosts, config)) =
        start_hosts("test_hosts_are_separate_ssh_hosts_and_leave_nothing", 2)
    else {
        return;
    };
    let (tag, dir) = (hosts.tag().to_string(), hosts.dir.clone());
    for (i, h) in hosts.hosts.iter().enumerate() {
        // Over ssh, each host has its own address and no other's.
        let addrs = hosts
            .ssh(i, "ip -4 -o addr show dev eth0")
            .expect("ssh to a test host");
        assert!(addrs.contains(&h.addr.to_string()), "{}: {addrs}", h.alias);
        let other = &hosts.hosts[1 - i].addr.to_string();
        assert!(!addrs.contains(other.as_str()), "{addrs}");
        // SSH_CONNECTION names this machine's bridge address as the client.
        let conn = hosts.ssh(i, "echo $SSH_CONNECTION").unwrap();
        assert!(conn.starts_with(&hosts.gateway.to_string()), "{conn}");
    }
    // The hosts reach each other over the bridge.
    let hop = hosts.exec(0, &["ssh", "-F", &config, "h1", "echo $SSH_CONNECTION"]);
    let hop = hop.expect("ssh from h0 to h1");
    assert!(hop.starts_with(&hosts.hosts[0].addr.to_string()), "{hop}");
    drop(hosts);
    assert_eq!(Hosts::leftovers_of(&tag, &dir), Vec::<String>::new());
}

#[test]
fn test_hosts_are_removed_when_a_test_fails() {
    let _turn = crate::turn!();
    if skip("test_hosts_are_removed_when_a_test_fails") {
        return;
    }
    let _s = serial();
    let seen = std::sync::Arc::new(Mutex::new(None));
    let seen2 = seen.clone();
    let r = std::thread::spawn(move || {
        let hosts = Hosts::start(1);
        *seen2.lock().unwrap() = Some((hosts.tag().to_string(), hosts.dir.clone()));
        panic!("a failing test");
    })
    .join();
    assert!(r.is_err());
    let (tag, dir) = seen.lock().unwrap().clone().expect("the hosts were built");
    assert_eq!(Hosts::leftovers_of(&tag, &dir), Vec::<String>::new());
}

/// cipherbench with `args` and `TMPDIR` in the harness's scratch directory (so what
/// it leaves can be seen), and that directory.
fn coordinator_command(hosts: &Hosts, args: &[&str]) -> (Command, PathBuf) {
    let tmp = hosts.dir.join("coordinator-tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut command = Command::new(BIN);
    command.args(args).env("TMPDIR", &tmp).stdin(Stdio::null());
    (command, tmp)
}

/// Runs [`coordinator_command`]: its output, and its TMPDIR.
fn coordinator(hosts: &Hosts, args: &[&str]) -> (Output, PathBuf) {
    let (mut command, tmp) = coordinator_command(hosts, args);
    (command.output().expect("running cipherbench"), tmp)
}

/// Starts [`coordinator_command`] with its output piped: the child, and its TMPDIR.
fn spawn_coordinator(hosts: &Hosts, args: &[&str]) -> (Child, PathBuf) {
    let (mut command, tmp) = coordinator_command(hosts, args);
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (child, tmp)
}

/// `cipherbench agent` processes still running on the test hosts.
fn agents_left(hosts: &Hosts) -> Vec<String> {
    let mut left = Vec::new();
    for h in &hosts.hosts {
        for (pid, cmd) in processes_in(&h.netns) {
            if cmd.contains("agent") && cmd.contains("cipherbench") {
                left.push(format!("{}: {pid} {}", h.alias, cmd.replace('\0', " ")));
            }
        }
    }
    left
}

/// Nothing of the coordinator's left: no agent on any host, no process working in
/// its TMPDIR (nginx), and that directory empty.
fn assert_nothing_left(hosts: &Hosts, tmp: &Path) {
    assert_none_left_within_20s(|| {
        let mut left = agents_left(hosts);
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            if let Ok(cwd) = std::fs::read_link(entry.path().join("cwd")) {
                if cwd.starts_with(tmp) {
                    left.push(format!(
                        "process {:?} in {}",
                        entry.file_name(),
                        cwd.display()
                    ));
                }
            }
        }
        left.extend(
            std::fs::read_dir(tmp)
                .map(|d| {
                    d.flatten()
                        .map(|e| format!("file {}", e.path().display()))
                        .collect()
                })
                .unwrap_or_else(|_| Vec::<String>::new()),
        );
        left
    });
}

/// `tls MODE` from the agents of the `--agents` list `hosts`, reached with the SSH
/// config `config`, each running this very binary.
fn agents_args<'a>(mode: &'a str, hosts: &'a str, config: &'a str) -> Vec<&'a str> {
    vec![
        "tls",
        mode,
        "--agents",
        hosts,
        "--ssh-config",
        config,
        "--agent-path",
        BIN,
    ]
}

/// The one suite and variant these tests measure, at `size`.
fn gcm_accel(size: &str) -> [&str; 6] {
    [
        "--suites",
        "AES128-GCM-SHA256",
        "--variants",
        "accel",
        "--sizes",
        size,
    ]
}

/// A sweep from the agents `hosts` (one point, 6 clients, a 2 s window), its results
/// in `results`.
fn sweep_args<'a>(hosts: &'a str, config: &'a str, results: &'a str) -> Vec<&'a str> {
    let mut args = agents_args("sweep", hosts, config);
    args.extend(gcm_accel("64KiB"));
    args.extend([
        "--concurrency",
        "6",
        "--warmup",
        "200ms",
        "--window",
        "2s",
        "--results",
        results,
    ]);
    args
}

#[test]
fn a_sweep_from_three_agents_records_each_and_merges_their_windows() {
    let _turn = crate::turn!();
    let test = "a_sweep_from_three_agents_records_each_and_merges_their_windows";
    let Some((_s, hosts, config)) = start_hosts(test, 3) else {
        return;
    };
    let results = hosts.dir.join("results");
    let results_s = results.display().to_string();
    let list = hosts.list(3);
    // 1 MiB responses: read by sample on the agents too.
    let mut args = sweep_args(&list, &config, &results_s);
    for a in &mut args {
        if *a == "64KiB" {
            *a = "1MiB";
        }
    }
    let (out, tmp) = coordinator(&hosts, &args);
    succeeded(&out);
    let run = run_json(&results);
    let tls = &run["tls"];
    // Each agent checked and recorded: the same version, its own host, a clock
    // offset measured (these hosts share one kernel clock: within the round trip).
    let agents = tls["agents"].as_array().expect("agents recorded");
    assert_eq!(agents.len(), 3);
    for a in agents {
        assert_eq!(a["version"], env!("CARGO_PKG_VERSION"));
        // A namespace of this machine: the same kernel, recorded as such.
        assert_eq!(a["same_kernel"], true, "{a}");
        let offset = a["clock_offset_ns"].as_i64().unwrap().unsigned_abs();
        let rtt = a["clock_rtt_ns"].as_u64().unwrap();
        assert!(
            rtt > 0 && offset <= rtt,
            "offset {offset} ns, round trip {rtt} ns"
        );
    }
    let point = &tls["sweep"]["points"][0];
    assert_eq!(point["valid"], true, "{point}");
    // The concurrency split 2/2/2, each share recorded, started together.
    let shares = point["agents"].as_array().expect("shares recorded");
    let names: Vec<&str> = shares.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["h0", "h1", "h2"]);
    for s in shares {
        assert_eq!(s["concurrency"], 2);
        // Each agent watched its host's noise on the CPUs its generator used.
        let noise = &s["noise"];
        assert!(noise["window_ns"].as_u64().unwrap() > 0, "{s}");
        assert!(!noise["cpus"].as_array().unwrap().is_empty(), "{s}");
        assert!(s["requests"].as_u64().unwrap() > 0, "{s}");
        assert!(s["start_skew_ns"].as_u64().unwrap() < 50_000_000, "{s}");
    }
    // The merge adds: requests and the latency histogram's count are the agents' sum,
    // and nginx counted every request the agents sent.
    let sum: u64 = shares.iter().map(|s| s["requests"].as_u64().unwrap()).sum();
    assert_eq!(point["requests"].as_u64().unwrap(), sum);
    assert!(point["latency"]["count"].as_u64().unwrap() >= sum);
    if let Some(n) = point["server_requests"].as_u64() {
        assert_eq!(n, point["requests_sent"].as_u64().unwrap(), "{point}");
    }
    // The agents read by sample, opening a share and comparing it with the file
    // (the content key went with the load), and their counts add up in the point.
    let v = &point["verification"];
    assert_eq!(v["sampled"], true, "{v}");
    let by_sample = v["sampled_responses"].as_u64().unwrap();
    assert!(
        by_sample > 0 && v["bytes_compared"].as_u64().unwrap() > 0,
        "{v}"
    );
    assert!(v["records_discarded"].as_u64().unwrap() > 0, "{v}");
    assert!(
        by_sample + v["openssl_responses"].as_u64().unwrap() >= sum,
        "{v}"
    );
    // The server listened where the agents reach it.
    let server_config = tls["servers"][0]["config"].as_str().unwrap();
    assert!(
        server_config.contains(&format!("listen {}:", hosts.gateway)),
        "{server_config}"
    );
    assert_nothing_left(&hosts, &tmp);
}

#[test]
fn an_unreachable_or_refusing_host_is_one_clear_line_and_nothing_starts() {
    let _turn = crate::turn!();
    let test = "an_unreachable_or_refusing_host_is_one_clear_line_and_nothing_starts";
    let Some((_s, mut hosts, config)) = start_hosts(test, 2) else {
        return;
    };
    let results = hosts.dir.join("results").display().to_string();
    // h1's sshd is down: the connection is refused.
    hosts.hosts[1].kill_sshd();
    let list = hosts.list(2);
    let (out, tmp) = coordinator(&hosts, &sweep_args(&list, &config, &results));
    let stderr = failed_in_one_line(&out);
    assert!(
        stderr.contains("agent h1: refused the SSH connection"),
        "{stderr}"
    );
    assert_nothing_left(&hosts, &tmp);
    // An address where nothing answers: unreachable.
    let nobody = format!(
        "root@{}",
        std::net::Ipv4Addr::from(u32::from(hosts.gateway) + 200)
    );
    let (out, tmp) = coordinator(&hosts, &sweep_args(&nobody, &config, &results));
    let stderr = failed_in_one_line(&out);
    assert!(
        stderr.contains(&format!("agent {nobody}: unreachable over SSH")),
        "{stderr}"
    );
    assert_nothing_left(&hosts, &tmp);
}

#[test]
fn a_missing_agent_binary_is_one_clear_line() {
    let _turn = crate::turn!();
    let Some((_s, hosts, config)) = start_hosts("a_missing_agent_binary_is_one_clear_line", 1)
    else {
        return;
    };
    let results = hosts.dir.join("results").display().to_string();
    let mut args = sweep_args("h0", &config, &results);
    replace_arg(&mut args, BIN, "/nonexistent/cipherbench");
    let (out, tmp) = coordinator(&hosts, &args);
    let stderr = failed(&out);
    assert!(
        stderr.contains("agent h0: has no cipherbench agent at the path given"),
        "{stderr}"
    );
    assert_nothing_left(&hosts, &tmp);
}

/// A file's SHA-256 (sha256sum), 64 hex digits.
fn sha256_of(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8_lossy(&out.stdout)[..64].to_string()
}

#[test]
fn deploy_puts_this_build_on_hosts_that_have_none_and_a_sweep_then_starts_it() {
    let _turn = crate::turn!();
    let test = "deploy_puts_this_build_on_hosts_that_have_none_and_a_sweep_then_starts_it";
    let Some((_s, mut hosts, config)) = start_hosts(test, 2) else {
        return;
    };
    let results = hosts.dir.join("results");
    let results_s = results.display().to_string();
    let list = hosts.list(2);
    // The agents as a package user starts them: no --agent-path.
    let mut sweep = sweep_args(&list, &config, &results_s);
    let at = sweep.iter().position(|a| *a == "--agent-path").unwrap();
    sweep.drain(at..at + 2);
    let sha = sha256_of(Path::new(BIN));
    let copy = |i: usize| {
        hosts
            .cache(i)
            .join("cipherbench")
            .join(&sha)
            .join("cipherbench")
    };
    // Hosts with no build of their own (unless this machine has a cipherbench on its
    // PATH, which the hosts share): one line that says to deploy.
    let on_path = Command::new("sh")
        .args(["-c", "command -v cipherbench"])
        .output()
        .is_ok_and(|o| o.status.success());
    if on_path {
        eprintln!("{test}: this machine has a cipherbench on its PATH; not checking the hosts without one");
    } else {
        let (out, tmp) = coordinator(&hosts, &sweep);
        let stderr = failed_in_one_line(&out);
        assert!(
            stderr.contains("agent h0: has no cipherbench: run `cipherbench deploy --agents h0`"),
            "{stderr}"
        );
        assert!(!results.exists());
        assert_nothing_left(&hosts, &tmp);
    }
    // deploy: copied to each host's cache, named by its digest, byte for byte.
    let deploy = ["deploy", "--agents", &list, "--ssh-config", &config];
    let (out, tmp) = coordinator(&hosts, &deploy);
    let (stdout, _) = succeeded(&out);
    for i in 0..2 {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("h{i}: ")))
            .unwrap_or_else(|| panic!("no line for h{i}: {stdout}"));
        assert!(
            line.contains(&format!("copied to {}", copy(i).display()))
                && line.contains("checked: SHA-256 matches, runs (cipherbench "),
            "{line}"
        );
        assert_eq!(sha256_of(&copy(i)), sha, "h{i}");
        // Nothing else beside it (the transfer's temporary file is gone).
        assert_eq!(
            std::fs::read_dir(copy(i).parent().unwrap())
                .unwrap()
                .count(),
            1
        );
    }
    assert_nothing_left(&hosts, &tmp);
    // Again: found and hashed again, nothing sent; a copy altered there is replaced.
    let mut altered = std::fs::read(copy(1)).unwrap();
    altered.push(0);
    std::fs::write(copy(1), altered).unwrap();
    let (out, _) = coordinator(&hosts, &deploy);
    let (stdout, _) = succeeded(&out);
    assert!(
        stdout.contains("h0: already at") && stdout.contains("nothing sent"),
        "{stdout}"
    );
    assert!(stdout.contains("h1: copied to"), "{stdout}");
    assert_eq!(sha256_of(&copy(1)), sha);
    // The sweep now starts the deployed build on both hosts.
    let (out, tmp) = coordinator(&hosts, &sweep);
    succeeded(&out);
    let run = run_json(&results);
    let agents = run["tls"]["agents"].as_array().expect("agents recorded");
    assert_eq!(agents.len(), 2);
    for a in agents {
        assert!(
            a["build"]
                .as_str()
                .unwrap()
                .contains(&format!("sha256:{}", &sha[..16])),
            "{a}"
        );
    }
    assert_eq!(run["tls"]["sweep"]["points"][0]["valid"], true);
    assert_nothing_left(&hosts, &tmp);
    // A host that is down: one line naming it, the other still served, exit non-zero.
    hosts.hosts[1].kill_sshd();
    let (out, _) = coordinator(&hosts, &deploy);
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(stdout.contains("h0: already at"), "{stdout}");
    assert!(
        stderr.contains("h1: refused the SSH connection") && stderr.contains("1 of 2 hosts"),
        "{stderr}"
    );
}

/// The first 16 hex digits of a file's SHA-256 (sha256sum), as a build identity
/// names it.
fn sha256_prefix(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8_lossy(&out.stdout)[..16].to_string()
}

#[test]
fn an_agent_of_another_build_is_refused_naming_both_builds() {
    let _turn = crate::turn!();
    let test = "an_agent_of_another_build_is_refused_naming_both_builds";
    let Some((_s, hosts, config)) = start_hosts(test, 1) else {
        return;
    };
    let results = hosts.dir.join("results").display().to_string();
    // Another build of the same version: this very binary with one byte appended
    // (still a valid executable that runs: the loader reads only what the ELF
    // headers name), and, where `cargo build --release` made one (make test
    // does), the release build of this source.
    let copy = hosts.dir.join("cipherbench-other");
    let mut bytes = std::fs::read(BIN).unwrap();
    bytes.push(0);
    std::fs::write(&copy, bytes).unwrap();
    let _ = Command::new("chmod").arg("755").arg(&copy).status();
    let runs = Command::new(&copy).arg("--version").output().unwrap();
    assert!(runs.status.success(), "the copy runs: {:?}", text(&runs));
    let mut others = vec![(copy, true)];
    let release = Path::new(BIN)
        .parent()
        .and_then(|d| d.parent())
        .map(|t| t.join("release/cipherbench"));
    // Not when this test is itself the release build (`cargo test --release`):
    // then that is this very binary.
    let this = std::fs::canonicalize(BIN).ok();
    if let Some(r) = release.filter(|r| r.exists() && std::fs::canonicalize(r).ok() != this) {
        // Built from this source by make test; left from an older source, it may
        // speak another protocol, refused as such before its build is compared.
        others.push((r, false));
    }
    for (other, same_source) in others {
        let path = other.display().to_string();
        let mut args = sweep_args("h0", &config, &results);
        replace_arg(&mut args, BIN, &path);
        let (out, tmp) = coordinator(&hosts, &args);
        let (_, stderr) = text(&out);
        assert!(!out.status.success(), "{path}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        if !same_source && stderr.contains("(protocol ") {
            assert!(stderr.contains("install the same version"), "{stderr}");
            assert_nothing_left(&hosts, &tmp);
            continue;
        }
        assert!(
            stderr.contains("agent h0 runs another build of cipherbench")
                && stderr.contains("put this build there with `cipherbench deploy --agents h0`"),
            "{stderr}"
        );
        // Both builds named by their bytes' hash.
        for hash in [sha256_prefix(&other), sha256_prefix(Path::new(BIN))] {
            assert!(
                stderr.contains(&format!("sha256:{hash}")),
                "{hash}: {stderr}"
            );
        }
        assert!(!Path::new(&results).exists(), "{results}");
        assert_nothing_left(&hosts, &tmp);
    }
}

#[test]
fn an_agent_killed_mid_window_fails_the_point_with_its_name() {
    let _turn = crate::turn!();
    let test = "an_agent_killed_mid_window_fails_the_point_with_its_name";
    let Some((_s, hosts, config)) = start_hosts(test, 2) else {
        return;
    };
    let results = hosts.dir.join("results");
    let results_s = results.display().to_string();
    let list = hosts.list(2);
    let mut args = sweep_args(&list, &config, &results_s);
    replace_arg(&mut args, "2s", "6s");
    let (child, tmp) = spawn_coordinator(&hosts, &args);
    // Wait for h1's agent, let its window begin, and kill it.
    let pid = poll(Duration::from_secs(60), Duration::from_millis(50), || {
        let on_h1: Vec<String> = agents_left(&hosts)
            .into_iter()
            .filter(|l| l.starts_with("h1:"))
            .collect();
        match on_h1.first() {
            Some(l) => Ok(l.split_whitespace().nth(1).unwrap().parse::<i32>().unwrap()),
            None => Err("no agent started on h1".to_string()),
        }
    });
    std::thread::sleep(Duration::from_secs(3));
    // A pid read from our own test host's namespace.
    hosts::kill(&pid.to_string());
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = text(&out);
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(results.join("run.json")).unwrap())
            .unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    let point = &run["tls"]["sweep"]["points"][0];
    assert_eq!(point["valid"], false, "{point}");
    let reason = point["invalid_reason"].as_str().unwrap();
    assert!(reason.contains("agent h1"), "{reason}");
    assert_nothing_left(&hosts, &tmp);
}

#[test]
fn a_ramp_from_two_agents_attempts_the_whole_schedule() {
    let _turn = crate::turn!();
    let test = "a_ramp_from_two_agents_attempts_the_whole_schedule";
    let Some((_s, hosts, config)) = start_hosts(test, 2) else {
        return;
    };
    let results = hosts.dir.join("results");
    let results_s = results.display().to_string();
    let list = hosts.list(2);
    let mut args = agents_args("ramp", &list, &config);
    args.extend(gcm_accel("1KiB"));
    args.extend(["--rate", "40", "--duration", "3s", "--results", &results_s]);
    let (out, tmp) = coordinator(&hosts, &args);
    succeeded(&out);
    let run = run_json(&results);
    assert_eq!(run["tls"]["agents"].as_array().unwrap().len(), 2);
    let r = &run["tls"]["ramp"]["runs"][0];
    // 0 -> 40 req/s over 3 s is 60 requests; two ramps of 20 req/s, 30 each.
    let attempted = r["attempted"].as_u64().unwrap();
    assert!(attempted.abs_diff(60) <= 2, "{r}");
    assert_eq!(
        r["successful"].as_u64().unwrap() + r["unsuccessful"].as_u64().unwrap(),
        attempted
    );
    // The per-second series adds the agents' seconds.
    let series: u64 = r["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["attempted"].as_u64().unwrap())
        .sum();
    assert_eq!(series, attempted);
    // Each agent's share of the ramp, with its host's noise over it: the shares'
    // successful requests add up to the ramp's.
    let agents = r["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 2, "{r}");
    let mut names: Vec<&str> = agents.iter().map(|a| a["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, ["h0", "h1"]);
    let shared: u64 = agents.iter().map(|a| a["requests"].as_u64().unwrap()).sum();
    assert_eq!(shared, r["successful"].as_u64().unwrap(), "{r}");
    for a in agents {
        assert!(
            a["noise"]["window_ns"].as_u64().unwrap() > 2_000_000_000,
            "{a}"
        );
    }
    assert_nothing_left(&hosts, &tmp);
}

#[test]
fn ctrl_c_on_the_coordinator_ends_every_agent() {
    let _turn = crate::turn!();
    let Some((_s, hosts, config)) = start_hosts("ctrl_c_on_the_coordinator_ends_every_agent", 2)
    else {
        return;
    };
    let results = hosts.dir.join("results").display().to_string();
    let list = hosts.list(2);
    let mut args = sweep_args(&list, &config, &results);
    replace_arg(&mut args, "2s", "20s");
    let (child, tmp) = spawn_coordinator(&hosts, &args);
    poll(Duration::from_secs(60), Duration::from_millis(50), || {
        if agents_left(&hosts).len() < 2 {
            return Err("the agents did not start".to_string());
        }
        Ok(())
    });
    // Into the window, then Ctrl-C.
    std::thread::sleep(Duration::from_secs(3));
    // Our own child.
    ctrl_c(&child);
    let out = child.wait_with_output().unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert_nothing_left(&hosts, &tmp);
}

/// Throughput of a sweep point, from a results directory, and whether the point was
/// valid (its generator not the limit).
fn point_throughput(results: &Path) -> (f64, bool) {
    let run = run_json(results);
    let p = &run["tls"]["sweep"]["points"][0];
    (
        p["throughput_bytes_per_sec"].as_f64().unwrap(),
        p["valid"] == true,
    )
}

/// Throughput of a valid sweep point, from a results directory.
fn throughput(results: &Path) -> f64 {
    let (t, valid) = point_throughput(results);
    assert!(valid, "{}: the point is invalid", results.display());
    t
}

/// The CPUs nginx ran on in a sweep, from a results directory.
fn server_cpus(results: &Path) -> Vec<u64> {
    let run = run_json(results);
    let cpus = run["tls"]["servers"][0]["server_cpus"].as_array().unwrap();
    cpus.iter().map(|c| c.as_u64().unwrap()).collect()
}

/// A measurement more than a check (run by hand, `-- --ignored`; on a shared
/// two-core machine its spread is wide): three agents against one agent with the
/// same CPU (every generator pinned to CPU 0, the same 6 clients in all, the same
/// nginx on the same other CPU, the same bridge to it), alternated three times;
/// this machine's own generator on CPU 0 over loopback is printed beside them (a
/// path without the bridge, so not the control). Every run is checked to have had
/// nginx on the same CPUs and off the generators' (an agent on nginx's CPU halves
/// the figure), and each agent to have shared this kernel (so it paced its
/// wake-ups as the loopback generator does). Asserts three agents and one agree
/// within 25 %.
#[test]
#[ignore]
fn three_agents_measure_what_one_generator_of_the_same_cpus_does() {
    let _turn = crate::turn!();
    let test = "three_agents_measure_what_one_generator_of_the_same_cpus_does";
    let Some((_s, hosts, config)) = start_hosts(test, 3) else {
        return;
    };
    let (three, one) = (hosts.list(3), hosts.list(1));
    let mut common = gcm_accel("1MiB").to_vec();
    common.extend([
        "--cores",
        "1",
        "--concurrency",
        "6",
        "--warmup",
        "500ms",
        "--window",
        "4s",
        "-q",
    ]);
    // Every generator on CPU 0; nginx where the placement puts it, the same CPUs
    // in every run and never CPU 0 (checked below, run by run).
    const LOAD_CPU: &str = "0";
    let mut nginx_cpus: Option<Vec<u64>> = None;
    let mut check_placement = |dir: &Path| {
        let cpus = server_cpus(dir);
        assert!(!cpus.contains(&0), "nginx on the generators' CPU: {cpus:?}");
        assert_eq!(nginx_cpus.get_or_insert_with(|| cpus.clone()), &cpus);
        let run = run_json(dir);
        let warnings = run["warnings"].as_array().unwrap();
        assert!(
            !warnings.iter().any(|w| w["kind"] == "agent_on_server_cpus"),
            "{warnings:?}"
        );
        for a in run["tls"]["agents"].as_array().into_iter().flatten() {
            assert_eq!(a["same_kernel"], true, "{a}");
        }
    };
    let (mut local, mut single, mut agents) = (Vec::new(), Vec::new(), Vec::new());
    for k in 0..3 {
        let dir = hosts.dir.join(format!("local-{k}"));
        let d = dir.display().to_string();
        let mut args = vec![
            "tls",
            "sweep",
            "--generator-cpus",
            LOAD_CPU,
            "--results",
            &d,
        ];
        args.extend(&common);
        let (out, _) = coordinator(&hosts, &args);
        succeeded(&out);
        check_placement(&dir);
        // Printed beside, not compared: it may mark its generator saturated (on
        // loopback the generator's CPU also sends what nginx queued while it napped).
        local.push(point_throughput(&dir));
        for (list, into, name) in [(&one, &mut single, "one"), (&three, &mut agents, "three")] {
            let dir = hosts.dir.join(format!("agents-{name}-{k}"));
            let d = dir.display().to_string();
            let mut args = agents_args("sweep", list, &config);
            args.extend(["--agent-cpus", LOAD_CPU, "--results", &d]);
            args.extend(&common);
            let (out, _) = coordinator(&hosts, &args);
            succeeded(&out);
            check_placement(&dir);
            into.push(throughput(&dir));
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (o, a) = (median(&mut single), median(&mut agents));
    let gbps = |v: &[f64]| v.iter().map(|x| x * 8e-9).collect::<Vec<_>>();
    let local = local
        .iter()
        .map(|(t, valid)| {
            format!(
                "{:.2}{}",
                t * 8e-9,
                if *valid { "" } else { " (generator saturated)" }
            )
        })
        .collect::<Vec<_>>();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!(
        "one agent: {:?} Gbit/s; three agents: {:?} Gbit/s; medians {:.2} / {:.2} = {:.3}; this machine's generator over loopback: {} Gbit/s; load {}",
        gbps(&single),
        gbps(&agents),
        o * 8e-9,
        a * 8e-9,
        a / o,
        local.join(" / "),
        load.trim()
    );
    assert!(
        (0.75..1.33).contains(&(a / o)),
        "three agents / one = {:.3}",
        a / o
    );
}

/// Runs cipherbench inside host `i`'s namespace (as the machine "here").
fn in_host(hosts: &Hosts, i: usize, args: &[&str]) -> Command {
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", &hosts.hosts[i].netns, BIN])
        .args(args)
        .stdin(Stdio::null());
    command
}

/// Runs [`in_host`]: its output.
fn from_host(hosts: &Hosts, i: usize, args: &[&str]) -> Output {
    in_host(hosts, i, args)
        .output()
        .expect("running cipherbench in a test host")
}

/// Starts [`in_host`] with its output piped.
fn spawn_in_host(hosts: &Hosts, i: usize, args: &[&str]) -> Child {
    in_host(hosts, i, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A running cipherbench whose stdout and stderr are read as they come (a pipe
/// nobody reads would stall it once full).
struct Draining {
    child: Child,
    stdout: std::thread::JoinHandle<Vec<u8>>,
    stderr: std::thread::JoinHandle<Vec<u8>>,
}

impl Draining {
    fn new(mut child: Child) -> Draining {
        fn drain(
            mut from: impl std::io::Read + Send + 'static,
        ) -> std::thread::JoinHandle<Vec<u8>> {
            std::thread::spawn(move || {
                let mut all = Vec::new();
                let _ = from.read_to_end(&mut all);
                all
            })
        }
        let stdout = drain(child.stdout.take().unwrap());
        let stderr = drain(child.stderr.take().unwrap());
        Draining {
            child,
            stdout,
            stderr,
        }
    }

    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Its output once it ended (SIGKILLed first if `kill`).
    fn output(mut self, kill: bool) -> Output {
        if kill {
            let _ = self.child.kill();
        }
        let status = self.child.wait().unwrap();
        Output {
            status,
            stdout: self.stdout.join().unwrap_or_default(),
            stderr: self.stderr.join().unwrap_or_default(),
        }
    }
}

/// What a two-host tunnel's results directory holds, in one line, for a failure's
/// message.
fn tunnel_record(dir: &Path) -> String {
    let Some(run) = read_run(dir) else {
        return format!("no readable run.json in {}", dir.display());
    };
    let points: Vec<String> = run["tunnel"]["points"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| format!("{} {} {}", p["transform"], p["protocol"], p["variant"]))
        .collect();
    format!(
        "run.json: interrupted {}, points {points:?}, warnings {}",
        run["interrupted"], run["warnings"]
    )
}

/// What a two-host tunnel could leave on a test host: TUN devices of ours, processes
/// other than sshd, scratch directories.
fn tunnel_left(hosts: &Hosts, before: &[String]) -> Vec<String> {
    let mut left = Vec::new();
    for h in &hosts.hosts {
        let links = Command::new("ip")
            .args(["-n", &h.netns, "-o", "link"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        left.extend(
            links
                .lines()
                .filter(|l| l.contains(": cbp"))
                .map(|l| format!("{}: {l}", h.alias)),
        );
        for (pid, cmd) in processes_in(&h.netns) {
            if !cmd.is_empty() && !cmd.contains("sshd") {
                left.push(format!("{}: {pid} {}", h.alias, cmd.replace('\0', " ")));
            }
        }
    }
    left.extend(peer_dirs().into_iter().filter(|d| !before.contains(d)));
    left
}

fn peer_dirs() -> Vec<String> {
    std::fs::read_dir(std::env::temp_dir())
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("cipherbench-peer-"))
                .collect()
        })
        .unwrap_or_default()
}

fn assert_no_tunnel_left(hosts: &Hosts, before: &[String]) {
    assert_none_left_within_20s(|| tunnel_left(hosts, before));
}

/// `tunnel --peer h1` from h0 (AES-128-GCM and null, TCP, 2 s runs), its results
/// in `results`.
fn peer_args<'a>(config: &'a str, results: &'a str) -> Vec<&'a str> {
    vec![
        "tunnel",
        "--peer",
        "h1",
        "--ssh-config",
        config,
        "--agent-path",
        BIN,
        "--transforms",
        "aes128-gcm,null",
        "--protocols",
        "tcp",
        "--seconds",
        "2",
        // One round: what these tests check is in every run, and the tunnel command's
        // default (the quick preset's two) would double its length.
        "--repeats",
        "1",
        "--results",
        results,
    ]
}

/// The CPUs the threads of `pid` other than its main one may run on (the union of
/// their `Cpus_allowed_list`), and how many such threads there are.
fn worker_cpus(pid: &str) -> (Vec<usize>, usize) {
    let mut cpus = Vec::new();
    let mut threads = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
    {
        if task.file_name().to_string_lossy() == pid {
            continue;
        }
        if let Some(list) = cpus_allowed(&task.path().join("status")) {
            threads += 1;
            cpus.extend(list);
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    (cpus, threads)
}

/// `Cpus_allowed_list` of a /proc status file, parsed (`0-2,5`).
fn cpus_allowed(status: &Path) -> Option<Vec<usize>> {
    let text = std::fs::read_to_string(status).ok()?;
    let list = text
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?
        .trim()
        .to_string();
    let mut out = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.parse::<usize>().ok()?..=b.parse::<usize>().ok()?),
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

/// What a running two-host tunnel's processes may run on, read from /proc while it
/// runs: per host, each gateway's workers (the observation with the most threads,
/// the latest of those) and each iperf3's main thread.
#[derive(Default, Debug)]
struct Seen {
    /// (host, pid) -> (worker CPUs, threads).
    gateways: std::collections::BTreeMap<(usize, String), (Vec<usize>, usize)>,
    /// (host, pid) -> CPUs, for iperf3 clients and servers.
    iperf3: std::collections::BTreeMap<(usize, String), Vec<usize>>,
}

impl Seen {
    fn look(&mut self, hosts: &Hosts) {
        for (i, h) in hosts.hosts.iter().enumerate() {
            for (pid, cmd) in processes_in(&h.netns) {
                if cmd.contains("__gateway") {
                    let (cpus, threads) = worker_cpus(&pid);
                    let e = self.gateways.entry((i, pid)).or_insert((Vec::new(), 0));
                    if threads > 0 && threads >= e.1 {
                        *e = (cpus, threads);
                    }
                } else if cmd.starts_with("iperf3\0") {
                    // Given a moment after it started, to have applied its -A.
                    if let Some(cpus) = cpus_allowed(Path::new(&format!("/proc/{pid}/status"))) {
                        self.iperf3.insert((i, pid), cpus);
                    }
                }
            }
        }
    }
}

#[test]
fn a_tunnel_to_a_peer_host_carries_iperf3_records_both_hosts_and_leaves_nothing() {
    let _turn = crate::turn!();
    let test = "a_tunnel_to_a_peer_host_carries_iperf3_records_both_hosts_and_leaves_nothing";
    let Some((_s, hosts, config)) = start_hosts(test, 2) else {
        return;
    };
    let before = peer_dirs();
    let dir = hosts.dir.join("results");
    let results = dir.display().to_string();
    let mut args = peer_args(&config, &results);
    replace_arg(&mut args, "tcp", "tcp,udp");
    // Run from h0, reading the processes' affinity on both hosts while it runs.
    let mut child = Draining::new(spawn_in_host(&hosts, 0, &args));
    let mut seen = Seen::default();
    let deadline = Instant::now() + Duration::from_secs(600);
    while child.running() {
        if Instant::now() > deadline {
            let out = child.output(true);
            let (stdout, stderr) = text(&out);
            panic!(
                "the tunnel ran on for 600 s; killed.\n{}\n--- its stderr ---\n{stderr}\n--- its stdout ---\n{stdout}",
                tunnel_record(&dir)
            );
        }
        seen.look(&hosts);
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.output(false);
    if !out.status.success() {
        eprintln!("{}", tunnel_record(&dir));
    }
    let (stdout, _) = succeeded(&out);
    eprintln!("{stdout}");
    // The table is the namespace tunnel's, naming both hosts.
    assert!(
        stdout.contains(&format!(
            "and the peer h1 ({}",
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .unwrap()
                .trim()
        )) && stdout.contains("peer h1: host"),
        "{stdout}"
    );
    // run.json: the peer as checked, each host's end, every point with both
    // gateways' counters, each on its host.
    let run = run_json(&dir);
    assert_eq!(run["interrupted"], false);
    let t = &run["tunnel"];
    let peer = &t["peer"];
    assert_eq!(peer["agent"]["name"], "h1");
    assert!(
        peer["agent"]["build"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"),
        "{peer}"
    );
    assert!(peer["agent"]["clock_offset_ns"].is_i64(), "{peer}");
    assert!(peer["agent"]["kernel"]
        .as_str()
        .is_some_and(|k| !k.is_empty()));
    assert_eq!(peer["here"]["address"], hosts.hosts[0].addr.to_string());
    assert_eq!(peer["there"]["address"], hosts.hosts[1].addr.to_string());
    assert_eq!(peer["here"]["gateway"], "sender");
    assert_eq!(peer["there"]["gateway"], "receiver");
    assert_eq!(
        t["underlay"][0]["runs"][0]["command"][2],
        hosts.hosts[1].addr.to_string()
    );
    assert!(
        t["underlay"][0]["throughput_bits_per_sec"]["median"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    let points = t["points"].as_array().unwrap();
    let mut names: Vec<String> = points
        .iter()
        .map(|p| {
            format!(
                "{} {} {}",
                p["transform"].as_str().unwrap(),
                p["protocol"].as_str().unwrap(),
                p["variant"].as_str().unwrap()
            )
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "aes128-gcm tcp accel",
            "aes128-gcm tcp noaesni",
            "aes128-gcm udp accel",
            "aes128-gcm udp noaesni",
            "null tcp accel",
            "null udp accel"
        ]
    );
    for p in points {
        for r in p["runs"].as_array().unwrap() {
            assert!(
                r["iperf"]["receiver_bits_per_sec"].as_f64().unwrap() > 0.0,
                "{r}"
            );
            assert_eq!(r["sender"]["host"], peer["here"]["hostname"]);
            assert_eq!(r["receiver"]["host"], peer["there"]["hostname"]);
            // Both hosts' gateways counted the run's packets, and they reconcile
            // with what iperf3's server read.
            assert!(r["sender"]["sealed_packets"].as_u64().unwrap() > 0, "{r}");
            assert!(r["receiver"]["opened_packets"].as_u64().unwrap() > 0, "{r}");
            assert_eq!(r["byte_check"]["ok"], true, "{}", r["byte_check"]);
            assert!(r["round"].is_u64() && r["sequence"].is_u64(), "{r}");
            // The peer watched its host over the same run: on its end's CPUs, its
            // gateway and iperf3 being the run.
            let peer_noise = &r["peer_noise"];
            assert_eq!(peer_noise["host"], "h1", "{r}");
            let window = peer_noise["noise"]["window_ns"].as_u64().unwrap();
            assert!(
                (1_500_000_000..60_000_000_000).contains(&window),
                "{peer_noise}"
            );
            assert!(
                peer_noise["noise"]["run_ticks"].as_u64().unwrap() > 0,
                "{peer_noise}"
            );
            let watched: Vec<usize> =
                serde_json::from_value(peer_noise["noise"]["cpus"].clone()).unwrap();
            let placed: Vec<usize> =
                serde_json::from_value(peer["there"]["gateway_cpus"].clone()).unwrap();
            let iperf3 = peer["there"]["iperf3_cpu"].as_u64().unwrap() as usize;
            assert!(
                placed.iter().chain([&iperf3]).all(|c| watched.contains(c)),
                "{peer_noise}"
            );
        }
    }
    // Each host placed its own end, and the gateways' workers and iperf3 ran where
    // it did: as recorded (read back by the tool) and as seen here in /proc.
    for (i, end) in [(0, &peer["here"]), (1, &peer["there"])] {
        let cpus: Vec<usize> = serde_json::from_value(end["gateway_cpus"].clone()).unwrap();
        assert!(!cpus.is_empty(), "{end}");
        assert!(end["placement"]["roles"].is_array(), "{end}");
        assert_eq!(end["gateway_affinity"], end["gateway_cpus"], "{end}");
        // (A gateway's keeper carries its command line too, with no threads.)
        let gateways: Vec<&(Vec<usize>, usize)> = seen
            .gateways
            .iter()
            .filter(|((h, _), (_, threads))| *h == i && *threads > 0)
            .map(|(_, v)| v)
            .collect();
        assert!(!gateways.is_empty(), "no gateway seen on h{i}: {seen:?}");
        for (seen_cpus, _) in gateways {
            assert_eq!(seen_cpus, &cpus, "h{i}'s gateway: {seen:?}");
        }
        let iperf3 = end["iperf3_cpu"].as_u64().unwrap() as usize;
        let on_host: Vec<&Vec<usize>> = seen
            .iperf3
            .iter()
            .filter(|((h, _), _)| *h == i)
            .map(|(_, v)| v)
            .collect();
        assert!(!on_host.is_empty(), "no iperf3 seen on h{i}: {seen:?}");
        assert!(
            on_host.iter().any(|c| **c == [iperf3]),
            "h{i}'s iperf3: {seen:?}"
        );
    }
    // A TCP point above the underlay measured between the hosts is impossible on a
    // wire-limited path: said in a warning naming the peer (on the test hosts'
    // bridge it happens, as on the namespace tunnel's bare veth).
    let above = points
        .iter()
        .any(|p| p["protocol"] == "tcp" && p["underlay_share"].as_f64().is_some_and(|s| s > 1.05));
    let warned = run["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["kind"] == "tunnel_above_underlay");
    assert_eq!(above, warned.is_some(), "{}", run["warnings"]);
    if let Some(w) = warned {
        let m = w["message"].as_str().unwrap();
        assert!(m.contains("measured alone between this host and"), "{m}");
    }
    // Each host judged the mask on its own gateway, against its own accel.
    let has_aes = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "aes"));
    if has_aes {
        for list in [&t["variants"], &peer["variants"]] {
            let noaesni = list
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["name"] == "noaesni")
                .unwrap_or_else(|| panic!("no noaesni in {list}"));
            assert_eq!(noaesni["took_effect"], true, "{noaesni}");
        }
        assert!(
            stdout.contains("aes128-gcm") && stdout.contains("accel / noaesni:"),
            "{stdout}"
        );
    }
    // The report renders it, as for any run.
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(summary.contains("tunnel aes128-gcm tcp"), "{summary}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("peer h1: host") && html.contains("as judged on the peer h1"));
    let again = Command::new(BIN).arg("report").arg(&dir).output().unwrap();
    assert!(again.status.success(), "{:?}", text(&again));
    let compared = Command::new(BIN)
        .arg("compare")
        .arg(&dir)
        .arg(&dir)
        .output()
        .unwrap();
    let (cmp, _) = text(&compared);
    assert!(compared.status.success(), "{:?}", text(&compared));
    assert!(cmp.contains("tunnel"), "{cmp}");
    assert_no_tunnel_left(&hosts, &before);
}

/// A busy loop on each of this machine's CPUs, started in a test host's namespace
/// under a name of its own; killed on drop.
struct Hog(Vec<std::process::Child>);

impl Hog {
    fn start(hosts: &Hosts, i: usize, name: &str) -> Hog {
        let exe = hosts.dir.join(name);
        std::fs::copy("/usr/bin/yes", &exe).unwrap();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Hog((0..cpus)
            .map(|cpu| {
                Command::new("ip")
                    .args(["netns", "exec", &hosts.hosts[i].netns, "taskset", "-c"])
                    .arg(cpu.to_string())
                    .arg(&exe)
                    .stdout(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect())
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn a_busy_peer_marks_the_tunnel_s_points_naming_the_peer() {
    let _turn = crate::turn!();
    let test = "a_busy_peer_marks_the_tunnel_s_points_naming_the_peer";
    let Some((_s, hosts, config)) = start_hosts(test, 2) else {
        return;
    };
    let before = peer_dirs();
    let dir = hosts.dir.join("results");
    let results = dir.display().to_string();
    let mut args = peer_args(&config, &results);
    replace_arg(&mut args, "aes128-gcm,null", "null");
    args.push("--no-underlay");
    let out = {
        let _hog = Hog::start(&hosts, 1, "peerhog");
        from_host(&hosts, 0, &args)
    };
    succeeded(&out);
    let run = run_json(&dir);
    let points = tunnel_points(&run, "null");
    assert!(!points.is_empty(), "{run}");
    for p in &points {
        for r in p["runs"].as_array().unwrap() {
            // The peer's window saw the busy loop on its end's CPUs, by name.
            let noise = &r["peer_noise"]["noise"];
            assert!(noise["foreign_share"].as_f64().unwrap() > 0.10, "{noise}");
            assert!(
                noise["busiest"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|b| b["name"] == "peerhog"),
                "{noise}"
            );
        }
    }
    // The run warns, naming the peer, and the point is marked.
    let warned = run["warnings"].as_array().unwrap().iter().any(|w| {
        w["kind"] == "noisy_machine"
            && w["message"]
                .as_str()
                .is_some_and(|m| m.contains("peer h1: other processes took"))
    });
    assert!(warned, "{}", run["warnings"]);
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(
        summary.contains("peer h1: other processes took"),
        "{summary}"
    );
    assert_no_tunnel_left(&hosts, &before);
}

#[test]
fn udp_4500_dropped_by_the_peers_firewall_is_one_line_and_nothing_is_left() {
    let _turn = crate::turn!();
    let test = "udp_4500_dropped_by_the_peers_firewall_is_one_line_and_nothing_is_left";
    let Some((_s, hosts, config)) = start_hosts(test, 2) else {
        return;
    };
    let before = peer_dirs();
    // nftables in the peer's namespace drops ESP in UDP (it goes with the namespace).
    for rule in [
        vec!["add", "table", "inet", "cbtest"],
        vec![
            "add",
            "chain",
            "inet",
            "cbtest",
            "in",
            "{ type filter hook input priority 0; }",
        ],
        vec![
            "add", "rule", "inet", "cbtest", "in", "udp", "dport", "4500", "drop",
        ],
    ] {
        let mut args = vec!["nft"];
        args.extend(rule);
        hosts.exec(1, &args).expect("nft in the peer's namespace");
    }
    let results = hosts.dir.join("results");
    let out = from_host(
        &hosts,
        0,
        &peer_args(&config, &results.display().to_string()),
    );
    let stderr = failed_in_one_line(&out);
    assert!(
        stderr.contains("agent h1: UDP port 4500 from") && stderr.contains("is dropped"),
        "{stderr}"
    );
    // Nothing measured: no results directory either.
    assert!(!results.exists());
    assert_no_tunnel_left(&hosts, &before);
}

#[test]
fn a_peer_agent_without_root_is_one_line_and_nothing_is_left() {
    let _turn = crate::turn!();
    let test = "a_peer_agent_without_root_is_one_line_and_nothing_is_left";
    let Some((_s, hosts, config)) = start_hosts(test, 2) else {
        return;
    };
    let before = peer_dirs();
    // The agent on the peer runs as `nobody` (setpriv drops root before it starts;
    // no user is added to this machine): what the coordinator meets when the user
    // ssh'es to the peer as someone other than root.
    let wrapper = hosts.dir.join("agent-as-nobody");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups {BIN} \"$@\"\n"
        ),
    )
    .unwrap();
    let _ = Command::new("chmod").arg("755").arg(&wrapper).status();
    let _ = Command::new("chmod").arg("755").arg(&hosts.dir).status();
    let results = hosts.dir.join("results");
    let wrapper = wrapper.display().to_string();
    let results_arg = results.display().to_string();
    let mut args = peer_args(&config, &results_arg);
    replace_arg(&mut args, BIN, &wrapper);
    let out = from_host(&hosts, 0, &args);
    let stderr = failed_in_one_line(&out);
    assert!(
        stderr.contains("agent h1: runs without root there")
            && stderr.contains("ssh to it as root"),
        "{stderr}"
    );
    assert!(!results.exists());
    assert_no_tunnel_left(&hosts, &before);
}

/// Starts `tunnel --peer h1` from h0 with long iperf3 runs, waits until the peer's
/// TUN is up, and hands back the running coordinator.
fn tunnel_until_the_peer_is_up(hosts: &Hosts, config: &str) -> std::process::Child {
    let results = hosts.dir.join("results").display().to_string();
    let mut args = peer_args(config, &results);
    replace_arg(&mut args, "2", "8");
    // Errors only on stderr, no progress lines.
    args.push("-q");
    let mut child = spawn_in_host(hosts, 0, &args);
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "the tunnel ended before the peer's end came up: {:?}",
                text(&out)
            );
        }
        let links = hosts.exec(1, &["ip", "-o", "link"]).unwrap_or_default();
        if links.contains(": cbp") {
            break;
        }
        assert!(Instant::now() < deadline, "the peer's end never came up");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Into the iperf3 run through the tunnel.
    std::thread::sleep(Duration::from_secs(2));
    child
}

#[test]
fn a_killed_peer_agent_is_one_line_and_its_tun_is_removed() {
    let _turn = crate::turn!();
    let test = "a_killed_peer_agent_is_one_line_and_its_tun_is_removed";
    let Some((_s, hosts, config)) = start_hosts(test, 2) else {
        return;
    };
    let before = peer_dirs();
    let child = tunnel_until_the_peer_is_up(&hosts, &config);
    let agent = agents_left(&hosts)
        .into_iter()
        .find(|l| l.starts_with("h1:"))
        .expect("the peer's agent");
    hosts::kill(agent.split_whitespace().nth(1).unwrap());
    let out = child.wait_with_output().unwrap();
    let stderr = failed_in_one_line(&out);
    assert!(stderr.contains("agent h1"), "{stderr}");
    assert_no_tunnel_left(&hosts, &before);
}

#[test]
fn ctrl_c_during_the_two_host_tunnel_leaves_nothing_on_either_host() {
    let _turn = crate::turn!();
    let test = "ctrl_c_during_the_two_host_tunnel_leaves_nothing_on_either_host";
    let Some((_s, hosts, config)) = start_hosts(test, 2) else {
        return;
    };
    let before = peer_dirs();
    let child = tunnel_until_the_peer_is_up(&hosts, &config);
    ctrl_c(&child);
    let out = child.wait_with_output().unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert_no_tunnel_left(&hosts, &before);
}

/// The points of `transform` in a run.json's tunnel record.
fn tunnel_points(run: &serde_json::Value, transform: &str) -> Vec<serde_json::Value> {
    run["tunnel"]["points"]
        .as_array()
        .map(|p| {
            p.iter()
                .filter(|p| p["transform"] == transform)
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_two_host_tunnel_stopped_with_ctrl_c_resumes_keeping_what_it_measured() {
    let _turn = crate::turn!();
    let test = "a_two_host_tunnel_stopped_with_ctrl_c_resumes_keeping_what_it_measured";
    let Some((_s, hosts, config)) = start_hosts(test, 2) else {
        return;
    };
    let before = peer_dirs();
    let dir = hosts.dir.join("results");
    let results = dir.display().to_string();
    let args = peer_args(&config, &results);
    // Ctrl-C once every variant of aes128-gcm is saved: null is measured next.
    let child = spawn_in_host(&hosts, 0, &args);
    let kept = poll(Duration::from_secs(300), Duration::from_millis(50), || {
        if let Some(run) = read_run(&dir) {
            let variants = run["tunnel"]["config"]["variants"]
                .as_array()
                .map_or(0, Vec::len);
            let gcm = tunnel_points(&run, "aes128-gcm");
            if variants > 0 && gcm.len() == variants {
                return Ok(run);
            }
        }
        Err("aes128-gcm was never saved".to_string())
    });
    ctrl_c(&child);
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(130), "{stdout}\n{stderr}");
    assert_no_tunnel_left(&hosts, &before);

    // The same command again resumes: the underlay and aes128-gcm are kept as they
    // were measured, only null is measured.
    let out = spawn_in_host(&hosts, 0, &args).wait_with_output().unwrap();
    let (stdout, stderr) = succeeded(&out);
    assert!(
        format!("{stdout}{stderr}").contains("resuming the unfinished run"),
        "{stdout}\n{stderr}"
    );
    let run = run_json(&dir);
    assert_eq!(run["interrupted"], false);
    assert_eq!(
        tunnel_points(&run, "aes128-gcm"),
        tunnel_points(&kept, "aes128-gcm")
    );
    assert_eq!(run["tunnel"]["underlay"], kept["tunnel"]["underlay"]);
    let null = tunnel_points(&run, "null");
    assert_eq!(null.len(), 1, "{}", run["tunnel"]);
    // Its runs come after the kept ones in the measuring order.
    let last_kept = kept["tunnel"]["points"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["runs"].as_array().unwrap())
        .filter_map(|r| r["sequence"].as_u64())
        .max()
        .unwrap();
    assert!(
        null[0]["runs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["sequence"].as_u64().unwrap() > last_kept),
        "{}",
        null[0]
    );
    assert_no_tunnel_left(&hosts, &before);
}

/// A measurement more than a check (run by hand, `-- --ignored`): AES-128-GCM TCP
/// through the two-host tunnel (h0 to h1 over the bridge) against the namespace
/// tunnel on this machine, the same iperf3 length and seconds, alternated three
/// times. Prints both and asserts they agree within 35 %. The namespace tunnel puts
/// its sending side (gateway and iperf3 client) on one core and its receiving side
/// on another; so that the two hosts' ends are placed as that, each test host is
/// confined to a CPU of its own (h0 the first, h1 the last), as two one-core hosts,
/// and each places its end on its own topology. Unconfined, both hosts see every
/// CPU and place their ends on the same cores (0.58x and 0.68x on 2026-11-24).
#[test]
#[ignore]
fn the_two_host_tunnel_measures_what_the_namespace_tunnel_does() {
    let _turn = crate::turn!();
    let test = "the_two_host_tunnel_measures_what_the_namespace_tunnel_does";
    let Some((_s, hosts, config)) = start_hosts(test, 2) else {
        return;
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(cpus >= 2, "two CPUs needed: one per test host");
    let (first, last) = ("0".to_string(), (cpus - 1).to_string());
    hosts.confine(0, &first);
    hosts.confine(1, &last);
    let (mut peer, mut ns) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        // h0 is this machine here: the coordinator confined as h0's sessions are.
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &hosts.hosts[0].netns,
                "taskset",
                "-c",
                &first,
                BIN,
            ])
            .args([
                "tunnel",
                "--peer",
                "h1",
                "--ssh-config",
                &config,
                "--agent-path",
                BIN,
                "--transforms",
                "aes128-gcm",
                "--variants",
                "accel",
                "--seconds",
                "3",
                "--tcp-length",
                "1220",
                "--no-save",
                "--json",
                "-q",
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{stderr}");
        let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        // Each host placed its end on its one CPU.
        let ends = &v["peer"];
        assert_eq!(
            ends["here"]["gateway_cpus"],
            serde_json::json!([0]),
            "{ends}"
        );
        assert_eq!(
            ends["there"]["gateway_cpus"],
            serde_json::json!([cpus - 1]),
            "{ends}"
        );
        let bps = v["points"][0]["runs"][0]["iperf"]["receiver_bits_per_sec"]
            .as_f64()
            .unwrap();
        peer.push(bps / 1e9);
        let out = Command::new(BIN)
            .args([
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
                "3",
                "--tcp-length",
                "1220",
                "--no-underlay",
                "--no-save",
                "--json",
                "-q",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out).1);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let bps = v["points"][0]["runs"][0]["iperf"]["receiver_bits_per_sec"]
            .as_f64()
            .unwrap();
        ns.push(bps / 1e9);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (p, n) = (median(&mut peer), median(&mut ns));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!(
        "two hosts: {peer:?} Gbit/s; namespaces: {ns:?} Gbit/s; medians {p:.3} / {n:.3} = {:.3}; load {}",
        p / n,
        load.trim()
    );
    assert!(
        (0.65..1.54).contains(&(p / n)),
        "two hosts / namespaces = {:.3}",
        p / n
    );
}
