//! The report in a real browser: Debian's Chromium, headless, opens report.html
//! rendered from a fixed run.json. It must load with no console errors, every chart
//! must be in the rendered DOM, and a screenshot is taken at desktop and phone widths
//! (kept under target/tmp/report-artefacts, not compared pixel by pixel). The
//! ladder's table must fit a desktop window without a horizontal scrollbar.
//!
//! `make test` installs Chromium; without it these tests fail and say so.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

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

/// The page with a script that, once laid out, writes on `<body data-overflow>` each
/// `.scroll` box of the summary section (the ladder's tables) that is wider inside
/// than its box (a horizontal scrollbar): `id: 1032 px in 948`.
fn with_overflow_probe(html: &str) -> String {
    const PROBE: &str = "<script>const out = []; for (const d of document.querySelectorAll('#summary .scroll')) { if (d.scrollWidth > d.clientWidth + 1) { const t = d.querySelector('table'); out.push((t && t.id || 'table') + ': ' + d.scrollWidth + ' px in ' + d.clientWidth); } } document.body.setAttribute('data-overflow', out.join(' ')); document.body.setAttribute('data-probed', 'yes');</script>";
    html.replace("</body>", &format!("{PROBE}</body>"))
}

/// What the probe wrote at a window width: the overflowing tables (empty: none).
fn overflowing(page: &Path, width: u32) -> String {
    let (_, dom) = open(
        page,
        &["--dump-dom".into(), format!("--window-size={width},1000")],
    );
    assert!(
        dom.contains("data-probed=\"yes\""),
        "the probe did not run:\n{dom}"
    );
    let at = dom.find("data-overflow=\"").expect("the probe's attribute") + 15;
    dom[at..at + dom[at..].find('"').unwrap()].to_string()
}

#[test]
fn the_overflow_probe_sees_a_table_wider_than_the_page() {
    // The check below could fail: a table that cannot wrap is caught.
    let page = artefacts().join("wide.html");
    let cells = "<td>a figure that will not wrap at all</td>".repeat(8);
    std::fs::write(
        &page,
        with_overflow_probe(&format!(
            "<html><head><style>{}</style></head><body><section id=\"summary\"><div class=\"scroll\"><table id=\"table-ladder\"><tr>{cells}</tr></table></div></section></body></html>",
            ".scroll { overflow-x: auto; } td { white-space: nowrap; } body { max-width: 980px; }"
        )),
    )
    .unwrap();
    let found = overflowing(&page, 1400);
    assert!(found.starts_with("table-ladder:"), "{found:?}");
}

#[test]
fn the_ladder_table_fits_a_desktop_window_without_scrolling() {
    use cipherbench_model::tls::{Limit, SearchOutcome};
    let fixture = format!(
        "{}/tests/fixtures/run-quick.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let plain = RunRecord::from_json(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    // Longer cells too: a lower bound (the generator set TLS's accel figure) and a
    // tunnel gain with no clear difference.
    let mut marked = plain.clone();
    let sweep = marked.tls.as_mut().unwrap().sweep.as_mut().unwrap();
    for p in sweep.points.iter_mut().filter(|p| p.variant == "accel") {
        p.search = Some(SearchOutcome {
            started_at: 1,
            limit: Limit::Generator,
            explanation: "the generator saturated".into(),
        });
    }
    let tunnel = marked.tunnel.as_mut().unwrap();
    for p in tunnel
        .points
        .iter_mut()
        .filter(|p| p.transform == "aes128-gcm")
    {
        let r = p.runs[0].clone();
        p.runs = (0..3)
            .map(|round| {
                let mut r = r.clone();
                r.round = Some(round);
                r.iperf.receiver_bits_per_sec = [1.0e9, 1.2e9, 0.9e9][round];
                r
            })
            .collect();
        p.throughput_bits_per_sec.median = 1.0e9;
    }
    for (name, record) in [("plain", &plain), ("marked", &marked)] {
        let html = cipherbench_report::html::render(record);
        assert!(html.contains("id=\"table-ladder\""));
        if name == "marked" {
            assert!(html.contains("lower bound</span>") && html.contains("no clear difference"));
        }
        let page = artefacts().join(format!("report-{name}-probe.html"));
        std::fs::write(&page, with_overflow_probe(&html)).unwrap();
        for width in [1400, 1000] {
            let found = overflowing(&page, width);
            assert!(
                found.is_empty(),
                "{name} report at {width} px: tables wider than the page: {found}"
            );
        }
        let shot = artefacts().join(format!("report-{name}-1400.png"));
        let _ = std::fs::remove_file(&shot);
        open(
            &artefacts().join(format!("report-{name}-probe.html")),
            &[
                format!("--screenshot={}", shot.display()),
                "--window-size=1400,1000".into(),
            ],
        );
    }
}
