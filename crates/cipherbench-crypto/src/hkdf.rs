//! HKDF (RFC 5869), built on [`crate::hmac`]: with SHA-256, extract and expand, to
//! derive manually keyed SAs' keys and SPIs from a shared secret; expand alone with
//! any HMAC hash, as TLS 1.3's key schedule uses it ([`crate::tls_record`]).

use crate::hmac::{Hmac, HmacDigest};
use crate::CryptoError;

/// HKDF-Extract then HKDF-Expand into `out` (at most 255 × 32 bytes).
pub fn hkdf_sha256(
    salt: &[u8],
    ikm: &[u8],
    info: &[u8],
    out: &mut [u8],
) -> Result<(), CryptoError> {
    const HASH_LEN: usize = 32;
    // RFC 5869 §2.2: a missing salt is HashLen zeros.
    let zero_salt = [0u8; HASH_LEN];
    let salt = if salt.is_empty() {
        &zero_salt[..]
    } else {
        salt
    };
    let mut prk = [0u8; HASH_LEN];
    Hmac::new(HmacDigest::Sha256, salt)?.compute(&[ikm], &mut prk)?;
    let expanded = expand(HmacDigest::Sha256, &prk, info, out);
    prk.fill(0);
    expanded
}

/// HKDF-Expand (RFC 5869 §2.3) of the pseudorandom key `prk` into `out` (at most
/// 255 × the hash's length).
pub fn expand(
    digest: HmacDigest,
    prk: &[u8],
    info: &[u8],
    out: &mut [u8],
) -> Result<(), CryptoError> {
    let len = digest.output_len();
    if out.len() > 255 * len {
        return Err(CryptoError::TooLong(out.len()));
    }
    let mut mac = Hmac::new(digest, prk)?;
    let mut previous = [0u8; 64];
    let mut previous_len = 0;
    for (i, chunk) in out.chunks_mut(len).enumerate() {
        let mut block = [0u8; 64];
        mac.compute(
            &[&previous[..previous_len], info, &[(i + 1) as u8]],
            &mut block[..len],
        )?;
        chunk.copy_from_slice(&block[..chunk.len()]);
        previous = block;
        previous_len = len;
    }
    previous.fill(0);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// RFC 5869 appendix A.1.
    #[test]
    fn matches_rfc5869_case_1() {
        let ikm = hex("0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b");
        let salt = hex("000102030405060708090a0b0c");
        let info = hex("f0f1f2f3f4f5f6f7f8f9");
        let mut okm = [0u8; 42];
        hkdf_sha256(&salt, &ikm, &info, &mut okm).unwrap();
        assert_eq!(
            okm.to_vec(),
            hex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
        );
    }

    /// RFC 5869 appendix A.3: zero-length salt and info.
    #[test]
    fn matches_rfc5869_case_3() {
        let ikm = hex("0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b");
        let mut okm = [0u8; 42];
        hkdf_sha256(&[], &ikm, &[], &mut okm).unwrap();
        assert_eq!(
            okm.to_vec(),
            hex("8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8")
        );
    }
}
