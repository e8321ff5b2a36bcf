//! The ordered parallel pipeline with real SAs: packets sealed by concurrent workers
//! leave in arrival order with consecutive sequence numbers, and packets opened by
//! concurrent workers sharing one replay window are delivered in arrival order,
//! each exactly once, replays dropped, whatever the batch sizes, the number of
//! workers and jobs, and however unevenly the workers are delayed.

use std::time::Duration;

use crate::common::{gateways, ipv4};
use cipherbench_esp::pipeline::{self, Hooks};
use cipherbench_esp::{DropReason, InboundSet, OutboundSa, Reserved, Transform};
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
    opened: Vec<Vec<u8>>,
    drops: Vec<DropReason>,
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

/// Opens `received` in batches of `batch` through the pipeline, all workers sharing
/// `set`'s replay window; returns the inner packets delivered, in consumer order,
/// and the drops.
fn open_through(
    set: &InboundSet,
    workers: usize,
    jobs: usize,
    batch: usize,
    received: &[Vec<u8>],
    delays: &[u8],
) -> (Vec<Vec<u8>>, Vec<DropReason>) {
    let states: Vec<InboundSet> = (0..workers).map(|_| set.worker().unwrap()).collect();
    let pool: Vec<OpenJob> = (0..jobs).map(|_| OpenJob::default()).collect();
    let mut chunks = received.chunks(batch).enumerate();
    let (mut delivered, mut drops) = (Vec::new(), Vec::new());
    let mut expected = 0;
    pipeline::run(
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
            job.drops.clear();
            for packet in &job.received {
                let mut out = vec![0u8; packet.len()];
                match receiver.open(packet, &mut out) {
                    Ok(n) => {
                        out.truncate(n);
                        job.opened.push(out);
                    }
                    Err(reason) => job.drops.push(reason),
                }
            }
        },
        |job| {
            assert_eq!(job.index, expected, "jobs consumed out of order");
            expected += 1;
            delivered.append(&mut job.opened);
            drops.append(&mut job.drops);
        },
    );
    (delivered, drops)
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

        // Opened in parallel behind one shared window (wider than what is in
        // flight), with replays mixed in: each packet delivered once, in order.
        let mut received = Vec::new();
        for (i, p) in wire.iter().enumerate() {
            received.push(p.clone());
            if duplicate_every.is_some_and(|k| i % k == 0) {
                received.push(p.clone());
            }
        }
        let (delivered, drops) =
            open_through(&g.responder_in, workers, jobs, open_batch, &received, &delays);
        prop_assert_eq!(drops.len(), received.len() - wire.len());
        prop_assert!(drops.iter().all(|d| *d == DropReason::Replayed), "{:?}", drops);
        prop_assert!(delivered == inputs, "delivered packets differ from the inputs, or their order");
        let window = g.responder_in.iter().next().unwrap().window();
        prop_assert_eq!(window.top(), inputs.len() as u64);
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
