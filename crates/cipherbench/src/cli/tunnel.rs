//! `cipherbench tunnel`: the flags, their resolution over a preset into a
//! [`TunnelPlan`], `tunnel cleanup`, and the command.

use super::flags::{dedup, LibraryArgs};
use super::output::{measure, summary, OutputArgs};
use super::preset::Preset;
use crate::tunnel::strongswan::{config::Backend, LIBIPSEC_MTU};
use crate::tunnel::{self, TunnelPlan};
use crate::variant;
use anyhow::{bail, Result};
use cipherbench_esp::Transform;
use cipherbench_model::tunnel::{Protocol, Stack, VariantSide};
use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;

/// `cipherbench tunnel`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct TunnelArgs {
    /// `cleanup`: remove what a killed run left behind.
    #[command(subcommand)]
    pub action: Option<TunnelAction>,
    /// Defaults for everything below: tiny (seconds), quick (about two minutes),
    /// full (20 s iperf3 runs, three of each, as in the IIJ IPsec post).
    #[arg(long, value_enum, default_value = "quick")]
    pub preset: Preset,
    /// Transforms, comma-separated: null, aes256-sha256, aes128-gcm, aes256-gcm,
    /// chacha20-poly1305 (default: all five).
    #[arg(long, value_name = "LIST")]
    pub transforms: Option<String>,
    /// Variants: accel, noaesni, ia32cap:MASK, provider:CONF (an openssl.cnf loading a provider) or engine:ID (default: accel,noaesni).
    #[arg(long, value_name = "LIST")]
    pub variants: Option<String>,
    /// Which gateway runs the variant; the other runs accel (the IIJ IPsec post
    /// changed the sender's engine only).
    #[arg(long, value_enum, default_value = "both")]
    pub variant_side: VariantSideArg,
    /// Run the tunnel to this host over the real network instead of between
    /// namespaces: one gateway here, one there (started by `cipherbench agent` over
    /// ssh, root on both, the same build), UDP 4500, iperf3 on both ends, each
    /// host's end pinned on its own cores, the underlay first; results as the
    /// namespace tunnel's.
    #[arg(long, value_name = "HOST")]
    pub peer: Option<String>,
    /// ssh client config for --peer (ssh -F FILE).
    #[arg(long, value_name = "FILE", requires = "peer")]
    pub ssh_config: Option<PathBuf>,
    /// The cipherbench binary on the peer (default: this build where `cipherbench
    /// deploy` put it, else cipherbench on its PATH).
    #[arg(long, value_name = "PATH", requires = "peer")]
    pub agent_path: Option<String>,
    /// Rate-limit the underlay with tc tbf, such as 1gbit (the IIJ IPsec post's LAN).
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
    /// iperf3 -l of UDP runs: bytes per datagram, 16 to 65507, or 'default' for
    /// iperf3's own (default: 1220, as the IIJ IPsec post).
    #[arg(long, value_name = "BYTES|default")]
    pub length: Option<String>,
    /// iperf3 -l of TCP runs: bytes per write, 16 to 1048576, or 'default' for
    /// iperf3's own, 128 KiB (the default). 1220 is the IIJ post's TCP command, run
    /// there from a machine behind the gateway; written into the TUN device from
    /// the gateway's own host it measures iperf3's per-write cost, not the tunnel.
    #[arg(long, value_name = "BYTES|default")]
    pub tcp_length: Option<String>,
    /// TCP runs at a fixed offered load (iperf3 -b), such as 2gbit: the table then
    /// gives what the gateways cost at that load, in cores per Gbit/s by variant.
    #[arg(long, value_name = "RATE")]
    pub rate: Option<String>,
    /// iperf3 -w for UDP runs: bytes, or 'default' for iperf3's own (default 4194304:
    /// iperf3's server shares a core with the receiving gateway and must absorb its
    /// batches; capped by net.core.rmem_max).
    #[arg(long, value_name = "BYTES|default")]
    pub udp_window: Option<String>,
    /// Length of one probe of the UDP rate search, seconds.
    #[arg(long)]
    pub probe_seconds: Option<u64>,
    /// UDP loss the rate search aims for, percent (default 5, as the IIJ IPsec post).
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
    /// Gateway: crypto workers per direction in each gateway. 1: no pipeline; on
    /// one core a `tun<->udp` thread takes both directions in turn, with a
    /// `udp->tun spare` on that core that takes the socket over for good once
    /// `tun<->udp` waits too long for its core (the table says when it split);
    /// otherwise one thread per direction. N >= 2: each direction an ordered
    /// pipeline, a reading thread, N workers sealing or opening one SA in parallel
    /// and a writing thread keeping the order. Default: what the cores allow once
    /// both iperf3 ends have one ((cores - 2) / 2, 1 to 16), recorded in run.json.
    /// Sets no strongSwan threads (only the CPUs charon is pinned to).
    #[arg(long, value_name = "N")]
    pub gateway_threads: Option<usize>,
    /// iperf3 -P: parallel streams per run (the figure is their sum).
    #[arg(long, value_name = "N")]
    pub parallel: Option<usize>,
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
    /// The library under test (the gateways').
    #[command(flatten)]
    pub library: LibraryArgs,
    /// IPsec stacks, comma-separated, measured in the same run: own (cipherbench's
    /// gateways) and strongswan (charon with kernel-libipsec, a userspace reference
    /// stack; IKEv2, PSK, UDP encapsulation forced).
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "own"
    )]
    pub stack: Vec<StackArg>,
    /// strongSwan's crypto backends: openssl (takes the variants), aesni, c
    /// (default: openssl).
    #[arg(long, value_name = "LIST")]
    pub strongswan_backends: Option<String>,
    /// strongSwan's charon, if not in /usr/lib/ipsec or /usr/libexec/{ipsec,strongswan}.
    #[arg(long, value_name = "PATH")]
    pub charon: Option<PathBuf>,
    /// Where results go.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `cipherbench tunnel ...` actions.
#[derive(Debug, Subcommand)]
pub enum TunnelAction {
    /// The same as `cipherbench cleanup`: remove what killed runs left behind, for
    /// every layer (namespaces with their processes, scratch directories, nginx
    /// workspaces), found by cipherbench's naming.
    Cleanup {
        /// Also remove those of runs whose owner is still running.
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

/// An IPsec stack on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StackArg {
    /// cipherbench's own ESP-in-UDP gateways.
    Own,
    /// strongSwan (charon, kernel-libipsec).
    Strongswan,
}

impl StackArg {
    /// The model's stack.
    pub fn stack(self) -> Stack {
        match self {
            StackArg::Own => Stack::Own,
            StackArg::Strongswan => Stack::Strongswan,
        }
    }
}

/// A protocol on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProtocolArg {
    /// iperf3 TCP.
    Tcp,
    /// iperf3 UDP at the rate giving the target loss.
    Udp,
}

/// The most payload iperf3 puts in one UDP datagram (`-l` with `-u`): 65535 less
/// IPv4 (20) and UDP (8) headers.
pub const IPERF3_UDP_MAX_LENGTH: u64 = 65_507;

/// The largest tunnel MTU whose ESP-in-UDP packets fit a 1500-byte underlay with
/// every one of `transforms` (IPv4 20 + UDP 8 bytes around the ESP packet).
pub fn max_tunnel_mtu(transforms: &[Transform]) -> u32 {
    const UDP_PAYLOAD: usize = 1500 - 20 - 8;
    (576..UDP_PAYLOAD)
        .rev()
        .find(|&m| transforms.iter().all(|t| t.sealed_len(m) <= UDP_PAYLOAD))
        .unwrap_or(576) as u32
}

impl TunnelArgs {
    /// Resolves the flags over the preset's plan, refusing bad input with one line.
    #[expect(
        clippy::too_many_lines,
        reason = "one step per flag, applied over the preset's plan"
    )]
    pub fn plan(&self) -> Result<TunnelPlan> {
        let mut plan = self.preset.tunnel_plan();
        if let Some(list) = &self.transforms {
            plan.transforms = list
                .split(',')
                .map(|t| {
                    Transform::from_name(t, true).map_err(|e| anyhow::anyhow!("--transforms: {e}"))
                })
                .collect::<Result<_>>()?;
        }
        if let Some(list) = &self.variants {
            plan.variants = variant::parse_variants(list)?;
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
            plan.length = length("--length", l)?;
        }
        if let Some(l) = &self.tcp_length {
            plan.tcp_length = length("--tcp-length", l)?;
        }
        if let Some(r) = &self.rate {
            plan.tcp_rate = Some(tunnel::topology::parse_rate_of("--rate", r)? as f64);
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
        if let Some(n) = self.gateway_threads {
            let max = tunnel::gateway::MAX_THREADS;
            if !(1..=max).contains(&n) {
                bail!("--gateway-threads must be between 1 and {max}");
            }
            plan.gateway_threads = n;
            plan.gateway_threads_from = "--gateway-threads".into();
        }
        if let Some(p) = self.parallel {
            if !(1..=128).contains(&p) {
                bail!("--parallel must be between 1 and 128 (iperf3 -P)");
            }
            plan.iperf3_parallel = p;
        }
        plan.offload &= !self.no_offload;
        plan.udp_offload &= !self.no_udp_offload;
        plan.pin &= !self.no_pin;
        plan.underlay &= !self.no_underlay;
        plan.stacks = dedup(self.stack.iter().map(|s| s.stack()));
        if let Some(list) = &self.strongswan_backends {
            plan.strongswan_backends = dedup(
                list.split(',')
                    .map(Backend::from_name)
                    .collect::<Result<Vec<_>>>()
                    .map_err(|e| anyhow::anyhow!("--strongswan-backends: {e}"))?,
            );
        }
        plan.charon = self.charon.clone();
        if plan.stacks.contains(&Stack::Strongswan) {
            if plan.mtu != LIBIPSEC_MTU {
                bail!("--mtu {}: strongSwan's kernel-libipsec fixes its TUN MTU at {LIBIPSEC_MTU}; leave --mtu at {LIBIPSEC_MTU} with --stack strongswan, so both stacks carry the same packets", plan.mtu);
            }
            if plan.transforms.iter().all(|t| *t == Transform::Null)
                && plan.stacks == [Stack::Strongswan]
            {
                bail!("--stack strongswan: strongSwan refuses the null transform (ESP needs encryption or integrity); give another with --transforms");
            }
            if self.esp_keylog.is_some() && plan.stacks == [Stack::Strongswan] {
                bail!("--esp-keylog logs the SAs of cipherbench's own gateways; charon does not write one (use --stack own,strongswan, or drop --esp-keylog)");
            }
        }
        plan.esp_keylog = (self.esp_keylog.as_deref())
            .map(tunnel::gateway::keylog::check)
            .transpose()?;
        if plan.transforms.is_empty() || plan.variants.is_empty() || plan.protocols.is_empty() {
            bail!("nothing to measure: give at least one transform, variant and protocol");
        }
        if let Some(l) = plan.length.filter(|&l| l > IPERF3_UDP_MAX_LENGTH) {
            if plan.protocols.contains(&Protocol::Udp) {
                bail!("--length {l}: iperf3 sends at most {IPERF3_UDP_MAX_LENGTH} bytes per UDP datagram (65535 less the IPv4 and UDP headers); give at most {IPERF3_UDP_MAX_LENGTH} (TCP's writes are --tcp-length)");
            }
        }
        // Last: resolving a library starts a child under it.
        plan.variants = variant::cross(&plan.variants, &self.library.libraries()?)?;
        tunnel::strongswan::check_libraries(&plan)?;
        Ok(plan)
    }
}

/// `cipherbench tunnel`: `cleanup`, or resolves the plan, measures into a session,
/// and prints the table (or JSON).
pub fn command(args: &TunnelArgs, quiet: bool) -> Result<ExitCode> {
    if let Some(TunnelAction::Cleanup { force }) = args.action {
        // An alias of `cipherbench cleanup`: every layer's leftovers.
        return super::cleanup::command(&super::cleanup::CleanupArgs {
            force,
            dirs: Vec::new(),
        });
    }
    let plan = args.plan()?;
    if let Some(peer) = &args.peer {
        return peer_command(args, peer, &plan, quiet);
    }
    measure(
        &args.output,
        args.preset.name(),
        quiet,
        &variant::libraries_of(&plan.variants),
        true,
        |s| tunnel::run(&plan, s),
        |s| {
            summary(
                args.json,
                s.record.tunnel.as_ref(),
                cipherbench_report::tunnel::text,
            )
        },
    )
}

/// `tunnel --peer HOST`: the flags that mean nothing between two hosts refused in
/// one line, then measured into a session as the namespace tunnel is (run.json,
/// summary.md, report.html) and shown with the same table.
fn peer_command(args: &TunnelArgs, peer: &str, plan: &TunnelPlan, quiet: bool) -> Result<ExitCode> {
    if peer.contains(',') {
        bail!("--peer takes one host");
    }
    // Both hosts apply each variant to their own library: masks only.
    for v in &plan.variants {
        crate::tunnel::peer::peer_variant(&v.name())?;
    }
    if args.underlay_rate.is_some() {
        bail!("--underlay-rate shapes the namespace tunnel's veth; with --peer the underlay is the real network between the hosts (drop --underlay-rate)");
    }
    if args.variant_side != VariantSideArg::Both {
        bail!("--variant-side applies between namespaces; with --peer both gateways run each variant, each judged on its own host (drop --variant-side)");
    }
    if plan.stacks != [Stack::Own] {
        bail!("--stack strongswan runs between namespaces only; with --peer only cipherbench's own gateways run (drop --stack)");
    }
    if args.esp_keylog.is_some() {
        bail!(
            "--esp-keylog is not supported with --peer: the peer's gateway keys stay on the peer"
        );
    }
    let launch = crate::agent::fleet::Launch::parse(
        peer,
        args.ssh_config.clone(),
        args.agent_path.as_deref(),
        None,
    )?;
    let plan = crate::tunnel::peer::PeerPlan {
        launch,
        plan: plan.clone(),
    };
    measure(
        &args.output,
        args.preset.name(),
        quiet,
        &variant::libraries_of(&plan.plan.variants),
        false,
        |s| crate::tunnel::peer::run(&plan, s),
        |s| {
            summary(
                args.json,
                s.record.tunnel.as_ref(),
                cipherbench_report::tunnel::text,
            )
        },
    )
}

/// An iperf3 `-l` as given to `flag`: 16 to 1048576 bytes, or `default` (None).
fn length(flag: &str, given: &str) -> Result<Option<u64>> {
    match given.trim() {
        "default" => Ok(None),
        n => n
            .parse::<u64>()
            .ok()
            .filter(|&n| (16..=1_048_576).contains(&n))
            .map(Some)
            .ok_or_else(|| {
                anyhow::anyhow!("{flag}: '{n}' is not 16 to 1048576 bytes or 'default'")
            }),
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
