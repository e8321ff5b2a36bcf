//! Layer 3 end to end, against the real nginx on loopback: a sweep point and a short
//! ramp whose counts match what nginx counted, for both seed suites; the negotiated
//! suite read back; bad input refused in one line with nothing left behind (no
//! nginx, no temporary directory); Ctrl-C during a sweep keeps what was measured
//! and stops nginx.
//!
//! Each test runs cipherbench with its own `TMPDIR`, so "nothing left behind" is
//! checked exactly: that directory must end empty, and no process may still have
//! its working directory under it (nginx runs in its temporary directory).

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use crate::common::{
    assert_nothing_left, assert_one_line_error, bin_in as bin, processes_in, scratch, stderr,
};
use cipherbench_model::tls::SweepResults;
use cipherbench_model::RunRecord;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::schema::record;

/// A run's sweep.
fn sweep_of(r: &RunRecord) -> &SweepResults {
    let tls = r.tls.as_ref().expect("tls results");
    tls.sweep.as_ref().expect("sweep results")
}

/// `tls MODE` measuring `suites` at `sizes` in `variants`, what every measuring test
/// here names; its own options follow.
fn tls_args<'a>(mode: &'a str, suites: &'a str, sizes: &'a str, variants: &'a str) -> Vec<&'a str> {
    vec![
        "tls",
        mode,
        "--suites",
        suites,
        "--sizes",
        sizes,
        "--variants",
        variants,
    ]
}

/// Runs cipherbench with `args` and `--results RESULTS`, with `dir`'s TMPDIR; asserts
/// it succeeded (its stderr the message) and hands back its output and the record
/// it wrote.
fn measure(dir: &Path, args: &[&str], results: &Path) -> (Output, RunRecord) {
    let out = bin(dir)
        .args(args)
        .arg("--results")
        .arg(results)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let r = record(results);
    (out, r)
}

/// The end of a test: nothing left in its scratch directory, which is removed.
fn finish(dir: &Path) {
    assert_nothing_left(dir);
    std::fs::remove_dir_all(dir).unwrap();
}

const SIZE: u64 = 256 * 1024;

#[test]
fn a_sweep_point_counts_what_nginx_served_for_both_seed_suites() {
    let _turn = crate::turn!();
    let dir = scratch("tls", "sweep");
    let results = dir.join("results");
    let mut args = tls_args("sweep", "AES128-SHA,AES128-GCM-SHA256", "256KiB", "accel");
    args.extend(["--window", "600ms", "--probe", "250ms", "--warmup", "100ms"]);
    args.extend(["--max-concurrency", "2", "--quiet"]);
    let (out, r) = measure(&dir, &args, &results);
    let tls = r.tls.as_ref().expect("tls results");
    let sweep = sweep_of(&r);
    assert_eq!(sweep.points.len(), 2);
    for p in &sweep.points {
        // The client negotiated exactly the suite asked for, read back from its session.
        assert_eq!(p.negotiated_suite.as_deref(), Some(p.suite.as_str()));
        assert_eq!(p.negotiated_protocol.as_deref(), Some("TLSv1.2"));
        assert_eq!(p.errors, 0, "{:?}", p.errors_by_reason);
        assert_eq!(p.cancelled, 0);
        // nginx counted exactly the requests the generator sent, and every response
        // carried the whole file.
        assert_eq!(p.server_requests, Some(p.requests_sent), "{p:?}");
        assert_eq!(p.requests_ok_total, p.requests_sent);
        assert_eq!(p.body_bytes, p.requests_ok_total * SIZE);
        assert!(p.requests > 0 && p.throughput_bytes_per_sec > 0.0);
        assert!(
            p.server_cpu
                .as_ref()
                .is_some_and(|c| c.per_worker.len() == 1 && c.total > 0.0),
            "{:?}",
            p.server_cpu
        );
        assert!(!p.probes.is_empty());
    }
    let servers: Vec<_> = tls
        .servers
        .iter()
        .map(|s| (s.suite.as_str(), s.variant.name.as_str()))
        .collect();
    assert_eq!(
        servers,
        vec![("AES128-SHA", "accel"), ("AES128-GCM-SHA256", "accel")]
    );
    assert!(tls
        .servers
        .iter()
        .all(|s| s.variant.took_effect && s.config.contains("env OPENSSL_ia32cap;")));
    // accel judged by effect: probes from a child with nginx's environment, and the
    // started nginx's own processes checked to run without the variable.
    for s in &tls.servers {
        let probes = s.variant.probes.as_ref().expect("nginx's probes");
        assert!(probes.measured_in.contains("nginx"), "{probes:?}");
        let check = s.variant.process_check.as_ref().expect("nginx checked");
        assert!(check.passed, "{check:?}");
        assert!(check.detail.contains("unset"), "{check:?}");
    }
    // The placement: nginx's worker and the generator on CPUs of different cores,
    // nginx's master restricted to its worker's CPUs; each point's noise window on
    // exactly the CPUs the placement used.
    for s in &tls.servers {
        let p = s.placement.as_ref().expect("the placement in run.json");
        assert_eq!(p.cpus_of("nginx"), Some(s.server_cpus.as_slice()));
        assert_eq!(p.cpus_of("generator"), Some(s.generator_cpus.as_slice()));
        assert!(s.server_cpus.iter().all(|c| !s.generator_cpus.contains(c)));
    }
    for p in &sweep.points {
        let noise = p.noise.as_ref().expect("a noise record per point");
        let placement = tls.servers[0].placement.as_ref().unwrap();
        assert_eq!(noise.cpus, placement.all_cpus());
    }
    let csv = std::fs::read_to_string(results.join("tls.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3);
    assert!(String::from_utf8_lossy(&out.stdout).contains("GCM / CBC-SHA1"));
    finish(&dir);
}

#[test]
fn the_sampled_path_reads_large_responses_opening_a_share_and_all_decrypts_every_byte() {
    let _turn = crate::turn!();
    let dir = scratch("tls", "sampled");
    // TLS 1.2 (explicit GCM nonces) and 1.3 (hidden types, session tickets first).
    let suites = "AES128-GCM-SHA256,TLS_AES_128_GCM_SHA256";
    for (verify, rate) in [("sampled", "0.25"), ("all", "0.25")] {
        let results = dir.join(format!("results-{verify}"));
        let mut args = tls_args("sweep", suites, "4MiB", "accel");
        args.extend(["--concurrency", "2", "--window", "1s", "--warmup", "200ms"]);
        args.extend(["--verify", verify, "--sample-rate", rate, "--quiet"]);
        let (out, r) = measure(&dir, &args, &results);
        let sweep = sweep_of(&r);
        assert_eq!(sweep.points.len(), 2);
        for p in &sweep.points {
            assert_eq!(p.errors, 0, "{verify}: {:?}", p.errors_by_reason);
            assert_eq!(p.server_requests, Some(p.requests_sent), "{p:?}");
            assert_eq!(p.body_bytes, p.requests_ok_total * 4 * 1024 * 1024);
            let v = p.verification.expect("how the responses were read");
            let sent = p.requests_sent;
            if verify == "all" {
                assert!(!v.sampled && v.sampled_responses == 0, "{v:?}");
                assert_eq!(v.openssl_responses, sent, "{v:?}");
                continue;
            }
            // Every response by sample; a 4 MiB body is 256 full records, of which
            // about a quarter are opened (the rest discarded unread), with the head's,
            // the last and one response in 64 whole on top.
            assert!(
                v.sampled && v.sampled_responses == sent && v.openssl_responses == 0,
                "{v:?}"
            );
            assert!(v.records_discarded > 0 && v.records_opened > 0, "{v:?}");
            let share = v.opened_share().unwrap();
            assert!(
                (0.15..0.6).contains(&share),
                "{} opened {share}: {v:?}",
                p.suite
            );
            // What was opened was compared with the file.
            assert!(
                v.bytes_compared > 0 && v.bytes_compared <= v.bytes_opened,
                "{v:?}"
            );
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let said = if verify == "all" {
            "read whole through OpenSSL"
        } else {
            "by sample"
        };
        assert!(
            stdout.contains("responses checked: ") && stdout.contains(said),
            "{stdout}"
        );
    }
    finish(&dir);
}

#[test]
fn a_ramp_of_large_responses_reads_them_by_sample_unless_all_is_asked() {
    let _turn = crate::turn!();
    let dir = scratch("tls", "ramp-sampled");
    for verify in ["sampled", "all"] {
        let results = dir.join(format!("results-{verify}"));
        let mut args = tls_args("ramp", "TLS_AES_128_GCM_SHA256", "1MiB", "accel");
        args.extend(["--rate", "16", "--duration", "1s", "--timeout", "5s"]);
        args.extend(["--verify", verify, "--quiet"]);
        let (out, r) = measure(&dir, &args, &results);
        let ramp = r.tls.unwrap().ramp.unwrap();
        let run = &ramp.runs[0];
        assert_eq!(run.attempted, 8, "0 -> 16 req/s over 1 s starts 8");
        assert_eq!(run.successful, run.attempted, "{run:?}");
        assert_eq!(run.body_bytes, run.successful << 20);
        let v = run.verification.expect("how the responses were read");
        if verify == "all" {
            assert!(!v.sampled && v.sampled_responses == 0, "{v:?}");
            assert_eq!(v.openssl_responses, run.requests_sent, "{v:?}");
        } else {
            assert!(v.sampled && v.openssl_responses == 0, "{v:?}");
            assert_eq!(v.sampled_responses, run.requests_sent, "{v:?}");
            assert!(v.records_discarded > 0 && v.bytes_compared > 0, "{v:?}");
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("responses checked: "), "{stdout}");
    }
    finish(&dir);
}

#[test]
fn a_short_ramp_counts_what_nginx_served_in_both_variants() {
    let _turn = crate::turn!();
    let dir = scratch("tls", "ramp");
    let results = dir.join("results");
    let mut args = tls_args(
        "ramp",
        "AES128-SHA,AES128-GCM-SHA256",
        "1KiB",
        "accel,noaesni",
    );
    args.extend(["--rate", "40", "--duration", "1s", "--quiet"]);
    let (_, r) = measure(&dir, &args, &results);
    let ramp = r.tls.unwrap().ramp.unwrap();
    assert_eq!(ramp.runs.len(), 4);
    for run in &ramp.runs {
        assert_eq!(run.attempted, 20, "0 -> 40 req/s over 1 s starts 20");
        assert_eq!(run.successful + run.unsuccessful, run.attempted);
        assert_eq!(run.negotiated_suite.as_deref(), Some(run.suite.as_str()));
        assert_eq!(run.server_requests, Some(run.requests_sent));
        assert_eq!(run.body_bytes, run.successful * 1024);
        assert_eq!(run.series.iter().map(|s| s.attempted).sum::<u64>(), 20);
    }
    let noaesni = record(&results)
        .tls
        .unwrap()
        .servers
        .into_iter()
        .find(|s| s.variant.name == "noaesni")
        .unwrap();
    assert!(
        noaesni.variant.took_effect && !noaesni.variant.aesni,
        "{:?}",
        noaesni.variant
    );
    // Judged by effect: the probe child with nginx's environment saw AES-GCM fall and
    // the controls hold, and nginx's master and workers carry the same mask (read
    // from their memory: nginx writes its title over its environment block).
    let effect = noaesni.variant.effect.as_ref().expect("a verdict");
    assert_eq!(
        effect.verdict,
        cipherbench_model::variant::Verdict::TookEffect,
        "{}",
        effect.reason
    );
    // AES-GCM, ChaCha20-Poly1305, 3DES and the three public-key probes (controls of
    // noaesni, which must leave RSA and ECDH alone).
    assert_eq!(effect.ratios.len(), 6, "{effect:?}");
    assert!(effect
        .ratios
        .iter()
        .any(|r| r.cipher == "rsa2048-sign" && !r.moved));
    let check = noaesni
        .variant
        .process_check
        .as_ref()
        .expect("nginx checked");
    assert!(check.passed, "{check:?}");
    assert!(
        check
            .detail
            .contains(noaesni.variant.ia32cap_env.as_deref().unwrap()),
        "{check:?}"
    );
    assert!(
        std::fs::read_to_string(results.join("tls-ramp.csv"))
            .unwrap()
            .lines()
            .count()
            > 1
    );
    finish(&dir);
}

#[test]
fn a_core_sweep_measures_the_counts_that_fit_and_says_why_the_others_were_not() {
    let _turn = crate::turn!();
    let dir = scratch("tls", "cores");
    let results = dir.join("results");
    // nginx on every CPU this process has leaves none for the generator: skipped,
    // said, and the command still measures --cores 1 against a real nginx.
    let all = std::thread::available_parallelism()
        .unwrap()
        .get()
        .to_string();
    let cores = format!("1,{all}");
    let mut args = tls_args("sweep", "AES128-GCM-SHA256", "1MiB", "accel");
    args.extend(["--cores", &cores, "--max-concurrency", "4"]);
    args.extend(["--window", "600ms", "--probe", "250ms", "--warmup", "100ms"]);
    let (out, r) = measure(&dir, &args, &results);
    let sweep = sweep_of(&r);
    assert_eq!(sweep.points.len(), 1);
    let p = &sweep.points[0];
    assert_eq!(p.cores, 1);
    assert_eq!(p.errors, 0, "{:?}", p.errors_by_reason);
    assert_eq!(p.server_requests, Some(p.requests_sent), "{p:?}");
    // Every generator thread's CPU, in the point and in each probe.
    assert_eq!(p.generator_cpu_per_thread.len(), p.generator_threads);
    assert!(p
        .generator_cpu_per_thread
        .iter()
        .all(|&c| c > 0.0 && c <= 1.05));
    assert!(
        p.probes
            .iter()
            .all(|q| q.generator_cpu_per_thread.len() == p.generator_threads
                && q.server_cpu.is_some())
    );
    // Why these clients, and which side was the limit.
    let search = p.search.as_ref().expect("the search's outcome");
    assert_eq!(search.started_at, 1);
    assert!(
        search
            .explanation
            .contains(&format!("{} clients", p.concurrency)),
        "{search:?}"
    );
    assert_eq!(sweep.skipped_cores.len(), 1);
    assert_eq!(sweep.skipped_cores[0].cores.to_string(), all);
    assert!(sweep.skipped_cores[0].reason.contains("leaves none"));
    assert!(
        r.warnings.iter().any(|w| w.kind == "cores_skipped"),
        "{:?}",
        r.warnings
    );
    assert!(stderr(&out).contains("skipped"), "{}", stderr(&out));
    let html = std::fs::read_to_string(results.join("report.html")).unwrap();
    assert!(html.contains("id=\"fig-tls-by-cores\"") && html.contains("not measured"));
    finish(&dir);
}

#[test]
fn bad_input_is_one_line_and_leaves_nothing_behind() {
    let _turn = crate::turn!();
    let dir = scratch("tls", "bad");
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = holder.local_addr().unwrap().port().to_string();
    let busy_message = format!("port {busy} on 127.0.0.1 is in use");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["sweep", "--suites", "AES128-SHA,RC4-MD5"],
            "unknown suite 'RC4-MD5'",
        ),
        (vec!["sweep", "--suites", "DES-CBC3-SHA"], "DES-CBC3-SHA"),
        (vec!["ramp", "--port", &busy], &busy_message),
        (
            vec!["sweep", "--nginx", "/nonexistent/nginx"],
            "nginx not found at /nonexistent/nginx",
        ),
        (
            vec!["ramp", "--server", "https://192.0.2.1/f"],
            "--allow-remote",
        ),
        (
            vec!["sweep", "--cores", "64"],
            "leaves none of this machine's",
        ),
        (
            vec!["sweep", "--suites", "ECDHE-ECDSA-AES128-GCM-SHA256"],
            "--key ecdsa-p256",
        ),
    ];
    for (args, needle) in cases {
        let results = dir.join("results");
        let out = bin(&dir)
            .arg("tls")
            .args(&args)
            .args(["--sizes", "1KiB", "--results"])
            .arg(&results)
            .output()
            .unwrap();
        if args.contains(&"DES-CBC3-SHA") && out.status.success() {
            continue; // an OpenSSL with 3DES: nothing to refuse
        }
        assert_one_line_error(&out, needle);
        assert!(!results.exists(), "{args:?} left a results directory");
        assert_nothing_left(&dir);
    }
    drop(holder);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ctrl_c_during_a_sweep_keeps_the_points_and_stops_nginx() {
    let _turn = crate::turn!();
    let dir = scratch("tls", "sigint");
    let results = dir.join("results");
    let mut args = tls_args(
        "sweep",
        "AES128-GCM-SHA256,AES128-SHA",
        "64KiB,128KiB,256KiB",
        "accel",
    );
    args.extend(["--window", "400ms", "--probe", "200ms", "--warmup", "0s"]);
    args.extend(["--max-concurrency", "2"]);
    let mut child = bin(&dir)
        .args(&args)
        .arg("--results")
        .arg(&results)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if saved_points(&results) > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "no point saved");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Wait for the next point's nginx, so the interrupt lands mid-measurement.
    let deadline = Instant::now() + Duration::from_secs(20);
    while processes_in(&dir).len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: kill with the pid of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let r = record(&results);
    assert!(r.interrupted);
    let points = r.tls.unwrap().sweep.unwrap().points;
    assert!(
        !points.is_empty() && points.len() < 6,
        "{} points",
        points.len()
    );
    assert!(results.join("report.html").exists());
    finish(&dir);
}

/// `cipherbench tls serve` of one suite and size on one core, stopped (SIGINT) when
/// dropped, even when an assertion fails first.
struct Serve(std::process::Child);

impl Serve {
    /// Starts it and waits for the URL it prints.
    fn start(dir: &Path, suite: &str, size: &str) -> (Serve, String) {
        let mut serve = bin(dir)
            .args([
                "tls", "serve", "--suite", suite, "--sizes", size, "--cores", "1",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map(Serve)
            .unwrap();
        let mut url = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(serve.0.stdout.take().unwrap()),
            &mut url,
        )
        .unwrap();
        let url = url.trim().to_string();
        assert!(url.starts_with("https://127.0.0.1:"), "{url:?}");
        (serve, url)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        // SAFETY: kill with a valid pid of our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGINT) };
        let _ = self.0.wait();
    }
}

#[test]
fn a_server_that_does_not_serve_the_file_is_refused_by_sweep_and_ramp() {
    let _turn = crate::turn!();
    let dir = scratch("tls", "external-404");
    let (serve, url) = Serve::start(&dir, "AES128-SHA", "1KiB");
    let url = url.as_str();
    let missing = format!("{}/missing", &url[..url.find("/f/").unwrap()]);
    for command in ["sweep", "ramp"] {
        let results = dir.join("results");
        let out = bin(&dir)
            .args([
                "tls",
                command,
                "--server",
                &missing,
                "--suites",
                "AES128-SHA",
            ])
            .arg("--results")
            .arg(&results)
            .output()
            .unwrap();
        assert_one_line_error(&out, "answered 404");
        assert!(!results.exists(), "{command} left a results directory");
    }
    drop(serve);
    finish(&dir);
}

/// wrk, the reference, and the sampled generator load the same nginx (`tls serve`,
/// as `scripts/bench-generator-cost.sh` does): both complete responses without an
/// error, and ours reads them by sample, a record at a time from a server it did not
/// start. (What each costs is a benchmark: docs/BENCHMARKS-tls.md.)
#[test]
fn wrk_and_the_sampled_generator_load_the_same_served_nginx() {
    let _turn = crate::turn!();
    if Command::new("wrk").arg("--version").output().is_err() {
        eprintln!("skipping: wrk is not installed (scripts/install-deps.sh test)");
        return;
    }
    let dir = scratch("tls", "beside-wrk");
    let (serve, url) = Serve::start(&dir, "AES128-GCM-SHA256", "1MiB");
    let wrk = Command::new("wrk")
        .args(["-t1", "-c2", "-d1s", "-H", "Connection: close", &url])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&wrk.stdout);
    assert!(wrk.status.success(), "{text}");
    let rps: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Requests/sec in wrk's output: {text}"));
    assert!(rps > 0.0, "{text}");
    assert!(
        !text.contains("Socket errors") && !text.contains("Non-2xx"),
        "{text}"
    );
    let out = bin(&dir)
        .args([
            "-q",
            "tls",
            "sweep",
            "--server",
            &url,
            "--suites",
            "AES128-GCM-SHA256",
            "--concurrency",
            "2",
            "--window",
            "1s",
            "--warmup",
            "0s",
            "--no-save",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &run["sweep"]["points"][0];
    assert_eq!(p["errors"], 0, "{p}");
    assert!(p["requests"].as_u64().unwrap() > 0, "{p}");
    let v = &p["verification"];
    assert_eq!(v["sampled"], true, "{v}");
    assert!(v["sampled_responses"].as_u64().unwrap() > 0, "{v}");
    // Not ours: nothing to compare with, each record's header read.
    assert_eq!(v["bytes_compared"], 0, "{v}");
    drop(serve);
    finish(&dir);
}

/// The number of sweep points a run has saved so far.
fn saved_points(results: &Path) -> usize {
    std::fs::read_to_string(results.join("run.json"))
        .ok()
        .and_then(|t| RunRecord::from_json(&t).ok())
        .and_then(|r| r.tls)
        .and_then(|t| t.sweep)
        .map_or(0, |s| s.points.len())
}

#[test]
fn a_busy_loop_started_mid_sweep_marks_the_later_point_noisy_machine_with_its_share() {
    let _turn = crate::turn!();
    let dir = scratch("tls", "busy");
    let results = dir.join("results");
    // Where the sweep will put nginx's one worker.
    let topology = cipherbench::machine::topology::this_machine(None);
    let nginx_cpu = cipherbench_model::topology::place_tls(&topology, 1, None)
        .unwrap()
        .server[0];
    // Two points measured one after the other (a point's variants take turns and
    // are saved together, so two sizes, not two variants).
    let mut args = tls_args("sweep", "AES128-GCM-SHA256", "128KiB,256KiB", "accel");
    args.extend(["--concurrency", "2"]);
    args.extend(["--window", "1500ms", "--warmup", "100ms"]);
    args.push("--quiet");
    let mut run = bin(&dir)
        .args(&args)
        .arg("--results")
        .arg(&results)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Mid-run: once the first point (128 KiB) is saved, a busy loop on nginx's CPU, no
    // child of the cipherbench it disturbs; at nice -5 so that compilers running
    // beside the tests do not crowd it out of the busiest processes.
    let deadline = Instant::now() + Duration::from_secs(120);
    while saved_points(&results) < 1 {
        assert!(Instant::now() < deadline, "no first point in 120 s");
        assert!(run.try_wait().unwrap().is_none(), "the sweep ended early");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut hog = Command::new("taskset")
        .args([
            "-c",
            &nginx_cpu.to_string(),
            "nice",
            "-n",
            "-5",
            "sh",
            "-c",
            "while :; do :; done",
        ])
        .spawn()
        .expect("starting taskset (util-linux)");
    let run_pid = run.id();
    let out = run.wait_with_output().unwrap();
    hog.kill().unwrap();
    hog.wait().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let r = record(&results);
    let sweep = sweep_of(&r);
    assert_eq!(sweep.points.len(), 2);
    let (before, after) = (&sweep.points[0], &sweep.points[1]);
    assert_eq!(
        (before.size_bytes, after.size_bytes),
        (128 << 10, 256 << 10)
    );
    // Before the loop: it cannot be among the busiest (it did not exist); the run
    // itself (its generator threads, nginx under it) never is. (Other tests'
    // cipherbench and nginx may be: tests run side by side.)
    let quiet = before.noise.as_ref().expect("noise of the first point");
    for n in [quiet, after.noise.as_ref().unwrap()] {
        assert!(n.busiest.iter().all(|b| b.pid != run_pid), "{n:?}");
        assert!(n.run_ticks > 0, "{n:?}");
    }
    assert!(quiet.busiest.iter().all(|b| b.pid != hog.id()), "{quiet:?}");
    // After: the loop is named with its share. Beside nginx's worker alone it gets
    // about half a CPU; seen at 0.18 with a load average of 15 (compilers of other
    // work on this 2-CPU machine), so the bound is loose.
    let noise = after.noise.as_ref().expect("noise of the second point");
    assert!(noise.cpus.contains(&nginx_cpu), "{noise:?}");
    let seen = noise
        .busiest
        .iter()
        .find(|b| b.pid == hog.id())
        .unwrap_or_else(|| panic!("the loop is not among the busiest: {noise:?}"));
    assert!(seen.cpu_share > 0.1, "{noise:?}");
    assert!(noise.foreign_share > 0.1, "{noise:?}");
    assert!(after
        .noise_findings()
        .iter()
        .any(|f| f.kind == "noisy_machine"));
    assert!(
        r.warnings.iter().any(|w| w.layer == "tls"
            && w.kind == "noisy_machine"
            && w.message
                .starts_with("AES128-GCM-SHA256 256 KiB x1 accel: other processes took")),
        "{:?}",
        r.warnings
    );
    // The terminal table marks it, and says what the mark means.
    let text = cipherbench_report::tls::text(r.tls.as_ref().unwrap(), None);
    let row = text
        .lines()
        .find(|l| l.starts_with("AES128-GCM-SHA256") && l.contains("256 KiB"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("/s!"), "{row}");
    assert!(
        text.contains("(! marks a point measured while other processes took"),
        "{text}"
    );
    // And report.html.
    let html = std::fs::read_to_string(results.join("report.html")).unwrap();
    assert!(html.contains(">busy machine</span>"));
    finish(&dir);
}

/// A point's variants run side by side (one nginx each) and take turns in the
/// final window's rounds: A B, B A, A B, each round a third of the window, every
/// round kept; the accel / noaesni ratio's interval pairs the rounds.
#[test]
fn a_sweep_point_s_variants_take_turns_in_rounds_and_their_ratio_pairs_them() {
    let _turn = crate::turn!();
    let dir = scratch("tls", "rounds");
    let results = dir.join("results");
    let mut args = tls_args("sweep", "AES128-GCM-SHA256", "256KiB", "accel,noaesni");
    args.extend(["--concurrency", "2"]);
    args.extend(["--window", "1500ms", "--warmup", "100ms"]);
    let (out, r) = measure(&dir, &args, &results);
    let sweep = sweep_of(&r);
    assert_eq!(sweep.config.rounds, 3, "the default for a 1.5 s window");
    let of = |v: &str| sweep.points.iter().find(|p| p.variant == v).unwrap();
    let (accel, noaesni) = (of("accel"), of("noaesni"));
    // One group, the order turning: accel leads rounds 0 and 2, noaesni round 1.
    assert!(accel.interleave_group.is_some());
    assert_eq!(accel.interleave_group, noaesni.interleave_group);
    let seq = |p: &cipherbench_model::tls::SweepPoint| {
        p.rounds
            .iter()
            .map(|x| (x.round, x.sequence))
            .collect::<Vec<_>>()
    };
    assert_eq!(seq(accel), vec![(0, 0), (1, 3), (2, 4)]);
    assert_eq!(seq(noaesni), vec![(0, 1), (1, 2), (2, 5)]);
    for p in [accel, noaesni] {
        // Each round a third of the window; the point is their sum, every request
        // of every round counted once.
        for x in &p.rounds {
            assert_eq!(x.window_ns, 500_000_000, "{x:?}");
            assert!(x.requests > 0 && x.throughput_bytes_per_sec > 0.0, "{x:?}");
        }
        assert_eq!(p.window_ns, 1_500_000_000);
        assert_eq!(p.requests, p.rounds.iter().map(|x| x.requests).sum::<u64>());
        let mean = p
            .rounds
            .iter()
            .map(|x| x.throughput_bytes_per_sec)
            .sum::<f64>()
            / 3.0;
        assert!(
            (p.throughput_bytes_per_sec / mean - 1.0).abs() < 1e-9,
            "{} vs {mean}",
            p.throughput_bytes_per_sec
        );
        assert_eq!(p.errors, 0, "{:?}", p.errors_by_reason);
        assert_eq!(p.server_requests, Some(p.requests_sent), "{p:?}");
        assert_eq!(p.body_bytes, p.requests_ok_total * (256 << 10));
    }
    let i = cipherbench_model::tls::SweepResults::ratio_interval(accel, noaesni)
        .expect("an interval over 3 paired rounds");
    assert_eq!(i.pairing, cipherbench_model::interval::Pairing::Paired);
    assert_eq!(i.rounds, (3, 3));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("accel / noaesni AES128-GCM-SHA256")
            && stdout.contains("(3 rounds in turn)"),
        "{stdout}"
    );
    finish(&dir);
}

/// `--key-store file,pkcs11` against the real nginx and SoftHSM2: the file and
/// module stores of one run, the module's nginx checked by effect, the comparison
/// in the terminal, summary.md and report.html, and nothing left (token and
/// configs lived in the run's directory).
#[test]
fn a_sweep_measures_each_point_with_the_key_in_a_file_and_in_a_pkcs11_module() {
    let _turn = crate::turn!();
    let dir = scratch("tls", "keystore-sweep");
    let results = dir.join("results");
    let mut args = tls_args(
        "sweep",
        "ECDHE-RSA-AES128-GCM-SHA256,AES128-SHA",
        "64KiB",
        "accel",
    );
    args.extend(["--key-store", "file,pkcs11", "--concurrency", "2"]);
    args.extend(["--window", "500ms", "--probe", "200ms", "--warmup", "100ms"]);
    let (out, r) = measure(&dir, &args, &results);
    let tls = r.tls.as_ref().expect("tls results");
    let s = sweep_of(&r);
    assert_eq!(s.config.key_stores, ["file", "pkcs11"]);
    let ecdhe = "ECDHE-RSA-AES128-GCM-SHA256";
    for suite in [ecdhe, "AES128-SHA"] {
        let p = s.point(suite, 64 * 1024, 1, "accel").expect("file point");
        assert_eq!(p.key_store, "file");
        assert_eq!(p.errors, 0, "{suite}: {:?}", p.errors_by_reason);
    }
    // The module's point: the same suite, size, cores and variant, requests served.
    let pairs = s.key_store_pairs();
    assert_eq!(pairs.len(), 1, "{:?}", s.key_store_points);
    let (f, m) = pairs[0];
    assert_eq!((f.suite.as_str(), m.key_store.as_str()), (ecdhe, "pkcs11"));
    assert_eq!(m.errors, 0, "{:?}", m.errors_by_reason);
    assert!(m.requests > 0 && m.throughput_bytes_per_sec > 0.0);
    // RSA key exchange is not the module's: recorded, not measured.
    assert!(
        s.key_store_skipped
            .iter()
            .any(|k| k.suite.as_deref() == Some("AES128-SHA")
                && k.reason.contains("RSA key exchange"))
    );
    // Judged by effect: the module and the engine were mapped in nginx's one process.
    let server = tls
        .servers
        .iter()
        .find(|x| x.key_store == "pkcs11")
        .expect("the module's nginx");
    let check = server.key_store_check.as_ref().expect("a check by effect");
    assert!(check.served, "{}", check.explanation);
    assert!(check.module.contains("softhsm"), "{}", check.module);
    assert!(server.config.contains("master_process off;"));
    assert!(tls
        .servers
        .iter()
        .filter(|x| x.key_store == "file")
        .all(|x| x.key_store_check.is_none() && x.config.contains("master_process on;")));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("pkcs11/file"), "{stdout}");
    assert!(stdout.contains("module served the key"), "{stdout}");
    let md = std::fs::read_to_string(results.join("summary.md")).unwrap();
    assert!(
        md.contains(&format!(
            "- TLS key store pkcs11/file {ecdhe} 64 KiB x1 accel:"
        )),
        "{md}"
    );
    let html = std::fs::read_to_string(results.join("report.html")).unwrap();
    assert!(html.contains("id=\"table-tls-key-store\""));
    assert!(html.contains("RSA key exchange"));
    finish(&dir);
}

#[test]
fn a_ramp_runs_with_the_key_in_a_file_and_in_a_pkcs11_module_and_compares_them() {
    let _turn = crate::turn!();
    let dir = scratch("tls", "keystore-ramp");
    let results = dir.join("results");
    let mut args = tls_args("ramp", "ECDHE-RSA-AES128-GCM-SHA256", "1KiB", "accel");
    args.extend(["--key-store", "file,pkcs11"]);
    args.extend(["--rate", "20", "--duration", "1s", "--quiet"]);
    let (_, r) = measure(&dir, &args, &results);
    let tls = r.tls.expect("tls results");
    let r = tls.ramp.expect("ramp results");
    let pairs = r.key_store_pairs();
    assert_eq!(pairs.len(), 1);
    let (f, m) = pairs[0];
    assert_eq!(
        (f.key_store.as_str(), m.key_store.as_str()),
        ("file", "pkcs11")
    );
    for run in [f, m] {
        assert!(
            run.successful > 0,
            "{}: {:?}",
            run.key_store,
            run.unsuccessful_by_reason
        );
        assert_eq!(
            run.server_requests,
            Some(run.requests_sent),
            "{}",
            run.key_store
        );
    }
    let check = tls
        .servers
        .iter()
        .find_map(|x| x.key_store_check.as_ref())
        .expect("a check by effect");
    assert!(check.served, "{}", check.explanation);
    let md = std::fs::read_to_string(results.join("summary.md")).unwrap();
    assert!(md.contains("- TLS ramp key store pkcs11/file"), "{md}");
    let html = std::fs::read_to_string(results.join("report.html")).unwrap();
    assert!(html.contains("id=\"table-tls-key-store-ramp\""));
    finish(&dir);
}

#[test]
fn key_store_mistakes_are_one_line_and_leave_nothing_behind() {
    let _turn = crate::turn!();
    let dir = scratch("tls", "keystore-bad");
    let ecdhe = ["--suites", "ECDHE-RSA-AES128-GCM-SHA256"];
    let cases: [(&str, Vec<&str>, &str); 6] = [
        (
            "sweep",
            vec![
                "--key-store",
                "pkcs11",
                "--pkcs11-module",
                "/nonexistent/p11.so",
            ],
            "/nonexistent/p11.so: no such file",
        ),
        (
            "ramp",
            vec![
                "--key-store",
                "file,pkcs11",
                "--pkcs11-module",
                "/nonexistent/p11.so",
            ],
            "/nonexistent/p11.so: no such file",
        ),
        (
            "ramp",
            vec!["--key-store", "pkcs11", "--cores", "2"],
            "use --cores 1",
        ),
        (
            "sweep",
            vec!["--key-store", "pkcs11", "--cores", "2"],
            "include 1 in --cores",
        ),
        (
            "sweep",
            vec!["--key-store", "file,pkcs11", "--suites", "AES128-SHA"],
            "RSA key exchange",
        ),
        (
            "ramp",
            vec!["--key-store", "pkcs11", "--server", "https://127.0.0.1:9/"],
            "not to a server given with --server",
        ),
    ];
    for (mode, args, needle) in cases {
        let mut c = bin(&dir);
        c.args(["tls", mode]).args(&args);
        if !args.contains(&"--suites") {
            c.args(ecdhe);
        }
        let out = c.output().unwrap();
        assert_one_line_error(&out, needle);
    }
    // A library that is not a PKCS#11 module: refused when its token is made, after
    // the run started, with nothing left (no nginx, no token directory).
    let not_p11 = [
        "/usr/lib/x86_64-linux-gnu/libz.so.1",
        "/lib/x86_64-linux-gnu/libz.so.1",
    ]
    .into_iter()
    .find(|p| Path::new(p).is_file());
    if let Some(lib) = not_p11 {
        let mut args = tls_args("sweep", "ECDHE-RSA-AES128-GCM-SHA256", "1KiB", "accel");
        args.extend(["--key-store", "file,pkcs11", "--pkcs11-module", lib]);
        args.extend(["--window", "200ms"]);
        let out = bin(&dir)
            .args(&args)
            .arg("--results")
            .arg(dir.join("results"))
            .output()
            .unwrap();
        assert_one_line_error(&out, lib);
    }
    finish(&dir);
}

#[test]
fn a_sweep_at_a_fixed_rate_measures_open_loop_at_that_rate() {
    let _turn = crate::turn!();
    let dir = scratch("tls", "rate");
    let results = dir.join("results");
    let mut args = tls_args("sweep", "AES128-GCM-SHA256", "256KiB", "accel");
    args.extend(["--rate", "40", "--warmup", "1s", "--window", "3s"]);
    args.push("--quiet");
    let (out, r) = measure(&dir, &args, &results);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("open loop at 40 requests/s"), "{text}");
    let sweep = sweep_of(&r);
    assert_eq!(sweep.config.open_loop_rate, Some(40.0));
    let p = &sweep.points[0];
    assert_eq!(p.open_loop_rate, Some(40.0));
    // No search: no probes but the window, and the limit is the one given.
    let search = p.search.as_ref().unwrap();
    assert_eq!(search.limit, cipherbench_model::tls::Limit::Fixed);
    assert!(p.probes.len() <= 1, "{:?}", p.probes);
    // Open loop at 40/s for 3 s: the requests are the schedule's, whatever nginx did
    // with them (a 256 KiB response takes a few ms here); loose for a loaded machine.
    assert_eq!(p.errors, 0, "{:?}", p.errors_by_reason);
    assert!(
        (28.0..=52.0).contains(&p.requests_per_sec),
        "{} req/s at --rate 40",
        p.requests_per_sec
    );
    // The warm-up ran at the rate, uncounted: the window counts the 120 requests
    // scheduled after it (3 s at 40/s), nginx and the generator saw all 160.
    // The span: the window, and the last of its requests' few milliseconds after it.
    assert!(
        (3_000_000_000..3_500_000_000).contains(&p.window_ns),
        "{}",
        p.window_ns
    );
    assert_eq!(p.requests, 120);
    assert_eq!(p.requests_sent, 160);
    assert_eq!(p.server_requests, Some(160));
    // Its bytes are counted as a closed-loop point's are: about the requests' bodies.
    let bodies = p.requests_per_sec * SIZE as f64;
    assert!(
        (0.7 * bodies..=1.3 * bodies).contains(&p.throughput_bytes_per_sec),
        "{} B/s for {} req/s",
        p.throughput_bytes_per_sec,
        p.requests_per_sec
    );
    // The requests in flight, by Little's law, not clients; the window's attempt
    // kept with the probes says the same.
    assert!(p.concurrency >= 1);
    assert!(
        p.probes.iter().all(|q| q.concurrency == p.concurrency),
        "{} in flight, probes {:?}",
        p.concurrency,
        p.probes
    );
    assert!(p.server_cpu.as_ref().is_some_and(|c| c.total > 0.0));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_sweep_at_a_rate_over_capacity_reports_what_nginx_served_and_says_so() {
    let _turn = crate::turn!();
    // nginx without AES-NI takes tens of milliseconds per 4 MiB response: 300 a second
    // for a second is several seconds of its work. Every request is served, late; the
    // point's rate is the one over the span they took, and its sentence says so.
    let dir = scratch("tls", "rate-over");
    let results = dir.join("results");
    let mut args = tls_args("sweep", "AES128-GCM-SHA256", "4MiB", "noaesni");
    args.extend([
        "--rate", "300", "--warmup", "0s", "--window", "1s", "--quiet",
    ]);
    let (_, r) = measure(&dir, &args, &results);
    let p = &sweep_of(&r).points[0];
    assert_eq!(p.open_loop_rate, Some(300.0));
    assert_eq!(p.requests + p.errors, 300, "{:?}", p.errors_by_reason);
    assert!(p.window_ns > 1_500_000_000, "{}", p.window_ns);
    assert!(p.requests_per_sec < 200.0, "{} req/s", p.requests_per_sec);
    let why = &p.search.as_ref().unwrap().explanation;
    assert!(why.contains("fell behind the schedule"), "{why}");
    // The bytes over the same span: about what was served.
    let served = p.requests_per_sec * (4 << 20) as f64;
    assert!(
        (0.7 * served..=1.3 * served).contains(&p.throughput_bytes_per_sec),
        "{} B/s for {} req/s",
        p.throughput_bytes_per_sec,
        p.requests_per_sec
    );
    finish(&dir);
}
