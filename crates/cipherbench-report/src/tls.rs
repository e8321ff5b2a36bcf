//! Layer 3 renderings: the terminal tables, `tls.csv` (one row per sweep point),
//! `tls-ramp.csv` (one row per ramp second), and the report section with the studies'
//! figures: maximum throughput by file size per core count (Figure 6 of Intel's nginx
//! study, seeds 000/003), nginx CPU at that point (Figure 7), and
//! attempted/successful/unsuccessful under the ramp (Table 1 and Figure 2 of the
//! IXP425 offload paper, seed 002). Pure functions of the record.

use crate::csv::field;
use crate::svg::{escape, BarChart, Line, LineChart, Series};
use cipherbench_model::interval::RatioInterval;
use cipherbench_model::tls::{Limit, RampResults, SweepPoint, SweepResults, TlsResults};
use cipherbench_model::units::{format_bits_per_sec, ByteSize};
use cipherbench_model::variant::VariantRecord;

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn reasons(map: &std::collections::BTreeMap<cipherbench_model::tls::FailureReason, u64>) -> String {
    if map.is_empty() {
        return "-".into();
    }
    map.iter()
        .map(|(k, v)| format!("{} {v}", k.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The variant records of every nginx started, for looking a variant up by name.
pub fn records(t: &TlsResults) -> Vec<VariantRecord> {
    t.servers
        .iter()
        .filter(|s| s.kind == "nginx")
        .map(|s| s.variant.clone())
        .collect()
}

/// A ratio of two sweep points the tables and the chart show.
#[derive(Debug, Clone, PartialEq)]
pub struct TlsRatio {
    /// `GCM / CBC-SHA1` or `accel / noaesni AES128-GCM-SHA256`: what is divided,
    /// without the point (the chart's series).
    pub kind: String,
    /// File size.
    pub size_bytes: u64,
    /// Cores under test.
    pub cores: usize,
    /// Throughput ratio with the sum of the two points' spreads (records written
    /// before the intervals were kept show only this).
    pub ratio: Option<cipherbench_model::stats::Ratio>,
    /// Its 95 % interval ([`cipherbench_model::tls::gain_rounds`]).
    pub interval: Option<RatioInterval>,
    /// What stands in its place if a variant in it did not take effect.
    pub not_applicable: Option<String>,
}

/// `GCM / CBC-SHA1  16 MiB x1`: a comparison's kind and its point.
fn point_label(kind: &str, size_bytes: u64, cores: usize) -> String {
    format!("{kind} {} x{cores}", ByteSize(size_bytes))
}

impl TlsRatio {
    /// `GCM / CBC-SHA1  16 MiB x1 accel`-style label: the kind and the point.
    pub fn label(&self) -> String {
        point_label(&self.kind, self.size_bytes, self.cores)
    }

    /// `4.00x [3.91-4.09]`, `1.02x [0.97-1.08], no clear difference`, or without an
    /// interval `4.00x ±3 % (no interval)`; the n/a line in place of a ratio from a
    /// variant that did not take effect.
    pub fn display(&self) -> String {
        if let Some(na) = &self.not_applicable {
            return na.clone();
        }
        match (self.interval, self.ratio) {
            (Some(i), _) => format!(
                "{}{}",
                i.display(),
                cipherbench_model::tls::interval_note(&i)
            ),
            (None, Some(r)) => format!(
                "{:.2}x ±{:.0} % (no interval)",
                r.value,
                r.rel_spread * 100.0
            ),
            (None, None) => "-".into(),
        }
    }
}

/// Two points the sweep compares: what is divided, the two sides' names, the points,
/// and the n/a line if a variant in it did not take effect.
struct Pair<'a> {
    kind: String,
    names: (String, String),
    a: &'a SweepPoint,
    b: &'a SweepPoint,
    not_applicable: Option<String>,
}

/// GCM over CBC-SHA1 for each variant, and for each suite the variant pairs of the
/// speed tables (`accel / noaesni` per library, a later library's accel over the
/// baseline's, a provider or engine variant over its library's accel), at each file
/// size and core count both points have.
fn pairs<'a>(s: &'a SweepResults, records: &[VariantRecord]) -> Vec<Pair<'a>> {
    let mut out = Vec::new();
    for a in &s.points {
        if a.suite != "AES128-GCM-SHA256" {
            continue;
        }
        if let Some(b) = s.point("AES128-SHA", a.size_bytes, a.cores, &a.variant) {
            out.push(Pair {
                kind: format!("GCM / CBC-SHA1 {}", a.variant),
                names: (a.suite.clone(), b.suite.clone()),
                a,
                b,
                not_applicable: crate::variants::not_applicable(records, &[&a.variant]),
            });
        }
    }
    for (_, top, bottom) in crate::text::ratio_rows(&s.config.variants) {
        for a in s.points.iter().filter(|p| p.variant == top) {
            if let Some(b) = s.point(&a.suite, a.size_bytes, a.cores, &bottom) {
                let names = [top.as_str(), bottom.as_str()];
                let na = match cipherbench_model::tls::suite_cipher(&a.suite) {
                    Some(c) => crate::variants::not_applicable_for(records, &names, c),
                    None => crate::variants::not_applicable(records, &names),
                };
                out.push(Pair {
                    kind: format!("{top} / {bottom} {}", a.suite),
                    names: (top.clone(), bottom.clone()),
                    a,
                    b,
                    not_applicable: na,
                });
            }
        }
    }
    out
}

/// Every throughput ratio of the sweep ([`pairs`]). None for a sweep at a fixed
/// rate (`--rate`): there every point's throughput is the rate by construction, and
/// [`cpu_at_rate`] compares what the load cost nginx instead.
pub fn ratios(s: &SweepResults, records: &[VariantRecord]) -> Vec<TlsRatio> {
    if s.config.open_loop_rate.is_some() {
        return Vec::new();
    }
    pairs(s, records)
        .into_iter()
        .map(|p| TlsRatio {
            kind: p.kind,
            size_bytes: p.a.size_bytes,
            cores: p.a.cores,
            ratio: SweepResults::ratio(p.a, p.b),
            interval: SweepResults::ratio_interval(p.a, p.b),
            not_applicable: p.not_applicable,
        })
        .collect()
}

/// Two points of a sweep at a fixed rate compared by what the same load cost
/// nginx: the CPU its workers used, and that CPU per response.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuAtRate {
    /// `accel / noaesni AES128-GCM-SHA256` or `GCM / CBC-SHA1 accel`.
    pub kind: String,
    /// The two sides as the sentence names them (variants, or suites).
    pub names: (String, String),
    /// File size.
    pub size_bytes: u64,
    /// Cores under test.
    pub cores: usize,
    /// The rate both were measured at, requests per second.
    pub rate: f64,
    /// Cores of nginx busy over the window (utilisation x cores), each side.
    pub cores_used: (f64, f64),
    /// nginx CPU per successful response, ms, each side (None without responses).
    pub per_response_ms: (Option<f64>, Option<f64>),
    /// The second's CPU over the first's with its 95 % interval, where the two took
    /// turns over enough rounds ([`SweepResults::cpu_ratio_interval`]).
    pub interval: Option<RatioInterval>,
    /// What stands in its place if a variant in it did not take effect.
    pub not_applicable: Option<String>,
}

impl CpuAtRate {
    /// The kind and the point, as [`TlsRatio::label`].
    pub fn label(&self) -> String {
        point_label(&self.kind, self.size_bytes, self.cores)
    }

    /// The second's CPU over the first's.
    pub fn ratio(&self) -> f64 {
        self.cores_used.1 / self.cores_used.0
    }

    /// `at 200 req/s nginx used 0.17 of a core with accel, 0.75 with noaesni: 4.41x
    /// [4.10-4.70] (CPU per response 0.85 ms, 3.75 ms)`; the n/a line in place of it
    /// from a variant that did not take effect.
    pub fn sentence(&self) -> String {
        if let Some(na) = &self.not_applicable {
            return na.clone();
        }
        let ratio = match &self.interval {
            Some(i) => format!(
                "{}{}",
                i.display(),
                cipherbench_model::tls::interval_note(i)
            ),
            None => format!("{:.2}x (one window each, no interval)", self.ratio()),
        };
        let per_response = match self.per_response_ms {
            (Some(a), Some(b)) => format!(" (CPU per response {a:.2} ms, {b:.2} ms)"),
            _ => String::new(),
        };
        format!(
            "at {} req/s nginx used {:.2} of a core with {}, {:.2} with {}: {}{}",
            trim(self.rate),
            self.cores_used.0,
            self.names.0,
            self.cores_used.1,
            self.names.1,
            ratio,
            per_response
        )
    }
}

/// For a sweep at a fixed rate (`--rate`), each pair of [`pairs`] compared by
/// nginx's CPU; empty for a searched sweep, and a pair without CPU figures left out.
pub fn cpu_at_rate(s: &SweepResults, records: &[VariantRecord]) -> Vec<CpuAtRate> {
    let Some(rate) = s.config.open_loop_rate else {
        return Vec::new();
    };
    let used = |p: &SweepPoint| {
        p.server_cpu
            .as_ref()
            .map(|c| c.total * p.cores as f64)
            .filter(|u| *u > 0.0)
    };
    let per_response =
        |p: &SweepPoint, u: f64| (p.requests_per_sec > 0.0).then(|| u / p.requests_per_sec * 1e3);
    pairs(s, records)
        .into_iter()
        .filter_map(|p| {
            let (ua, ub) = (used(p.a)?, used(p.b)?);
            Some(CpuAtRate {
                size_bytes: p.a.size_bytes,
                cores: p.a.cores,
                rate: p.a.open_loop_rate.unwrap_or(rate),
                cores_used: (ua, ub),
                per_response_ms: (per_response(p.a, ua), per_response(p.b, ub)),
                interval: SweepResults::cpu_ratio_interval(p.a, p.b),
                kind: p.kind,
                names: p.names,
                not_applicable: p.not_applicable,
            })
        })
        .collect()
}

/// The header of the fixed-rate comparison in the terminal and summary.md.
pub const CPU_AT_RATE_HEADER: &str = "nginx CPU at the given rate (at a fixed --rate the throughput is the rate by construction, so no throughput ratio is drawn; the ratio is the second's CPU over the first's)";

/// The ratios as a bar chart, one series per kind, one category per file size and
/// core count, each bar with its interval's whisker.
fn ratio_chart(rs: &[TlsRatio]) -> String {
    let mut kinds: Vec<&str> = Vec::new();
    let mut points: Vec<(u64, usize)> = Vec::new();
    for r in rs.iter().filter(|r| r.not_applicable.is_none()) {
        if !kinds.contains(&r.kind.as_str()) {
            kinds.push(&r.kind);
        }
        if !points.contains(&(r.size_bytes, r.cores)) {
            points.push((r.size_bytes, r.cores));
        }
    }
    if kinds.is_empty() {
        return String::new();
    }
    let find = |kind: &str, at: (u64, usize)| {
        rs.iter()
            .find(|r| r.not_applicable.is_none() && r.kind == kind && (r.size_bytes, r.cores) == at)
    };
    let series = kinds
        .iter()
        .map(|k| {
            Series::new(
                *k,
                points
                    .iter()
                    .map(|&at| find(k, at).and_then(|r| r.ratio).map(|r| r.value))
                    .collect(),
            )
            .with_intervals(
                points
                    .iter()
                    .map(|&at| {
                        find(k, at)
                            .and_then(|r| r.interval)
                            .map(|i| (i.low, i.high))
                    })
                    .collect(),
            )
        })
        .collect();
    let chart = BarChart {
        id: "fig-tls-ratios".into(),
        title: "TLS throughput ratios".into(),
        description: "Each ratio of two sweep points' throughputs by file size and core count, with its 95 % interval as a whisker (paired round by round where the two points took turns, else over the two final windows' per-interval throughputs). Above 1 means the first is faster; a whisker across 1 is no clear difference.".into(),
        categories: points
            .iter()
            .map(|&(z, c)| format!("{} x{c}", ByteSize(z)))
            .collect(),
        series,
        y_label: "ratio (×)".into(),
        reference: Some(1.0),
        format: |v| format!("{v:.2}×"),
    };
    format!(
        "<figure>{}<figcaption>The sweep's ratios (GCM over CBC-SHA1, accel over noaesni). The dashed line is parity; a whisker is the ratio's 95 % interval (none where a record kept too few intervals).</figcaption></figure>",
        chart.render()
    )
}

/// The target the capacity line plans for when the user gave none, Gbit/s.
pub const DEFAULT_TARGET_GBPS: f64 = 10.0;

/// nginx counts as CPU-bound at a point when its workers used at least this share
/// of the cores under test over the window.
pub const CPU_BOUND: f64 = 0.85;

/// One suite's capacity line: what one core of nginx serves, and how many a target
/// needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Capacity {
    /// Suite.
    pub suite: String,
    /// Variant.
    pub variant: String,
    /// The file size the line is drawn from: the largest in the sweep (bulk
    /// transfer, where the cipher's cost dominates the handshake's).
    pub size_bytes: u64,
    /// Throughput per core nginx used: the sweep's throughput divided by the CPU
    /// its workers consumed (cores x mean utilisation), at the best core count.
    pub bits_per_sec_per_core: f64,
    /// The core count that figure comes from.
    pub at_cores: usize,
    /// Core counts measured, in order, with nginx's mean utilisation at each.
    pub utilisation: Vec<(usize, f64)>,
    /// The first core count where nginx was no longer CPU-bound (below
    /// [`CPU_BOUND`]): from there the bottleneck was elsewhere.
    pub not_cpu_bound_from: Option<usize>,
    /// The target, Gbit/s.
    pub target_gbps: f64,
    /// Cores for the target at the measured per-core rate, rounded up.
    pub cores_needed: u64,
    /// The fixed rate (`--rate`) the sweep was measured at, requests per second: then
    /// the rate given, not the generator or the sockets, set the load.
    pub open_loop_rate: Option<f64>,
    /// What the load generator cost at the same point, where it used any CPU.
    pub generator: Option<GeneratorCost>,
}

/// The load generator's cost at a capacity line's point: what a test bed for the
/// target needs on the client's side, and how many nginx cores one generator core
/// keeps busy (nginx's CPU per Gbit/s over the generator's).
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratorCost {
    /// Generator cores per Gbit/s (its threads' CPU time over the window).
    pub cores_per_gbps: f64,
    /// Generator cores for the target, rounded up.
    pub cores_needed: u64,
    /// nginx cores one generator core keeps busy.
    pub nginx_per_generator: f64,
    /// Whether the responses were read by sample (`--verify sampled`), not whole.
    pub by_sample: bool,
}

/// The capacity line of every suite and variant in the sweep, for `target_gbps`.
/// Only valid points with nginx CPU figures count; a suite with none has no line.
pub fn capacity(s: &SweepResults, target_gbps: f64) -> Vec<Capacity> {
    let mut keys: Vec<(String, String)> = Vec::new();
    for p in &s.points {
        let k = (p.suite.clone(), p.variant.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut out = Vec::new();
    for (suite, variant) in keys {
        let usable = |p: &&SweepPoint| {
            p.suite == suite
                && p.variant == variant
                && p.valid
                && p.bits_per_sec() > 0.0
                && p.server_cpu.as_ref().is_some_and(|c| c.total > 0.0)
        };
        let Some(size) = s.points.iter().filter(usable).map(|p| p.size_bytes).max() else {
            continue;
        };
        let mut points: Vec<&SweepPoint> = s
            .points
            .iter()
            .filter(usable)
            .filter(|p| p.size_bytes == size)
            .collect();
        points.sort_by_key(|p| p.cores);
        let per_core = |p: &SweepPoint| {
            let used = p.cores as f64 * p.server_cpu.as_ref().map_or(0.0, |c| c.total);
            p.bits_per_sec() / used
        };
        let best = points
            .iter()
            .max_by(|a, b| per_core(a).total_cmp(&per_core(b)))
            .expect("at least one point");
        let rate = per_core(best);
        let gbps = best.bits_per_sec() / 1e9;
        let generator_cores = best.generator_cpu * best.generator_threads as f64;
        let generator = (generator_cores > 0.0 && gbps > 0.0).then(|| {
            let cores_per_gbps = generator_cores / gbps;
            GeneratorCost {
                cores_per_gbps,
                cores_needed: (target_gbps * cores_per_gbps).ceil().max(1.0) as u64,
                nginx_per_generator: (1e9 / rate) / cores_per_gbps,
                by_sample: best
                    .verification
                    .as_ref()
                    .is_some_and(|v| v.sampled && v.sampled_responses > 0),
            }
        });
        let utilisation: Vec<(usize, f64)> = points
            .iter()
            .map(|p| (p.cores, p.server_cpu.as_ref().map_or(0.0, |c| c.total)))
            .collect();
        out.push(Capacity {
            not_cpu_bound_from: utilisation
                .iter()
                .find(|(_, u)| *u < CPU_BOUND)
                .map(|(c, _)| *c),
            suite: suite.clone(),
            variant: variant.clone(),
            size_bytes: size,
            bits_per_sec_per_core: rate,
            at_cores: best.cores,
            utilisation,
            target_gbps,
            cores_needed: (target_gbps * 1e9 / rate).ceil().max(1.0) as u64,
            open_loop_rate: s.config.open_loop_rate,
            generator,
        });
    }
    out
}

impl Capacity {
    /// One sentence for a person.
    pub fn sentence(&self) -> String {
        let scaling = match self.not_cpu_bound_from {
            None => format!(
                "nginx was CPU-bound at every core count measured ({})",
                self.cores_list()
            ),
            Some(c) if Some(c) == self.utilisation.first().map(|(k, _)| *k) => format!(
                "nginx was never CPU-bound in this sweep (at most {:.0} % of its cores): {}, so the rate is per CPU-second nginx spent, an estimate of what a saturated core serves",
                self.utilisation
                    .iter()
                    .map(|(_, u)| *u)
                    .fold(0.0, f64::max)
                    * 100.0,
                match self.open_loop_rate {
                    Some(r) => format!("the load was the rate given (--rate {})", trim(r)),
                    None => "the load generator or the sockets limited it".into(),
                }
            ),
            Some(c) if self.open_loop_rate.is_some() => format!(
                "from {c} cores nginx was not CPU-bound at the rate given (--rate {}): more cores had the same load to share",
                trim(self.open_loop_rate.unwrap_or_default())
            ),
            Some(c) => {
                let u = self
                    .utilisation
                    .iter()
                    .find(|(k, _)| *k == c)
                    .map_or(0.0, |(_, u)| *u);
                format!(
                    "scaling stopped being CPU-bound at {c} cores (nginx used {:.0} % of them): beyond that the bottleneck was elsewhere (the load generator, the sockets)",
                    u * 100.0
                )
            }
        };
        let generator = self.generator.as_ref().map_or(String::new(), |g| {
            format!(
                " of nginx and {} of load generator ({:.3} core per Gbit/s reading {}: one generator core keeps {:.1} nginx cores busy)",
                g.cores_needed,
                g.cores_per_gbps,
                if g.by_sample { "by sample" } else { "every byte" },
                g.nginx_per_generator
            )
        });
        format!(
            "{} {}: {} per core of nginx ({} files, {} core(s)); {} Gbit/s needs {} core(s){}; {}.",
            self.suite,
            self.variant,
            format_bits_per_sec(self.bits_per_sec_per_core / 8.0),
            ByteSize(self.size_bytes),
            self.at_cores,
            trim(self.target_gbps),
            self.cores_needed,
            generator,
            scaling
        )
    }

    fn cores_list(&self) -> String {
        self.utilisation
            .iter()
            .map(|(c, _)| c.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The capacity lines as text, with how the target was chosen.
pub fn capacity_text(s: &SweepResults, target_gbps: Option<f64>) -> String {
    let lines = capacity(s, target_gbps.unwrap_or(DEFAULT_TARGET_GBPS));
    if lines.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "capacity (throughput / nginx CPU used; target {} Gbit/s{}):\n",
        trim(target_gbps.unwrap_or(DEFAULT_TARGET_GBPS)),
        if target_gbps.is_none() {
            ", the default: --target-gbps to change"
        } else {
            ""
        }
    );
    for c in lines {
        out.push_str(&format!("  {}\n", c.sentence()));
    }
    out
}

/// The plain-HTTP ceiling (`--plain-http`), one line per size and core count: nginx
/// serving the same file over plain HTTP on the same cores, `sendfile` on and off,
/// and each TLS point's throughput as a share of the `sendfile off` figure (the
/// same copies through nginx's buffers, no cipher). Empty without plain points.
pub fn plain_text(s: &SweepResults) -> String {
    use cipherbench_model::tls::{PLAIN_COPY, PLAIN_SENDFILE};
    let mut out = String::new();
    let mut seen: Vec<(u64, usize)> = Vec::new();
    for p in &s.plain_points {
        if seen.contains(&(p.size_bytes, p.cores)) {
            continue;
        }
        seen.push((p.size_bytes, p.cores));
        let figure = |variant: &str| {
            s.plain_point(p.size_bytes, p.cores, variant).map(|q| {
                format!(
                    "{}{} (nginx {}){}",
                    if q.instrument_limit().is_some() {
                        ">= "
                    } else {
                        ""
                    },
                    format_bits_per_sec(q.throughput_bytes_per_sec),
                    q.server_cpu
                        .as_ref()
                        .map_or("-".to_string(), |c| format!("{:.0} %", c.total * 100.0)),
                    if q.valid { "" } else { " [INVALID]" }
                )
            })
        };
        let copy = s
            .plain_point(p.size_bytes, p.cores, PLAIN_COPY)
            .filter(|q| q.valid && q.throughput_bytes_per_sec > 0.0);
        let shares: Vec<String> = copy
            .map(|c| {
                s.points
                    .iter()
                    .filter(|t| t.size_bytes == p.size_bytes && t.cores == p.cores && t.valid)
                    .map(|t| {
                        format!(
                            "{} {} {:.0} %",
                            t.suite,
                            t.variant,
                            100.0 * t.throughput_bytes_per_sec / c.throughput_bytes_per_sec
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push_str(&format!(
            "plain HTTP on the same cores (the ceiling), {} x{}: sendfile on {}, off {}{}\n",
            ByteSize(p.size_bytes),
            p.cores,
            figure(PLAIN_SENDFILE).unwrap_or_else(|| "-".into()),
            figure(PLAIN_COPY).unwrap_or_else(|| "-".into()),
            if shares.is_empty() {
                String::new()
            } else {
                format!("; of sendfile off, TLS keeps: {}", shares.join(", "))
            }
        ));
    }
    out
}

/// How the generator read the responses of a sweep's points or a ramp's runs, in
/// one line: by sample (what share of the bytes it opened and compared) or whole.
/// Empty for a run recorded before the sampled path, or read by agents alone.
fn verification_text(vs: &[cipherbench_model::tls::Verification]) -> String {
    if vs.is_empty() {
        return String::new();
    }
    let sum = |f: fn(&cipherbench_model::tls::Verification) -> u64| vs.iter().map(f).sum::<u64>();
    let sampled = sum(|v| v.sampled_responses);
    let whole = sum(|v| v.openssl_responses);
    let opened = sum(|v| v.bytes_opened);
    let discarded = sum(|v| v.bytes_discarded);
    let compared = sum(|v| v.bytes_compared);
    if sampled == 0 {
        return format!(
            "responses checked: all {whole} read whole through OpenSSL (every byte decrypted{})\n",
            if vs.iter().any(|v| v.sampled) {
                "; --verify sampled reads AEAD responses of 1 MiB or more by sample"
            } else {
                ""
            }
        );
    }
    let share = |x: u64| 100.0 * x as f64 / (opened + discarded).max(1) as f64;
    format!(
        "responses checked: {sampled} by sample (one body record in {:.0} and one response in {:.0} opened whole; {:.1} % of their bytes opened, {:.1} % compared with the file, the rest discarded unread), {whole} whole through OpenSSL\n",
        1.0 / vs[0].rate.max(1e-9),
        1.0 / vs[0].whole.max(1e-9),
        share(opened),
        share(compared),
    )
}

/// Layer 3 as terminal tables, with the capacity line for `target_gbps` (or the
/// default).
#[expect(
    clippy::too_many_lines,
    reason = "layer 3's terminal tables in reading order, one block per table"
)]
pub fn text(t: &TlsResults, target_gbps: Option<f64>) -> String {
    let mut out = String::new();
    let records = records(t);
    if let Some(s) = &t.sweep {
        out.push_str(&format!(
            "\nTLS sweep: highest throughput with the first byte within {:.1} s (decimal units: 1 Gbit/s = 10^9 bit/s)\n",
            s.config.latency_limit_ns as f64 / 1e9
        ));
        let w = s
            .points
            .iter()
            .map(|p| p.variant.len())
            .chain([8])
            .max()
            .unwrap_or(8);
        out.push_str(&format!(
            "{:<20} {:>8} {:>5} {:<w$} {:>11} {:>8} {:>7} {:>9} {:>9} {:>9} {:>10} {:>8}  {}\n",
            "suite",
            "size",
            "cores",
            "variant",
            "throughput",
            "req/s",
            "clients",
            "p50 ms",
            "p99 ms",
            "TTFB max",
            "nginx CPU",
            "gen CPU",
            "negotiated"
        ));
        for p in &s.points {
            out.push_str(&format!(
                "{:<20} {:>8} {:>5} {:<w$} {:>10}{} {:>8.1} {:>7} {:>9.1} {:>9.1} {:>9.1} {:>10} {:>7.0}%  {}{}\n",
                p.suite,
                ByteSize(p.size_bytes).to_string(),
                p.cores,
                crate::variants::text_name_for(
                    &records,
                    &p.variant,
                    cipherbench_model::tls::suite_cipher(&p.suite),
                ),
                format_bits_per_sec(p.throughput_bytes_per_sec),
                crate::machine::flag(
                    &p.noise_findings(),
                    p.interval_throughput_bytes_per_sec.high_spread()
                ),
                p.requests_per_sec,
                p.concurrency,
                ms(p.latency.p50_ns),
                ms(p.latency.p99_ns),
                ms(p.max_first_byte_ns),
                p.server_cpu
                    .as_ref()
                    .map(|c| format!("{:.0} %", c.total * 100.0))
                    .unwrap_or_else(|| "-".into()),
                p.generator_cpu * 100.0,
                p.negotiated_suite.as_deref().unwrap_or("-"),
                if !p.valid {
                    format!("  INVALID: {}", invalid_text(p))
                } else if let Some(why) = p.instrument_limit() {
                    format!("  LOWER BOUND: {why}")
                } else {
                    String::new()
                }
            ));
        }
        if s.points.iter().any(|p| p.search.is_some()) {
            out.push_str("what limited each point (generator CPU per thread):\n");
            for p in &s.points {
                if let Some(x) = &p.search {
                    out.push_str(&format!(
                        "  {} {} x{} {}: {} [{}]; {}\n",
                        p.suite,
                        ByteSize(p.size_bytes),
                        p.cores,
                        p.variant,
                        limit_name(x.limit),
                        p.generator_cpu_per_thread
                            .iter()
                            .map(|c| format!("{:.0} %", c * 100.0))
                            .collect::<Vec<_>>()
                            .join(", "),
                        x.explanation
                    ));
                }
            }
        }
        for k in &s.skipped_cores {
            out.push_str(&format!("  x{}: not measured: {}\n", k.cores, k.reason));
        }
        let vs: Vec<_> = s.points.iter().filter_map(|p| p.verification).collect();
        out.push_str(&verification_text(&vs));
        out.push_str(&plain_text(s));
        let rs = ratios(s, &records);
        if !rs.is_empty() {
            out.push_str(&format!(
                "ratios (throughput; [{:.0} % interval, {}]):\n",
                cipherbench_model::interval::LEVEL * 100.0,
                cipherbench_model::tls::SWEEP_INTERVAL_BASIS
            ));
            for r in &rs {
                out.push_str(&format!("  {:<44} {}\n", r.label(), r.display()));
            }
        }
        let cs = cpu_at_rate(s, &records);
        if !cs.is_empty() {
            out.push_str(&format!("{CPU_AT_RATE_HEADER}:\n"));
            for c in &cs {
                out.push_str(&format!("  {:<44} {}\n", c.label(), c.sentence()));
            }
        }
        out.push_str(&crate::keystore::text_sweep(t));
        out.push_str(&format!(
            "(~ marks a point whose per-interval throughput spread more than ±{:.0} %; TTFB = time to first byte, ms)\n",
            cipherbench_model::stats::HIGH_SPREAD * 100.0
        ));
        if s.points.iter().any(|p| !p.noise_findings().is_empty()) {
            out.push_str(&crate::machine::noise_legend());
        }
        out.push_str(&capacity_text(s, target_gbps));
    }
    if let Some(r) = &t.ramp {
        out.push_str(&format!(
            "\nTLS ramp: open loop, 0 -> {} req/s over {:.0} s, timeout {:.1} s, {} worker(s)\n",
            r.config.target_rate,
            r.config.duration_ns as f64 / 1e9,
            r.config.timeout_ns as f64 / 1e9,
            r.config.cores
        ));
        let w = r
            .runs
            .iter()
            .map(|run| run.variant.len())
            .chain([8])
            .max()
            .unwrap_or(8);
        out.push_str(&format!(
            "{:<20} {:>8} {:<w$} {:>9} {:>10} {:>12} {:>10}  {}\n",
            "suite",
            "size",
            "variant",
            "attempted",
            "successful",
            "unsuccessful",
            "p99 ms",
            "unsuccessful by reason"
        ));
        for run in &r.runs {
            out.push_str(&format!(
                "{:<20} {:>8} {:<w$} {:>9} {:>10} {:>12} {:>10.1}  {}\n",
                run.suite,
                ByteSize(run.size_bytes).to_string(),
                crate::variants::text_name_for(
                    &records,
                    &run.variant,
                    cipherbench_model::tls::suite_cipher(&run.suite),
                ),
                run.attempted,
                run.successful,
                run.unsuccessful,
                ms(run.latency.p99_ns),
                reasons(&run.unsuccessful_by_reason)
            ));
        }
        let vs: Vec<_> = r.runs.iter().filter_map(|run| run.verification).collect();
        out.push_str(&verification_text(&vs));
        out.push_str(&crate::keystore::text_ramp(t));
    }
    if let Some(h) = &t.handshake {
        out.push_str(&crate::handshake::text(h, &records));
        out.push_str(&crate::keystore::text_served(t));
    }
    let mut names: Vec<String> = records.iter().map(|r| r.name.clone()).collect();
    names.dedup();
    out.push_str(&crate::variants::text_legend(&records, &names));
    let mut shown: Vec<&str> = Vec::new();
    for r in &records {
        // One line per variant: the first server that did not take effect, if any.
        if shown.contains(&r.name.as_str()) {
            continue;
        }
        shown.push(&r.name);
        let first = cipherbench_model::variant::find(&records, &r.name).unwrap_or(r);
        out.push_str(&format!("nginx {}", crate::variants::line(first)));
        // A provider or engine variant: who served each server's cipher.
        if first.expected.is_some() {
            let mut lines: Vec<String> = Vec::new();
            for other in records.iter().filter(|o| o.name == r.name) {
                if let Some(l) = other.implementation_line() {
                    if !lines.contains(&l) && Some(&l) != first.implementation_line().as_ref() {
                        lines.push(l);
                    }
                }
            }
            for l in lines {
                out.push_str(&format!("  implementation: {l}\n"));
            }
        }
    }
    for side in &t.default_groups {
        out.push_str(&format!("groups: {}\n", side.line()));
    }
    out
}

/// `tls.csv`: one row per sweep point.
pub fn csv_sweep(s: &SweepResults) -> String {
    let mut out = String::from(
        "suite,protocol,negotiated_suite,size_bytes,cores,variant,concurrency,window_ns,throughput_bytes_per_sec,throughput_bits_per_sec,rel_spread,requests_per_sec,requests,errors,latency_p50_ns,latency_p99_ns,latency_max_ns,first_byte_p50_ns,first_byte_p99_ns,first_byte_max_ns,handshake_p50_ns,handshake_p99_ns,nginx_cpu_total,nginx_cpu_peak,nginx_cpu_per_worker,generator_cpu,generator_saturated,server_requests,requests_sent,valid,generator_cpu_per_thread,limit,search_started_at\n",
    );
    for p in &s.points {
        let cpu = p.server_cpu.as_ref();
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{:.0},{:.0},{:.4},{:.2},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3},{},{},{},{},{},{},{}\n",
            field(&p.suite),
            field(&p.protocol),
            field(p.negotiated_suite.as_deref().unwrap_or("")),
            p.size_bytes,
            p.cores,
            field(&p.variant),
            p.concurrency,
            p.window_ns,
            p.throughput_bytes_per_sec,
            p.bits_per_sec(),
            p.interval_throughput_bytes_per_sec.rel_spread,
            p.requests_per_sec,
            p.requests,
            p.errors,
            p.latency.p50_ns,
            p.latency.p99_ns,
            p.latency.max_ns,
            p.first_byte.p50_ns,
            p.first_byte.p99_ns,
            p.max_first_byte_ns,
            p.handshake.p50_ns,
            p.handshake.p99_ns,
            cpu.map(|c| format!("{:.3}", c.total)).unwrap_or_default(),
            cpu.map(|c| format!("{:.3}", c.peak)).unwrap_or_default(),
            cpu.map(|c| {
                c.per_worker
                    .iter()
                    .map(|w| format!("{w:.3}"))
                    .collect::<Vec<_>>()
                    .join(";")
            })
            .unwrap_or_default(),
            p.generator_cpu,
            p.generator_saturated,
            p.server_requests.map(|n| n.to_string()).unwrap_or_default(),
            p.requests_sent,
            p.valid,
            p.generator_cpu_per_thread
                .iter()
                .map(|c| format!("{c:.3}"))
                .collect::<Vec<_>>()
                .join(";"),
            p.search.as_ref().map_or("", |x| limit_name(x.limit)),
            p.search
                .as_ref()
                .map(|x| x.started_at.to_string())
                .unwrap_or_default()
        ));
    }
    out
}

/// `tls-ramp.csv`: one row per ramp second.
pub fn csv_ramp(r: &RampResults) -> String {
    let mut out = String::from(
        "suite,size_bytes,variant,second,attempted,successful,unsuccessful,max_latency_ns\n",
    );
    for run in &r.runs {
        for s in &run.series {
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{}\n",
                field(&run.suite),
                run.size_bytes,
                field(&run.variant),
                s.second,
                s.attempted,
                s.successful,
                s.unsuccessful,
                s.max_latency_ns
            ));
        }
    }
    out
}

/// The report section.
pub fn section(t: &TlsResults, target_gbps: Option<f64>) -> String {
    let mut out = String::from("<h2 id=\"tls\">Layer 3: TLS web serving <a class=\"how\" href=\"#m-tls\">how measured</a></h2>");
    let records = records(t);
    if let Some(s) = &t.sweep {
        out.push_str(&sweep_section(s, &records));
        for line in plain_text(s).lines() {
            out.push_str(&format!(
                "<p id=\"tls-plain-http\">{} <a class=\"how\" href=\"#m-ceilings\">how measured</a></p>",
                crate::svg::escape(line)
            ));
        }
        out.push_str(&capacity_html(s, target_gbps));
    }
    if let Some(r) = &t.ramp {
        out.push_str(&ramp_section(r, &records));
    }
    out.push_str(&crate::keystore::html(t));
    if let Some(h) = &t.handshake {
        out.push_str(&crate::handshake::html(
            h,
            t.sweep.as_ref(),
            &records,
            target_gbps.unwrap_or(DEFAULT_TARGET_GBPS),
        ));
    }
    if !t.servers.is_empty() {
        out.push_str("<h3>Servers</h3><div class=\"scroll\"><table><tr><th class=\"l\">suite</th><th>workers</th><th class=\"l\">variant</th><th class=\"l\">effective vector (same environment)</th><th>took effect</th><th class=\"l\">why</th><th class=\"l\">server</th><th class=\"l\">library</th><th class=\"l\">CPUs: server / generator</th></tr>");
        for s in &t.servers {
            out.push_str(&format!(
                "<tr><td class=\"l\">{}</td><td>{}</td><td class=\"l\">{}</td><td class=\"l\"><code>{}</code></td><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{:?} / {:?}</td></tr>",
                escape(&s.suite),
                s.cores,
                escape(&s.variant.name),
                escape(&s.variant.cpu_settings),
                if s.variant.took_effect { "<span class=\"ok\">yes</span>" } else { "<span class=\"bad\">no</span>" },
                match s.variant.implementation_line() {
                    Some(l) => format!(
                        "{}<br>implementation: {}",
                        escape(&s.variant.explanation()),
                        crate::variants::implementation_html(&l)
                    ),
                    None => escape(&s.variant.explanation()),
                },
                escape(s.version.as_deref().unwrap_or(&s.kind)),
                escape(s.library.as_deref().unwrap_or("-")),
                s.server_cpus,
                s.generator_cpus
            ));
        }
        out.push_str("</table></div>");
    }
    out.push_str(&groups_html(&t.default_groups));
    out
}

/// Each side's key-exchange groups at its library's defaults, as a short table.
fn groups_html(sides: &[cipherbench_model::tls::SideGroups]) -> String {
    if sides.is_empty() {
        return String::new();
    }
    let mut out = String::from("<h3>Key-exchange groups at each library's defaults</h3><p>One TLS 1.3 handshake between the library's own client and server, both at their defaults: what the client offered and sent key shares for, and what they agreed on. Each point's own group is in its row.</p><div class=\"scroll\"><table><tr><th class=\"l\">side</th><th class=\"l\">library</th><th class=\"l\">negotiated</th><th class=\"l\">key shares</th><th class=\"l\">offered, in order</th></tr>");
    for s in sides {
        let g = &s.groups;
        out.push_str(&format!(
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
            escape(&s.side),
            escape(&s.library),
            escape(g.negotiated.as_deref().unwrap_or("-")),
            escape(&g.key_shares.join(", ")),
            escape(&g.offered.join(", "))
        ));
    }
    out.push_str("</table></div>");
    out
}

fn capacity_html(s: &SweepResults, target_gbps: Option<f64>) -> String {
    let target = target_gbps.unwrap_or(DEFAULT_TARGET_GBPS);
    let lines = capacity(s, target);
    if lines.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "<h3 id=\"tls-capacity\">Capacity <a class=\"how\" href=\"#m-tls-capacity\">how measured</a></h3>\
<p>What one core of nginx serves per suite (throughput divided by the CPU nginx's workers used, largest file size), and the cores a target of \
<b>{} Gbit/s</b> needs at that rate{}.</p><div class=\"scroll\"><table id=\"table-tls-capacity\"><tr><th class=\"l\">suite</th><th class=\"l\">variant</th><th>size</th>\
<th>Gbit/s per core</th><th>cores for {} Gbit/s</th><th class=\"l\">nginx CPU by core count</th><th class=\"l\">scaling</th></tr>",
        trim(target),
        if target_gbps.is_none() {
            " (the default target: <code>--target-gbps</code> to change it)"
        } else {
            ""
        },
        trim(target)
    );
    for c in &lines {
        out.push_str(&format!(
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{:.2}</td><td><b>{}</b></td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
            escape(&c.suite),
            escape(&c.variant),
            ByteSize(c.size_bytes),
            c.bits_per_sec_per_core / 1e9,
            c.cores_needed,
            c.utilisation
                .iter()
                .map(|(k, u)| format!("{k}: {:.0} %", u * 100.0))
                .collect::<Vec<_>>()
                .join(", "),
            match c.not_cpu_bound_from {
                None => "CPU-bound throughout".to_string(),
                Some(k) => match c.open_loop_rate {
                    Some(r) => format!(
                        "not CPU-bound from {k} core(s) at the rate given ({} req/s)",
                        trim(r)
                    ),
                    None => format!("<span class=\"bad\">not CPU-bound from {k} core(s)</span>"),
                },
            }
        ));
    }
    out.push_str("</table></div>");
    out
}

#[expect(
    clippy::too_many_lines,
    reason = "the sweep section in reading order, one block per table or chart"
)]
fn sweep_section(s: &SweepResults, records: &[VariantRecord]) -> String {
    let load = match s.config.open_loop_rate {
        // `--rate`: no search, and a point's clients are the requests in flight.
        Some(rate) => format!(
            "Every point was measured open loop at <b>{rate} requests/s</b> over a {:.0} s window (<code>--rate</code>: \
requests start on schedule whether or not earlier ones finished; no search, and a point's clients are the mean number of \
requests in flight).",
            s.config.window_ns as f64 / 1e9
        ),
        None => format!(
            "For each point the concurrency was searched for the highest throughput \
with every request's first byte within <b>{:.1} s</b> over a {:.0} s window (as in Intel's nginx study).",
            s.config.latency_limit_ns as f64 / 1e9,
            s.config.window_ns as f64 / 1e9
        ),
    };
    let mut out = format!(
        "<p>A real nginx serving one file per connection (keep-alive off, a full TLS handshake per request) with exactly one suite, \
driven by cipherbench's load generator on other cores. {load} Throughput counts response body bytes.</p>"
    );
    let mut cores: Vec<usize> = s.points.iter().map(|p| p.cores).collect();
    cores.sort_unstable();
    cores.dedup();
    let mut sizes: Vec<u64> = s.points.iter().map(|p| p.size_bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut series_keys: Vec<(String, String)> = Vec::new();
    for p in &s.points {
        let k = (p.suite.clone(), p.variant.clone());
        if !series_keys.contains(&k) {
            series_keys.push(k);
        }
    }
    let categories: Vec<String> = sizes.iter().map(|z| ByteSize(*z).to_string()).collect();
    for &c in &cores {
        let series = |value: fn(&SweepPoint) -> Option<f64>| -> Vec<Series> {
            series_keys
                .iter()
                .map(|(suite, variant)| Series {
                    intervals: Vec::new(),
                    name: if crate::variants::ineffective(records, variant).is_some() {
                        format!("{suite} {variant} (did not take effect)")
                    } else {
                        format!("{suite} {variant}")
                    },
                    values: sizes
                        .iter()
                        .map(|&z| s.point(suite, z, c, variant).and_then(value))
                        .collect(),
                })
                .collect()
        };
        let fig6 = BarChart {
            id: format!("fig-tls-throughput-{c}"),
            title: format!("Maximum nginx throughput by file size, {c} core(s)"),
            description: "For each file size, the highest throughput in Gbit/s that nginx sustained with the first byte of every response within the limit, per suite and acceleration variant.".into(),
            categories: categories.clone(),
            series: series(|p| Some(p.bits_per_sec() / 1e9)),
            y_label: "Gbit/s (10^9 bit/s)".into(),
            reference: None,
            format: |v| format!("{v:.2}"),
        };
        out.push_str("<figure>");
        out.push_str(&fig6.render());
        out.push_str(&format!(
            "<figcaption>After Figure 6 of Intel's nginx study: maximum nginx throughput by file size with {c} core(s) under test.</figcaption></figure>"
        ));
        let fig7 = BarChart {
            id: format!("fig-tls-cpu-{c}"),
            title: format!("nginx CPU at maximum throughput, {c} core(s)"),
            description: "The highest CPU utilisation of nginx's workers over the sampling intervals of the window at the point of the throughput chart above, as a percentage of the cores under test.".into(),
            categories: categories.clone(),
            series: series(|p| p.server_cpu.as_ref().map(|c| c.peak * 100.0)),
            y_label: "% of the cores under test".into(),
            reference: Some(100.0),
            format: |v| format!("{v:.0}"),
        };
        out.push_str("<figure>");
        out.push_str(&fig7.render());
        out.push_str(&format!(
            "<figcaption>After Figure 7 of Intel's nginx study: maximum nginx CPU utilisation at that throughput, {c} core(s).</figcaption></figure>"
        ));
    }
    out.push_str(&by_cores_section(s, &series_keys, records));
    let rs = ratios(s, records);
    if !rs.is_empty() {
        out.push_str(&ratio_chart(&rs));
        out.push_str("<div class=\"scroll\"><table id=\"table-tls-ratios\"><tr><th class=\"l\">ratio of throughputs</th><th>value [95 % interval]</th><th>spread</th></tr>");
        for r in &rs {
            if let Some(na) = &r.not_applicable {
                out.push_str(&format!(
                    "<tr><td class=\"l\">{}</td><td class=\"bad\">{}</td><td>–</td></tr>",
                    escape(&r.label()),
                    escape(na)
                ));
            } else if let Some(x) = r.ratio {
                out.push_str(&format!(
                    "<tr><td class=\"l\">{}</td><td>{}</td><td>±{:.0} %</td></tr>",
                    escape(&r.label()),
                    match r.interval {
                        Some(_) => crate::html::interval_cell(Some(x.value), r.interval),
                        None =>
                            format!("{:.2}× <span class=\"muted\">(no interval)</span>", x.value),
                    },
                    x.rel_spread * 100.0
                ));
            }
        }
        out.push_str("</table></div><p class=\"muted\">Intel's nginx study found AES-GCM 2 to 2.4× ahead of AES-CBC + HMAC-SHA1 for files of 4 MB and more. The interval resamples the per-interval throughputs of the two final windows, each suite measured apart (<a href=\"#m-intervals\">how</a>); \"no interval\" marks a record written before they were kept.</p>");
    }
    let cs = cpu_at_rate(s, records);
    if !cs.is_empty() {
        out.push_str("<div class=\"scroll\"><table id=\"table-tls-cpu-at-rate\"><tr><th class=\"l\">nginx CPU at the given rate</th><th>rate</th><th>cores of nginx used (first / second)</th><th>CPU per response (first / second)</th><th>second over first [95 % interval]</th></tr>");
        for c in &cs {
            if let Some(na) = &c.not_applicable {
                out.push_str(&format!(
                    "<tr><td class=\"l\">{}</td><td colspan=\"4\" class=\"bad\">{}</td></tr>",
                    escape(&c.label()),
                    escape(na)
                ));
                continue;
            }
            out.push_str(&format!(
                "<tr><td class=\"l\">{}</td><td>{} req/s</td><td>{:.2} ({}) / {:.2} ({})</td><td>{}</td><td>{}</td></tr>",
                escape(&c.label()),
                trim(c.rate),
                c.cores_used.0,
                escape(&c.names.0),
                c.cores_used.1,
                escape(&c.names.1),
                match c.per_response_ms {
                    (Some(a), Some(b)) => format!("{a:.2} / {b:.2} ms"),
                    _ => "-".into(),
                },
                match c.interval {
                    Some(_) => crate::html::interval_cell(Some(c.ratio()), c.interval),
                    None => format!("{:.2}× <span class=\"muted\">(one window each, no interval)</span>", c.ratio()),
                }
            ));
        }
        out.push_str("</table></div><p class=\"muted\">Measured at a fixed rate (<code>--rate</code>): every point's throughput is the rate by construction, so no throughput ratio is drawn; what differs between the two is what the same load cost nginx. The interval pairs the rounds' CPU figures where the two took turns.</p>");
    }
    out.push_str("<details><summary>Every sweep point</summary><div class=\"scroll\"><table><tr><th class=\"l\">suite</th><th>size</th><th>cores</th><th class=\"l\">variant</th><th>throughput</th><th>req/s</th><th>clients</th><th>latency p50 / p99 / max</th><th>TTFB max</th><th>handshake p50</th><th>nginx CPU per worker</th><th>nginx waiting for a CPU</th><th>generator CPU (per thread)</th><th class=\"l\">limit: why these clients</th><th>errors</th><th>nginx / sent</th><th class=\"l\">valid</th></tr>");
    for p in &s.points {
        out.push_str(&format!(
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td><td{}>{}{}</td><td>{:.1}</td><td>{}</td><td>{:.1} / {:.1} / {:.1} ms</td><td>{:.1} ms</td><td>{:.2} ms</td><td>{}</td><td>{}</td><td>{:.0} %{}</td><td class=\"l\">{}</td><td>{}</td><td>{} / {}</td><td class=\"l\">{}</td></tr>",
            escape(&p.suite),
            ByteSize(p.size_bytes),
            p.cores,
            crate::variants::html_name_for(
                records,
                &p.variant,
                cipherbench_model::tls::suite_cipher(&p.suite),
            ),
            if p.interval_throughput_bytes_per_sec.high_spread() { " class=\"bad\"" } else { "" },
            format_bits_per_sec(p.throughput_bytes_per_sec),
            crate::machine::noise_mark_html(&p.noise_findings()),
            p.requests_per_sec,
            p.concurrency,
            ms(p.latency.p50_ns),
            ms(p.latency.p99_ns),
            ms(p.latency.max_ns),
            ms(p.max_first_byte_ns),
            ms(p.handshake.p50_ns),
            p.server_cpu
                .as_ref()
                .map(|c| c.per_worker.iter().map(|w| format!("{:.0} %", w * 100.0)).collect::<Vec<_>>().join(", "))
                .unwrap_or_else(|| "-".into()),
            p.server_cpu
                .as_ref()
                .map(|c| format!("{:.0} %", c.runqueue_wait * 100.0))
                .unwrap_or_else(|| "-".into()),
            p.generator_cpu * 100.0,
            if p.generator_cpu_per_thread.is_empty() {
                String::new()
            } else {
                format!(
                    " ({})",
                    p.generator_cpu_per_thread
                        .iter()
                        .map(|c| format!("{:.0} %", c * 100.0))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
            p.search
                .as_ref()
                .map(|x| escape(&format!("{}: {}", limit_name(x.limit), x.explanation)))
                .unwrap_or_else(|| "-".into()),
            reasons(&p.errors_by_reason),
            p.server_requests.map(|n| n.to_string()).unwrap_or_else(|| "-".into()),
            p.requests_sent,
            match (p.valid, p.instrument_limit()) {
                (false, _) => format!("<span class=\"bad\">no</span>: {}", escape(p.invalid_reason.as_deref().unwrap_or(""))),
                (true, Some(why)) => format!("yes, <span class=\"bad\">a lower bound</span>: {}", escape(&why)),
                (true, None) => "yes".to_string(),
            }
        ));
    }
    out.push_str("</table></div></details>");
    out
}

/// Why a point is invalid, with its failed requests and their main reasons when
/// the reason does not already say them (a record written before it did).
fn invalid_text(p: &SweepPoint) -> String {
    let why = p.invalid_reason.as_deref().unwrap_or("");
    match cipherbench_model::tls::failures_note(p.errors, &p.errors_by_reason) {
        Some(f) if !why.contains(&f) => format!("{why}; {f}"),
        _ => why.to_string(),
    }
}

fn limit_name(l: Limit) -> &'static str {
    match l {
        Limit::Server => "nginx",
        Limit::Generator => "generator",
        Limit::Latency => "latency limit",
        Limit::Undetermined => "neither",
        Limit::Fixed => "fixed",
    }
}

/// The core-count figure of Intel's nginx study: Gbit/s by nginx cores at the largest
/// file size, and the per-core efficiency (Gbit/s per core under test), with what
/// limited each point and the core counts this machine could not measure.
fn by_cores_section(
    s: &SweepResults,
    series_keys: &[(String, String)],
    records: &[VariantRecord],
) -> String {
    let Some(size) = s.points.iter().map(|p| p.size_bytes).max() else {
        return String::new();
    };
    let mut cores: Vec<usize> = s.points.iter().map(|p| p.cores).collect();
    cores.extend(s.skipped_cores.iter().map(|k| k.cores));
    cores.sort_unstable();
    cores.dedup();
    if cores.len() < 2 {
        return String::new();
    }
    let categories: Vec<String> = cores.iter().map(|c| format!("{c} core(s)")).collect();
    let series = |value: fn(&SweepPoint) -> f64| -> Vec<Series> {
        series_keys
            .iter()
            .map(|(suite, variant)| Series {
                intervals: Vec::new(),
                name: if crate::variants::ineffective(records, variant).is_some() {
                    format!("{suite} {variant} (did not take effect)")
                } else {
                    format!("{suite} {variant}")
                },
                values: cores
                    .iter()
                    .map(|&c| s.point(suite, size, c, variant).map(value))
                    .collect(),
            })
            .collect()
    };
    let mut out = String::new();
    let charts = [
        BarChart {
            id: "fig-tls-by-cores".into(),
            title: format!("nginx throughput by cores under test, {}", ByteSize(size)),
            description: "The highest throughput in Gbit/s nginx sustained within the latency limit, by the number of cores its workers had; a missing bar is a core count not measured.".into(),
            categories: categories.clone(),
            series: series(|p| p.bits_per_sec() / 1e9),
            y_label: "Gbit/s (10^9 bit/s)".into(),
            reference: None,
            format: |v| format!("{v:.2}"),
        },
        BarChart {
            id: "fig-tls-per-core".into(),
            title: format!("Per-core efficiency, {}", ByteSize(size)),
            description: "The same throughput divided by the cores under test: flat means linear scaling; a rise with more cores means a smaller point was held by something other than nginx (its limit is in the table).".into(),
            categories,
            series: series(|p| p.bits_per_sec() / 1e9 / p.cores.max(1) as f64),
            y_label: "Gbit/s per core".into(),
            reference: None,
            format: |v| format!("{v:.2}"),
        },
    ];
    for chart in charts {
        out.push_str("<figure>");
        out.push_str(&chart.render());
        out.push_str("<figcaption>After Intel's nginx study: throughput by core count (2, 4, 8 and 16 cores there), and what one core of it is worth.</figcaption></figure>");
    }
    out.push_str("<div class=\"scroll\"><table id=\"table-tls-by-cores\"><tr><th class=\"l\">suite, variant</th><th>cores</th><th>Gbit/s</th><th>per core</th><th>clients (probes from)</th><th class=\"l\">limit</th><th>nginx CPU</th><th>generator CPU per thread</th></tr>");
    for (suite, variant) in series_keys {
        for &c in &cores {
            if let Some(p) = s.point(suite, size, c, variant) {
                out.push_str(&format!(
                    "<tr><td class=\"l\">{} {}</td><td>{c}</td><td>{:.2}</td><td>{:.2}</td><td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td></tr>",
                    escape(suite),
                    crate::variants::html_name(records, variant),
                    p.bits_per_sec() / 1e9,
                    p.bits_per_sec() / 1e9 / c.max(1) as f64,
                    clients_cell(p),
                    p.search.as_ref().map_or("-", |x| limit_name(x.limit)),
                    p.server_cpu.as_ref().map_or("-".into(), |x| format!("{:.0} %", x.total * 100.0)),
                    p.generator_cpu_per_thread.iter().map(|x| format!("{:.0} %", x * 100.0)).collect::<Vec<_>>().join(", "),
                ));
            }
        }
    }
    for k in &s.skipped_cores {
        out.push_str(&format!(
            "<tr><td class=\"l\">all</td><td>{}</td><td colspan=\"6\" class=\"l\">not measured: {}</td></tr>",
            k.cores,
            escape(&k.reason)
        ));
    }
    out.push_str("</table></div>");
    out
}

fn ramp_section(r: &RampResults, records: &[VariantRecord]) -> String {
    let mut out = format!(
        "<h3>Ramp</h3><p>Open-loop arrivals rising linearly from 0 to {} requests/s over {:.0} s, every request a new connection and a full handshake; \
a request is unsuccessful if it fails or has not finished {:.1} s after its scheduled start (as in the IXP425 offload paper).</p>",
        r.config.target_rate,
        r.config.duration_ns as f64 / 1e9,
        r.config.timeout_ns as f64 / 1e9
    );
    out.push_str("<div class=\"scroll\"><table id=\"table-tls-ramp\"><tr><th class=\"l\"></th>");
    for run in &r.runs {
        out.push_str(&format!(
            "<th>{} {}<br>{}</th>",
            ByteSize(run.size_bytes),
            crate::variants::html_name_for(
                records,
                &run.variant,
                cipherbench_model::tls::suite_cipher(&run.suite),
            ),
            escape(&run.suite)
        ));
    }
    out.push_str("</tr>");
    type Cell = fn(&cipherbench_model::tls::RampRun) -> String;
    let rows: [(&str, Cell); 5] = [
        ("Attempted", |x| x.attempted.to_string()),
        ("Successful", |x| x.successful.to_string()),
        ("Unsuccessful", |x| x.unsuccessful.to_string()),
        ("unsuccessful by reason", |x| {
            reasons(&x.unsuccessful_by_reason)
        }),
        ("latency p99 (successful)", |x| {
            format!("{:.1} ms", ms(x.latency.p99_ns))
        }),
    ];
    for (name, cell) in rows {
        out.push_str(&format!("<tr><th class=\"l\">{name}</th>"));
        for run in &r.runs {
            out.push_str(&format!("<td>{}</td>", escape(&cell(run))));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table></div><p class=\"muted\">Table 1 after the IXP425 offload paper (which measured 3DES-CBC-SHA, no longer offered by Debian's OpenSSL).</p>");
    let mut sizes: Vec<u64> = r.runs.iter().map(|x| x.size_bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    for size in sizes {
        let mut lines = Vec::new();
        for run in r.runs.iter().filter(|x| x.size_bytes == size) {
            if lines.is_empty() {
                lines.push(Line {
                    name: "attempted".into(),
                    points: run
                        .series
                        .iter()
                        .map(|s| (s.second as f64, s.attempted as f64))
                        .collect(),
                    dashed: true,
                });
            }
            lines.push(Line {
                name: format!(
                    "successful, {} {}{}",
                    run.suite,
                    run.variant,
                    if crate::variants::ineffective(records, &run.variant).is_some() {
                        " (did not take effect)"
                    } else {
                        ""
                    }
                ),
                points: run
                    .series
                    .iter()
                    .map(|s| (s.second as f64, s.successful as f64))
                    .collect(),
                dashed: false,
            });
        }
        let chart = LineChart {
            id: format!("fig-tls-ramp-{size}"),
            title: format!("Requests per second under the ramp, {}", ByteSize(size)),
            description: "Per second of the ramp: requests scheduled (attempted) and, for each variant, those that succeeded.".into(),
            x_label: "second of the ramp".into(),
            y_label: "requests / s".into(),
            lines,
        };
        out.push_str("<figure>");
        out.push_str(&chart.render());
        out.push_str(&format!(
            "<figcaption>After Figure 2 of the IXP425 offload paper: attempted and successful requests per second, {} responses.</figcaption></figure>",
            ByteSize(size)
        ));
    }
    out
}

/// The by-cores table's clients cell: the clients and where the search started, or,
/// for an open-loop point (`--rate`), the requests in flight at its rate.
fn clients_cell(p: &cipherbench_model::tls::SweepPoint) -> String {
    match p.open_loop_rate {
        Some(rate) => format!("~{} in flight at {rate} req/s", p.concurrency),
        None => format!(
            "{} ({})",
            p.concurrency,
            p.search
                .as_ref()
                .map_or("-".into(), |x| x.started_at.to_string())
        ),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use cipherbench_model::tls::*;
    use cipherbench_model::Summary;

    pub(crate) fn point(suite: &str, variant: &str, gbps: f64) -> SweepPoint {
        SweepPoint {
            suite: suite.into(),
            protocol: "TLSv1.2".into(),
            negotiated_suite: Some(suite.into()),
            negotiated_protocol: Some("TLSv1.2".into()),
            negotiated_group: None,
            size_bytes: 16 << 20,
            cores: 1,
            variant: variant.into(),
            key_store: "file".into(),
            concurrency: 2,
            window_ns: 4_000_000_000,
            interval_ns: 1_000_000_000,
            throughput_bytes_per_sec: gbps * 1e9 / 8.0,
            interval_throughput_bytes_per_sec: Summary::of(&[gbps * 1e9 / 8.0; 4]).unwrap(),
            // A steady window: each second within 2 % of the mean.
            interval_samples_bytes_per_sec: [0.98, 1.02, 1.0, 1.0]
                .iter()
                .map(|k| k * gbps * 1e9 / 8.0)
                .collect(),
            requests_per_sec: 40.0,
            requests: 160,
            requests_sent: 163,
            server_requests: Some(163),
            cancelled: 0,
            requests_ok_total: 163,
            requests_resumed_total: 0,
            body_bytes: 163 << 24,
            errors: 0,
            errors_by_reason: Default::default(),
            latency: Latency::default(),
            first_byte: Latency::default(),
            handshake: Latency::default(),
            connect: Latency::default(),
            max_first_byte_ns: 3_000_000,
            within_limit: true,
            server_cpu: Some(ServerCpu {
                per_worker: vec![0.98],
                total: 0.98,
                peak: 0.99,
                interval_ns: 1_000_000_000,
                runqueue_wait: 0.0,
            }),
            generator_cpu: 0.4,
            generator_threads: 1,
            noise: None,
            generator_saturated: false,
            valid: true,
            invalid_reason: None,
            probes: Vec::new(),
            generator_cpu_per_thread: Vec::new(),
            search: None,
            agents: Vec::new(),
            rounds: Vec::new(),
            interleave_group: None,
            open_loop_rate: None,
            verification: None,
        }
    }

    pub(crate) fn results() -> TlsResults {
        TlsResults {
            servers: Vec::new(),
            sweep: Some(SweepResults {
                config: SweepConfig {
                    suites: vec!["AES128-SHA".into(), "AES128-GCM-SHA256".into()],
                    sizes_bytes: vec![16 << 20],
                    cores: vec![1],
                    variants: vec!["accel".into(), "noaesni".into()],
                    window_ns: 4_000_000_000,
                    probe_ns: 1_000_000_000,
                    warmup_ns: 0,
                    latency_limit_ns: 2_000_000_000,
                    max_concurrency: 16,
                    timeout_ns: 0,
                    resumption: false,
                    key: "rsa2048".into(),
                    key_stores: vec!["file".into()],
                    rounds: 1,
                    open_loop_rate: None,
                    plain_http: false,
                },
                points: vec![
                    point("AES128-GCM-SHA256", "accel", 6.0),
                    point("AES128-SHA", "accel", 2.5),
                    point("AES128-GCM-SHA256", "noaesni", 1.5),
                ],
                skipped_cores: Vec::new(),
                key_store_points: Vec::new(),
                key_store_skipped: Vec::new(),
                plain_points: Vec::new(),
            }),
            ramp: Some(RampResults {
                config: RampConfig {
                    suites: vec!["AES128-SHA".into()],
                    sizes_bytes: vec![1024],
                    variants: vec!["accel".into()],
                    cores: 1,
                    target_rate: 50.0,
                    duration_ns: 2_000_000_000,
                    timeout_ns: 2_000_000_000,
                    key: "rsa2048".into(),
                    key_stores: vec!["file".into()],
                },
                runs: vec![RampRun {
                    suite: "AES128-SHA".into(),
                    negotiated_suite: Some("AES128-SHA".into()),
                    size_bytes: 1024,
                    variant: "accel".into(),
                    key_store: "file".into(),
                    cores: 1,
                    attempted: 50,
                    successful: 48,
                    unsuccessful: 2,
                    unsuccessful_by_reason: [(FailureReason::Timeout, 2)].into_iter().collect(),
                    server_requests: Some(50),
                    requests_sent: 50,
                    body_bytes: 48 * 1024,
                    latency: Latency::default(),
                    handshake: Latency::default(),
                    series: vec![
                        RampSecond {
                            second: 0,
                            attempted: 12,
                            successful: 12,
                            unsuccessful: 0,
                            max_latency_ns: 1,
                        },
                        RampSecond {
                            second: 1,
                            attempted: 38,
                            successful: 36,
                            unsuccessful: 2,
                            max_latency_ns: 1,
                        },
                    ],
                    server_cpu: None,
                    generator_cpu: 0.01,
                    generator_cpu_per_thread: Vec::new(),
                    generator_saturated: false,
                    noise: None,
                    agents: Vec::new(),
                    verification: None,
                }],
                key_store_runs: Vec::new(),
                key_store_skipped: Vec::new(),
            }),
            agents: Vec::new(),
            handshake: None,
            default_groups: Vec::new(),
        }
    }

    #[test]
    fn each_sides_default_groups_are_a_line_and_a_row() {
        let mut t = results();
        t.default_groups.push(cipherbench_model::tls::SideGroups {
            side: "nginx".into(),
            library: "OpenSSL 3.6.3 7 Apr 2026".into(),
            groups: cipherbench_model::tls::DefaultGroups {
                offered: vec!["X25519MLKEM768".into(), "x25519".into()],
                key_shares: vec!["X25519MLKEM768".into(), "x25519".into()],
                negotiated: Some("X25519MLKEM768".into()),
            },
        });
        let text = text(&t, None);
        assert!(
            text.contains("groups: nginx on OpenSSL 3.6.3 7 Apr 2026: a default handshake negotiates X25519MLKEM768; its client offers X25519MLKEM768, x25519 (key shares: X25519MLKEM768, x25519)"),
            "{text}"
        );
        let html = section(&t, None);
        assert!(
            html.contains("<td class=\"l\">X25519MLKEM768</td>"),
            "{html}"
        );
        assert!(!section(&results(), None).contains("Key-exchange groups"));
    }

    #[test]
    fn text_shows_points_ratios_and_the_ramp() {
        let t = text(&results(), None);
        assert!(t.contains("6.00 Gbit/s"), "{t}");
        assert!(
            t.contains("GCM / CBC-SHA1 accel 16 MiB x1") && t.contains("2.40x ["),
            "{t}"
        );
        assert!(
            t.contains("accel / noaesni AES128-GCM-SHA256 16 MiB x1") && t.contains("4.00x"),
            "{t}"
        );
        assert!(t.contains("timeout 2"), "{t}");
    }

    #[test]
    fn an_invalid_point_with_failed_requests_says_them_on_the_terminal() {
        let mut r = results();
        let p = &mut r.sweep.as_mut().unwrap().points[0];
        p.valid = false;
        p.generator_saturated = true;
        p.invalid_reason = Some("the load generator used 100 % of its cores".into());
        p.errors = 39800;
        p.errors_by_reason = [
            (FailureReason::Handshake, 30000),
            (FailureReason::Timeout, 9000),
            (FailureReason::Overload, 800),
        ]
        .into_iter()
        .collect();
        let t = text(&r, None);
        assert!(
            t.contains("INVALID: the load generator used 100 % of its cores; 39800 failed request(s): handshake 30000, timeout 9000, overload 800"),
            "{t}"
        );
    }

    #[test]
    fn a_sweep_at_a_fixed_rate_is_described_as_open_loop_not_searched() {
        let mut r = results();
        let html = section(&r, None);
        assert!(html.contains("the concurrency was searched"), "{html}");
        assert!(!html.contains("open loop at"), "{html}");
        r.sweep.as_mut().unwrap().config.open_loop_rate = Some(250.0);
        let html = section(&r, None);
        assert!(
            html.contains("measured open loop at <b>250 requests/s</b> over a 4 s window"),
            "{html}"
        );
        assert!(!html.contains("the concurrency was searched"), "{html}");
        // The by-cores table's cell: requests in flight at the rate, not a search start.
        let mut p = point("AES128-GCM-SHA256", "accel", 6.0);
        assert_eq!(clients_cell(&p), format!("{} (-)", p.concurrency));
        p.open_loop_rate = Some(250.0);
        p.concurrency = 3;
        assert_eq!(clients_cell(&p), "~3 in flight at 250 req/s");
    }

    #[test]
    fn a_ratio_whose_interval_holds_one_is_no_clear_difference_everywhere() {
        let mut r = results();
        let sweep = r.sweep.as_mut().unwrap();
        // noaesni at 5.9 against accel's 6.0, both windows swinging ±10 % a second.
        let mut n = point("AES128-GCM-SHA256", "noaesni", 5.9);
        let mut a = point("AES128-GCM-SHA256", "accel", 6.0);
        for (p, gbps) in [(&mut n, 5.9), (&mut a, 6.0)] {
            p.interval_samples_bytes_per_sec = [0.9, 1.1, 0.95, 1.05]
                .iter()
                .map(|k| k * gbps * 1e9 / 8.0)
                .collect();
        }
        sweep.points = vec![a, point("AES128-SHA", "accel", 2.5), n];
        let rs = ratios(sweep, &[]);
        let an = rs
            .iter()
            .find(|x| x.kind.starts_with("accel / noaesni"))
            .unwrap();
        let i = an.interval.unwrap();
        assert!(i.low < 1.0 && 1.0 < i.high, "{i:?}");
        assert!(
            (i.point - 6.0 / 5.9).abs() < 1e-9,
            "the table's ratio: {i:?}"
        );
        let line = "accel / noaesni AES128-GCM-SHA256 16 MiB x1";
        let t = text(&r, None);
        let row = t.lines().find(|l| l.contains(line)).unwrap();
        assert!(row.ends_with(", no clear difference"), "{row}");
        let html = section(&r, None);
        assert!(html.contains("id=\"table-tls-ratios\""));
        assert!(html.contains("no clear difference</span>"), "{html}");
        // The chart draws both ratios' whiskers, with the legend line.
        let chart = &html[html.find("id=\"fig-tls-ratios\"").unwrap()..];
        let chart = &chart[..chart.find("</svg>").unwrap()];
        assert_eq!(chart.matches("<g class=\"whisker\"").count(), 2);
        assert!(chart.contains(crate::svg::WHISKER_LEGEND));
    }

    #[test]
    fn points_without_kept_intervals_show_their_ratio_without_an_interval() {
        // As read from a run.json written before the intervals were kept.
        let mut r = results();
        for p in &mut r.sweep.as_mut().unwrap().points {
            p.interval_samples_bytes_per_sec.clear();
        }
        let t = text(&r, None);
        assert!(t.contains("4.00x ±0 % (no interval)"), "{t}");
        let html = section(&r, None);
        assert!(html.contains("4.00× <span class=\"muted\">(no interval)</span>"));
        assert!(!html.contains("class=\"whisker\""));
    }

    #[test]
    fn csv_has_one_row_per_point_and_second() {
        let r = results();
        let sweep = csv_sweep(r.sweep.as_ref().unwrap());
        assert_eq!(sweep.lines().count(), 4);
        let header: Vec<&str> = sweep.lines().next().unwrap().split(',').collect();
        let row: Vec<&str> = sweep.lines().nth(1).unwrap().split(',').collect();
        assert_eq!(header.len(), row.len());
        assert_eq!(csv_ramp(r.ramp.as_ref().unwrap()).lines().count(), 3);
    }

    #[test]
    fn the_section_draws_the_seeds_figures() {
        let html = section(&results(), Some(25.0));
        for id in [
            "fig-tls-throughput-1",
            "fig-tls-cpu-1",
            "table-tls-ramp",
            "fig-tls-ramp-1024",
        ] {
            assert!(html.contains(&format!("id=\"{id}\"")), "{id}");
        }
        assert!(html.contains("<th class=\"l\">Attempted</th><td>50</td>"));
        assert!(html.contains("id=\"table-tls-capacity\""));
        assert!(html.contains("cores for 25 Gbit/s"));
    }

    #[test]
    fn draws_throughput_and_per_core_efficiency_by_cores_with_the_skipped_counts() {
        let mut r = results();
        // No figure by cores for one core count.
        assert!(!section(&r, None).contains("fig-tls-by-cores"));
        let sweep = r.sweep.as_mut().unwrap();
        let mut p4 = point("AES128-GCM-SHA256", "accel", 20.0);
        p4.cores = 4;
        p4.generator_cpu_per_thread = vec![0.4, 0.95];
        p4.search = Some(cipherbench_model::tls::SearchOutcome {
            started_at: 8,
            limit: Limit::Generator,
            explanation: "the generator saturated".into(),
        });
        sweep.points.push(p4);
        sweep
            .skipped_cores
            .push(cipherbench_model::tls::SkippedCores {
                cores: 8,
                reason: "no CPU left for the generator".into(),
            });
        let html = section(&r, None);
        for id in ["fig-tls-by-cores", "fig-tls-per-core", "table-tls-by-cores"] {
            assert!(html.contains(&format!("id=\"{id}\"")), "{id}");
        }
        // 20 Gbit/s on 4 cores: 5.00 per core; its limit and per-thread CPU shown.
        assert!(
            html.contains(
                "<td>4</td><td>20.00</td><td>5.00</td><td>2 (8)</td><td class=\"l\">generator</td>"
            ),
            "{html}"
        );
        assert!(html.contains("40 %, 95 %"));
        assert!(html.contains("not measured: no CPU left for the generator"));
    }

    #[test]
    fn capacity_divides_by_the_cpu_used_and_finds_where_scaling_stopped() {
        let mut r = results();
        let sweep = r.sweep.as_mut().unwrap();
        // 6 Gbit/s at 98 % of one core: 6.12 Gbit/s per core.
        let mut two = point("AES128-GCM-SHA256", "accel", 9.0);
        two.cores = 2;
        two.server_cpu.as_mut().unwrap().total = 0.6;
        sweep.points.push(two);
        let mut small = point("AES128-GCM-SHA256", "accel", 1.0);
        small.size_bytes = 1024;
        sweep.points.push(small);
        let lines = capacity(sweep, 25.0);
        let gcm = lines
            .iter()
            .find(|c| c.suite == "AES128-GCM-SHA256" && c.variant == "accel")
            .unwrap();
        assert_eq!(gcm.size_bytes, 16 << 20, "the largest size");
        // 2 cores at 60 %: 9 / 1.2 = 7.5 Gbit/s per core used, the better rate.
        assert_eq!(gcm.at_cores, 2);
        assert!((gcm.bits_per_sec_per_core - 7.5e9).abs() < 1e3);
        assert_eq!(gcm.cores_needed, 4);
        assert_eq!(gcm.not_cpu_bound_from, Some(2));
        assert!(
            gcm.sentence()
                .contains("stopped being CPU-bound at 2 cores"),
            "{}",
            gcm.sentence()
        );
        // The generator at the same point: 0.4 of one core for 9 Gbit/s, every byte
        // read; nginx's 1.2 cores for the same 9 Gbit/s keep it busy 3 times over.
        let g = gcm.generator.as_ref().unwrap();
        assert!((g.cores_per_gbps - 0.4 / 9.0).abs() < 1e-12);
        assert_eq!(g.cores_needed, 2, "25 Gbit/s x 0.044");
        assert!((g.nginx_per_generator - 3.0).abs() < 1e-9);
        assert!(!g.by_sample);
        assert!(
            gcm.sentence()
                .contains("needs 4 core(s) of nginx and 2 of load generator (0.044 core per Gbit/s reading every byte: one generator core keeps 3.0 nginx cores busy)"),
            "{}",
            gcm.sentence()
        );
        // Read by sample: said so.
        let n = sweep.points.len();
        sweep.points[n - 2].verification = Some(cipherbench_model::tls::Verification {
            sampled: true,
            rate: 1.0 / 16.0,
            whole: 1.0 / 64.0,
            sampled_responses: 100,
            ..Default::default()
        });
        let lines2 = capacity(sweep, 25.0);
        let gcm2 = lines2
            .iter()
            .find(|c| c.suite == "AES128-GCM-SHA256")
            .unwrap();
        assert!(gcm2.generator.as_ref().unwrap().by_sample);
        assert!(gcm2.sentence().contains("reading by sample"));
        let cbc = lines.iter().find(|c| c.suite == "AES128-SHA").unwrap();
        assert_eq!(cbc.not_cpu_bound_from, None);
        assert_eq!(cbc.cores_needed, (25.0f64 / (2.5 / 0.98)).ceil() as u64);
        // Invalid points and points without CPU figures give no line.
        for p in &mut sweep.points {
            p.valid = false;
        }
        assert!(capacity(sweep, 10.0).is_empty());
        let t = text(&r, None);
        assert!(!t.contains("capacity"), "{t}");
        assert!(text(&results(), None).contains("the default: --target-gbps"));
    }
}
