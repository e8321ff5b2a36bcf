//! The ordered parallel pipeline with real SAs: packets sealed by concurrent workers
//! leave in arrival order with consecutive sequence numbers, and packets opened by
//! concurrent workers sharing one replay window are delivered in arrival order,
//! each exactly once, replays dropped, whatever the batch sizes, the number of
//! workers and jobs, and however unevenly the workers are delayed.

use std::time::Duration;

use crate::common::{gateways, ipv4, iv_for, reference_seal, with_trailer};
use cipherbench_esp::pipeline::{self, Hooks};
use cipherbench_esp::{
    Accounting, DropReason, InboundSet, OutboundSa, Reserved, Transform, Unsettled,
};
use proptest::prelude::*;

fn sequence_of(wire: &[u8]) -> u64 {
    u64::from(u32::from_be_bytes(wire[4..8].try_into().unwrap()))
}

fn any_transform() -> impl Strategy<Value = Transform> {
    prop::sample::select(Transform::ALL.to_vec())
}

#[derive(Default)]
struct SealJob {
    index: usize,
    inputs: Vec<Vec<u8>>,
    numbers: Option<Reserved>,
    sealed: Vec<Vec<u8>>,
}

#[derive(Default)]
struct OpenJob {
    index: usize,
    received: Vec<Vec<u8>>,
    /// Each packet opened unsettled (or dropped), with the buffer it was opened into.
    opened: Vec<(Result<Unsettled, DropReason>, Vec<u8>)>,
}

/// Delays a worker by the drawn pattern, so later jobs overtake earlier ones.
fn jitter(delays: &[u8], index: usize) {
    match delays[index % delays.len()] % 4 {
        0 => {}
        1 => std::thread::yield_now(),
        d => std::thread::sleep(Duration::from_micros(u64::from(d) * 150)),
    }
}

const HOOKS: Hooks<'static> = Hooks {
    name: "test",
    on_start: &|_| {},
};

/// Seals `batches` (each a list of inner packets) through the pipeline; returns the
/// ESP packets in the order the consumer saw them.
fn seal_through(
    sa: &OutboundSa,
    workers: usize,
    jobs: usize,
    batches: &[Vec<Vec<u8>>],
    delays: &[u8],
) -> Vec<Vec<u8>> {
    let states: Vec<OutboundSa> = (0..workers).map(|_| sa.worker().unwrap()).collect();
    let pool: Vec<SealJob> = (0..jobs).map(|_| SealJob::default()).collect();
    let mut next = 0;
    let mut out = Vec::new();
    pipeline::run(
        pool,
        states,
        &HOOKS,
        |job| {
            let Some(batch) = batches.get(next) else {
                return false;
            };
            job.index = next;
            job.inputs = batch.clone();
            // In arrival order, on the producer: numbers follow the packets.
            job.numbers = sa.reserve(batch.len() as u64);
            next += 1;
            true
        },
        |sender, job| {
            jitter(delays, job.index);
            job.sealed.clear();
            let numbers = job.numbers.as_mut().unwrap();
            for inner in &job.inputs {
                let mut wire = vec![0u8; sender.sealed_len(inner.len())];
                let n = sender.seal_reserved(numbers, inner, &mut wire).unwrap();
                wire.truncate(n);
                job.sealed.push(wire);
            }
            assert_eq!(numbers.remaining(), 0);
        },
        |job| out.append(&mut job.sealed),
    );
    out
}

/// One packet's outcome: its inner packet, or why it was dropped.
type Outcome = Result<Vec<u8>, DropReason>;

/// Opens `received` in batches of `batch` through the pipeline as the gateway does:
/// workers open each packet unsettled (reading the SA's one window), the consumer
/// settles them in arrival order on its own handle. Returns each packet's outcome,
/// in consumer order, and the workers' and the consumer's accounting together.
fn open_through(
    set: &InboundSet,
    workers: usize,
    jobs: usize,
    batch: usize,
    received: &[Vec<u8>],
    delays: &[u8],
) -> (Vec<Outcome>, Accounting) {
    let states: Vec<InboundSet> = (0..workers).map(|_| set.worker().unwrap()).collect();
    let mut settler = set.worker().unwrap();
    let pool: Vec<OpenJob> = (0..jobs).map(|_| OpenJob::default()).collect();
    let mut chunks = received.chunks(batch).enumerate();
    let mut outcomes = Vec::new();
    let mut expected = 0;
    let states = pipeline::run(
        pool,
        states,
        &HOOKS,
        |job| {
            let Some((index, chunk)) = chunks.next() else {
                return false;
            };
            job.index = index;
            job.received = chunk.to_vec();
            true
        },
        |receiver, job| {
            jitter(delays, job.index);
            job.opened.clear();
            for packet in &job.received {
                let mut out = vec![0u8; packet.len()];
                let opened = receiver.open_unsettled(packet, &mut out);
                job.opened.push((opened, out));
            }
        },
        |job| {
            assert_eq!(job.index, expected, "jobs consumed out of order");
            expected += 1;
            for (opened, mut out) in job.opened.drain(..) {
                let outcome = opened.and_then(|packet| settler.settle(packet, &mut out));
                match outcome {
                    Ok(n) => outcomes.push(Ok(out[..n].to_vec())),
                    Err(reason) => {
                        assert!(
                            out.iter().all(|&b| b == 0),
                            "plaintext left by a {reason} drop"
                        );
                        outcomes.push(Err(reason));
                    }
                }
            }
        },
    );
    let mut accounting = settler.accounting();
    for worker in &states {
        accounting.add(&worker.accounting());
    }
    (outcomes, accounting)
}

/// Each packet's outcome from one receiver opening them in order (`open`).
fn open_serially(set: &mut InboundSet, received: &[Vec<u8>]) -> Vec<Outcome> {
    received
        .iter()
        .map(|packet| {
            let mut out = vec![0u8; packet.len()];
            set.open(packet, &mut out).map(|n| out[..n].to_vec())
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn pipeline_keeps_order_and_numbers_under_concurrent_workers(
        t in any_transform(),
        workers in 1usize..5,
        jobs in 1usize..9,
        sizes in prop::collection::vec(1usize..40, 1..40),
        delays in prop::collection::vec(any::<u8>(), 1..16),
        open_batch in 1usize..64,
        duplicate_every in prop::option::of(2usize..9),
    ) {
        let g = gateways(t, 4096);
        let mut n = 0usize;
        let batches: Vec<Vec<Vec<u8>>> = sizes
            .iter()
            .map(|&len| {
                (0..len)
                    .map(|_| {
                        n += 1;
                        ipv4(20 + n % 700, n as u8)
                    })
                    .collect()
            })
            .collect();
        let inputs: Vec<Vec<u8>> = batches.iter().flatten().cloned().collect();

        // Sealed in parallel: out in arrival order, numbered 1, 2, 3, ...
        let wire = seal_through(&g.initiator_out, workers, jobs, &batches, &delays);
        let numbers: Vec<u64> = wire.iter().map(|p| sequence_of(p)).collect();
        prop_assert_eq!(numbers, (1..=inputs.len() as u64).collect::<Vec<_>>());

        // Opened in parallel behind one shared window, with replays mixed in:
        // each packet delivered once, in order.
        let mut received = Vec::new();
        for (i, p) in wire.iter().enumerate() {
            received.push(p.clone());
            if duplicate_every.is_some_and(|k| i % k == 0) {
                received.push(p.clone());
            }
        }
        let (outcomes, accounting) =
            open_through(&g.responder_in, workers, jobs, open_batch, &received, &delays);
        let delivered: Vec<Vec<u8>> = outcomes.iter().filter_map(|o| o.clone().ok()).collect();
        let drops: Vec<DropReason> = outcomes.iter().filter_map(|o| o.clone().err()).collect();
        prop_assert_eq!(accounting.opened_packets, inputs.len() as u64);
        prop_assert_eq!(accounting.accounted(), received.len() as u64);
        prop_assert_eq!(drops.len(), received.len() - wire.len());
        prop_assert!(drops.iter().all(|d| *d == DropReason::Replayed), "{:?}", drops);
        prop_assert!(delivered == inputs, "delivered packets differ from the inputs, or their order");
        let window = g.responder_in.iter().next().unwrap().window();
        prop_assert_eq!(window.top(), inputs.len() as u64);
    }

    /// The window moves only in arrival order, so parallel workers, however far
    /// they run ahead of each other with many more packets in flight than the
    /// window holds, give every packet the outcome one receiver gives it: the same
    /// inner packets in the same order, the same drops under the same reasons.
    #[test]
    fn parallel_opening_gives_every_packet_the_outcome_one_receiver_gives(
        t in any_transform(),
        workers in 1usize..5,
        jobs in 1usize..9,
        open_batch in 1usize..64,
        count in 1usize..300,
        window in prop::sample::select(vec![32u32, 64, 128]),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(), 0u8..5), 0..40),
        delays in prop::collection::vec(any::<u8>(), 1..16),
    ) {
        let g = gateways(t, window);
        let mut sender = g.initiator_out.worker().unwrap();
        let mut received: Vec<Vec<u8>> = (0..count)
            .map(|n| {
                let inner = ipv4(20 + n % 500, n as u8);
                let mut wire = vec![0u8; sender.sealed_len(inner.len())];
                let len = sender.seal(&inner, &mut wire).unwrap();
                wire.truncate(len);
                wire
            })
            .collect();
        // What the underlay and an attacker add: replays, packets held back
        // (reordered, some past the window), forgeries, truncations, and
        // authentic packets with a malformed trailer (they slide the window).
        for (k, (which, at, kind)) in edits.iter().enumerate() {
            let original = received[which.index(received.len())].clone();
            let packet = match kind {
                0 => original,
                1 => {
                    let i = which.index(received.len());
                    received.remove(i)
                }
                2 => {
                    let mut forged = original;
                    let last = forged.len() - 1;
                    forged[last] ^= 0x40;
                    forged
                }
                3 => original[..original.len() / 2].to_vec(),
                _ => {
                    let sequence = (count + k + 1) as u32;
                    let mut plain = with_trailer(&ipv4(60, k as u8), t.alignment(), 4);
                    let pad_len = plain.len() - 2;
                    plain[pad_len] = plain[pad_len].wrapping_add(1) % (t.alignment().max(4) as u8);
                    reference_seal(&g.initiator.outbound, sequence, &iv_for(t, sequence), &plain)
                }
            };
            let at = at.index(received.len() + 1);
            received.insert(at, packet);
        }

        let mut serial = gateways(t, window).responder_in;
        let expected = open_serially(&mut serial, &received);
        let (outcomes, accounting) =
            open_through(&g.responder_in, workers, jobs, open_batch, &received, &delays);
        prop_assert_eq!(accounting.accounted(), received.len() as u64);
        let mut expected_accounting = serial.accounting();
        expected_accounting.received = 0;
        prop_assert_eq!(accounting, expected_accounting);
        prop_assert!(outcomes == expected, "parallel {:?}\nserial {:?}",
            outcomes.iter().map(|o| o.as_ref().map(Vec::len)).collect::<Vec<_>>(),
            expected.iter().map(|o| o.as_ref().map(Vec::len)).collect::<Vec<_>>());
        prop_assert_eq!(
            g.responder_in.iter().next().unwrap().window().top(),
            serial.iter().next().unwrap().window().top()
        );
    }
}

#[test]
fn reserved_numbers_are_used_once_and_refuse_when_used_up() {
    let g = gateways(Transform::Aes128Gcm, 64);
    let sa = &g.initiator_out;
    let mut worker = sa.worker().unwrap();
    let mut numbers = sa.reserve(2).unwrap();
    // Another worker's plain seal takes the number after the reserved range.
    let mut other = sa.worker().unwrap();
    let inner = ipv4(100, 1);
    let mut wire = vec![0u8; sa.sealed_len(inner.len())];
    other.seal(&inner, &mut wire).unwrap();
    assert_eq!(sequence_of(&wire), 3);
    for expected in [1, 2] {
        worker
            .seal_reserved(&mut numbers, &inner, &mut wire)
            .unwrap();
        assert_eq!(sequence_of(&wire), expected);
    }
    assert!(matches!(
        worker.seal_reserved(&mut numbers, &inner, &mut wire),
        Err(cipherbench_esp::SealError::SequenceExhausted { .. })
    ));
    assert_eq!(worker.counters().sealed_packets, 2);
    assert_eq!(worker.counters().seal_refused, 1);
}

#[test]
fn a_reservation_stops_at_the_last_sequence_number() {
    let g = gateways(Transform::ChaCha20Poly1305, 64);
    let sa = OutboundSa::starting_at(
        g.initiator.outbound.clone(),
        cipherbench_esp::MAX_SEQUENCE - 2,
    )
    .unwrap();
    let numbers = sa.reserve(10).unwrap();
    assert_eq!(numbers.remaining(), 3);
    assert_eq!(sa.reserve(1), None);
    assert_eq!(sa.reserve(0), None);
}
