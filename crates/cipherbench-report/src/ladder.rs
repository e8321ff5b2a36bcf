//! The ladder: for one cipher family (AES-GCM), the gain from AES-NI at each layer —
//! primitive, file, TLS, tunnel — and how much of the primitive's gain survives each
//! step, with a sentence on where the rest went, from the measured CPU figures.
//!
//! Definitions (METHODOLOGY.md, "The ladder"):
//! - **gain** G = throughput with AES-NI / throughput without (same work, same run);
//! - **survives** = ln G_layer / ln G_primitive: the share of the primitive's speed-up,
//!   on a multiplicative scale, that the layer keeps (100 %: all of it; 0 %: none);
//! - **crypto share** f = (1 − 1/G_layer) / (1 − 1/G_primitive): by Amdahl's law, the
//!   fraction of the layer's time without AES-NI that was the cipher, if nothing but
//!   the cipher sped up.

use cipherbench_model::file::{Cache, SyncMode};
use cipherbench_model::speed::Direction;
use cipherbench_model::tunnel::Protocol;
use cipherbench_model::units::{format_bits_per_sec, format_bytes_per_sec, ByteSize};
use cipherbench_model::variant::{self, VariantRecord};
use cipherbench_model::RunRecord;

/// One rung.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// `primitive`, `file`, `tls`, `tunnel`.
    pub layer: &'static str,
    /// What exactly was compared.
    pub what: String,
    /// The figure with AES-NI, formatted.
    pub accel: String,
    /// The figure without, formatted.
    pub noaesni: String,
    /// accel / noaesni throughput.
    pub gain: f64,
    /// ln(gain) / ln(primitive gain); None for the primitive itself.
    pub survives: Option<f64>,
    /// Amdahl crypto share of the layer's unaccelerated time; None for the primitive.
    pub crypto_share: Option<f64>,
    /// Where the rest went, from the CPU figures.
    pub note: String,
}

/// The whole ladder.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Ladder {
    /// Rungs measured in both variants, bottom first.
    pub steps: Vec<Step>,
    /// Layers left out, and why.
    pub missing: Vec<(&'static str, String)>,
}

/// Builds the ladder from a record. A layer whose accel or noaesni did not take
/// effect has no rung: it is listed as missing with the reason (and without the
/// primitive's rung there is no ladder).
pub fn build(record: &RunRecord) -> Ladder {
    let mut ladder = Ladder::default();
    let primitive = match primitive(record) {
        Ok(p) => p,
        Err(why) => {
            ladder.missing.push(("primitive", why));
            return ladder;
        }
    };
    let g0 = primitive.gain;
    ladder.steps.push(primitive);
    for (layer, step) in [
        ("file", file(record)),
        ("tls", tls(record)),
        ("tunnel", tunnel(record)),
    ] {
        match step {
            Ok(mut s) => {
                if g0 > 1.0 && s.gain > 0.0 {
                    s.survives = Some(survives(s.gain, g0));
                    s.crypto_share = Some(crypto_share(s.gain, g0));
                }
                ladder.steps.push(s);
            }
            Err(why) => ladder.missing.push((layer, why)),
        }
    }
    // strongSwan's rung only where it ran: a reference beside the gateways' tunnel.
    if let Some(step) = strongswan(record) {
        match step {
            Ok(mut s) => {
                if g0 > 1.0 && s.gain > 0.0 {
                    s.survives = Some(survives(s.gain, g0));
                    s.crypto_share = Some(crypto_share(s.gain, g0));
                }
                ladder.steps.push(s);
            }
            Err(why) => ladder.missing.push((STRONGSWAN_RUNG, why)),
        }
    }
    ladder
}

/// ln G / ln G0: the share of the primitive's gain `g0`, on a multiplicative scale,
/// that a layer with gain `g` keeps.
fn survives(g: f64, g0: f64) -> f64 {
    g.ln() / g0.ln()
}

/// Amdahl: the fraction of a layer's unaccelerated time that was the cipher, if the
/// cipher (sped up `g0` times) was all that changed and the layer sped up `g` times.
fn crypto_share(g: f64, g0: f64) -> f64 {
    (1.0 - 1.0 / g) / (1.0 - 1.0 / g0)
}

/// Why a layer's ratio is not a finding, if its accel or noaesni did not take effect:
/// `n/a: noaesni did not take effect (reason)`.
fn not_effective(records: &[VariantRecord]) -> Result<(), String> {
    match variant::ineffective(records, &["accel", "noaesni"]) {
        Some(r) => Err(format!(
            "n/a: {} did not take effect at this layer ({})",
            r.name,
            r.explanation()
        )),
        None => Ok(()),
    }
}

fn primitive(record: &RunRecord) -> Result<Step, String> {
    let missing = || "aes-128-gcm was not measured with and without AES-NI".to_string();
    let s = record.speed.as_ref().ok_or_else(missing)?;
    let size = s
        .points
        .iter()
        .filter(|p| {
            p.cipher == "aes-128-gcm" && p.threads == 1 && p.direction == Direction::Encrypt
        })
        .map(|p| p.size_bytes)
        .max()
        .ok_or_else(missing)?;
    let a = s
        .point("aes-128-gcm", "accel", Direction::Encrypt, size, 1)
        .ok_or_else(missing)?;
    let n = s
        .point("aes-128-gcm", "noaesni", Direction::Encrypt, size, 1)
        .ok_or_else(missing)?;
    not_effective(&s.variants)?;
    let (am, nm) = (
        a.throughput_bytes_per_sec.median,
        n.throughput_bytes_per_sec.median,
    );
    if nm <= 0.0 {
        return Err("no throughput without AES-NI".into());
    }
    Ok(Step {
        layer: "primitive",
        what: format!("aes-128-gcm, {} buffers, encrypt, 1 core", ByteSize(size)),
        accel: format_bytes_per_sec(am),
        noaesni: format_bytes_per_sec(nm),
        gain: am / nm,
        survives: None,
        crypto_share: None,
        note: "The cipher alone, one operation per buffer: the most AES-NI can buy.".into(),
    })
}

fn file(record: &RunRecord) -> Result<Step, String> {
    let f = record.file.as_ref().ok_or("the file layer did not run")?;
    let mut best = None;
    for cache in [Cache::Warm, Cache::Cold] {
        for sync in [SyncMode::Fsync, SyncMode::None] {
            let a = f.point("cipherbench", "accel", Direction::Encrypt, cache, sync);
            let n = f.point("cipherbench", "noaesni", Direction::Encrypt, cache, sync);
            if let (Some(a), Some(n)) = (a, n) {
                best.get_or_insert((a, n, cache, sync));
            }
        }
    }
    let (a, n, cache, sync) =
        best.ok_or("cipherbench seal was not measured with and without AES-NI")?;
    not_effective(&f.variants)?;
    let (am, nm) = (
        a.throughput_bytes_per_sec.median,
        n.throughput_bytes_per_sec.median,
    );
    if nm <= 0.0 {
        return Err("no throughput without AES-NI".into());
    }
    let cpu = a.user_seconds.median + a.system_seconds.median;
    let wall = a.elapsed_seconds.median;
    Ok(Step {
        layer: "file",
        what: format!(
            "cipherbench seal (AES-256-GCM), {} file, {} cache, {}",
            ByteSize(a.bytes),
            cache.as_str(),
            if sync == SyncMode::Fsync { "to disk (fsync)" } else { "no fsync" }
        ),
        accel: seconds(a.elapsed_seconds.median),
        noaesni: seconds(n.elapsed_seconds.median),
        gain: am / nm,
        survives: None,
        crypto_share: None,
        note: format!(
            "With AES-NI one run took {wall:.2} s of wall time and {:.2} s of CPU, {:.2} s of it in the kernel (reading, writing, syncing): the disk path, not the cipher, is most of what remains.",
            cpu, a.system_seconds.median
        ),
    })
}

fn tls(record: &RunRecord) -> Result<Step, String> {
    let sweep = record
        .tls
        .as_ref()
        .and_then(|t| t.sweep.as_ref())
        .ok_or("the TLS sweep did not run")?;
    let suite = "AES128-GCM-SHA256";
    let pair = sweep
        .points
        .iter()
        .filter(|p| p.suite == suite && p.variant == "accel" && p.valid)
        .filter_map(|a| {
            sweep
                .point(suite, a.size_bytes, a.cores, "noaesni")
                .filter(|n| n.valid)
                .map(|n| (a, n))
        })
        .max_by_key(|(a, _)| (std::cmp::Reverse(a.cores), a.size_bytes))
        .ok_or("AES128-GCM-SHA256 was not swept with and without AES-NI")?;
    let (a, n) = pair;
    let servers: Vec<VariantRecord> = record
        .tls
        .iter()
        .flat_map(|t| &t.servers)
        .filter(|s| s.kind == "nginx" && s.suite == suite)
        .map(|s| s.variant.clone())
        .collect();
    not_effective(&servers)?;
    if n.throughput_bytes_per_sec <= 0.0 {
        return Err("no throughput without AES-NI".into());
    }
    let cpu = |p: &cipherbench_model::tls::SweepPoint| {
        p.server_cpu
            .as_ref()
            .map(|c| format!("{:.0} %", c.total * 100.0))
            .unwrap_or_else(|| "unmeasured".into())
    };
    Ok(Step {
        layer: "tls",
        what: format!(
            "nginx, {suite}, {} files, {} core{}",
            ByteSize(a.size_bytes),
            a.cores,
            if a.cores == 1 { "" } else { "s" }
        ),
        accel: format_bits_per_sec(a.throughput_bytes_per_sec),
        noaesni: format_bits_per_sec(n.throughput_bytes_per_sec),
        gain: a.throughput_bytes_per_sec / n.throughput_bytes_per_sec,
        survives: None,
        crypto_share: None,
        note: format!(
            "nginx's cores were {} busy with AES-NI and {} without: with AES-NI the rest of the time goes to copying the file through user space into TLS records (no kTLS here), the handshake and TCP.",
            cpu(a),
            cpu(n)
        ),
    })
}

fn tunnel(record: &RunRecord) -> Result<Step, String> {
    let t = record
        .tunnel
        .as_ref()
        .ok_or("the tunnel layer did not run")?;
    let transform = "aes128-gcm";
    let a = t.point(transform, "accel", Protocol::Tcp);
    let n = t.point(transform, "noaesni", Protocol::Tcp);
    let (a, n) = a
        .zip(n)
        .ok_or("aes128-gcm was not measured through the tunnel with and without AES-NI")?;
    not_effective(&t.variants)?;
    let (am, nm) = (
        a.throughput_bits_per_sec.median,
        n.throughput_bits_per_sec.median,
    );
    if nm <= 0.0 {
        return Err("no throughput without AES-NI".into());
    }
    let cpu = |p: &cipherbench_model::tunnel::TunnelPoint| {
        p.runs
            .last()
            .map(|r| {
                format!(
                    "{:.2} and {:.2} cores",
                    r.sender.cpu_cores_used, r.receiver.cpu_cores_used
                )
            })
            .unwrap_or_else(|| "unmeasured".into())
    };
    let bottleneck = |p: &cipherbench_model::tunnel::TunnelPoint| {
        p.runs
            .last()
            .map(|r| r.saturation.side.replace('_', " "))
            .unwrap_or_else(|| "unknown".into())
    };
    Ok(Step {
        layer: "tunnel",
        what: format!(
            "iperf3 TCP{} through the {transform} ESP tunnel, variant on {} gateway(s)",
            t.config
                .length_bytes
                .map(|l| format!(" (-l {l})"))
                .unwrap_or_default(),
            t.config.variant_side.as_str()
        ),
        accel: format_bits_per_sec(am / 8.0),
        noaesni: format_bits_per_sec(nm / 8.0),
        gain: am / nm,
        survives: None,
        crypto_share: None,
        note: format!(
            "The sending and receiving gateways used {} with AES-NI ({} ran out first) and {} without ({}): with AES-NI most of the time goes to moving packets through TUN, UDP and the kernel's TCP, not to the cipher.",
            cpu(a),
            bottleneck(a),
            cpu(n),
            bottleneck(n)
        ),
    })
}

/// The ladder's name for strongSwan's rung.
pub const STRONGSWAN_RUNG: &str = "tunnel (strongSwan)";

/// strongSwan's aes128-gcm through its openssl backend with and without AES-NI
/// (None if strongSwan did not run).
fn strongswan(record: &RunRecord) -> Option<Result<Step, String>> {
    let s = record.tunnel.as_ref()?.strongswan.as_ref()?;
    let transform = "aes128-gcm";
    let get = |v: &str| crate::strongswan::point(s, "openssl", transform, v, Protocol::Tcp);
    let Some((a, n)) = get("accel").zip(get("noaesni")) else {
        return Some(Err(
            "strongSwan's openssl backend did not measure aes128-gcm with and without AES-NI"
                .into(),
        ));
    };
    if let Err(e) = not_effective(&s.variants) {
        return Some(Err(e));
    }
    let (am, nm) = (
        a.point.throughput_bits_per_sec.median,
        n.point.throughput_bits_per_sec.median,
    );
    if nm <= 0.0 {
        return Some(Err("no throughput through strongSwan without AES-NI".into()));
    }
    let cpu = |p: &cipherbench_model::tunnel::StrongswanPoint| {
        p.point
            .runs
            .last()
            .map(|r| {
                format!(
                    "{:.2} and {:.2} cores ({} ran out first)",
                    r.sender.cpu_cores_used,
                    r.receiver.cpu_cores_used,
                    r.saturation.side.replace('_', " ")
                )
            })
            .unwrap_or_else(|| "unmeasured".into())
    };
    Some(Ok(Step {
        layer: STRONGSWAN_RUNG,
        what: format!(
            "iperf3 TCP through strongSwan's {transform} ESP (charon, kernel-libipsec, openssl backend): a userspace reference stack, not kernel IPsec"
        ),
        accel: format_bits_per_sec(am / 8.0),
        noaesni: format_bits_per_sec(nm / 8.0),
        gain: am / nm,
        survives: None,
        crypto_share: None,
        note: format!(
            "The two charons used {} with AES-NI and {} without: libipsec moves one packet per TUN read and write and per socket call.",
            cpu(a),
            cpu(n)
        ),
    }))
}

/// Seconds with three significant digits: `7.31 s`, `0.0164 s`.
fn seconds(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} s")
    } else if v >= 10.0 {
        format!("{v:.1} s")
    } else if v >= 1.0 {
        format!("{v:.2} s")
    } else {
        format!(
            "{:.1$} s",
            v,
            (2 - v.log10().floor() as i32).max(2) as usize
        )
    }
}

/// Percent with no decimals.
pub(crate) fn pct(v: f64) -> String {
    format!("{:.0} %", v * 100.0)
}

/// One paragraph per rung, for terminals and Markdown.
pub fn sentences(ladder: &Ladder) -> Vec<String> {
    ladder
        .steps
        .iter()
        .map(|s| match (s.survives, s.crypto_share) {
            (Some(sv), Some(f)) => format!(
                "{}: {:.1}x ({} vs {}); keeps {} of the primitive's gain; without AES-NI the cipher was about {} of this layer's time. {}",
                s.layer,
                s.gain,
                s.accel,
                s.noaesni,
                pct(sv),
                pct(f.clamp(0.0, 1.0)),
                s.note
            ),
            _ => format!("{}: {:.1}x ({} vs {}). {}", s.layer, s.gain, s.accel, s.noaesni, s.note),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amdahl_share_and_log_survival() {
        let g0 = 20.0;
        // A layer that is all cipher keeps the whole gain; one that did not speed up
        // keeps none of it.
        assert_eq!(survives(g0, g0), 1.0);
        assert_eq!(crypto_share(g0, g0), 1.0);
        assert_eq!(survives(1.0, g0), 0.0);
        assert_eq!(crypto_share(1.0, g0), 0.0);
        // Half of the unaccelerated time in the cipher: 1 / (0.5 + 0.5 / 20) = 1.905x.
        let half = 1.0 / (0.5 + 0.5 / g0);
        assert!((crypto_share(half, g0) - 0.5).abs() < 1e-12);
        assert!((survives(half, g0) - 0.215).abs() < 0.001);
    }

    #[test]
    fn the_fixture_run_has_every_rung_with_its_shares() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/run-quick.json"
        ))
        .unwrap();
        let record = RunRecord::from_json(&text).unwrap();
        let ladder = build(&record);
        let layers: Vec<&str> = ladder.steps.iter().map(|s| s.layer).collect();
        assert_eq!(
            layers,
            ["primitive", "file", "tls", "tunnel"],
            "{:?}",
            ladder.missing
        );
        let g0 = ladder.steps[0].gain;
        for s in &ladder.steps[1..] {
            assert_eq!(s.survives, Some(survives(s.gain, g0)));
            assert!(s.gain > 1.0 && s.gain < g0, "{s:?}");
        }
        // nginx's CPU is quoted as the share of its cores, as the TLS table has it.
        let sweep = record.tls.as_ref().unwrap().sweep.as_ref().unwrap();
        let a = sweep
            .point("AES128-GCM-SHA256", 16 << 20, 1, "accel")
            .unwrap();
        let busy = format!(
            "were {:.0} % busy",
            a.server_cpu.as_ref().unwrap().total * 100.0
        );
        assert!(
            ladder.steps[2].note.contains(&busy),
            "{}",
            ladder.steps[2].note
        );
    }
}
