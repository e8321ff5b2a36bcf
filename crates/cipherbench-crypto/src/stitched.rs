//! OpenSSL's "stitched" AES-128-CBC-HMAC-SHA1: one pass that computes the TLS record
//! MAC (HMAC-SHA-1) and the AES-CBC encryption together, as nginx uses it for the
//! AES128-SHA suite. The library offers it only where AES-NI is usable, so with AES-NI
//! masked [`TlsCbcHmacSha1::new`] returns [`CryptoError::Unavailable`].
//!
//! Records are TLS 1.0 style (RFC 2246 §6.2.3.2: MAC-then-encrypt, no explicit IV);
//! the IV is passed per record. The additional data is the 13-byte TLS MAC header:
//! sequence number, content type, version and length.

use crate::ffi::{CipherCtx, EVP_CTRL_AEAD_SET_MAC_KEY, EVP_CTRL_AEAD_TLS1_AAD};
use crate::CryptoError;

/// AES block size.
const BLOCK: usize = 16;
/// HMAC-SHA-1 output, the record MAC.
pub const MAC_LEN: usize = 20;
/// TLS 1.0 (the cipher adds no explicit IV for versions below 1.1).
const TLS1_VERSION: [u8; 2] = [3, 1];
/// Content type `application_data` (RFC 5246 §6.2.1).
pub const APPLICATION_DATA: u8 = 23;

/// A keyed stitched cipher, both directions.
pub struct TlsCbcHmacSha1 {
    encrypt_ctx: CipherCtx,
    decrypt_ctx: CipherCtx,
}

/// The record length for a payload: payload, MAC and padding to whole blocks (at least
/// one padding byte).
pub fn sealed_len(payload_len: usize) -> usize {
    (payload_len + MAC_LEN + BLOCK) & !(BLOCK - 1)
}

fn header(sequence: u64, content_type: u8, len: usize) -> [u8; 13] {
    let mut aad = [0u8; 13];
    aad[..8].copy_from_slice(&sequence.to_be_bytes());
    aad[8] = content_type;
    aad[9..11].copy_from_slice(&TLS1_VERSION);
    aad[11..].copy_from_slice(&(len as u16).to_be_bytes());
    aad
}

impl TlsCbcHmacSha1 {
    /// Keys the cipher with a 16-byte AES key and the HMAC key.
    pub fn new(aes_key: &[u8], mac_key: &[u8]) -> Result<TlsCbcHmacSha1, CryptoError> {
        let name = "AES-128-CBC-HMAC-SHA1";
        let mut encrypt_ctx = CipherCtx::new(name, aes_key, None, true)?;
        let mut decrypt_ctx = CipherCtx::new(name, aes_key, None, false)?;
        for ctx in [&mut encrypt_ctx, &mut decrypt_ctx] {
            // OpenSSL copies the key; the pointer is only read.
            ctx.ctrl(
                EVP_CTRL_AEAD_SET_MAC_KEY,
                mac_key.len() as libc::c_int,
                mac_key.as_ptr() as *mut libc::c_void,
            )?;
        }
        Ok(TlsCbcHmacSha1 {
            encrypt_ctx,
            decrypt_ctx,
        })
    }

    /// Seals `payload_len` bytes at the start of `buf` into a record of
    /// [`sealed_len`] bytes, in place. `buf` must be at least that long.
    pub fn seal_in_place(
        &mut self,
        iv: &[u8],
        sequence: u64,
        content_type: u8,
        buf: &mut [u8],
        payload_len: usize,
    ) -> Result<usize, CryptoError> {
        let total = self.begin_seal(iv, sequence, content_type, payload_len, buf.len())?;
        self.encrypt_ctx.update_in_place(&mut buf[..total])?;
        Ok(total)
    }

    /// Seals `input[..payload_len]` (input must have room for the record; bytes past
    /// the payload are ignored) into `output`.
    pub fn seal(
        &mut self,
        iv: &[u8],
        sequence: u64,
        content_type: u8,
        input: &[u8],
        payload_len: usize,
        output: &mut [u8],
    ) -> Result<usize, CryptoError> {
        let total = self.begin_seal(
            iv,
            sequence,
            content_type,
            payload_len,
            input.len().min(output.len()),
        )?;
        self.encrypt_ctx
            .update(&input[..total], &mut output[..total])?;
        Ok(total)
    }

    fn begin_seal(
        &mut self,
        iv: &[u8],
        sequence: u64,
        content_type: u8,
        payload_len: usize,
        room: usize,
    ) -> Result<usize, CryptoError> {
        let total = sealed_len(payload_len);
        if room < total || payload_len > u16::MAX as usize {
            return Err(CryptoError::TooLong(payload_len));
        }
        self.encrypt_ctx.start(iv)?;
        let mut aad = header(sequence, content_type, payload_len);
        let pad = self.encrypt_ctx.ctrl_value(
            EVP_CTRL_AEAD_TLS1_AAD,
            aad.len() as libc::c_int,
            aad.as_mut_ptr().cast(),
        )? as usize;
        debug_assert_eq!(payload_len + pad, total);
        Ok(total)
    }

    /// Opens a record in place; returns the payload length. Fails with
    /// `AuthenticationFailed` on a wrong MAC or padding (and zeroes `buf`).
    pub fn open_in_place(
        &mut self,
        iv: &[u8],
        sequence: u64,
        content_type: u8,
        buf: &mut [u8],
    ) -> Result<usize, CryptoError> {
        self.begin_open(iv, sequence, content_type, buf.len())?;
        let result = self.decrypt_ctx.update_in_place(buf);
        finish_open(result, buf)
    }

    /// Opens `input` (a whole record) into `output`; returns the payload length.
    pub fn open(
        &mut self,
        iv: &[u8],
        sequence: u64,
        content_type: u8,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<usize, CryptoError> {
        self.begin_open(iv, sequence, content_type, input.len())?;
        let out = &mut output[..input.len()];
        let result = self.decrypt_ctx.update(input, out);
        finish_open(result, out)
    }

    fn begin_open(
        &mut self,
        iv: &[u8],
        sequence: u64,
        content_type: u8,
        len: usize,
    ) -> Result<(), CryptoError> {
        if len % BLOCK != 0 || len < sealed_len(0) || len > u16::MAX as usize {
            return Err(CryptoError::AuthenticationFailed);
        }
        self.decrypt_ctx.start(iv)?;
        let mut aad = header(sequence, content_type, len);
        self.decrypt_ctx
            .ctrl_value(
                EVP_CTRL_AEAD_TLS1_AAD,
                aad.len() as libc::c_int,
                aad.as_mut_ptr().cast(),
            )
            .map(|_| ())
    }
}

fn finish_open(result: Result<usize, CryptoError>, plain: &mut [u8]) -> Result<usize, CryptoError> {
    if result.is_err() {
        plain.fill(0);
        return Err(CryptoError::AuthenticationFailed);
    }
    // The cipher verified MAC and padding; the last byte is the padding length.
    let pad = plain[plain.len() - 1] as usize;
    Ok(plain.len() - MAC_LEN - pad - 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cbc::{Cbc, CbcAlgorithm};
    use crate::hmac::{Hmac, HmacDigest};

    fn stitched() -> Option<TlsCbcHmacSha1> {
        match TlsCbcHmacSha1::new(&[0x42; 16], &[0x17; 20]) {
            Ok(c) => Some(c),
            // Without AES-NI the library does not offer the cipher; nothing to test.
            Err(CryptoError::Unavailable { .. }) => None,
            Err(e) => panic!("{e}"),
        }
    }

    /// The stitched cipher's record equals the composed one: HMAC-SHA-1 over the TLS
    /// header and payload, then TLS padding, then AES-128-CBC (each of which has its
    /// own known-answer tests).
    #[test]
    fn matches_the_composed_construction() {
        let Some(mut cipher) = stitched() else { return };
        let iv = [0x11u8; 16];
        for payload_len in [0usize, 1, 15, 16, 17, 100, 1024, 16384] {
            let payload: Vec<u8> = (0..payload_len).map(|i| (i * 7) as u8).collect();
            let total = sealed_len(payload_len);
            let mut record = payload.clone();
            record.resize(total, 0);
            cipher
                .seal_in_place(&iv, 5, APPLICATION_DATA, &mut record, payload_len)
                .unwrap();

            let mut expected = payload.clone();
            let mut mac = [0u8; MAC_LEN];
            Hmac::new(HmacDigest::Sha1, &[0x17; 20])
                .unwrap()
                .compute(
                    &[&header(5, APPLICATION_DATA, payload_len), &payload],
                    &mut mac,
                )
                .unwrap();
            expected.extend_from_slice(&mac);
            let pad = total - expected.len();
            expected.extend(std::iter::repeat((pad - 1) as u8).take(pad));
            Cbc::new(CbcAlgorithm::Aes128Cbc, &[0x42; 16])
                .unwrap()
                .encrypt_in_place(&iv, &mut expected)
                .unwrap();
            assert_eq!(record, expected, "payload {payload_len}");

            let n = cipher
                .open_in_place(&iv, 5, APPLICATION_DATA, &mut record)
                .unwrap();
            assert_eq!(n, payload_len);
            assert_eq!(&record[..n], &payload[..]);
        }
    }

    #[test]
    fn rejects_tampered_records_and_wrong_sequence() {
        let Some(mut cipher) = stitched() else { return };
        let iv = [0u8; 16];
        let mut record = vec![7u8; sealed_len(64)];
        let total = cipher
            .seal_in_place(&iv, 1, APPLICATION_DATA, &mut record, 64)
            .unwrap();
        for position in [0, 30, total - 17, total - 1] {
            let mut forged = record.clone();
            forged[position] ^= 0x80;
            assert_eq!(
                cipher.open_in_place(&iv, 1, APPLICATION_DATA, &mut forged),
                Err(CryptoError::AuthenticationFailed),
                "flip at {position}"
            );
        }
        let mut replayed = record.clone();
        assert!(cipher
            .open_in_place(&iv, 2, APPLICATION_DATA, &mut replayed)
            .is_err());
        let mut ok = record.clone();
        assert_eq!(
            cipher.open_in_place(&iv, 1, APPLICATION_DATA, &mut ok),
            Ok(64)
        );
    }
}
