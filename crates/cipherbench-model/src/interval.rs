//! Ratios with a confidence interval: the ratio of the medians of two sets of rounds
//! (accel over noaesni, GCM over CBC, one machine over another), with a 95 %
//! percentile-bootstrap interval, and a verdict that refuses to call a ratio whose
//! interval spans 1.0 a gain or a loss.
//!
//! The bootstrap is seeded and uses its own small generator (SplitMix64), so the same
//! rounds always give the same interval: a re-rendered report does not move.
//! METHODOLOGY.md ("Ratios and their intervals") says why this method and what it
//! cannot do.

use serde::{Deserialize, Serialize};

/// Resamples drawn (2,000: the interval's ends move by well under 1 % between seeds
/// for the round counts the presets use).
pub const RESAMPLES: usize = 2000;
/// The interval's coverage.
pub const LEVEL: f64 = 0.95;
/// Fewest rounds on each side for an interval: with fewer, the bootstrap has nothing
/// to resample and would claim a certainty it does not have.
pub const MIN_ROUNDS: usize = 3;
/// The seed used where a caller has no reason to pick another.
pub const DEFAULT_SEED: u64 = 0x00c1_9e4b_e4c4_0001;

/// How the two sets of rounds relate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Pairing {
    /// Round i of one set was measured next to round i of the other (interleaved
    /// ABAB rounds): resample pairs, so drift shared by a pair cancels.
    Paired,
    /// The sets were measured apart: resample each on its own.
    Independent,
}

/// What a ratio's interval allows one to say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The whole interval is above 1.0.
    Higher,
    /// The whole interval is below 1.0.
    Lower,
    /// The interval holds 1.0: the rounds do not show a difference.
    NoClearDifference,
}

/// A ratio of medians with its interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RatioInterval {
    /// median(numerator) / median(denominator).
    pub point: f64,
    /// Lower end of the interval.
    pub low: f64,
    /// Upper end of the interval.
    pub high: f64,
    /// The interval's coverage (0.95).
    pub level: f64,
    /// How the rounds were resampled.
    pub pairing: Pairing,
    /// Rounds in the numerator and the denominator.
    pub rounds: (usize, usize),
    /// What the interval allows one to say.
    pub verdict: Verdict,
}

impl RatioInterval {
    /// The ratio of the medians of `num` and `den` with a 95 % percentile-bootstrap
    /// interval from [`RESAMPLES`] resamples drawn with `seed`. `Paired` needs sets
    /// of equal length. None when a side has fewer than [`MIN_ROUNDS`] rounds, holds
    /// a NaN or a value that is not above 0, or the pairing cannot hold.
    pub fn bootstrap(num: &[f64], den: &[f64], pairing: Pairing, seed: u64) -> Option<Self> {
        let usable = |s: &[f64]| s.len() >= MIN_ROUNDS && s.iter().all(|v| *v > 0.0);
        if !usable(num) || !usable(den) || (pairing == Pairing::Paired && num.len() != den.len()) {
            return None;
        }
        let point = median(num) / median(den);
        let mut rng = SplitMix64(seed);
        let mut a = vec![0.0; num.len()];
        let mut b = vec![0.0; den.len()];
        let mut ratios = Vec::with_capacity(RESAMPLES);
        for _ in 0..RESAMPLES {
            match pairing {
                Pairing::Paired => {
                    for k in 0..num.len() {
                        let i = rng.below(num.len());
                        a[k] = num[i];
                        b[k] = den[i];
                    }
                }
                Pairing::Independent => {
                    for x in a.iter_mut() {
                        *x = num[rng.below(num.len())];
                    }
                    for x in b.iter_mut() {
                        *x = den[rng.below(den.len())];
                    }
                }
            }
            ratios.push(median(&a) / median(&b));
        }
        ratios.sort_by(f64::total_cmp);
        let tail = (1.0 - LEVEL) / 2.0;
        let low = quantile_of_sorted(&ratios, tail).min(point);
        let high = quantile_of_sorted(&ratios, 1.0 - tail).max(point);
        let verdict = verdict_of(low, high);
        Some(RatioInterval {
            point,
            low,
            high,
            level: LEVEL,
            pairing,
            rounds: (num.len(), den.len()),
            verdict,
        })
    }

    /// A statistic of the medians of several independent sets (each from its own
    /// runs), with its 95 % percentile-bootstrap interval: each set resampled on its
    /// own, `statistic` applied to the resampled medians. For a ratio of ratios (one
    /// machine's AES gain over another's, divided by the same for a control), pass the
    /// four sets and `|m| (m[0] / m[1]) / (m[2] / m[3])`. None under the same rules as
    /// [`RatioInterval::bootstrap`], or when the statistic is not finite and positive.
    pub fn bootstrap_of(
        sets: &[&[f64]],
        statistic: impl Fn(&[f64]) -> f64,
        seed: u64,
    ) -> Option<Self> {
        if sets.is_empty()
            || sets
                .iter()
                .any(|s| s.len() < MIN_ROUNDS || !s.iter().all(|v| *v > 0.0))
        {
            return None;
        }
        let medians: Vec<f64> = sets.iter().map(|s| median(s)).collect();
        let point = statistic(&medians);
        if !(point.is_finite() && point > 0.0) {
            return None;
        }
        let mut rng = SplitMix64(seed);
        let mut scratch: Vec<Vec<f64>> = sets.iter().map(|s| vec![0.0; s.len()]).collect();
        let mut m = vec![0.0; sets.len()];
        let mut values = Vec::with_capacity(RESAMPLES);
        for _ in 0..RESAMPLES {
            for (k, set) in sets.iter().enumerate() {
                for x in scratch[k].iter_mut() {
                    *x = set[rng.below(set.len())];
                }
                m[k] = median(&scratch[k]);
            }
            values.push(statistic(&m));
        }
        values.sort_by(f64::total_cmp);
        let tail = (1.0 - LEVEL) / 2.0;
        let low = quantile_of_sorted(&values, tail).min(point);
        let high = quantile_of_sorted(&values, 1.0 - tail).max(point);
        Some(RatioInterval {
            point,
            low,
            high,
            level: LEVEL,
            pairing: Pairing::Independent,
            rounds: (sets[0].len(), sets.get(1).map_or(0, |s| s.len())),
            verdict: verdict_of(low, high),
        })
    }

    /// Whether the ratio may be presented as a gain or a loss.
    pub fn is_clear(&self) -> bool {
        self.verdict != Verdict::NoClearDifference
    }

    /// `1.85x [1.80-1.91]`, or `1.02x [0.97-1.08], no clear difference`.
    pub fn display(&self) -> String {
        let base = format!("{:.2}x [{:.2}-{:.2}]", self.point, self.low, self.high);
        if self.is_clear() {
            base
        } else {
            format!("{base}, no clear difference")
        }
    }
}

impl RatioInterval {
    /// The interval of a ratio figure from [`bootstrap_figures`], with the verdict
    /// its ends allow. `rounds` is what the caller reports as the two sides' counts.
    pub fn from_estimate(e: Estimate, pairing: Pairing, rounds: (usize, usize)) -> Self {
        RatioInterval {
            point: e.point,
            low: e.low,
            high: e.high,
            level: e.level,
            pairing,
            rounds,
            verdict: verdict_of(e.low, e.high),
        }
    }

    /// The same interval moved to a point the caller shows (both ends multiplied by
    /// `point / self.point`, the verdict recomputed): for a figure that is the
    /// resampled one times a factor taken as measured (a per-core rate divides by one
    /// CPU figure per window), or computed from the same rounds a slightly different
    /// way (a window's bytes over its length against the mean of its intervals).
    /// Unchanged when either point is not finite and positive.
    pub fn scaled_to(self, point: f64) -> Self {
        if !(point.is_finite() && point > 0.0 && self.point > 0.0) {
            return self;
        }
        let k = point / self.point;
        let (low, high) = (self.low * k, self.high * k);
        RatioInterval {
            point,
            low,
            high,
            verdict: verdict_of(low, high),
            ..self
        }
    }
}

/// How a set of rounds is summarised into a figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Centre {
    /// The median (the figure of repeated runs: robust to one disturbed run).
    Median,
    /// The mean (the figure of a window cut into intervals: the window's total over
    /// its length is the mean of its intervals' rates).
    Mean,
}

impl Centre {
    fn of(self, values: &[f64]) -> f64 {
        match self {
            Centre::Median => median(values),
            Centre::Mean => values.iter().sum::<f64>() / values.len() as f64,
        }
    }
}

/// The rounds behind one figure: the centre of `num`, or, with `den`, the ratio of
/// the centres of `num` and `den` (a gain: accel's rounds over noaesni's).
#[derive(Debug, Clone, PartialEq)]
pub struct Rounds {
    /// The figure's rounds (the numerator's, for a ratio).
    pub num: Vec<f64>,
    /// The denominator's rounds, for a ratio.
    pub den: Option<Vec<f64>>,
    /// How `num` and `den` were measured together (ignored without `den`).
    pub pairing: Pairing,
    /// How each set is summarised.
    pub centre: Centre,
}

impl Rounds {
    /// One set's figure.
    pub fn single(values: Vec<f64>, centre: Centre) -> Self {
        Rounds {
            num: values,
            den: None,
            pairing: Pairing::Independent,
            centre,
        }
    }

    /// A ratio of two sets' figures.
    pub fn ratio(num: Vec<f64>, den: Vec<f64>, pairing: Pairing, centre: Centre) -> Self {
        Rounds {
            num,
            den: Some(den),
            pairing,
            centre,
        }
    }

    /// The figure as measured (NaN when a set is empty).
    pub fn value(&self) -> f64 {
        let n = self.centre.of(&self.num);
        match &self.den {
            Some(d) => n / self.centre.of(d),
            None => n,
        }
    }

    /// Enough rounds, all positive, and pairs that can pair.
    fn usable(&self) -> bool {
        let ok = |s: &[f64]| s.len() >= MIN_ROUNDS && s.iter().all(|v| *v > 0.0);
        ok(&self.num)
            && self.den.as_deref().is_none_or(|d| {
                ok(d) && (self.pairing != Pairing::Paired || d.len() == self.num.len())
            })
    }

    /// The figure of one resample, drawn with `rng` into the scratch buffers.
    fn resampled(&self, rng: &mut SplitMix64, a: &mut [f64], b: &mut [f64]) -> f64 {
        match (&self.den, self.pairing) {
            (Some(d), Pairing::Paired) => {
                for k in 0..self.num.len() {
                    let i = rng.below(self.num.len());
                    a[k] = self.num[i];
                    b[k] = d[i];
                }
                self.centre.of(a) / self.centre.of(b)
            }
            (Some(d), Pairing::Independent) => {
                for x in a.iter_mut() {
                    *x = self.num[rng.below(self.num.len())];
                }
                for x in b.iter_mut() {
                    *x = d[rng.below(d.len())];
                }
                self.centre.of(a) / self.centre.of(b)
            }
            (None, _) => {
                for x in a.iter_mut() {
                    *x = self.num[rng.below(self.num.len())];
                }
                self.centre.of(a)
            }
        }
    }
}

/// A statistic with its 95 % interval and no verdict (a share, such as the ladder's
/// "keeps", is not judged against 1.0).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Estimate {
    /// The statistic of the figures as measured.
    pub point: f64,
    /// Lower end.
    pub low: f64,
    /// Upper end.
    pub high: f64,
    /// Coverage (0.95).
    pub level: f64,
}

/// A statistic of several figures, each from its own rounds, with its 95 %
/// percentile-bootstrap interval: every figure's rounds resampled (a ratio's two
/// sets together when paired, on their own when not; different figures always
/// independently), `statistic` applied to the resampled figures, [`RESAMPLES`]
/// times. The joint resampling is what lets a statistic of two gains (the ladder's
/// ln G_layer / ln G_primitive) carry the uncertainty of both. None when a figure
/// has fewer than [`MIN_ROUNDS`] rounds a set or a value not above 0, when the
/// statistic of the figures as measured is not finite, or when more than the
/// interval's tails of the resamples give a statistic that is not (a resampled
/// primitive gain of exactly 1 makes a share undefined).
pub fn bootstrap_figures(
    figures: &[&Rounds],
    statistic: impl Fn(&[f64]) -> f64,
    seed: u64,
) -> Option<Estimate> {
    if figures.is_empty() || !figures.iter().all(|f| f.usable()) {
        return None;
    }
    let values: Vec<f64> = figures.iter().map(|f| f.value()).collect();
    let point = statistic(&values);
    if !point.is_finite() {
        return None;
    }
    let mut rng = SplitMix64(seed);
    let mut scratch: Vec<(Vec<f64>, Vec<f64>)> = figures
        .iter()
        .map(|f| {
            (
                vec![0.0; f.num.len()],
                vec![0.0; f.den.as_ref().map_or(0, Vec::len)],
            )
        })
        .collect();
    let mut v = vec![0.0; figures.len()];
    let mut stats = Vec::with_capacity(RESAMPLES);
    for _ in 0..RESAMPLES {
        for (k, f) in figures.iter().enumerate() {
            let (a, b) = &mut scratch[k];
            v[k] = f.resampled(&mut rng, a, b);
        }
        let s = statistic(&v);
        if s.is_finite() {
            stats.push(s);
        }
    }
    let tail = (1.0 - LEVEL) / 2.0;
    if (stats.len() as f64) < RESAMPLES as f64 * (1.0 - tail) {
        return None;
    }
    stats.sort_by(f64::total_cmp);
    Some(Estimate {
        point,
        low: quantile_of_sorted(&stats, tail).min(point),
        high: quantile_of_sorted(&stats, 1.0 - tail).max(point),
        level: LEVEL,
    })
}

fn verdict_of(low: f64, high: f64) -> Verdict {
    if low > 1.0 {
        Verdict::Higher
    } else if high < 1.0 {
        Verdict::Lower
    } else {
        Verdict::NoClearDifference
    }
}

/// The median (sets here are small; a copy and a sort is cheapest to read); NaN
/// for an empty set (a figure of no rounds is not a number, never a panic).
fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Linear interpolation between the closest ranks (the "type 7" quantile).
fn quantile_of_sorted(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, seedable, good enough to pick
/// resampling indices, and the same on every platform.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n small: the modulo bias is below 2^-50).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clear_gain_has_an_interval_above_one() {
        let accel = [10.0, 10.2, 9.9, 10.1, 10.0];
        let noaesni = [5.0, 5.1, 4.9, 5.0, 5.05];
        let r = RatioInterval::bootstrap(&accel, &noaesni, Pairing::Independent, 1).unwrap();
        assert_eq!(r.point, 2.0);
        assert!(r.low > 1.9 && r.low <= 2.0, "{r:?}");
        assert!(r.high >= 2.0 && r.high < 2.1, "{r:?}");
        assert_eq!(r.verdict, Verdict::Higher);
        assert_eq!(r.display(), format!("2.00x [{:.2}-{:.2}]", r.low, r.high));
        let flipped = RatioInterval::bootstrap(&noaesni, &accel, Pairing::Independent, 1).unwrap();
        assert_eq!(flipped.verdict, Verdict::Lower);
    }

    #[test]
    fn an_interval_spanning_one_is_no_clear_difference() {
        let a = [100.0, 92.0, 108.0, 97.0, 104.0];
        let b = [99.0, 106.0, 94.0, 101.0, 95.0];
        let r = RatioInterval::bootstrap(&a, &b, Pairing::Independent, 7).unwrap();
        assert!(r.low < 1.0 && r.high > 1.0, "{r:?}");
        assert_eq!(r.verdict, Verdict::NoClearDifference);
        assert!(!r.is_clear());
        assert!(
            r.display().ends_with(", no clear difference"),
            "{}",
            r.display()
        );
    }

    #[test]
    fn the_same_seed_gives_the_same_interval_and_another_seed_nearly_so() {
        let a = [10.0, 11.0, 9.5, 10.4, 10.9, 9.8, 10.2];
        let b = [8.0, 8.8, 7.9, 8.3, 8.1, 8.6, 8.2];
        let one = RatioInterval::bootstrap(&a, &b, Pairing::Independent, 42).unwrap();
        let again = RatioInterval::bootstrap(&a, &b, Pairing::Independent, 42).unwrap();
        assert_eq!(one, again);
        let other = RatioInterval::bootstrap(&a, &b, Pairing::Independent, 43).unwrap();
        assert!((one.low - other.low).abs() < 0.03, "{one:?} {other:?}");
        assert!((one.high - other.high).abs() < 0.03, "{one:?} {other:?}");
    }

    #[test]
    fn pairing_cancels_drift_shared_by_a_pair() {
        // The machine slows down over the run; each round of a and b moves together.
        let drift = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5];
        let a: Vec<f64> = drift.iter().map(|d| 10.5 * d).collect();
        let b: Vec<f64> = drift.iter().map(|d| 10.0 * d).collect();
        let paired = RatioInterval::bootstrap(&a, &b, Pairing::Paired, 3).unwrap();
        let apart = RatioInterval::bootstrap(&a, &b, Pairing::Independent, 3).unwrap();
        // Every pair says 1.05: paired sees it; apart, the drift swamps it.
        assert_eq!(paired.verdict, Verdict::Higher, "{paired:?}");
        assert!((paired.high - paired.low) < 0.2, "{paired:?}");
        assert_eq!(apart.verdict, Verdict::NoClearDifference, "{apart:?}");
    }

    #[test]
    fn too_few_or_unusable_rounds_give_no_interval() {
        assert!(
            RatioInterval::bootstrap(&[1.0, 2.0], &[1.0, 2.0, 3.0], Pairing::Independent, 1)
                .is_none()
        );
        assert!(RatioInterval::bootstrap(
            &[1.0, 2.0, f64::NAN],
            &[1.0, 2.0, 3.0],
            Pairing::Independent,
            1
        )
        .is_none());
        assert!(RatioInterval::bootstrap(
            &[1.0, 2.0, 3.0],
            &[0.0, 2.0, 3.0],
            Pairing::Independent,
            1
        )
        .is_none());
        assert!(RatioInterval::bootstrap(
            &[1.0, 2.0, 3.0],
            &[1.0, 2.0, 3.0, 4.0],
            Pairing::Paired,
            1
        )
        .is_none());
    }

    #[test]
    fn a_ratio_of_ratios_divides_out_the_control() {
        // Machine B is 1.5x A on AES and 1.5x A on the control: no difference in
        // acceleration, whatever the CPU speed.
        let aes_a = [100.0, 102.0, 98.0, 101.0, 99.0];
        let aes_b: Vec<f64> = aes_a.iter().map(|v| v * 1.5).collect();
        let ctl_a = [10.0, 10.1, 9.9, 10.05, 9.95];
        let ctl_b: Vec<f64> = ctl_a.iter().map(|v| v * 1.5).collect();
        let f = RatioInterval::bootstrap_of(
            &[&aes_b, &aes_a, &ctl_b, &ctl_a],
            |m| (m[0] / m[1]) / (m[2] / m[3]),
            5,
        )
        .unwrap();
        assert!((f.point - 1.0).abs() < 1e-12);
        assert_eq!(f.verdict, Verdict::NoClearDifference);
        // With twice the AES gain on B, the factor is clearly 2.
        let aes_b2: Vec<f64> = aes_a.iter().map(|v| v * 3.0).collect();
        let g = RatioInterval::bootstrap_of(
            &[&aes_b2, &aes_a, &ctl_b, &ctl_a],
            |m| (m[0] / m[1]) / (m[2] / m[3]),
            5,
        )
        .unwrap();
        assert_eq!(g.verdict, Verdict::Higher);
        assert!(g.low > 1.9 && g.high < 2.1, "{g:?}");
        // The two-set case agrees with bootstrap's independent resampling.
        let two = RatioInterval::bootstrap_of(&[&aes_b, &aes_a], |m| m[0] / m[1], 5).unwrap();
        assert!((two.point - 1.5).abs() < 1e-12);
        assert!(RatioInterval::bootstrap_of(&[&aes_b[..2], &aes_a], |m| m[0] / m[1], 5).is_none());
    }

    #[test]
    fn a_ratio_figure_agrees_with_the_two_set_bootstrap() {
        let a = [10.0, 10.2, 9.9, 10.1, 10.0];
        let b = [5.0, 5.1, 4.9, 5.0, 5.05];
        for pairing in [Pairing::Paired, Pairing::Independent] {
            let direct = RatioInterval::bootstrap(&a, &b, pairing, 11).unwrap();
            let g = Rounds::ratio(a.to_vec(), b.to_vec(), pairing, Centre::Median);
            let e = bootstrap_figures(&[&g], |v| v[0], 11).unwrap();
            let via = RatioInterval::from_estimate(e, pairing, (5, 5));
            assert_eq!(via, direct);
        }
    }

    #[test]
    fn a_share_of_two_gains_carries_both_gains_uncertainty() {
        // The primitive gains 10x, steadily; the layer 2x, with a noisy accel side.
        let p_accel = [100.0, 101.0, 99.0, 100.5, 99.5];
        let p_no = [10.0, 10.1, 9.9, 10.05, 9.95];
        let l_accel = [20.0, 24.0, 17.0, 22.0, 19.0];
        let l_no = [10.0, 10.0, 10.0, 10.0, 10.0];
        let prim = Rounds::ratio(
            p_accel.to_vec(),
            p_no.to_vec(),
            Pairing::Independent,
            Centre::Median,
        );
        let layer = Rounds::ratio(
            l_accel.to_vec(),
            l_no.to_vec(),
            Pairing::Independent,
            Centre::Median,
        );
        let keeps = bootstrap_figures(&[&layer, &prim], |v| v[0].ln() / v[1].ln(), 3).unwrap();
        assert!((keeps.point - 2f64.ln() / 10f64.ln()).abs() < 1e-12);
        assert!(
            keeps.low < keeps.point && keeps.point < keeps.high,
            "{keeps:?}"
        );
        // The layer's spread is most of it: a steady layer gives a narrower share.
        let steady = Rounds::ratio(
            vec![20.0, 20.1, 19.9, 20.05, 19.95],
            l_no.to_vec(),
            Pairing::Independent,
            Centre::Median,
        );
        let narrow = bootstrap_figures(&[&steady, &prim], |v| v[0].ln() / v[1].ln(), 3).unwrap();
        assert!(narrow.high - narrow.low < (keeps.high - keeps.low) / 3.0);
    }

    #[test]
    fn a_mean_figure_is_the_mean_and_rescaling_keeps_the_relative_width() {
        let a = Rounds::ratio(
            vec![1.0, 2.0, 3.0, 6.0],
            vec![1.0, 1.0, 1.0, 1.0],
            Pairing::Independent,
            Centre::Mean,
        );
        assert_eq!(a.value(), 3.0);
        let e = bootstrap_figures(&[&a], |v| v[0], 1).unwrap();
        let r = RatioInterval::from_estimate(e, Pairing::Independent, (4, 4));
        let s = r.scaled_to(1.5);
        assert_eq!(s.point, 1.5);
        assert!((s.low / s.point - r.low / r.point).abs() < 1e-12);
        assert!((s.high / s.point - r.high / r.point).abs() < 1e-12);
        // The verdict follows the new ends: centred on 1.0 it holds 1.0; moved
        // well above, it is a gain.
        let centred = r.scaled_to(r.point / (r.low * r.high).sqrt());
        assert_eq!(centred.verdict, Verdict::NoClearDifference, "{centred:?}");
        assert_eq!(r.scaled_to(r.point * 2.0 / r.low).verdict, Verdict::Higher);
    }

    #[test]
    fn figures_without_enough_rounds_give_no_estimate() {
        let few = Rounds::single(vec![1.0, 2.0], Centre::Median);
        assert!(bootstrap_figures(&[&few], |v| v[0], 1).is_none());
        let unpaired = Rounds::ratio(
            vec![1.0, 2.0, 3.0],
            vec![1.0, 2.0, 3.0, 4.0],
            Pairing::Paired,
            Centre::Median,
        );
        assert!(bootstrap_figures(&[&unpaired], |v| v[0], 1).is_none());
        // A share of a primitive that did not move is undefined, not infinite.
        let flat = Rounds::ratio(
            vec![1.0, 1.0, 1.0],
            vec![1.0, 1.0, 1.0],
            Pairing::Independent,
            Centre::Median,
        );
        let some = Rounds::ratio(
            vec![2.0, 2.0, 2.0],
            vec![1.0, 1.0, 1.0],
            Pairing::Independent,
            Centre::Median,
        );
        assert!(bootstrap_figures(&[&some, &flat], |v| v[0].ln() / v[1].ln(), 1).is_none());
        // No rounds at all (a record that kept none): no figure, no panic.
        let none = Rounds::ratio(Vec::new(), Vec::new(), Pairing::Paired, Centre::Median);
        assert!(none.value().is_nan());
        assert!(bootstrap_figures(&[&none], |v| v[0], 1).is_none());
        assert!(Rounds::single(Vec::new(), Centre::Mean).value().is_nan());
    }

    #[test]
    fn the_interval_always_holds_the_point() {
        let a = [3.0, 1.0, 2.0];
        let b = [1.0, 1.0, 1.0];
        let r = RatioInterval::bootstrap(&a, &b, Pairing::Independent, 9).unwrap();
        assert!(r.low <= r.point && r.point <= r.high);
        assert_eq!(r.rounds, (3, 3));
    }
}
