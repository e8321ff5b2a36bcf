//! Layer 1 in cycles per byte: each point's CPU time at the clock measured in the
//! same run, beside the figure OpenSSL's implementers published for the same path
//! on this microarchitecture where there is one (METHODOLOGY.md, "Cycles per byte").

use crate::variants;
use cipherbench_model::speed::reference::{reference, MeasuredClock};
use cipherbench_model::speed::{Direction, SpeedResults};
use cipherbench_model::units::ByteSize;

/// "0.42", or with two significant digits above 10 ("37").
pub fn format(cycles_per_byte: f64) -> String {
    if cycles_per_byte >= 10.0 {
        format!("{cycles_per_byte:.0}")
    } else {
        format!("{cycles_per_byte:.2}")
    }
}

/// The one-thread table of cycles per byte, each direction, every size, and one
/// line per published reference (or one saying there is none for this CPU). Empty
/// without a measured clock or one-thread points.
pub fn text(results: &SpeedResults) -> String {
    let Some(clock) = &results.clock else {
        return String::new();
    };
    let hz = clock.hz();
    let sizes = &results.config.sizes_bytes;
    let width = crate::text::variant_width(results);
    let mut out = String::new();
    let mut references = Vec::new();
    for &direction in &results.config.directions {
        if !results
            .points
            .iter()
            .any(|p| p.threads == 1 && p.direction == direction)
        {
            continue;
        }
        out.push_str(&format!(
            "\n{} (1 thread), cycles per byte: CPU time x the core's clock\n",
            direction.as_str()
        ));
        out.push_str(&format!("{:<24} {:<width$}", "cipher", "variant"));
        for s in sizes {
            out.push_str(&format!(" {:>11}", ByteSize(*s).to_string()));
        }
        out.push('\n');
        for cipher in &results.config.ciphers {
            for variant in &results.config.variants {
                let cells: Vec<Option<f64>> = sizes
                    .iter()
                    .map(|&s| {
                        results
                            .point(cipher, variant, direction, s, 1)
                            .and_then(|p| p.cycles_per_byte(hz))
                    })
                    .collect();
                if cells.iter().all(Option::is_none) {
                    continue;
                }
                out.push_str(&format!(
                    "{cipher:<24} {:<width$}",
                    variants::text_name(&results.variants, variant)
                ));
                for c in cells {
                    let cell = c.map(format).unwrap_or_else(|| "-".into());
                    out.push_str(&format!(" {cell:>11}"));
                }
                out.push('\n');
            }
            if let Some(r) = clock
                .microarchitecture
                .as_deref()
                .and_then(|m| reference(cipher, direction == Direction::Encrypt, m))
            {
                out.push_str(&format!(
                    "{:<24} {:<width$} {:>11}  ({}, {}: OpenSSL {})\n",
                    "",
                    "published",
                    format(r.cycles_per_byte),
                    r.microarchitecture,
                    r.implementation,
                    r.source
                ));
                references.push(r);
            }
        }
    }
    if out.is_empty() {
        return out;
    }
    out.push_str(&clock_line(clock));
    if references.is_empty() {
        out.push_str(
            "published references: none for this CPU (OpenSSL's performance tables name Haswell, Broadwell, Skylake and Zen 1, \"Ryzen\", only)\n",
        );
    }
    out
}

/// How the cycles were counted, in one line.
pub fn clock_line(clock: &MeasuredClock) -> String {
    format!(
        "(clock {}{}, measured by a {})\n",
        clock.describe(),
        clock
            .cpu
            .map(|c| format!(" on CPU {c}"))
            .unwrap_or_default(),
        clock.method
    )
}

/// summary.md's line: AES-128-GCM's cycles per byte at the largest size, accel and
/// noaesni, one thread, encrypting, with the published reference where there is
/// one. None without a clock or those points.
pub fn summary_line(results: &SpeedResults) -> Option<String> {
    let clock = results.clock.as_ref()?;
    let size = results.config.sizes_bytes.iter().copied().max()?;
    let at = |variant: &str| {
        results
            .point("aes-128-gcm", variant, Direction::Encrypt, size, 1)
            .and_then(|p| p.cycles_per_byte(clock.hz()))
    };
    let accel = at("accel")?;
    let mut line = format!(
        "- aes-128-gcm at {}: {} cycles per byte with AES-NI",
        ByteSize(size),
        format(accel)
    );
    if let Some(n) = at("noaesni") {
        line.push_str(&format!(", {} without", format(n)));
    }
    line.push_str(&format!(" (clock {}", clock.describe()));
    match clock
        .microarchitecture
        .as_deref()
        .and_then(|m| reference("aes-128-gcm", true, m))
    {
        Some(r) => line.push_str(&format!(
            "; published for {}: {}, OpenSSL {})\n",
            r.microarchitecture,
            format(r.cycles_per_byte),
            r.source
        )),
        None => line.push_str("; no published reference for this CPU)\n"),
    }
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cipherbench_model::RunRecord;

    fn speed(microarchitecture: Option<&str>) -> SpeedResults {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/run-quick.json"
        ))
        .unwrap();
        let mut s = RunRecord::from_json(&text).unwrap().speed.unwrap();
        s.clock = Some(MeasuredClock {
            before_hz: 3.0e9,
            after_hz: Some(3.0e9),
            method: "dependent-add chain".into(),
            cpu: Some(0),
            microarchitecture: microarchitecture.map(str::to_string),
        });
        s
    }

    #[test]
    fn a_point_s_cycles_are_its_cpu_time_at_the_clock_over_its_bytes() {
        let s = speed(None);
        let p = s
            .point("aes-128-gcm", "accel", Direction::Encrypt, 16384, 1)
            .unwrap();
        // Every sample's own figure, then the median: at 3 GHz, 1 ns is 3 cycles.
        let mut each: Vec<f64> = p
            .samples
            .iter()
            .map(|x| x.cpu_ns as f64 * 3.0 / x.bytes as f64)
            .collect();
        each.sort_by(f64::total_cmp);
        assert_eq!(p.cycles_per_byte(3.0e9), Some(each[each.len() / 2]));
        let table = text(&s);
        assert!(table.contains(&format(each[each.len() / 2])), "{table}");
        assert!(table.contains("published references: none for this CPU"));
        assert!(table.contains("(clock 3.00 GHz on CPU 0, measured by a dependent-add chain)"));
        let line = summary_line(&s).unwrap();
        assert!(
            line.contains("no published reference for this CPU"),
            "{line}"
        );
    }

    #[test]
    fn on_a_core_the_tables_name_its_figure_is_printed_with_its_source() {
        let s = speed(Some("Skylake"));
        let table = text(&s);
        assert!(
            table.contains("0.63  (Skylake, AES-NI + AVX stitched GCM: OpenSSL crypto/modes/asm/aesni-gcm-x86_64.pl"),
            "{table}"
        );
        assert!(!table.contains("none for this CPU"));
        assert!(summary_line(&s)
            .unwrap()
            .contains("published for Skylake: 0.63"));
    }

    #[test]
    fn without_a_clock_there_are_no_cycles() {
        let mut s = speed(None);
        s.clock = None;
        assert_eq!(text(&s), "");
        assert_eq!(summary_line(&s), None);
    }
}
