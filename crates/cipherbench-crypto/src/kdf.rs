//! scrypt (RFC 7914), the passphrase key derivation of `cipherbench seal`, through
//! OpenSSL's `EVP_PBE_scrypt` (OpenSSL 3.0 has scrypt; argon2id arrived only in 3.2).
//!
//! This module checks parameters and sizes the memory cap; it does not choose
//! parameters (the file format does, and records them in each file's header).

use crate::CryptoError;

/// scrypt's cost parameters: N = 2^`log_n` (CPU and memory), `r` (block size), `p`
/// (parallelism).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScryptParams {
    /// log2 of N.
    pub log_n: u8,
    /// Block size factor.
    pub r: u32,
    /// Parallelisation factor.
    pub p: u32,
}

impl ScryptParams {
    /// Bytes OpenSSL allocates for these parameters: 128·r·(N + p + 2) (V, B and
    /// the working block; RFC 7914 §6 and OpenSSL's `scrypt.c`).
    pub fn memory_bytes(&self) -> u64 {
        let n = 1u64 << self.log_n.min(63);
        128u64
            .saturating_mul(u64::from(self.r))
            .saturating_mul(n.saturating_add(u64::from(self.p)).saturating_add(2))
    }
}

/// Derives `out.len()` bytes from a passphrase and salt.
pub fn scrypt(
    passphrase: &[u8],
    salt: &[u8],
    params: ScryptParams,
    out: &mut [u8],
) -> Result<(), CryptoError> {
    if params.log_n == 0 || params.log_n > 40 || params.r == 0 || params.p == 0 {
        return Err(CryptoError::Library(format!(
            "scrypt parameters out of range: log2 N {}, r {}, p {}",
            params.log_n, params.r, params.p
        )));
    }
    // A little headroom over the exact need: OpenSSL compares against its own sum.
    let maxmem = params.memory_bytes().saturating_add(1 << 20);
    crate::ffi::scrypt(
        passphrase,
        salt,
        1u64 << params.log_n,
        u64::from(params.r),
        u64::from(params.p),
        maxmem,
        out,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// RFC 7914 §12, the first two test vectors.
    #[test]
    fn matches_rfc7914_vectors() {
        let mut out = [0u8; 64];
        scrypt(
            b"",
            b"",
            ScryptParams {
                log_n: 4,
                r: 1,
                p: 1,
            },
            &mut out,
        )
        .unwrap();
        assert_eq!(
            out.to_vec(),
            hex("77 d6 57 62 38 65 7b 20 3b 19 ca 42 c1 8a 04 97 f1 6b 48 44 e3 07 4a e8 df df fa 3f ed e2 14 42
                 fc d0 06 9d ed 09 48 f8 32 6a 75 3a 0f c8 1f 17 e8 d3 e0 fb 2e 0d 36 28 cf 35 e2 0c 38 d1 89 06")
        );
        scrypt(
            b"password",
            b"NaCl",
            ScryptParams {
                log_n: 10,
                r: 8,
                p: 16,
            },
            &mut out,
        )
        .unwrap();
        assert_eq!(
            out.to_vec(),
            hex("fd ba be 1c 9d 34 72 00 78 56 e7 19 0d 01 e9 fe 7c 6a d7 cb c8 23 78 30 e7 73 76 63 4b 37 31 62
                 2e af 30 d9 2e 22 a3 88 6f f1 09 27 9d 98 30 da c7 27 af b9 4a 83 ee 6d 83 60 cb df a2 cc 06 40")
        );
    }

    #[test]
    fn refuses_degenerate_parameters() {
        let mut out = [0u8; 32];
        for (log_n, r, p) in [(0, 8, 1), (14, 0, 1), (14, 8, 0)] {
            assert!(scrypt(b"x", b"salt", ScryptParams { log_n, r, p }, &mut out).is_err());
        }
    }

    #[test]
    fn memory_estimate_matches_the_usual_figure() {
        // N = 2^15, r = 8: the familiar 32 MiB.
        let m = ScryptParams {
            log_n: 15,
            r: 8,
            p: 1,
        }
        .memory_bytes();
        assert!((32 << 20..33 << 20).contains(&m), "{m}");
    }
}
