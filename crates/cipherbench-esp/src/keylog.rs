//! The SA key log: one SA as a line of Wireshark's ESP SA table (`esp_sa`), so that a
//! capture of our ESP can be decrypted by an implementation that is not ours, the
//! way `SSLKEYLOGFILE` serves TLS.
//!
//! The table is one of Wireshark's user tables: a text file, one record per line,
//! each field in double quotes, fields separated by commas, `#` starting a comment
//! line. An `esp_sa` record has eight fields in Wireshark 4.0 (Debian 12's, the one
//! tested): protocol (`IPv4`), source address, destination address, SPI (`0x` and
//! hex), encryption algorithm (by its name in Wireshark's list), encryption key (`0x`
//! and hex), authentication algorithm, authentication key. For AES-GCM the
//! encryption key is the key and the 4-byte salt together (RFC 4106 §8.1), as our
//! key material is laid out.
//!
//! This module formats lines and holds the secrets only in memory that is wiped; the
//! gateway writes them. It reads no file and knows no clock.

use crate::sa::SaParams;
use crate::transform::Transform;
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use zeroize::Zeroizing;

/// Wireshark's names for our transforms' algorithms (its ESP dissector's value
/// strings): (encryption, authentication). ChaCha20-Poly1305 is not in Wireshark
/// 4.0's list; later releases list it under this name.
pub fn wireshark_algorithms(transform: Transform) -> (&'static str, &'static str) {
    match transform {
        Transform::Null => ("NULL", "NULL"),
        Transform::Aes256Sha256 => ("AES-CBC [RFC3602]", "HMAC-SHA-256-128 [RFC4868]"),
        // The AEAD's ICV is its tag: no separate authentication algorithm.
        Transform::Aes128Gcm | Transform::Aes256Gcm => {
            ("AES-GCM with 16 octet ICV [RFC4106]", "NULL")
        }
        Transform::ChaCha20Poly1305 => ("ChaCha20 with Poly1305 [RFC7634]", "NULL"),
    }
}

/// True when Wireshark 4.0 can decrypt the transform. It refuses a whole table at an
/// algorithm name it does not know, so the others are written as comments.
pub fn wireshark_4_0_decrypts(transform: Transform) -> bool {
    transform != Transform::ChaCha20Poly1305
}

fn hex_key(out: &mut String, key: &[u8]) {
    if key.is_empty() {
        return;
    }
    out.push_str("0x");
    for b in key {
        // Writing to a String cannot fail.
        let _ = write!(out, "{b:02x}");
    }
}

/// The `esp_sa` record of one SA carried from `source` to `destination`, ending in a
/// newline. A transform Wireshark 4.0 cannot decrypt comes as a comment line saying
/// so, followed by its record commented out. The key material is in the returned
/// string, which is wiped when dropped.
pub fn esp_sa_record(
    params: &SaParams,
    source: Ipv4Addr,
    destination: Ipv4Addr,
) -> Zeroizing<String> {
    let t = params.transform;
    let keymat = params.keymat.expose();
    // Key material is encryption key, salt, integrity key (Transform::keymat_len).
    let (cipher_key, integrity_key) = keymat.split_at(t.encryption_key_len() + t.salt_len());
    let (encryption, authentication) = wireshark_algorithms(t);
    let mut line = Zeroizing::new(String::with_capacity(256));
    if !wireshark_4_0_decrypts(t) {
        let _ = writeln!(
            line,
            "# {t} SA 0x{:08x}: Wireshark 4.0 has no {t} for ESP and would refuse the whole \
             table at this line; remove the '# ' below for a Wireshark that lists \
             \"{encryption}\" (not tested here)",
            params.spi
        );
        line.push_str("# ");
    }
    let _ = write!(
        line,
        "\"IPv4\",\"{source}\",\"{destination}\",\"0x{:08x}\",\"{encryption}\",\"",
        params.spi
    );
    hex_key(&mut line, cipher_key);
    let _ = write!(line, "\",\"{authentication}\",\"");
    hex_key(&mut line, integrity_key);
    line.push_str("\"\n");
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use cipherbench_crypto::secret::SecretBytes;

    fn params(transform: Transform) -> SaParams {
        let keymat = (0..transform.keymat_len()).map(|i| i as u8).collect();
        SaParams::new(0x0102_0a0b, transform, SecretBytes::new(keymat))
    }

    fn record(transform: Transform) -> String {
        let line = esp_sa_record(
            &params(transform),
            Ipv4Addr::new(198, 18, 0, 1),
            Ipv4Addr::new(198, 18, 0, 2),
        );
        line.as_str().to_string()
    }

    #[test]
    fn gcm_records_carry_key_and_salt_as_one_key() {
        assert_eq!(
            record(Transform::Aes128Gcm),
            "\"IPv4\",\"198.18.0.1\",\"198.18.0.2\",\"0x01020a0b\",\
             \"AES-GCM with 16 octet ICV [RFC4106]\",\
             \"0x000102030405060708090a0b0c0d0e0f10111213\",\"NULL\",\"\"\n"
        );
        let aes256 = record(Transform::Aes256Gcm);
        assert!(aes256.contains("\"0x000102"), "{aes256}");
        assert!(
            aes256.contains("2223\",\"NULL\",\"\"\n"),
            "36 bytes: {aes256}"
        );
    }

    #[test]
    fn cbc_records_split_the_cipher_and_hmac_keys() {
        let line = record(Transform::Aes256Sha256);
        let fields: Vec<&str> = line.trim_end().split(',').collect();
        assert_eq!(fields.len(), 8, "{line}");
        assert_eq!(fields[4], "\"AES-CBC [RFC3602]\"");
        assert_eq!(
            fields[5].len(),
            2 + 2 + 64,
            "0x and 32 bytes: {}",
            fields[5]
        );
        assert!(fields[5].starts_with("\"0x00010203"));
        assert_eq!(fields[6], "\"HMAC-SHA-256-128 [RFC4868]\"");
        assert!(fields[7].starts_with("\"0x202122"), "{}", fields[7]);
        assert_eq!(fields[7].len(), 2 + 2 + 64);
    }

    #[test]
    fn null_records_have_no_keys() {
        assert_eq!(
            record(Transform::Null),
            "\"IPv4\",\"198.18.0.1\",\"198.18.0.2\",\"0x01020a0b\",\"NULL\",\"\",\"NULL\",\"\"\n"
        );
    }

    #[test]
    fn chacha_records_are_comments_for_wireshark_4_0() {
        let text = record(Transform::ChaCha20Poly1305);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines.iter().all(|l| l.starts_with('#')), "{text}");
        assert!(lines[1].starts_with("# \"IPv4\""), "{text}");
        assert!(lines[1].contains("\"ChaCha20 with Poly1305 [RFC7634]\""));
        assert!(
            lines[1].contains("0x000102"),
            "the key is still there: {text}"
        );
        for t in Transform::ALL {
            assert_eq!(
                wireshark_4_0_decrypts(t),
                !record(t).starts_with('#'),
                "{t}"
            );
        }
    }
}
