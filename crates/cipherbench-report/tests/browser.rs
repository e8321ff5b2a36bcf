//! The report in a real browser: Debian's Chromium, headless, opens report.html
//! rendered from a fixed run.json. It must load with no console errors, every chart
//! must be in the rendered DOM, and a screenshot is taken at desktop and phone widths
//! (kept under target/tmp/report-artefacts, not compared pixel by pixel).
//!
//! `make test` installs Chromium; without it these tests fail and say so.

use cipherbench_model::RunRecord;
use std::path::{Path, PathBuf};
use std::process::Command;

fn chromium() -> PathBuf {
    for candidate in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if Path::new(candidate).exists() {
            return PathBuf::from(candidate);
        }
    }
    panic!("Chromium is not installed: `make test` installs it (Debian package chromium)");
}

fn artefacts() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report-artefacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs headless Chromium on a page; returns (stderr, dumped DOM).
fn open(page: &Path, extra: &[String]) -> (String, String) {
    // A profile per launch: two Chromiums sharing one hand the page to each other.
    static LAUNCH: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = LAUNCH.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let profile = artefacts().join(format!("profile-{}-{n}", std::process::id()));
    let mut args: Vec<String> = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-logging=stderr",
        "--v=0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(format!("--user-data-dir={}", profile.display()));
    args.extend(extra.iter().cloned());
    args.push(format!("file://{}", page.display()));
    let out = Command::new(chromium())
        .args(&args)
        .output()
        .expect("running chromium");
    let _ = std::fs::remove_dir_all(&profile);
    (
        String::from_utf8_lossy(&out.stderr).into_owned(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Console messages of level error, and uncaught exceptions, from Chromium's log.
fn console_errors(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .filter(|l| l.contains("ERROR") || l.contains("Uncaught") || l.contains("error"))
        .map(str::to_string)
        .collect()
}

fn chart_ids(html: &str) -> Vec<String> {
    html.match_indices("<svg id=\"")
        .map(|(i, m)| {
            let rest = &html[i + m.len()..];
            rest[..rest.find('"').unwrap()].to_string()
        })
        .collect()
}

#[test]
fn the_detector_sees_a_console_error() {
    // The check below could fail: a page with an error is caught.
    let page = artefacts().join("broken.html");
    std::fs::write(
        &page,
        "<html><body><script>console.error('boom'); missingFunction();</script></body></html>",
    )
    .unwrap();
    // Chromium logs console messages when it takes a screenshot, not with --dump-dom.
    let shot = artefacts().join("broken.png");
    let (stderr, _) = open(&page, &[format!("--screenshot={}", shot.display())]);
    let errors = console_errors(&stderr);
    assert!(
        errors.iter().any(|e| e.contains("missingFunction")),
        "{stderr}"
    );
}

#[test]
fn the_report_renders_in_chromium_without_errors() {
    let fixture = format!(
        "{}/tests/fixtures/run-quick.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let record = RunRecord::from_json(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let html = cipherbench_report::html::render(&record);
    let ids = chart_ids(&html);
    // Every layer's figures: the ladder, speed, file, TLS and tunnel charts.
    for prefix in [
        "fig-ladder",
        "fig-relative",
        "fig-aesni-control",
        "fig-file",
        "fig-tls-throughput",
        "fig-tls-cpu",
        "fig-tls-ramp",
        "fig-tunnel",
    ] {
        assert!(
            ids.iter().any(|id| id.starts_with(prefix)),
            "no {prefix} chart in {ids:?}"
        );
    }
    let page = artefacts().join("report.html");
    std::fs::write(&page, &html).unwrap();

    let (_, dom) = open(&page, &["--dump-dom".into()]);
    for id in &ids {
        assert!(
            dom.contains(&format!("id=\"{id}\"")),
            "chart {id} missing from the rendered DOM"
        );
    }
    for (name, size) in [
        ("report-desktop.png", "1280,4000"),
        ("report-phone.png", "390,6000"),
    ] {
        let shot = artefacts().join(name);
        let _ = std::fs::remove_file(&shot);
        let (stderr, _) = open(
            &page,
            &[
                format!("--screenshot={}", shot.display()),
                format!("--window-size={size}"),
            ],
        );
        assert!(
            console_errors(&stderr).is_empty(),
            "console errors:\n{stderr}"
        );
        let bytes = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
        assert!(
            bytes > 10_000,
            "screenshot {name} missing or empty ({bytes} bytes)"
        );
    }
}
