//! The presets, every layer's in one place: `tiny` (seconds, proves every layer
//! works), `quick` (a few minutes) and `full` (the seeds' methodology at full
//! length), as the plans each layer runs. `cipherbench run` takes all four;
//! `tunnel --preset` takes the tunnel's as the base its flags adjust.

use crate::file::bench::{ColdChoice, FilePlan, InputSpec};
use crate::file::tools::ToolId;
use crate::host::cores;
use crate::run::TlsPlan;
use crate::speed::SpeedPlan;
use crate::tls::suite::{self, KeyType, SEED_SUITES};
use crate::tls::{RampPlan, ServerTarget, SweepPlan};
use crate::tunnel::TunnelPlan;
use crate::variant::Variant;
use anyhow::Result;
use cipherbench_crypto::catalogue::{self, CipherId};
use cipherbench_esp::Transform;
use cipherbench_model::file::{Cache, SyncMode};
use cipherbench_model::speed::Direction;
use cipherbench_model::tunnel::{Protocol, VariantSide};
use cipherbench_model::units::ByteSize;
use clap::ValueEnum;
use std::time::Duration;

/// The largest file or response a rehearsal (`run --rehearse`) makes: the full
/// preset's 1 GiB file and 4 GiB responses are what take it hours.
pub const REHEARSAL_MAX_SIZE: u64 = 4 << 20;

/// The nginx core counts of the full preset's sweep on a machine of `cpus` CPUs:
/// powers of 2 below it, and, from 8 CPUs, three quarters of it, none above. The generator reads
/// by sample, and one of its cores kept 3.9-5.2 nginx cores busy (16 MiB
/// AES-GCM, docs/BENCHMARKS-tls.md), so a 3:1 split measures nginx at the most cores
/// that leaves the generator room; each point still checks, by its generator
/// threads' CPU, that the generator was not the limit.
pub fn full_cores(cpus: usize) -> Vec<usize> {
    let mut cores: Vec<usize> = std::iter::successors(Some(1usize), |c| Some(c * 2))
        .take_while(|&c| c < cpus.max(2))
        .collect();
    if cpus >= 8 {
        let three_quarters = cpus * 3 / 4;
        cores.retain(|&c| c < three_quarters);
        cores.push(three_quarters);
    }
    cores
}

/// The presets of `cipherbench run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// A few minutes: every layer, short windows (in `run`, the tunnel over TCP
    /// only).
    Quick,
    /// The seeds' methodology at full length.
    Full,
    /// Seconds: proves every layer works (CI and tests).
    Tiny,
}

impl Preset {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Quick => "quick",
            Preset::Full => "full",
            Preset::Tiny => "tiny",
        }
    }

    /// Layer 1 of a preset.
    pub fn speed_plan(self) -> SpeedPlan {
        let all = catalogue::ALL.to_vec();
        let both = vec![Direction::Encrypt, Direction::Decrypt];
        let variants = vec![Variant::accel(), Variant::noaesni()];
        match self {
            Preset::Tiny => SpeedPlan {
                ciphers: vec![
                    CipherId::Aes128Gcm,
                    CipherId::Aes256Cbc,
                    CipherId::DesEde3Cbc,
                ],
                sizes: vec![256, 16384],
                variants,
                threads: vec![1],
                multi_thread_sizes: Vec::new(),
                directions: vec![Direction::Encrypt],
                warmup: Duration::from_millis(2),
                sample: Duration::from_millis(5),
                samples: 3,
                // Each round a fresh worker per variant, the order turning.
                rounds: 3,
                check_openssl: false,
                async_jobs: Vec::new(),
                check_seconds: 1,
                check_rounds: 3,
                public_key: Vec::new(),
                pk_unavailable: Vec::new(),
            },
            Preset::Quick => SpeedPlan {
                ciphers: all,
                sizes: SpeedPlan::DEFAULT_SIZES.to_vec(),
                variants,
                threads: if cores() > 1 {
                    vec![1, cores()]
                } else {
                    vec![1]
                },
                multi_thread_sizes: vec![16384],
                directions: both,
                warmup: Duration::from_millis(20),
                sample: Duration::from_millis(30),
                samples: 5,
                // Each round a fresh worker per variant, the order turning.
                rounds: 3,
                check_openssl: false,
                async_jobs: Vec::new(),
                check_seconds: 1,
                check_rounds: 3,
                public_key: Vec::new(),
                pk_unavailable: Vec::new(),
            },
            Preset::Full => SpeedPlan {
                ciphers: all,
                sizes: SpeedPlan::DEFAULT_SIZES.to_vec(),
                variants,
                threads: if cores() > 1 {
                    vec![1, cores()]
                } else {
                    vec![1]
                },
                multi_thread_sizes: Vec::new(),
                directions: both,
                warmup: Duration::from_millis(200),
                sample: Duration::from_millis(300),
                samples: 7,
                // Each round a fresh worker per variant, the order turning.
                rounds: 3,
                check_openssl: true,
                async_jobs: Vec::new(),
                check_seconds: 3,
                check_rounds: 3,
                public_key: Vec::new(),
                pk_unavailable: Vec::new(),
            },
        }
    }

    /// Layer 2 of a preset: tiny proves it works in seconds; quick is
    /// the 80 MiB file of the EC2 AES-NI blog post (seed 001) with its tool, ours and
    /// `cp`; full is 1 GiB, every tool, both directions.
    pub fn file_plan(self) -> FilePlan {
        let variants = vec![Variant::accel(), Variant::noaesni()];
        let seeds_tools = vec![ToolId::Cp, ToolId::OpensslCbc, ToolId::Cipherbench];
        let (input, tools, caches, directions, repetitions) = match self {
            Preset::Tiny => (
                2 * ByteSize::MIB,
                seeds_tools,
                vec![Cache::Warm],
                vec![Direction::Encrypt],
                2,
            ),
            Preset::Quick => (
                80 * ByteSize::MIB,
                seeds_tools,
                vec![Cache::Warm, Cache::Cold],
                vec![Direction::Encrypt],
                3,
            ),
            Preset::Full => (
                ByteSize::GIB,
                ToolId::ALL.to_vec(),
                vec![Cache::Warm, Cache::Cold],
                vec![Direction::Encrypt, Direction::Decrypt],
                5,
            ),
        };
        FilePlan {
            input: InputSpec::Generate(input),
            tools,
            variants,
            caches,
            syncs: vec![SyncMode::Fsync],
            directions,
            repetitions,
            cold_method: ColdChoice::Fadvise,
            scratch: None,
            threads: cores(),
        }
    }

    /// Layer 3 of a preset.
    ///
    /// - tiny: seconds, proving the layer works: both seed suites at 1 MiB (accel),
    ///   one 1 KiB ramp to 50 req/s over 2 s.
    /// - quick: about two minutes: both seed suites at 16 MiB, accel and noaesni, a
    ///   4 s window after 1 s probes; ramps of 1 KiB and 50 KiB to 50 req/s over 12 s in
    ///   both variants.
    /// - full: the seeds' methodology: 1 MiB to 4 GiB by powers of 4, core counts by
    ///   [`full_cores`], 2-minute windows, 2 s
    ///   limit; 60 s ramps to 50 req/s.
    #[expect(
        clippy::too_many_lines,
        reason = "the preset's TLS plan, field by field, with the sizing rules next to their fields"
    )]
    pub fn tls_plan(self) -> Result<TlsPlan> {
        let key = KeyType::Rsa2048;
        let seed = suite::parse_suites(&SEED_SUITES.join(","), key)?;
        let ramp_suite = suite::parse_suites("AES128-SHA", key)?;
        let both = vec![Variant::accel(), Variant::noaesni()];
        let target = ServerTarget::Nginx {
            binary: None,
            port: None,
        };
        const MIB: u64 = 1 << 20;
        let full_cores = full_cores(crate::host::allowed_cpus().len());
        Ok(match self {
            Preset::Tiny => TlsPlan {
                sweep: SweepPlan {
                    suites: seed,
                    sizes: vec![MIB],
                    cores: vec![1],
                    variants: vec![Variant::accel()],
                    key,
                    key_stores: vec![crate::tls::keystore::KeyStore::File],
                    // Long enough that a loaded CI machine (tests run in parallel on two
                    // cores) still completes requests in the window.
                    window: Duration::from_millis(1500),
                    rounds: 3,
                    probe: Duration::from_millis(300),
                    warmup: Duration::from_millis(100),
                    limit: Duration::from_secs(2),
                    timeout: Duration::from_secs(30),
                    drain: Duration::from_secs(2),
                    max_concurrency: 2,
                    fixed_concurrency: None,
                    fixed_rate: None,
                    generator_cpus: None,
                    resumption: false,
                    target: target.clone(),
                    agents: None,
                    verify: crate::tls::engine::sampled::Verify::Sampled(
                        crate::tls::engine::sampled::DEFAULT_SAMPLING,
                    ),
                    plain_http: true,
                },
                ramp: RampPlan {
                    suites: ramp_suite,
                    sizes: vec![1024],
                    variants: vec![Variant::accel()],
                    cores: 1,
                    key,
                    key_stores: vec![crate::tls::keystore::KeyStore::File],
                    target_rate: 50.0,
                    duration: Duration::from_secs(2),
                    timeout: Duration::from_secs(2),
                    generator_cpus: None,
                    target,
                    agents: None,
                    verify: crate::tls::engine::sampled::Verify::Sampled(
                        crate::tls::engine::sampled::DEFAULT_SAMPLING,
                    ),
                },
            },
            Preset::Quick => TlsPlan {
                sweep: SweepPlan {
                    suites: seed,
                    sizes: vec![16 * MIB],
                    cores: vec![1],
                    variants: both.clone(),
                    key,
                    key_stores: vec![crate::tls::keystore::KeyStore::File],
                    window: Duration::from_secs(4),
                    rounds: 3,
                    probe: Duration::from_secs(1),
                    warmup: Duration::from_millis(300),
                    limit: Duration::from_secs(2),
                    timeout: Duration::from_secs(60),
                    drain: Duration::from_secs(3),
                    max_concurrency: 16,
                    fixed_concurrency: None,
                    fixed_rate: None,
                    generator_cpus: None,
                    resumption: false,
                    target: target.clone(),
                    agents: None,
                    verify: crate::tls::engine::sampled::Verify::Sampled(
                        crate::tls::engine::sampled::DEFAULT_SAMPLING,
                    ),
                    plain_http: true,
                },
                ramp: RampPlan {
                    suites: ramp_suite,
                    sizes: vec![1024, 50 * 1024],
                    variants: both,
                    cores: 1,
                    key,
                    key_stores: vec![crate::tls::keystore::KeyStore::File],
                    target_rate: 50.0,
                    duration: Duration::from_secs(12),
                    timeout: Duration::from_secs(2),
                    generator_cpus: None,
                    target,
                    agents: None,
                    verify: crate::tls::engine::sampled::Verify::Sampled(
                        crate::tls::engine::sampled::DEFAULT_SAMPLING,
                    ),
                },
            },
            Preset::Full => TlsPlan {
                sweep: SweepPlan {
                    suites: seed,
                    sizes: (0..7).map(|i| MIB << (2 * i)).collect(),
                    cores: full_cores,
                    variants: both.clone(),
                    key,
                    key_stores: vec![crate::tls::keystore::KeyStore::File],
                    window: Duration::from_secs(120),
                    rounds: 3,
                    probe: Duration::from_secs(10),
                    warmup: Duration::from_secs(2),
                    limit: Duration::from_secs(2),
                    timeout: Duration::from_secs(600),
                    drain: Duration::from_secs(5),
                    max_concurrency: 1024,
                    fixed_concurrency: None,
                    fixed_rate: None,
                    generator_cpus: None,
                    resumption: false,
                    target: target.clone(),
                    agents: None,
                    verify: crate::tls::engine::sampled::Verify::Sampled(
                        crate::tls::engine::sampled::DEFAULT_SAMPLING,
                    ),
                    plain_http: true,
                },
                ramp: RampPlan {
                    suites: ramp_suite,
                    sizes: vec![1024, 50 * 1024],
                    variants: both,
                    cores: 1,
                    key,
                    key_stores: vec![crate::tls::keystore::KeyStore::File],
                    target_rate: 50.0,
                    duration: Duration::from_secs(60),
                    timeout: Duration::from_secs(2),
                    generator_cpus: None,
                    target,
                    agents: None,
                    verify: crate::tls::engine::sampled::Verify::Sampled(
                        crate::tls::engine::sampled::DEFAULT_SAMPLING,
                    ),
                },
            },
        })
    }

    /// The preset's plan for a rehearsal (`run --rehearse`): every part it
    /// measures (ciphers, variants, threads, directions, the cross-check, file tools,
    /// caches, TLS suites, sizes and core counts, ramps, tunnel transforms, protocols
    /// and stacks) at the tiny preset's lengths: its warm-ups, samples, windows,
    /// probes and repetitions; the smallest and largest `speed` buffer; files and
    /// responses of at most [`REHEARSAL_MAX_SIZE`]; two runs per tunnel point.
    /// Minutes for the full preset, to show the machine can run it before it is
    /// given hours.
    pub fn rehearse(plan: &mut crate::run::RunPlan) -> Result<()> {
        let tiny = Preset::Tiny;
        let t = tiny.speed_plan();
        let speed = &mut plan.speed;
        // The smallest and the largest buffer: every cipher, variant, direction and
        // thread count still runs, and the cross-check with them.
        if let (Some(&lo), Some(&hi)) = (speed.sizes.iter().min(), speed.sizes.iter().max()) {
            speed.sizes = if lo == hi { vec![lo] } else { vec![lo, hi] };
        }
        speed.warmup = t.warmup;
        speed.sample = t.sample;
        speed.samples = t.samples;
        speed.rounds = t.rounds;
        speed.check_seconds = t.check_seconds;
        speed.check_rounds = t.check_rounds;

        let t = tiny.file_plan();
        if let InputSpec::Generate(n) = &mut plan.file.input {
            *n = (*n).min(REHEARSAL_MAX_SIZE);
        }
        plan.file.repetitions = t.repetitions;

        let t = tiny.tls_plan()?;
        let sweep = &mut plan.tls.sweep;
        let mut sizes: Vec<u64> = sweep
            .sizes
            .iter()
            .copied()
            .filter(|&s| s <= REHEARSAL_MAX_SIZE)
            .collect();
        if sizes.is_empty() {
            sizes = sweep.sizes.iter().copied().min().into_iter().collect();
        }
        sweep.sizes = sizes;
        sweep.window = t.sweep.window;
        sweep.rounds = t.sweep.rounds;
        sweep.probe = t.sweep.probe;
        sweep.warmup = t.sweep.warmup;
        sweep.timeout = t.sweep.timeout;
        sweep.drain = t.sweep.drain;
        sweep.max_concurrency = t.sweep.max_concurrency;
        let ramp = &mut plan.tls.ramp;
        ramp.duration = t.ramp.duration;
        ramp.timeout = t.ramp.timeout;
        ramp.target_rate = t.ramp.target_rate;

        let t = tiny.tunnel_plan();
        let tunnel = &mut plan.tunnel;
        tunnel.seconds = t.seconds;
        tunnel.omit_seconds = t.omit_seconds;
        tunnel.probe_seconds = t.probe_seconds;
        tunnel.max_probes = t.max_probes;
        // Two, so a point's runs are compared with each other as in the preset.
        tunnel.repeats = tunnel.repeats.min(2);
        Ok(())
    }

    /// Layer 4 of a preset: the seed's iperf3 commands (UDP `-l 1220` at about 5 %
    /// loss; TCP with iperf3's own 128 KiB writes, see `TunnelPlan::tcp_length`)
    /// with shorter runs in the quick and tiny presets.
    pub fn tunnel_plan(self) -> TunnelPlan {
        let mut plan = TunnelPlan {
            transforms: Transform::ALL.to_vec(),
            variants: vec![Variant::accel(), Variant::noaesni()],
            variant_side: VariantSide::Both,
            underlay_rate: None,
            mtu: 1400,
            length: Some(1220),
            tcp_length: None,
            tcp_rate: None,
            protocols: vec![Protocol::Tcp, Protocol::Udp],
            udp_window: Some(4 << 20),
            seconds: 2,
            omit_seconds: 1,
            // As long as a measured run, so the probe that lands on the target loss is
            // kept as the measured run.
            probe_seconds: 2,
            target_loss: 0.05,
            loss_tolerance: 0.025,
            max_probes: 4,
            repeats: 1,
            underlay: true,
            batch: 64,
            offload: true,
            udp_offload: true,
            pin: true,
            gateway_threads: crate::tunnel::default_gateway_threads(crate::host::cores()),
            gateway_threads_from: format!("default for {} cores", crate::host::cores()),
            iperf3_parallel: 1,
            esp_keylog: None,
            stacks: cipherbench_model::tunnel::Stack::own_only(),
            strongswan_backends: vec![crate::tunnel::strongswan::config::Backend::Openssl],
            charon: None,
        };
        match self {
            // Two rounds: a run that falls far under its sibling with idle gateways
            // (a stall the instrument, not the tunnel, set) can only be told from
            // the tunnel's own figure beside a sibling, and the ladder then marks
            // the rung instead of reading a stall as a loss.
            Preset::Quick => plan.repeats = 2,
            Preset::Tiny => {
                plan.transforms = vec![Transform::Aes128Gcm];
                plan.seconds = 1;
                plan.omit_seconds = 0;
                plan.probe_seconds = 1;
                plan.max_probes = 2;
            }
            Preset::Full => {
                plan.seconds = 20;
                plan.omit_seconds = 2;
                plan.probe_seconds = 3;
                plan.max_probes = 6;
                plan.repeats = 3;
            }
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_sweep_goes_to_three_quarters_of_a_machine_of_eight_cpus_or_more() {
        assert_eq!(full_cores(1), [1]);
        assert_eq!(full_cores(2), [1]);
        assert_eq!(full_cores(4), [1, 2]);
        assert_eq!(full_cores(8), [1, 2, 4, 6]);
        // Not a power of two: none above three quarters, in order.
        assert_eq!(full_cores(9), [1, 2, 4, 6]);
        assert_eq!(full_cores(10), [1, 2, 4, 7]);
        assert_eq!(full_cores(12), [1, 2, 4, 8, 9]);
        assert_eq!(full_cores(40), [1, 2, 4, 8, 16, 30]);
        assert_eq!(full_cores(16), [1, 2, 4, 8, 12]);
        assert_eq!(full_cores(64), [1, 2, 4, 8, 16, 32, 48]);
        assert_eq!(full_cores(128), [1, 2, 4, 8, 16, 32, 64, 96]);
    }
}
