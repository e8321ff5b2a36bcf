//! One SA, many threads: the workers of an outbound SA share one sequence counter and
//! never send a number twice, even at exhaustion; the workers of an inbound SA share
//! one replay window and accept each sequence number at most once (exactly once while
//! every packet is inside the window), whatever the interleaving.

use std::collections::BTreeMap;
use std::sync::Barrier;
use std::thread;

use crate::common::{gateways, ipv4};
use cipherbench_esp::{DropReason, InboundSa, OutboundSa, SealError, Transform, MAX_SEQUENCE};
use proptest::prelude::*;

fn sequence_of(wire: &[u8]) -> u64 {
    u64::from(u32::from_be_bytes(wire[4..8].try_into().unwrap()))
}

/// Seals `per_worker` packets on each of `workers` threads, all started together;
/// returns every sealed packet and the number of refusals.
fn seal_concurrently(sa: &OutboundSa, workers: usize, per_worker: usize) -> (Vec<Vec<u8>>, usize) {
    let senders: Vec<OutboundSa> = (0..workers).map(|_| sa.worker().unwrap()).collect();
    let start = Barrier::new(workers);
    thread::scope(|s| {
        let handles: Vec<_> = senders
            .into_iter()
            .enumerate()
            .map(|(w, mut sender)| {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    let mut sealed = Vec::new();
                    let mut refused = 0;
                    for i in 0..per_worker {
                        let inner = ipv4(40 + (i % 50), w as u8);
                        let mut wire = vec![0u8; sender.sealed_len(inner.len())];
                        match sender.seal(&inner, &mut wire) {
                            Ok(n) => {
                                wire.truncate(n);
                                sealed.push(wire);
                            }
                            Err(SealError::SequenceExhausted { .. }) => refused += 1,
                            Err(e) => panic!("{e}"),
                        }
                    }
                    (sealed, refused)
                })
            })
            .collect();
        let mut all = Vec::new();
        let mut refused = 0;
        for h in handles {
            let (sealed, r) = h.join().unwrap();
            all.extend(sealed);
            refused += r;
        }
        (all, refused)
    })
}

/// Opens `packets` split round-robin over `workers` threads of one inbound SA;
/// returns, per sequence number, how many times it was accepted, and the drops.
fn open_concurrently(
    sa: &InboundSa,
    workers: usize,
    packets: &[Vec<u8>],
) -> (BTreeMap<u64, usize>, BTreeMap<DropReason, usize>) {
    let receivers: Vec<InboundSa> = (0..workers).map(|_| sa.worker().unwrap()).collect();
    let start = Barrier::new(workers);
    thread::scope(|s| {
        let handles: Vec<_> = receivers
            .into_iter()
            .enumerate()
            .map(|(w, mut receiver)| {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    let mut accepted = Vec::new();
                    let mut drops = Vec::new();
                    let mut out = vec![0u8; 2048];
                    for p in packets.iter().skip(w).step_by(workers) {
                        match receiver.open(p, &mut out) {
                            Ok(_) => accepted.push(sequence_of(p)),
                            Err(reason) => drops.push(reason),
                        }
                    }
                    (accepted, drops)
                })
            })
            .collect();
        let mut accepted = BTreeMap::new();
        let mut drops = BTreeMap::new();
        for h in handles {
            let (a, d) = h.join().unwrap();
            for s in a {
                *accepted.entry(s).or_insert(0) += 1;
            }
            for r in d {
                *drops.entry(r).or_insert(0) += 1;
            }
        }
        (accepted, drops)
    })
}

fn any_transform() -> impl Strategy<Value = Transform> {
    prop::sample::select(Transform::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn workers_of_one_sa_never_send_a_sequence_number_twice(
        t in any_transform(),
        workers in 1usize..5,
        per_worker in 1usize..300,
    ) {
        let g = gateways(t, 128);
        let (sealed, refused) = seal_concurrently(&g.initiator_out, workers, per_worker);
        prop_assert_eq!(refused, 0);
        let mut seqs: Vec<u64> = sealed.iter().map(|p| sequence_of(p)).collect();
        seqs.sort_unstable();
        let expected: Vec<u64> = (1..=(workers * per_worker) as u64).collect();
        prop_assert_eq!(seqs, expected);
        prop_assert_eq!(g.initiator_out.next_sequence(), (workers * per_worker) as u64 + 1);
    }

    #[test]
    fn shared_window_accepts_each_sequence_number_at_most_once_under_concurrent_workers(
        t in any_transform(),
        workers in 1usize..5,
        count in 1usize..400,
        window in prop::sample::select(vec![32u32, 128, 1024]),
        copies in 1usize..4,
        order in prop::collection::vec(any::<u32>(), 1200),
    ) {
        let g = gateways(t, window);
        let mut sender = OutboundSa::new(g.initiator.outbound.clone()).unwrap();
        let mut params = g.initiator.outbound.clone();
        params.replay_window = window;
        let receiver = InboundSa::new(params).unwrap();
        let mut packets = Vec::new();
        for i in 0..count {
            let inner = ipv4(40 + i % 100, 7);
            let mut wire = vec![0u8; sender.sealed_len(inner.len())];
            let n = sender.seal(&inner, &mut wire).unwrap();
            wire.truncate(n);
            for _ in 0..copies {
                packets.push(wire.clone());
            }
        }
        // Shuffle by the drawn keys: replays arrive anywhere, on any worker.
        let mut keyed: Vec<(u32, Vec<u8>)> = order.iter().copied().zip(packets).collect();
        keyed.sort_by_key(|(k, _)| *k);
        let packets: Vec<Vec<u8>> = keyed.into_iter().map(|(_, p)| p).collect();
        let total = packets.len();

        let (accepted, drops) = open_concurrently(&receiver, workers, &packets);
        for (seq, times) in &accepted {
            prop_assert_eq!(*times, 1, "sequence {} accepted {} times", seq, times);
        }
        for reason in drops.keys() {
            prop_assert!(
                matches!(reason, DropReason::Replayed | DropReason::TooOld),
                "unexpected drop {:?}", reason
            );
        }
        let dropped: usize = drops.values().sum();
        prop_assert_eq!(accepted.len() + dropped, total);
        if count as u32 <= window {
            // Every packet is inside the window: each number exactly once.
            prop_assert_eq!(accepted.len(), count);
        }
        prop_assert!(receiver.window().top() <= count as u64);
        prop_assert_eq!(receiver.window().top(), *accepted.keys().last().unwrap());
    }
}

#[test]
fn workers_of_one_sa_stop_together_at_exhaustion() {
    for t in Transform::ALL {
        let g = gateways(t, 128);
        let sa = OutboundSa::starting_at(g.initiator.outbound.clone(), MAX_SEQUENCE - 9).unwrap();
        let (sealed, refused) = seal_concurrently(&sa, 3, 10);
        assert_eq!(sealed.len(), 10, "{t}");
        assert_eq!(refused, 20, "{t}");
        let mut seqs: Vec<u64> = sealed.iter().map(|p| sequence_of(p)).collect();
        seqs.sort_unstable();
        assert_eq!(
            seqs,
            ((MAX_SEQUENCE - 9)..=MAX_SEQUENCE).collect::<Vec<_>>(),
            "{t}"
        );
    }
}
