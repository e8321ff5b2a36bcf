//! AEAD seal and open: AES-128-GCM, AES-256-GCM (NIST SP 800-38D) and
//! ChaCha20-Poly1305 (RFC 8439), through OpenSSL EVP.
//!
//! One [`Aead`] holds an encryption and a decryption context with the key schedule
//! computed once; each message only sets its nonce. This is how TLS records and ESP
//! packets use an AEAD, and what layer 1 measures.

use crate::ffi::CipherCtx;
use crate::CryptoError;

/// The AEAD algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AeadAlgorithm {
    /// AES-128 in Galois/Counter Mode.
    Aes128Gcm,
    /// AES-256 in Galois/Counter Mode.
    Aes256Gcm,
    /// ChaCha20 with Poly1305.
    ChaCha20Poly1305,
}

/// The tag length every transform here uses by default (16 bytes).
pub const TAG_LEN: usize = 16;
/// The nonce length every transform here uses by default (12 bytes).
pub const NONCE_LEN: usize = 12;

impl AeadAlgorithm {
    /// OpenSSL's fetch name.
    pub fn openssl_name(self) -> &'static str {
        match self {
            AeadAlgorithm::Aes128Gcm => "AES-128-GCM",
            AeadAlgorithm::Aes256Gcm => "AES-256-GCM",
            AeadAlgorithm::ChaCha20Poly1305 => "ChaCha20-Poly1305",
        }
    }

    /// Key length in bytes.
    pub fn key_len(self) -> usize {
        match self {
            AeadAlgorithm::Aes128Gcm => 16,
            AeadAlgorithm::Aes256Gcm | AeadAlgorithm::ChaCha20Poly1305 => 32,
        }
    }
}

/// A keyed AEAD, ready to seal and open any number of messages.
pub struct Aead {
    seal_ctx: CipherCtx,
    open_ctx: CipherCtx,
}

impl Aead {
    /// Keys an AEAD with the standard 12-byte nonce.
    pub fn new(algorithm: AeadAlgorithm, key: &[u8]) -> Result<Aead, CryptoError> {
        Aead::with_nonce_len(algorithm, key, NONCE_LEN)
    }

    /// Keys an AEAD with a non-standard nonce length (GCM accepts other lengths;
    /// known-answer suites test them).
    pub fn with_nonce_len(
        algorithm: AeadAlgorithm,
        key: &[u8],
        nonce_len: usize,
    ) -> Result<Aead, CryptoError> {
        if nonce_len == 0 {
            return Err(CryptoError::BadNonceLength {
                cipher: algorithm.openssl_name().into(),
                got: 0,
            });
        }
        let name = algorithm.openssl_name();
        Ok(Aead {
            seal_ctx: CipherCtx::new(name, key, Some(nonce_len), true)?,
            open_ctx: CipherCtx::new(name, key, Some(nonce_len), false)?,
        })
    }

    /// Encrypts `buf` in place and writes the tag (1 to 16 bytes; `TAG_LEN` normally).
    pub fn seal_in_place(
        &mut self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
        tag: &mut [u8],
    ) -> Result<(), CryptoError> {
        check_tag(tag.len())?;
        let ctx = &mut self.seal_ctx;
        ctx.start(nonce)?;
        ctx.aad(aad)?;
        ctx.update_in_place(buf)?;
        ctx.finish()
            .map_err(|_| CryptoError::Library("AEAD final failed".into()))?;
        ctx.get_tag(tag)
    }

    /// Encrypts `input` into `output[..input.len()]` and writes the tag.
    pub fn seal(
        &mut self,
        nonce: &[u8],
        aad: &[u8],
        input: &[u8],
        output: &mut [u8],
        tag: &mut [u8],
    ) -> Result<(), CryptoError> {
        check_tag(tag.len())?;
        let ctx = &mut self.seal_ctx;
        ctx.start(nonce)?;
        ctx.aad(aad)?;
        ctx.update(input, output)?;
        ctx.finish()
            .map_err(|_| CryptoError::Library("AEAD final failed".into()))?;
        ctx.get_tag(tag)
    }

    /// Decrypts `buf` in place if `tag` verifies. On failure `buf` is zeroed, so no
    /// unauthenticated plaintext is ever left to the caller.
    pub fn open_in_place(
        &mut self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8],
    ) -> Result<(), CryptoError> {
        let result = self.open_steps(nonce, aad, tag, |ctx| ctx.update_in_place(buf).map(|_| ()));
        if result.is_err() {
            buf.fill(0);
        }
        result
    }

    /// Decrypts `input` into `output[..input.len()]` if `tag` verifies; on failure
    /// that part of `output` is zeroed.
    pub fn open(
        &mut self,
        nonce: &[u8],
        aad: &[u8],
        input: &[u8],
        output: &mut [u8],
        tag: &[u8],
    ) -> Result<(), CryptoError> {
        let n = input.len().min(output.len());
        let result = self.open_steps(nonce, aad, tag, |ctx| ctx.update(input, output).map(|_| ()));
        if result.is_err() {
            output[..n].fill(0);
        }
        result
    }

    fn open_steps(
        &mut self,
        nonce: &[u8],
        aad: &[u8],
        tag: &[u8],
        body: impl FnOnce(&mut CipherCtx) -> Result<(), CryptoError>,
    ) -> Result<(), CryptoError> {
        check_tag(tag.len())?;
        let ctx = &mut self.open_ctx;
        ctx.start(nonce)?;
        ctx.set_tag(tag)?;
        ctx.aad(aad)?;
        body(ctx)?;
        ctx.finish()
    }
}

fn check_tag(len: usize) -> Result<(), CryptoError> {
    if len == 0 || len > TAG_LEN {
        return Err(CryptoError::BadTagLength(len));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_then_open_round_trips_and_detects_tampering() {
        for alg in [
            AeadAlgorithm::Aes128Gcm,
            AeadAlgorithm::Aes256Gcm,
            AeadAlgorithm::ChaCha20Poly1305,
        ] {
            let key = vec![7u8; alg.key_len()];
            let mut aead = Aead::new(alg, &key).unwrap();
            let nonce = [1u8; NONCE_LEN];
            let mut buf = b"attack at dawn, bring snacks".to_vec();
            let mut tag = [0u8; TAG_LEN];
            aead.seal_in_place(&nonce, b"hdr", &mut buf, &mut tag)
                .unwrap();
            assert_ne!(&buf[..], b"attack at dawn, bring snacks");
            let sealed = buf.clone();
            aead.open_in_place(&nonce, b"hdr", &mut buf, &tag).unwrap();
            assert_eq!(&buf[..], b"attack at dawn, bring snacks");

            let mut forged = sealed.clone();
            forged[3] ^= 1;
            assert_eq!(
                aead.open_in_place(&nonce, b"hdr", &mut forged, &tag),
                Err(CryptoError::AuthenticationFailed)
            );
            assert!(
                forged.iter().all(|&b| b == 0),
                "plaintext left after failure"
            );
            let mut wrong_aad = sealed.clone();
            assert!(aead
                .open_in_place(&nonce, b"hdx", &mut wrong_aad, &tag)
                .is_err());
            // The context recovers after a failure.
            let mut again = sealed.clone();
            aead.open_in_place(&nonce, b"hdr", &mut again, &tag)
                .unwrap();
        }
    }

    #[test]
    fn rejects_wrong_key_length_and_bad_tags() {
        assert!(matches!(
            Aead::new(AeadAlgorithm::Aes128Gcm, &[0u8; 32]),
            Err(CryptoError::BadKeyLength {
                expected: 16,
                got: 32,
                ..
            })
        ));
        let mut aead = Aead::new(AeadAlgorithm::Aes128Gcm, &[0u8; 16]).unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(
            aead.seal_in_place(&[0; 12], &[], &mut buf, &mut [0u8; 17]),
            Err(CryptoError::BadTagLength(17))
        );
        assert!(aead
            .seal_in_place(&[0; 11], &[], &mut buf, &mut [0u8; 16])
            .is_err());
    }
}
