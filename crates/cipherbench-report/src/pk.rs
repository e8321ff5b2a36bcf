//! Layer 1's public-key table (`speed --pk`), in text and HTML: operations per
//! second per variant and thread count, and what each variant's mask did to each
//! operation against accel of the same library. A mask that moved nothing is said
//! in words, not printed as a ratio of 1.0 that would read as a finding.

use crate::svg::escape;
use crate::variants;
use cipherbench_model::env::split_variant_name;
use cipherbench_model::speed::pk::{effect, point, MaskEffect, MOVED_AT};
use cipherbench_model::speed::SpeedResults;

/// One row of the table: an operation of an algorithm.
struct Row {
    algorithm: String,
    /// `encaps`, `sign (ECDSA)`.
    operation: String,
    /// Median operations per second, per (variant, threads) column; None: not
    /// measured (the library lacks it).
    cells: Vec<Option<f64>>,
    /// Per masked variant: what it did at one thread.
    effects: Vec<Option<MaskEffect>>,
}

/// The baseline a variant is judged against: accel of the same library.
fn baseline_of(variant: &str) -> String {
    match split_variant_name(variant).1 {
        Some(tag) => format!("accel@{tag}"),
        None => "accel".into(),
    }
}

/// The variants that are not a baseline and whose baseline ran.
fn masked(results: &SpeedResults) -> Vec<&String> {
    let names = &results.config.variants;
    names
        .iter()
        .filter(|v| split_variant_name(v).0 != "accel" && names.contains(&baseline_of(v)))
        .collect()
}

fn label(algorithm: &str, operation: &str) -> String {
    let scheme = match (algorithm, operation) {
        ("p-256", "derive") => " (ECDH)",
        ("p-256", _) => " (ECDSA)",
        _ => "",
    };
    format!("{operation}{scheme}")
}

fn rows(results: &SpeedResults) -> Vec<Row> {
    let points = &results.pk_points;
    let masked = masked(results);
    let mut out: Vec<Row> = Vec::new();
    for algorithm in &results.config.public_key {
        let mut operations: Vec<&str> = Vec::new();
        for p in points.iter().filter(|p| &p.algorithm == algorithm) {
            if !operations.contains(&p.operation.as_str()) {
                operations.push(&p.operation);
            }
        }
        for op in operations {
            let cells = results
                .config
                .variants
                .iter()
                .flat_map(|v| {
                    results.config.threads.iter().map(move |&t| {
                        point(points, algorithm, op, v, t).map(|p| p.ops_per_sec.median)
                    })
                })
                .collect();
            let effects = masked
                .iter()
                .map(|v| effect(points, algorithm, op, (v, &baseline_of(v)), 1))
                .collect();
            out.push(Row {
                algorithm: algorithm.clone(),
                operation: label(algorithm, op),
                cells,
                effects,
            });
        }
    }
    out
}

/// A figure of operations per second, three significant figures.
fn ops(rate: f64) -> String {
    if rate >= 1e6 {
        format!("{:.2}M", rate / 1e6)
    } else if rate >= 1e4 {
        format!("{:.0}k", rate / 1e3)
    } else if rate >= 1e3 {
        format!("{:.1}k", rate / 1e3)
    } else {
        format!("{rate:.0}")
    }
}

fn effect_text(e: Option<MaskEffect>) -> String {
    match e {
        Some(MaskEffect::Moved(r)) => format!("{:.2}x [{:.2}-{:.2}]", r.point, r.low, r.high),
        Some(MaskEffect::Unmoved(_)) => "unmoved".into(),
        Some(MaskEffect::Unclear(r)) => {
            format!("unclear {:.2}x [{:.2}-{:.2}]", r.point, r.low, r.high)
        }
        None => "-".into(),
    }
}

/// The algorithms every masked variant left unmoved: named in words under the table.
fn unmoved_algorithms(results: &SpeedResults, rows: &[Row]) -> Vec<String> {
    if masked(results).is_empty() {
        return Vec::new();
    }
    let mut out: Vec<String> = Vec::new();
    for algorithm in &results.config.public_key {
        let mine: Vec<&Row> = rows.iter().filter(|r| &r.algorithm == algorithm).collect();
        let unmoved = mine.iter().all(|r| {
            r.effects
                .iter()
                .all(|e| matches!(e, Some(MaskEffect::Unmoved(_))))
        });
        if !mine.is_empty() && unmoved {
            out.push(algorithm.clone());
        }
    }
    out
}

/// The public-key algorithms a variant's library lacks: every unavailable entry that
/// is not a cipher of the run (an algorithm no variant had is not in the plan's list,
/// but is recorded).
fn unavailable(
    results: &SpeedResults,
) -> impl Iterator<Item = &cipherbench_model::speed::Unavailable> {
    results
        .unavailable
        .iter()
        .filter(|u| !results.config.ciphers.contains(&u.cipher))
}

/// The text table, or nothing without public-key points.
pub fn text(results: &SpeedResults) -> String {
    if results.pk_points.is_empty() && results.config.public_key.is_empty() {
        return String::new();
    }
    let rows = rows(results);
    let masked = masked(results);
    let columns: Vec<String> = results
        .config
        .variants
        .iter()
        .flat_map(|v| {
            let name = variants::text_name(&results.variants, v);
            results
                .config
                .threads
                .iter()
                .map(move |t| format!("{name} x{t}"))
        })
        .collect();
    let width = columns.iter().map(String::len).max().unwrap_or(8).max(8);
    let mut out = String::from(
        "\npublic-key operations per second (median of the samples; xN = N threads)\n",
    );
    out.push_str(&format!("{:<12} {:<16}", "algorithm", "operation"));
    for c in &columns {
        out.push_str(&format!(" {c:>width$}"));
    }
    for v in &masked {
        let head = format!("{v}/{}", baseline_of(v));
        out.push_str(&format!("  {head:<22}"));
    }
    out.push('\n');
    for r in &rows {
        out.push_str(&format!("{:<12} {:<16}", r.algorithm, r.operation));
        for c in &r.cells {
            let cell = c.map(ops).unwrap_or_else(|| "-".into());
            out.push_str(&format!(" {cell:>width$}"));
        }
        for e in &r.effects {
            out.push_str(&format!("  {:<22}", effect_text(*e)));
        }
        out.push('\n');
    }
    for u in unavailable(results) {
        {
            let reason = u.reason.split(" (").next().unwrap_or(&u.reason);
            out.push_str(&format!(
                "{:<12} unavailable in {}: {reason}\n",
                u.cipher, u.variant
            ));
        }
    }
    if !masked.is_empty() {
        out.push_str(&format!(
            "(a mask's column: the variant over accel of the same library at 1 thread, with its 95 % interval; \
'unmoved' where the ratio is within ±{:.0} % of 1.0 and its interval within ±15 %: the same code ran; 'unclear' where the samples say neither)\n",
            MOVED_AT * 100.0
        ));
    }
    let unmoved = unmoved_algorithms(results, &rows);
    if !unmoved.is_empty() {
        out.push_str(&format!(
            "every mask of this run left {} unmoved (against accel of the same library, at 1 thread): the library has no path these masks turn off for them\n",
            unmoved.join(", ")
        ));
    }
    if !results.pk_checks.is_empty() {
        out.push_str("\ncross-check against openssl speed (single thread, both per CPU second; with several runs, the median of each run against ours just before and after it [lowest-highest]):\n");
        for c in &results.pk_checks {
            let line = format!(
                "  {:<12} {:<8} {:<12} ours {:>8}  openssl {:>8}  ours/openssl {:.2} {}",
                c.algorithm,
                c.operation,
                c.variant,
                ops(c.ours_ops_per_cpu_sec),
                ops(c.openssl_ops_per_sec),
                c.ratio,
                spread_text(c)
            );
            out.push_str(line.trim_end());
            out.push('\n');
        }
        let within = results
            .pk_checks
            .iter()
            .filter(|c| (c.ratio - 1.0).abs() <= 0.10)
            .count();
        out.push_str(&format!(
            "  {within} of {} within 10 % of openssl speed\n",
            results.pk_checks.len()
        ));
    }
    out
}

/// The HTML table, or nothing without public-key points.
pub fn html(results: &SpeedResults) -> String {
    if results.pk_points.is_empty() && results.config.public_key.is_empty() {
        return String::new();
    }
    let rows = rows(results);
    let masked = masked(results);
    let mut out = String::from(
        "<h3 id=\"speed-pk\">Public-key operations</h3>\
<p>Operations per second of each public-key operation (median of the samples), per variant and thread count: \
ML-KEM's key generation, encapsulation and decapsulation (the post-quantum half of X25519MLKEM768), \
ML-DSA, ECDSA and RSA signing and verification, X25519 and P-256 key agreement. \
A mask's column is the variant over accel of the same library at one thread, with its 95 % interval; \
<i>unmoved</i> where the same code ran (within 5 %, its interval within 15 %), <i>unclear</i> where the samples say neither.</p><table><tr><th>algorithm</th><th>operation</th>",
    );
    for v in &results.config.variants {
        for t in &results.config.threads {
            out.push_str(&format!(
                "<th>{} x{t}</th>",
                variants::html_name(&results.variants, v)
            ));
        }
    }
    for v in &masked {
        out.push_str(&format!(
            "<th>{}/{}</th>",
            escape(v),
            escape(&baseline_of(v))
        ));
    }
    out.push_str("</tr>");
    for r in &rows {
        out.push_str(&format!(
            "<tr><td>{}</td><td>{}</td>",
            escape(&r.algorithm),
            escape(&r.operation)
        ));
        for c in &r.cells {
            out.push_str(&format!(
                "<td class=\"num\">{}</td>",
                c.map(ops).unwrap_or_else(|| "-".into())
            ));
        }
        for e in &r.effects {
            out.push_str(&format!("<td>{}</td>", escape(&effect_text(*e))));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    let unmoved = unmoved_algorithms(results, &rows);
    if !unmoved.is_empty() {
        out.push_str(&format!(
            "<p>Every mask of this run left {} unmoved (against accel of the same library, at one thread): the library has no path these masks turn off for them.</p>",
            escape(&unmoved.join(", "))
        ));
    }
    let lacking: Vec<String> = unavailable(results)
        .map(|u| format!("{} in {}", u.cipher, u.variant))
        .collect();
    if !lacking.is_empty() {
        out.push_str(&format!(
            "<p>Not in the library: {}.</p>",
            escape(&lacking.join(", "))
        ));
    }
    if !results.pk_checks.is_empty() {
        out.push_str("<p>Cross-check against <code>openssl speed</code> of the same library (one thread, both per CPU second):</p><table><tr><th>algorithm</th><th>operation</th><th>variant</th><th>ours</th><th>openssl</th><th>ours/openssl</th></tr>");
        for c in &results.pk_checks {
            out.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{:.2} {}</td></tr>",
                escape(&c.algorithm),
                escape(&c.operation),
                escape(&c.variant),
                ops(c.ours_ops_per_cpu_sec),
                ops(c.openssl_ops_per_sec),
                c.ratio,
                escape(&spread_text(c))
            ));
        }
        out.push_str("</table>");
    }
    out
}

/// `[0.91-1.07], 3 runs` for a check of several runs, else nothing.
fn spread_text(c: &cipherbench_model::speed::PkCheck) -> String {
    match c.spread() {
        Some((lo, hi)) => format!("[{lo:.2}-{hi:.2}], {} runs", c.ratios.len()),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cipherbench_model::speed::{PkPoint, SpeedSample};

    fn pt(algorithm: &str, op: &str, variant: &str, rates: &[u64]) -> PkPoint {
        let samples = rates
            .iter()
            .map(|&n| SpeedSample {
                ops: n,
                bytes: n,
                elapsed_ns: 1_000_000_000,
                cpu_ns: 1_000_000_000,
            })
            .collect();
        PkPoint::of(algorithm, op, variant, 1, samples)
    }

    fn results(points: Vec<PkPoint>) -> SpeedResults {
        let mut r: SpeedResults = serde_json::from_value(serde_json::json!({
            "config": {"ciphers": [], "sizes_bytes": [], "variants": ["accel", "nopkaccel"],
                "threads": [1], "directions": [], "warmup_ns": 0, "sample_ns": 0, "samples": 3,
                "public_key": ["ml-kem-768", "rsa-2048"]},
            "variants": [], "points": [], "unavailable": [], "controls": []
        }))
        .unwrap();
        r.pk_points = points;
        r
    }

    #[test]
    fn a_moved_operation_shows_its_ratio_and_an_unmoved_algorithm_is_said_in_words() {
        let r = results(vec![
            pt("ml-kem-768", "encaps", "accel", &[40000, 40100, 39900]),
            pt("ml-kem-768", "encaps", "nopkaccel", &[39950, 40050, 40000]),
            pt("rsa-2048", "sign", "accel", &[2500, 2510, 2490]),
            pt("rsa-2048", "sign", "nopkaccel", &[1100, 1110, 1090]),
        ]);
        let t = text(&r);
        assert!(t.contains("nopkaccel/accel"), "{t}");
        let kem = t.lines().find(|l| l.starts_with("ml-kem-768")).unwrap();
        assert!(kem.contains("unmoved") && !kem.contains("1.00x"), "{kem}");
        let rsa = t.lines().find(|l| l.starts_with("rsa-2048")).unwrap();
        assert!(rsa.contains("0.44x") && rsa.contains("2.5k"), "{rsa}");
        assert!(
            t.contains("every mask of this run left ml-kem-768 unmoved"),
            "{t}"
        );
        let h = html(&r);
        assert!(
            h.contains("Every mask of this run left ml-kem-768 unmoved") && h.contains("0.44x"),
            "{h}"
        );
    }

    #[test]
    fn nothing_without_public_key_work() {
        let mut r = results(Vec::new());
        r.config.public_key.clear();
        assert_eq!(text(&r), "");
        assert_eq!(html(&r), "");
    }
}
