//! `cipherbench compare`: two or more results side by side (the EC2 AES-NI blog
//! post's "knight" and "padawan", seed 001; one machine before and after a change).
//!
//! The control separates "this CPU is just faster" from "this CPU has the
//! acceleration": 3DES (which AES-NI does not touch) measures the CPU alone, so
//! dividing the AES ratio by the 3DES ratio leaves what acceleration contributes.
//! Differences in environment are listed first, because they explain the rest.

use crate::ratio;
use crate::svg::escape;
use cipherbench_model::interval::{
    bootstrap_figures, Centre, Pairing, RatioInterval, Rounds, DEFAULT_SEED,
};
use cipherbench_model::speed::{Direction, SpeedResults};
use cipherbench_model::units::{format_bits_per_sec, format_bytes_per_sec, ByteSize};
use cipherbench_model::RunRecord;

/// A control ratio within this of 1.0 means "equally fast otherwise".
pub const SAME_CPU_TOLERANCE: f64 = 0.10;
/// An acceleration factor within this of 1.0 means "no difference in acceleration".
pub const SAME_ACCEL_TOLERANCE: f64 = 0.15;

/// One environment field that differs between the records.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvDifference {
    /// What differs.
    pub field: String,
    /// Its value in each record.
    pub values: Vec<String>,
}

/// One layer-1 point present in several records.
#[derive(Debug, Clone, PartialEq)]
pub struct SpeedRow {
    /// Cipher.
    pub cipher: String,
    /// Variant.
    pub variant: String,
    /// Direction.
    pub direction: Direction,
    /// Buffer size.
    pub size_bytes: u64,
    /// Threads.
    pub threads: usize,
    /// Median throughput per record (None where not measured, or where the variant
    /// did not take effect).
    pub values: Vec<Option<f64>>,
    /// Per record: the variant did not take effect there, so its figure is not shown
    /// and no ratio is drawn from it.
    pub not_effective: Vec<bool>,
    /// Per record: the samples behind the figure, for the ratios' intervals.
    pub rounds: Vec<Option<Rounds>>,
}

impl SpeedRow {
    /// Record `i`'s ratio to the baseline with its 95 % interval.
    pub fn interval(&self, i: usize) -> Option<RatioInterval> {
        cross_interval(&self.values, &self.rounds, i)
    }
}

/// Record `i`'s figure over the baseline's with its 95 % interval: each record's
/// rounds resampled on their own (a gain's two sets as its own pairing says), moved
/// to the ratio shown. None without the figures, or with fewer than 3 rounds a set.
fn cross_interval(
    values: &[Option<f64>],
    rounds: &[Option<Rounds>],
    i: usize,
) -> Option<RatioInterval> {
    let shown = ratio(values[i], values[0])?;
    let (a, b) = (rounds.get(i)?.as_ref()?, rounds.first()?.as_ref()?);
    let e = bootstrap_figures(&[a, b], |v| v[0] / v[1], DEFAULT_SEED)?;
    Some(
        RatioInterval::from_estimate(e, Pairing::Independent, (a.num.len(), b.num.len()))
            .scaled_to(shown),
    )
}

/// How record `i` relates to the baseline (record 0).
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Label of the compared record.
    pub label: String,
    /// AES-256-CBC (accel, encrypt, 1 thread) ratio to the baseline.
    pub aes_ratio: Option<f64>,
    /// The control's ratio to the baseline (3DES, or ChaCha20-Poly1305 when 3DES was
    /// not measured): the CPU alone.
    pub control_ratio: Option<f64>,
    /// aes_ratio / control_ratio: what acceleration contributes.
    pub acceleration_factor: Option<f64>,
    /// 95 % bootstrap intervals of the three (over each point's samples), where both
    /// records kept at least 3 samples.
    pub aes_interval: Option<RatioInterval>,
    /// See `aes_interval`.
    pub control_interval: Option<RatioInterval>,
    /// See `aes_interval`; a factor whose interval holds 1.0 is "no difference in
    /// acceleration".
    pub factor_interval: Option<RatioInterval>,
    /// The size the verdict was drawn at.
    pub size_bytes: u64,
    /// One paragraph for a person.
    pub sentence: String,
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// A label per record.
    pub labels: Vec<String>,
    /// Environment differences.
    pub differences: Vec<EnvDifference>,
    /// Verdicts for records 1.. against record 0.
    pub verdicts: Vec<Verdict>,
    /// Layer 1 points common to at least two records.
    pub speed: Vec<SpeedRow>,
    /// The ladder's gains and layers 2 to 4, rows common to at least two records.
    pub layers: Vec<LayerRow>,
    /// Variants that did not take effect: (label, layer, name, why).
    pub not_effective: Vec<(String, &'static str, String, String)>,
}

/// How a [`LayerRow`]'s values read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A ratio (AES-NI's gain), shown as `3.10x`.
    Gain,
    /// Bytes per second, shown in bytes (file layer).
    Bytes,
    /// Bytes per second, shown in bits (network layers).
    Bits,
}

/// One figure of layers 2 to 4 (or the ladder) present in several records.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerRow {
    /// `ladder`, `file`, `tls`, `tunnel`.
    pub layer: &'static str,
    /// What was measured.
    pub what: String,
    /// How to read the values.
    pub unit: Unit,
    /// Per record (None where not measured, or where the variant did not take effect).
    pub values: Vec<Option<f64>>,
    /// Per record: the variant did not take effect there.
    pub not_effective: Vec<bool>,
    /// Per record: the rounds behind the figure (a gain's two sets), for the
    /// ratios' intervals.
    pub rounds: Vec<Option<Rounds>>,
}

impl LayerRow {
    /// Record `i`'s ratio to the baseline with its 95 % interval.
    pub fn interval(&self, i: usize) -> Option<RatioInterval> {
        cross_interval(&self.values, &self.rounds, i)
    }

    fn format(&self, v: Option<f64>) -> String {
        v.map_or_else(|| "-".into(), |v| self.unit.format(v))
    }
}

impl Unit {
    /// A value in this unit: `3.10x`, bytes or bits per second.
    pub fn format(self, v: f64) -> String {
        match self {
            Unit::Gain => format!("{v:.2}x"),
            Unit::Bytes => format_bytes_per_sec(v),
            Unit::Bits => format_bits_per_sec(v),
        }
    }
}

/// One figure of a record: (layer, what, unit, value, the variant did not take
/// effect, the rounds behind the value).
type Figure = (&'static str, String, Unit, f64, bool, Option<Rounds>);

/// A sweep point's final window's per-interval throughputs (its figure their mean).
fn tls_rounds(p: &cipherbench_model::tls::SweepPoint) -> Rounds {
    Rounds::single(p.interval_samples_bytes_per_sec.clone(), Centre::Mean)
}

/// The figures of one record, keyed by (layer, what).
#[expect(
    clippy::too_many_lines,
    reason = "one block per layer, each listing that layer's figures"
)]
fn layer_figures(r: &RunRecord) -> Vec<Figure> {
    let mut out = Vec::new();
    let ladder = crate::ladder::build(r);
    for step in ladder.steps {
        out.push((
            "ladder",
            format!(
                "AES-NI gain, {}: {}{}",
                step.layer,
                step.what,
                if step.lower_bound.is_some() {
                    " (a lower bound: the instrument set the figure with AES-NI)"
                } else {
                    ""
                }
            ),
            Unit::Gain,
            step.gain,
            false,
            step.rounds,
        ));
    }
    let layers = crate::variants::of_record(r);
    let ineffective = |layer: &str, variant: &str| {
        layers
            .iter()
            .find(|(l, _)| *l == layer)
            .is_some_and(|(_, records)| crate::variants::ineffective(records, variant).is_some())
    };
    for step in ladder.libraries {
        out.push((
            "ladder",
            format!(
                "library gain (accel@{} over accel), {}: {}",
                step.tag, step.layer, step.what
            ),
            Unit::Gain,
            step.gain,
            false,
            step.rounds,
        ));
    }
    if let Some(f) = &r.file {
        for p in &f.points {
            out.push((
                "file",
                format!(
                    "{} {} {} {} cache, {} ({})",
                    p.tool,
                    p.variant,
                    p.direction.as_str(),
                    p.cache.as_str(),
                    p.sync.as_str(),
                    ByteSize(p.bytes)
                ),
                Unit::Bytes,
                p.throughput_bytes_per_sec.median,
                ineffective("file", &p.variant),
                Some(Rounds::single(crate::ladder::file_rates(p), Centre::Median)),
            ));
        }
    }
    if let Some(sweep) = r.tls.as_ref().and_then(|t| t.sweep.as_ref()) {
        for p in sweep.points.iter().filter(|p| p.valid) {
            out.push((
                "tls",
                format!(
                    "{} {} x{} {}",
                    p.suite,
                    ByteSize(p.size_bytes),
                    p.cores,
                    p.variant
                ),
                Unit::Bits,
                p.throughput_bytes_per_sec,
                ineffective("tls", &p.variant),
                Some(tls_rounds(p)),
            ));
        }
    }
    if let Some(t) = &r.tunnel {
        for u in &t.underlay {
            out.push((
                "tunnel",
                // Without a rate limit the bare veth is no ceiling, and not the same
                // figure as a rate-limited one.
                if crate::tunnel::underlay_is_ceiling(&t.config) {
                    format!("underlay alone {}", u.protocol.as_str())
                } else {
                    format!(
                        "underlay alone {} (no rate limit: not a ceiling)",
                        u.protocol.as_str()
                    )
                },
                Unit::Bits,
                u.throughput_bits_per_sec.median / 8.0,
                false,
                Some(underlay_rounds(u)),
            ));
        }
        for p in &t.points {
            out.push((
                "tunnel",
                format!("{} {} {}", p.transform, p.variant, p.protocol.as_str()),
                Unit::Bits,
                p.throughput_bits_per_sec.median / 8.0,
                ineffective("tunnel", &p.variant),
                Some({
                    let (v, c) = crate::ladder::tunnel_samples(p);
                    Rounds::single(v, c)
                }),
            ));
        }
    }
    out
}

/// The underlay's rounds: its runs' server-side rates with at least 3 runs, else
/// the runs' per-interval rates pooled (as for a tunnel point).
fn underlay_rounds(u: &cipherbench_model::tunnel::UnderlayPoint) -> Rounds {
    if u.runs.len() >= cipherbench_model::interval::MIN_ROUNDS {
        Rounds::single(
            u.runs.iter().map(|r| r.receiver_bits_per_sec).collect(),
            Centre::Median,
        )
    } else {
        Rounds::single(
            u.runs
                .iter()
                .flat_map(|r| r.interval_bits_per_sec.iter().copied())
                .collect(),
            Centre::Mean,
        )
    }
}

fn layer_rows(records: &[RunRecord]) -> Vec<LayerRow> {
    let mut rows: Vec<LayerRow> = Vec::new();
    for (i, r) in records.iter().enumerate() {
        for (layer, what, unit, value, not_effective, rounds) in layer_figures(r) {
            let idx = match rows.iter().position(|x| x.layer == layer && x.what == what) {
                Some(idx) => idx,
                None => {
                    rows.push(LayerRow {
                        layer,
                        what,
                        unit,
                        values: vec![None; records.len()],
                        not_effective: vec![false; records.len()],
                        rounds: vec![None; records.len()],
                    });
                    rows.len() - 1
                }
            };
            if not_effective {
                rows[idx].not_effective[i] = true;
            } else {
                rows[idx].values[i] = Some(value);
                rows[idx].rounds[i] = rounds;
            }
        }
    }
    rows.retain(|r| present(&r.values, &r.not_effective) >= 2);
    rows
}

/// Records that measured a row (with a figure, or one withheld as not effective).
fn present(values: &[Option<f64>], not_effective: &[bool]) -> usize {
    values
        .iter()
        .zip(not_effective)
        .filter(|(v, n)| v.is_some() || **n)
        .count()
}

fn flags(r: &RunRecord) -> String {
    let mut present: Vec<&str> = r
        .environment
        .cpu
        .crypto_flags
        .iter()
        .filter(|f| f.present)
        .map(|f| f.name.as_str())
        .collect();
    present.sort();
    if present.is_empty() {
        "(none)".into()
    } else {
        present.join(" ")
    }
}

/// How to read one environment field from a record.
type Field = fn(&RunRecord) -> String;

fn differences(records: &[RunRecord]) -> Vec<EnvDifference> {
    let fields: [(&str, Field); 8] = [
        ("CPU model", |r| r.environment.cpu.model.clone()),
        ("crypto flags", flags),
        ("logical cores", |r| {
            r.environment.cpu.logical_cores.to_string()
        }),
        ("hypervisor", |r| {
            r.environment
                .cpu
                .hypervisor
                .clone()
                .unwrap_or_else(|| "none".into())
        }),
        ("kernel", |r| r.environment.kernel.clone()),
        // The libraries measured (`--openssl`), else the one cipherbench linked.
        ("OpenSSL under test", |r| r.environment.libraries_phrase()),
        ("capability vector", |r| {
            r.environment
                .openssl
                .cpu_settings
                .clone()
                .unwrap_or_else(|| "unknown".into())
        }),
        ("preset", |r| {
            if r.rehearsal {
                format!("{} (a rehearsal)", r.preset)
            } else {
                r.preset.clone()
            }
        }),
    ];
    let mut out: Vec<EnvDifference> = fields
        .iter()
        .filter_map(|(name, get)| {
            let values: Vec<String> = records.iter().map(get).collect();
            (values.iter().any(|v| v != &values[0])).then(|| EnvDifference {
                field: (*name).to_string(),
                values,
            })
        })
        .collect();
    // TLS figures of two runs whose handshakes used different groups compare
    // different key exchanges (3.0's x25519 against 3.5's X25519MLKEM768).
    let groups: Option<Vec<String>> = records.iter().map(negotiated_groups).collect();
    if let Some(values) = groups.filter(|v| v.iter().any(|g| g != &v[0])) {
        out.push(EnvDifference {
            field: "TLS key exchange (groups negotiated)".into(),
            values,
        });
    }
    out
}

/// The groups a record's TLS points negotiated, read back, sorted and joined; None
/// where it has no TLS point that read one back.
fn negotiated_groups(r: &RunRecord) -> Option<String> {
    let tls = r.tls.as_ref()?;
    let mut groups: Vec<&str> = tls
        .sweep
        .iter()
        .flat_map(|s| s.points.iter())
        .chain(
            tls.handshake
                .iter()
                .flat_map(|h| h.points.iter().map(|p| &p.point)),
        )
        .filter_map(|p| p.negotiated_group.as_deref())
        .collect();
    groups.sort_unstable();
    groups.dedup();
    (!groups.is_empty()).then(|| groups.join(", "))
}

/// accel's median for a point (None if accel itself did not take effect there).
fn median(s: Option<&SpeedResults>, cipher: &str, size: u64) -> Option<f64> {
    let s = s?;
    if crate::variants::ineffective(&s.variants, "accel").is_some() {
        return None;
    }
    s.point(cipher, "accel", Direction::Encrypt, size, 1)
        .map(|p| p.throughput_bytes_per_sec.median)
}

/// accel's samples (throughput) for a point, under the same rule as [`median`].
fn samples(s: Option<&SpeedResults>, cipher: &str, size: u64) -> Option<Vec<f64>> {
    median(s, cipher, size)?;
    s?.point(cipher, "accel", Direction::Encrypt, size, 1)
        .map(|p| {
            p.samples
                .iter()
                .map(|x| x.throughput_bytes_per_sec())
                .collect()
        })
}

/// ` (95 % interval 1.18-1.30)`, or nothing without an interval.
fn interval_text(i: Option<&RatioInterval>) -> String {
    i.map(|i| format!(" (95 % interval {:.2}-{:.2})", i.low, i.high))
        .unwrap_or_default()
}

/// The size both records measured closest to 256 bytes (the EC2 AES-NI post's size).
fn common_size(a: Option<&SpeedResults>, b: Option<&SpeedResults>) -> u64 {
    let sizes =
        |s: Option<&SpeedResults>| s.map(|s| s.config.sizes_bytes.clone()).unwrap_or_default();
    let b_sizes = sizes(b);
    sizes(a)
        .into_iter()
        .filter(|z| b_sizes.contains(z))
        .min_by_key(|&z| (z as i64 - 256).abs())
        .unwrap_or(256)
}

fn has_aes(r: &RunRecord) -> bool {
    r.environment.cpu.has("aes")
}

fn verdict(base: &RunRecord, base_label: &str, other: &RunRecord, label: &str) -> Verdict {
    let (sa, sb) = (base.speed.as_ref(), other.speed.as_ref());
    let size = common_size(sa, sb);
    let aes_ratio = ratio(
        median(sb, "aes-256-cbc", size),
        median(sa, "aes-256-cbc", size),
    );
    // 3DES as the EC2 AES-NI post used it; ChaCha20-Poly1305 (no AES either) when 3DES
    // is absent.
    let (control, control_ratio) = [
        ("3DES", "des-ede3-cbc"),
        ("ChaCha20-Poly1305", "chacha20-poly1305"),
    ]
    .iter()
    .find_map(|(name, cipher)| {
        ratio(median(sb, cipher, size), median(sa, cipher, size)).map(|r| ((*name, *cipher), r))
    })
    .unzip();
    let control_name = control.map_or("3DES", |c| c.0);
    // Intervals over the samples: each record's points resampled on their own.
    let sets = |cipher: &str| Some((samples(sb, cipher, size)?, samples(sa, cipher, size)?));
    let seed = cipherbench_model::interval::DEFAULT_SEED;
    let aes_sets = sets("aes-256-cbc");
    let control_sets = control.and_then(|c| sets(c.1));
    let aes_interval = aes_sets
        .as_ref()
        .and_then(|(b, a)| RatioInterval::bootstrap_of(&[b, a], |m| m[0] / m[1], seed));
    let control_interval = control_sets
        .as_ref()
        .and_then(|(b, a)| RatioInterval::bootstrap_of(&[b, a], |m| m[0] / m[1], seed));
    let factor_interval = match (&aes_sets, &control_sets) {
        (Some((ab, aa)), Some((cb, ca))) => {
            RatioInterval::bootstrap_of(&[ab, aa, cb, ca], |m| (m[0] / m[1]) / (m[2] / m[3]), seed)
        }
        _ => None,
    };
    let unclear = |i: &Option<RatioInterval>| i.as_ref().is_some_and(|i| !i.is_clear());
    let acceleration_factor = match (aes_ratio, control_ratio) {
        (Some(a), Some(c)) if c > 0.0 => Some(a / c),
        _ => None,
    };
    let sentence = match (aes_ratio, control_ratio, acceleration_factor) {
        (Some(a), Some(c), Some(f)) => {
            let ci = interval_text(control_interval.as_ref());
            let cpu = if (c - 1.0).abs() <= SAME_CPU_TOLERANCE || unclear(&control_interval) {
                format!(
                    "On the control ({control_name}, untouched by AES-NI) {label} runs at {c:.2}x {base_label}{ci}: the CPUs are about equally fast otherwise."
                )
            } else {
                format!(
                    "On the control ({control_name}, untouched by AES-NI) {label} runs at {c:.2}x {base_label}{ci}: that much of any difference is the CPU itself."
                )
            };
            let fi = interval_text(factor_interval.as_ref());
            let accel = if (f - 1.0).abs() <= SAME_ACCEL_TOLERANCE || unclear(&factor_interval) {
                format!("After dividing by the control, AES gains nothing extra ({f:.2}x{fi}): no difference in acceleration.")
            } else {
                let (faster, slower) = if f > 1.0 { (label, base_label) } else { (base_label, label) };
                let flags = match (has_aes(base), has_aes(other)) {
                    (true, false) => format!(" {base_label} has AES-NI and {label} does not."),
                    (false, true) => format!(" {label} has AES-NI and {base_label} does not."),
                    _ => String::new(),
                };
                format!(
                    "After dividing by the control, acceleration accounts for a factor of {:.1}{fi} in {faster}'s favour over {slower}.{flags}",
                    if f > 1.0 { f } else { 1.0 / f }
                )
            };
            format!(
                "AES-256-CBC at {}: {label} runs at {a:.2}x {base_label}{}. {cpu} {accel}",
                ByteSize(size),
                interval_text(aes_interval.as_ref())
            )
        }
        _ => format!(
            "{label} and {base_label} have no AES-256-CBC and control (3DES or ChaCha20-Poly1305) points in common (accel, encrypt, 1 thread): measure both with the default ciphers to compare them."
        ),
    };
    Verdict {
        label: label.to_string(),
        aes_ratio,
        control_ratio,
        acceleration_factor,
        aes_interval,
        control_interval,
        factor_interval,
        size_bytes: size,
        sentence,
    }
}

fn speed_rows(records: &[RunRecord]) -> Vec<SpeedRow> {
    let mut rows: Vec<SpeedRow> = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let Some(s) = &r.speed else { continue };
        for p in &s.points {
            let key = |row: &SpeedRow| {
                row.cipher == p.cipher
                    && row.variant == p.variant
                    && row.direction == p.direction
                    && row.size_bytes == p.size_bytes
                    && row.threads == p.threads
            };
            let idx = match rows.iter().position(key) {
                Some(idx) => idx,
                None => {
                    rows.push(SpeedRow {
                        cipher: p.cipher.clone(),
                        variant: p.variant.clone(),
                        direction: p.direction,
                        size_bytes: p.size_bytes,
                        threads: p.threads,
                        values: vec![None; records.len()],
                        not_effective: vec![false; records.len()],
                        rounds: vec![None; records.len()],
                    });
                    rows.len() - 1
                }
            };
            if crate::variants::ineffective(&s.variants, &p.variant).is_some() {
                rows[idx].not_effective[i] = true;
            } else {
                rows[idx].values[i] = Some(p.throughput_bytes_per_sec.median);
                rows[idx].rounds[i] = Some(Rounds::single(
                    crate::ladder::speed_rates(p),
                    Centre::Median,
                ));
            }
        }
    }
    rows.retain(|r| present(&r.values, &r.not_effective) >= 2);
    rows
}

/// Compares records; `labels` name them (host names or directory names).
pub fn analyze(records: &[RunRecord], labels: &[String]) -> Comparison {
    let verdicts = (1..records.len())
        .map(|i| verdict(&records[0], &labels[0], &records[i], &labels[i]))
        .collect();
    let mut not_effective = Vec::new();
    for (r, label) in records.iter().zip(labels) {
        for (layer, variants) in crate::variants::of_record(r) {
            for v in variants.iter().filter(|v| !v.took_effect) {
                not_effective.push((label.clone(), layer, v.name.clone(), v.explanation()));
            }
        }
    }
    Comparison {
        labels: labels.to_vec(),
        differences: differences(records),
        verdicts,
        speed: speed_rows(records),
        layers: layer_rows(records),
        not_effective,
    }
}

/// The sentence under the verdict for each variant that did not take effect.
fn not_effective_lines(c: &Comparison) -> Vec<String> {
    c.not_effective
        .iter()
        .map(|(label, layer, name, why)| {
            format!("{label}, {layer}: {name} did not take effect, so its figures are shown as n/a and no ratio is drawn from them ({why})")
        })
        .collect()
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map(|v| format!("{v:.2}x")).unwrap_or_else(|| "-".into())
}

/// Text: a column per record, then a ratio column per record after the baseline.
fn text_label_columns(labels: &[String]) -> String {
    let mut out = String::new();
    for l in labels {
        out.push_str(&format!(" {:>12}", truncate(l, 12)));
    }
    for l in &labels[1..] {
        out.push_str(&format!(" {:>9}", format!("/{}", truncate(l, 8))));
    }
    out
}

/// A record's cell: the figure, or `n/a` where the variant did not take effect.
fn cell(v: Option<f64>, not_effective: bool, format: &impl Fn(Option<f64>) -> String) -> String {
    if not_effective {
        "n/a".into()
    } else {
        format(v)
    }
}

/// How a ratio cell shows its interval.
#[derive(Clone, Copy, PartialEq)]
enum Cell {
    /// The terminal's narrow column: `1.23x`, and `1.02x?` when the interval holds
    /// 1.0.
    Mark,
    /// Markdown and HTML: `1.23x [1.18-1.29]`, `..., no clear difference`.
    Full,
}

/// A ratio cell against the baseline with its interval: `n/a` if either side did
/// not take effect.
fn ratio_cell(
    values: &[Option<f64>],
    not_effective: &[bool],
    i: usize,
    interval: Option<RatioInterval>,
    style: Cell,
) -> String {
    if not_effective[i] || not_effective[0] {
        return "n/a".into();
    }
    match (interval, style) {
        (Some(x), Cell::Full) => x.display(),
        (Some(x), Cell::Mark) if !x.is_clear() => format!("{}?", fmt_ratio(Some(x.point))),
        _ => fmt_ratio(ratio(values[i], values[0])),
    }
}

/// Text: each record's value, then its ratio to the baseline.
fn text_value_columns(
    values: &[Option<f64>],
    not_effective: &[bool],
    format: impl Fn(Option<f64>) -> String,
    interval: impl Fn(usize) -> Option<RatioInterval>,
) -> String {
    let mut out = String::new();
    for (v, n) in values.iter().zip(not_effective) {
        out.push_str(&format!(" {:>12}", cell(*v, *n, &format)));
    }
    for i in 1..values.len() {
        out.push_str(&format!(
            " {:>9}",
            ratio_cell(values, not_effective, i, interval(i), Cell::Mark)
        ));
    }
    out
}

/// Markdown: the header and separator of a table with `first` columns before the
/// records' values and ratios.
fn md_table_head(first: &[&str], labels: &[String]) -> String {
    format!(
        "| {} | {} | {} |\n|{}{}{}\n",
        first.join(" | "),
        labels.join(" | "),
        labels[1..]
            .iter()
            .map(|l| format!("{l} / {}", labels[0]))
            .collect::<Vec<_>>()
            .join(" | "),
        "---|".repeat(first.len()),
        "---:|".repeat(labels.len()),
        "---:|".repeat(labels.len() - 1)
    )
}

/// Markdown: each record's value, then its ratio to the baseline, as cells.
fn md_value_cells(
    values: &[Option<f64>],
    not_effective: &[bool],
    format: impl Fn(Option<f64>) -> String,
    interval: impl Fn(usize) -> Option<RatioInterval>,
) -> String {
    values
        .iter()
        .zip(not_effective)
        .map(|(v, n)| cell(*v, *n, &format))
        .chain(
            (1..values.len())
                .map(|i| ratio_cell(values, not_effective, i, interval(i), Cell::Full)),
        )
        .collect::<Vec<_>>()
        .join(" | ")
}

/// HTML: header cells for the records' values and ratios.
fn html_label_headers(labels: &[String]) -> String {
    let mut out = String::new();
    for l in labels {
        out.push_str(&format!("<th>{}</th>", escape(l)));
    }
    for l in &labels[1..] {
        out.push_str(&format!("<th>{} / {}</th>", escape(l), escape(&labels[0])));
    }
    out
}

/// HTML: each record's value, then its ratio to the baseline, as cells.
fn html_value_cells(
    values: &[Option<f64>],
    not_effective: &[bool],
    format: impl Fn(Option<f64>) -> String,
    interval: impl Fn(usize) -> Option<RatioInterval>,
) -> String {
    let mut out = String::new();
    for (v, n) in values.iter().zip(not_effective) {
        out.push_str(&format!("<td>{}</td>", cell(*v, *n, &format)));
    }
    for i in 1..values.len() {
        out.push_str(&format!(
            "<td>{}</td>",
            escape(&ratio_cell(
                values,
                not_effective,
                i,
                interval(i),
                Cell::Full
            ))
        ));
    }
    out
}

fn speed_value(v: Option<f64>) -> String {
    v.map(format_bytes_per_sec).unwrap_or_else(|| "-".into())
}

/// Terminal rendering.
pub fn text(c: &Comparison) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "comparing {} (baseline: {})\n",
        c.labels.join(", "),
        c.labels[0]
    ));
    out.push_str("\nenvironment differences:\n");
    if c.differences.is_empty() {
        out.push_str("  none: same CPU, flags, kernel and OpenSSL\n");
    }
    for d in &c.differences {
        out.push_str(&format!("  {}:\n", d.field));
        for (l, v) in c.labels.iter().zip(&d.values) {
            out.push_str(&format!("    {l:<16} {v}\n"));
        }
    }
    out.push_str("\nverdict:\n");
    for v in &c.verdicts {
        out.push_str(&format!("  {}\n", v.sentence));
    }
    for line in not_effective_lines(c) {
        out.push_str(&format!("  {line}\n"));
    }
    if !c.speed.is_empty() {
        out.push_str("\nlayer 1 (median throughput; ratio to the baseline):\n");
        out.push_str(&format!(
            "  {:<24} {:<8} {:<7} {:>7} {:>3}",
            "cipher", "variant", "dir", "size", "thr"
        ));
        out.push_str(&text_label_columns(&c.labels));
        out.push('\n');
        for r in &c.speed {
            out.push_str(&format!(
                "  {:<24} {:<8} {:<7} {:>7} {:>3}",
                r.cipher,
                r.variant,
                r.direction.as_str(),
                ByteSize(r.size_bytes).to_string(),
                r.threads
            ));
            out.push_str(&text_value_columns(
                &r.values,
                &r.not_effective,
                speed_value,
                |i| r.interval(i),
            ));
            out.push('\n');
        }
    }
    if !c.layers.is_empty() {
        out.push_str("\nthe ladder and layers 2-4 (median; ratio to the baseline):\n");
        out.push_str(&format!("  {:<7} {:<58}", "layer", "what"));
        out.push_str(&text_label_columns(&c.labels));
        out.push('\n');
        for r in &c.layers {
            out.push_str(&format!("  {:<7} {:<58}", r.layer, truncate(&r.what, 58)));
            out.push_str(&text_value_columns(
                &r.values,
                &r.not_effective,
                |v| r.format(v),
                |i| r.interval(i),
            ));
            out.push('\n');
        }
    }
    if !c.speed.is_empty() || !c.layers.is_empty() {
        out.push_str(&format!(
            "(? marks a ratio whose {:.0} % bootstrap interval holds 1.0: no clear difference; --out DIR writes compare.md and compare.html with every interval)\n",
            cipherbench_model::interval::LEVEL * 100.0
        ));
    }
    out
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// Markdown rendering (for a pull request or a chat).
pub fn markdown(c: &Comparison) -> String {
    let mut out = format!(
        "# cipherbench compare: {}\n\nBaseline: **{}**.\n\n## Environment differences\n\n",
        c.labels.join(" vs "),
        c.labels[0]
    );
    if c.differences.is_empty() {
        out.push_str("None: same CPU, flags, kernel and OpenSSL.\n");
    } else {
        out.push_str(&format!(
            "| field | {} |\n|---|{}\n",
            c.labels.join(" | "),
            "---|".repeat(c.labels.len())
        ));
        for d in &c.differences {
            out.push_str(&format!(
                "| {} | {} |\n",
                d.field,
                d.values
                    .iter()
                    .map(|v| v.replace('|', "\\|"))
                    .collect::<Vec<_>>()
                    .join(" | ")
            ));
        }
    }
    out.push_str("\n## Verdict\n\n");
    for v in &c.verdicts {
        out.push_str(&format!("- {}\n", v.sentence));
    }
    for line in not_effective_lines(c) {
        out.push_str(&format!("- **{line}**\n"));
    }
    if !c.speed.is_empty() {
        out.push_str("\n## Layer 1\n\n");
        out.push_str(&md_table_head(
            &["cipher", "variant", "direction", "size", "threads"],
            &c.labels,
        ));
        for r in &c.speed {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                r.cipher,
                r.variant,
                r.direction.as_str(),
                ByteSize(r.size_bytes),
                r.threads,
                md_value_cells(&r.values, &r.not_effective, speed_value, |i| r.interval(i))
            ));
        }
    }
    if !c.layers.is_empty() {
        out.push_str("\n## The ladder and layers 2 to 4\n\n");
        out.push_str(&md_table_head(&["layer", "what"], &c.labels));
        for r in &c.layers {
            out.push_str(&format!(
                "| {} | {} | {} |\n",
                r.layer,
                r.what.replace('|', "\\|"),
                md_value_cells(
                    &r.values,
                    &r.not_effective,
                    |v| r.format(v),
                    |i| r.interval(i)
                )
            ));
        }
    }
    out
}

/// A self-contained HTML page.
pub fn html(c: &Comparison) -> String {
    let mut body = format!(
        "<h1>cipherbench compare</h1><p class=\"muted\">{} · baseline <b>{}</b></p><h2>Environment differences</h2>",
        escape(&c.labels.join(" vs ")),
        escape(&c.labels[0])
    );
    if c.differences.is_empty() {
        body.push_str("<p>None: same CPU, flags, kernel and OpenSSL.</p>");
    } else {
        body.push_str("<div class=\"scroll\"><table><tr><th>field</th>");
        for l in &c.labels {
            body.push_str(&format!("<th class=\"l\">{}</th>", escape(l)));
        }
        body.push_str("</tr>");
        for d in &c.differences {
            body.push_str(&format!("<tr><td>{}</td>", escape(&d.field)));
            for v in &d.values {
                body.push_str(&format!("<td class=\"l\">{}</td>", escape(v)));
            }
            body.push_str("</tr>");
        }
        body.push_str("</table></div>");
    }
    body.push_str("<h2>Verdict</h2><ul>");
    for v in &c.verdicts {
        body.push_str(&format!("<li>{}</li>", escape(&v.sentence)));
    }
    for line in not_effective_lines(c) {
        body.push_str(&format!("<li class=\"bad\">{}</li>", escape(&line)));
    }
    body.push_str("</ul>");
    if !c.speed.is_empty() {
        body.push_str("<h2>Layer 1</h2><div class=\"scroll\"><table><tr><th class=\"l\">cipher</th><th class=\"l\">variant</th><th class=\"l\">direction</th><th>size</th><th>threads</th>");
        body.push_str(&html_label_headers(&c.labels));
        body.push_str("</tr>");
        for r in &c.speed {
            body.push_str(&format!(
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td>",
                escape(&r.cipher),
                escape(&r.variant),
                r.direction.as_str(),
                ByteSize(r.size_bytes),
                r.threads
            ));
            body.push_str(&html_value_cells(
                &r.values,
                &r.not_effective,
                speed_value,
                |i| r.interval(i),
            ));
            body.push_str("</tr>");
        }
        body.push_str("</table></div>");
    }
    if !c.layers.is_empty() {
        body.push_str("<h2>The ladder and layers 2 to 4</h2><div class=\"scroll\"><table id=\"table-compare-layers\"><tr><th class=\"l\">layer</th><th class=\"l\">what</th>");
        body.push_str(&html_label_headers(&c.labels));
        body.push_str("</tr>");
        for r in &c.layers {
            body.push_str(&format!(
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td>",
                r.layer,
                escape(&r.what)
            ));
            body.push_str(&html_value_cells(
                &r.values,
                &r.not_effective,
                |v| r.format(v),
                |i| r.interval(i),
            ));
            body.push_str("</tr>");
        }
        body.push_str("</table></div>");
    }
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>cipherbench compare</title><style>{}</style></head><body>{body}</body></html>\n",
        crate::html::STYLE
    )
}
