//! criterion benchmark of the gateway's ordered parallel pipeline
//! ([`cipherbench_esp::pipeline`]) fed in process: no TUN, no sockets, only the
//! seal or open work and the hand-offs, so what it shows is how the crypto of one SA
//! scales with workers, and what the ordering costs.
//!
//! Each group is one transform and direction at 1400-byte inner packets, in batches
//! of 64 (one job = one batch, as a gateway's job is one system call's worth):
//! `inline` is one thread sealing (or opening) with no pipeline, the gateway's
//! one-thread path; `workers/N` is the pipeline with N workers. Every batch is
//! checked in the consumer (sequence numbers in order, every packet opened), so a
//! pipeline that lost or reordered work would fail here, not just look fast.
//! Throughput is in inner-packet bytes.
//!
//! Run: `cargo bench -p cipherbench-esp --bench pipeline` (`-- seal` or `-- open` to
//! pick one direction); the speed-up is the `workers/1` time over the `workers/N`
//! time in one run. After criterion's groups, a scaling table runs 1 and 2 workers
//! for about two seconds each and prints the wall-clock speed-up beside the CPU
//! time per batch: on a machine shared with other load, the wall-clock ratio is
//! the scheduler's share, while the CPU ratio says what a free core per worker
//! would give.

use cipherbench_esp::pipeline::{self, Hooks};
use cipherbench_esp::{
    derive_sa_pair, InboundSa, OutboundSa, Reserved, Role, Transform, Unsettled,
};
use criterion::{black_box, criterion_group, BenchmarkId, Criterion, Throughput};
use std::time::{Duration, Instant};

const INNER: usize = 1400;
const BATCH: usize = 64;
/// Pre-sealed batches per open round (a fresh inbound SA each round, because the
/// replay window accepts each number once).
const OPEN_ROUND: usize = 256;
const TRANSFORMS: [Transform; 2] = [Transform::ChaCha20Poly1305, Transform::Aes128Gcm];

fn ipv4(len: usize, fill: u8) -> Vec<u8> {
    let mut p: Vec<u8> = (0..len).map(|i| fill.wrapping_add(i as u8)).collect();
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p
}

fn sequence_of(wire: &[u8]) -> u64 {
    u64::from(u32::from_be_bytes([wire[4], wire[5], wire[6], wire[7]]))
}

fn worker_counts() -> Vec<usize> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut counts = vec![1, 2];
    if cores >= 4 {
        counts.push(cores.min(8));
    }
    counts
}

struct SealJob {
    numbers: Option<Reserved>,
    out: Vec<u8>,
    lens: Vec<usize>,
}

/// Seals `batches` batches through the pipeline with `workers` workers; returns the
/// time taken. Panics if a batch leaves out of order.
fn seal_batches(t: Transform, inputs: &[Vec<u8>], workers: usize, batches: u64) -> Duration {
    let pair = derive_sa_pair(&[0x42; 32], "bench", t, Role::Initiator).expect("derivation");
    let sa = OutboundSa::new(pair.outbound).expect("valid SA");
    let slot = t.sealed_len(INNER);
    let jobs: Vec<SealJob> = (0..2 * workers + 2)
        .map(|_| SealJob {
            numbers: None,
            out: vec![0u8; BATCH * slot],
            lens: vec![0; BATCH],
        })
        .collect();
    let states: Vec<OutboundSa> = (0..workers).map(|_| sa.worker().expect("worker")).collect();
    let (mut produced, mut expected) = (0u64, 1u64);
    let start = Instant::now();
    pipeline::run(
        jobs,
        states,
        &Hooks {
            name: "seal",
            on_start: &|_| {},
        },
        |job| {
            produced += 1;
            job.numbers = sa.reserve(BATCH as u64);
            produced <= batches
        },
        |sender, job| {
            let numbers = job.numbers.as_mut().expect("numbers reserved");
            for (i, inner) in inputs.iter().enumerate() {
                job.lens[i] = sender
                    .seal_reserved(numbers, inner, &mut job.out[i * slot..(i + 1) * slot])
                    .expect("seal");
            }
        },
        |job| {
            assert_eq!(sequence_of(&job.out), expected, "batches out of order");
            expected += BATCH as u64;
            black_box(&job.lens);
        },
    );
    start.elapsed()
}

fn seal_inline(t: Transform, inputs: &[Vec<u8>], batches: u64) -> Duration {
    let pair = derive_sa_pair(&[0x42; 32], "bench", t, Role::Initiator).expect("derivation");
    let mut sa = OutboundSa::new(pair.outbound).expect("valid SA");
    let slot = t.sealed_len(INNER);
    let mut out = vec![0u8; BATCH * slot];
    let start = Instant::now();
    for _ in 0..batches {
        for (i, inner) in inputs.iter().enumerate() {
            black_box(
                sa.seal(inner, &mut out[i * slot..(i + 1) * slot])
                    .expect("seal"),
            );
        }
    }
    start.elapsed()
}

struct OpenJob {
    batch: usize,
    out: Vec<u8>,
    /// Each packet of the batch opened but not yet settled, as the gateway's
    /// workers leave them for `open-out`.
    unsettled: Vec<Unsettled>,
}

/// Opens `batches` of the pre-sealed batches (in rounds of a fresh inbound SA).
fn open_batches(
    t: Transform,
    sealed: &[Vec<Vec<u8>>],
    workers: Option<usize>,
    batches: u64,
) -> Duration {
    let pair = derive_sa_pair(&[0x42; 32], "bench", t, Role::Initiator).expect("derivation");
    let mut params = pair.outbound;
    params.replay_window = 1024;
    let mut elapsed = Duration::ZERO;
    let mut left = batches as usize;
    while left > 0 {
        let round = left.min(OPEN_ROUND);
        left -= round;
        let mut sa = InboundSa::new(params.clone()).expect("valid SA");
        let start = Instant::now();
        match workers {
            None => {
                let mut out = vec![0u8; INNER + 64];
                for batch in &sealed[..round] {
                    for packet in batch {
                        black_box(sa.open(packet, &mut out).expect("open"));
                    }
                }
            }
            Some(workers) => {
                let jobs: Vec<OpenJob> = (0..2 * workers + 2)
                    .map(|_| OpenJob {
                        batch: 0,
                        out: vec![0u8; BATCH * (INNER + 64)],
                        unsettled: Vec::with_capacity(BATCH),
                    })
                    .collect();
                let states: Vec<InboundSa> =
                    (0..workers).map(|_| sa.worker().expect("worker")).collect();
                // The consumer settles in arrival order on its own handle, as the
                // gateway's `open-out` does.
                let mut settler = sa.worker().expect("worker");
                let (mut next, mut expected) = (0usize, 0usize);
                pipeline::run(
                    jobs,
                    states,
                    &Hooks {
                        name: "open",
                        on_start: &|_| {},
                    },
                    |job| {
                        job.batch = next;
                        next += 1;
                        next <= round
                    },
                    |receiver, job| {
                        job.unsettled.clear();
                        for (i, packet) in sealed[job.batch].iter().enumerate() {
                            let out = &mut job.out[i * (INNER + 64)..(i + 1) * (INNER + 64)];
                            let opened = receiver.open_unsettled(packet, out).expect("open");
                            job.unsettled.push(opened);
                        }
                    },
                    |job| {
                        assert_eq!(job.batch, expected, "batches out of order");
                        for (i, &packet) in job.unsettled.iter().enumerate() {
                            let out = &mut job.out[i * (INNER + 64)..(i + 1) * (INNER + 64)];
                            settler.settle(packet, out).expect("a packet did not open");
                        }
                        expected += 1;
                    },
                );
            }
        }
        elapsed += start.elapsed();
    }
    elapsed
}

fn bench(c: &mut Criterion) {
    let inputs: Vec<Vec<u8>> = (0..BATCH).map(|i| ipv4(INNER, i as u8)).collect();
    for t in TRANSFORMS {
        let mut group = c.benchmark_group(format!("pipeline-seal/{}/{INNER}", t.name()));
        group.throughput(Throughput::Bytes((BATCH * INNER) as u64));
        group.bench_function(BenchmarkId::from_parameter("inline"), |b| {
            b.iter_custom(|iters| seal_inline(t, &inputs, iters))
        });
        for workers in worker_counts() {
            group.bench_function(BenchmarkId::new("workers", workers), |b| {
                b.iter_custom(|iters| seal_batches(t, &inputs, workers, iters))
            });
        }
        group.finish();

        // One round of pre-sealed batches, numbered 1.. in order.
        let pair = derive_sa_pair(&[0x42; 32], "bench", t, Role::Initiator).expect("derivation");
        let mut sender = OutboundSa::new(pair.outbound).expect("valid SA");
        let sealed: Vec<Vec<Vec<u8>>> = (0..OPEN_ROUND)
            .map(|_| {
                inputs
                    .iter()
                    .map(|inner| {
                        let mut wire = vec![0u8; t.sealed_len(INNER)];
                        sender.seal(inner, &mut wire).expect("seal");
                        wire
                    })
                    .collect()
            })
            .collect();
        let mut group = c.benchmark_group(format!("pipeline-open/{}/{INNER}", t.name()));
        group.throughput(Throughput::Bytes((BATCH * INNER) as u64));
        group.bench_function(BenchmarkId::from_parameter("inline"), |b| {
            b.iter_custom(|iters| open_batches(t, &sealed, None, iters))
        });
        for workers in worker_counts() {
            group.bench_function(BenchmarkId::new("workers", workers), |b| {
                b.iter_custom(|iters| open_batches(t, &sealed, Some(workers), iters))
            });
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = bench
}

/// This process's CPU time so far (every thread, the finished ones included),
/// from `/proc/self/stat` in clock ticks of 10 ms.
fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command's closing parenthesis; utime and stime are the 12th
    // and 13th of them (fields 14 and 15 of proc(5)).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let ticks: u64 = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse::<u64>().ok())
        .sum();
    Duration::from_millis(ticks * 10)
}

/// The scaling table: for each transform and direction, 1 and 2 workers each run
/// for about two seconds; wall-clock speed-up, and CPU time per batch, whose ratio
/// says what the pipeline would give with a free core per worker (on a shared
/// machine the wall-clock speed-up is the scheduler's share, the CPU per batch is
/// not).
fn scaling() {
    let inputs: Vec<Vec<u8>> = (0..BATCH).map(|i| ipv4(INNER, i as u8)).collect();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "\npipeline scaling, batches of {BATCH} x {INNER} B, loadavg before: {}",
        load.trim()
    );
    println!(
        "{:<18} {:<5} {:>7} {:>10} {:>14} {:>9} {:>12}",
        "transform", "dir", "workers", "MB/s wall", "CPU us/batch", "speed-up", "CPU ratio"
    );
    for t in TRANSFORMS {
        let pair = derive_sa_pair(&[0x42; 32], "bench", t, Role::Initiator).expect("derivation");
        let mut sender = OutboundSa::new(pair.outbound).expect("valid SA");
        let sealed: Vec<Vec<Vec<u8>>> = (0..OPEN_ROUND)
            .map(|_| {
                inputs
                    .iter()
                    .map(|inner| {
                        let mut wire = vec![0u8; t.sealed_len(INNER)];
                        sender.seal(inner, &mut wire).expect("seal");
                        wire
                    })
                    .collect()
            })
            .collect();
        for dir in ["seal", "open"] {
            let run = |workers: usize, batches: u64| match dir {
                "seal" => seal_batches(t, &inputs, workers, batches),
                _ => open_batches(t, &sealed, Some(workers), batches),
            };
            // Size the run to about two seconds on one worker.
            let probe = run(1, 256).as_secs_f64().max(1e-6);
            let batches = ((2.0 / probe) * 256.0).clamp(256.0, 1e6) as u64;
            let mut first: Option<(f64, f64)> = None;
            for workers in worker_counts() {
                let cpu0 = process_cpu();
                let wall = run(workers, batches).as_secs_f64();
                let cpu = (process_cpu() - cpu0).as_secs_f64();
                let mb_s = (batches as usize * BATCH * INNER) as f64 / wall / 1e6;
                let cpu_per_batch = cpu / batches as f64 * 1e6;
                let (speed_up, cpu_ratio) = match first {
                    None => {
                        first = Some((wall, cpu_per_batch));
                        (1.0, 1.0)
                    }
                    Some((w1, c1)) => (w1 / wall, c1 / cpu_per_batch),
                };
                println!(
                    "{:<18} {:<5} {:>7} {:>10.0} {:>14.1} {:>8.2}x {:>11.2}",
                    t.name(),
                    dir,
                    workers,
                    mb_s,
                    cpu_per_batch,
                    speed_up,
                    cpu_ratio
                );
            }
        }
    }
    println!("(speed-up: wall time of 1 worker over N; CPU ratio: CPU per batch of 1 worker over N, 1.00 = no overhead, so N x the ratio is the speed-up with a free core per worker)");
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    // Only under `cargo bench` (which passes --bench), not when `cargo test` runs
    // the benches once as tests.
    if std::env::args().any(|a| a == "--bench") {
        scaling();
    }
}
