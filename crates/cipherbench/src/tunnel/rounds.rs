//! The variants of one transform measured in interleaved rounds: accel noaesni,
//! noaesni accel, accel noaesni, ... ([`cipherbench_model::interleave::schedule`]),
//! instead of every run of accel and then every run of noaesni, so a drift of the
//! machine lands on both and cancels in their ratio, and run i of each pairs with
//! run i of the others for the ratio's interval.
//!
//! A variant lives in a gateway (or charon) process's environment, so changing
//! variant means a fresh pair of processes. The rounds of the schedule are rotated
//! so that the fewest pairs start: with two variants, round r ends with the variant
//! round r + 1 begins with, so R rounds cost R + 1 pair starts, not 2R.
//!
//! Per protocol: TCP is R interleaved rounds. UDP first searches each variant's
//! rate at the target loss (a search steers each probe by the one before, so it runs
//! through one pair, a variant at a time; the variants' searches follow each other
//! in turn), then measures the R rounds interleaved at the rates found; a probe as
//! long as a measured run at the chosen rate counts as that variant's round 0, as
//! before.
//!
//! The driver ([`interleaved`]) is generic over the [`Stand`] that starts pairs and
//! runs iperf3, so the order is tested without processes.

use super::search::{Search, Step};
use super::TunnelPlan;
use crate::interrupt;
use anyhow::Result;
use cipherbench_model::interleave::{schedule, Order, Slot};
use cipherbench_model::tunnel::{IperfRun, Protocol, TunnelRun, UdpProbe, UdpSearch};
use cipherbench_model::Summary;

/// The measuring order of `rounds` rounds of `variants` variants at one point,
/// without the `(round, variant)` runs already `measured`, rotated so that the
/// fewest pairs start given the variant whose pair is `running` (ties: the
/// schedule's own order).
fn order(
    variants: usize,
    rounds: usize,
    measured: &[(usize, usize)],
    running: Option<usize>,
) -> Vec<Slot> {
    let base = schedule(1, variants, rounds, Order::PointByPoint);
    (0..variants.max(1))
        .map(|rotation| {
            base.iter()
                .map(|s| Slot {
                    variant: (s.variant + rotation) % variants,
                    ..*s
                })
                .filter(|s| !measured.contains(&(s.round, s.variant)))
                .collect::<Vec<Slot>>()
        })
        .min_by_key(|slots| starts(slots.iter().map(|s| s.variant), running))
        .unwrap_or_default()
}

/// How many pairs start to measure `variants` in this order, `running` running now.
fn starts(variants: impl IntoIterator<Item = usize>, running: Option<usize>) -> usize {
    let mut current = running;
    let mut n = 0;
    for v in variants {
        if current != Some(v) {
            n += 1;
            current = Some(v);
        }
    }
    n
}

/// What the driver needs of a run: its iperf3 figures and its place in the
/// measuring order (a namespace tunnel's [`TunnelRun`], or a two-host tunnel's run).
pub trait Placed {
    /// iperf3's figures.
    fn iperf(&self) -> &IperfRun;
    /// Its round (None: a search probe, or not yet placed).
    fn round(&self) -> Option<usize>;
    /// Sets its round.
    fn set_round(&mut self, round: usize);
    /// Sets its place in the layer's measuring order.
    fn set_sequence(&mut self, sequence: usize);
}

impl Placed for TunnelRun {
    fn iperf(&self) -> &IperfRun {
        &self.iperf
    }
    fn round(&self) -> Option<usize> {
        self.round
    }
    fn set_round(&mut self, round: usize) {
        self.round = Some(round);
    }
    fn set_sequence(&mut self, sequence: usize) {
        self.sequence = Some(sequence);
    }
}

/// What the driver needs of a stack: cipherbench's own gateways, strongSwan's
/// charons, or the two-host tunnel's ends, for one transform.
pub trait Stand {
    /// A running pair of processes.
    type Pair;
    /// One measured run.
    type Run: Placed;
    /// Starts a pair running variant `v` (an index into the transform's variants).
    fn start(&mut self, v: usize) -> Result<Self::Pair>;
    /// Stops a pair.
    fn stop(&mut self, pair: Self::Pair) -> Result<()>;
    /// One iperf3 run of `protocol` for `seconds` (at `rate` for UDP) through `pair`.
    fn run(
        &mut self,
        pair: &mut Self::Pair,
        protocol: Protocol,
        seconds: u64,
        rate: Option<f64>,
    ) -> Result<Self::Run>;
    /// A point is measured: variant `v`, its search (UDP), its runs in round order.
    fn point(
        &mut self,
        v: usize,
        protocol: Protocol,
        search: Option<UdpSearch>,
        runs: Vec<Self::Run>,
    ) -> Result<()>;
}

/// The pair running now, and its variant.
struct Running<P> {
    variant: usize,
    pair: P,
}

/// Measures one transform's points, `variants` of them per protocol, in
/// interleaved rounds. `underlay_tcp` starts a UDP search where its variant has no
/// TCP figure; `sequence` numbers every run in measuring order.
pub fn interleaved<S: Stand>(
    plan: &TunnelPlan,
    variants: usize,
    stand: &mut S,
    underlay_tcp: Option<f64>,
    sequence: &mut usize,
) -> Result<()> {
    let mut driver = Driver {
        plan,
        variants,
        stand,
        sequence,
        running: None,
        tcp_rate: vec![None; variants],
    };
    let outcome = plan
        .protocols
        .iter()
        .try_for_each(|&protocol| driver.protocol(protocol, underlay_tcp));
    // On success the last pair is stopped cleanly; on an error it is dropped, which
    // stops it too (the error is the one worth reporting).
    if let (Ok(()), Some(r)) = (&outcome, driver.running) {
        driver.stand.stop(r.pair)?;
    }
    outcome
}

/// One transform's measuring: the stand, the pair running, the runs' numbering.
struct Driver<'a, S: Stand> {
    plan: &'a TunnelPlan,
    variants: usize,
    stand: &'a mut S,
    sequence: &'a mut usize,
    running: Option<Running<S::Pair>>,
    /// Each variant's median TCP rate, once measured: where its UDP search starts.
    tcp_rate: Vec<Option<f64>>,
}

/// What one variant's runs of one protocol gathered before its point is recorded.
struct Gathered<R> {
    runs: Vec<R>,
    search: Option<UdpSearch>,
    rate: Option<f64>,
}

impl<S: Stand> Driver<'_, S> {
    /// Every variant's point of `protocol`: for UDP each variant's rate searched
    /// first, then the rounds interleaved; each point recorded with its runs in
    /// round order.
    fn protocol(&mut self, protocol: Protocol, underlay_tcp: Option<f64>) -> Result<()> {
        let mut gathered: Vec<Gathered<S::Run>> = (0..self.variants)
            .map(|_| Gathered {
                runs: Vec::new(),
                search: None,
                rate: None,
            })
            .collect();
        if protocol == Protocol::Udp {
            // The searches, from the variant whose pair runs.
            let first = self.running.as_ref().map_or(0, |r| r.variant);
            for k in 0..self.variants {
                let v = (first + k) % self.variants;
                self.search(v, underlay_tcp, &mut gathered[v])?;
            }
        }
        let measured: Vec<(usize, usize)> = gathered
            .iter()
            .enumerate()
            .flat_map(|(v, g)| g.runs.iter().filter_map(move |r| Some((r.round()?, v))))
            .collect();
        let running = self.running.as_ref().map(|r| r.variant);
        for slot in order(self.variants, self.plan.repeats, &measured, running) {
            let v = slot.variant;
            // TCP: unpaced, or the fixed load asked (--rate); UDP: the rate found.
            let rate = match protocol {
                Protocol::Tcp => self.plan.tcp_rate,
                Protocol::Udp => gathered[v].rate,
            };
            let mut run = self.one_run(v, protocol, self.plan.seconds, rate)?;
            run.set_round(slot.round);
            gathered[v].runs.push(run);
        }
        for (v, mut g) in gathered.into_iter().enumerate() {
            g.runs.sort_by_key(|r| r.round());
            if protocol == Protocol::Tcp {
                let totals: Vec<f64> = g
                    .runs
                    .iter()
                    .map(|r| r.iperf().receiver_bits_per_sec)
                    .collect();
                self.tcp_rate[v] = Some(Summary::of_or_empty(&totals).median);
            }
            self.stand.point(v, protocol, g.search, g.runs)?;
        }
        Ok(())
    }

    /// Variant `v`'s UDP rate at the target loss, searched through its pair from its
    /// TCP rate (or the underlay's). A probe as long as a measured run at the chosen
    /// rate is a measured run: it is this variant's round 0.
    fn search(
        &mut self,
        v: usize,
        underlay_tcp: Option<f64>,
        into: &mut Gathered<S::Run>,
    ) -> Result<()> {
        let plan = self.plan;
        let start = self.tcp_rate[v].or(underlay_tcp).unwrap_or(1e9) * 1.05;
        let mut probes = Vec::new();
        let search = udp_search(plan, start, |rate| {
            let run = self.one_run(v, Protocol::Udp, plan.probe_seconds, Some(rate))?;
            let iperf = run.iperf().clone();
            probes.push(run);
            Ok(iperf)
        })?;
        let chosen = search.chosen_bits_per_sec;
        if plan.probe_seconds == plan.seconds {
            if let Some(mut run) = probes
                .into_iter()
                .rev()
                .find(|r| r.iperf().target_bits_per_sec == Some(chosen.round()))
            {
                run.set_round(0);
                into.runs.push(run);
            }
        }
        into.search = Some(search);
        into.rate = Some(chosen);
        Ok(())
    }

    /// One run of variant `v` (its pair started if another's runs), numbered in
    /// measuring order; Ctrl-C is checked first.
    fn one_run(
        &mut self,
        v: usize,
        protocol: Protocol,
        seconds: u64,
        rate: Option<f64>,
    ) -> Result<S::Run> {
        interrupt::check()?;
        if let Some(old) = self.running.take_if(|r| r.variant != v) {
            self.stand.stop(old.pair)?;
        }
        if self.running.is_none() {
            self.running = Some(Running {
                variant: v,
                pair: self.stand.start(v)?,
            });
        }
        // Set just above.
        let pair = &mut self.running.as_mut().expect("a running pair").pair;
        let mut run = self.stand.run(pair, protocol, seconds, rate)?;
        run.set_sequence(*self.sequence);
        *self.sequence += 1;
        Ok(run)
    }
}

/// Runs the UDP search with `probe` running one iperf3 probe at a rate (each
/// probe checks for Ctrl-C first: [`interleaved`]'s runs do).
fn udp_search(
    plan: &TunnelPlan,
    start: f64,
    mut probe: impl FnMut(f64) -> Result<IperfRun>,
) -> Result<UdpSearch> {
    let mut search = Search::new(
        start,
        plan.target_loss,
        plan.loss_tolerance,
        plan.max_probes,
    );
    loop {
        match search.step() {
            Step::Done(result) => return Ok(result),
            Step::Probe(rate) => {
                let run = probe(rate)?;
                search.record(UdpProbe {
                    target_bits_per_sec: rate,
                    sender_bits_per_sec: run.sender_bits_per_sec,
                    receiver_bits_per_sec: run.receiver_bits_per_sec,
                    lost_percent: run.lost_percent.unwrap_or(0.0),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cipherbench_model::tunnel::{ByteCheck, GatewayRun, Saturation, VariantSide};

    fn letters(slots: &[Slot]) -> String {
        slots
            .iter()
            .map(|s| (b'A' + s.variant as u8) as char)
            .collect()
    }

    #[test]
    fn rounds_alternate_and_turn_so_that_a_pair_serves_two_runs_in_a_row() {
        // From nothing running: A B, B A, A B: 4 pair starts for 3 rounds.
        let o = order(2, 3, &[], None);
        assert_eq!(letters(&o), "ABBAAB");
        assert_eq!(
            o.iter().map(|s| s.round).collect::<Vec<_>>(),
            [0, 0, 1, 1, 2, 2]
        );
        assert_eq!(starts(o.iter().map(|s| s.variant), None), 4);
        // With B's pair running, the rounds start with B: no extra start.
        let o = order(2, 3, &[], Some(1));
        assert_eq!(letters(&o), "BAABBA");
        assert_eq!(starts(o.iter().map(|s| s.variant), Some(1)), 3);
        // Round 0 of both measured already (the UDP searches' kept probes).
        let o = order(2, 3, &[(0, 0), (0, 1)], Some(0));
        assert_eq!(letters(&o), "ABBA");
        assert_eq!(o.iter().map(|s| s.round).collect::<Vec<_>>(), [1, 1, 2, 2]);
        // Three variants rotate; one variant is one pair for every round.
        assert_eq!(letters(&order(3, 2, &[], None)), "ABCBCA");
        assert_eq!(letters(&order(1, 3, &[], None)), "AAA");
        assert!(order(2, 1, &[(0, 0), (0, 1)], None).is_empty());
    }

    #[test]
    fn every_round_of_every_variant_comes_once_whatever_runs_and_was_measured() {
        for variants in 1..4 {
            for rounds in 1..5 {
                for running in [None, Some(0), Some(variants - 1)] {
                    let measured = [(0, 0)];
                    let o = order(variants, rounds, &measured, running);
                    assert_eq!(o.len(), variants * rounds - 1);
                    for round in 0..rounds {
                        for v in 0..variants {
                            let n = o
                                .iter()
                                .filter(|s| s.round == round && s.variant == v)
                                .count();
                            assert_eq!(n, usize::from((round, v) != (0, 0)));
                        }
                    }
                }
            }
        }
    }

    /// A point as the driver hands it over: variant, protocol, and each run's
    /// (round, sequence).
    type PointSeen = (usize, Protocol, Vec<(Option<usize>, Option<usize>)>);

    /// Records what the driver asks for: pair starts and runs, in order.
    #[derive(Default)]
    struct Log {
        events: Vec<String>,
        points: Vec<PointSeen>,
    }

    impl Stand for Log {
        type Pair = usize;
        type Run = TunnelRun;
        fn start(&mut self, v: usize) -> Result<usize> {
            self.events.push(format!("start{v}"));
            Ok(v)
        }
        fn stop(&mut self, _: usize) -> Result<()> {
            Ok(())
        }
        fn run(
            &mut self,
            pair: &mut usize,
            protocol: Protocol,
            seconds: u64,
            rate: Option<f64>,
        ) -> Result<TunnelRun> {
            self.events.push(format!(
                "{}{}{}",
                protocol.as_str(),
                *pair,
                if rate.is_some() && seconds == 1 {
                    "p"
                } else {
                    ""
                }
            ));
            // Noaesni carries half of accel; UDP loses about 5 % at any rate.
            let carried = 1e9 / (1 + *pair) as f64;
            let received = rate.map_or(carried, |r| r.min(carried) * 0.95);
            Ok(fake_run(protocol, rate, received))
        }
        fn point(
            &mut self,
            v: usize,
            protocol: Protocol,
            _: Option<UdpSearch>,
            runs: Vec<TunnelRun>,
        ) -> Result<()> {
            self.points.push((
                v,
                protocol,
                runs.iter().map(|r| (r.round, r.sequence)).collect(),
            ));
            Ok(())
        }
    }

    fn fake_run(protocol: Protocol, rate: Option<f64>, received: f64) -> TunnelRun {
        let gateway: GatewayRun = serde_json::from_value(serde_json::json!({
            "side": "sender", "variant": "accel", "sealed_packets": 0, "sealed_bytes": 0,
            "seal_refused": 0, "esp_packets_sent": 0, "esp_bytes_sent": 0,
            "esp_packets_received": 0, "esp_bytes_received": 0, "opened_packets": 0,
            "opened_bytes": 0, "drops": {}, "socket_drops": 0, "tun_queue_drops": 0,
            "io_errors": 0, "tun_reads": 0, "tun_writes": 0, "cpu_cores_used": 0.5,
            "threads": []
        }))
        .unwrap();
        TunnelRun {
            iperf: IperfRun {
                protocol,
                command: Vec::new(),
                target_bits_per_sec: rate.map(f64::round),
                length_bytes: 1220,
                tcp_mss_bytes: None,
                seconds: 1.0,
                sent_bytes: 0,
                received_bytes: 0,
                sent_bytes_total: 0,
                received_bytes_total: 0,
                retransmits_total: None,
                sender_bits_per_sec: rate.unwrap_or(received),
                receiver_bits_per_sec: received,
                retransmits: None,
                packets: None,
                lost_packets: None,
                lost_percent: rate.map(|_| 5.0),
                out_of_order: None,
                jitter_ms: None,
                interval_bits_per_sec: Vec::new(),
                cpu_client_percent: None,
                cpu_server_percent: None,
            },
            sender: gateway.clone(),
            receiver: gateway,
            byte_check: ByteCheck {
                iperf_bytes: 0,
                opened_bytes: 0,
                opened_packets: 0,
                expected_min: 0,
                expected_max: 0,
                ok: true,
            },
            saturation: Saturation {
                side: "none".into(),
                evidence: String::new(),
            },
            noise: None,
            peer_noise: None,
            round: None,
            sequence: None,
            tcp: None,
        }
    }

    fn plan(repeats: usize, probe_seconds: u64) -> TunnelPlan {
        TunnelPlan {
            transforms: vec![cipherbench_esp::Transform::Aes128Gcm],
            variants: vec![
                crate::variant::Variant::accel(),
                crate::variant::Variant::noaesni(),
            ],
            variant_side: VariantSide::Both,
            underlay_rate: None,
            mtu: 1400,
            length: Some(1220),
            tcp_length: None,
            tcp_rate: None,
            protocols: vec![Protocol::Tcp, Protocol::Udp],
            udp_window: None,
            seconds: 2,
            omit_seconds: 1,
            probe_seconds,
            target_loss: 0.05,
            loss_tolerance: 0.025,
            max_probes: 4,
            repeats,
            underlay: false,
            batch: 64,
            offload: true,
            udp_offload: true,
            pin: false,
            gateway_threads: 1,
            gateway_threads_from: String::new(),
            iperf3_parallel: 1,
            esp_keylog: None,
            stacks: cipherbench_model::tunnel::Stack::own_only(),
            strongswan_backends: Vec::new(),
            charon: None,
        }
    }

    #[test]
    fn tcp_rounds_alternate_then_each_udp_search_then_udp_rounds_alternate() {
        let mut log = Log::default();
        let mut sequence = 10;
        interleaved(&plan(3, 1), 2, &mut log, None, &mut sequence).unwrap();
        let events = log.events.join(" ");
        // TCP: A B, B A, A B. UDP: B's search (its pair runs), A's, then the rounds
        // from A: A B, B A, A B. Every probe converges at once (5 % loss).
        assert_eq!(
            events,
            "start0 tcp0 start1 tcp1 tcp1 start0 tcp0 tcp0 start1 tcp1 \
             udp1p start0 udp0p udp0 start1 udp1 udp1 start0 udp0 udp0 start1 udp1"
        );
        // Each point: its runs in round order, numbered in measuring order.
        let runs = |v: usize, p: Protocol| {
            log.points
                .iter()
                .find(|(pv, pp, _)| *pv == v && *pp == p)
                .unwrap()
                .2
                .clone()
        };
        assert_eq!(
            runs(0, Protocol::Tcp),
            [
                (Some(0), Some(10)),
                (Some(1), Some(13)),
                (Some(2), Some(14))
            ]
        );
        assert_eq!(
            runs(1, Protocol::Tcp),
            [
                (Some(0), Some(11)),
                (Some(1), Some(12)),
                (Some(2), Some(15))
            ]
        );
        // The probes took places 16 and 17; the measured rounds follow.
        assert_eq!(
            runs(0, Protocol::Udp),
            [
                (Some(0), Some(18)),
                (Some(1), Some(21)),
                (Some(2), Some(22))
            ]
        );
        assert_eq!(sequence, 24);
    }

    #[test]
    fn a_probe_as_long_as_a_run_is_round_zero_and_one_round_adds_no_run() {
        // The quick preset: one run per point, probes as long as runs.
        let mut log = Log::default();
        let mut sequence = 0;
        interleaved(&plan(1, 2), 2, &mut log, None, &mut sequence).unwrap();
        assert_eq!(
            log.events.join(" "),
            "start0 tcp0 start1 tcp1 udp1 start0 udp0"
        );
        for (_, _, runs) in &log.points {
            assert_eq!(runs.len(), 1);
            assert_eq!(runs[0].0, Some(0));
        }
    }
}
