//! Target `sizes`: the size parsers and formatters of `cipherbench-model`'s units
//! (`ByteSize` from text, `parse_size_list`, `ByteSize`'s display, the rate
//! formatters), which every `--sizes`, `--size` and `--chunk` flag goes through.
//!
//! Input: byte 0 picks the mode. 0: bytes 1..9 are a `u64` number of bytes: its
//! display parses back to it, with and without the space (`1.5 MiB`, `1.5MiB`), over
//! the whole u64 range. 1: bytes 1..9 are an `f64` rate: the formatters never panic,
//! and a finite rate of at least 1 reads back within half a unit of its last printed
//! digit. Otherwise: the rest is text (lossy UTF-8) for the parsers: a size that
//! parses displays and parses back to itself; a list that parses has one size per
//! comma-separated item, each the item parsed alone, and its display joined by commas
//! parses back to the same list.

use crate::Bytes;
use cipherbench_model::units::{format_bits_per_sec, format_bytes_per_sec, parse_size_list};
use cipherbench_model::ByteSize;

/// `parse(display(n)) == n`, spaced and unspaced.
fn round_trips(n: ByteSize) {
    let shown = n.to_string();
    assert_eq!(
        shown.parse::<ByteSize>(),
        Ok(n),
        "'{shown}' does not parse back to {} bytes",
        n.0
    );
    let tight = shown.replace(' ', "");
    assert_eq!(
        tight.parse::<ByteSize>(),
        Ok(n),
        "'{tight}' does not parse back to {} bytes",
        n.0
    );
}

/// The formatted rate, read back: `4.02 GB/s` gives 4.02e9 and the unit of its last
/// digit (1e7).
fn read_back(text: &str, unit: &str) -> (f64, f64) {
    let (number, rest) = text.split_once(' ').expect("number, space, unit");
    let scale = match rest.strip_suffix(unit).expect("the unit at the end") {
        "G" => 1e9,
        "M" => 1e6,
        "k" => 1e3,
        "" => 1.0,
        other => panic!("unknown prefix {other:?} in {text:?}"),
    };
    let decimals = number.split_once('.').map_or(0, |(_, f)| f.len());
    let value: f64 = number.parse().expect("a decimal number");
    (value * scale, scale / 10f64.powi(decimals as i32))
}

/// See the module documentation.
pub fn check(data: &[u8]) {
    let mut input = Bytes::new(data);
    match input.u8() {
        0 => round_trips(ByteSize(input.u64())),
        1 => {
            let rate = f64::from_bits(input.u64());
            let bytes = format_bytes_per_sec(rate);
            let bits = format_bits_per_sec(rate);
            assert!(bytes.ends_with("B/s") && bits.ends_with("bit/s"));
            if rate.is_finite() && rate >= 1.0 && rate * 8.0 < f64::MAX {
                for (text, unit, value) in [(&bytes, "B/s", rate), (&bits, "bit/s", rate * 8.0)] {
                    let (read, step) = read_back(text, unit);
                    assert!(
                        (read - value).abs() <= step * 0.5 * (1.0 + 1e-9) + value * 1e-12,
                        "{value} printed as {text:?}"
                    );
                }
            }
        }
        _ => {
            let text = String::from_utf8_lossy(input.rest());
            if let Ok(n) = text.parse::<ByteSize>() {
                round_trips(n);
            }
            if let Ok(list) = parse_size_list(&text) {
                let items: Vec<&str> = text.split(',').collect();
                assert_eq!(list.len(), items.len(), "one size per item of {text:?}");
                for (size, item) in list.iter().zip(&items) {
                    assert_eq!(item.parse::<ByteSize>().as_ref(), Ok(size));
                }
                let shown: Vec<String> = list.iter().map(ToString::to_string).collect();
                assert_eq!(
                    parse_size_list(&shown.join(",")),
                    Ok(list),
                    "display of {text:?}"
                );
            }
        }
    }
}
