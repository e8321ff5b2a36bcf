//! The stream header (docs/FORMAT.md §2): a fixed 70-byte record naming the format
//! version, the AEAD, the chunk size and how the key was obtained, with the per-file
//! salt and nonce prefix, authenticated by an HMAC.
//!
//! Parsing checks every field against what this version allows ("parse, don't
//! validate": a [`Header`] that exists is one we can open); it does not check the
//! MAC, which needs the key ([`crate::StreamKeys::open`] does).

use cipherbench_crypto::kdf::ScryptParams;

/// `CBSTREAM`: the first eight bytes of every sealed file.
pub const MAGIC: [u8; 8] = *b"CBSTREAM";
/// The format version this code writes and reads.
pub const VERSION: u8 = 1;
/// Length of the per-file salt.
pub const SALT_LEN: usize = 16;
/// Length of the per-file nonce prefix (12-byte nonce = 7 prefix + 4 index + 1 flag).
pub const NONCE_PREFIX_LEN: usize = 7;
/// Length of the header MAC (HMAC-SHA-256, untruncated).
pub const MAC_LEN: usize = 32;
/// Bytes of the header covered by its MAC.
pub const BODY_LEN: usize = 8 + 1 + 1 + 1 + 1 + 3 + SALT_LEN + NONCE_PREFIX_LEN;
/// The whole header.
pub const HEADER_LEN: usize = BODY_LEN + MAC_LEN;

/// Smallest chunk size, as log2 (256 bytes: small enough to fuzz boundaries).
pub const MIN_CHUNK_LOG2: u8 = 8;
/// Largest chunk size, as log2 (4 MiB: keeps a reader's memory bounded).
pub const MAX_CHUNK_LOG2: u8 = 22;
/// The default chunk size, as log2 (64 KiB, as age uses).
pub const DEFAULT_CHUNK_LOG2: u8 = 16;

/// scrypt bounds a reader accepts, on top of RFC 7914's rules ([`scrypt_check`]):
/// enough for any sensible passphrase setting, small enough that a hostile header
/// cannot make `open` allocate more than 128 MiB or spin for minutes.
/// (19 and 20 would always need more than [`SCRYPT_MAX_MEMORY`]: N·r ≥ 2^20 with
/// the r ≥ 2 that RFC 7914 then requires.)
pub const SCRYPT_LOG_N_RANGE: std::ops::RangeInclusive<u8> = 10..=18;
/// Accepted scrypt `r`.
pub const SCRYPT_R_RANGE: std::ops::RangeInclusive<u8> = 1..=32;
/// Accepted scrypt `p`.
pub const SCRYPT_P_RANGE: std::ops::RangeInclusive<u8> = 1..=16;
/// The most memory scrypt may use when opening (128 MiB). With `p` ≤ 16 it also
/// bounds the work: N·r < 2^20, so N·r·p < 2^24, about 20 times `seal`'s default.
pub const SCRYPT_MAX_MEMORY: u64 = 128 << 20;
/// What `seal` uses by default: N = 2^15, r = 8, p = 3 (about 32 MiB), one of
/// OWASP's equivalent scrypt settings, chosen so passphrase mode stays inside
/// the same memory bound as the payload pipeline.
pub const DEFAULT_SCRYPT: ScryptParams = ScryptParams {
    log_n: 15,
    r: 8,
    p: 3,
};

/// The AEAD that seals the chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// AES-256-GCM (NIST SP 800-38D): the default; AES-NI and PCLMULQDQ make it fast.
    Aes256Gcm,
    /// ChaCha20-Poly1305 (RFC 8439): for machines without AES instructions.
    ChaCha20Poly1305,
}

impl Algorithm {
    /// The header byte.
    pub fn id(self) -> u8 {
        match self {
            Algorithm::Aes256Gcm => 1,
            Algorithm::ChaCha20Poly1305 => 2,
        }
    }

    /// The algorithm for a header byte.
    pub fn from_id(id: u8) -> Option<Algorithm> {
        match id {
            1 => Some(Algorithm::Aes256Gcm),
            2 => Some(Algorithm::ChaCha20Poly1305),
            _ => None,
        }
    }

    /// The name users type and see.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Aes256Gcm => "aes-256-gcm",
            Algorithm::ChaCha20Poly1305 => "chacha20-poly1305",
        }
    }

    /// Parses a name (case-insensitive).
    pub fn from_name(name: &str) -> Option<Algorithm> {
        match name.trim().to_ascii_lowercase().as_str() {
            "aes-256-gcm" => Some(Algorithm::Aes256Gcm),
            "chacha20-poly1305" => Some(Algorithm::ChaCha20Poly1305),
            _ => None,
        }
    }

    pub(crate) fn aead(self) -> cipherbench_crypto::aead::AeadAlgorithm {
        match self {
            Algorithm::Aes256Gcm => cipherbench_crypto::aead::AeadAlgorithm::Aes256Gcm,
            Algorithm::ChaCha20Poly1305 => {
                cipherbench_crypto::aead::AeadAlgorithm::ChaCha20Poly1305
            }
        }
    }
}

/// Where the file's master key came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    /// A 32-byte key file.
    KeyFile,
    /// A passphrase through scrypt with the header's salt.
    Scrypt(ScryptParams),
}

impl KeySource {
    /// "a key file" or "a passphrase", for messages.
    pub fn describe(self) -> &'static str {
        match self {
            KeySource::KeyFile => "a key file",
            KeySource::Scrypt(_) => "a passphrase",
        }
    }
}

/// A parsed, checked header (without its MAC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The chunk AEAD.
    pub algorithm: Algorithm,
    /// log2 of the chunk size in bytes.
    pub chunk_log2: u8,
    /// How the master key is obtained.
    pub key_source: KeySource,
    /// Per-file salt: scrypt's salt, and HKDF's.
    pub salt: [u8; SALT_LEN],
    /// Per-file random nonce prefix.
    pub nonce_prefix: [u8; NONCE_PREFIX_LEN],
}

/// Why a header was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// Fewer bytes than a header.
    #[error("the input is too short to be a cipherbench sealed file ({0} bytes; a header alone is {HEADER_LEN})")]
    TooShort(usize),
    /// The magic bytes are wrong.
    #[error("not a cipherbench sealed file (it does not start with CBSTREAM)")]
    NotAStream,
    /// A version this code does not read.
    #[error("format version {0} is not supported (this cipherbench reads version {VERSION})")]
    UnsupportedVersion(u8),
    /// An unknown algorithm byte.
    #[error("unknown algorithm id {0} in the header")]
    UnknownAlgorithm(u8),
    /// A chunk size outside the allowed range.
    #[error(
        "chunk size 2^{0} is outside the allowed 2^{MIN_CHUNK_LOG2}..2^{MAX_CHUNK_LOG2} bytes"
    )]
    BadChunkSize(u8),
    /// An unknown key source byte.
    #[error("unknown key source {0} in the header")]
    UnknownKeySource(u8),
    /// scrypt parameters that break RFC 7914 or this format's bounds, or any set
    /// for a key file: refused before anything is derived.
    #[error(
        "the header's scrypt settings (log2 N {log_n}, r {r}, p {p}) are not valid: {reason}; the header was altered or not written by a conforming sealer"
    )]
    BadKdfParameters {
        /// log2 N.
        log_n: u8,
        /// r.
        r: u8,
        /// p.
        p: u8,
        /// The rule they break.
        reason: ScryptRefusal,
    },
    /// A key of the wrong length.
    #[error("a key must be 32 bytes, got {0}")]
    BadKeyLength(usize),
    /// The MAC did not verify: the key is wrong or the header was altered.
    #[error(
        "the header does not authenticate: wrong key or passphrase, or the header was altered"
    )]
    BadMac,
    /// The file wants another kind of key than the one given.
    #[error("this file was sealed with {file}, but {given} was given")]
    WrongKeyKind {
        /// What the file was sealed with.
        file: &'static str,
        /// What the caller supplied.
        given: &'static str,
    },
    /// The crypto library failed (not a property of the file). The library's
    /// message is part of this one and deliberately not also the error's
    /// `source()`: a reporter that prints the chain (`{:#}`) would print it twice.
    #[error("crypto library: {0}")]
    Crypto(cipherbench_crypto::CryptoError),
}

impl From<cipherbench_crypto::CryptoError> for HeaderError {
    fn from(e: cipherbench_crypto::CryptoError) -> HeaderError {
        HeaderError::Crypto(e)
    }
}

/// Which rule scrypt parameters break (docs/FORMAT.md §2). The RFC's rules come
/// first: parameters that break them are not scrypt at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ScryptRefusal {
    /// RFC 7914 §2: N must be larger than 1 (log2 N = 0 makes N = 1).
    #[error("RFC 7914 §2 needs N > 1")]
    CostNotAboveOne,
    /// RFC 7914 §2: r and p are positive integers.
    #[error("RFC 7914 §2 needs r ≥ 1 and p ≥ 1")]
    Zero,
    /// RFC 7914 §2: N < 2^(128·r/8) = 2^(16·r).
    #[error("RFC 7914 §2 needs N < 2^(16·r) = 2^{limit}")]
    CostTooHighForBlockSize {
        /// 16·r.
        limit: u32,
    },
    /// RFC 7914 §2: p ≤ (2^32 − 1)·32 / (128·r), which is r·p < 2^30.
    #[error("RFC 7914 §2 needs r·p < 2^30")]
    BlockTimesParallelism,
    /// This format: log2 N in [`SCRYPT_LOG_N_RANGE`].
    #[error("this format accepts log2 N from 10 to 18")]
    CostOutOfRange,
    /// This format: r in [`SCRYPT_R_RANGE`].
    #[error("this format accepts r from 1 to 32")]
    BlockSizeOutOfRange,
    /// This format: p in [`SCRYPT_P_RANGE`].
    #[error("this format accepts p from 1 to 16")]
    ParallelismOutOfRange,
    /// This format: at most [`SCRYPT_MAX_MEMORY`].
    #[error("they need {mib} MiB, and this format allows 128 MiB")]
    Memory {
        /// What they need, rounded up.
        mib: u64,
    },
    /// A key-file header carries zeros where a passphrase header has scrypt's.
    #[error("a key-file header must carry zeros there")]
    SetForKeyFile,
}

impl Header {
    /// The chunk size in bytes.
    pub fn chunk_size(&self) -> usize {
        1usize << self.chunk_log2
    }

    /// The MAC-covered bytes (docs/FORMAT.md §2).
    pub fn encode_body(&self) -> [u8; BODY_LEN] {
        let mut b = [0u8; BODY_LEN];
        b[..8].copy_from_slice(&MAGIC);
        b[8] = VERSION;
        b[9] = self.algorithm.id();
        b[10] = self.chunk_log2;
        let (source, log_n, r, p) = match self.key_source {
            KeySource::KeyFile => (1, 0, 0, 0),
            // Parameters were range-checked when the header was built or parsed, so
            // they fit a byte.
            KeySource::Scrypt(s) => (2, s.log_n, s.r as u8, s.p as u8),
        };
        b[11] = source;
        b[12] = log_n;
        b[13] = r;
        b[14] = p;
        b[15..15 + SALT_LEN].copy_from_slice(&self.salt);
        b[15 + SALT_LEN..BODY_LEN].copy_from_slice(&self.nonce_prefix);
        b
    }

    /// Parses and checks the first [`HEADER_LEN`] bytes of `bytes` (the MAC is not
    /// checked here).
    pub fn parse(bytes: &[u8]) -> Result<Header, HeaderError> {
        if bytes.len() < 8 || bytes[..8] != MAGIC {
            // A short file that is not ours says "not ours" rather than "too short".
            if bytes.len() >= 8 || !MAGIC.starts_with(bytes) {
                return Err(HeaderError::NotAStream);
            }
        }
        if bytes.len() < HEADER_LEN {
            return Err(HeaderError::TooShort(bytes.len()));
        }
        if bytes[8] != VERSION {
            return Err(HeaderError::UnsupportedVersion(bytes[8]));
        }
        let algorithm =
            Algorithm::from_id(bytes[9]).ok_or(HeaderError::UnknownAlgorithm(bytes[9]))?;
        let chunk_log2 = bytes[10];
        if !(MIN_CHUNK_LOG2..=MAX_CHUNK_LOG2).contains(&chunk_log2) {
            return Err(HeaderError::BadChunkSize(chunk_log2));
        }
        let (log_n, r, p) = (bytes[12], bytes[13], bytes[14]);
        let bad = |reason| HeaderError::BadKdfParameters {
            log_n,
            r,
            p,
            reason,
        };
        let key_source = match bytes[11] {
            1 if (log_n, r, p) == (0, 0, 0) => KeySource::KeyFile,
            1 => return Err(bad(ScryptRefusal::SetForKeyFile)),
            2 => {
                let params = ScryptParams {
                    log_n,
                    r: u32::from(r),
                    p: u32::from(p),
                };
                scrypt_check(params).map_err(bad)?;
                KeySource::Scrypt(params)
            }
            other => return Err(HeaderError::UnknownKeySource(other)),
        };
        let mut salt = [0u8; SALT_LEN];
        salt.copy_from_slice(&bytes[15..15 + SALT_LEN]);
        let mut nonce_prefix = [0u8; NONCE_PREFIX_LEN];
        nonce_prefix.copy_from_slice(&bytes[15 + SALT_LEN..BODY_LEN]);
        Ok(Header {
            algorithm,
            chunk_log2,
            key_source,
            salt,
            nonce_prefix,
        })
    }
}

/// Checks scrypt parameters against RFC 7914 §2 and then this format's bounds
/// (docs/FORMAT.md §2): what a reader accepts, and so what a writer may use.
/// Nothing here derives or allocates, so a header is judged before any work.
pub fn scrypt_check(p: ScryptParams) -> Result<(), ScryptRefusal> {
    if p.log_n == 0 {
        return Err(ScryptRefusal::CostNotAboveOne);
    }
    if p.r == 0 || p.p == 0 {
        return Err(ScryptRefusal::Zero);
    }
    // N = 2^log_n < 2^(16·r)  <=>  log_n < 16·r.
    let limit = p.r.saturating_mul(16);
    if u32::from(p.log_n) >= limit {
        return Err(ScryptRefusal::CostTooHighForBlockSize { limit });
    }
    if u64::from(p.r) * u64::from(p.p) >= 1 << 30 {
        return Err(ScryptRefusal::BlockTimesParallelism);
    }
    if !SCRYPT_LOG_N_RANGE.contains(&p.log_n) {
        return Err(ScryptRefusal::CostOutOfRange);
    }
    if !u8::try_from(p.r).is_ok_and(|r| SCRYPT_R_RANGE.contains(&r)) {
        return Err(ScryptRefusal::BlockSizeOutOfRange);
    }
    if !u8::try_from(p.p).is_ok_and(|x| SCRYPT_P_RANGE.contains(&x)) {
        return Err(ScryptRefusal::ParallelismOutOfRange);
    }
    let memory = p.memory_bytes();
    if memory > SCRYPT_MAX_MEMORY {
        return Err(ScryptRefusal::Memory {
            mib: memory.div_ceil(1 << 20),
        });
    }
    Ok(())
}

/// Whether [`scrypt_check`] accepts these parameters.
pub fn scrypt_acceptable(p: ScryptParams) -> bool {
    scrypt_check(p).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Header {
        Header {
            algorithm: Algorithm::ChaCha20Poly1305,
            chunk_log2: 12,
            key_source: KeySource::Scrypt(DEFAULT_SCRYPT),
            salt: [0x11; SALT_LEN],
            nonce_prefix: [0x22; NONCE_PREFIX_LEN],
        }
    }

    #[test]
    fn encodes_and_parses_back() {
        let h = sample();
        let mut bytes = h.encode_body().to_vec();
        bytes.extend_from_slice(&[0u8; MAC_LEN]);
        assert_eq!(Header::parse(&bytes).unwrap(), h);
        assert_eq!(&bytes[..8], b"CBSTREAM");
        assert_eq!(bytes.len(), HEADER_LEN);
        assert_eq!(HEADER_LEN, 70);
    }

    #[test]
    fn refuses_every_out_of_range_field() {
        let mut good = sample().encode_body().to_vec();
        good.extend_from_slice(&[0u8; MAC_LEN]);
        let cases: Vec<(usize, u8, HeaderError)> = vec![
            (0, b'X', HeaderError::NotAStream),
            (8, 2, HeaderError::UnsupportedVersion(2)),
            (9, 3, HeaderError::UnknownAlgorithm(3)),
            (10, 7, HeaderError::BadChunkSize(7)),
            (10, 23, HeaderError::BadChunkSize(23)),
            (11, 9, HeaderError::UnknownKeySource(9)),
            (
                12,
                21,
                HeaderError::BadKdfParameters {
                    log_n: 21,
                    r: 8,
                    p: 3,
                    reason: ScryptRefusal::CostOutOfRange,
                },
            ),
            (
                13,
                0,
                HeaderError::BadKdfParameters {
                    log_n: 15,
                    r: 0,
                    p: 3,
                    reason: ScryptRefusal::Zero,
                },
            ),
        ];
        for (offset, value, expected) in cases {
            let mut b = good.clone();
            b[offset] = value;
            assert_eq!(Header::parse(&b), Err(expected), "byte {offset} = {value}");
        }
        // A key-file header must not carry scrypt parameters.
        let mut b = good.clone();
        b[11] = 1;
        assert!(matches!(
            Header::parse(&b),
            Err(HeaderError::BadKdfParameters {
                reason: ScryptRefusal::SetForKeyFile,
                ..
            })
        ));
        assert_eq!(
            Header::parse(&good[..HEADER_LEN - 1]),
            Err(HeaderError::TooShort(HEADER_LEN - 1))
        );
        assert_eq!(Header::parse(b"CBST"), Err(HeaderError::TooShort(4)));
        assert_eq!(Header::parse(b"hello"), Err(HeaderError::NotAStream));
        assert_eq!(Header::parse(b""), Err(HeaderError::TooShort(0)));
    }

    fn params(log_n: u8, r: u32, p: u32) -> ScryptParams {
        ScryptParams { log_n, r, p }
    }

    #[test]
    fn scrypt_check_refuses_each_rule_on_its_own() {
        use ScryptRefusal::*;
        let cases = [
            // RFC 7914 §2.
            (params(0, 8, 1), CostNotAboveOne),
            (params(15, 0, 1), Zero),
            (params(15, 8, 0), Zero),
            // The header of issue 14: N = 2^16 with r = 1 (OpenSSL refused it only
            // after trying, as "memory limit exceeded").
            (params(16, 1, 1), CostTooHighForBlockSize { limit: 16 }),
            (params(18, 1, 1), CostTooHighForBlockSize { limit: 16 }),
            // r·p = 2^30 exactly; one less passes the RFC and meets the range.
            (params(10, 1 << 15, 1 << 15), BlockTimesParallelism),
            (params(10, 1 << 15, (1 << 15) - 1), BlockSizeOutOfRange),
            // This format's ranges.
            (params(9, 8, 1), CostOutOfRange),
            (params(19, 2, 1), CostOutOfRange),
            (params(10, 33, 1), BlockSizeOutOfRange),
            (params(10, 8, 17), ParallelismOutOfRange),
            // Its memory bound: 128·r·(N + p + 2) bytes.
            (params(17, 8, 1), Memory { mib: 129 }),
            (params(18, 4, 1), Memory { mib: 129 }),
        ];
        for (p, reason) in cases {
            assert_eq!(scrypt_check(p), Err(reason), "{p:?}");
        }
    }

    #[test]
    fn scrypt_check_accepts_the_edges_of_every_bound() {
        for p in [
            params(10, 1, 1),
            params(15, 1, 16), // the largest N that r = 1 allows
            params(16, 2, 16),
            params(18, 3, 16), // the largest N: 96 MiB
            params(17, 7, 16), // 112 MiB, about 2^23.8 of work
            params(15, 31, 16),
            DEFAULT_SCRYPT,
        ] {
            assert_eq!(scrypt_check(p), Ok(()), "{p:?}");
            assert!(p.memory_bytes() <= SCRYPT_MAX_MEMORY);
            // The memory bound with p ≤ 16 bounds the work too.
            assert!((1u64 << p.log_n) * u64::from(p.r) * u64::from(p.p) < 1 << 24);
        }
    }

    #[test]
    fn an_invalid_scrypt_header_is_refused_in_one_line_naming_the_rule() {
        let mut b = sample().encode_body().to_vec();
        b.extend_from_slice(&[0u8; MAC_LEN]);
        (b[12], b[13], b[14]) = (16, 1, 1);
        let err = Header::parse(&b).unwrap_err().to_string();
        assert_eq!(
            err,
            "the header's scrypt settings (log2 N 16, r 1, p 1) are not valid: RFC 7914 §2 needs N < 2^(16·r) = 2^16; the header was altered or not written by a conforming sealer"
        );
    }

    #[test]
    fn a_crypto_failure_is_described_once() {
        // The library's message is in the Display; a source() as well would make
        // every chain printer (anyhow's `{:#}`) repeat it.
        let e = HeaderError::from(cipherbench_crypto::CryptoError::Library("boom".into()));
        assert_eq!(e.to_string(), "crypto library: OpenSSL error: boom");
        assert!(std::error::Error::source(&e).is_none());
    }

    #[test]
    fn scrypt_bounds_cap_memory() {
        assert!(scrypt_acceptable(DEFAULT_SCRYPT));
        assert!(!scrypt_acceptable(ScryptParams {
            log_n: 20,
            r: 8,
            p: 1
        }));
        assert!(scrypt_acceptable(ScryptParams {
            log_n: 16,
            r: 8,
            p: 1
        }));
    }

    #[test]
    fn algorithm_names_round_trip() {
        for a in [Algorithm::Aes256Gcm, Algorithm::ChaCha20Poly1305] {
            assert_eq!(Algorithm::from_name(a.name()), Some(a));
            assert_eq!(Algorithm::from_id(a.id()), Some(a));
        }
        assert_eq!(Algorithm::from_name("rot13"), None);
    }
}
