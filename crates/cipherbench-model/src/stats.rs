//! Statistics of repeated samples: median and spread, computed the same way for every
//! layer so that "±2.1 %" means one thing throughout the results.
//!
//! The spread is the median absolute deviation relative to the median (robust to one
//! stray sample, which a 2-core VM produces often). A summary whose relative spread is
//! above [`HIGH_SPREAD`] is flagged, and the flag travels with the data.

use serde::{Deserialize, Serialize};

/// Relative spread above which a measurement is flagged as noisy (5 %).
pub const HIGH_SPREAD: f64 = 0.05;

/// Summary of a set of samples of one quantity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Median (the reported figure).
    pub median: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Sample standard deviation (0 for a single sample).
    pub stddev: f64,
    /// Median absolute deviation divided by the median: the spread quoted as "±".
    pub rel_spread: f64,
}

impl Summary {
    /// Like [`Summary::of`], but an empty (or NaN-holding) set gives the all-zero
    /// summary with `n == 0`, for places that record "nothing measured" as data.
    pub fn of_or_empty(samples: &[f64]) -> Summary {
        Summary::of(samples).unwrap_or(Summary {
            n: 0,
            median: 0.0,
            mean: 0.0,
            min: 0.0,
            max: 0.0,
            stddev: 0.0,
            rel_spread: 0.0,
        })
    }

    /// Summarises samples. Returns `None` for an empty set or one containing NaN.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() || samples.iter().any(|s| s.is_nan()) {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = median_of_sorted(&sorted);
        let mean = sorted.iter().sum::<f64>() / n as f64;
        let stddev = if n > 1 {
            (sorted.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        let mut deviations: Vec<f64> = sorted.iter().map(|s| (s - median).abs()).collect();
        deviations.sort_by(f64::total_cmp);
        let mad = median_of_sorted(&deviations);
        let rel_spread = if median != 0.0 {
            mad / median.abs()
        } else {
            0.0
        };
        Some(Summary {
            n,
            median,
            mean,
            min: sorted[0],
            max: sorted[n - 1],
            stddev,
            rel_spread,
        })
    }

    /// Whether the spread is high enough that the median should be read with care.
    pub fn high_spread(&self) -> bool {
        self.rel_spread > HIGH_SPREAD
    }
}

fn median_of_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// Ratio of two medians with a conservative spread: the relative spreads add.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Ratio {
    /// numerator median / denominator median.
    pub value: f64,
    /// Sum of the two relative spreads.
    pub rel_spread: f64,
}

impl Ratio {
    /// The ratio `a / b`, or `None` when `b` is zero.
    pub fn of(a: &Summary, b: &Summary) -> Option<Ratio> {
        if b.median == 0.0 {
            return None;
        }
        Some(Ratio {
            value: a.median / b.median,
            rel_spread: a.rel_spread + b.rel_spread,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_set_gives_the_empty_summary_only_through_of_or_empty() {
        assert!(Summary::of(&[]).is_none());
        let e = Summary::of_or_empty(&[]);
        assert_eq!((e.n, e.median, e.rel_spread), (0, 0.0, 0.0));
        assert_eq!(
            Summary::of_or_empty(&[2.0, 4.0]),
            Summary::of(&[2.0, 4.0]).unwrap()
        );
    }

    #[test]
    fn summarises_odd_and_even_counts() {
        let s = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!(s.median, 2.0);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 3.0);
        assert_eq!(s.n, 3);
        let e = Summary::of(&[1.0, 2.0, 3.0, 10.0]).unwrap();
        assert_eq!(e.median, 2.5);
        assert_eq!(e.mean, 4.0);
    }

    #[test]
    fn spread_is_robust_to_one_outlier() {
        let s = Summary::of(&[100.0, 101.0, 99.0, 100.0, 10.0]).unwrap();
        assert_eq!(s.median, 100.0);
        assert!(s.rel_spread <= 0.01, "{}", s.rel_spread);
        assert!(!s.high_spread());
        let noisy = Summary::of(&[100.0, 80.0, 120.0, 70.0, 130.0]).unwrap();
        assert!(noisy.high_spread());
    }

    #[test]
    fn empty_or_nan_has_no_summary() {
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn single_sample_has_zero_spread() {
        let s = Summary::of(&[5.0]).unwrap();
        assert_eq!(s.stddev, 0.0);
        assert_eq!(s.rel_spread, 0.0);
    }

    #[test]
    fn ratio_adds_spreads() {
        let a = Summary::of(&[10.0, 11.0, 9.0]).unwrap();
        let b = Summary::of(&[4.0, 5.0, 6.0]).unwrap();
        let r = Ratio::of(&a, &b).unwrap();
        assert_eq!(r.value, 2.0);
        // 1/10 + 1/5: the sum, not either spread alone nor the larger.
        assert!((r.rel_spread - 0.3).abs() < 1e-12, "{}", r.rel_spread);
        let zero = Summary::of(&[0.0]).unwrap();
        assert!(Ratio::of(&a, &zero).is_none());
    }
}
