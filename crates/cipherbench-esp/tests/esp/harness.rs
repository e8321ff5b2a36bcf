//! An in-memory network between two gateways: a link that loses, duplicates,
//! reorders (a little, and sometimes past the window) and corrupts packets, with
//! keepalives and IKE markers mixed in. A naive model of RFC 4303 §3.4.3 predicts
//! every outcome, and every inner packet arrives at most once, intact.

use crate::common::{gateways, ipv4, ipv6};
use cipherbench_esp::udp::NAT_KEEPALIVE;
use cipherbench_esp::{DropReason, Inbound, InboundSet, OutboundSa, Transform};
use std::collections::{BTreeSet, HashMap};

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// What arrives at the receiver, in arrival order.
enum Datagram {
    Esp {
        sequence: u64,
        bytes: Vec<u8>,
        corrupted: bool,
        inner: Vec<u8>,
    },
    Keepalive,
    Ike,
}

struct Expected {
    delivered: u64,
    drops: HashMap<DropReason, u64>,
}

/// The naive receiver: remembers every accepted sequence number.
fn predict(arrivals: &[Datagram], window: u64) -> Expected {
    let mut seen = BTreeSet::new();
    let mut top = 0u64;
    let mut expected = Expected {
        delivered: 0,
        drops: HashMap::new(),
    };
    for d in arrivals {
        let Datagram::Esp {
            sequence,
            corrupted,
            ..
        } = d
        else {
            continue;
        };
        let reason = if *sequence + window <= top {
            Some(DropReason::TooOld)
        } else if seen.contains(sequence) {
            Some(DropReason::Replayed)
        } else if *corrupted {
            Some(DropReason::AuthenticationFailed)
        } else {
            None
        };
        match reason {
            Some(r) => *expected.drops.entry(r).or_default() += 1,
            None => {
                seen.insert(*sequence);
                top = top.max(*sequence);
                expected.delivered += 1;
            }
        }
    }
    expected
}

/// Sends `count` packets through a lossy link; returns what arrives, in order.
fn transmit(
    sender: &mut OutboundSa,
    rng: &mut Rng,
    count: usize,
    window: u64,
    corrupt_percent: u64,
) -> Vec<Datagram> {
    let mut in_flight: Vec<(u64, Datagram)> = Vec::new();
    let mut wire = vec![0u8; 2000];
    for i in 0..count {
        let inner = if i % 3 == 0 {
            ipv6(40 + (i * 13) % 1400, i as u8)
        } else {
            ipv4(20 + (i * 29) % 1400, i as u8)
        };
        let sequence = sender.next_sequence();
        let n = sender.seal(&inner, &mut wire).unwrap();
        // Departure time plus delay: mostly small, so order mostly holds; 2 % are
        // held back further than the window.
        let delay = if rng.chance(2) {
            window + 5 + rng.below(50)
        } else {
            rng.below(8)
        };
        let at = i as u64 + delay;
        if rng.chance(5) {
            continue; // lost
        }
        let mut bytes = wire[..n].to_vec();
        let corrupted = rng.chance(corrupt_percent);
        if corrupted {
            let at_byte = 4 + rng.below(n as u64 - 4) as usize; // not the SPI
            bytes[at_byte] ^= 1 << rng.below(8);
        }
        if rng.chance(4) {
            let again = at + rng.below(window);
            let copy = Datagram::Esp {
                sequence,
                bytes: bytes.clone(),
                corrupted,
                inner: inner.clone(),
            };
            in_flight.push((again, copy));
        }
        in_flight.push((
            at,
            Datagram::Esp {
                sequence,
                bytes,
                corrupted,
                inner,
            },
        ));
        if rng.chance(2) {
            in_flight.push((at, Datagram::Keepalive));
        }
        if rng.chance(1) {
            in_flight.push((at, Datagram::Ike));
        }
    }
    // Stable: equal times keep their sending order.
    in_flight.sort_by_key(|(at, _)| *at);
    in_flight.into_iter().map(|(_, d)| d).collect()
}

fn deliver(receiver: &mut InboundSet, arrivals: &[Datagram]) -> (u64, HashMap<DropReason, u64>) {
    let mut out = vec![0u8; 2000];
    let mut delivered_sequences = BTreeSet::new();
    let mut delivered = 0;
    let mut drops: HashMap<DropReason, u64> = HashMap::new();
    for d in arrivals {
        let payload: &[u8] = match d {
            Datagram::Esp { bytes, .. } => bytes,
            Datagram::Keepalive => &NAT_KEEPALIVE,
            Datagram::Ike => &[0, 0, 0, 0, 1, 2, 3],
        };
        match receiver.receive_udp(payload, &mut out) {
            Inbound::Packet { inner, .. } => {
                let Datagram::Esp {
                    sequence,
                    corrupted,
                    inner: sent,
                    ..
                } = d
                else {
                    panic!("non-ESP payload delivered")
                };
                assert!(!corrupted, "corrupted packet {sequence} delivered");
                assert_eq!(&inner[..], &sent[..], "packet {sequence} altered");
                assert!(
                    delivered_sequences.insert(*sequence),
                    "packet {sequence} delivered twice"
                );
                delivered += 1;
            }
            Inbound::Dropped(r) => *drops.entry(r).or_default() += 1,
            Inbound::NatKeepalive => assert!(matches!(d, Datagram::Keepalive)),
            Inbound::NonEsp(ike) => assert_eq!(ike, &[1, 2, 3]),
        }
    }
    (delivered, drops)
}

#[test]
fn lossy_reordering_duplicating_link_matches_the_model() {
    for (k, t) in Transform::ALL.into_iter().enumerate() {
        for window in [32u32, 128] {
            let mut g = gateways(t, window);
            let mut rng = Rng(0x5EED_0000 + k as u64 * 77 + u64::from(window));
            for (sender, receiver) in [
                (&mut g.initiator_out, &mut g.responder_in),
                (&mut g.responder_out, &mut g.initiator_in),
            ] {
                // Null has no integrity, so the link does not corrupt its packets.
                let corrupt_percent = if t == Transform::Null { 0 } else { 3 };
                let arrivals =
                    transmit(sender, &mut rng, 2_000, u64::from(window), corrupt_percent);
                let expected = predict(&arrivals, u64::from(window));
                let (delivered, drops) = deliver(receiver, &arrivals);
                assert_eq!(delivered, expected.delivered, "{t} window {window}");
                assert_eq!(drops, expected.drops, "{t} window {window}");
                let mut caused = vec![DropReason::TooOld, DropReason::Replayed];
                if corrupt_percent > 0 {
                    caused.push(DropReason::AuthenticationFailed);
                }
                for r in caused {
                    assert!(
                        drops.get(&r).copied().unwrap_or(0) > 0,
                        "{t}: the link never caused {r:?}"
                    );
                }
                let counted = receiver.total_drops();
                for (r, n) in &drops {
                    assert_eq!(counted.get(*r), *n);
                }
                // Every arrival, ESP or not, has exactly one outcome.
                let a = receiver.accounting();
                let kind = |k: fn(&Datagram) -> bool| arrivals.iter().filter(|d| k(d)).count();
                assert_eq!(a.received, arrivals.len() as u64, "{t}");
                assert_eq!(a.unaccounted(), 0, "{t} window {window}: {a:?}");
                assert_eq!(
                    a.nat_keepalives,
                    kind(|d| matches!(d, Datagram::Keepalive)) as u64
                );
                assert_eq!(a.non_esp, kind(|d| matches!(d, Datagram::Ike)) as u64);
            }
        }
    }
}
