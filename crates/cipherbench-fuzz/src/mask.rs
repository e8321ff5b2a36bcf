//! Target `mask`: the `ia32cap:MASK` validator (`cipherbench::variant::mask::parse`),
//! which stands between a user's variant and `OPENSSL_ia32cap`. OpenSSL never refuses
//! that variable: whatever it cannot read silently becomes 0 (crypto/cpuid.c). So a
//! mask the validator accepts must be one OpenSSL reads exactly as the validator does.
//!
//! Input: the bytes as text (lossy UTF-8). Properties:
//! - no panic, whatever the text;
//! - accepted: 1 to 5 fields, and each field, read here the way OpenSSL's
//!   `ossl_strtouint64` does (an optional `~`, base from the prefix as `strtoull`'s
//!   base 0: `0x` hex, a leading `0` octal, else decimal; stops at the first non-digit;
//!   wraps mod 2^64), consumes the whole field, does not wrap, and gives the validator's
//!   complement flag and value;
//! - accepted: the mask printed back (`~0x..`) is accepted as the same fields;
//! - refused: the message is one line and quotes the mask.

use cipherbench::variant::mask::{self, Field, MAX_FIELDS};

/// OpenSSL's reading of one field: `(complement, value, whole field consumed, wrapped)`.
fn openssl_reads(field: &str) -> (bool, u64, bool, bool) {
    let (complement, number) = match field.strip_prefix('~') {
        Some(rest) => (true, rest),
        None => (false, field),
    };
    let (base, digits) = if let Some(hex) = number
        .strip_prefix("0x")
        .or_else(|| number.strip_prefix("0X"))
    {
        (16u32, hex)
    } else if let Some(octal) = number.strip_prefix('0') {
        // The `0` itself is a digit of the octal number: "0" reads as 0, consumed.
        (8, octal)
    } else {
        (10, number)
    };
    let mut value = 0u64;
    let mut wrapped = false;
    let mut used = 0;
    for c in digits.chars() {
        let Some(d) = c.to_digit(base) else { break };
        let (m, o1) = value.overflowing_mul(u64::from(base));
        let (a, o2) = m.overflowing_add(u64::from(d));
        wrapped |= o1 || o2;
        value = a;
        used += c.len_utf8();
    }
    // "0x" with no hex digit: strtoull reads the "0" and stops before the "x".
    let whole = used == digits.len() && !(base == 16 && digits.is_empty());
    (complement, value, whole, wrapped)
}

fn printed(fields: &[Field]) -> String {
    fields
        .iter()
        .map(|f| format!("{}0x{:x}", if f.complement { "~" } else { "" }, f.value))
        .collect::<Vec<_>>()
        .join(":")
}

/// See the module documentation.
pub fn check(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match mask::parse(&text) {
        Ok(m) => {
            assert!(
                (1..=MAX_FIELDS).contains(&m.fields.len()),
                "{text:?}: {} fields",
                m.fields.len()
            );
            let written: Vec<&str> = text.split(':').collect();
            assert_eq!(written.len(), m.fields.len(), "{text:?}");
            for (field, ours) in written.iter().zip(&m.fields) {
                let (complement, value, whole, wrapped) = openssl_reads(field);
                assert!(whole, "{text:?}: OpenSSL stops early in {field:?}");
                assert!(!wrapped, "{text:?}: OpenSSL wraps {field:?}");
                assert_eq!(
                    (complement, value),
                    (ours.complement, ours.value),
                    "{text:?}: OpenSSL reads {field:?} otherwise"
                );
                // Octal: OpenSSL's value differs from the decimal a reader sees, so the
                // validator must have refused any multi-digit field with a leading 0.
                let number = field.strip_prefix('~').unwrap_or(field);
                assert!(
                    !(number.len() > 1
                        && number.starts_with('0')
                        && !number[1..].starts_with(['x', 'X'])),
                    "{text:?}: {field:?} is octal to OpenSSL"
                );
            }
            let again = printed(&m.fields);
            assert_eq!(
                mask::parse(&again).map(|m| m.fields),
                Ok(m.fields.clone()),
                "{text:?} printed as {again:?}"
            );
        }
        Err(e) => {
            let message = e.to_string();
            assert!(
                !message.contains('\n') || text.contains('\n'),
                "{message:?}"
            );
            assert!(
                message.contains(&*text),
                "{message:?} does not quote {text:?}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fields_as_openssl_does() {
        assert_eq!(openssl_reads("~0x1g"), (true, 1, false, false));
        assert_eq!(openssl_reads("010"), (false, 8, true, false));
        assert_eq!(openssl_reads("0"), (false, 0, true, false));
        assert_eq!(openssl_reads("0x"), (false, 0, false, false));
        assert_eq!(
            openssl_reads("18446744073709551616"),
            (false, 0, true, true)
        );
        assert_eq!(openssl_reads("zz"), (false, 0, false, false));
    }

    #[test]
    fn the_noaesni_masks_and_junk_hold_the_properties() {
        for m in [
            mask::NOAESNI_TWO_FIELDS,
            mask::NOAESNI_FIVE_FIELDS,
            "zz",
            "~0x1g",
            "010",
            "",
            "::",
            "1:2:3:4:5:6",
        ] {
            check(m.as_bytes());
        }
    }
}
