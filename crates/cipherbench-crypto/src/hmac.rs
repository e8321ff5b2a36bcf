//! HMAC (RFC 2104) with SHA-1, SHA-256 or SHA-384, tags truncated as ESP uses them
//! (HMAC-SHA-256-128, RFC 4868 §2.1: the leftmost 128 bits).

use crate::ffi::MacCtx;
use crate::CryptoError;

/// The hash under the HMAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HmacDigest {
    /// SHA-1 (20-byte output).
    Sha1,
    /// SHA-256 (32-byte output).
    Sha256,
    /// SHA-384 (48-byte output): TLS's *_SHA384 suites' PRF and HKDF.
    Sha384,
}

impl HmacDigest {
    /// Full output length.
    pub fn output_len(self) -> usize {
        match self {
            HmacDigest::Sha1 => 20,
            HmacDigest::Sha256 => 32,
            HmacDigest::Sha384 => 48,
        }
    }

    fn openssl_name(self) -> &'static str {
        match self {
            HmacDigest::Sha1 => "SHA1",
            HmacDigest::Sha256 => "SHA256",
            HmacDigest::Sha384 => "SHA384",
        }
    }
}

/// A keyed HMAC, reusable for any number of messages.
pub struct Hmac {
    ctx: MacCtx,
}

impl Hmac {
    /// Keys an HMAC.
    pub fn new(digest: HmacDigest, key: &[u8]) -> Result<Hmac, CryptoError> {
        Ok(Hmac {
            ctx: MacCtx::hmac(digest.openssl_name(), key, digest.output_len())?,
        })
    }

    /// Computes the MAC of the concatenated `parts` into `tag` (its length selects the
    /// truncation; at most the digest length, at least 1).
    pub fn compute(&mut self, parts: &[&[u8]], tag: &mut [u8]) -> Result<(), CryptoError> {
        if tag.is_empty() || tag.len() > self.ctx.output_len {
            return Err(CryptoError::BadTagLength(tag.len()));
        }
        self.ctx.compute(parts, tag)
    }

    /// Checks a (possibly truncated) tag in constant time.
    pub fn verify(&mut self, parts: &[&[u8]], tag: &[u8]) -> Result<(), CryptoError> {
        if tag.is_empty() || tag.len() > self.ctx.output_len {
            return Err(CryptoError::BadTagLength(tag.len()));
        }
        let mut expected = [0u8; 64];
        let expected = &mut expected[..tag.len()];
        self.ctx.compute(parts, expected)?;
        if crate::constant_time_eq(expected, tag) {
            Ok(())
        } else {
            Err(CryptoError::AuthenticationFailed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4231 test case 2 ("what do ya want for nothing?").
    #[test]
    fn matches_rfc4231_case_2() {
        let mut h = Hmac::new(HmacDigest::Sha256, b"Jefe").unwrap();
        let mut tag = [0u8; 32];
        h.compute(&[b"what do ya want ", b"for nothing?"], &mut tag)
            .unwrap();
        let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        h.verify(&[b"what do ya want for nothing?"], &tag[..16])
            .unwrap();
        assert_eq!(
            h.verify(&[b"what do ya want for nothing!"], &tag[..16]),
            Err(CryptoError::AuthenticationFailed)
        );
    }

    #[test]
    fn empty_key_is_a_valid_key() {
        let mut h = Hmac::new(HmacDigest::Sha1, b"").unwrap();
        let mut tag = [0u8; 20];
        h.compute(&[b""], &mut tag).unwrap();
        let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
        // HMAC-SHA1("", "") as published in the Wikipedia HMAC article examples.
        assert_eq!(hex, "fbdb1d1b18aa6c08324b7d64b71fb76370690e1d");
    }
}
