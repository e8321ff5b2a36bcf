//! SHA-256 (FIPS 180-4) through OpenSSL EVP, streaming. The file layer hashes its
//! input and every tool's decrypted output with it, so that a tool that silently
//! produced the wrong bytes cannot win.

use crate::ffi::DigestCtx;
use crate::CryptoError;

/// SHA-256's output length in bytes.
pub const SHA256_LEN: usize = 32;

/// A running SHA-256.
pub struct Sha256 {
    ctx: DigestCtx,
}

impl Sha256 {
    /// A new hash.
    pub fn new() -> Result<Sha256, CryptoError> {
        Ok(Sha256 {
            ctx: DigestCtx::new("SHA256", SHA256_LEN)?,
        })
    }

    /// Feeds bytes.
    pub fn update(&mut self, data: &[u8]) -> Result<(), CryptoError> {
        self.ctx.update(data)
    }

    /// The digest of everything fed since the start (the hash then starts over).
    pub fn finish(&mut self) -> Result<[u8; SHA256_LEN], CryptoError> {
        let mut out = [0u8; SHA256_LEN];
        self.ctx.finish(&mut out)?;
        Ok(out)
    }
}

/// SHA-256 of one buffer.
pub fn sha256(data: &[u8]) -> Result<[u8; SHA256_LEN], CryptoError> {
    let mut h = Sha256::new()?;
    h.update(data)?;
    h.finish()
}

/// Lower-case hex of bytes (for digests in results and messages).
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Decodes lower- or upper-case hex (surrounding whitespace ignored); None for
/// anything else.
pub fn from_hex(text: &str) -> Option<Vec<u8>> {
    let text = text.trim();
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FIPS 180-4 examples ("abc", and the empty string).
    #[test]
    fn matches_known_digests() {
        assert_eq!(
            to_hex(&sha256(b"abc").unwrap()),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            to_hex(&sha256(b"").unwrap()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn streaming_equals_one_shot_and_restarts() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let mut h = Sha256::new().unwrap();
        for part in data.chunks(333) {
            h.update(part).unwrap();
        }
        assert_eq!(h.finish().unwrap(), sha256(&data).unwrap());
        h.update(b"abc").unwrap();
        assert_eq!(h.finish().unwrap(), sha256(b"abc").unwrap());
    }
}
