//! ESP overhead over the raw cipher, measured in pairs so a shared, noisy machine
//! cancels out: short batches of the raw operation and of `seal` (or `open`)
//! alternate, and each pair gives one ratio; the median ratio over many pairs is the
//! overhead. Criterion (benches/esp.rs) times the two in separate runs seconds apart,
//! where another user's compile can swing one of them by 2x; a pair is tens of
//! microseconds apart.
//!
//! Prints one Markdown table row per transform and size. Run with `OPENSSL_ia32cap`
//! set for the noaesni variant. `--quick` runs a few pairs only (a smoke test).

use cipherbench_crypto::catalogue::{bench_op, BenchOp, CipherId};
use cipherbench_esp::{derive_sa_pair, InboundSa, OutboundSa, Role, Transform};
use std::hint::black_box;
use std::time::{Duration, Instant};

const SIZES: [usize; 4] = [64, 576, 1400, 8192];

fn ipv4(len: usize) -> Vec<u8> {
    let mut p: Vec<u8> = (0..len).map(|i| i as u8).collect();
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p
}

fn raw_cipher(t: Transform) -> CipherId {
    match t {
        Transform::Aes256Sha256 => CipherId::Aes256CbcHmacSha256,
        Transform::Aes128Gcm => CipherId::Aes128Gcm,
        Transform::Aes256Gcm => CipherId::Aes256Gcm,
        _ => CipherId::ChaCha20Poly1305,
    }
}

fn time(ops: usize, mut f: impl FnMut()) -> Duration {
    let start = Instant::now();
    for _ in 0..ops {
        f();
    }
    start.elapsed()
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    let k = (sorted.len() - 1) as f64 * q;
    let (lo, hi) = (k.floor() as usize, k.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (k - k.floor())
}

struct Pairs {
    ratios: Vec<f64>,
    raw_ns: Vec<f64>,
    esp_ns: Vec<f64>,
}

impl Pairs {
    fn row(&mut self, size: usize) -> String {
        for v in [&mut self.ratios, &mut self.raw_ns, &mut self.esp_ns] {
            v.sort_by(f64::total_cmp);
        }
        let gbps = |ns: f64| size as f64 * 8.0 / ns;
        format!(
            "{:.2} | {:.2} | {:+.1} % ({:+.1} to {:+.1})",
            gbps(quantile(&self.raw_ns, 0.5)),
            gbps(quantile(&self.esp_ns, 0.5)),
            (quantile(&self.ratios, 0.5) - 1.0) * 100.0,
            (quantile(&self.ratios, 0.25) - 1.0) * 100.0,
            (quantile(&self.ratios, 0.75) - 1.0) * 100.0,
        )
    }
}

/// `pairs` alternating batches of `raw` and `esp`; `esp` gets the batch size and
/// returns the time of its own timed part.
fn measure(
    pairs: usize,
    batch: usize,
    raw: &mut dyn BenchOp,
    mut esp: impl FnMut(usize) -> Duration,
) -> Pairs {
    let mut result = Pairs {
        ratios: vec![],
        raw_ns: vec![],
        esp_ns: vec![],
    };
    for round in 0..pairs + pairs / 10 {
        let mut raw_batch = || time(batch, || raw.run().expect("raw operation"));
        // Alternate which goes first, so neither always follows the other.
        let (r, e) = if round % 2 == 0 {
            let r = raw_batch();
            (r, esp(batch))
        } else {
            let e = esp(batch);
            (raw_batch(), e)
        };
        if round < pairs / 10 {
            continue; // warm-up pairs
        }
        result.ratios.push(e.as_secs_f64() / r.as_secs_f64());
        result.raw_ns.push(r.as_nanos() as f64 / batch as f64);
        result.esp_ns.push(e.as_nanos() as f64 / batch as f64);
    }
    result
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let pairs = if quick { 10 } else { 400 };
    println!(
        "cpu settings: {}",
        cipherbench_crypto::info::cpu_settings().unwrap_or_default()
    );
    println!("| transform | bytes | raw encrypt Gbit/s | seal Gbit/s | seal overhead, median (IQR) | raw decrypt Gbit/s | open Gbit/s | open overhead, median (IQR) |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for t in Transform::SECURE {
        for size in SIZES {
            let batch = if size <= 576 { 256 } else { 64 };
            let inner = ipv4(size);
            let pair =
                derive_sa_pair(&[0x42; 32], "bench", t, Role::Initiator).expect("valid secret");
            let packet_len = t.sealed_len(size);

            let mut raw = bench_op(raw_cipher(t), true, size).expect("cipher available");
            let mut sender = OutboundSa::new(pair.outbound.clone()).expect("valid SA");
            let mut wire = vec![0u8; packet_len];
            let mut seal = measure(pairs, batch, raw.as_mut(), |n| {
                time(n, || {
                    black_box(sender.seal(black_box(&inner), &mut wire).expect("seal"));
                })
            });

            let mut raw = bench_op(raw_cipher(t), false, size).expect("cipher available");
            let mut sender = OutboundSa::new(pair.outbound.clone()).expect("valid SA");
            let mut receiver = InboundSa::new(pair.outbound.clone()).expect("valid SA");
            let mut sealed = vec![0u8; batch * packet_len];
            let mut out = vec![0u8; packet_len];
            let mut open = measure(pairs, batch, raw.as_mut(), |n| {
                for packet in sealed.chunks_mut(packet_len).take(n) {
                    sender.seal(&inner, packet).expect("seal");
                }
                let start = Instant::now();
                for packet in sealed.chunks(packet_len).take(n) {
                    black_box(receiver.open(black_box(packet), &mut out).expect("open"));
                }
                start.elapsed()
            });
            println!(
                "| {} | {size} | {} | {} |",
                t.name(),
                seal.row(size),
                open.row(size)
            );
        }
    }
}
