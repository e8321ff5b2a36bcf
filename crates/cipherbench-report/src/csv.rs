//! CSV renderings, one file per layer, one row per measured point, units in the
//! column names (RFC 4180 quoting).

use cipherbench_model::speed::SpeedResults;

/// Quotes a field if it needs it.
pub fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Layer 1: `speed.csv`.
pub fn speed(results: &SpeedResults) -> String {
    let mut out = String::from(
        "cipher,variant,direction,size_bytes,threads,samples,throughput_bytes_per_sec_median,throughput_bytes_per_sec_min,throughput_bytes_per_sec_max,rel_spread,cpu_cores_used\n",
    );
    for p in &results.points {
        let t = &p.throughput_bytes_per_sec;
        out.push_str(&format!(
            "{},{},{},{},{},{},{:.0},{:.0},{:.0},{:.4},{:.3}\n",
            field(&p.cipher),
            field(&p.variant),
            p.direction.as_str(),
            p.size_bytes,
            p.threads,
            t.n,
            t.median,
            t.min,
            t.max,
            t.rel_spread,
            p.cpu_cores_used
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_fields_that_need_it() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
