//! `cipherbench run`: the flags, their resolution into a [`RunPlan`] (the preset's
//! plan of every layer), and the command. The orchestration itself is
//! [`crate::run`].

use super::flags::{dedup, target_gbps, LibraryArgs};
use super::output::finish;
use super::preset::Preset;
use super::tunnel::StackArg;
use crate::interrupt;
use crate::library::Library;
use crate::progress::out;
use crate::run::RunPlan;
use crate::variant::cross;
use anyhow::Result;
use cipherbench_model::tunnel::Protocol;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

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
    /// The library under test, in every layer.
    #[command(flatten)]
    pub library: LibraryArgs,
    /// IPsec stacks of the tunnel layer: own (cipherbench's gateways) and
    /// strongswan (charon with kernel-libipsec, its openssl backend, beside them).
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "own"
    )]
    pub stack: Vec<StackArg>,
    /// Run the preset's plan, every part of it (each cipher, size, direction, file
    /// tool, TLS suite, size and core count, tunnel transform and protocol), at the
    /// tiny preset's lengths, files and responses up to 4 MiB: minutes, to see the
    /// machine can run it before giving it hours. Its figures are marked a rehearsal.
    #[arg(long)]
    pub rehearse: bool,
}

impl RunArgs {
    /// Resolves the flags and the preset into the plan of the whole run.
    /// Every layer's variants are crossed with the libraries of `--openssl`.
    pub fn plan(&self) -> Result<RunPlan> {
        let mut plan = RunPlan {
            preset: self.preset.name().to_string(),
            rehearsal: self.rehearse,
            results: self.results.clone(),
            target_gbps: self.target_gbps.map(target_gbps).transpose()?,
            libraries: Vec::new(),
            left_out: Vec::new(),
            speed: self.preset.speed_plan(),
            file: self.preset.file_plan(),
            tls: self.preset.tls_plan()?,
            tunnel: self.preset.tunnel_plan(),
        };
        plan.tunnel.stacks = dedup(self.stack.iter().map(|s| s.stack()));
        if self.preset == Preset::Quick {
            // The main job's quick run measures the tunnel over TCP, the ladder's
            // rung: the UDP rate search at 5 % loss would double the layer (about
            // 90 s of 165 on 2 vCPU). `cipherbench tunnel` and the full preset
            // measure both.
            plan.tunnel.protocols = vec![Protocol::Tcp];
        }
        if self.rehearse {
            Preset::rehearse(&mut plan)?;
        }
        // Last: resolving a library starts a child under it.
        let libraries = self.library.libraries()?;
        plan.speed.variants = cross(&plan.speed.variants, &libraries)?;
        plan.file.variants = cross(&plan.file.variants, &libraries)?;
        // A library a layer's outside program cannot load (Debian's nginx or charon
        // and an OpenSSL 4) leaves that layer for the others, said and recorded; the
        // ladder shows it where it ran.
        let nginx = crate::tls::nginx::resolve_nginx(None).ok();
        let tls = kept(&libraries, "tls", &mut plan.left_out, |l| match &nginx {
            Some(bin) => l.nginx_for(bin).map(drop),
            None => Ok(()),
        });
        plan.tls.sweep.variants = cross(&plan.tls.sweep.variants, &tls)?;
        plan.tls.ramp.variants = cross(&plan.tls.ramp.variants, &tls)?;
        let tunnel = kept(&libraries, "tunnel", &mut plan.left_out, |l| {
            let mut one = plan.tunnel.clone();
            one.variants = cross(&plan.tunnel.variants, std::slice::from_ref(l))?;
            crate::tunnel::strongswan::check_libraries(&one)
        });
        plan.tunnel.variants = cross(&plan.tunnel.variants, &tunnel)?;
        plan.libraries = libraries;
        Ok(plan)
    }
}

/// The libraries `check` passes for `layer`; each other goes to `left_out` with the
/// one line saying why.
fn kept(
    libraries: &[Library],
    layer: &str,
    left_out: &mut Vec<(String, String)>,
    check: impl Fn(&Library) -> Result<()>,
) -> Vec<Library> {
    let mut out = Vec::new();
    for l in libraries {
        match check(l) {
            Ok(()) => out.push(l.clone()),
            Err(e) => left_out.push((layer.to_string(), format!("{e:#}"))),
        }
    }
    out
}

/// `cipherbench run`: every layer in turn, then the summary of each.
pub fn command(args: &RunArgs, quiet: bool) -> Result<ExitCode> {
    let plan = args.plan()?;
    interrupt::install();
    super::cleanup::at_start(true);
    let (mut session, outcome) = crate::run::run(&plan, quiet)?;
    finish(&mut session, outcome, |s| {
        if let Some(speed) = &s.record.speed {
            out!("{}", cipherbench_report::text::speed(speed));
        }
        if let Some(results) = &s.record.file {
            out!("\n{}", cipherbench_report::file::text(results));
        }
        if let Some(t) = &s.record.tls {
            out!("{}", cipherbench_report::tls::text(t, s.record.target_gbps));
        }
        if let Some(t) = &s.record.tunnel {
            out!("{}", cipherbench_report::tunnel::text(t));
        }
        // Last: the ladder across the layers, each gain with its interval.
        out!("{}", cipherbench_report::ladder::text(&s.record));
        if s.record.rehearsal {
            out!("rehearsal: {}", cipherbench_report::REHEARSAL);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(preset: Preset) -> RunArgs {
        RunArgs {
            preset,
            results: None,
            target_gbps: None,
            library: LibraryArgs { openssl: None },
            stack: vec![StackArg::Own],
            rehearse: false,
        }
    }

    #[test]
    fn a_rehearsal_keeps_every_part_of_the_plan_and_cuts_its_lengths() {
        let full = args(Preset::Full).plan().unwrap();
        let r = RunArgs {
            rehearse: true,
            ..args(Preset::Full)
        }
        .plan()
        .unwrap();
        assert!(r.rehearsal && !full.rehearsal);
        assert_eq!(r.preset, "full");
        // Every part.
        assert_eq!(r.speed.ciphers, full.speed.ciphers);
        assert_eq!(r.speed.directions, full.speed.directions);
        assert_eq!(r.speed.threads, full.speed.threads);
        assert!(r.speed.check_openssl);
        assert_eq!(r.file.tools, full.file.tools);
        assert_eq!(r.file.caches, full.file.caches);
        assert_eq!(r.file.directions, full.file.directions);
        let names = |p: &RunPlan| {
            p.tls
                .sweep
                .suites
                .iter()
                .map(|s| s.openssl)
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&r), names(&full));
        assert_eq!(r.tls.sweep.cores, full.tls.sweep.cores);
        assert_eq!(r.tls.ramp.sizes, full.tls.ramp.sizes);
        assert_eq!(r.tunnel.transforms, full.tunnel.transforms);
        assert_eq!(r.tunnel.protocols, full.tunnel.protocols);
        // Cut short.
        let max = super::super::preset::REHEARSAL_MAX_SIZE;
        assert_eq!(
            r.speed.sizes,
            [full.speed.sizes[0], *full.speed.sizes.last().unwrap()]
        );
        assert!(r.tls.sweep.sizes.len() > 1 && r.tls.sweep.sizes.iter().all(|&s| s <= max));
        assert!(matches!(r.file.input, crate::file::bench::InputSpec::Generate(n) if n <= max));
        assert!(r.tls.sweep.window < full.tls.sweep.window);
        assert!(r.tunnel.seconds < full.tunnel.seconds && r.tunnel.repeats == 2);
        let total = |p: &RunPlan| {
            p.speed.estimate() + p.file.estimate() + p.tls.estimate() + p.tunnel.estimate()
        };
        assert!(
            total(&r) * 20 < total(&full),
            "{:?} of {:?}",
            total(&r),
            total(&full)
        );
    }

    #[test]
    fn the_main_jobs_quick_run_measures_the_tunnel_over_tcp_only() {
        let quick = args(Preset::Quick).plan().unwrap();
        assert_eq!(quick.tunnel.protocols, vec![Protocol::Tcp]);
        // The layer's own command keeps both at the same preset; the full run too.
        assert_eq!(
            Preset::Quick.tunnel_plan().protocols,
            vec![Protocol::Tcp, Protocol::Udp]
        );
        let full = args(Preset::Full).plan().unwrap();
        assert_eq!(full.tunnel.protocols, vec![Protocol::Tcp, Protocol::Udp]);
    }
}
