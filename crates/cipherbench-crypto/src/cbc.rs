//! CBC mode without padding: AES-128/256-CBC (RFC 3602 as ESP uses it) and
//! 3DES-CBC (the control cipher AES-NI does not touch).
//!
//! The caller pads: ESP appends its own trailer (RFC 4303 §2.4), TLS its own padding.
//! [`pkcs7_pad`] and [`pkcs7_unpad`] exist for callers that want PKCS#7.

use crate::ffi::CipherCtx;
use crate::CryptoError;

/// The block ciphers in CBC mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CbcAlgorithm {
    /// AES-128-CBC.
    Aes128Cbc,
    /// AES-256-CBC.
    Aes256Cbc,
    /// Three-key triple DES (DES-EDE3) in CBC mode.
    DesEde3Cbc,
}

impl CbcAlgorithm {
    /// OpenSSL's fetch name.
    pub fn openssl_name(self) -> &'static str {
        match self {
            CbcAlgorithm::Aes128Cbc => "AES-128-CBC",
            CbcAlgorithm::Aes256Cbc => "AES-256-CBC",
            CbcAlgorithm::DesEde3Cbc => "DES-EDE3-CBC",
        }
    }

    /// Key length in bytes.
    pub fn key_len(self) -> usize {
        match self {
            CbcAlgorithm::Aes128Cbc => 16,
            CbcAlgorithm::Aes256Cbc => 32,
            CbcAlgorithm::DesEde3Cbc => 24,
        }
    }

    /// Block (and IV) length in bytes.
    pub fn block_len(self) -> usize {
        match self {
            CbcAlgorithm::Aes128Cbc | CbcAlgorithm::Aes256Cbc => 16,
            CbcAlgorithm::DesEde3Cbc => 8,
        }
    }
}

/// A keyed CBC cipher, both directions.
pub struct Cbc {
    algorithm: CbcAlgorithm,
    encrypt_ctx: CipherCtx,
    decrypt_ctx: CipherCtx,
}

impl Cbc {
    /// Keys the cipher (both directions: CBC decryption needs its own key schedule).
    pub fn new(algorithm: CbcAlgorithm, key: &[u8]) -> Result<Cbc, CryptoError> {
        let name = algorithm.openssl_name();
        let mut encrypt_ctx = CipherCtx::new(name, key, None, true)?;
        let mut decrypt_ctx = CipherCtx::new(name, key, None, false)?;
        encrypt_ctx.disable_padding();
        decrypt_ctx.disable_padding();
        Ok(Cbc {
            algorithm,
            encrypt_ctx,
            decrypt_ctx,
        })
    }

    fn check(&self, iv: &[u8], len: usize) -> Result<(), CryptoError> {
        let block = self.algorithm.block_len();
        if !len.is_multiple_of(block) {
            return Err(CryptoError::NotBlockAligned { len, block });
        }
        if iv.len() != block {
            return Err(CryptoError::BadNonceLength {
                cipher: self.algorithm.openssl_name().into(),
                got: iv.len(),
            });
        }
        Ok(())
    }

    /// Encrypts whole blocks in place.
    pub fn encrypt_in_place(&mut self, iv: &[u8], buf: &mut [u8]) -> Result<(), CryptoError> {
        self.check(iv, buf.len())?;
        self.encrypt_ctx.start(iv)?;
        self.encrypt_ctx.update_in_place(buf)?;
        Ok(())
    }

    /// Decrypts whole blocks in place.
    pub fn decrypt_in_place(&mut self, iv: &[u8], buf: &mut [u8]) -> Result<(), CryptoError> {
        self.check(iv, buf.len())?;
        self.decrypt_ctx.start(iv)?;
        self.decrypt_ctx.update_in_place(buf)?;
        Ok(())
    }

    /// Encrypts whole blocks from `input` into `output[..input.len()]`.
    pub fn encrypt(
        &mut self,
        iv: &[u8],
        input: &[u8],
        output: &mut [u8],
    ) -> Result<(), CryptoError> {
        self.check(iv, input.len())?;
        self.encrypt_ctx.start(iv)?;
        self.encrypt_ctx.update(input, output)?;
        Ok(())
    }

    /// Decrypts whole blocks from `input` into `output[..input.len()]`.
    pub fn decrypt(
        &mut self,
        iv: &[u8],
        input: &[u8],
        output: &mut [u8],
    ) -> Result<(), CryptoError> {
        self.check(iv, input.len())?;
        self.decrypt_ctx.start(iv)?;
        self.decrypt_ctx.update(input, output)?;
        Ok(())
    }
}

/// Appends PKCS#7 padding (RFC 5652 §6.3): 1 to `block` bytes, each the pad length.
pub fn pkcs7_pad(data: &mut Vec<u8>, block: usize) {
    let pad = block - data.len() % block;
    data.extend(std::iter::repeat_n(pad as u8, pad));
}

/// Strips PKCS#7 padding, or fails if it is malformed.
pub fn pkcs7_unpad(data: &[u8], block: usize) -> Result<&[u8], CryptoError> {
    let last = *data.last().ok_or(CryptoError::AuthenticationFailed)? as usize;
    if !data.len().is_multiple_of(block) || last == 0 || last > block || last > data.len() {
        return Err(CryptoError::AuthenticationFailed);
    }
    let (body, pad) = data.split_at(data.len() - last);
    if pad.iter().any(|&b| b as usize != last) {
        return Err(CryptoError::AuthenticationFailed);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NIST SP 800-67 Rev. 1, appendix B: three-key TDEA in ECB mode, the plaintext
    /// "The qufck brown fox jump". CBC with a zero IV over one block is ECB of that
    /// block, so each block checked alone is a known answer through the CBC path.
    #[test]
    fn triple_des_matches_sp800_67_example() {
        let key = hex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123");
        let plain = b"The qufck brown fox jump";
        let expected = hex("A826FD8CE53B855FCCE21C8112256FE668D5C05DD9B6B900");
        let mut cbc = Cbc::new(CbcAlgorithm::DesEde3Cbc, &key).unwrap();
        for (p, c) in plain.chunks(8).zip(expected.chunks(8)) {
            let mut block = p.to_vec();
            cbc.encrypt_in_place(&[0u8; 8], &mut block).unwrap();
            assert_eq!(block, c);
            cbc.decrypt_in_place(&[0u8; 8], &mut block).unwrap();
            assert_eq!(block, p);
        }
    }

    #[test]
    fn chaining_matches_block_by_block() {
        let key = [9u8; 32];
        let iv = [3u8; 16];
        let mut cbc = Cbc::new(CbcAlgorithm::Aes256Cbc, &key).unwrap();
        let plain: Vec<u8> = (0..64u8).collect();
        let mut whole = plain.clone();
        cbc.encrypt_in_place(&iv, &mut whole).unwrap();
        let mut prev = iv.to_vec();
        for (i, block) in plain.chunks(16).enumerate() {
            let mut b = block.to_vec();
            cbc.encrypt_in_place(&prev, &mut b).unwrap();
            assert_eq!(b, &whole[i * 16..(i + 1) * 16]);
            prev = b;
        }
    }

    #[test]
    fn refuses_partial_blocks() {
        let mut cbc = Cbc::new(CbcAlgorithm::Aes128Cbc, &[0u8; 16]).unwrap();
        let mut buf = [0u8; 17];
        assert_eq!(
            cbc.encrypt_in_place(&[0u8; 16], &mut buf),
            Err(CryptoError::NotBlockAligned { len: 17, block: 16 })
        );
    }

    #[test]
    fn pkcs7_round_trips_and_rejects_bad_padding() {
        for n in 0..40 {
            let mut v: Vec<u8> = (0..n as u8).collect();
            pkcs7_pad(&mut v, 16);
            assert_eq!(v.len() % 16, 0);
            assert_eq!(pkcs7_unpad(&v, 16).unwrap().len(), n);
        }
        assert!(pkcs7_unpad(&[0u8; 16], 16).is_err());
        let mut bad = vec![5u8; 16];
        bad[12] = 4;
        assert!(pkcs7_unpad(&bad, 16).is_err());
        assert!(pkcs7_unpad(&[17u8; 16], 16).is_err());
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
}
