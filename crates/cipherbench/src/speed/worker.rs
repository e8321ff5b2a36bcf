//! The measuring side of layer 1, run in a child process whose environment carries
//! the acceleration variant (`OPENSSL_ia32cap` is read once, when libcrypto starts,
//! so a variant cannot be switched inside one process).
//!
//! Protocol: the parent writes one [`WorkerRequest`] as JSON to stdin; the worker
//! answers with JSON lines: first `library` (the OpenSSL it loaded, which the parent
//! holds to the one asked for), then `probed` (the effect probes it measured before
//! its real work, with the vector its OpenSSL uses; `settings` alone if the probes
//! could not run), then one `point` per measured point, or `unavailable` if the
//! library cannot do the cipher here, or `failed`.

use anyhow::{Context, Result};
use cipherbench_crypto::catalogue::{self, BenchOp, CipherId};
use cipherbench_crypto::pk::{self, PkAlgorithm};
use cipherbench_crypto::CryptoError;
use cipherbench_model::speed::{Direction, PkPoint, SpeedPoint, SpeedSample};
use cipherbench_model::variant::Probes;
use cipherbench_model::Summary;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// What the parent asks one worker to measure: one cipher, several points.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerRequest {
    /// Catalogue name.
    pub cipher: String,
    /// Variant name, recorded in the points.
    pub variant: String,
    /// The points: direction, size, threads.
    pub points: Vec<(Direction, u64, usize)>,
    /// Warm-up per point.
    pub warmup_ns: u64,
    /// Length of one sample.
    pub sample_ns: u64,
    /// Samples per point.
    pub samples: usize,
    /// The CPUs to pin thread i to (`cpus[i % len]`), one core each before any
    /// sibling; empty: the CPUs this process may use, in order.
    #[serde(default)]
    pub cpus: Vec<usize>,
    /// Measure the effect probes first (the first round's worker of a variant does;
    /// a later round's runs the same library under the same environment).
    #[serde(default = "yes")]
    pub probe: bool,
    /// Public-key work instead of the cipher's points (`cipher` and `points` are
    /// then empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key: Option<PkWork>,
}

/// What a worker does for `speed --pk`: every operation of each algorithm at each
/// thread count, or, with no thread counts, only whether the library has each.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PkWork {
    /// Catalogue names.
    pub algorithms: Vec<String>,
    /// Thread counts; empty: answer `pk_unavailable` for those the library lacks,
    /// and measure nothing.
    pub threads: Vec<usize>,
}

impl WorkerRequest {
    /// A public-key request of `variant`: `algorithms` at `threads` (none: only ask
    /// which the library has), no probes, no samples until the caller sets them.
    pub fn public_key(variant: &str, algorithms: Vec<String>, threads: Vec<usize>) -> Self {
        WorkerRequest {
            cipher: String::new(),
            variant: variant.to_string(),
            points: Vec::new(),
            warmup_ns: 0,
            sample_ns: 0,
            samples: 0,
            cpus: Vec::new(),
            probe: false,
            public_key: Some(PkWork {
                algorithms,
                threads,
            }),
        }
    }
}

fn yes() -> bool {
    true
}

/// One line of the worker's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerMessage {
    /// The OpenSSL this process loaded: its version and the files it mapped.
    Library(crate::library::Loaded),
    /// The effect probes, measured before the real work (with the library version and
    /// the vector this process's OpenSSL uses).
    Probed(Probes),
    /// The capability vector this process's OpenSSL uses, when the probes could not run.
    Settings(String),
    /// A measured point.
    Point(SpeedPoint),
    /// The library cannot do this cipher in this process.
    Unavailable(String),
    /// A measured public-key point.
    PkPoint(PkPoint),
    /// The library lacks a public-key algorithm: its name, and why.
    PkUnavailable(String, String),
    /// Something else went wrong.
    Failed(String),
}

/// Entry point of `cipherbench __speed-worker`.
pub fn main() -> Result<()> {
    let request: WorkerRequest =
        serde_json::from_reader(std::io::stdin()).context("reading the worker request")?;
    let mut out = std::io::stdout().lock();
    let mut send = |m: &WorkerMessage| -> Result<()> {
        writeln!(out, "{}", serde_json::to_string(m)?)?;
        out.flush()?;
        Ok(())
    };
    send(&WorkerMessage::Library(crate::library::this_process()))?;
    let probes = if request.probe {
        crate::effect::measure("speed worker").ok()
    } else {
        None
    };
    match probes {
        Some(probes) => send(&WorkerMessage::Probed(probes))?,
        None => send(&WorkerMessage::Settings(
            cipherbench_crypto::info::cpu_settings().unwrap_or_default(),
        ))?,
    }
    if let Some(work) = &request.public_key {
        return public_key(&request, work, &mut send);
    }
    let Some(cipher) = CipherId::from_name(&request.cipher) else {
        send(&WorkerMessage::Failed(format!(
            "unknown cipher {}",
            request.cipher
        )))?;
        return Ok(());
    };
    for &(direction, size, threads) in &request.points {
        match measure(cipher, direction, size as usize, threads, &request) {
            Ok(samples) => send(&WorkerMessage::Point(point(
                &request, cipher, direction, size, threads, samples,
            )))?,
            Err(CryptoError::Unavailable { reason, .. }) => {
                send(&WorkerMessage::Unavailable(reason))?;
                return Ok(());
            }
            Err(e) => {
                send(&WorkerMessage::Failed(e.to_string()))?;
                return Ok(());
            }
        }
    }
    Ok(())
}

/// `speed --pk` in the worker: each algorithm's operations at each thread count
/// (the keys generated once per operation), or only whether the library has it.
fn public_key(
    request: &WorkerRequest,
    work: &PkWork,
    send: &mut impl FnMut(&WorkerMessage) -> Result<()>,
) -> Result<()> {
    for name in &work.algorithms {
        let Some(algorithm) = PkAlgorithm::from_name(name) else {
            return send(&WorkerMessage::Failed(format!(
                "unknown public-key algorithm {name}"
            )));
        };
        if let Err(reason) = pk::available(algorithm) {
            send(&WorkerMessage::PkUnavailable(name.clone(), reason))?;
            continue;
        }
        if work.threads.is_empty() {
            continue;
        }
        for &op in algorithm.ops() {
            let measured = pk::Bench::new(algorithm, op).and_then(|bench| {
                work.threads
                    .iter()
                    .map(|&threads| {
                        let samples = measure_ops(|| bench.op(), threads, request)?;
                        Ok(PkPoint::of(
                            algorithm.name(),
                            op.name(),
                            &request.variant,
                            threads,
                            samples,
                        ))
                    })
                    .try_for_each(|p: Result<PkPoint, CryptoError>| {
                        send(&WorkerMessage::PkPoint(p?))
                            .map_err(|e| CryptoError::Library(format!("{e:#}")))
                    })
            });
            match measured {
                Ok(()) => {}
                Err(CryptoError::Unavailable { reason, .. }) => {
                    send(&WorkerMessage::PkUnavailable(name.clone(), reason))?;
                    break;
                }
                Err(e) => return send(&WorkerMessage::Failed(e.to_string())),
            }
        }
    }
    Ok(())
}

fn point(
    request: &WorkerRequest,
    cipher: CipherId,
    direction: Direction,
    size: u64,
    threads: usize,
    samples: Vec<SpeedSample>,
) -> SpeedPoint {
    let rates: Vec<f64> = samples
        .iter()
        .map(SpeedSample::throughput_bytes_per_sec)
        .collect();
    SpeedPoint {
        cipher: cipher.name().to_string(),
        variant: request.variant.clone(),
        direction,
        size_bytes: size,
        threads,
        // At least one sample is always taken (samples >= 1 is checked by the plan).
        throughput_bytes_per_sec: Summary::of_or_empty(&rates),
        cpu_cores_used: cipherbench_model::speed::cores_used(&samples),
        samples,
        // The parent, which watches the machine, fills it in.
        noise: None,
        // The parent numbers the rounds as it joins them.
        sample_rounds: Vec::new(),
    }
}

/// Per-thread result of one sample.
#[derive(Clone, Copy, Default)]
struct ThreadSample {
    ops: u64,
    elapsed_ns: u64,
    cpu_ns: u64,
}

/// Measures one point: `threads` threads, each pinned to its own core, each with its
/// own keyed context, warmed up, then `samples` synchronised samples.
pub fn measure(
    cipher: CipherId,
    direction: Direction,
    size: usize,
    threads: usize,
    request: &WorkerRequest,
) -> Result<Vec<SpeedSample>, CryptoError> {
    let encrypt = direction == Direction::Encrypt;
    measure_ops(
        || catalogue::bench_op(cipher, encrypt, size),
        threads,
        request,
    )
}

/// Measures one point of any operation: `threads` threads, each with its own
/// operation from `make`, pinned, warmed up, then `samples` synchronised samples.
pub fn measure_ops(
    make: impl Fn() -> Result<Box<dyn BenchOp>, CryptoError>,
    threads: usize,
    request: &WorkerRequest,
) -> Result<Vec<SpeedSample>, CryptoError> {
    let mut ops = Vec::with_capacity(threads);
    for _ in 0..threads {
        ops.push(make()?);
    }
    let payload = ops[0].payload_len() as u64;
    // The parent's order (one thread per core before any sibling), else the CPUs this
    // process may use (a cpuset or `taskset` may leave out CPU 0): thread i on the
    // i-th of them.
    let allowed = if request.cpus.is_empty() {
        crate::host::allowed_cpus()
    } else {
        request.cpus.clone()
    };
    let warmup = Duration::from_nanos(request.warmup_ns);
    let sample = Duration::from_nanos(request.sample_ns);
    let samples = request.samples;
    let barrier = Barrier::new(threads);
    let per_thread: Vec<Result<Vec<ThreadSample>, CryptoError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = ops
            .into_iter()
            .enumerate()
            .map(|(i, mut op)| {
                let barrier = &barrier;
                let allowed = &allowed;
                scope.spawn(move || {
                    // Best effort: pinning is an optimisation.
                    if !allowed.is_empty() {
                        let _ = crate::host::pin_to_core(allowed[i % allowed.len()]);
                    }
                    // Warm-up, which also sizes a batch to about 1 ms of work so that
                    // reading the clock costs nothing measurable.
                    let start = Instant::now();
                    let mut warm_ops = 0u64;
                    while start.elapsed() < warmup || warm_ops == 0 {
                        op.run()?;
                        warm_ops += 1;
                    }
                    let per_op = start.elapsed().as_nanos() as u64 / warm_ops.max(1);
                    let batch = (1_000_000 / per_op.max(1)).clamp(1, 100_000);
                    let mut out = Vec::with_capacity(samples);
                    for _ in 0..samples {
                        barrier.wait();
                        let cpu0 = crate::host::thread_cpu_ns();
                        let t0 = Instant::now();
                        let mut n = 0u64;
                        loop {
                            for _ in 0..batch {
                                op.run()?;
                            }
                            n += batch;
                            if t0.elapsed() >= sample {
                                break;
                            }
                        }
                        out.push(ThreadSample {
                            ops: n,
                            elapsed_ns: t0.elapsed().as_nanos() as u64,
                            cpu_ns: crate::host::thread_cpu_ns().saturating_sub(cpu0),
                        });
                    }
                    Ok(out)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(CryptoError::Library("measuring thread panicked".into()))
                })
            })
            .collect()
    });
    let per_thread = per_thread.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok((0..samples)
        .map(|i| {
            let ops: u64 = per_thread.iter().map(|t| t[i].ops).sum();
            SpeedSample {
                ops,
                bytes: ops * payload,
                elapsed_ns: per_thread
                    .iter()
                    .map(|t| t[i].elapsed_ns)
                    .max()
                    .unwrap_or(0),
                cpu_ns: per_thread.iter().map(|t| t[i].cpu_ns).sum(),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_real_work_in_each_sample() {
        let request = WorkerRequest {
            probe: true,
            cipher: "aes-128-gcm".into(),
            variant: "accel".into(),
            points: vec![],
            warmup_ns: 2_000_000,
            sample_ns: 5_000_000,
            samples: 3,
            cpus: vec![],
            public_key: None,
        };
        let samples = measure(CipherId::Aes128Gcm, Direction::Decrypt, 1024, 2, &request).unwrap();
        assert_eq!(samples.len(), 3);
        for s in &samples {
            assert!(s.ops > 0 && s.bytes == s.ops * 1024);
            assert!(s.elapsed_ns >= 5_000_000);
            assert!(s.cpu_ns > 0);
        }
    }
}
