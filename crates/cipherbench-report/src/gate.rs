//! `cipherbench compare BASELINE NEW --fail-above 5%`: the regression gate. Every
//! figure both runs measured (layer 1's points, the ladder's gains, layers 2 to 4)
//! is higher-is-better; NEW fails on a figure whose whole 95 % interval (NEW over
//! BASELINE, each run's rounds resampled on their own) lies below 1 - threshold: it
//! fell by more than the threshold, by more than the runs' own noise. A figure whose
//! median fell that far but whose interval reaches above is within the noise; one
//! without an interval (fewer than 3 rounds a side) is not judged. Neither fails: a
//! gate that fails on noise gets switched off.
//!
//! The interval holds the noise within each run, not the drift between two runs
//! made minutes or days apart (a shared VM's neighbours, the clock): the threshold
//! must cover that drift. On the 2-vCPU guest, quick-preset tunnel figures of one
//! build drifted up to 20 % between quiet runs (METHODOLOGY.md, "The gate").
//! Pure functions of the [`Comparison`].

use crate::compare::{Comparison, Unit};
use cipherbench_model::interval::RatioInterval;
use cipherbench_model::units::ByteSize;

/// How a figure fared under the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Its whole interval lies below 1 - threshold.
    Regressed,
    /// Its median fell beyond the threshold, its interval reaches above it.
    WithinNoise,
    /// Fell beyond the threshold with no interval to judge it by.
    NotJudged,
}

impl Outcome {
    /// As the JSON and the text say it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Regressed => "regressed",
            Outcome::WithinNoise => "within_noise",
            Outcome::NotJudged => "not_judged",
        }
    }
}

/// One figure that fell beyond the threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// `speed`, `ladder`, `file`, `tls`, `tunnel`.
    pub layer: String,
    /// What was measured.
    pub what: String,
    /// The baseline's figure and NEW's, in `unit`.
    pub baseline: f64,
    /// See `baseline`.
    pub new: f64,
    /// How to read them.
    pub unit: Unit,
    /// NEW / BASELINE.
    pub ratio: f64,
    /// Its 95 % interval, where both runs kept 3 rounds or more.
    pub interval: Option<RatioInterval>,
    /// The verdict.
    pub outcome: Outcome,
}

/// The gate's verdict on NEW.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    /// The largest fall allowed, a share (0.05 for 5 %).
    pub threshold: f64,
    /// Figures both runs measured (with the variant in effect in both).
    pub compared: usize,
    /// Figures measured in one run only, or whose variant did not take effect in one.
    pub unmatched: usize,
    /// The figures that fell beyond the threshold, regressed first.
    pub findings: Vec<Finding>,
}

impl Gate {
    /// The figures that regressed.
    pub fn regressions(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.outcome == Outcome::Regressed)
    }

    /// NEW passes: no figure regressed.
    pub fn passed(&self) -> bool {
        self.regressions().next().is_none()
    }
}

/// Judges record 1 of `c` against record 0 (the baseline).
pub fn judge(c: &Comparison, threshold: f64) -> Gate {
    let mut gate = Gate {
        threshold,
        compared: 0,
        unmatched: 0,
        findings: Vec::new(),
    };
    let speed = c.speed.iter().map(|r| {
        (
            "speed".to_string(),
            format!(
                "{} {} {} {} x{}",
                r.cipher,
                r.variant,
                r.direction.as_str(),
                ByteSize(r.size_bytes),
                r.threads
            ),
            Unit::Bytes,
            &r.values,
            r.interval(1),
        )
    });
    let layers = c.layers.iter().map(|r| {
        (
            r.layer.to_string(),
            r.what.clone(),
            r.unit,
            &r.values,
            r.interval(1),
        )
    });
    for (layer, what, unit, values, interval) in speed.chain(layers) {
        let (Some(Some(baseline)), Some(Some(new))) = (values.first(), values.get(1)) else {
            gate.unmatched += 1;
            continue;
        };
        gate.compared += 1;
        let ratio = new / baseline;
        if ratio.is_nan() || ratio >= 1.0 - threshold {
            continue;
        }
        let outcome = match &interval {
            Some(i) if i.high < 1.0 - threshold => Outcome::Regressed,
            Some(_) => Outcome::WithinNoise,
            None => Outcome::NotJudged,
        };
        gate.findings.push(Finding {
            layer,
            what,
            baseline: *baseline,
            new: *new,
            unit,
            ratio,
            interval,
            outcome,
        });
    }
    gate.findings.sort_by(|a, b| {
        (a.outcome != Outcome::Regressed)
            .cmp(&(b.outcome != Outcome::Regressed))
            .then(a.ratio.total_cmp(&b.ratio))
    });
    gate
}

fn interval_text(i: Option<&RatioInterval>) -> String {
    i.map_or_else(
        || "no interval: fewer than 3 rounds a side".to_string(),
        |i| format!("[{:.3}-{:.3}]", i.low, i.high),
    )
}

/// The gate for a person: a line per finding, then the verdict.
pub fn text(g: &Gate, labels: &[String]) -> String {
    let (base, new) = (
        labels.first().map_or("baseline", String::as_str),
        labels.get(1).map_or("new", String::as_str),
    );
    let mut out = String::new();
    for f in &g.findings {
        out.push_str(&format!(
            "{:<12} {} {}: {} -> {} = {:.3}x {}\n",
            f.outcome.as_str(),
            f.layer,
            f.what,
            f.unit.format(f.baseline),
            f.unit.format(f.new),
            f.ratio,
            interval_text(f.interval.as_ref())
        ));
    }
    let regressed = g.regressions().count();
    let noise = g
        .findings
        .iter()
        .filter(|f| f.outcome == Outcome::WithinNoise)
        .count();
    let unjudged = g.findings.len() - regressed - noise;
    out.push_str(&format!(
        "gate: {new} against {base}, {} figures compared ({} in one run only), threshold {:.1} %: {regressed} regressed, {noise} fell within their noise, {unjudged} fell without an interval to judge: {}\n",
        g.compared,
        g.unmatched,
        g.threshold * 100.0,
        if regressed == 0 { "pass" } else { "FAIL" }
    ));
    out
}

/// The gate as JSON, for CI.
pub fn json(g: &Gate, labels: &[String]) -> serde_json::Value {
    let findings: Vec<serde_json::Value> = g
        .findings
        .iter()
        .map(|f| {
            serde_json::json!({
                "outcome": f.outcome.as_str(),
                "layer": f.layer,
                "what": f.what,
                "baseline": f.baseline,
                "new": f.new,
                "unit": match f.unit {
                    Unit::Gain => "ratio",
                    Unit::Bytes | Unit::Bits => "bytes_per_sec",
                },
                "ratio": f.ratio,
                "interval": f.interval.as_ref().map(|i| [i.low, i.high]),
            })
        })
        .collect();
    serde_json::json!({
        "baseline": labels.first(),
        "new": labels.get(1),
        "threshold": g.threshold,
        "compared": g.compared,
        "unmatched": g.unmatched,
        "regressed": g.regressions().count(),
        "passed": g.passed(),
        "findings": findings,
    })
}

/// A threshold as given, in percent with or without the sign: `5%` and `5` are
/// both 0.05, `0.5` is half a percent. From 0 to under 100.
pub fn parse_threshold(given: &str) -> Result<f64, String> {
    let t = given.trim();
    let number = t.strip_suffix('%').unwrap_or(t).trim();
    match number.parse::<f64>() {
        Ok(p) if p.is_finite() && (0.0..100.0).contains(&p) => Ok(p / 100.0),
        _ => Err(format!(
            "--fail-above: '{given}' is not a percentage from 0 to under 100 (such as 5%)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{LayerRow, SpeedRow};
    use cipherbench_model::interval::{Centre, Rounds};
    use cipherbench_model::speed::Direction;

    fn rounds(v: &[f64]) -> Option<Rounds> {
        Some(Rounds::single(v.to_vec(), Centre::Median))
    }

    fn comparison(speed: Vec<SpeedRow>, layers: Vec<LayerRow>) -> Comparison {
        Comparison {
            labels: vec!["a".into(), "b".into()],
            differences: Vec::new(),
            verdicts: Vec::new(),
            speed,
            layers,
            not_effective: Vec::new(),
        }
    }

    fn speed_row(base: &[f64], new: &[f64]) -> SpeedRow {
        let median = |v: &[f64]| {
            let mut s = v.to_vec();
            s.sort_by(f64::total_cmp);
            s[s.len() / 2]
        };
        SpeedRow {
            cipher: "aes-128-gcm".into(),
            variant: "accel".into(),
            direction: Direction::Encrypt,
            size_bytes: 16384,
            threads: 1,
            values: vec![Some(median(base)), Some(median(new))],
            not_effective: vec![false, false],
            rounds: vec![rounds(base), rounds(new)],
        }
    }

    #[test]
    fn a_fall_beyond_the_threshold_and_the_noise_fails_and_one_within_either_passes() {
        let base = [10.0, 10.1, 9.9, 10.05, 9.95];
        // 0.5x, tight: regressed.
        let fell = speed_row(&base, &[5.0, 5.05, 4.95, 5.02, 4.98]);
        // 0.97x: within the threshold, not listed.
        let slight = speed_row(&base, &[9.7, 9.75, 9.65, 9.72, 9.68]);
        // 0.9x median but spread over 6-14: its interval holds 1.0.
        let noisy = speed_row(&base, &[6.0, 14.0, 9.0, 13.0, 7.0]);
        // 0.93x, its interval reaching above 0.95: a fall, not beyond the threshold
        // for sure.
        let edge = speed_row(&base, &[9.3, 9.6, 9.0, 9.55, 9.1]);
        let g = judge(
            &comparison(vec![fell, slight, noisy, edge], Vec::new()),
            0.05,
        );
        assert_eq!(g.compared, 4);
        assert!(!g.passed());
        assert_eq!(g.regressions().count(), 1);
        assert_eq!(g.findings[0].outcome, Outcome::Regressed);
        assert!((g.findings[0].ratio - 0.5).abs() < 0.01);
        assert!(g.findings[1..]
            .iter()
            .all(|f| f.outcome == Outcome::WithinNoise));
        assert_eq!(g.findings.len(), 3);
        let text = text(&g, &["a".into(), "b".into()]);
        assert!(
            text.contains("1 regressed, 2 fell within their noise"),
            "{text}"
        );
        assert!(text.trim_end().ends_with("FAIL"), "{text}");
        let j = json(&g, &["a".into(), "b".into()]);
        assert_eq!(j["passed"], false);
        assert_eq!(j["regressed"], 1);
        assert_eq!(j["findings"][0]["outcome"], "regressed");
    }

    #[test]
    fn a_fall_without_rounds_is_not_judged_and_a_rise_or_a_missing_figure_is_no_finding() {
        let one_round = LayerRow {
            layer: "tunnel",
            what: "aes128-gcm accel tcp".into(),
            unit: Unit::Bits,
            values: vec![Some(10.0), Some(2.0)],
            not_effective: vec![false, false],
            rounds: vec![rounds(&[10.0]), rounds(&[2.0])],
        };
        let rise = LayerRow {
            values: vec![Some(10.0), Some(20.0)],
            what: "null accel tcp".into(),
            ..one_round.clone()
        };
        let withheld = LayerRow {
            values: vec![Some(10.0), None],
            not_effective: vec![false, true],
            what: "aes128-gcm noaesni tcp".into(),
            ..one_round.clone()
        };
        let g = judge(
            &comparison(Vec::new(), vec![one_round, rise, withheld]),
            0.05,
        );
        assert!(g.passed());
        assert_eq!((g.compared, g.unmatched), (2, 1));
        assert_eq!(g.findings.len(), 1);
        assert_eq!(g.findings[0].outcome, Outcome::NotJudged);
        let text = text(&g, &["a".into(), "b".into()]);
        assert!(text.contains("no interval"), "{text}");
        assert!(text.trim_end().ends_with("pass"), "{text}");
    }

    #[test]
    fn thresholds_read_as_percentages() {
        assert_eq!(parse_threshold("5%"), Ok(0.05));
        assert_eq!(parse_threshold(" 12.5 "), Ok(0.125));
        assert_eq!(parse_threshold("0"), Ok(0.0));
        for bad in ["", "x", "-1%", "100%", "NaN", "5%%"] {
            assert!(parse_threshold(bad).is_err(), "{bad}");
        }
    }
}
