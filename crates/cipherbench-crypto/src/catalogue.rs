//! The ciphers layer 1 measures, and one benchmark operation for each.
//!
//! An operation is what one TLS record or one ESP packet costs: a new nonce or IV,
//! the header as additional data, the payload, the tag. That is `openssl speed -aead`'s
//! definition for the AEADs; for the CBC constructions it is the per-record work of
//! the protocols that use them.

use crate::aead::{Aead, AeadAlgorithm, NONCE_LEN, TAG_LEN};
use crate::cbc::{Cbc, CbcAlgorithm};
use crate::hmac::{Hmac, HmacDigest};
use crate::stitched::{self, TlsCbcHmacSha1};
use crate::CryptoError;

/// A cipher in the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CipherId {
    /// AES-128-GCM (TLS AES128-GCM-SHA256).
    Aes128Gcm,
    /// AES-256-GCM.
    Aes256Gcm,
    /// OpenSSL's stitched AES-128-CBC + HMAC-SHA1 (TLS AES128-SHA).
    Aes128CbcHmacSha1,
    /// AES-256-CBC alone (the EC2 AES-NI blog post's cipher, seed 001).
    Aes256Cbc,
    /// AES-256-CBC then HMAC-SHA-256-128, composed: ESP's `aes256-sha256`.
    Aes256CbcHmacSha256,
    /// ChaCha20-Poly1305: a control (AES-NI does not touch it).
    ChaCha20Poly1305,
    /// Triple DES in CBC mode: the EC2 AES-NI post's control.
    DesEde3Cbc,
}

/// Every cipher, in the order reports list them.
pub const ALL: [CipherId; 7] = [
    CipherId::Aes128Gcm,
    CipherId::Aes256Gcm,
    CipherId::Aes128CbcHmacSha1,
    CipherId::Aes256Cbc,
    CipherId::Aes256CbcHmacSha256,
    CipherId::ChaCha20Poly1305,
    CipherId::DesEde3Cbc,
];

/// The TLS record header length used as additional data (RFC 5246 §6.2.3.3).
const TLS_AAD_LEN: usize = 13;
/// ESP header: SPI (4) + sequence number (4), RFC 4303 §2.
const ESP_HEADER_LEN: usize = 8;

impl CipherId {
    /// Catalogue name (what `--cipher` takes and results record).
    pub fn name(self) -> &'static str {
        match self {
            CipherId::Aes128Gcm => "aes-128-gcm",
            CipherId::Aes256Gcm => "aes-256-gcm",
            CipherId::Aes128CbcHmacSha1 => "aes-128-cbc-hmac-sha1",
            CipherId::Aes256Cbc => "aes-256-cbc",
            CipherId::Aes256CbcHmacSha256 => "aes-256-cbc-hmac-sha256",
            CipherId::ChaCha20Poly1305 => "chacha20-poly1305",
            CipherId::DesEde3Cbc => "des-ede3-cbc",
        }
    }

    /// Looks a name up, accepting the catalogue spelling in any case.
    pub fn from_name(name: &str) -> Option<CipherId> {
        let lower = name.trim().to_ascii_lowercase();
        ALL.into_iter().find(|c| c.name() == lower)
    }

    /// One line on what it is and where it is used.
    pub fn description(self) -> &'static str {
        match self {
            CipherId::Aes128Gcm => "AEAD; TLS AES128-GCM-SHA256, ESP aes128-gcm",
            CipherId::Aes256Gcm => "AEAD; TLS AES256-GCM-SHA384, ESP aes256-gcm",
            CipherId::Aes128CbcHmacSha1 => {
                "OpenSSL's stitched CBC+HMAC-SHA1 TLS record cipher (AES128-SHA); needs AES-NI"
            }
            CipherId::Aes256Cbc => "CBC alone, no integrity (the EC2 AES-NI post's file cipher)",
            CipherId::Aes256CbcHmacSha256 => {
                "AES-256-CBC then HMAC-SHA-256-128, composed: ESP aes256-sha256"
            }
            CipherId::ChaCha20Poly1305 => "AEAD without AES; control for the AES-NI mask",
            CipherId::DesEde3Cbc => "3DES; AES-NI does not touch it: the EC2 AES-NI post's control",
        }
    }

    /// A control cipher: one the AES-NI/PCLMULQDQ mask must not change.
    pub fn is_control(self) -> bool {
        matches!(self, CipherId::ChaCha20Poly1305 | CipherId::DesEde3Cbc)
    }

    /// For `--check-openssl`: the `openssl speed -evp` name, and whether `-aead` applies.
    /// None for constructions `openssl speed` does not have.
    pub fn openssl_speed(self) -> Option<(&'static str, bool)> {
        match self {
            CipherId::Aes128Gcm => Some(("aes-128-gcm", true)),
            CipherId::Aes256Gcm => Some(("aes-256-gcm", true)),
            CipherId::ChaCha20Poly1305 => Some(("chacha20-poly1305", true)),
            CipherId::Aes128CbcHmacSha1 => Some(("aes-128-cbc-hmac-sha1", false)),
            CipherId::Aes256Cbc => Some(("aes-256-cbc", false)),
            CipherId::DesEde3Cbc => Some(("des-ede3-cbc", false)),
            CipherId::Aes256CbcHmacSha256 => None,
        }
    }

    /// The OpenSSL algorithms its operation fetches: (name, whether a digest). What
    /// a process is asked about when it says which implementation served the cipher.
    pub fn openssl_algorithms(self) -> &'static [(&'static str, bool)] {
        match self {
            CipherId::Aes128Gcm => &[("AES-128-GCM", false)],
            CipherId::Aes256Gcm => &[("AES-256-GCM", false)],
            CipherId::Aes128CbcHmacSha1 => &[("AES-128-CBC-HMAC-SHA1", false)],
            CipherId::Aes256Cbc => &[("AES-256-CBC", false)],
            CipherId::Aes256CbcHmacSha256 => &[("AES-256-CBC", false), ("SHA256", true)],
            CipherId::ChaCha20Poly1305 => &[("ChaCha20-Poly1305", false)],
            CipherId::DesEde3Cbc => &[("DES-EDE3-CBC", false)],
        }
    }

    /// Block alignment the payload is rounded up to (1 for stream and AEAD modes).
    pub fn alignment(self) -> usize {
        match self {
            CipherId::Aes256Cbc | CipherId::Aes256CbcHmacSha256 => 16,
            CipherId::DesEde3Cbc => 8,
            _ => 1,
        }
    }
}

/// Names of every cipher, comma-separated, for error messages.
pub fn known_names() -> String {
    ALL.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")
}

/// One benchmark operation: process one buffer of the configured size.
pub trait BenchOp: Send {
    /// Runs one operation. Decryption verifies the tag; a failure is an error.
    fn run(&mut self) -> Result<(), CryptoError>;
    /// Payload bytes one operation processes.
    fn payload_len(&self) -> usize;
}

/// Builds the operation for `cipher` in one direction on `size`-byte payloads, keyed
/// with a fixed test key. Fails with [`CryptoError::Unavailable`] where the library
/// does not offer the cipher in this process (the stitched cipher without AES-NI).
pub fn bench_op(
    cipher: CipherId,
    encrypt: bool,
    size: usize,
) -> Result<Box<dyn BenchOp>, CryptoError> {
    let aligned = size.div_ceil(cipher.alignment()) * cipher.alignment();
    Ok(match cipher {
        CipherId::Aes128Gcm | CipherId::Aes256Gcm | CipherId::ChaCha20Poly1305 => {
            let alg = match cipher {
                CipherId::Aes128Gcm => AeadAlgorithm::Aes128Gcm,
                CipherId::Aes256Gcm => AeadAlgorithm::Aes256Gcm,
                _ => AeadAlgorithm::ChaCha20Poly1305,
            };
            Box::new(AeadOp::new(alg, encrypt, size)?)
        }
        CipherId::Aes128CbcHmacSha1 => Box::new(StitchedOp::new(encrypt, size)?),
        CipherId::Aes256Cbc | CipherId::DesEde3Cbc => {
            let alg = if cipher == CipherId::Aes256Cbc {
                CbcAlgorithm::Aes256Cbc
            } else {
                CbcAlgorithm::DesEde3Cbc
            };
            Box::new(CbcOp::new(alg, encrypt, size, aligned, false)?)
        }
        CipherId::Aes256CbcHmacSha256 => Box::new(CbcOp::new(
            CbcAlgorithm::Aes256Cbc,
            encrypt,
            size,
            aligned,
            true,
        )?),
    })
}

struct AeadOp {
    aead: Aead,
    encrypt: bool,
    nonce: [u8; NONCE_LEN],
    counter: u64,
    aad: [u8; TLS_AAD_LEN],
    input: Vec<u8>,
    output: Vec<u8>,
    tag: [u8; TAG_LEN],
}

impl AeadOp {
    fn new(alg: AeadAlgorithm, encrypt: bool, size: usize) -> Result<AeadOp, CryptoError> {
        let key = vec![0x5a; alg.key_len()];
        let mut op = AeadOp {
            aead: Aead::new(alg, &key)?,
            encrypt,
            nonce: [0x24; NONCE_LEN],
            counter: 0,
            aad: [0x17; TLS_AAD_LEN],
            input: vec![0xa5; size],
            output: vec![0; size],
            tag: [0; TAG_LEN],
        };
        if !encrypt {
            // Decrypt a real ciphertext so every operation verifies a genuine tag.
            let plain = op.input.clone();
            op.aead
                .seal(&op.nonce, &op.aad, &plain, &mut op.input, &mut op.tag)?;
        }
        Ok(op)
    }
}

impl BenchOp for AeadOp {
    fn run(&mut self) -> Result<(), CryptoError> {
        if self.encrypt {
            // A fresh nonce per record, as TLS 1.2 GCM's explicit nonce and ESP's IV do.
            self.counter = self.counter.wrapping_add(1);
            self.nonce[4..].copy_from_slice(&self.counter.to_be_bytes());
            self.aead.seal(
                &self.nonce,
                &self.aad,
                &self.input,
                &mut self.output,
                &mut self.tag,
            )
        } else {
            self.aead.open(
                &self.nonce,
                &self.aad,
                &self.input,
                &mut self.output,
                &self.tag,
            )
        }
    }

    fn payload_len(&self) -> usize {
        self.input.len()
    }
}

struct StitchedOp {
    cipher: TlsCbcHmacSha1,
    encrypt: bool,
    payload_len: usize,
    iv: [u8; 16],
    sequence: u64,
    record: Vec<u8>,
    output: Vec<u8>,
}

impl StitchedOp {
    fn new(encrypt: bool, size: usize) -> Result<StitchedOp, CryptoError> {
        let total = stitched::sealed_len(size);
        let mut op = StitchedOp {
            cipher: TlsCbcHmacSha1::new(&[0x5a; 16], &[0x3c; 20])?,
            encrypt,
            payload_len: size,
            iv: [0x24; 16],
            sequence: 0,
            record: vec![0xa5; total],
            output: vec![0; total],
        };
        if !encrypt {
            op.cipher
                .seal_in_place(&op.iv, 0, stitched::APPLICATION_DATA, &mut op.record, size)?;
        }
        Ok(op)
    }
}

impl BenchOp for StitchedOp {
    fn run(&mut self) -> Result<(), CryptoError> {
        if self.encrypt {
            self.sequence += 1;
            self.cipher
                .seal(
                    &self.iv,
                    self.sequence,
                    stitched::APPLICATION_DATA,
                    &self.record,
                    self.payload_len,
                    &mut self.output,
                )
                .map(|_| ())
        } else {
            self.cipher
                .open(
                    &self.iv,
                    0,
                    stitched::APPLICATION_DATA,
                    &self.record,
                    &mut self.output,
                )
                .map(|_| ())
        }
    }

    fn payload_len(&self) -> usize {
        self.payload_len
    }
}

struct CbcOp {
    cbc: Cbc,
    hmac: Option<Hmac>,
    encrypt: bool,
    payload_len: usize,
    header: [u8; ESP_HEADER_LEN],
    iv: Vec<u8>,
    input: Vec<u8>,
    output: Vec<u8>,
    tag: [u8; 16],
}

impl CbcOp {
    fn new(
        alg: CbcAlgorithm,
        encrypt: bool,
        payload_len: usize,
        aligned: usize,
        with_hmac: bool,
    ) -> Result<CbcOp, CryptoError> {
        let mut op = CbcOp {
            cbc: Cbc::new(alg, &vec![0x5a; alg.key_len()])?,
            hmac: if with_hmac {
                Some(Hmac::new(HmacDigest::Sha256, &[0x3c; 32])?)
            } else {
                None
            },
            encrypt,
            payload_len,
            header: [0x11; ESP_HEADER_LEN],
            iv: vec![0x24; alg.block_len()],
            input: vec![0xa5; aligned],
            output: vec![0; aligned],
            tag: [0; 16],
        };
        if !encrypt {
            let plain = op.input.clone();
            op.cbc.encrypt(&op.iv, &plain, &mut op.input)?;
            if let Some(h) = op.hmac.as_mut() {
                h.compute(&[&op.header, &op.iv, &op.input], &mut op.tag)?;
            }
        }
        Ok(op)
    }
}

impl BenchOp for CbcOp {
    fn run(&mut self) -> Result<(), CryptoError> {
        if self.encrypt {
            self.cbc.encrypt(&self.iv, &self.input, &mut self.output)?;
            if let Some(h) = self.hmac.as_mut() {
                // RFC 4303 §2.8: the ICV covers SPI, sequence number, IV and ciphertext.
                h.compute(&[&self.header, &self.iv, &self.output], &mut self.tag)?;
            }
            // The next IV: the last ciphertext block (unpredictable enough for a
            // benchmark, and it costs nothing, unlike a CSPRNG call per packet).
            let block = self.iv.len();
            let n = self.output.len();
            if n >= block {
                self.iv.copy_from_slice(&self.output[n - block..]);
            }
            Ok(())
        } else {
            if let Some(h) = self.hmac.as_mut() {
                h.verify(&[&self.header, &self.iv, &self.input], &self.tag)?;
            }
            self.cbc.decrypt(&self.iv, &self.input, &mut self.output)
        }
    }

    fn payload_len(&self) -> usize {
        self.payload_len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for c in ALL {
            assert_eq!(CipherId::from_name(c.name()), Some(c));
            assert_eq!(CipherId::from_name(&c.name().to_uppercase()), Some(c));
        }
        assert_eq!(CipherId::from_name("rot13"), None);
        assert!(known_names().contains("des-ede3-cbc"));
    }

    #[test]
    fn every_operation_runs_in_both_directions() {
        for c in ALL {
            for encrypt in [true, false] {
                for size in [16usize, 100, 1024] {
                    match bench_op(c, encrypt, size) {
                        Ok(mut op) => {
                            for _ in 0..3 {
                                op.run()
                                    .unwrap_or_else(|e| panic!("{} {size}: {e}", c.name()));
                            }
                            assert_eq!(op.payload_len(), size);
                        }
                        Err(CryptoError::Unavailable { .. })
                            if c == CipherId::Aes128CbcHmacSha1 => {}
                        Err(e) => panic!("{}: {e}", c.name()),
                    }
                }
            }
        }
    }
}
