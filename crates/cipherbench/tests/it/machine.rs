//! The machine's conditions as a user meets them: `probe` shows the CPU topology,
//! `probe --check` says in one glance whether the machine is fit to benchmark now and
//! names a busy process started next to it, and changes nothing.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use crate::common::bin;
use cipherbench_model::fitness::Fitness;
use std::process::Command;

#[test]
fn probe_shows_the_topology_in_text_and_json() {
    let _turn = crate::turn!();
    let out = bin().arg("probe").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("topology   "))
        .unwrap_or_else(|| panic!("no topology line:\n{text}"));
    assert!(line.contains(" cores, "), "{line}");
    assert!(
        text.lines().any(|l| l.starts_with("allowed    CPUs ")),
        "{text}"
    );

    let out = bin().args(["probe", "--json"]).output().unwrap();
    let env: cipherbench_model::env::Environment = serde_json::from_slice(&out.stdout).unwrap();
    let topo = env.topology.expect("topology in probe --json");
    assert!(!topo.cores.is_empty());
    assert!(!topo.allowed.is_empty());
}

#[test]
fn probe_check_names_a_busy_process_and_exits_3() {
    let _turn = crate::turn!();
    // A busy loop of its own, not a child of the cipherbench it watches; at nice -5
    // so that it stands out even while `make test` compiles beside it (seen: five
    // rustc at 0.2-0.26 CPU each pushed a nice-0 loop out of the busiest five).
    let mut hog = Command::new("nice")
        .args(["-n", "-5", "sh", "-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let out = bin().args(["probe", "--check"]).output().unwrap();
    let json = bin().args(["probe", "--check", "--json"]).output().unwrap();
    hog.kill().unwrap();
    hog.wait().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.starts_with("fit to benchmark now: no ("), "{text}");
    let pid = format!("sh (pid {})", hog.id());
    assert!(text.contains(&pid), "{pid} not in:\n{text}");
    // The advice names the busiest process: the loop, or a compiler of `make test`
    // that outran it on this shared machine.
    assert!(text.contains("  - wait for or stop "), "{text}");

    assert_eq!(json.status.code(), Some(3));
    let f: Fitness = serde_json::from_slice(&json.stdout).unwrap();
    assert!(!f.fit);
    assert!(
        f.findings.iter().any(|x| x.kind == "noisy_machine"),
        "{f:?}"
    );
    let seen = f
        .noise
        .busiest
        .iter()
        .find(|p| p.pid == hog.id())
        .unwrap_or_else(|| panic!("{f:?}"));
    // Seen at 0.13 CPU with a load average of 13 on 2 CPUs: other sessions' compilers
    // sit in cgroups of their own, where the loop's niceness does not reach.
    assert!(seen.cpu_share > 0.1, "{f:?}");
}

#[test]
fn probe_check_without_a_hog_gives_a_verdict_either_way() {
    let _turn = crate::turn!();
    // The machine is shared: whether it is quiet is not this test's to decide, but the
    // verdict, its exit status and the advice agree.
    let out = bin().args(["probe", "--check"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    match out.status.code() {
        Some(0) => {
            assert!(text.starts_with("fit to benchmark now: yes\n"), "{text}");
            assert!(!text.contains("\nchange:\n"), "{text}");
        }
        Some(3) => {
            assert!(text.starts_with("fit to benchmark now: no ("), "{text}");
            assert!(text.contains("\nchange:\n  - "), "{text}");
        }
        other => panic!("exit {other:?}:\n{text}"),
    }
    assert!(
        text.contains("\nload       other processes took "),
        "{text}"
    );
    assert!(text.contains("\nfrequency  governor "), "{text}");
}

#[test]
fn speed_marks_points_measured_beside_a_busy_loop_noisy_machine_with_its_share() {
    let _turn = crate::turn!();
    // The speed worker's first thread runs on the first CPU of the spread order (one
    // thread per core, CPU 0's core last): the busy loop is pinned there, and is no
    // child of the cipherbench it disturbs.
    let topology = cipherbench::machine::topology::this_machine(None);
    let cpu = cipherbench_model::topology::spread_order(&topology)[0];
    // At nice -5, so that compilers running beside `make test` do not crowd it out
    // (seen: rustc at 0.36 of the CPU, the nice-0 loop at 0.13).
    let mut hog = Command::new("taskset")
        .args([
            "-c",
            &cpu.to_string(),
            "nice",
            "-n",
            "-5",
            "sh",
            "-c",
            "while :; do :; done",
        ])
        .spawn()
        .expect("starting taskset (util-linux)");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let dir = std::env::temp_dir().join(format!("cb-machine-speed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = bin()
        .args([
            "speed",
            "--cipher",
            "aes-128-gcm",
            "--sizes",
            "16384",
            "--variants",
            "accel",
            "--threads",
            "1",
            "--samples",
            "3",
            "--sample-ms",
            "100",
            "--results",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    hog.kill().unwrap();
    hog.wait().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let record = cipherbench_model::RunRecord::from_json(
        &std::fs::read_to_string(dir.join("run.json")).unwrap(),
    )
    .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let speed = record.speed.as_ref().unwrap();
    let placement = speed.placement.as_ref().expect("the worker's placement");
    assert_eq!(placement.roles[0].cpus, vec![cpu]);
    let points = &speed.points;
    assert_eq!(points.len(), 2, "encrypt and decrypt");
    for p in points {
        let noise = p.noise.as_ref().expect("a noise record per point");
        assert_eq!(noise.cpus, vec![cpu]);
        let seen = noise
            .busiest
            .iter()
            .find(|b| b.pid == hog.id())
            .unwrap_or_else(|| panic!("{noise:?}"));
        // Sharing one CPU with the worker, a busy loop gets about half of it.
        // (Seen at 0.15 with a load average of 13: see probe_check_names_... .)
        assert!(seen.cpu_share > 0.1, "{noise:?}");
        assert!(noise.foreign_share > 0.1, "{noise:?}");
        assert!(p.noise_findings().iter().any(|f| f.kind == "noisy_machine"));
    }
    let warned = record
        .warnings
        .iter()
        // Each names the busiest process: the loop, or whatever outran it here.
        .filter(|w| w.kind == "noisy_machine" && w.message.contains("busiest: "))
        .count();
    assert_eq!(warned, 2, "{:?}", record.warnings);
    assert!(text.contains("GB/s!") || text.contains("MB/s!"), "{text}");
    assert!(
        text.contains("(! marks a point measured while other processes took more than 10 %"),
        "{text}"
    );
}

#[test]
fn speed_turns_the_variant_order_from_one_cipher_to_the_next() {
    let _turn = crate::turn!();
    let dir = std::env::temp_dir().join(format!("cb-machine-order-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = bin()
        .args([
            "speed",
            "--cipher",
            "aes-128-gcm,chacha20-poly1305,aes-256-cbc",
            "--sizes",
            "1024",
            "--threads",
            "1",
            "--direction",
            "encrypt",
            "--samples",
            "3",
            "--sample-ms",
            "20",
            "--warmup-ms",
            "10",
            "--quiet",
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
    let record = cipherbench_model::RunRecord::from_json(
        &std::fs::read_to_string(dir.join("run.json")).unwrap(),
    )
    .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    // Points are kept in the order they were measured.
    let order: Vec<String> = record
        .speed
        .unwrap()
        .points
        .iter()
        .map(|p| format!("{} {}", p.cipher, p.variant))
        .collect();
    assert_eq!(
        order,
        [
            "aes-128-gcm accel",
            "aes-128-gcm noaesni",
            "chacha20-poly1305 noaesni",
            "chacha20-poly1305 accel",
            "aes-256-cbc accel",
            "aes-256-cbc noaesni",
        ]
    );
}
