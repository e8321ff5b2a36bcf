//! Calendar time as text, without a clock: the app reads the clock and hands the
//! seconds since the epoch here.

/// Formats seconds since the Unix epoch as an RFC 3339 UTC timestamp,
/// `2026-11-21T22:37:50Z`.
pub fn rfc3339_utc(unix_seconds: u64) -> String {
    let (y, m, d, hh, mm, ss) = civil(unix_seconds);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
}

/// The compact form used in result directory names: `20261121-223750`.
pub fn compact_utc(unix_seconds: u64) -> String {
    let (y, m, d, hh, mm, ss) = civil(unix_seconds);
    format!("{y:04}{m:02}{d:02}-{hh:02}{mm:02}{ss:02}")
}

/// Splits seconds since the epoch into a proleptic Gregorian date and time of day.
/// Days-to-civil after Howard Hinnant's `civil_from_days`.
fn civil(unix_seconds: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = (unix_seconds / 86_400) as i64;
    let rem = unix_seconds % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        y,
        m,
        d,
        (rem / 3600) as u32,
        ((rem % 3600) / 60) as u32,
        (rem % 60) as u32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339_utc(1_795_300_670), "2026-11-21T22:37:50Z");
        assert_eq!(compact_utc(1_795_300_670), "20261121-223750");
    }
}
