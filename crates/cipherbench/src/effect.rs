//! The effect probe: a short measurement, in a variant's own process, of the code the
//! variant means to change (AES-128-GCM, the treatment) and of code it must leave
//! alone (ChaCha20-Poly1305 and 3DES, the controls). Every layer's variant process
//! runs it before its real work (the speed worker, the tunnel gateway), or, where the
//! process is not ours (nginx, the `openssl` CLI), a `cipherbench __variant-probe`
//! child started with exactly that process's environment runs it in its place.
//!
//! Method (METHODOLOGY.md, "Variants are judged by effect"): one 16 KiB message per
//! operation (a fresh nonce, 13 bytes of AAD, the tag), a short warm-up, then
//! [`ROUNDS`] interleaved rounds of about [`ROUND`] of the thread's CPU time per
//! cipher. The rate is bytes per second of the measuring thread's CPU time, as `openssl
//! speed` divides by CPU time, so a loaded machine stretches the wall time but hardly
//! the figure. The figure is the median of the rounds.
//!
//! With the figures, the process says which implementation served every algorithm
//! the layers fetch ([`implementation_here`]): what a provider or engine variant is
//! judged by.
//!
//! This module measures and reports; judging the figures is `variant::judge`'s.

use crate::supervisor::Spawn;
use anyhow::{bail, Context, Result};
use cipherbench_crypto::catalogue::{self, BenchOp, CipherId};
use cipherbench_crypto::CryptoError;
use cipherbench_model::variant::{Implementation, ProbeFigure, ProbeRole, Probes, Served};
use std::io::Write;
use std::time::Duration;

/// Bytes per probe operation: the size the figures and `openssl speed -bytes
/// 16384` use, where AES-GCM's hardware path runs at full speed.
pub const PROBE_SIZE: usize = 16384;
/// Interleaved rounds per probe.
pub const ROUNDS: usize = 3;
/// CPU time per round and probe.
pub const ROUND: Duration = Duration::from_millis(20);
/// CPU time of the warm-up per probe (first touch of the buffers, the key schedule,
/// the CPU's frequency).
const WARMUP: Duration = Duration::from_millis(5);
/// How long a probe child may take on a loaded machine before it is stopped.
const CHILD_TIMEOUT: Duration = Duration::from_secs(30);

/// The treatment and the controls, in the order they are measured.
pub const PROBES: [(CipherId, ProbeRole); 3] = [
    (CipherId::Aes128Gcm, ProbeRole::Treatment),
    (CipherId::ChaCha20Poly1305, ProbeRole::Control),
    (CipherId::DesEde3Cbc, ProbeRole::Control),
];

/// Measures the treatment and the controls in this process (a control the library
/// does not have, such as 3DES in a build without DES, is left out).
pub fn measure(measured_in: &str) -> Result<Probes, CryptoError> {
    measure_these(&PROBES, measured_in, ROUNDS, ROUND)
}

/// Measures the treatment alone (for naming the AES-GCM path, where only it matters).
pub fn measure_treatment(measured_in: &str) -> Result<Probes, CryptoError> {
    measure_these(&PROBES[..1], measured_in, ROUNDS, ROUND)
}

/// Measures `probes` in this process: `rounds` interleaved rounds of `round` CPU time
/// each.
pub fn measure_these(
    probes: &[(CipherId, ProbeRole)],
    measured_in: &str,
    rounds: usize,
    round: Duration,
) -> Result<Probes, CryptoError> {
    let mut ops: Vec<(CipherId, ProbeRole, Box<dyn BenchOp>, u64)> = Vec::new();
    for &(cipher, role) in probes {
        match catalogue::bench_op(cipher, true, PROBE_SIZE) {
            Ok(mut op) => {
                let batch = warm_up(op.as_mut(), WARMUP)?;
                ops.push((cipher, role, op, batch));
            }
            Err(CryptoError::Unavailable { .. }) if role == ProbeRole::Control => {}
            Err(e) => return Err(e),
        }
    }
    let mut rates: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); ops.len()];
    for _ in 0..rounds.max(1) {
        for (i, (_, _, op, batch)) in ops.iter_mut().enumerate() {
            rates[i].push(one_round(op.as_mut(), *batch, round)?);
        }
    }
    Ok(Probes {
        library_version: cipherbench_crypto::info::library_version(),
        cpu_settings: cipherbench_crypto::info::cpu_settings().unwrap_or_default(),
        measured_in: measured_in.to_string(),
        figures: ops
            .iter()
            .zip(rates)
            .map(|((cipher, role, op, _), rounds)| ProbeFigure {
                cipher: cipher.name().to_string(),
                role: *role,
                size_bytes: op.payload_len() as u64,
                bytes_per_cpu_sec: median(&rounds),
                rounds_bytes_per_cpu_sec: rounds,
            })
            .collect(),
        implementation: Some(implementation_here()),
    })
}

/// Who serves every algorithm the layers fetch, asked of this process's library,
/// with the providers active here and the CPU's vendor.
pub fn implementation_here() -> Implementation {
    let mut served = Vec::new();
    for cipher in catalogue::ALL {
        for &(algorithm, digest) in cipher.openssl_algorithms() {
            let s = if digest {
                cipherbench_crypto::info::digest_served_by(algorithm)
            } else {
                cipherbench_crypto::info::cipher_served_by(algorithm)
            };
            served.push(Served {
                cipher: cipher.name().to_string(),
                algorithm: algorithm.to_string(),
                kind: if digest { "digest" } else { "cipher" }.into(),
                provider: s.provider,
                engine: s.engine,
            });
        }
    }
    Implementation {
        providers: cipherbench_crypto::info::active_providers(),
        served,
        cpu_vendor: crate::host::cpu_vendor(),
    }
}

/// Runs the operation for `cpu` of thread CPU time; returns how many operations make
/// about 0.5 ms, so that a round reads the clock rarely (each read is a system call
/// that would otherwise be counted as the cipher's time).
fn warm_up(op: &mut dyn BenchOp, cpu: Duration) -> Result<u64, CryptoError> {
    let start = crate::host::thread_cpu_ns();
    let mut n = 0u64;
    loop {
        op.run()?;
        n += 1;
        let used = crate::host::thread_cpu_ns().saturating_sub(start);
        if used >= cpu.as_nanos() as u64 {
            let per_op = (used / n).max(1);
            return Ok((500_000 / per_op).clamp(1, 10_000));
        }
    }
}

/// One round: whole batches until `cpu` of thread CPU time is used; bytes per CPU
/// second.
fn one_round(op: &mut dyn BenchOp, batch: u64, cpu: Duration) -> Result<f64, CryptoError> {
    let start = crate::host::thread_cpu_ns();
    let mut n = 0u64;
    loop {
        for _ in 0..batch {
            op.run()?;
        }
        n += batch;
        let used = crate::host::thread_cpu_ns().saturating_sub(start);
        if used >= cpu.as_nanos() as u64 {
            return Ok((n * op.payload_len() as u64) as f64 * 1e9 / used as f64);
        }
    }
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The probe child's command: this executable's `__variant-probe`. The caller gives
/// it the environment of the process it stands in for, with the same calls that
/// process was given (`.ia32cap(...)`), then runs it with [`run_child`].
pub fn child_command(treatment_only: bool) -> Result<Spawn> {
    let exe = std::env::current_exe().context("finding cipherbench's own executable")?;
    let mut spawn = Spawn::new(exe).args(["__variant-probe"]);
    if treatment_only {
        spawn = spawn.args(["--treatment-only"]);
    }
    Ok(spawn)
}

/// Runs a probe child and reads its answer; `measured_in` says whose environment it
/// had.
pub fn run_child(spawn: Spawn, measured_in: &str) -> Result<Probes> {
    let out = spawn
        .output(CHILD_TIMEOUT)?
        .success("the effect probe (cipherbench __variant-probe)")?;
    let line = out.stdout.lines().last().unwrap_or_default();
    let mut probes: Probes = serde_json::from_str(line)
        .with_context(|| format!("reading the effect probe's answer: {line}"))?;
    if probes.figures.is_empty() {
        bail!("the effect probe measured nothing");
    }
    probes.measured_in = measured_in.to_string();
    Ok(probes)
}

/// Entry point of `cipherbench __variant-probe`: measures, prints one JSON line.
pub fn child_main(treatment_only: bool) -> Result<()> {
    let probes = if treatment_only {
        measure_treatment("__variant-probe")
    } else {
        measure("__variant-probe")
    }
    .context("measuring the effect probes")?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", serde_json::to_string(&probes)?)?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_every_probe_in_interleaved_rounds() {
        let p = measure_these(&PROBES, "test", 2, Duration::from_millis(3)).unwrap();
        assert_eq!(p.figures[0].cipher, "aes-128-gcm");
        assert_eq!(p.figures[0].role, ProbeRole::Treatment);
        assert!(p.figures.len() >= 2, "{p:?}");
        for f in &p.figures {
            assert_eq!(f.rounds_bytes_per_cpu_sec.len(), 2);
            assert_eq!(f.size_bytes, PROBE_SIZE as u64);
            assert!(f.bytes_per_cpu_sec > 1e6, "{f:?}");
        }
        assert!(p.library_version.starts_with("OpenSSL "));
        assert!(p.figure("chacha20-poly1305").is_some());
    }

    #[test]
    fn the_median_of_rounds_ignores_one_outlier() {
        assert_eq!(median(&[1.0, 100.0, 3.0]), 3.0);
        assert_eq!(median(&[1.0, 3.0]), 2.0);
        assert_eq!(median(&[]), 0.0);
    }
}
