//! cipherbench's streaming file encryption format, as pure logic.
//!
//! A sealed file is a 70-byte header followed by chunks: the plaintext cut into
//! chunks of 2^k bytes (64 KiB by default), each sealed with an AEAD (AES-256-GCM
//! or ChaCha20-Poly1305) under a nonce of the file's random prefix, the chunk index
//! and a last-chunk flag, with the header as additional data. It is age's STREAM
//! construction with the header bound into every chunk, so truncation, reordering,
//! splicing between files and appending are all detected. The specification, with a
//! test vector that `tests/format.rs` checks, is `docs/FORMAT.md`.
//!
//! This crate takes bytes and returns bytes or a typed reason. It does not read
//! files, spawn threads or look at the clock: `cipherbench seal`/`open` (the app's
//! `file` module) reads, parallelises and writes, calling [`Sealer::seal_batch`] and
//! [`Opener::open_batch`] from as many threads as it likes, so it can be tested and
//! fuzzed alone. [`seal`] and [`open`] are the whole-buffer reference.

#![forbid(unsafe_code)]

pub mod chunk;
pub mod header;
pub mod keys;

pub use chunk::{sealed_len, ChunkError, ChunkFailure, Opener, SealError, Sealer, TAG_LEN};
pub use header::{Algorithm, Header, HeaderError, KeySource, ScryptRefusal, HEADER_LEN};
pub use keys::{Credential, StreamKeys, KEY_LEN};

use cipherbench_crypto::CryptoError;
use header::{NONCE_PREFIX_LEN, SALT_LEN};

/// Anything that stops a whole-buffer seal or open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The header was refused (not ours, unsupported, wrong key).
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// A chunk did not open.
    #[error(transparent)]
    Chunk(#[from] ChunkError),
    /// Sealing was refused.
    #[error(transparent)]
    Seal(#[from] SealError),
}

impl Header {
    /// A header with a fresh random salt and nonce prefix from OpenSSL's CSPRNG.
    pub fn random(
        algorithm: Algorithm,
        chunk_log2: u8,
        key_source: KeySource,
    ) -> Result<Header, CryptoError> {
        let mut salt = [0u8; SALT_LEN];
        cipherbench_crypto::random_bytes(&mut salt)?;
        let mut nonce_prefix = [0u8; NONCE_PREFIX_LEN];
        cipherbench_crypto::random_bytes(&mut nonce_prefix)?;
        Ok(Header {
            algorithm,
            chunk_log2,
            key_source,
            salt,
            nonce_prefix,
        })
    }
}

/// Seals a whole buffer: header, then every chunk. The reference for the
/// streaming, parallel sealer (which must produce the same bytes).
pub fn seal(
    header: Header,
    credential: Credential<'_>,
    plaintext: &[u8],
) -> Result<Vec<u8>, Error> {
    let keys = StreamKeys::create(header, credential)?;
    let mut sealer = keys.sealer().map_err(SealError::from)?;
    let mut out = keys.header_bytes().to_vec();
    let start = out.len();
    out.resize(start + sealer.sealed_len(plaintext.len()), 0);
    sealer.seal_batch(0, plaintext, true, &mut out[start..])?;
    Ok(out)
}

/// Opens a whole buffer, returning the plaintext only if the header and every chunk
/// verified.
pub fn open(sealed: &[u8], credential: Credential<'_>) -> Result<Vec<u8>, Error> {
    let keys = StreamKeys::open(sealed, credential)?;
    let body = &sealed[HEADER_LEN..];
    let mut opener = keys.opener().map_err(|e| ChunkError {
        index: 0,
        failure: ChunkFailure::Crypto(e),
    })?;
    let mut out = vec![0u8; opener.max_opened_len(body.len())];
    let n = opener.open_batch(0, body, true, &mut out)?;
    out.truncate(n);
    Ok(out)
}
