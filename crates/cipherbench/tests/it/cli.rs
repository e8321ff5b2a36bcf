//! The command line as a user meets it: bad input is one clear line and a non-zero
//! exit with nothing written; the main job in its tiny preset produces a results
//! directory whose run.json reads back under the schema; Ctrl-C keeps what was
//! measured.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use crate::common::{assert_one_line_error, bin, stderr};
use cipherbench_model::speed::Direction;
use cipherbench_model::RunRecord;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cb-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn unknown_cipher_is_refused_with_the_known_ones() {
    let _turn = crate::turn!();
    let dir = scratch("unknown-cipher");
    let out = bin()
        .args(["speed", "--cipher", "aes-128-gcm,rot13", "--results"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_one_line_error(&out, "unknown cipher 'rot13'");
    assert!(stderr(&out).contains("des-ede3-cbc"));
    assert!(
        !dir.exists(),
        "a results directory was created for bad input"
    );
}

#[test]
fn bad_size_is_refused() {
    let _turn = crate::turn!();
    let dir = scratch("bad-size");
    for sizes in ["16,1K", "abc", "0", "16,,64"] {
        let out = bin()
            .args(["speed", "--sizes", sizes, "--results"])
            .arg(&dir)
            .output()
            .unwrap();
        assert_one_line_error(&out, "--sizes");
        assert!(!dir.exists());
    }
}

#[test]
fn unknown_variant_and_flag_are_refused() {
    let _turn = crate::turn!();
    let out = bin()
        .args(["speed", "--variants", "turbo"])
        .output()
        .unwrap();
    assert_one_line_error(&out, "unknown variant 'turbo'");
    let out = bin().args(["speed", "--frobnicate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--frobnicate"));
}

#[test]
fn unwritable_results_directory_is_refused_before_measuring() {
    let _turn = crate::turn!();
    // A path under a regular file cannot be a directory, even for root.
    let file = scratch("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let target = file.join("results");
    let started = Instant::now();
    let out = bin()
        .args(["speed", "--cipher", "aes-128-gcm", "--results"])
        .arg(&target)
        .output()
        .unwrap();
    assert_one_line_error(&out, "results directory");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "it measured first"
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
    std::fs::remove_file(&file).unwrap();
}

#[test]
fn a_directory_holding_a_run_is_not_overwritten() {
    let _turn = crate::turn!();
    let dir = scratch("held");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("run.json"), "precious").unwrap();
    let out = bin()
        .args(["speed", "--cipher", "aes-128-gcm", "--results"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_one_line_error(&out, "already holds a run");
    assert_eq!(
        std::fs::read_to_string(dir.join("run.json")).unwrap(),
        "precious"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

fn check_record(dir: &Path) -> RunRecord {
    let text = std::fs::read_to_string(dir.join("run.json")).unwrap();
    let record = crate::schema::record(dir);
    // Nothing is lost in a round trip through the typed schema.
    let reparsed: serde_json::Value = serde_json::from_str(&record.to_json()).unwrap();
    let original: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        reparsed, original,
        "run.json has fields the schema does not know"
    );
    record
}

/// The plain-HTTP ceiling beside the first suite's point: sendfile on and off,
/// nginx serving whole 1 MiB files without TLS, counted by nginx as by the client.
fn check_plain_ceiling(sweep: &cipherbench_model::tls::SweepResults) {
    let plain: Vec<&str> = sweep
        .plain_points
        .iter()
        .map(|p| p.variant.as_str())
        .collect();
    assert_eq!(
        plain,
        ["http-sendfile", "http-copy"],
        "{:?}",
        sweep.plain_points
    );
    for p in &sweep.plain_points {
        assert!(p.requests > 0 && p.errors == 0, "{p:?}");
        assert_eq!(p.negotiated_suite, None);
        assert_eq!(p.server_requests, Some(p.requests_sent), "{p:?}");
        assert_eq!(p.body_bytes, p.requests_ok_total << 20, "{p:?}");
        assert!(p.verification.is_none());
    }
}

/// Cycles per byte at the clock measured in the run.
fn check_cycles(speed: &cipherbench_model::speed::SpeedResults) {
    // AES-256-CBC encryption is serial: each 16-byte block waits for 14 dependent
    // AESENC, none faster than 3 cycles on any x86 core with AES-NI, so it cannot
    // take under 14 x 3 / 16 = 2.6 cycles a byte. A clock read too slow (the nominal TSC rate instead of the
    // core's boosted one) would put it below.
    let clock = speed.clock.as_ref().expect("the core's clock, measured");
    assert!(clock.after_hz.is_some(), "{clock:?}");
    let cycles = |cipher: &str, variant: &str| {
        speed
            .point(cipher, variant, Direction::Encrypt, 16384, 1)
            .and_then(|p| p.cycles_per_byte(clock.hz()))
            .unwrap()
    };
    let cbc = cycles("aes-256-cbc", "accel");
    assert!(
        cbc >= 14.0 * 3.0 / 16.0,
        "AES-256-CBC at {cbc} cycles per byte: {clock:?}"
    );
    assert!(cycles("aes-128-gcm", "accel") < cycles("aes-128-gcm", "noaesni"));
}

/// The full preset's plan, every part of it, runs end to end (its lengths cut to the
/// tiny preset's by `--rehearse`), and what it records is valid against the
/// published schema: the parts only the full preset has (the cross-check with
/// `openssl speed`, every file tool, decryption, several TLS sizes, UDP through the
/// tunnel, repeated tunnel runs) included.
#[test]
fn the_full_preset_rehearses_end_to_end_into_a_valid_record() {
    let _turn = crate::turn!();
    let dir = scratch("rehearse");
    let out = bin()
        .args([
            "run",
            "--preset",
            "full",
            "--rehearse",
            "--quiet",
            "--results",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let record = check_record(&dir);
    assert_eq!(record.preset, "full");
    assert!(record.rehearsal && !record.interrupted && record.finished_at.is_some());
    let speed = record.speed.expect("speed results");
    let ciphers: std::collections::BTreeSet<&str> = speed
        .points
        .iter()
        .map(|p| p.cipher.as_str())
        .chain(speed.unavailable.iter().map(|u| u.cipher.as_str()))
        .collect();
    assert_eq!(
        ciphers.len(),
        cipherbench_crypto::catalogue::ALL.len(),
        "every cipher measured or said unavailable: {ciphers:?}"
    );
    for d in [Direction::Encrypt, Direction::Decrypt] {
        assert!(speed.points.iter().any(|p| p.direction == d), "{d:?}");
    }
    assert!(
        !speed.openssl_checks.is_empty(),
        "the full preset's cross-check"
    );
    let file = record.file.expect("file results");
    let tools: std::collections::BTreeSet<&str> =
        file.points.iter().map(|p| p.tool.as_str()).collect();
    assert!(
        tools.len() >= 5,
        "the full preset's every file tool: {tools:?}"
    );
    assert!(file
        .points
        .iter()
        .any(|p| p.direction == Direction::Decrypt));
    let tls = record.tls.expect("tls results");
    let sweep = tls.sweep.expect("sweep results");
    let sizes: std::collections::BTreeSet<u64> =
        sweep.points.iter().map(|p| p.size_bytes).collect();
    assert_eq!(sizes.into_iter().collect::<Vec<_>>(), [1 << 20, 4 << 20]);
    assert!(!sweep.plain_points.is_empty());
    assert_eq!(tls.ramp.expect("ramp results").runs.len(), 4);
    let tunnel = record.tunnel.expect("tunnel results");
    for protocol in ["tcp", "udp"] {
        assert!(
            tunnel
                .points
                .iter()
                .any(|p| format!("{:?}", p.protocol).eq_ignore_ascii_case(protocol)),
            "{protocol}"
        );
    }
    assert!(tunnel.points.iter().all(|p| p.runs.len() == 2));
    // Said wherever its figures are shown.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("rehearsal: every part"), "{stdout}");
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(summary.contains("**Rehearsal**"), "{summary}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("A rehearsal:"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_main_job_runs_end_to_end_in_the_tiny_preset() {
    let _turn = crate::turn!();
    let dir = scratch("tiny");
    let out = bin()
        .args(["run", "--preset", "tiny", "--quiet", "--results"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let record = check_record(&dir);
    assert_eq!(record.preset, "tiny");
    assert!(!record.interrupted);
    assert!(record.finished_at.is_some());
    assert!(record.environment.openssl.cpu_settings.is_some());
    let speed = record.speed.expect("speed results");
    assert_eq!(speed.points.len(), 12, "3 ciphers x 2 sizes x 2 variants");
    for p in &speed.points {
        assert_eq!(p.samples.len(), 3);
        // Three rounds of one sample each, the variants alternating between them.
        assert_eq!(p.sample_rounds, [0, 1, 2], "{p:?}");
        assert!(p
            .samples
            .iter()
            .all(|s| s.bytes == s.ops * p.size_bytes && s.ops > 0));
        assert!(p.throughput_bytes_per_sec.median > 0.0);
    }
    let noaesni = speed.variants.iter().find(|v| v.name == "noaesni").unwrap();
    assert!(noaesni.took_effect && !noaesni.aesni, "{noaesni:?}");
    check_cycles(&speed);
    assert!(!speed.controls.is_empty());
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("id=\"fig-relative\"") && html.contains("id=\"fig-aesni-control\""));
    let csv = std::fs::read_to_string(dir.join("speed.csv")).unwrap();
    assert_eq!(csv.lines().count(), 13);
    let file = record.file.expect("file results (layer 2)");
    assert!(
        !file.points.is_empty() && file.verified("cipherbench"),
        "{:?}",
        file.checks
    );
    assert!(html.contains("id=\"fig-file-encrypt-warm-fsync\""));
    assert!(dir.join("file.csv").exists());
    // Layer 3: both seed suites swept at 1 MiB, one ramp.
    let tls = record.tls.expect("tls results");
    let sweep = tls.sweep.expect("sweep results");
    assert_eq!(sweep.points.len(), 2);
    for p in &sweep.points {
        assert!(p.requests > 0, "{p:?}");
        assert_eq!(p.negotiated_suite.as_deref(), Some(p.suite.as_str()));
    }
    check_plain_ceiling(&sweep);
    assert_eq!(tls.ramp.expect("ramp results").runs[0].attempted, 50);
    assert!(html.contains("id=\"fig-tls-throughput-1\"") && html.contains("id=\"table-tls-ramp\""));
    assert_eq!(
        std::fs::read_to_string(dir.join("tls.csv"))
            .unwrap()
            .lines()
            .count(),
        3
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("ratio") && stdout.contains("report.html"),
        "{stdout}"
    );

    // `report` re-renders from run.json alone.
    std::fs::remove_file(dir.join("report.html")).unwrap();
    let out = bin().arg("report").arg(&dir).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(dir.join("report.html").exists());
    // A capacity target: the page plans for it, run.json is left as it was.
    let before = std::fs::read(dir.join("run.json")).unwrap();
    let out = bin()
        .args(["report", "--target-gbps", "40"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("cores for 40 Gbit/s"));
    assert_eq!(std::fs::read(dir.join("run.json")).unwrap(), before);
    let out = bin()
        .args(["report", "--target-gbps", "0"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_one_line_error(&out, "--target-gbps must be a positive number");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_sweep_rate_must_be_positive_and_not_beside_a_concurrency() {
    let _turn = crate::turn!();
    let dir = scratch("bad-rate");
    for rate in ["0", "-5", "nan", "2000000"] {
        let out = bin()
            .args(["tls", "sweep", &format!("--rate={rate}"), "--results"])
            .arg(&dir)
            .output()
            .unwrap();
        assert_one_line_error(&out, "--rate must be above 0");
    }
    let out = bin()
        .args(["tls", "sweep", "--rate", "50", "--concurrency", "4"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("cannot be used with"),
        "{}",
        stderr(&out)
    );
    assert!(
        !dir.exists(),
        "a results directory was created for bad input"
    );
}

#[test]
fn a_sweep_rate_whose_window_holds_no_request_is_refused() {
    let _turn = crate::turn!();
    let dir = scratch("rate-window");
    let out = bin()
        .args([
            "tls",
            "sweep",
            "--rate",
            "0.5",
            "--window",
            "1s",
            "--results",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert_one_line_error(
        &out,
        "the window holds under one request at this rate: raise --rate or --window",
    );
    assert!(
        !dir.exists(),
        "a results directory was created for bad input"
    );
}

#[test]
fn generator_cpus_are_a_cpu_list_and_must_leave_nginx_a_cpu() {
    let _turn = crate::turn!();
    let dir = scratch("generator-cpus");
    for (list, needle) in [
        (
            "a",
            "'a' is not a CPU number or range: give CPU numbers and ranges, e.g. 0-3,8,10-11",
        ),
        ("", "--generator-cpus: empty: give CPU numbers and ranges"),
        ("0,0", "CPU 0 is given twice"),
    ] {
        let out = bin()
            .args([
                "tls",
                "sweep",
                &format!("--generator-cpus={list}"),
                "--results",
            ])
            .arg(&dir)
            .output()
            .unwrap();
        assert_one_line_error(&out, needle);
    }
    // Every CPU this process may use, as the kernel lists them (a range, typically):
    // nothing is left for nginx, and that is what is said.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let all = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string();
    let out = bin()
        .args([
            "tls",
            "sweep",
            "--cores",
            "1",
            "--generator-cpus",
            &all,
            "--results",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert_one_line_error(&out, "leaving none for nginx");
    assert!(!stderr(&out).contains("use --cores"), "{}", stderr(&out));
    assert!(
        !dir.exists(),
        "a results directory was created for bad input"
    );
}

#[test]
fn report_refuses_a_directory_without_a_run() {
    let _turn = crate::turn!();
    let dir = scratch("empty");
    std::fs::create_dir_all(&dir).unwrap();
    let out = bin().arg("report").arg(&dir).output().unwrap();
    assert_one_line_error(&out, "run.json");
    std::fs::write(
        dir.join("run.json"),
        r#"{"schema":"cipherbench.run","schema_version":999}"#,
    )
    .unwrap();
    let out = bin().arg("report").arg(&dir).output().unwrap();
    assert_one_line_error(&out, "newer than this cipherbench understands");
    std::fs::write(
        dir.join("run.json"),
        r#"{"schema":"cipherbench.run","schema_version":0}"#,
    )
    .unwrap();
    let out = bin().arg("report").arg(&dir).output().unwrap();
    assert_one_line_error(&out, "older than the oldest this cipherbench reads");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ctrl_c_keeps_what_was_measured() {
    let _turn = crate::turn!();
    let dir = scratch("sigint");
    let mut child = bin()
        .args([
            "speed",
            "--cipher",
            "aes-128-gcm,aes-256-gcm,chacha20-poly1305",
            "--sizes",
            "1KiB",
            "--threads",
            "1",
            "--direction",
            "encrypt",
            "--sample-ms",
            "200",
            "--samples",
            "3",
            "--results",
        ])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the first cipher's results are saved, then interrupt.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !dir.join("run.json").exists()
        || std::fs::read_to_string(dir.join("run.json"))
            .map(|t| !t.contains("\"points\": [\n      {"))
            .unwrap_or(true)
    {
        assert!(Instant::now() < deadline, "no results saved");
        std::thread::sleep(Duration::from_millis(20));
    }
    let workers = children_of(child.id());
    // SAFETY: kill with a valid pid of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let record = check_record(&dir);
    assert!(record.interrupted);
    let speed = record.speed.unwrap();
    assert!(!speed.points.is_empty());
    assert!(speed.points.len() < 6, "it should have stopped early");
    assert!(dir.join("report.html").exists());
    // No worker left behind.
    for pid in workers {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let running = !stat.is_empty()
            && !stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z');
        assert!(!running, "worker {pid} left running");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ctrl_c_inside_one_ciphers_run_keeps_its_finished_points() {
    let _turn = crate::turn!();
    // One cipher and variant is one worker process streaming its points: Ctrl-C
    // after its first point must keep that point, not only whole workers' results.
    let dir = scratch("sigint-chunk");
    let mut child = bin()
        .args([
            "speed",
            "--cipher",
            "aes-128-gcm",
            "--variants",
            "accel",
            "--sizes",
            "16B,64B,256B,1KiB,8KiB,16KiB",
            "--threads",
            "1",
            "--direction",
            "encrypt",
            "--sample-ms",
            "300",
            "--samples",
            "3",
            "--results",
        ])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        let n = std::io::BufRead::read_line(&mut stderr, &mut line).unwrap();
        assert!(n > 0, "speed ended before its first point");
        if line.starts_with("[speed 1/") {
            break;
        }
    }
    // SAFETY: kill with a valid pid of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let record = check_record(&dir);
    assert!(record.interrupted);
    let points = record.speed.expect("the finished points are saved").points;
    assert!(
        !points.is_empty() && points.len() < 6,
        "{} points",
        points.len()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Pids whose parent is `parent`.
fn children_of(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let ppid = status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .and_then(|v| v.trim().parse::<u32>().ok());
        if ppid == Some(parent) {
            out.push(pid);
        }
    }
    out
}

#[test]
fn bad_tunnel_flags_are_refused_before_anything_starts() {
    let _turn = crate::turn!();
    let dir = scratch("bad-tunnel");
    for (args, needle) in [
        (
            &["--transforms", "aes128-gcm,rot13"][..],
            "--transforms: unknown ESP transform",
        ),
        (&["--underlay-rate", "1gbps"][..], "unknown unit"),
        (&["--variants", "fast"][..], "unknown variant 'fast'"),
        (&["--length", "12"][..], "--length"),
        (
            &["--tcp-length", "2000000"][..],
            "--tcp-length: '2000000' is not 16 to 1048576 bytes or 'default'",
        ),
        // UDP among the protocols (the default): iperf3's UDP maximum.
        (
            &["--length", "65536"][..],
            "--length 65536: iperf3 sends at most 65507 bytes per UDP datagram",
        ),
        (
            &["--length", "65508", "--protocols", "tcp,udp"][..],
            "--length 65508: iperf3 sends at most 65507",
        ),
        (&["--mtu", "9000"][..], "--mtu"),
        (&["--target-loss", "90"][..], "--target-loss"),
        (
            &["--gateway-threads", "0"][..],
            "--gateway-threads must be between 1 and 64",
        ),
        (
            &["--gateway-threads", "65"][..],
            "--gateway-threads must be between 1 and 64",
        ),
        (
            &["--parallel", "0"][..],
            "--parallel must be between 1 and 128",
        ),
    ] {
        let out = bin()
            .arg("tunnel")
            .args(args)
            .arg("--results")
            .arg(&dir)
            .output()
            .unwrap();
        assert_one_line_error(&out, needle);
        assert!(
            !dir.exists(),
            "a results directory was created for bad input"
        );
    }
}

#[test]
fn an_unfinished_run_resumes_without_measuring_again() {
    let _turn = crate::turn!();
    let dir = scratch("resume");
    let first = bin()
        .args(["run", "--preset", "tiny", "--quiet", "--results"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(first.status.success(), "{}", stderr(&first));
    // Make it look like a run interrupted after its first layer.
    let path = dir.join("run.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let speed_before = json["speed"].clone();
    json["interrupted"] = true.into();
    json["finished_at"] = serde_json::Value::Null;
    json["completed_layers"] = serde_json::json!(["speed"]);
    for layer in ["file", "tls", "tunnel"] {
        json.as_object_mut().unwrap().remove(layer);
    }
    std::fs::write(&path, serde_json::to_string_pretty(&json).unwrap()).unwrap();

    let second = bin()
        .args(["run", "--preset", "tiny", "--quiet", "--results"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(second.status.success(), "{}", stderr(&second));
    let record = check_record(&dir);
    let after: serde_json::Value = serde_json::to_value(&record.speed).unwrap();
    assert_eq!(after, speed_before, "speed was measured again");
    assert!(
        record.file.is_some() && record.tls.is_some(),
        "the missing layers ran"
    );
    assert!(!record.interrupted && record.finished_at.is_some());
    assert!(record.warnings.iter().any(|w| w.kind == "resumed"));

    // A finished run is not resumed, nor overwritten.
    let third = bin()
        .args(["run", "--preset", "tiny", "--quiet", "--results"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_one_line_error(&third, "already holds a finished run");
    // Another preset's unfinished run is refused too.
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    json["interrupted"] = true.into();
    std::fs::write(&path, serde_json::to_string_pretty(&json).unwrap()).unwrap();
    let fourth = bin()
        .args(["run", "--preset", "quick", "--quiet", "--results"])
        .arg(&dir)
        .output()
        .unwrap();
    // ... naming the command that resumes it.
    assert_one_line_error(
        &fourth,
        &format!(
            "resume it with `cipherbench run --preset tiny --results {}`",
            dir.display()
        ),
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_esp_keylog_others_could_read_is_refused_before_anything_starts() {
    let _turn = crate::turn!();
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("keylog");
    std::fs::create_dir_all(&dir).unwrap();
    let results = dir.join("results");
    let readable = dir.join("readable.keys");
    std::fs::write(&readable, "").unwrap();
    std::fs::set_permissions(&readable, std::fs::Permissions::from_mode(0o644)).unwrap();
    let private = dir.join("private.keys");
    std::fs::write(&private, "").unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = dir.join("link.keys");
    std::os::unix::fs::symlink(&private, &link).unwrap();
    for (keylog, needle) in [
        (readable.clone(), "others may read or write it (mode 644)"),
        (link, "symbolic link"),
        (dir.clone(), "not a regular file"),
        (dir.join("missing/esp.keys"), "does not exist"),
    ] {
        let out = bin()
            .args(["tunnel", "--esp-keylog"])
            .arg(&keylog)
            .arg("--results")
            .arg(&results)
            .output()
            .unwrap();
        assert_one_line_error(&out, needle);
        assert!(!results.exists(), "a results directory for bad input");
    }
    assert_eq!(std::fs::read_to_string(&readable).unwrap(), "");
    assert_eq!(std::fs::read_to_string(&private).unwrap(), "");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_speed_run_stopped_between_rounds_measures_the_cipher_again_whole_on_resume() {
    let _turn = crate::turn!();
    let dir = scratch("rounds-resume");
    let args = [
        "speed",
        "--cipher",
        "aes-128-gcm",
        "--variants",
        "accel,noaesni",
        "--sizes",
        "16B,16KiB",
        "--threads",
        "1",
        "--direction",
        "encrypt",
        "--sample-ms",
        "150",
        "--samples",
        "3",
        "--rounds",
        "3",
        "--results",
    ];
    let mut child = bin()
        .args(args)
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Rounds of two workers of two points each: the fifth point is round 2's first.
    let mut progress = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        let n = std::io::BufRead::read_line(&mut progress, &mut line).unwrap();
        assert!(n > 0, "speed ended before its fifth point");
        if line.starts_with("[speed 5/") {
            assert!(line.contains("(round 2/3)"), "{line}");
            break;
        }
    }
    // SAFETY: kill with a valid pid of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let record = check_record(&dir);
    assert!(record.interrupted);
    let partial = record.speed.unwrap().points;
    assert!(partial.iter().any(|p| p.samples.len() < 3), "{partial:?}");

    let out = bin().args(args).arg(&dir).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let record = check_record(&dir);
    assert!(!record.interrupted);
    let points = record.speed.unwrap().points;
    assert_eq!(points.len(), 4);
    for p in &points {
        assert_eq!(p.samples.len(), 3, "{p:?}");
        assert_eq!(p.sample_rounds, [0, 1, 2], "{p:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn namespace_only_tunnel_flags_are_refused_with_peer_before_any_ssh() {
    let _turn = crate::turn!();
    let dir = scratch("peer-flags");
    for (flags, needle) in [
        (&["--underlay-rate", "1gbit"][..], "--underlay-rate shapes"),
        (&["--variant-side", "sender"][..], "--variant-side applies"),
        (
            &["--stack", "own,strongswan"][..],
            "--stack strongswan runs",
        ),
    ] {
        let out = bin()
            .args(["tunnel", "--peer", "nosuchhost.invalid"])
            .args(flags)
            .arg("--results")
            .arg(&dir)
            .output()
            .unwrap();
        assert_one_line_error(&out, needle);
        assert!(!dir.exists(), "{flags:?} left {}", dir.display());
    }
}

/// `scripts/bench-many-cores.sh` with `PLAN=N`: the plan for a machine of N CPUs, run
/// nowhere. Issue 12 asks for the whole comparison in under 10 minutes on the users'
/// servers of 16 to 128 cores: the rows and core counts must be sized to them, and the
/// plan's length (from the steps' times measured here) must fit.
#[test]
fn the_many_cores_script_plans_a_big_machine_within_ten_minutes() {
    let _turn = crate::turn!();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bench-many-cores.sh");
    let plan = |cpus: &str, extra: &[(&str, &str)]| {
        let mut c = Command::new("bash");
        c.arg(&script).env("PLAN", cpus).env_remove("PARTS");
        for (k, v) in extra {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let seconds = |text: &str| -> u64 {
        let after = text.split("about ").last().unwrap();
        after.split(' ').next().unwrap().parse().unwrap()
    };
    for (cpus, rows, cores, measured) in [
        ("2", "1+1:", "--cores 1,2 ", "keeps a CPU: 1)"),
        (
            "16",
            "1+1, 1+4, 4+8:",
            "--cores 1,2,4,8,16 ",
            "keeps a CPU: 1,2,4,8)",
        ),
        (
            "128",
            "1+1, 1+4, 4+8, 8+16, 16+32, 32+64:",
            "--cores 1,2,4,8,16,32,64,128 ",
            "keeps a CPU: 1,2,4,8,16,32,64)",
        ),
    ] {
        let out = plan(cpus, &[]);
        assert!(out.status.success(), "{}", stderr(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.starts_with(&format!("plan for {cpus} CPU(s)")),
            "{text}"
        );
        for want in [rows, cores, measured] {
            assert!(text.contains(want), "{want:?} not in {text}");
        }
        assert!(seconds(&text) < 600, "{cpus} CPUs: {text}");
    }
    // Longer rounds lengthen the plan; only the parts asked for are in it.
    let long = plan("128", &[("SECS", "30")]);
    let text = String::from_utf8_lossy(&long.stdout);
    assert!(seconds(&text) > 600, "{text}");
    let out = plan("16", &[("PARTS", "sweep")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("B. tls sweep") && !text.contains("A. ") && !text.contains("C. "));
    // Bad settings: one line, exit 2, before anything runs.
    for (k, v, needle) in [
        ("PLAN", "many", "PLAN is a number of CPUs"),
        ("PARTS", "gen bogus", "unknown part 'bogus'"),
        ("SECS", "0", "SECS must be a whole number"),
        (
            "SWEEP_WINDOW",
            "soon",
            "SWEEP_WINDOW and SWEEP_PROBE are durations",
        ),
    ] {
        let mut c = Command::new("bash");
        c.arg(&script).env("PLAN", "16").env(k, v);
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{k}={v}: {}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{k}={v}: {err}");
        assert!(out.stdout.is_empty());
    }
}

/// With `--json`, stdout is the results document alone (a script can parse it);
/// where the results went is said on stderr.
#[test]
fn with_json_stdout_holds_the_document_alone() {
    let dir = scratch("json-alone");
    let results = dir.join("results");
    let out = bin()
        .args(["-q", "speed", "--cipher", "aes-128-gcm", "--sizes", "1KiB"])
        .args([
            "--threads",
            "1",
            "--samples",
            "1",
            "--sample-ms",
            "20",
            "--json",
        ])
        .arg("--results")
        .arg(&results)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert!(doc["points"].as_array().is_some_and(|p| !p.is_empty()));
    assert!(stderr(&out).contains(&format!("results: {}", results.display())));
    let _ = std::fs::remove_dir_all(&dir);
}
