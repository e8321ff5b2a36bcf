//! Command-line arguments, and their resolution into plans. Raw flags are parsed
//! and checked here once; runners only ever see resolved plans.

use crate::speed::{self, SpeedPlan};
use crate::tunnel::{self, TunnelPlan};
use anyhow::{bail, Result};
use cipherbench_esp::Transform;
use cipherbench_model::speed::Direction;
use cipherbench_model::tunnel::{Protocol, VariantSide};
use cipherbench_model::units::parse_size_list;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// cipherbench: what does hardware crypto acceleration buy, on this machine, for my
/// workload?
#[derive(Debug, Parser)]
#[command(name = "cipherbench", version, about, long_about = None)]
pub struct Cli {
    /// Print only results and notes, not progress.
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// CPU crypto features, hypervisor, OpenSSL build and capability vector, engines and
    /// providers, kernel crypto drivers, offload devices.
    Probe {
        /// Print JSON instead of the human report.
        #[arg(long)]
        json: bool,
    },
    /// Layer 1: cipher throughput by buffer size, with AES-NI available and masked.
    Speed(SpeedArgs),
    /// Layer 2: the time to encrypt a file through the disk, by tool and variant.
    File(crate::file::args::FileArgs),
    /// Encrypt a file (or stdin) into cipherbench's streaming format, in parallel.
    Seal(crate::file::args::SealArgs),
    /// Decrypt a sealed file; the output appears only if every chunk verified.
    Open(crate::file::args::OpenArgs),
    /// Layer 3: TLS web serving with a real nginx: the throughput sweep and the ramp.
    Tls(crate::tls::args::TlsArgs),
    /// Layer 4: iperf3 TCP and UDP through cipherbench's ESP-in-UDP tunnel between two
    /// network namespaces, per transform, with AES-NI available and masked (root).
    Tunnel(TunnelArgs),
    /// The main job: probe and every layer, into a results directory with a report.
    Run(RunArgs),
    /// Re-render report.html and the CSV files of a results directory, without measuring.
    Report {
        /// A results directory (holding run.json).
        dir: PathBuf,
        /// TLS throughput to plan for, Gbit/s: the capacity line gives the cores each
        /// suite needs for it (default: the run's, else 10). run.json is not changed.
        #[arg(long, value_name = "GBPS")]
        target_gbps: Option<f64>,
    },
    /// Two or more results directories side by side: environment differences, then
    /// per-layer ratios, with 3DES as the control that separates CPU speed from
    /// acceleration.
    Compare {
        /// Results directories; the first is the baseline.
        #[arg(required = true, num_args = 2..)]
        dirs: Vec<PathBuf>,
        /// Also write compare.md and compare.html into this directory.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Internal: the measuring child of `speed` (reads a request on stdin).
    #[command(name = "__speed-worker", hide = true)]
    SpeedWorker,
    /// Internal: one ESP gateway of `tunnel` (reads its configuration on stdin).
    #[command(name = "__gateway", hide = true)]
    Gateway,
}

/// Where results go.
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Results directory (default: results/<timestamp>-<host>).
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,
    /// Measure and print, but write no results directory.
    #[arg(long, conflicts_with = "results")]
    pub no_save: bool,
}

impl OutputArgs {
    /// The results directory to write: none with `--no-save`, else `--results` or
    /// the default for this host.
    pub fn dir(&self, hostname: &str) -> Option<PathBuf> {
        if self.no_save {
            return None;
        }
        Some(
            self.results
                .clone()
                .unwrap_or_else(|| crate::results::default_dir(hostname)),
        )
    }
}

/// `cipherbench speed`.
#[derive(Debug, Args)]
pub struct SpeedArgs {
    /// Ciphers, comma-separated (default: all seven).
    #[arg(long, value_name = "LIST")]
    pub cipher: Option<String>,
    /// Buffer sizes, comma-separated, such as 16,1KiB,16KiB (default: 16,64,256,1KiB,8KiB,16KiB).
    #[arg(long, value_name = "LIST")]
    pub sizes: Option<String>,
    /// Variants: accel, noaesni, or ia32cap:MASK (default: accel,noaesni).
    #[arg(long, value_name = "LIST", default_value = "accel,noaesni")]
    pub variants: String,
    /// Thread counts: numbers or 'all' (default: 1,all).
    #[arg(long, value_name = "LIST", default_value = "1,all")]
    pub threads: String,
    /// Directions (default: encrypt,decrypt).
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "encrypt,decrypt"
    )]
    pub direction: Vec<DirectionArg>,
    /// Samples per point.
    #[arg(long, default_value_t = 5)]
    pub samples: usize,
    /// Length of one sample, in milliseconds.
    #[arg(long, default_value_t = 100)]
    pub sample_ms: u64,
    /// Warm-up before the samples, in milliseconds.
    #[arg(long, default_value_t = 50)]
    pub warmup_ms: u64,
    /// Also run `openssl speed -evp` for the same single-thread points and show the ratio.
    #[arg(long)]
    pub check_openssl: bool,
    /// Print the results as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Where results go.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `cipherbench tunnel`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct TunnelArgs {
    /// `cleanup`: remove what a killed run left behind.
    #[command(subcommand)]
    pub action: Option<TunnelAction>,
    /// Defaults for everything below: tiny (seconds), quick (about two minutes),
    /// full (20 s iperf3 runs, three of each, as seed 004).
    #[arg(long, value_enum, default_value = "quick")]
    pub preset: Preset,
    /// Transforms, comma-separated: null, aes256-sha256, aes128-gcm, aes256-gcm,
    /// chacha20-poly1305 (default: all five).
    #[arg(long, value_name = "LIST")]
    pub transforms: Option<String>,
    /// Variants: accel, noaesni, or ia32cap:MASK (default: accel,noaesni).
    #[arg(long, value_name = "LIST")]
    pub variants: Option<String>,
    /// Which gateway runs the variant; the other runs accel (seed 004 changed the
    /// sender's engine only).
    #[arg(long, value_enum, default_value = "both")]
    pub variant_side: VariantSideArg,
    /// Rate-limit the underlay with tc tbf, such as 1gbit (seed 004's LAN).
    #[arg(long, value_name = "RATE")]
    pub underlay_rate: Option<String>,
    /// Protocols: tcp, udp or both (default: tcp,udp).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub protocols: Option<Vec<ProtocolArg>>,
    /// iperf3 -t of a measured run, seconds.
    #[arg(long)]
    pub seconds: Option<u64>,
    /// iperf3 -O for TCP runs (warm-up excluded from the figures), seconds.
    #[arg(long)]
    pub omit: Option<u64>,
    /// iperf3 -l: bytes per write, or 'default' for iperf3's own (default: 1220, as
    /// the seed).
    #[arg(long, value_name = "BYTES|default")]
    pub length: Option<String>,
    /// iperf3 -w for UDP runs: bytes, or 'default' for iperf3's own (default 4194304:
    /// iperf3's server shares a core with the receiving gateway and must absorb its
    /// batches; capped by net.core.rmem_max).
    #[arg(long, value_name = "BYTES|default")]
    pub udp_window: Option<String>,
    /// Length of one probe of the UDP rate search, seconds.
    #[arg(long)]
    pub probe_seconds: Option<u64>,
    /// UDP loss the rate search aims for, percent (default 5, as the seed).
    #[arg(long, value_name = "PERCENT")]
    pub target_loss: Option<f64>,
    /// iperf3 runs per point.
    #[arg(long)]
    pub repeats: Option<usize>,
    /// Tunnel (TUN) MTU.
    #[arg(long)]
    pub mtu: Option<u32>,
    /// Gateway: datagrams per recvmmsg/sendmmsg.
    #[arg(long)]
    pub batch: Option<usize>,
    /// Gateway: no TUN offloads (one system call per packet on the TUN side).
    #[arg(long)]
    pub no_offload: bool,
    /// Gateway: no UDP offloads (no GSO sends, no UDP_GRO; one datagram per
    /// message through the UDP stack).
    #[arg(long)]
    pub no_udp_offload: bool,
    /// Do not pin gateways and iperf3 to cores.
    #[arg(long)]
    pub no_pin: bool,
    /// Skip the underlay-alone measurement.
    #[arg(long)]
    pub no_underlay: bool,
    /// Print the results as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Append every SA (addresses, SPI, algorithms, keys) to FILE as Wireshark's
    /// esp_sa table, for tshark to decrypt a capture. SECRET: created 0600.
    #[arg(long, value_name = "FILE")]
    pub esp_keylog: Option<PathBuf>,
    /// Where results go.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `cipherbench tunnel ...` actions.
#[derive(Debug, Subcommand)]
pub enum TunnelAction {
    /// Remove namespaces, processes and scratch directories that a killed run left
    /// behind (found by cipherbench's naming).
    Cleanup {
        /// Also remove those of runs whose owner still seems to be running.
        #[arg(long)]
        force: bool,
    },
}

/// Which gateway runs the variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum VariantSideArg {
    /// Both gateways.
    Both,
    /// The sending gateway (the iperf3 client's side) only.
    Sender,
    /// The receiving gateway only.
    Receiver,
}

/// A protocol on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProtocolArg {
    /// iperf3 TCP.
    Tcp,
    /// iperf3 UDP at the rate giving the target loss.
    Udp,
}

/// A direction on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DirectionArg {
    /// Encryption.
    Encrypt,
    /// Decryption.
    Decrypt,
}

impl From<DirectionArg> for Direction {
    fn from(d: DirectionArg) -> Direction {
        match d {
            DirectionArg::Encrypt => Direction::Encrypt,
            DirectionArg::Decrypt => Direction::Decrypt,
        }
    }
}

/// The presets of `cipherbench run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// A few minutes: every layer, short windows.
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
}

/// `cipherbench run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// How thorough.
    #[arg(long, value_enum, default_value = "quick")]
    pub preset: Preset,
    /// Where results go.
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,
    /// TLS throughput to plan for, Gbit/s: the report's capacity line gives the cores
    /// each suite needs for it (default 10).
    #[arg(long, value_name = "GBPS")]
    pub target_gbps: Option<f64>,
}

/// The largest tunnel MTU whose ESP-in-UDP packets fit a 1500-byte underlay with
/// every one of `transforms` (IPv4 20 + UDP 8 bytes around the ESP packet).
pub fn max_tunnel_mtu(transforms: &[Transform]) -> u32 {
    const UDP_PAYLOAD: usize = 1500 - 20 - 8;
    (576..UDP_PAYLOAD)
        .rev()
        .find(|&m| transforms.iter().all(|t| t.sealed_len(m) <= UDP_PAYLOAD))
        .unwrap_or(576) as u32
}

/// Checks a `--target-gbps` value.
pub fn target_gbps(v: f64) -> Result<f64> {
    if !(v.is_finite() && v > 0.0 && v <= 1e6) {
        bail!("--target-gbps must be a positive number of Gbit/s (such as 10 or 2.5), not {v}");
    }
    Ok(v)
}

/// The values in first-seen order, each once (a flag may repeat a value).
pub(crate) fn dedup<T: PartialEq + Copy>(values: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for x in values {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

/// Number of online CPUs.
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

impl SpeedArgs {
    /// Resolves the flags into a plan, refusing bad input with one clear line.
    pub fn plan(&self) -> Result<SpeedPlan> {
        let ciphers = match &self.cipher {
            Some(list) => speed::parse_ciphers(list)?,
            None => cipherbench_crypto::catalogue::ALL.to_vec(),
        };
        let sizes: Vec<u64> = match &self.sizes {
            Some(list) => parse_size_list(list)
                .map_err(|e| anyhow::anyhow!("--sizes: {e}"))?
                .into_iter()
                .map(|s| s.bytes())
                .collect(),
            None => SpeedPlan::DEFAULT_SIZES.to_vec(),
        };
        if let Some(bad) = sizes.iter().find(|&&s| s == 0 || s > 64 * 1024 * 1024) {
            bail!("--sizes: {bad} bytes is out of range (1 byte to 64 MiB)");
        }
        if self.samples == 0 || self.samples > 1000 {
            bail!("--samples must be between 1 and 1000");
        }
        if self.sample_ms == 0 || self.sample_ms > 60_000 {
            bail!("--sample-ms must be between 1 and 60000");
        }
        let directions = dedup(self.direction.iter().map(|&d| Direction::from(d)));
        Ok(SpeedPlan {
            ciphers,
            sizes,
            variants: speed::parse_variants(&self.variants)?,
            threads: speed::parse_threads(&self.threads, cores())?,
            multi_thread_sizes: Vec::new(),
            directions,
            warmup: Duration::from_millis(self.warmup_ms.min(60_000)),
            sample: Duration::from_millis(self.sample_ms),
            samples: self.samples,
            check_openssl: self.check_openssl,
            check_seconds: 1,
        })
    }
}

/// The file (layer 2) plan of a preset: tiny proves it works in seconds; quick is
/// seed 001's 80 MiB file with the seed's tool, ours and `cp`; full is 1 GiB, every
/// tool, both directions.
pub fn preset_file_plan(preset: Preset) -> crate::file::bench::FilePlan {
    use crate::file::bench::{ColdChoice, FilePlan, InputSpec};
    use crate::file::tools::ToolId;
    use cipherbench_model::file::{Cache, SyncMode};
    use cipherbench_model::units::ByteSize;
    let variants = vec![speed::Variant::accel(), speed::Variant::noaesni()];
    let seeds_tools = vec![ToolId::Cp, ToolId::OpensslCbc, ToolId::Cipherbench];
    let (input, tools, caches, directions, repetitions) = match preset {
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
            crate::file::tools::ToolId::ALL.to_vec(),
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

impl TunnelArgs {
    /// Resolves the flags over the preset's plan, refusing bad input with one line.
    pub fn plan(&self) -> Result<TunnelPlan> {
        let mut plan = preset_tunnel_plan(self.preset);
        if let Some(list) = &self.transforms {
            plan.transforms = list
                .split(',')
                .map(|t| {
                    Transform::from_name(t, true).map_err(|e| anyhow::anyhow!("--transforms: {e}"))
                })
                .collect::<Result<_>>()?;
        }
        if let Some(list) = &self.variants {
            plan.variants = speed::parse_variants(list)?;
        }
        plan.variant_side = match self.variant_side {
            VariantSideArg::Both => VariantSide::Both,
            VariantSideArg::Sender => VariantSide::Sender,
            VariantSideArg::Receiver => VariantSide::Receiver,
        };
        if let Some(rate) = &self.underlay_rate {
            plan.underlay_rate = Some((rate.clone(), tunnel::topology::parse_rate(rate)?));
        }
        if let Some(p) = &self.protocols {
            plan.protocols = dedup(p.iter().map(|p| match p {
                ProtocolArg::Tcp => Protocol::Tcp,
                ProtocolArg::Udp => Protocol::Udp,
            }));
        }
        if let Some(s) = self.seconds {
            if !(1..=3600).contains(&s) {
                bail!("--seconds must be between 1 and 3600");
            }
            plan.seconds = s;
        }
        if let Some(o) = self.omit {
            if o > 60 {
                bail!("--omit must be at most 60");
            }
            plan.omit_seconds = o;
        }
        if let Some(l) = &self.length {
            plan.length = match l.trim() {
                "default" => None,
                n => Some(
                    n.parse::<u64>()
                        .ok()
                        .filter(|&n| (16..=1_048_576).contains(&n))
                        .ok_or_else(|| {
                            anyhow::anyhow!(
                                "--length: '{n}' is not 16 to 1048576 bytes or 'default'"
                            )
                        })?,
                ),
            };
        }
        if let Some(w) = &self.udp_window {
            plan.udp_window = match w.trim() {
                "default" => None,
                n => Some(
                    n.parse::<u64>()
                        .ok()
                        .filter(|&n| (4096..=1 << 30).contains(&n))
                        .ok_or_else(|| {
                            anyhow::anyhow!(
                                "--udp-window: '{n}' is not 4096 to 1073741824 bytes or 'default'"
                            )
                        })?,
                ),
            };
        }
        if let Some(p) = self.probe_seconds {
            if !(1..=60).contains(&p) {
                bail!("--probe-seconds must be between 1 and 60");
            }
            plan.probe_seconds = p;
        }
        if let Some(t) = self.target_loss {
            if !(0.5..=50.0).contains(&t) {
                bail!("--target-loss must be between 0.5 and 50 (percent)");
            }
            plan.target_loss = t / 100.0;
            plan.loss_tolerance = plan.target_loss / 2.0;
        }
        if let Some(r) = self.repeats {
            if !(1..=100).contains(&r) {
                bail!("--repeats must be between 1 and 100");
            }
            plan.repeats = r;
        }
        if let Some(m) = self.mtu {
            let max = max_tunnel_mtu(&plan.transforms);
            if !(576..=max).contains(&m) {
                bail!("--mtu must be between 576 and {max} (the largest inner packet whose ESP packet, with IPv4 and UDP, fits the 1500-byte underlay with these transforms)");
            }
            plan.mtu = m;
        }
        if let Some(b) = self.batch {
            if !(1..=1024).contains(&b) {
                bail!("--batch must be between 1 and 1024");
            }
            plan.batch = b;
        }
        plan.offload &= !self.no_offload;
        plan.udp_offload &= !self.no_udp_offload;
        plan.pin &= !self.no_pin;
        plan.underlay &= !self.no_underlay;
        plan.esp_keylog = (self.esp_keylog.as_deref())
            .map(tunnel::gateway::keylog::check)
            .transpose()?;
        if plan.transforms.is_empty() || plan.variants.is_empty() || plan.protocols.is_empty() {
            bail!("nothing to measure: give at least one transform, variant and protocol");
        }
        Ok(plan)
    }
}

/// The tunnel plan of a preset: the seed's iperf3 commands (`-l 1220`, UDP at about
/// 5 % loss) with shorter runs in the quick and tiny presets.
pub fn preset_tunnel_plan(preset: Preset) -> TunnelPlan {
    let mut plan = TunnelPlan {
        transforms: Transform::ALL.to_vec(),
        variants: vec![speed::Variant::accel(), speed::Variant::noaesni()],
        variant_side: VariantSide::Both,
        underlay_rate: None,
        mtu: 1400,
        length: Some(1220),
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
        esp_keylog: None,
    };
    match preset {
        Preset::Quick => {}
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

/// The speed plan of a preset.
pub fn preset_speed_plan(preset: Preset) -> SpeedPlan {
    let all = cipherbench_crypto::catalogue::ALL.to_vec();
    let both = vec![Direction::Encrypt, Direction::Decrypt];
    let variants = vec![speed::Variant::accel(), speed::Variant::noaesni()];
    match preset {
        Preset::Tiny => SpeedPlan {
            ciphers: vec![
                cipherbench_crypto::catalogue::CipherId::Aes128Gcm,
                cipherbench_crypto::catalogue::CipherId::Aes256Cbc,
                cipherbench_crypto::catalogue::CipherId::DesEde3Cbc,
            ],
            sizes: vec![256, 16384],
            variants,
            threads: vec![1],
            multi_thread_sizes: Vec::new(),
            directions: vec![Direction::Encrypt],
            warmup: Duration::from_millis(2),
            sample: Duration::from_millis(5),
            samples: 3,
            check_openssl: false,
            check_seconds: 1,
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
            check_openssl: false,
            check_seconds: 1,
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
            check_openssl: true,
            check_seconds: 3,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tunnel_mtu_limit_is_the_largest_that_every_transform_fits() {
        // AEADs: 8 header + 8 IV + pad(m + 2, 4) + 16 ICV <= 1472 -> 1438.
        assert_eq!(max_tunnel_mtu(&[Transform::Aes128Gcm]), 1438);
        // aes256-sha256: 8 + 16 IV + pad(m + 2, 16) + 16 ICV <= 1472 -> 1422.
        assert_eq!(max_tunnel_mtu(&Transform::ALL), 1422);
        for t in Transform::ALL {
            let m = max_tunnel_mtu(&[t]) as usize;
            assert!(t.sealed_len(m) <= 1472 && t.sealed_len(m + 1) > 1472, "{t}");
        }
    }
}
