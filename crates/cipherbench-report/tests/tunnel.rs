//! Layer 4's renderings of a real (cut-down) tunnel record: the terminal table
//! holds the columns of the IIJ IPsec post (seed 004), `tunnel.csv` one row per run,
//! and the HTML section the table, the chart and every run.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use cipherbench_model::tunnel::{GatewaySplit, Protocol, TcpSample, TunnelPoint, TunnelResults};
use cipherbench_report::tunnel;

/// The fixture's aes128-gcm TCP point of `variant`, to change (TunnelResults::point,
/// mutable).
fn gcm_tcp<'a>(t: &'a mut TunnelResults, variant: &str) -> &'a mut TunnelPoint {
    t.points
        .iter_mut()
        .find(|p| {
            p.transform == "aes128-gcm" && p.variant == variant && p.protocol == Protocol::Tcp
        })
        .unwrap()
}

/// The fixture's aes128-gcm accel TCP point, to change.
fn gcm_accel_tcp(t: &mut TunnelResults) -> &mut TunnelPoint {
    gcm_tcp(t, "accel")
}

fn fixture() -> TunnelResults {
    serde_json::from_str(include_str!("fixtures/tunnel-quick.json")).expect("the fixture parses")
}

#[test]
fn the_table_has_a_row_per_transform_and_variant_next_to_the_underlay() {
    let t = fixture();
    let text = tunnel::text(&t);
    assert!(
        text.contains("underlay alone (no rate limit: not a ceiling): TCP"),
        "{text}"
    );
    for row in [
        "null               accel",
        "aes128-gcm         accel",
        "aes128-gcm         noaesni",
    ] {
        assert!(text.contains(row), "{row} missing:\n{text}");
    }
    let tcp = t.point("aes128-gcm", "accel", Protocol::Tcp).unwrap();
    let shown = format!("{:.0}", tcp.throughput_bits_per_sec.median / 1e6);
    assert!(text.contains(&shown), "{shown} not in\n{text}");
    assert!(text.contains("byte check: 6 of 6 runs agree"), "{text}");
}

#[test]
fn the_csv_has_a_row_per_run_with_units_in_the_header() {
    let t = fixture();
    let csv = tunnel::csv(&t);
    let runs: usize = t.points.iter().map(|p| p.runs.len()).sum::<usize>()
        + t.underlay.iter().map(|u| u.runs.len()).sum::<usize>();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + runs);
    assert!(lines[0].contains("receiver_bits_per_sec") && lines[0].contains("lost_percent"));
    let columns = lines[0].split(',').count();
    assert!(
        lines.iter().all(|l| l.split(',').count() == columns),
        "{csv}"
    );
    assert!(lines[1].starts_with("underlay,"));
}

#[test]
fn the_html_section_has_the_seed_table_the_chart_and_every_run() {
    let t = fixture();
    let html = tunnel::html(&t);
    assert!(html.contains("<h2 id=\"tunnel\">"));
    assert!(html.contains("<svg id=\"fig-tunnel\""));
    assert!(html.contains("TCP [Mbps]") && html.contains("UDP [Mbps]"));
    assert!(html.contains("underlay alone"));
    assert_eq!(html.matches("<details>").count(), 1);
    // Every run is listed.
    let runs: usize = t.points.iter().map(|p| p.runs.len()).sum();
    assert_eq!(
        html.matches("agrees</span>").count() + html.matches("differs</span>").count(),
        runs
    );
    // Bars: the underlay and each transform's TCP and UDP per variant.
    assert!(html.contains("TCP accel") && html.contains("UDP noaesni"));
}

#[test]
fn datagrams_that_are_not_esp_are_shown_where_drops_are_and_gaps_are_flagged() {
    let mut t = fixture();
    let clean = tunnel::text(&t);
    assert!(
        clean.contains("every received datagram accounted for (0 NAT keepalives, 0 non-ESP)"),
        "{clean}"
    );
    // A receiver that got keepalives and IKE, counted; then one more datagram than
    // it has outcomes for.
    let run = &mut t.points[1].runs[0];
    run.receiver.esp_packets_received += 5;
    run.receiver.nat_keepalives = 3;
    run.receiver.non_esp = 2;
    let text = tunnel::text(&t);
    assert!(
        text.contains("every received datagram accounted for (3 NAT keepalives, 2 non-ESP)"),
        "{text}"
    );
    let html = tunnel::html(&t);
    assert!(
        html.contains("(not ESP: 3 NAT keepalives, 2 IKE)"),
        "{html}"
    );
    assert!(!html.contains("not accounted for"));
    let csv = tunnel::csv(&t);
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let row: Vec<&str> = csv
        .lines()
        .filter(|l| !l.starts_with("underlay"))
        .nth(2)
        .unwrap()
        .split(',')
        .collect();
    let column = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
    assert_eq!(column("nat_keepalives"), "3");
    assert_eq!(column("non_esp"), "2");
    assert_eq!(column("unaccounted_datagrams"), "0");

    t.points[1].runs[0].receiver.esp_packets_received += 1;
    let text = tunnel::text(&t);
    assert!(
        text.contains("1 received datagrams NOT accounted for"),
        "{text}"
    );
    let html = tunnel::html(&t);
    assert!(
        html.contains("<span class=\"bad\">1 received datagrams not accounted for</span>"),
        "{html}"
    );
}

#[test]
fn a_saturation_side_with_a_comma_is_quoted_in_the_csv() {
    // Found by fuzzing (target `report`): the side was written bare, so a run.json
    // holding "a,b" there gave that row one column more than the header.
    let mut t = fixture();
    t.points[0].runs[0].saturation.side = "a,b".into();
    let csv = tunnel::csv(&t);
    let row = csv
        .lines()
        .find(|l| l.contains("\"a,b\""))
        .expect("the side, quoted");
    let header = csv.lines().next().unwrap();
    let unquoted = row.replace("\"a,b\"", "x");
    assert_eq!(
        unquoted.split(',').count(),
        header.split(',').count(),
        "{row}"
    );
}

#[test]
fn counters_near_u64_max_render_without_overflow() {
    // Found by fuzzing (target `report`, debug assertions on): drops, keepalives and
    // non-ESP counts were summed with `+`, which panics in a debug build and wraps in
    // a release one for a run.json holding such counts.
    let mut t = fixture();
    for p in &mut t.points {
        for r in &mut p.runs {
            for g in [&mut r.sender, &mut r.receiver] {
                g.nat_keepalives = u64::MAX;
                g.non_esp = u64::MAX;
                for n in g.drops.values_mut() {
                    *n = u64::MAX;
                }
            }
        }
    }
    let g = &t.points[0].runs[0].sender;
    assert!(g.drops.is_empty() || g.drops_total() == u64::MAX);
    let csv = tunnel::csv(&t);
    assert!(csv.contains(&u64::MAX.to_string()), "{csv}");
    assert!(tunnel::text(&t).contains("NAT keepalives"));
    assert!(tunnel::html(&t).contains("not ESP"));
}

#[test]
fn the_table_shows_each_gateway_threads_cpu_with_a_pool_of_workers_on_one_entry() {
    let mut t = fixture();
    // A record from before the field existed reads as one worker per direction.
    assert_eq!(t.config.gateway_threads, 1);
    let text = tunnel::text(&t);
    assert!(
        text.contains("gateway threads (cores used; 1 crypto worker per direction"),
        "{text}"
    );
    let run = &t.point("aes128-gcm", "accel", Protocol::Tcp).unwrap().runs[0];
    let busiest = run.sender.busiest_thread().unwrap();
    let shown = format!("{} {:.2}", busiest.name, busiest.cpu_cores_used);
    assert!(text.contains(&shown), "{shown} not in\n{text}");

    t.config.gateway_threads = 2;
    t.config.gateway_threads_from = Some("--gateway-threads".into());
    t.config.iperf3_parallel = 4;
    let point = gcm_accel_tcp(&mut t);
    let mut worker = point.runs[0].sender.threads[0].clone();
    worker.name = "seal/0".into();
    worker.cpu_cores_used = 0.41;
    let mut other = worker.clone();
    other.name = "seal/1".into();
    other.cpu_cores_used = 0.4;
    point.runs[0].sender.threads.extend([worker, other]);
    let text = tunnel::text(&t);
    assert!(
        text.contains("2 crypto workers per direction, --gateway-threads"),
        "{text}"
    );
    assert!(text.contains("seal 0.41/0.40"), "{text}");
    assert!(
        text.contains("iperf3 TCP -l 1220, UDP -l 1220 -P 4"),
        "{text}"
    );
}

#[test]
fn the_thread_table_says_when_a_one_core_gateway_split_its_thread() {
    let mut t = fixture();
    // Records from before the split was kept have none, and say nothing of it.
    assert!(t
        .points
        .iter()
        .flat_map(|p| &p.runs)
        .all(|r| r.sender.split.is_none() && r.receiver.split.is_none()));
    assert!(!tunnel::text(&t).contains("split"), "{}", tunnel::text(&t));
    let point = gcm_accel_tcp(&mut t);
    // Three repeats of the fixture's run.
    let run = point.runs[0].clone();
    point.runs = vec![run.clone(), run.clone(), run];
    // The sender split 0.62 s into the first run; every later run saw it split.
    point.runs[0].sender.split = Some(GatewaySplit {
        at_seconds: 0.62,
        wait_share: 0.372,
    });
    for (i, r) in point.runs.iter_mut().enumerate().skip(1) {
        r.sender.split = Some(GatewaySplit {
            at_seconds: -4.5 * i as f64,
            wait_share: 0.372,
        });
    }
    // The receiver had split before the first run.
    for r in point.runs.iter_mut() {
        r.receiver.split = Some(GatewaySplit {
            at_seconds: -0.1,
            wait_share: 0.3,
        });
    }
    let text = tunnel::text(&t);
    let line = text
        .lines()
        .find(|l| {
            l.contains("aes128-gcm")
                && l.contains("sender")
                && l.contains("receiver")
                && l.contains('|')
        })
        .unwrap_or_else(|| panic!("no thread line in\n{text}"));
    assert!(
        line.contains("(split in run 1 at 0.62 s, waited 37 %)"),
        "{line}"
    );
    assert!(line.contains("(split before run 1, waited 30 %)"), "{line}");
    // And it survives run.json: written only when present, read back the same.
    let json = serde_json::to_string(&t).unwrap();
    assert!(
        json.contains("\"split\":{\"at_seconds\":0.62"),
        "split not written"
    );
    let back: TunnelResults = serde_json::from_str(&json).unwrap();
    assert_eq!(back, t);
}

#[test]
fn a_tcp_run_shows_its_mid_run_connection_state_under_its_thread_line() {
    let mut t = fixture();
    // Records from before the sample have none, and print no line for it.
    assert!(
        !tunnel::text(&t).contains("tcp run"),
        "{}",
        tunnel::text(&t)
    );
    let point = gcm_accel_tcp(&mut t);
    let run = point.runs[0].clone();
    point.runs = vec![run.clone(), run];
    point.runs[0].iperf.receiver_bits_per_sec = 366e6;
    point.runs[0].sender.sealed_packets = 31_000;
    point.runs[0].sender.tun_reads = 1_000;
    point.runs[0].receiver.opened_packets = 31_000;
    point.runs[0].receiver.tun_writes = 2_000;
    point.runs[0].tcp = Some(Box::new(TcpSample {
        at_seconds: 2.0,
        connections: 2,
        cwnd: Some(312),
        rtt_ms: Some(0.213),
        pacing_bits_per_sec: Some(6.1e9),
        delivery_bits_per_sec: Some(4.2e9),
        busy_ms: Some(2000),
        rwnd_limited_ms: Some(500),
        raw: "cubic cwnd:312".into(),
        ..TcpSample::default()
    }));
    let text = tunnel::text(&t);
    assert!(
        text.contains(
            "    tcp run 1 (366 Mbit/s): cwnd 312 rtt 0.21 ms pacing 6.10 Gbit/s rwnd-limited 25 % (mid-run); 31.0 pkts/TUN read\n"
        ),
        "{text}"
    );
    assert!(text.contains("    tcp run 2 ("), "{text}");
    assert!(text.contains("): not sampled\n"), "{text}");
    // The CSV has the sample and both gateways' packets per TUN call.
    let csv = tunnel::csv(&t);
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let row: Vec<&str> = csv
        .lines()
        .find(|l| l.starts_with("aes128-gcm,accel,both,tcp,1,"))
        .unwrap()
        .split(',')
        .collect();
    assert_eq!(row.len(), header.len());
    let column = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
    assert_eq!(column("tcp_cwnd"), "312");
    assert_eq!(column("tcp_rtt_ms"), "0.2130");
    assert_eq!(column("tcp_pacing_bits_per_sec"), "6100000000");
    assert_eq!(column("tcp_rwnd_limited_share"), "0.2500");
    assert_eq!(column("sender_packets_per_tun_read"), "31.0000");
    assert_eq!(column("receiver_packets_per_tun_write"), "15.5000");
    // run.json keeps it, and an absent sample stays absent.
    let json = serde_json::to_string(&t).unwrap();
    assert_eq!(json.matches("\"tcp\":{").count(), 1);
    let back: TunnelResults = serde_json::from_str(&json).unwrap();
    assert_eq!(back, t);
}

/// The fixture's aes128-gcm points given `rounds` interleaved rounds each: accel's
/// and noaesni's TCP throughput in Mbit/s per round.
fn with_rounds(accel: &[f64], noaesni: &[f64]) -> TunnelResults {
    let mut t = fixture();
    for (variant, rates) in [("accel", accel), ("noaesni", noaesni)] {
        let p = gcm_tcp(&mut t, variant);
        let template = p.runs[0].clone();
        p.runs = rates
            .iter()
            .enumerate()
            .map(|(round, mbit)| {
                let mut r = template.clone();
                r.iperf.receiver_bits_per_sec = mbit * 1e6;
                r.round = Some(round);
                r
            })
            .collect();
        let totals: Vec<f64> = rates.iter().map(|m| m * 1e6).collect();
        p.throughput_bits_per_sec = cipherbench_model::Summary::of(&totals).unwrap();
    }
    t
}

/// Round `round` of `variant`'s aes128-gcm TCP point ran with both gateways idle.
fn idle_in(t: &mut TunnelResults, variant: &str, round: usize) {
    let r = &mut gcm_tcp(t, variant).runs[round];
    for th in r.sender.threads.iter_mut().chain(&mut r.receiver.threads) {
        th.cpu_cores_used = 0.1;
    }
}

#[test]
fn a_ratio_one_of_whose_figures_the_instrument_set_is_marked_a_bound() {
    // accel's third run stalled at under half its siblings with idle gateways: its
    // median could only be higher, so the ratio is a lower bound.
    let mut t = with_rounds(&[3000.0, 2950.0, 900.0], &[1000.0, 990.0, 1020.0]);
    idle_in(&mut t, "accel", 2);
    let ratio = |t: &TunnelResults| {
        let rows = tunnel::ratios(t);
        let row = rows.iter().find(|r| r.transform == "aes128-gcm").unwrap();
        match &row.tcp {
            Some(tunnel::RatioCell::Ratio(r)) => r.clone(),
            other => panic!("{other:?}"),
        }
    };
    let r = ratio(&t);
    assert_eq!(r.bound_mark(), "≥ ");
    let text = tunnel::text(&t);
    assert!(
        text.contains(&format!("≥ {}", r.text().trim_start_matches("≥ "))),
        "{text}"
    );
    assert!(text.contains("so the ratio is a lower bound"), "{text}");
    let html = tunnel::html(&t);
    assert!(html.contains("title=\"≥: the upper variant"), "{html}");
    // The same stall on noaesni's side bounds it from above; a plain pair is unmarked.
    let mut t = with_rounds(&[3000.0, 2950.0, 3100.0], &[1000.0, 990.0, 300.0]);
    idle_in(&mut t, "noaesni", 2);
    assert_eq!(ratio(&t).bound_mark(), "≤ ");
    assert!(ratio(&t).compact().starts_with("≤ "));
    let t = with_rounds(&[3000.0, 2950.0, 3100.0], &[1000.0, 990.0, 1020.0]);
    assert_eq!(ratio(&t).bound_mark(), "");
    assert!(!tunnel::text(&t).contains("lower bound"));
}

#[test]
fn a_ratio_carries_its_interval_over_the_rounds_everywhere_it_is_shown() {
    // Three rounds, accel about 3x noaesni in each.
    let t = with_rounds(&[3000.0, 2950.0, 3100.0], &[1000.0, 990.0, 1020.0]);
    let rows = tunnel::ratios(&t);
    let row = rows.iter().find(|r| r.transform == "aes128-gcm").unwrap();
    let Some(tunnel::RatioCell::Ratio(r)) = &row.tcp else {
        panic!("{row:?}")
    };
    let i = r.interval.expect("three rounds give an interval");
    assert_eq!(i.pairing, cipherbench_model::interval::Pairing::Paired);
    assert!(r.is_clear() && i.low > 2.8 && i.high < 3.2, "{i:?}");
    let shown = format!("{:.2}x [{:.2}-{:.2}]", i.point, i.low, i.high);
    let text = tunnel::text(&t);
    assert!(text.contains("accel / noaesni:"), "{text}");
    assert!(text.contains(&shown), "{shown} not in\n{text}");
    // UDP kept its single run: the ratio says it has no interval, and why.
    assert!(text.contains("(1 round: no interval)"), "{text}");
    assert!(
        text.contains("an interval needs 3 rounds or more a side"),
        "{text}"
    );
    let html = tunnel::html(&t);
    assert!(
        html.contains(&format!(
            "{:.2}× <span class=\"muted\">[{:.2}–{:.2}]</span>",
            i.point, i.low, i.high
        )),
        "{html}"
    );
    let record = cipherbench_model::RunRecord {
        tunnel: Some(t),
        ..serde_json::from_str(include_str!("fixtures/run-quick.json")).unwrap()
    };
    let summary = cipherbench_report::markdown::summary(&record);
    assert!(
        summary.contains(&format!("- tunnel aes128-gcm tcp accel/noaesni: {shown}\n")),
        "{summary}"
    );
}

#[test]
fn a_ratio_whose_interval_holds_one_is_no_clear_difference_not_a_gain() {
    // accel leads on the median, but the rounds go both ways.
    let t = with_rounds(
        &[1050.0, 960.0, 1080.0, 990.0],
        &[1000.0, 1010.0, 970.0, 1030.0],
    );
    let row = tunnel::ratios(&t)
        .into_iter()
        .find(|r| r.transform == "aes128-gcm")
        .unwrap();
    let Some(tunnel::RatioCell::Ratio(r)) = &row.tcp else {
        panic!("{row:?}")
    };
    let i = r.interval.unwrap();
    assert!(i.point > 1.0 && i.low < 1.0 && i.high > 1.0, "{i:?}");
    assert!(!r.is_clear());
    let text = tunnel::text(&t);
    let line = text
        .lines()
        .find(|l| l.starts_with("aes128-gcm") && l.contains(" [") && l.contains("x ["))
        .unwrap();
    assert!(
        line.contains(&format!(
            "{:.2}x [{:.2}-{:.2}], no clear difference",
            i.point, i.low, i.high
        )),
        "{line}"
    );
    let html = tunnel::html(&t);
    assert!(
        html.contains("<span class=\"bad\">no clear difference</span>"),
        "{html}"
    );
    let record = cipherbench_model::RunRecord {
        tunnel: Some(t),
        ..serde_json::from_str(include_str!("fixtures/run-quick.json")).unwrap()
    };
    let summary = cipherbench_report::markdown::summary(&record);
    let line = summary
        .lines()
        .find(|l| l.starts_with("- tunnel aes128-gcm tcp accel/noaesni:"))
        .unwrap();
    assert!(line.ends_with(", no clear difference"), "{line}");
}

#[test]
fn the_header_names_only_the_protocols_measured() {
    let mut t = fixture();
    let header = |t: &TunnelResults| tunnel::text(t).lines().nth(1).unwrap().to_string();
    // Both (and records from before `protocols` was kept): the UDP search's target.
    assert!(header(&t).contains("; UDP at the rate giving about 5 % loss;"));
    t.config.protocols = vec![Protocol::Tcp];
    let tcp = header(&t);
    assert!(
        tcp.contains("; TCP only;") && !tcp.contains("UDP at"),
        "{tcp}"
    );
    t.config.protocols = vec![Protocol::Udp];
    let udp = header(&t);
    assert!(
        udp.contains("; UDP only, at the rate giving about 5 % loss;"),
        "{udp}"
    );
}

#[test]
fn a_pool_of_many_workers_is_summed_up_on_the_thread_line() {
    let t = fixture();
    let mut g = t.point("aes128-gcm", "accel", Protocol::Tcp).unwrap().runs[0]
        .sender
        .clone();
    let template = g.threads[0].clone();
    let pool = |n: usize, stage: &str| -> Vec<_> {
        (0..n)
            .map(|i| {
                let mut w = template.clone();
                w.name = format!("{stage}/{i}");
                w.cpu_cores_used = 0.01 * (i % 4) as f64;
                w
            })
            .collect()
    };
    // Eight workers: each listed.
    g.threads.extend(pool(8, "seal"));
    let line = tunnel::thread_loads(&g);
    assert!(
        line.contains("seal 0.00/0.01/0.02/0.03/0.00/0.01/0.02/0.03"),
        "{line}"
    );
    // 64 (the reviewer's --gateway-threads 64): count, sum and range.
    g.threads.extend(pool(64, "open"));
    let line = tunnel::thread_loads(&g);
    assert!(
        line.contains("open 64 workers 0.96 (0.00-0.03 each)"),
        "{line}"
    );
    assert!(line.len() < 200, "{} characters: {line}", line.len());
}

#[test]
fn the_underlay_is_a_ceiling_only_with_a_rate_limit() {
    // The fixture's veth had no rate limit: the tunnels carried more than it.
    let t = fixture();
    assert!(t.config.underlay_rate.is_none());
    let text = tunnel::text(&t);
    let header = text
        .lines()
        .find(|l| l.starts_with("transform "))
        .expect("a header");
    assert!(!header.contains("underlay"), "{header}");
    assert!(text.contains("no share of the underlay"), "{text}");
    let html = tunnel::html(&t);
    assert!(!html.contains("share of underlay"), "share column shown");
    assert!(!html.contains("100 %</td>"), "the underlay shown as 100 %");
    assert!(html.contains("underlay alone (no rate limit: not a ceiling)"));
    let chart = &html[html.find("<svg id=\"fig-tunnel\"").unwrap()..];
    let chart = &chart[..chart.find("</svg>").unwrap()];
    assert!(!chart.contains(">underlay<"), "an underlay bar");

    // Rate-limited (--underlay-rate): the wire is the ceiling, as the IIJ IPsec post's LAN.
    let mut t = fixture();
    t.config.underlay_rate = Some("1gbit".into());
    let text = tunnel::text(&t);
    assert!(text.contains("underlay alone: TCP"), "{text}");
    let header = text.lines().find(|l| l.starts_with("transform ")).unwrap();
    assert!(header.contains("underlay"), "{header}");
    let html = tunnel::html(&t);
    assert!(html.contains("<th>share of underlay (TCP)</th>") && html.contains("100 %</td>"));
    let chart = &html[html.find("<svg id=\"fig-tunnel\"").unwrap()..];
    assert!(chart[..chart.find("</svg>").unwrap()].contains(">underlay<"));
}

/// The fixture's aes128-gcm accel UDP run made one whose iperf3 client sent 60 % of
/// the rate asked, at `client` % of a core, with little loss.
fn client_short(client: f64) -> TunnelResults {
    let mut t = fixture();
    let p = t
        .points
        .iter_mut()
        .find(|p| {
            p.transform == "aes128-gcm" && p.variant == "accel" && p.protocol == Protocol::Udp
        })
        .unwrap();
    let r = &mut p.runs[0];
    r.iperf.target_bits_per_sec = Some(r.iperf.sender_bits_per_sec / 0.6);
    r.iperf.cpu_client_percent = Some(client);
    r.saturation.side = "iperf3_client".into();
    t
}

#[test]
fn a_udp_point_whose_iperf3_client_was_the_limit_is_a_lower_bound() {
    let t = client_short(97.0);
    let p = t.point("aes128-gcm", "accel", Protocol::Udp).unwrap();
    let why = p.instrument_limit().expect("the client set it");
    assert!(why.contains("at 97 % of a core"), "{why}");
    let text = tunnel::text(&t);
    let row = text
        .lines()
        .find(|l| l.starts_with("aes128-gcm         accel"))
        .unwrap();
    assert!(row.contains(" ≥"), "{row}");
    assert!(
        text.contains("≥ aes128-gcm accel UDP: LOWER BOUND: its run: the iperf3 client"),
        "{text}"
    );
    let html = tunnel::html(&t);
    assert!(
        html.contains("aes128-gcm accel UDP: a lower bound (≥): its run: the iperf3 client"),
        "no lower bound in the html"
    );
    // Nothing else is marked.
    assert_eq!(tunnel::lower_bounds(&t).len(), 1);
    assert!(tunnel::lower_bounds(&fixture()).is_empty());

    // A client held back by the sending gateway (little CPU) measured the tunnel.
    let t = client_short(40.0);
    assert_eq!(
        t.point("aes128-gcm", "accel", Protocol::Udp)
            .unwrap()
            .instrument_limit(),
        None
    );
    assert!(!tunnel::text(&t).contains("LOWER BOUND"));
}

/// The aes128-gcm accel TCP point with runs at `mbit` (interleaved rounds), the
/// gateways' threads of run `idle` at 0.2 of a core.
fn with_idle_run(mbit: &[f64], idle: usize) -> TunnelResults {
    let mut t = with_rounds(mbit, &[1000.0; 3][..mbit.len()]);
    let r = &mut gcm_accel_tcp(&mut t).runs[idle];
    for g in [&mut r.sender, &mut r.receiver] {
        for th in &mut g.threads {
            th.cpu_cores_used = th.cpu_cores_used.min(0.2);
        }
    }
    t
}

#[test]
fn a_run_far_below_its_siblings_with_idle_gateways_stalled_outside_the_tunnel() {
    use cipherbench_model::tunnel::{IDLE_GATEWAY, STALLED_SHARE};
    let t = with_idle_run(&[3000.0, 2900.0, 1000.0], 2);
    let p = t.point("aes128-gcm", "accel", Protocol::Tcp).unwrap();
    let why = p.instrument_limit().expect("a stalled run");
    assert!(
        why.starts_with("run 3 of 3 stalled at 1000 Mbit/s, 0.34x the median of the others"),
        "{why}"
    );
    // Just above the share, or the gateways busy: the tunnel's own figure.
    let at = 2950.0 * STALLED_SHARE;
    let t = with_idle_run(&[3000.0, 2900.0, at + 1.0], 2);
    assert_eq!(
        t.point("aes128-gcm", "accel", Protocol::Tcp)
            .unwrap()
            .instrument_limit(),
        None
    );
    let mut t = with_idle_run(&[3000.0, 2900.0, 1000.0], 2);
    let r = &mut gcm_accel_tcp(&mut t).runs[2];
    r.receiver.threads[0].cpu_cores_used = IDLE_GATEWAY;
    assert_eq!(
        t.point("aes128-gcm", "accel", Protocol::Tcp)
            .unwrap()
            .instrument_limit(),
        None
    );
    // Two runs: the low one stalled against the other.
    let t = with_idle_run(&[3000.0, 1000.0], 1);
    assert!(t
        .point("aes128-gcm", "accel", Protocol::Tcp)
        .unwrap()
        .instrument_limit()
        .is_some_and(|w| w.starts_with("run 2 of 2 stalled")));
    // One run has no siblings to fall below.
    let t = with_idle_run(&[1000.0], 0);
    assert_eq!(
        t.point("aes128-gcm", "accel", Protocol::Tcp)
            .unwrap()
            .instrument_limit(),
        None
    );
}

/// Issue 32's tunnel ceiling: each TCP point against the null transform's, in the
/// table and in summary.md; none without a null point.
#[test]
fn each_tcp_point_is_a_share_of_the_null_transform() {
    let mut t = fixture();
    let null = t.point("null", "accel", Protocol::Tcp).unwrap();
    let ceiling = null.throughput_bits_per_sec.median;
    let gcm = t.point("aes128-gcm", "accel", Protocol::Tcp).unwrap();
    let share = gcm.throughput_bits_per_sec.median / ceiling;
    let shares = tunnel::null_shares(&t);
    assert_eq!(shares.len(), 2, "{shares:?}");
    assert_eq!(shares[0].0, "aes128-gcm");
    assert!((shares[0].2 - share).abs() < 1e-12);
    let text = tunnel::text(&t);
    let line = format!(
        "TCP as a share of the null transform's (no crypto, the same gateways: this machine's tunnel ceiling): aes128-gcm accel {:.0} %, noaesni {:.0} %",
        share * 100.0,
        shares[1].2 * 100.0
    );
    assert!(text.contains(&line), "{line}\nnot in\n{text}");
    // At a fixed load the shares say nothing: not given.
    t.config.tcp_rate_bits_per_sec = Some(100_000_000);
    assert!(tunnel::null_shares(&t).is_empty());
    t.config.tcp_rate_bits_per_sec = None;
    t.points.retain(|p| p.transform != "null");
    assert!(tunnel::null_shares(&t).is_empty());
    assert!(!tunnel::text(&t).contains("null transform's"));
}

/// Issue 32's cost: both gateways' cores per Gbit/s by transform and variant; at a
/// fixed load (`--rate`) a point that carried less is marked, and the cores AES-NI
/// saves are given only where both variants carried the load.
#[test]
fn the_cost_line_gives_cores_per_gbit_and_what_aes_ni_saves_at_a_fixed_load() {
    let mut t = fixture();
    let gcm = t.point("aes128-gcm", "accel", Protocol::Tcp).unwrap();
    let expected = tunnel::cores_per_gbit(gcm).unwrap();
    let r = &gcm.runs[0];
    let first = (r.sender.cpu_cores_used + r.receiver.cpu_cores_used)
        / (r.iperf.receiver_bits_per_sec / 1e9);
    assert!(expected > 0.0 && first > 0.0);
    let name = |v: &str| v.to_string();
    let line = tunnel::cost_line(&t, &name);
    assert!(
        line.starts_with("gateway cores per Gbit/s (both gateways, TCP): null accel "),
        "{line}"
    );
    assert!(
        line.contains(&format!("aes128-gcm accel {expected:.2}, noaesni ")),
        "{line}"
    );
    assert!(!line.contains("saves"), "{line}");
    // A load both aes128-gcm variants carried (the slower one's median): the saving.
    let noaesni = t.point("aes128-gcm", "noaesni", Protocol::Tcp).unwrap();
    let (slow, cost_n) = (
        noaesni.throughput_bits_per_sec.median,
        tunnel::cores_per_gbit(noaesni).unwrap(),
    );
    t.config.tcp_rate_bits_per_sec = Some(slow as u64);
    let line = tunnel::cost_line(&t, &name);
    let saved = (cost_n - expected) * (slow as u64) as f64 / 1e9;
    assert!(line.contains("at a fixed"), "{line}");
    assert!(
        tunnel::text(&t).contains(&format!("iperf3 TCP -l 1220 -b {}, UDP", slow as u64)),
        "{}",
        tunnel::text(&t)
    );
    assert!(
        line.contains(&format!(
            "(noaesni's cost less accel's, both gateways): aes128-gcm {saved:.2}"
        )),
        "{line}"
    );
    // A load above what noaesni carried: marked, and no saving drawn.
    t.config.tcp_rate_bits_per_sec = Some((slow * 2.0) as u64);
    let line = tunnel::cost_line(&t, &name);
    assert!(line.contains("saturated below the load"), "{line}");
    assert!(!line.contains("saves"), "{line}");
}
