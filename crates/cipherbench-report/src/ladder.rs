//! The ladder: for one cipher family (AES-GCM), the gain from AES-NI at each layer —
//! primitive, file, TLS, tunnel — and how much of the primitive's gain survives each
//! step, with a sentence on where the rest went, from the measured CPU figures.
//!
//! Definitions (report.html's methodology, "The ladder"; intervals: METHODOLOGY.md,
//! "Ratios and their intervals"):
//! - **gain** G = throughput with AES-NI / throughput without (same work, same run);
//! - **survives** = ln G_layer / ln G_primitive: the share of the primitive's speed-up,
//!   on a multiplicative scale, that the layer keeps (100 %: all of it; 0 %: none);
//! - **crypto share** f = (1 − 1/G_layer) / (1 − 1/G_primitive): by Amdahl's law, the
//!   fraction of the layer's time without AES-NI that was the cipher, if nothing but
//!   the cipher sped up.
//!
//! With several libraries in one run (`--openssl system,DIR`), the **library step**
//! is its own row per layer: accel on a later library over accel on the baseline
//! (the first), same work, same run ([`library_steps`]).

use cipherbench_model::file::{Cache, FilePoint, FileResults, SyncMode};
use cipherbench_model::interval::{
    bootstrap_figures, Centre, Estimate, Pairing, RatioInterval, Rounds, DEFAULT_SEED, MIN_ROUNDS,
};
use cipherbench_model::speed::reference::reference;
use cipherbench_model::speed::Direction;
use cipherbench_model::speed::{SpeedPoint, SpeedResults};
use cipherbench_model::tls::{SweepPoint, SweepResults};
use cipherbench_model::tunnel::Protocol;
use cipherbench_model::tunnel::{TunnelPoint, TunnelResults};
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
    /// The rounds behind the gain (accel's over noaesni's), for intervals here and
    /// in `compare`; None where the layer kept none.
    pub rounds: Option<Rounds>,
    /// The gain's 95 % interval over those rounds; None with fewer than 3 a side.
    pub gain_interval: Option<RatioInterval>,
    /// The 95 % interval of `survives`, the layer's and the primitive's rounds
    /// resampled together.
    pub survives_interval: Option<Estimate>,
    /// The layer's own ceiling on this machine, measured in the same run, and the
    /// share of it the figure with AES-NI reaches; the reason where there is none.
    pub ceiling: Result<Ceiling, String>,
    /// Why the figure with AES-NI was set by the instrument (the load generator,
    /// iperf3), not the system under test: the gain, what it keeps and its cipher
    /// share are then lower bounds ([`instrument_bound`]). None: a measured gain.
    pub lower_bound: Option<String>,
}

/// What a layer could do at all on this machine without the cipher (or, for the
/// primitive, what the cipher's implementers published for this core): the
/// ladder's "of ceiling" column (METHODOLOGY.md, "Ceilings").
#[derive(Debug, Clone, PartialEq)]
pub struct Ceiling {
    /// What the ceiling is, as "of ..." completes it: `cp`, `the null transform`.
    pub of: String,
    /// The ceiling's own figure, formatted.
    pub figure: String,
    /// The figure with AES-NI over the ceiling's (for the primitive, the published
    /// cycles per byte over ours).
    pub share: f64,
}

impl Ceiling {
    /// `81 % of cp (1.20 GB/s)`.
    pub fn text(&self) -> String {
        format!("{} of {} ({})", pct(self.share), self.of, self.figure)
    }
}

/// The "of ceiling" cell: the share, or a dash and why.
pub fn ceiling_text(s: &Step) -> String {
    match &s.ceiling {
        Ok(c) => c.text(),
        Err(why) => format!("– ({why})"),
    }
}

/// How a rung's reason for being left out begins when the instrument, not the
/// system under test, set the figure without AES-NI (the gain would be an upper
/// bound) or both figures (it would bound nothing).
pub const INSTRUMENT_LEFT_OUT: &str = "left out, the instrument set a figure:";

/// What the instrument limits of a rung's two sides (each a reason, from
/// [`SweepPoint::instrument_limit`] or [`TunnelPoint::instrument_limit`]) make of
/// its gain, accel over noaesni. An instrument-limited side's figure is a lower
/// bound on the system's: with accel's alone the gain is a lower bound
/// (`Ok(Some(why))`); with noaesni's alone it is an upper bound, and with both it
/// bounds nothing: the rung is left out, saying why (`Err`).
pub fn instrument_bound(
    accel: Option<String>,
    noaesni: Option<String>,
) -> Result<Option<String>, String> {
    match (accel, noaesni) {
        (a, None) => Ok(a),
        (None, Some(n)) => Err(format!(
            "{INSTRUMENT_LEFT_OUT} without AES-NI ({n}), so the gain would only be an upper bound"
        )),
        (Some(a), Some(n)) => Err(format!(
            "{INSTRUMENT_LEFT_OUT} with AES-NI ({a}) and without ({n}), so their ratio bounds nothing"
        )),
    }
}

/// The whole ladder.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Ladder {
    /// Rungs measured in both variants, bottom first.
    pub steps: Vec<Step>,
    /// Layers left out, and why.
    pub missing: Vec<(&'static str, String)>,
    /// The library steps, when the run measured several libraries: per later
    /// library, bottom first.
    pub libraries: Vec<LibraryStep>,
    /// (layer, why) a library was left out of a layer (a program of that layer not
    /// built by the project cannot load it: Debian's nginx and an OpenSSL 4).
    pub libraries_left_out: Vec<(String, String)>,
}

/// One library step: at one layer, accel on a later library of the run over accel on
/// the baseline library.
#[derive(Debug, Clone, PartialEq)]
pub struct LibraryStep {
    /// `primitive`, `file`, `tls`, `tunnel`.
    pub layer: &'static str,
    /// What exactly was compared.
    pub what: String,
    /// The later library's tag (`3.6.3`): its variants are `accel@TAG`.
    pub tag: String,
    /// The baseline library, in a phrase (`OpenSSL 3.0.19 27 Jan 2026 (system)`).
    pub baseline: String,
    /// The later library, in a phrase.
    pub library: String,
    /// The figure on the baseline library, formatted.
    pub baseline_figure: String,
    /// The figure on the later library, formatted.
    pub library_figure: String,
    /// Later library / baseline, throughput.
    pub gain: f64,
    /// ln(gain) / ln(the primitive's library gain): how much of the library's gain
    /// at the primitive the layer keeps; None for the primitive itself, or when the
    /// libraries were within 5 % of each other there.
    pub survives: Option<f64>,
    /// The rounds behind the gain, for `compare`.
    pub rounds: Option<Rounds>,
    /// The gain's 95 % interval (later library's rounds over the baseline's).
    pub gain_interval: Option<RatioInterval>,
    /// The 95 % interval of `survives`, resampled with the primitive's rounds.
    pub survives_interval: Option<Estimate>,
}

/// Builds the ladder from a record. A layer whose accel or noaesni did not take
/// effect has no rung: it is listed as missing with the reason (and without the
/// primitive's rung there is no ladder).
pub fn build(record: &RunRecord) -> Ladder {
    let mut ladder = Ladder {
        libraries: library_steps(record),
        libraries_left_out: record
            .warnings
            .iter()
            .filter(|w| w.kind == "library_left_out")
            .map(|w| (w.layer.clone(), w.message.clone()))
            .collect(),
        ..Ladder::default()
    };
    let primitive = match primitive(record) {
        Ok(p) => p,
        Err(why) => {
            ladder.missing.push(("primitive", why));
            return ladder;
        }
    };
    let g0 = primitive.gain;
    ladder.steps.push(primitive);
    let mut rungs = vec![
        ("file", file(record)),
        ("tls", tls(record)),
        ("tunnel", tunnel(record)),
    ];
    // strongSwan's rung only where it ran: a reference beside the gateways' tunnel.
    if let Some(step) = strongswan(record) {
        rungs.push((STRONGSWAN_RUNG, step));
    }
    for (layer, step) in rungs {
        match step {
            Ok(mut s) => {
                if g0 > 1.0 && s.gain > 0.0 {
                    s.survives = Some(survives(s.gain, g0));
                    s.crypto_share = Some(crypto_share(s.gain, g0));
                    let p = &ladder.steps[0];
                    s.survives_interval =
                        share_interval(s.rounds.as_ref(), s.gain, p.rounds.as_ref(), g0);
                }
                ladder.steps.push(s);
            }
            Err(why) => ladder.missing.push((layer, why)),
        }
    }
    ladder
}

/// The 95 % interval of a gain `gain` from its rounds (moved to `gain` where the
/// figure shown is computed from the same rounds a little differently).
fn gain_interval(r: Option<&Rounds>, gain: f64) -> Option<RatioInterval> {
    let r = r?;
    let e = bootstrap_figures(&[r], |v| v[0], DEFAULT_SEED)?;
    Some(
        RatioInterval::from_estimate(
            e,
            r.pairing,
            (r.num.len(), r.den.as_ref().map_or(0, Vec::len)),
        )
        .scaled_to(gain),
    )
}

/// The 95 % interval of ln(g) / ln(g0), the layer's and the primitive's rounds
/// resampled together (each resampled gain scaled as its shown gain is, so the
/// point is the share shown).
fn share_interval(
    layer: Option<&Rounds>,
    g: f64,
    prim: Option<&Rounds>,
    g0: f64,
) -> Option<Estimate> {
    let (l, p) = (layer?, prim?);
    let (kl, kp) = (g / l.value(), g0 / p.value());
    if !(kl.is_finite() && kp.is_finite()) {
        return None;
    }
    bootstrap_figures(
        &[l, p],
        |v| (v[0] * kl).ln() / (v[1] * kp).ln(),
        DEFAULT_SEED,
    )
}

/// Throughput of each sample of a speed point.
pub(crate) fn speed_rates(p: &SpeedPoint) -> Vec<f64> {
    p.samples
        .iter()
        .map(cipherbench_model::speed::SpeedSample::throughput_bytes_per_sec)
        .collect()
}

/// Throughput of each run of a file point (its size over the run's wall time).
pub(crate) fn file_rates(p: &FilePoint) -> Vec<f64> {
    p.samples
        .iter()
        .map(|s| {
            if s.elapsed_ns == 0 {
                0.0
            } else {
                p.bytes as f64 * 1e9 / s.elapsed_ns as f64
            }
        })
        .collect()
}

/// The rounds behind a tunnel point's throughput: its runs' server-side rates when
/// it has at least 3 runs (its figure is their median), else every run's
/// per-interval rates pooled (its figure is then about their mean): what run.json
/// keeps today.
pub(crate) fn tunnel_samples(p: &TunnelPoint) -> (Vec<f64>, Centre) {
    if p.runs.len() >= MIN_ROUNDS {
        (
            p.runs
                .iter()
                .map(|r| r.iperf.receiver_bits_per_sec)
                .collect(),
            Centre::Median,
        )
    } else {
        (
            p.runs
                .iter()
                .flat_map(|r| r.iperf.interval_bits_per_sec.iter().copied())
                .collect(),
            Centre::Mean,
        )
    }
}

/// The rounds of a gain between two speed points (samples of different worker
/// processes: independent).
fn speed_rounds(a: &SpeedPoint, b: &SpeedPoint) -> Rounds {
    Rounds::ratio(
        speed_rates(a),
        speed_rates(b),
        Pairing::Independent,
        Centre::Median,
    )
}

/// The rounds of a gain between two file points: paired when both have as many
/// runs (one pass of the file layer runs every scenario once).
fn file_rounds(a: &FilePoint, b: &FilePoint) -> Rounds {
    let pairing = if a.samples.len() == b.samples.len() {
        Pairing::Paired
    } else {
        Pairing::Independent
    };
    Rounds::ratio(file_rates(a), file_rates(b), pairing, Centre::Median)
}

/// The rounds of a gain between two sweep points, as the sweep's own ratios take
/// them ([`cipherbench_model::tls::gain_rounds`]: paired where measured in turn).
fn tls_rounds(a: &SweepPoint, b: &SweepPoint) -> Rounds {
    cipherbench_model::tls::gain_rounds(a, b)
}

/// The rounds of a gain between two tunnel points ([`tunnel_samples`]; runs only
/// when both have enough, paired round by round where the variants were measured
/// in turn, as the tunnel's own table pairs them).
fn tunnel_rounds(a: &TunnelPoint, b: &TunnelPoint) -> Rounds {
    let ((ra, ca), (rb, cb)) = (tunnel_samples(a), tunnel_samples(b));
    if let (Centre::Median, Centre::Median, Some((pa, pb))) = (ca, cb, a.paired_rates(b)) {
        Rounds::ratio(pa, pb, Pairing::Paired, Centre::Median)
    } else if ca == cb {
        Rounds::ratio(ra, rb, Pairing::Independent, ca)
    } else {
        let pooled = |p: &TunnelPoint| {
            p.runs
                .iter()
                .flat_map(|r| r.iperf.interval_bits_per_sec.iter().copied())
                .collect()
        };
        Rounds::ratio(pooled(a), pooled(b), Pairing::Independent, Centre::Mean)
    }
}

/// The library steps of a record: for each library after the first, at each layer
/// measured on both, accel on it (`accel@TAG`) over accel on the first. Pure.
pub fn library_steps(record: &RunRecord) -> Vec<LibraryStep> {
    let env = &record.environment;
    let Some(base) = env.libraries.first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for lib in env.libraries.iter().skip(1) {
        let Some(tag) = &lib.tag else {
            continue;
        };
        let top = format!("accel@{tag}");
        let mut rows: Vec<(&'static str, String, String, String, f64, Rounds)> = Vec::new();
        if let Some((b, a, size)) = record
            .speed
            .as_ref()
            .and_then(|s| primitive_points(s, &top, "accel"))
        {
            let (bm, am) = (
                b.throughput_bytes_per_sec.median,
                a.throughput_bytes_per_sec.median,
            );
            rows.push((
                "primitive",
                format!("aes-128-gcm, {} buffers, encrypt, 1 core", ByteSize(size)),
                format_bytes_per_sec(am),
                format_bytes_per_sec(bm),
                bm / am,
                speed_rounds(b, a),
            ));
        }
        if let Some((b, a, cache, sync)) = record
            .file
            .as_ref()
            .and_then(|f| file_points(f, &top, "accel"))
        {
            rows.push((
                "file",
                file_what(b, cache, sync),
                seconds(a.elapsed_seconds.median),
                seconds(b.elapsed_seconds.median),
                b.throughput_bytes_per_sec.median / a.throughput_bytes_per_sec.median,
                file_rounds(b, a),
            ));
        }
        if let Some((b, a)) = record
            .tls
            .as_ref()
            .and_then(|t| t.sweep.as_ref())
            .and_then(|s| tls_points(s, &top, "accel"))
        {
            rows.push((
                "tls",
                tls_what(a),
                format_bits_per_sec(a.throughput_bytes_per_sec),
                format_bits_per_sec(b.throughput_bytes_per_sec),
                b.throughput_bytes_per_sec / a.throughput_bytes_per_sec,
                tls_rounds(b, a),
            ));
        }
        if let Some((b, a)) = record
            .tunnel
            .as_ref()
            .and_then(|t| tunnel_points(t, &top, "accel"))
        {
            rows.push((
                "tunnel",
                tunnel_what(record.tunnel.as_ref()),
                format_bits_per_sec(a.throughput_bits_per_sec.median / 8.0),
                format_bits_per_sec(b.throughput_bits_per_sec.median / 8.0),
                b.throughput_bits_per_sec.median / a.throughput_bits_per_sec.median,
                tunnel_rounds(b, a),
            ));
        }
        let g0 = rows
            .iter()
            .find(|r| r.0 == "primitive")
            .map(|r| (r.4, r.5.clone()))
            .filter(|(g, _)| g.is_finite() && (g - 1.0).abs() > 0.05);
        for (layer, what, baseline_figure, library_figure, gain, rounds) in rows {
            if !(gain.is_finite() && gain > 0.0) {
                continue;
            }
            let share = g0.as_ref().filter(|_| layer != "primitive");
            out.push(LibraryStep {
                layer,
                what,
                tag: tag.clone(),
                baseline: base.phrase(),
                library: lib.phrase(),
                baseline_figure,
                library_figure,
                gain,
                survives: share.map(|(g0, _)| survives(gain, *g0)),
                gain_interval: gain_interval(Some(&rounds), gain),
                survives_interval: share
                    .and_then(|(g0, p)| share_interval(Some(&rounds), gain, Some(p), *g0)),
                rounds: Some(rounds),
            });
        }
    }
    out
}

/// The single-thread AES-128-GCM encryption points of variants `a` and `b` at the
/// largest size measured.
fn primitive_points<'a>(
    s: &'a SpeedResults,
    a: &str,
    b: &str,
) -> Option<(&'a SpeedPoint, &'a SpeedPoint, u64)> {
    let size = s
        .points
        .iter()
        .filter(|p| {
            p.cipher == "aes-128-gcm" && p.threads == 1 && p.direction == Direction::Encrypt
        })
        .map(|p| p.size_bytes)
        .max()?;
    let pa = s.point("aes-128-gcm", a, Direction::Encrypt, size, 1)?;
    let pb = s.point("aes-128-gcm", b, Direction::Encrypt, size, 1)?;
    (pb.throughput_bytes_per_sec.median > 0.0).then_some((pa, pb, size))
}

/// cipherbench seal's encryption points of variants `a` and `b`, at the first cache
/// state and durability mode both have (warm and fsync first).
fn file_points<'a>(
    f: &'a FileResults,
    a: &str,
    b: &str,
) -> Option<(&'a FilePoint, &'a FilePoint, Cache, SyncMode)> {
    for cache in [Cache::Warm, Cache::Cold] {
        for sync in [SyncMode::Fsync, SyncMode::None] {
            let pa = f.point("cipherbench", a, Direction::Encrypt, cache, sync);
            let pb = f.point("cipherbench", b, Direction::Encrypt, cache, sync);
            if let (Some(pa), Some(pb)) = (pa, pb) {
                if pb.throughput_bytes_per_sec.median > 0.0 {
                    return Some((pa, pb, cache, sync));
                }
            }
        }
    }
    None
}

fn file_what(p: &FilePoint, cache: Cache, sync: SyncMode) -> String {
    format!(
        "cipherbench seal (AES-256-GCM), {} file, {} cache, {}",
        ByteSize(p.bytes),
        cache.as_str(),
        if sync == SyncMode::Fsync {
            "to disk (fsync)"
        } else {
            "no fsync"
        }
    )
}

/// The AES128-GCM-SHA256 sweep points of variants `a` and `b`, both valid, at the
/// fewest cores and then the largest file; none from a sweep at a fixed rate, whose
/// throughputs are the rate by construction.
fn tls_points<'a>(
    sweep: &'a SweepResults,
    a: &str,
    b: &str,
) -> Option<(&'a SweepPoint, &'a SweepPoint)> {
    if sweep.config.open_loop_rate.is_some() {
        return None;
    }
    let suite = "AES128-GCM-SHA256";
    sweep
        .points
        .iter()
        .filter(|p| p.suite == suite && p.variant == a && p.valid)
        .filter_map(|pa| {
            sweep
                .point(suite, pa.size_bytes, pa.cores, b)
                .filter(|pb| pb.valid && pb.throughput_bytes_per_sec > 0.0)
                .map(|pb| (pa, pb))
        })
        .max_by_key(|(pa, _)| (std::cmp::Reverse(pa.cores), pa.size_bytes))
}

fn tls_what(p: &SweepPoint) -> String {
    format!(
        "nginx, AES128-GCM-SHA256, {} files, {} core{}",
        ByteSize(p.size_bytes),
        p.cores,
        if p.cores == 1 { "" } else { "s" }
    )
}

/// The aes128-gcm TCP tunnel points of variants `a` and `b`.
fn tunnel_points<'a>(
    t: &'a TunnelResults,
    a: &str,
    b: &str,
) -> Option<(&'a TunnelPoint, &'a TunnelPoint)> {
    let pa = t.point("aes128-gcm", a, Protocol::Tcp)?;
    let pb = t.point("aes128-gcm", b, Protocol::Tcp)?;
    (pb.throughput_bits_per_sec.median > 0.0).then_some((pa, pb))
}

fn tunnel_what(tunnel: Option<&TunnelResults>) -> String {
    format!(
        "iperf3 TCP{} through the aes128-gcm ESP tunnel, variant on {} gateway(s)",
        tunnel
            .and_then(|t| t.iperf_length(Protocol::Tcp))
            .map(|l| format!(" (-l {l})"))
            .unwrap_or_default(),
        tunnel.map_or("both", |t| t.config.variant_side.as_str())
    )
}

/// The step with its gain's interval from its rounds.
fn with_gain_interval(mut s: Step) -> Step {
    s.gain_interval = gain_interval(s.rounds.as_ref(), s.gain);
    s
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
    let (a, n, size) = primitive_points(s, "accel", "noaesni").ok_or_else(missing)?;
    not_effective(&s.variants)?;
    let (am, nm) = (
        a.throughput_bytes_per_sec.median,
        n.throughput_bytes_per_sec.median,
    );
    if nm <= 0.0 {
        return Err("no throughput without AES-NI".into());
    }
    Ok(with_gain_interval(Step {
        layer: "primitive",
        what: format!("aes-128-gcm, {} buffers, encrypt, 1 core", ByteSize(size)),
        accel: format_bytes_per_sec(am),
        noaesni: format_bytes_per_sec(nm),
        gain: am / nm,
        survives: None,
        crypto_share: None,
        rounds: Some(speed_rounds(a, n)),
        gain_interval: None,
        survives_interval: None,
        lower_bound: None,
        ceiling: primitive_ceiling(s, a),
        note: "The cipher alone, one operation per buffer: the most AES-NI can buy.".into(),
    }))
}

/// The primitive's ceiling: OpenSSL's published cycles per byte for AES-128-GCM on
/// this microarchitecture over ours at the clock measured in the run.
fn primitive_ceiling(s: &SpeedResults, a: &SpeedPoint) -> Result<Ceiling, String> {
    let clock = s
        .clock
        .as_ref()
        .ok_or("the core's clock was not measured")?;
    let cycles = a
        .cycles_per_byte(clock.hz())
        .ok_or("no CPU time in the samples")?;
    let ours = crate::cycles::format(cycles);
    let published = clock
        .microarchitecture
        .as_deref()
        .and_then(|m| reference("aes-128-gcm", true, m))
        .ok_or_else(|| format!("{ours} cycles per byte; nothing published for this CPU"))?;
    Ok(Ceiling {
        of: format!("OpenSSL's figure for {}", published.microarchitecture),
        figure: format!(
            "{} cycles per byte against our {ours}",
            crate::cycles::format(published.cycles_per_byte)
        ),
        share: published.cycles_per_byte / cycles,
    })
}

fn file(record: &RunRecord) -> Result<Step, String> {
    let f = record.file.as_ref().ok_or("the file layer did not run")?;
    let (a, n, cache, sync) = file_points(f, "accel", "noaesni")
        .ok_or("cipherbench seal was not measured with and without AES-NI")?;
    not_effective(&f.variants)?;
    let (am, nm) = (
        a.throughput_bytes_per_sec.median,
        n.throughput_bytes_per_sec.median,
    );
    let cpu = a.user_seconds.median + a.system_seconds.median;
    let wall = a.elapsed_seconds.median;
    Ok(with_gain_interval(Step {
        layer: "file",
        what: file_what(a, cache, sync),
        accel: seconds(a.elapsed_seconds.median),
        noaesni: seconds(n.elapsed_seconds.median),
        gain: am / nm,
        survives: None,
        crypto_share: None,
        rounds: Some(file_rounds(a, n)),
        gain_interval: None,
        survives_interval: None,
        lower_bound: None,
        ceiling: crate::file::vs_cp(f, a)
            .map(|share| Ceiling {
                of: "cp".into(),
                figure: f
                    .point("cp", "accel", a.direction, a.cache, a.sync)
                    .map(|cp| format_bytes_per_sec(cp.throughput_bytes_per_sec.median))
                    .unwrap_or_default(),
                share,
            })
            .ok_or_else(|| "cp was not measured in the same cache state and mode".to_string()),
        note: format!(
            "With AES-NI one run took {wall:.2} s of wall time and {:.2} s of CPU, {:.2} s of it in the kernel (reading, writing, syncing): the disk path, not the cipher, is most of what remains.",
            cpu, a.system_seconds.median
        ),
    }))
}

fn tls(record: &RunRecord) -> Result<Step, String> {
    let sweep = record
        .tls
        .as_ref()
        .and_then(|t| t.sweep.as_ref())
        .ok_or("the TLS sweep did not run")?;
    let suite = "AES128-GCM-SHA256";
    if let Some(rate) = sweep.config.open_loop_rate {
        return Err(format!(
            "the TLS sweep ran at a fixed rate ({rate} req/s, --rate): its throughput is the rate by construction, so it measures no AES-NI gain (its nginx CPU is compared instead)"
        ));
    }
    let (a, n) = tls_points(sweep, "accel", "noaesni").ok_or_else(|| {
        // Swept, but a point is not usable: say which and why.
        let invalid: Vec<String> = sweep
            .points
            .iter()
            .filter(|p| p.suite == suite && (p.variant == "accel" || p.variant == "noaesni"))
            .filter(|p| !p.valid)
            .map(|p| {
                format!(
                    "{} {} is not valid ({})",
                    p.variant,
                    ByteSize(p.size_bytes),
                    p.invalid_reason.as_deref().unwrap_or("no reason recorded")
                )
            })
            .collect();
        if invalid.is_empty() {
            format!("{suite} was not swept with and without AES-NI")
        } else {
            format!("{suite}: {}", invalid.join("; "))
        }
    })?;
    let servers: Vec<VariantRecord> = record
        .tls
        .iter()
        .flat_map(|t| &t.servers)
        .filter(|s| s.kind == "nginx" && s.suite == suite)
        .map(|s| s.variant.clone())
        .collect();
    not_effective(&servers)?;
    let lower_bound = instrument_bound(a.instrument_limit(), n.instrument_limit())?;
    let cpu = |p: &cipherbench_model::tls::SweepPoint| {
        p.server_cpu
            .as_ref()
            .map(|c| format!("{:.0} %", c.total * 100.0))
            .unwrap_or_else(|| "unmeasured".into())
    };
    Ok(with_gain_interval(Step {
        layer: "tls",
        what: tls_what(a),
        accel: format_bits_per_sec(a.throughput_bytes_per_sec),
        noaesni: format_bits_per_sec(n.throughput_bytes_per_sec),
        gain: a.throughput_bytes_per_sec / n.throughput_bytes_per_sec,
        survives: None,
        crypto_share: None,
        rounds: Some(tls_rounds(a, n)),
        gain_interval: None,
        survives_interval: None,
        lower_bound,
        ceiling: tls_ceiling(sweep, a),
        note: format!(
            "nginx's cores were {} busy with AES-NI and {} without: with AES-NI the rest of the time goes to copying the file through user space into TLS records (no kTLS here), the handshake and TCP.",
            cpu(a),
            cpu(n)
        ),
    }))
}

fn tunnel(record: &RunRecord) -> Result<Step, String> {
    let t = record
        .tunnel
        .as_ref()
        .ok_or("the tunnel layer did not run")?;
    let (a, n) = tunnel_points(t, "accel", "noaesni")
        .ok_or("aes128-gcm was not measured through the tunnel with and without AES-NI")?;
    not_effective(&t.judged_variants())?;
    let lower_bound = instrument_bound(a.instrument_limit(), n.instrument_limit())?;
    let (am, nm) = (
        a.throughput_bits_per_sec.median,
        n.throughput_bits_per_sec.median,
    );
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
    Ok(with_gain_interval(Step {
        layer: "tunnel",
        what: tunnel_what(Some(t)),
        accel: format_bits_per_sec(am / 8.0),
        noaesni: format_bits_per_sec(nm / 8.0),
        gain: am / nm,
        survives: None,
        crypto_share: None,
        rounds: Some(tunnel_rounds(a, n)),
        gain_interval: None,
        survives_interval: None,
        lower_bound,
        ceiling: tunnel_ceiling(t, am),
        note: format!(
            "The sending and receiving gateways used {} with AES-NI ({} ran out first) and {} without ({}): with AES-NI most of the time goes to moving packets through TUN, UDP and the kernel's TCP, not to the cipher.",
            cpu(a),
            bottleneck(a),
            cpu(n),
            bottleneck(n)
        ),
    }))
}

/// The TLS rung's ceiling: nginx on the same cores serving the same file over
/// plain HTTP with `sendfile off` (`--plain-http`), the same copies through its
/// buffers as under TLS without kTLS, measured in the same point's rounds; the
/// figure with `sendfile on` beside it.
fn tls_ceiling(sweep: &SweepResults, a: &SweepPoint) -> Result<Ceiling, String> {
    use cipherbench_model::tls::{PLAIN_COPY, PLAIN_SENDFILE};
    let copy = sweep
        .plain_point(a.size_bytes, a.cores, PLAIN_COPY)
        .ok_or("plain HTTP was not measured: tls sweep --plain-http")?;
    if !copy.valid || copy.throughput_bytes_per_sec <= 0.0 {
        return Err(format!(
            "plain HTTP is not valid ({})",
            copy.invalid_reason.as_deref().unwrap_or("no throughput")
        ));
    }
    let sendfile = sweep
        .plain_point(a.size_bytes, a.cores, PLAIN_SENDFILE)
        .filter(|p| p.valid && p.throughput_bytes_per_sec > 0.0)
        .map(|p| {
            format!(
                "; {} with sendfile{}",
                format_bits_per_sec(p.throughput_bytes_per_sec),
                if p.instrument_limit().is_some() {
                    ", set by the generator"
                } else {
                    ""
                }
            )
        })
        .unwrap_or_default();
    Ok(Ceiling {
        of: "plain HTTP (sendfile off)".into(),
        figure: format!(
            "{}{}{sendfile}",
            format_bits_per_sec(copy.throughput_bytes_per_sec),
            if copy.instrument_limit().is_some() {
                ", a lower bound: the share is an upper bound"
            } else {
                ""
            }
        ),
        share: a.throughput_bytes_per_sec / copy.throughput_bytes_per_sec,
    })
}

/// The tunnel's ceiling: the null transform's TCP figure (no crypto, the same
/// gateways, placement and run). None at a fixed load, where every point that
/// carried the load is 100 % of it.
fn tunnel_ceiling(t: &TunnelResults, accel_bits_per_sec: f64) -> Result<Ceiling, String> {
    if t.config.tcp_rate_bits_per_sec.is_some() {
        return Err("at a fixed load (--rate) every point carrying it is 100 %".into());
    }
    let null = t
        .point("null", "accel", Protocol::Tcp)
        .filter(|p| p.throughput_bits_per_sec.median > 0.0)
        .ok_or("the null transform was not measured over TCP")?;
    let ceiling = null.throughput_bits_per_sec.median;
    Ok(Ceiling {
        of: "the null transform".into(),
        figure: format!(
            "{}{}",
            format_bits_per_sec(ceiling / 8.0),
            if null.instrument_limit().is_some() {
                ", a lower bound: the share is an upper bound"
            } else {
                ""
            }
        ),
        share: accel_bits_per_sec / ceiling,
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
    let lower_bound = match instrument_bound(a.point.instrument_limit(), n.point.instrument_limit())
    {
        Ok(b) => b,
        Err(e) => return Some(Err(e)),
    };
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
    Some(Ok(with_gain_interval(Step {
        layer: STRONGSWAN_RUNG,
        what: format!(
            "iperf3 TCP through strongSwan's {transform} ESP (charon, kernel-libipsec, openssl backend): a userspace reference stack, not kernel IPsec"
        ),
        accel: format_bits_per_sec(am / 8.0),
        noaesni: format_bits_per_sec(nm / 8.0),
        gain: am / nm,
        survives: None,
        crypto_share: None,
        rounds: Some(tunnel_rounds(&a.point, &n.point)),
        gain_interval: None,
        survives_interval: None,
        lower_bound,
        ceiling: Err("strongSwan refuses the null transform".into()),
        note: format!(
            "The two charons used {} with AES-NI and {} without: libipsec moves one packet per TUN read and write and per socket call.",
            cpu(a),
            cpu(n)
        ),
    })))
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

/// A gain with its interval: `3.10x [2.95-3.26]`, `1.02x [0.97-1.08], no clear
/// difference` when the interval holds 1.0, or `3.10x (no interval)` where the
/// record kept fewer than 3 rounds a side.
pub fn gain_text(gain: f64, interval: Option<&RatioInterval>) -> String {
    match interval {
        Some(i) => i.display(),
        None => format!("{gain:.2}x (no interval)"),
    }
}

/// A rung's gain as [`gain_text`] gives it, `≥ ` before it when it is a lower
/// bound ([`Step::lower_bound`]).
pub fn step_gain_text(s: &Step) -> String {
    format!(
        "{}{}",
        bound_mark(s),
        gain_text(s.gain, s.gain_interval.as_ref())
    )
}

/// `≥ ` for a rung whose figures are lower bounds, else nothing.
fn bound_mark(s: &Step) -> &'static str {
    if s.lower_bound.is_some() {
        "≥ "
    } else {
        ""
    }
}

/// Whether a gain may be read as one: its interval does not hold 1.0 (a gain
/// without an interval is shown as measured, marked "no interval").
fn clear(interval: Option<&RatioInterval>) -> bool {
    interval.is_none_or(RatioInterval::is_clear)
}

/// A share kept, with its interval: `45 % [38-52 %]`, `45 % (no interval)`; `no
/// clear difference` when the layer's gain or the primitive's holds 1.0 (there is
/// then no gain to keep a share of); `–` where there is no share (the primitive).
fn share_text(
    survives: Option<f64>,
    interval: Option<&Estimate>,
    gain: Option<&RatioInterval>,
    primitive: Option<&RatioInterval>,
) -> String {
    let Some(sv) = survives else {
        return "–".into();
    };
    if !clear(gain) || !clear(primitive) {
        return "no clear difference".into();
    }
    match interval {
        Some(e) => format!(
            "{:.0} % [{:.0}-{:.0} %]",
            sv * 100.0,
            e.low * 100.0,
            e.high * 100.0
        ),
        None => format!("{} (no interval)", pct(sv)),
    }
}

impl Ladder {
    /// The primitive's rung, if measured.
    pub fn primitive(&self) -> Option<&Step> {
        self.steps.iter().find(|s| s.layer == "primitive")
    }

    /// What a rung keeps of the primitive's gain, for tables ([`share_text`]),
    /// `≥ ` before a share that is a lower bound.
    pub fn keeps_text(&self, s: &Step) -> String {
        let text = share_text(
            s.survives,
            s.survives_interval.as_ref(),
            s.gain_interval.as_ref(),
            self.primitive().and_then(|p| p.gain_interval.as_ref()),
        );
        if text.starts_with(|c: char| c.is_ascii_digit()) {
            format!("{}{text}", bound_mark(s))
        } else {
            text
        }
    }

    /// A rung's cipher share, `–` where its gain is not clear, `≥ ` before a lower
    /// bound.
    pub fn share_of_time_text(&self, s: &Step) -> String {
        match s.crypto_share {
            Some(f) if clear(s.gain_interval.as_ref()) => {
                format!("{}{}", bound_mark(s), pct(f.clamp(0.0, 1.0)))
            }
            _ => "–".into(),
        }
    }

    /// What a library step keeps of the primitive's library gain.
    pub fn library_keeps_text(&self, s: &LibraryStep) -> String {
        let primitive = self
            .libraries
            .iter()
            .find(|p| p.tag == s.tag && p.layer == "primitive");
        share_text(
            s.survives,
            s.survives_interval.as_ref(),
            s.gain_interval.as_ref(),
            primitive.and_then(|p| p.gain_interval.as_ref()),
        )
    }
}

/// One paragraph per rung, for terminals and Markdown.
pub fn sentences(ladder: &Ladder) -> Vec<String> {
    ladder
        .steps
        .iter()
        .map(|s| {
            let gain = step_gain_text(s);
            let sentence = match (s.survives, s.crypto_share) {
                (Some(_), Some(_)) if clear(s.gain_interval.as_ref()) => format!(
                    "{}: {gain} ({} vs {}); keeps {} of the primitive's gain; without AES-NI the cipher was about {} of this layer's time. {}",
                    s.layer,
                    s.accel,
                    s.noaesni,
                    ladder.keeps_text(s),
                    ladder.share_of_time_text(s),
                    s.note
                ),
                (Some(_), Some(_)) => format!(
                    "{}: {gain} ({} vs {}): the rounds do not show this layer faster with AES-NI than without, so no share of the primitive's gain is claimed. {}",
                    s.layer, s.accel, s.noaesni, s.note
                ),
                _ => format!("{}: {gain} ({} vs {}). {}", s.layer, s.accel, s.noaesni, s.note),
            };
            match &s.lower_bound {
                Some(why) => format!(
                    "{sentence} A lower bound: {why}, so the gain (and what it keeps) is at least this."
                ),
                None => sentence,
            }
        })
        .collect()
}

/// The ladder for the terminal: each rung's gain with its interval and what it
/// keeps, the layers left out, and the library steps. Empty without a ladder.
pub fn text(record: &RunRecord) -> String {
    let l = build(record);
    if l.steps.is_empty() && l.libraries.is_empty() && l.libraries_left_out.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    if !l.steps.is_empty() {
        out.push_str(&format!(
            "\nThe ladder: AES-GCM with / without AES-NI at each layer (gain [{:.0} % interval]; keeps = ln gain / ln primitive gain)\n",
            cipherbench_model::interval::LEVEL * 100.0
        ));
        for s in &l.steps {
            // A gain that is not clear already says so: no share is claimed.
            let primitive_clear = clear(l.primitive().and_then(|p| p.gain_interval.as_ref()));
            let keeps = match s.survives {
                Some(_) if !clear(s.gain_interval.as_ref()) || !primitive_clear => {
                    "keeps –".to_string()
                }
                Some(_) => format!("keeps {}", l.keeps_text(s)),
                None => String::new(),
            };
            let row = format!("  {:<20} {:<42} {keeps}", s.layer, step_gain_text(s));
            out.push_str(&format!("{}\n  {:<20} {}\n", row.trim_end(), "", s.what));
            out.push_str(&format!(
                "  {:<20} with AES-NI, of ceiling: {}\n",
                "",
                ceiling_text(s)
            ));
            if let Some(why) = &s.lower_bound {
                out.push_str(&format!("  {:<20} LOWER BOUND: {why}\n", ""));
            }
        }
    }
    for (layer, why) in &l.missing {
        out.push_str(&format!("  {layer:<20} {why}\n"));
    }
    for s in &l.libraries {
        let row = format!(
            "  library @{} {:<10} {:<42} {}",
            s.tag,
            s.layer,
            gain_text(s.gain, s.gain_interval.as_ref()),
            if s.survives.is_some() {
                format!("keeps {}", l.library_keeps_text(s))
            } else {
                String::new()
            }
        );
        out.push_str(row.trim_end());
        out.push('\n');
    }
    for (layer, why) in &l.libraries_left_out {
        out.push_str(&format!("  library {layer:<12} {why}\n"));
    }
    out
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

    /// The fixture run as if it had also measured accel on a second library, `gain`
    /// times as fast at each layer (primitive, file, tls, tunnel).
    fn with_a_second_library(gains: [f64; 4]) -> RunRecord {
        use cipherbench_model::env::LibraryUnderTest;
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/run-quick.json"
        ))
        .unwrap();
        let mut r = RunRecord::from_json(&text).unwrap();
        let lib = |name: &str, tag: Option<&str>, version: &str| LibraryUnderTest {
            name: name.into(),
            tag: tag.map(str::to_string),
            version: version.into(),
            libcrypto: None,
            libssl: None,
            cli: None,
        };
        r.environment.libraries = vec![
            lib("system", None, "OpenSSL 3.0.19 27 Jan 2026"),
            lib("/opt/ossl", Some("3.6.3"), "OpenSSL 3.6.3 9 Jun 2026"),
        ];
        let tagged = |v: &str| (v == "accel").then(|| "accel@3.6.3".to_string());
        let speed = r.speed.as_mut().unwrap();
        for mut p in speed.points.clone() {
            if let Some(v) = tagged(&p.variant) {
                p.variant = v;
                p.throughput_bytes_per_sec.median *= gains[0];
                speed.points.push(p);
            }
        }
        let file = r.file.as_mut().unwrap();
        for mut p in file.points.clone() {
            if let Some(v) = tagged(&p.variant) {
                p.variant = v;
                p.throughput_bytes_per_sec.median *= gains[1];
                p.elapsed_seconds.median /= gains[1];
                file.points.push(p);
            }
        }
        let sweep = r.tls.as_mut().unwrap().sweep.as_mut().unwrap();
        for mut p in sweep.points.clone() {
            if let Some(v) = tagged(&p.variant) {
                p.variant = v;
                p.throughput_bytes_per_sec *= gains[2];
                sweep.points.push(p);
            }
        }
        let tunnel = r.tunnel.as_mut().unwrap();
        for mut p in tunnel.points.clone() {
            if let Some(v) = tagged(&p.variant) {
                p.variant = v;
                p.throughput_bits_per_sec.median *= gains[3];
                tunnel.points.push(p);
            }
        }
        r
    }

    #[test]
    fn a_library_left_out_of_a_layer_is_said_beside_its_steps() {
        let mut record = with_a_second_library([2.0, 1.25, 1.1, 1.02]);
        let tls = record.tls.as_mut().unwrap().sweep.as_mut().unwrap();
        tls.points.retain(|p| !p.variant.ends_with("@3.6.3"));
        let why =
            "left out: nginx /usr/sbin/nginx links libcrypto.so.3 and cannot load OpenSSL 4.0.3";
        record.warn("tls", "library_left_out", why);
        let l = build(&record);
        let layers: Vec<&str> = l.libraries.iter().map(|s| s.layer).collect();
        assert_eq!(layers, ["primitive", "file", "tunnel"]);
        assert_eq!(l.libraries_left_out, [("tls".to_string(), why.to_string())]);
        let text = text(&record);
        assert!(
            text.contains(&format!("library tls          {why}")),
            "{text}"
        );
    }

    #[test]
    fn the_library_step_is_accel_on_the_later_library_over_accel_at_each_layer() {
        let record = with_a_second_library([2.0, 1.25, 1.1, 1.02]);
        let steps = library_steps(&record);
        let layers: Vec<&str> = steps.iter().map(|s| s.layer).collect();
        assert_eq!(layers, ["primitive", "file", "tls", "tunnel"]);
        for (s, g) in steps.iter().zip([2.0, 1.25, 1.1, 1.02]) {
            assert!((s.gain - g).abs() < 1e-9, "{s:?}");
            assert_eq!(s.tag, "3.6.3");
            assert_eq!(s.library, "OpenSSL 3.6.3 9 Jun 2026 (--openssl /opt/ossl)");
            assert_eq!(s.baseline, "OpenSSL 3.0.19 27 Jan 2026 (system)");
        }
        assert_eq!(steps[0].survives, None);
        assert!((steps[1].survives.unwrap() - 1.25f64.ln() / 2f64.ln()).abs() < 1e-9);
        // The AES-NI ladder is the baseline library's, as before.
        assert_eq!(
            build(&record).steps,
            build(&{
                let mut plain = record.clone();
                plain.environment.libraries.clear();
                plain
            })
            .steps
        );
        assert_eq!(build(&record).libraries, steps);
    }

    #[test]
    fn libraries_within_five_percent_at_the_primitive_keep_no_share() {
        let steps = library_steps(&with_a_second_library([1.03, 1.2, 1.0, 1.0]));
        assert!(steps.iter().all(|s| s.survives.is_none()), "{steps:?}");
    }

    #[test]
    fn a_record_with_one_library_has_no_library_step() {
        let mut record = with_a_second_library([2.0, 1.0, 1.0, 1.0]);
        record.environment.libraries.truncate(1);
        assert!(library_steps(&record).is_empty());
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

    #[test]
    fn an_invalid_tls_point_is_named_with_its_reason_not_called_unswept() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/run-quick.json"
        ))
        .unwrap();
        let mut record = RunRecord::from_json(&text).unwrap();
        let sweep = record.tls.as_mut().unwrap().sweep.as_mut().unwrap();
        for p in sweep.points.iter_mut().filter(|p| {
            p.suite == "AES128-GCM-SHA256" && p.variant == "accel" && p.size_bytes == 16 << 20
        }) {
            p.valid = false;
            p.invalid_reason = Some("the load generator saturated".into());
        }
        let ladder = build(&record);
        let (_, why) = ladder
            .missing
            .iter()
            .find(|(layer, _)| *layer == "tls")
            .expect("no tls rung without a valid accel point");
        assert!(
            why.contains("accel 16 MiB is not valid (the load generator saturated)")
                && !why.contains("not swept"),
            "{why}"
        );
        // No points at all: not swept.
        record
            .tls
            .as_mut()
            .unwrap()
            .sweep
            .as_mut()
            .unwrap()
            .points
            .clear();
        let ladder = build(&record);
        assert!(ladder
            .missing
            .iter()
            .any(|(l, why)| *l == "tls" && why.contains("was not swept")));
    }

    fn quick() -> RunRecord {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/run-quick.json"
        ))
        .unwrap();
        RunRecord::from_json(&text).unwrap()
    }

    /// The quick run with plain-HTTP points beside its TLS point: sendfile off at
    /// `copy` times accel's throughput, sendfile on at twice that.
    fn with_plain(copy: f64) -> RunRecord {
        use cipherbench_model::tls::{PLAIN_COPY, PLAIN_SENDFILE};
        let mut r = quick();
        let sweep = r.tls.as_mut().unwrap().sweep.as_mut().unwrap();
        let a = sweep
            .points
            .iter()
            .find(|p| p.suite == "AES128-GCM-SHA256" && p.variant == "accel")
            .unwrap()
            .clone();
        for (variant, times) in [(PLAIN_COPY, copy), (PLAIN_SENDFILE, 2.0 * copy)] {
            let mut p = a.clone();
            // Beside the first suite's point, not necessarily the ladder's.
            p.suite = "AES128-SHA".into();
            p.variant = variant.into();
            p.negotiated_suite = None;
            p.throughput_bytes_per_sec *= times;
            sweep.plain_points.push(p);
        }
        r
    }

    #[test]
    fn the_tls_rung_is_set_against_plain_http_with_sendfile_off() {
        let l = build(&with_plain(2.5));
        let tls = l.steps.iter().find(|s| s.layer == "tls").unwrap();
        let c = tls.ceiling.as_ref().unwrap();
        assert!((c.share - 0.4).abs() < 1e-9, "{c:?}");
        assert_eq!(c.of, "plain HTTP (sendfile off)");
        assert!(c.figure.contains("with sendfile"), "{c:?}");
        assert!(
            ceiling_text(tls).starts_with("40 % of plain HTTP"),
            "{}",
            ceiling_text(tls)
        );
        let text = crate::tls::plain_text(build_sweep(&with_plain(2.5)));
        assert!(
            text.contains("off 21.1 Gbit/s (nginx 100 %); of sendfile off, TLS keeps: ")
                && text.contains("AES128-GCM-SHA256 accel 40 %"),
            "{text}"
        );
        // Without plain points the rung says how to get them.
        let none = build(&quick());
        let tls = none.steps.iter().find(|s| s.layer == "tls").unwrap();
        assert!(tls.ceiling.as_ref().unwrap_err().contains("--plain-http"));
    }

    fn build_sweep(r: &RunRecord) -> &SweepResults {
        r.tls.as_ref().unwrap().sweep.as_ref().unwrap()
    }

    /// The quick run with the ladder's TLS points of `variants` stopped by the load
    /// generator (a search that ended at `Limit::Generator`, the points valid).
    fn generator_set(variants: &[&str]) -> RunRecord {
        use cipherbench_model::tls::{Limit, SearchOutcome};
        let mut record = quick();
        let sweep = record.tls.as_mut().unwrap().sweep.as_mut().unwrap();
        for p in sweep
            .points
            .iter_mut()
            .filter(|p| p.suite == "AES128-GCM-SHA256" && variants.contains(&p.variant.as_str()))
        {
            p.search = Some(SearchOutcome {
                started_at: 1,
                limit: Limit::Generator,
                explanation: "the generator saturated at 32 clients".into(),
            });
            // nginx had cycles to spare, or the sweep would have called it `server`.
            p.server_cpu.as_mut().unwrap().total = 0.62;
        }
        record
    }

    #[test]
    fn a_tls_rung_whose_accel_figure_the_generator_set_is_a_lower_bound() {
        let record = generator_set(&["accel"]);
        let ladder = build(&record);
        let step = ladder.steps.iter().find(|s| s.layer == "tls").unwrap();
        let why = step.lower_bound.as_deref().expect("a lower bound");
        assert!(
            why.starts_with("the load generator, not nginx, set the accel 16 MiB figure")
                && why.contains("workers were 62 % busy"),
            "{why}"
        );
        // The gain, what it keeps and the cipher share are each at least that.
        assert!(
            step_gain_text(step).starts_with("≥ 6.63x"),
            "{}",
            step_gain_text(step)
        );
        assert!(ladder.keeps_text(step).starts_with("≥ 59 %"));
        assert!(ladder.share_of_time_text(step).starts_with("≥ "));
        // Unchanged rungs are not marked.
        let file = ladder.steps.iter().find(|s| s.layer == "file").unwrap();
        assert!(!step_gain_text(file).contains('≥') && !ladder.keeps_text(file).contains('≥'));
        // Every rendering says it, and why, as it says an invalid point.
        let terminal = text(&record);
        assert!(terminal.contains("≥ 6.63x"), "{terminal}");
        assert!(
            terminal.contains("LOWER BOUND: the load generator, not nginx"),
            "{terminal}"
        );
        assert!(sentences(&ladder)
            .iter()
            .any(|l| l.starts_with("tls: ≥ 6.63x")
                && l.contains("A lower bound: the load generator")));
        let md = crate::markdown::summary(&record);
        assert!(md.contains("**≥ 6.63x (no interval)**"), "{md}");
        assert!(
            md.contains("- ladder, tls: **a lower bound** (≥): the load generator"),
            "{md}"
        );
        assert!(
            md.contains("16 MiB x1: 8.44 Gbit/s at 16 clients (a lower bound"),
            "{md}"
        );
        let html = crate::html::render(&record);
        assert!(
            html.contains("≥ <b class=\"nw\">6.63×</b>") && html.contains("lower bound</span>")
        );
        assert!(html.contains("<p class=\"bad\">tls: a lower bound: the load generator"));
        assert!(html.contains(">tls (lower bound)<"), "the chart's category");
        // The plain record has no lower bound anywhere.
        let plain = build(&quick());
        assert!(plain.steps.iter().all(|s| s.lower_bound.is_none()));
        assert!(!text(&quick()).contains("LOWER BOUND"));
    }

    #[test]
    fn a_tls_rung_whose_noaesni_figure_the_generator_set_is_left_out_saying_why() {
        // noaesni's figure is then a lower bound: the gain only an upper bound.
        let record = generator_set(&["noaesni"]);
        let ladder = build(&record);
        assert!(ladder.steps.iter().all(|s| s.layer != "tls"));
        let (_, why) = ladder.missing.iter().find(|(l, _)| *l == "tls").unwrap();
        assert!(
            why.starts_with(INSTRUMENT_LEFT_OUT)
                && why.contains(
                    "without AES-NI (the load generator, not nginx, set the noaesni 16 MiB figure"
                )
                && why.ends_with("so the gain would only be an upper bound"),
            "{why}"
        );
        let md = crate::markdown::summary(&record);
        assert!(
            md.contains(&format!(
                "- ladder, tls: **{INSTRUMENT_LEFT_OUT} without AES-NI"
            )),
            "{md}"
        );
        assert!(crate::html::render(&record)
            .contains(&format!("<p class=\"bad\">tls: {INSTRUMENT_LEFT_OUT}")));
        assert!(text(&record).contains(&format!("tls                  {INSTRUMENT_LEFT_OUT}")));
        // Both sides: their ratio bounds nothing.
        let ladder = build(&generator_set(&["accel", "noaesni"]));
        let (_, why) = ladder.missing.iter().find(|(l, _)| *l == "tls").unwrap();
        assert!(why.ends_with("so their ratio bounds nothing"), "{why}");
        // An invalid point keeps its own reason: the generator limit is not repeated.
        let mut record = generator_set(&["accel"]);
        let sweep = record.tls.as_mut().unwrap().sweep.as_mut().unwrap();
        for p in &mut sweep.points {
            p.valid = false;
            p.invalid_reason = Some("the load generator saturated".into());
            assert_eq!(p.instrument_limit(), None);
        }
    }

    #[test]
    fn a_tunnel_rung_whose_accel_run_stalled_with_idle_gateways_is_a_lower_bound() {
        use cipherbench_model::tunnel::Protocol;
        let mut record = quick();
        let t = record.tunnel.as_mut().unwrap();
        for (variant, rates, idle) in [
            ("accel", [2800.0, 2750.0, 900.0], Some(2)),
            ("noaesni", [900.0, 910.0, 905.0], None),
        ] {
            let p = t
                .points
                .iter_mut()
                .find(|p| {
                    p.transform == "aes128-gcm"
                        && p.variant == variant
                        && p.protocol == Protocol::Tcp
                })
                .unwrap();
            let template = p.runs[0].clone();
            p.runs = rates
                .iter()
                .enumerate()
                .map(|(round, mbit)| {
                    let mut r = template.clone();
                    r.iperf.receiver_bits_per_sec = mbit * 1e6;
                    r.round = Some(round);
                    if idle == Some(round) {
                        for th in r.sender.threads.iter_mut().chain(&mut r.receiver.threads) {
                            th.cpu_cores_used = 0.1;
                        }
                    }
                    r
                })
                .collect();
            let bits: Vec<f64> = rates.iter().map(|m| m * 1e6).collect();
            p.throughput_bits_per_sec = cipherbench_model::Summary::of(&bits).unwrap();
        }
        let ladder = build(&record);
        let step = ladder.steps.iter().find(|s| s.layer == "tunnel").unwrap();
        let why = step.lower_bound.as_deref().expect("a lower bound");
        assert!(why.starts_with("run 3 of 3 stalled at 900 Mbit/s"), "{why}");
        assert!(text(&record).contains("LOWER BOUND: run 3 of 3 stalled"));
    }
}
