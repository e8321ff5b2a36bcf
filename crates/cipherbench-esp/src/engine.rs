//! The crypto step of each transform, exactly as the SAs call it: nonce
//! construction, AAD, in-place or out-of-place encryption, ICV.
//!
//! Public so the known-answer tests drive the very calls `seal` and `open` make
//! (Wycheproof vectors through [`AeadEngine`] and [`CbcHmacEngine`]). It knows nothing
//! of packet layout, sequence numbers or padding: [`crate::sa`] does. Key schedules
//! live in OpenSSL contexts, which OpenSSL cleanses when they are freed; the salt and
//! the pre-drawn CBC IVs held here are wiped on drop.

use cipherbench_crypto::aead::{Aead, AeadAlgorithm, NONCE_LEN};
use cipherbench_crypto::cbc::{Cbc, CbcAlgorithm};
use cipherbench_crypto::hmac::{Hmac, HmacDigest};
use cipherbench_crypto::CryptoError;
use zeroize::Zeroize;

use crate::transform::{AEAD_IV_LEN, AEAD_SALT_LEN, CBC_IV_LEN};

/// An RFC 4106 / RFC 7634 AEAD: a keyed cipher and the 4-byte salt that, with the
/// 8-byte explicit IV from the packet, forms the 12-byte nonce.
pub struct AeadEngine {
    aead: Aead,
    salt: [u8; AEAD_SALT_LEN],
}

impl AeadEngine {
    /// Keys the engine.
    pub fn new(
        algorithm: AeadAlgorithm,
        key: &[u8],
        salt: [u8; AEAD_SALT_LEN],
    ) -> Result<AeadEngine, CryptoError> {
        Ok(AeadEngine {
            aead: Aead::new(algorithm, key)?,
            salt,
        })
    }

    /// RFC 4106 §4, RFC 7634 §2: nonce = salt (4) || explicit IV (8).
    fn nonce(&self, iv: &[u8; AEAD_IV_LEN]) -> [u8; NONCE_LEN] {
        let mut nonce = [0u8; NONCE_LEN];
        nonce[..AEAD_SALT_LEN].copy_from_slice(&self.salt);
        nonce[AEAD_SALT_LEN..].copy_from_slice(iv);
        nonce
    }

    /// Encrypts `buf` in place and writes the ICV.
    pub fn seal(
        &mut self,
        iv: &[u8; AEAD_IV_LEN],
        aad: &[u8],
        buf: &mut [u8],
        icv: &mut [u8],
    ) -> Result<(), CryptoError> {
        let nonce = self.nonce(iv);
        self.aead.seal_in_place(&nonce, aad, buf, icv)
    }

    /// Decrypts `input` into `output[..input.len()]` if the ICV verifies; on failure
    /// that part of `output` is zeroed.
    pub fn open(
        &mut self,
        iv: &[u8; AEAD_IV_LEN],
        aad: &[u8],
        input: &[u8],
        output: &mut [u8],
        icv: &[u8],
    ) -> Result<(), CryptoError> {
        let nonce = self.nonce(iv);
        self.aead.open(&nonce, aad, input, output, icv)
    }
}

impl Drop for AeadEngine {
    fn drop(&mut self) {
        self.salt.zeroize();
    }
}

/// How many CBC IVs are drawn from the CSPRNG at once: one call per 32 packets
/// instead of one per packet.
const IV_POOL_IVS: usize = 32;

/// RFC 3602 AES-256-CBC with RFC 4868 HMAC-SHA-256-128, encrypt-then-MAC as RFC 4303
/// §3.3.2 orders them.
pub struct CbcHmacEngine {
    cbc: Cbc,
    hmac: Hmac,
    /// Pre-drawn random IVs (RFC 3602 §2.3: unpredictable, so not derived from the
    /// previous ciphertext or the sequence number).
    iv_pool: [u8; IV_POOL_IVS * CBC_IV_LEN],
    iv_used: usize,
}

impl CbcHmacEngine {
    /// Keys AES-256-CBC with `encryption_key` and HMAC-SHA-256 with `integrity_key`.
    pub fn new(encryption_key: &[u8], integrity_key: &[u8]) -> Result<CbcHmacEngine, CryptoError> {
        Ok(CbcHmacEngine {
            cbc: Cbc::new(CbcAlgorithm::Aes256Cbc, encryption_key)?,
            hmac: Hmac::new(HmacDigest::Sha256, integrity_key)?,
            iv_pool: [0; IV_POOL_IVS * CBC_IV_LEN],
            // Empty: the first packet draws the pool.
            iv_used: IV_POOL_IVS,
        })
    }

    /// Writes a fresh random IV (RFC 3602 §2.3).
    pub fn fill_iv(&mut self, iv: &mut [u8; CBC_IV_LEN]) -> Result<(), CryptoError> {
        if self.iv_used == IV_POOL_IVS {
            cipherbench_crypto::random_bytes(&mut self.iv_pool)?;
            self.iv_used = 0;
        }
        let at = self.iv_used * CBC_IV_LEN;
        let slot = &mut self.iv_pool[at..at + CBC_IV_LEN];
        iv.copy_from_slice(slot);
        // Never hand the same IV out twice, even if the pool is somehow not refilled.
        slot.zeroize();
        self.iv_used += 1;
        Ok(())
    }

    /// Encrypts whole blocks in place.
    pub fn encrypt(&mut self, iv: &[u8; CBC_IV_LEN], buf: &mut [u8]) -> Result<(), CryptoError> {
        self.cbc.encrypt_in_place(iv, buf)
    }

    /// Decrypts whole blocks from `input` into `output[..input.len()]`.
    pub fn decrypt(
        &mut self,
        iv: &[u8; CBC_IV_LEN],
        input: &[u8],
        output: &mut [u8],
    ) -> Result<(), CryptoError> {
        self.cbc.decrypt(iv, input, output)
    }

    /// RFC 4303 §2.8 and RFC 4868 §2.3: the ICV over `authenticated` (SPI, sequence
    /// number, IV, ciphertext), truncated to `icv.len()` bytes.
    pub fn compute_icv(&mut self, authenticated: &[u8], icv: &mut [u8]) -> Result<(), CryptoError> {
        self.hmac.compute(&[authenticated], icv)
    }

    /// Checks the ICV in constant time.
    pub fn verify_icv(&mut self, authenticated: &[u8], icv: &[u8]) -> Result<(), CryptoError> {
        self.hmac.verify(&[authenticated], icv)
    }
}

impl Drop for CbcHmacEngine {
    fn drop(&mut self) {
        self.iv_pool.zeroize();
    }
}

/// One SA's keyed transform.
pub(crate) enum Engine {
    Null,
    CbcHmac(Box<CbcHmacEngine>),
    Aead(AeadEngine),
}

impl Engine {
    /// Keys the engine from KEYMAT laid out as [`crate::Transform::keymat_len`]
    /// describes; the caller has checked its length.
    pub(crate) fn new(transform: crate::Transform, keymat: &[u8]) -> Result<Engine, CryptoError> {
        use crate::Transform as T;
        let enc_len = transform.encryption_key_len();
        let (key, rest) = keymat.split_at(enc_len);
        Ok(match transform {
            T::Null => Engine::Null,
            T::Aes256Sha256 => Engine::CbcHmac(Box::new(CbcHmacEngine::new(key, rest)?)),
            T::Aes128Gcm | T::Aes256Gcm | T::ChaCha20Poly1305 => {
                let algorithm = match transform {
                    T::Aes128Gcm => AeadAlgorithm::Aes128Gcm,
                    T::Aes256Gcm => AeadAlgorithm::Aes256Gcm,
                    _ => AeadAlgorithm::ChaCha20Poly1305,
                };
                let mut salt = [0u8; AEAD_SALT_LEN];
                salt.copy_from_slice(&rest[..AEAD_SALT_LEN]);
                let engine = AeadEngine::new(algorithm, key, salt);
                salt.zeroize();
                Engine::Aead(engine?)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cbc_ivs_are_fresh_across_pool_refills() {
        let mut e = CbcHmacEngine::new(&[1; 32], &[2; 32]).unwrap();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..3 * IV_POOL_IVS + 1 {
            let mut iv = [0u8; CBC_IV_LEN];
            e.fill_iv(&mut iv).unwrap();
            assert!(seen.insert(iv), "IV repeated");
        }
    }
}
