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

/// The public-key probes, measured after the symmetric ones in every variant
/// process: RSA-2048 signing (the private-key operation a TLS server does per full
/// handshake with an RSA key; CRT with two 1024-bit exponentiations, the AVX-512 IFMA
/// path where the CPU has it), RSA-2048 verification (one public exponentiation,
/// `bn_mul_mont`'s MULX/ADX path) and ECDH on P-256 (one variable-base scalar
/// multiplication, `ecp_nistz256`'s MULX/ADX path). Their rate is operations per CPU
/// second (`size_bytes` 0). Which variant a probe is the treatment of is
/// `variant::judge`'s to say; recorded here as controls.
pub const PK_PROBES: [&str; 3] = ["rsa2048-sign", "rsa2048-verify", "ecdh-p256"];

/// Measures the treatment and the controls in this process (a control the library
/// does not have, such as 3DES in a build without DES, is left out), then the
/// public-key probes.
pub fn measure(measured_in: &str) -> Result<Probes, CryptoError> {
    let mut probes = measure_these(&PROBES, measured_in, ROUNDS, ROUND)?;
    probes.figures.extend(measure_public_key(ROUNDS, ROUND)?);
    Ok(probes)
}

/// The public-key probes, interleaved as the others are.
pub fn measure_public_key(rounds: usize, round: Duration) -> Result<Vec<ProbeFigure>, CryptoError> {
    let mut ops: Vec<(&str, Box<dyn BenchOp>, u64)> = Vec::new();
    for name in PK_PROBES {
        let mut op = public_key::op(name)?;
        let batch = warm_up(op.as_mut(), WARMUP)?;
        ops.push((name, op, batch));
    }
    let mut rates: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); ops.len()];
    for _ in 0..rounds.max(1) {
        for (i, (_, op, batch)) in ops.iter_mut().enumerate() {
            rates[i].push(one_round(op.as_mut(), *batch, round)?);
        }
    }
    Ok(ops
        .iter()
        .zip(rates)
        .map(|((name, _, _), rounds)| ProbeFigure {
            cipher: name.to_string(),
            role: ProbeRole::Control,
            size_bytes: 0,
            bytes_per_cpu_sec: median(&rounds),
            rounds_bytes_per_cpu_sec: rounds,
            sets_bytes_per_cpu_sec: Vec::new(),
        })
        .collect())
}

/// The public-key operations of the probe, through the same libcrypto (the
/// `openssl` crate links the library the process loaded, so `OPENSSL_ia32cap`
/// gates them as it gates nginx's).
mod public_key {
    use cipherbench_crypto::catalogue::BenchOp;
    use cipherbench_crypto::CryptoError;
    use openssl::derive::Deriver;
    use openssl::ec::{EcGroup, EcKey};
    use openssl::hash::MessageDigest;
    use openssl::nid::Nid;
    use openssl::pkey::{PKey, Private, Public};
    use openssl::sign::{Signer, Verifier};

    /// The fixed probe key (see the file's header).
    const RSA_KEY: &str = include_str!("effect_rsa2048.pem");
    /// What is signed: a SHA-256-sized message, as a TLS 1.3 CertificateVerify
    /// signs a digest-sized transcript hash.
    const MESSAGE: &[u8; 32] = b"cipherbench effect probe message";

    fn err(what: &str, e: openssl::error::ErrorStack) -> CryptoError {
        CryptoError::Library(format!("{what}: {e}"))
    }

    struct Sign(PKey<Private>);
    struct Verify(PKey<Public>, Vec<u8>);
    struct Ecdh(PKey<Private>, PKey<Public>);

    impl BenchOp for Sign {
        fn run(&mut self) -> Result<(), CryptoError> {
            let mut s = Signer::new(MessageDigest::sha256(), &self.0)
                .map_err(|e| err("rsa2048-sign", e))?;
            s.sign_oneshot_to_vec(MESSAGE)
                .map_err(|e| err("rsa2048-sign", e))?;
            Ok(())
        }
        fn payload_len(&self) -> usize {
            1
        }
    }

    impl BenchOp for Verify {
        fn run(&mut self) -> Result<(), CryptoError> {
            let mut v = Verifier::new(MessageDigest::sha256(), &self.0)
                .map_err(|e| err("rsa2048-verify", e))?;
            match v.verify_oneshot(&self.1, MESSAGE) {
                Ok(true) => Ok(()),
                Ok(false) => Err(CryptoError::Library(
                    "rsa2048-verify: the probe's own signature did not verify".into(),
                )),
                Err(e) => Err(err("rsa2048-verify", e)),
            }
        }
        fn payload_len(&self) -> usize {
            1
        }
    }

    impl BenchOp for Ecdh {
        fn run(&mut self) -> Result<(), CryptoError> {
            let mut d = Deriver::new(&self.0).map_err(|e| err("ecdh-p256", e))?;
            d.set_peer(&self.1).map_err(|e| err("ecdh-p256", e))?;
            d.derive_to_vec().map_err(|e| err("ecdh-p256", e))?;
            Ok(())
        }
        fn payload_len(&self) -> usize {
            1
        }
    }

    /// The operation of a public-key probe; one "byte" per operation, so the
    /// probe's rate is operations per CPU second.
    pub fn op(name: &str) -> Result<Box<dyn BenchOp>, CryptoError> {
        let rsa =
            || PKey::private_key_from_pem(RSA_KEY.as_bytes()).map_err(|e| err("probe key", e));
        Ok(match name {
            "rsa2048-sign" => Box::new(Sign(rsa()?)),
            "rsa2048-verify" => {
                let key = rsa()?;
                let mut s = Signer::new(MessageDigest::sha256(), &key)
                    .map_err(|e| err("rsa2048-verify", e))?;
                let sig = s
                    .sign_oneshot_to_vec(MESSAGE)
                    .map_err(|e| err("rsa2048-verify", e))?;
                let public = PKey::public_key_from_pem(
                    &key.public_key_to_pem().map_err(|e| err("probe key", e))?,
                )
                .map_err(|e| err("probe key", e))?;
                Box::new(Verify(public, sig))
            }
            "ecdh-p256" => {
                let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1)
                    .map_err(|e| err("ecdh-p256", e))?;
                let mine = EcKey::generate(&group).map_err(|e| err("ecdh-p256", e))?;
                let peer = EcKey::generate(&group).map_err(|e| err("ecdh-p256", e))?;
                let peer_public = EcKey::from_public_key(&group, peer.public_key())
                    .map_err(|e| err("ecdh-p256", e))?;
                Box::new(Ecdh(
                    PKey::from_ec_key(mine).map_err(|e| err("ecdh-p256", e))?,
                    PKey::from_ec_key(peer_public).map_err(|e| err("ecdh-p256", e))?,
                ))
            }
            other => {
                return Err(CryptoError::Unavailable {
                    cipher: other.to_string(),
                    reason: "not a public-key probe".into(),
                })
            }
        })
    }
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
                sets_bytes_per_cpu_sec: Vec::new(),
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
    fn public_key_probes_count_operations_per_cpu_second() {
        let figures = measure_public_key(2, Duration::from_millis(3)).unwrap();
        let names: Vec<&str> = figures.iter().map(|f| f.cipher.as_str()).collect();
        assert_eq!(names, PK_PROBES);
        for f in &figures {
            assert_eq!(f.size_bytes, 0);
            assert_eq!(f.rounds_bytes_per_cpu_sec.len(), 2);
            // Any x86 CPU of the last decade signs RSA-2048 more than 100 times a
            // second and verifies and derives far faster; none does 10^7 a second.
            assert!(
                f.bytes_per_cpu_sec > 100.0 && f.bytes_per_cpu_sec < 1e7,
                "{f:?}"
            );
        }
        let sign = &figures[0];
        let verify = &figures[1];
        assert!(verify.bytes_per_cpu_sec > 3.0 * sign.bytes_per_cpu_sec);
    }

    #[test]
    fn the_median_of_rounds_ignores_one_outlier() {
        assert_eq!(median(&[1.0, 100.0, 3.0]), 3.0);
        assert_eq!(median(&[1.0, 3.0]), 2.0);
        assert_eq!(median(&[]), 0.0);
    }
}
