//! criterion benchmarks of ESP `seal` and `open` for every transform at 64, 576, 1400
//! and 8192-byte inner packets, each next to the raw cipher operation layer 1 measures
//! (`cipherbench_crypto::catalogue::bench_op`, the figure `cipherbench speed` reports)
//! on the same number of bytes, so the ESP overhead over the cipher can be read off.
//! Also the replay window alone.
//!
//! Each group is one transform and size, holding `raw-encrypt`, `seal`, `raw-decrypt`
//! and `open`, so the four run back to back and share the machine's conditions.
//! Acceleration variant: run the binary with `OPENSSL_ia32cap` set (see
//! docs/BENCHMARKS-esp.md). Throughput is in inner-packet bytes.

use cipherbench_crypto::catalogue::{bench_op, CipherId};
use cipherbench_esp::{derive_sa_pair, InboundSa, OutboundSa, ReplayWindow, Role, Transform};
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::time::{Duration, Instant};

const SIZES: [usize; 4] = [64, 576, 1400, 8192];

/// Packets sealed ahead of each timed batch of opens (the window needs fresh,
/// increasing sequence numbers, so one packet cannot be opened twice).
const OPEN_BATCH: usize = 256;

fn ipv4(len: usize) -> Vec<u8> {
    let mut p: Vec<u8> = (0..len).map(|i| i as u8).collect();
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p
}

/// The catalogue cipher `cipherbench speed` measures for this transform.
fn raw_cipher(t: Transform) -> Option<CipherId> {
    match t {
        Transform::Null => None,
        Transform::Aes256Sha256 => Some(CipherId::Aes256CbcHmacSha256),
        Transform::Aes128Gcm => Some(CipherId::Aes128Gcm),
        Transform::Aes256Gcm => Some(CipherId::Aes256Gcm),
        Transform::ChaCha20Poly1305 => Some(CipherId::ChaCha20Poly1305),
    }
}

fn esp(c: &mut Criterion) {
    for t in Transform::ALL {
        for size in SIZES {
            let mut group = c.benchmark_group(format!("{}/{size}", t.name()));
            group.throughput(Throughput::Bytes(size as u64));
            let inner = ipv4(size);
            let pair = derive_sa_pair(&[0x42; 32], "bench", t, Role::Initiator)
                .expect("derivation from a 32-byte secret succeeds");

            if let Some(cipher) = raw_cipher(t) {
                let mut op = bench_op(cipher, true, size).expect("cipher available");
                group.bench_function(BenchmarkId::from_parameter("raw-encrypt"), |b| {
                    b.iter(|| op.run().expect("raw encrypt"))
                });
            }

            let mut sender = OutboundSa::new(pair.outbound.clone()).expect("valid SA");
            let mut wire = vec![0u8; t.sealed_len(size)];
            group.bench_function(BenchmarkId::from_parameter("seal"), |b| {
                b.iter(|| sender.seal(black_box(&inner), &mut wire).expect("seal"))
            });

            if let Some(cipher) = raw_cipher(t) {
                let mut op = bench_op(cipher, false, size).expect("cipher available");
                group.bench_function(BenchmarkId::from_parameter("raw-decrypt"), |b| {
                    b.iter(|| op.run().expect("raw decrypt"))
                });
            }

            let mut sender = OutboundSa::new(pair.outbound.clone()).expect("valid SA");
            let mut receiver = InboundSa::new(pair.outbound.clone()).expect("valid SA");
            let packet_len = t.sealed_len(size);
            let mut batch = vec![0u8; OPEN_BATCH * packet_len];
            let mut out = vec![0u8; packet_len];
            group.bench_function(BenchmarkId::from_parameter("open"), |b| {
                b.iter_custom(|iters| {
                    let mut elapsed = Duration::ZERO;
                    let mut left = iters as usize;
                    while left > 0 {
                        let n = left.min(OPEN_BATCH);
                        for packet in batch.chunks_mut(packet_len).take(n) {
                            sender.seal(&inner, packet).expect("seal");
                        }
                        let start = Instant::now();
                        for packet in batch.chunks(packet_len).take(n) {
                            black_box(receiver.open(black_box(packet), &mut out).expect("open"));
                        }
                        elapsed += start.elapsed();
                        left -= n;
                    }
                    elapsed
                })
            });
            group.finish();
        }
    }
}

fn replay_window(c: &mut Criterion) {
    let mut group = c.benchmark_group("replay-window");
    group.throughput(Throughput::Elements(1));
    let mut window = ReplayWindow::new(128);
    let mut sequence = 0u64;
    group.bench_function("in-order", |b| {
        b.iter(|| {
            sequence += 1;
            let fresh = window.check(black_box(sequence));
            window.update(sequence);
            fresh
        })
    });
    group.finish();
}

criterion_group!(benches, esp, replay_window);
criterion_main!(benches);
