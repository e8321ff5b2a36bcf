//! Ratios with their intervals wherever a run is read: the TLS sweep's ratios and
//! the ladder's gains and shares in the terminal, summary.md and report.html; a ratio
//! whose interval holds 1.0 shown as "no clear difference" and never as a gain; the
//! whiskers drawn in the right place; and a run.json written before the rounds were
//! kept rendering without intervals, said so, rather than failing.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use cipherbench_model::RunRecord;
use cipherbench_report::{html, ladder, markdown, tls};

/// `run-quick.json`: a real record, written before the sweep kept its per-interval
/// throughputs (speed, file and tunnel have their samples).
fn fixture() -> RunRecord {
    let path = format!(
        "{}/tests/fixtures/run-quick.json",
        env!("CARGO_MANIFEST_DIR")
    );
    RunRecord::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The fixture with per-interval throughputs on every sweep point: each interval
/// the point's throughput times `swing` in turn (mean 1.0 for the swings used).
fn with_sweep_intervals(mut r: RunRecord, swing: &[f64]) -> RunRecord {
    let sweep = r.tls.as_mut().unwrap().sweep.as_mut().unwrap();
    for p in &mut sweep.points {
        p.interval_samples_bytes_per_sec = swing
            .iter()
            .map(|k| k * p.throughput_bytes_per_sec)
            .collect();
    }
    r
}

/// The fixture whose AES128-GCM noaesni point ran at 97 % of accel's throughput,
/// both windows swinging ±10 % from one interval to the next: AES-NI's gain at the
/// TLS layer is within the noise.
fn tls_gain_within_noise() -> RunRecord {
    let mut r = fixture();
    let sweep = r.tls.as_mut().unwrap().sweep.as_mut().unwrap();
    let accel = sweep
        .point("AES128-GCM-SHA256", 16 << 20, 1, "accel")
        .unwrap()
        .throughput_bytes_per_sec;
    for p in &mut sweep.points {
        if p.suite == "AES128-GCM-SHA256" && p.variant == "noaesni" {
            p.throughput_bytes_per_sec = accel * 0.97;
        }
    }
    with_sweep_intervals(r, &[0.9, 1.1, 0.95, 1.05])
}

const LINE: &str = "accel / noaesni AES128-GCM-SHA256 16 MiB x1";

#[test]
fn tls_ratios_carry_their_interval_in_the_terminal_summary_and_report() {
    let r = with_sweep_intervals(fixture(), &[0.98, 1.02, 0.99, 1.01]);
    let t = tls::text(r.tls.as_ref().unwrap(), None);
    let row = t.lines().find(|l| l.contains(LINE)).unwrap();
    // 8.44 / 1.27 Gbit/s: 6.63x, its interval in brackets around it.
    assert!(
        row.trim_end().ends_with(']') && row.contains("6.63x ["),
        "{row}"
    );
    let md = markdown::summary(&r);
    assert!(md.contains(&format!("- TLS {LINE}: 6.63x [")), "{md}");
    let page = html::render(&r);
    assert!(page.contains("id=\"fig-tls-ratios\""));
    assert!(
        page.contains("6.63× <span class=\"muted\">["),
        "a ratio cell"
    );
    // The ladder's TLS rung takes the same rounds.
    let l = ladder::build(&r);
    let step = l.steps.iter().find(|s| s.layer == "tls").unwrap();
    let i = step.gain_interval.unwrap();
    assert!(
        i.low < step.gain && step.gain < i.high && i.is_clear(),
        "{i:?}"
    );
    let share = step.survives_interval.unwrap();
    assert!(share.low <= step.survives.unwrap() && step.survives.unwrap() <= share.high);
}

#[test]
fn a_tls_gain_within_the_noise_is_no_clear_difference_and_keeps_no_share() {
    let r = tls_gain_within_noise();
    let t = tls::text(r.tls.as_ref().unwrap(), None);
    let row = t.lines().find(|l| l.contains(LINE)).unwrap();
    assert!(row.ends_with(", no clear difference"), "{row}");
    // The ladder: the gain shown with its interval and the verdict; no share kept.
    let l = ladder::build(&r);
    let step = l.steps.iter().find(|s| s.layer == "tls").unwrap();
    assert!(!step.gain_interval.unwrap().is_clear());
    assert_eq!(l.keeps_text(step), "no clear difference");
    assert_eq!(l.share_of_time_text(step), "–");
    let sentence = ladder::sentences(&l)
        .into_iter()
        .find(|s| s.starts_with("tls:"))
        .unwrap();
    assert!(sentence.contains("no clear difference"), "{sentence}");
    assert!(!sentence.contains("keeps"), "{sentence}");
    let term = ladder::text(&r);
    let tls_row = term
        .lines()
        .find(|l| l.trim_start().starts_with("tls "))
        .unwrap();
    assert!(tls_row.contains("no clear difference"), "{term}");
    assert!(!tls_row.contains('%'), "no share: {tls_row}");
    let md = markdown::summary(&r);
    let md_row = md.lines().find(|l| l.starts_with("| tls |")).unwrap();
    assert!(
        md_row.ends_with(
            "no clear difference** | no clear difference | – (plain HTTP was not measured: tls sweep --plain-http) |"
        ),
        "{md_row}"
    );
    assert!(md.contains(&format!("- TLS {LINE}: 1.03x [")), "{md}");
    let page = html::render(&r);
    let table = &page[page.find("id=\"ladder\"").unwrap()..];
    let tls_tr = &table[table.find("<tr><td class=\"l\">tls</td>").unwrap()..];
    let tls_tr = &tls_tr[..tls_tr.find("</tr>").unwrap()];
    assert!(
        tls_tr.contains("<span class=\"bad\">no clear difference</span></td><td>no clear difference</td><td class=\"nw\">–</td>"),
        "{tls_tr}"
    );
}

#[test]
fn the_fixture_ladder_has_intervals_where_its_record_kept_rounds() {
    let r = fixture();
    let l = ladder::build(&r);
    let by = |layer: &str| l.steps.iter().find(|s| s.layer == layer).unwrap();
    // Speed (5 samples a side), file (3 runs, paired), tunnel (1 run of 3
    // intervals a side): intervals; the sweep kept no intervals: none, and said.
    for layer in ["primitive", "file", "tunnel"] {
        let s = by(layer);
        let i = s
            .gain_interval
            .unwrap_or_else(|| panic!("{layer}: no interval"));
        assert!(i.low <= s.gain && s.gain <= i.high, "{layer}: {i:?}");
        assert!((i.point - s.gain).abs() < 1e-9, "{layer}");
        assert!(i.is_clear(), "{layer}: {i:?}");
    }
    assert_eq!(
        by("file").gain_interval.unwrap().pairing,
        cipherbench_model::interval::Pairing::Paired
    );
    assert!(by("tls").gain_interval.is_none());
    assert!(l.keeps_text(by("tls")).ends_with("(no interval)"));
    assert!(
        l.keeps_text(by("file")).contains(" % ["),
        "{}",
        l.keeps_text(by("file"))
    );
    let term = ladder::text(&r);
    assert!(term.contains("6.63x (no interval)"), "{term}");
    assert!(term.contains("24.46x ["), "{term}");
}

/// The numbers of `attr="..."` in `s`, in order.
fn numbers(s: &str, attr: &str) -> Vec<f64> {
    s.split(&format!(" {attr}=\""))
        .skip(1)
        .map(|rest| rest[..rest.find('"').unwrap()].parse().unwrap())
        .collect()
}

#[test]
fn the_ladder_chart_draws_each_interval_as_a_whisker_around_its_bar() {
    let r = with_sweep_intervals(fixture(), &[0.98, 1.02, 0.99, 1.01]);
    let page = html::render(&r);
    let svg = &page[page.find("<svg id=\"fig-ladder\"").unwrap()..];
    let svg = &svg[..svg.find("</svg>").unwrap()];
    assert!(svg.contains("whiskers: 95 % interval"));
    let bars: Vec<f64> = svg
        .split("<rect x=")
        .skip(1)
        .take(4)
        .map(|r| numbers(&format!(" x={r}"), "y")[0])
        .collect();
    let whiskers: Vec<&str> = svg.split("<g class=\"whisker\"").skip(1).collect();
    assert_eq!(whiskers.len(), 4, "one per rung");
    for (k, g) in whiskers.iter().enumerate() {
        // The first line is the whisker: y1 at the low end, y2 at the high end; in
        // pixel space (downward) high <= the bar's top <= low.
        let (lo, hi) = (numbers(g, "y1")[0], numbers(g, "y2")[0]);
        assert!(
            hi <= bars[k] + 0.05 && bars[k] <= lo + 0.05,
            "rung {k}: {hi} {} {lo}",
            bars[k]
        );
    }
}

#[test]
fn a_record_without_rounds_renders_every_ratio_without_an_interval() {
    // The fixture with every sample dropped, as the oldest records may be.
    let mut r = fixture();
    for p in &mut r.speed.as_mut().unwrap().points {
        p.samples.clear();
    }
    for p in &mut r.file.as_mut().unwrap().points {
        p.samples.clear();
    }
    for p in &mut r.tunnel.as_mut().unwrap().points {
        for run in &mut p.runs {
            run.iperf.interval_bits_per_sec.clear();
        }
    }
    let l = ladder::build(&r);
    assert_eq!(l.steps.len(), 4);
    assert!(l.steps.iter().all(|s| s.gain_interval.is_none()));
    assert!(l.steps.iter().all(|s| s.survives_interval.is_none()));
    let md = markdown::summary(&r);
    assert!(md.contains("**24.46x (no interval)**"), "{md}");
    let page = html::render(&r);
    assert!(!page.contains("class=\"whisker\""));
    assert!(page.contains("(no interval)"));
    assert!(ladder::text(&r).contains("(no interval)"));
}

#[test]
fn the_ladders_tunnel_rung_pairs_the_runs_round_by_round_as_the_tunnel_table_does() {
    use cipherbench_model::interval::Pairing;
    use cipherbench_model::tunnel::Protocol;
    let mut r = fixture();
    let tunnel = r.tunnel.as_mut().unwrap();
    // Three rounds whose machine slowed from one round to the next, both variants
    // alike: accel 3x noaesni in every round.
    for (variant, rates) in [
        ("accel", [3.0e9, 2.0e9, 1.0e9]),
        ("noaesni", [1.0e9, 0.667e9, 0.333e9]),
    ] {
        let p = tunnel
            .points
            .iter_mut()
            .find(|p| {
                p.transform == "aes128-gcm" && p.variant == variant && p.protocol == Protocol::Tcp
            })
            .unwrap();
        let run = p.runs[0].clone();
        p.runs = rates
            .iter()
            .enumerate()
            .map(|(round, rate)| {
                let mut run = run.clone();
                run.round = Some(round);
                run.iperf.receiver_bits_per_sec = *rate;
                run
            })
            .collect();
    }
    let l = ladder::build(&r);
    let rung = l.steps.iter().find(|s| s.layer == "tunnel").unwrap();
    let i = rung.gain_interval.expect("an interval over three rounds");
    assert_eq!(i.pairing, Pairing::Paired, "{i:?}");
    // Paired, the drift cancels: every round's ratio is 3.0 within rounding.
    assert!(i.high - i.low < 0.02, "{i:?}");
    // The same interval as the tunnel's own table draws.
    let points = &r.tunnel.as_ref().unwrap().points;
    let of = |v: &str| {
        points
            .iter()
            .find(|p| p.transform == "aes128-gcm" && p.variant == v && p.protocol == Protocol::Tcp)
            .unwrap()
    };
    let table = of("accel")
        .ratio_interval(of("noaesni"), Pairing::Paired)
        .unwrap();
    // (The rung centres it on the gain its table shows, from the points' figures.)
    assert_eq!(table.pairing, Pairing::Paired);
    let relative =
        |x: &cipherbench_model::interval::RatioInterval| (x.low / x.point, x.high / x.point);
    let (a, b) = (relative(&table), relative(&i));
    assert!(
        (a.0 - b.0).abs() < 1e-6 && (a.1 - b.1).abs() < 1e-6,
        "{table:?} {i:?}"
    );
}
