//! Chunks (docs/FORMAT.md §4): each chunk of plaintext sealed with the payload key,
//! a nonce made of the file's prefix, the chunk index and a last-chunk flag, and the
//! whole header as additional data.
//!
//! The unit of work is a *batch*: a run of consecutive chunks in one buffer, so that
//! a caller can hand batches to threads and write them back in order. A batch's
//! output depends only on its first chunk index, its bytes and whether it ends the
//! stream, so sealing in batches gives exactly the bytes of sealing in one go.
//!
//! This module never reads or writes anything but the slices it is given, and it
//! never leaves plaintext from a chunk that failed to verify in an output buffer:
//! on any failure the whole batch's output is zeroed.

use crate::header::{Header, HEADER_LEN, NONCE_PREFIX_LEN};
use cipherbench_crypto::aead::{Aead, NONCE_LEN};
use cipherbench_crypto::CryptoError;

/// The AEAD tag after every chunk.
pub const TAG_LEN: usize = cipherbench_crypto::aead::TAG_LEN;
/// The chunk index is 32 bits in the nonce: at most 2^32 chunks per file.
pub const MAX_CHUNKS: u64 = 1 << 32;

/// The nonce of chunk `index`: prefix (7 bytes) ‖ index (4 bytes, big-endian) ‖ flag
/// (0x01 for the last chunk, 0x00 otherwise).
pub fn nonce(prefix: &[u8; NONCE_PREFIX_LEN], index: u32, last: bool) -> [u8; NONCE_LEN] {
    let mut n = [0u8; NONCE_LEN];
    n[..NONCE_PREFIX_LEN].copy_from_slice(prefix);
    n[NONCE_PREFIX_LEN..NONCE_PREFIX_LEN + 4].copy_from_slice(&index.to_be_bytes());
    n[NONCE_LEN - 1] = u8::from(last);
    n
}

/// Sealed size of `plaintext_len` bytes with chunks of `chunk_size` (body only, no
/// header): every chunk gains a tag, and an empty plaintext is one empty chunk.
pub fn sealed_len(plaintext_len: u64, chunk_size: usize) -> u64 {
    let c = chunk_size as u64;
    let chunks = plaintext_len.div_ceil(c).max(1);
    plaintext_len + chunks * TAG_LEN as u64
}

/// Why sealing a batch was refused (all are caller mistakes or library failures;
/// sealing valid input cannot fail otherwise).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// A batch that does not end the stream must hold whole chunks, at least one.
    #[error("a batch of {len} bytes that does not end the stream is not a whole number of chunks")]
    Misaligned {
        /// Batch length.
        len: usize,
    },
    /// Only a stream's first batch may be empty (the empty file is one empty chunk).
    #[error("an empty final batch at chunk {0}")]
    EmptyFinalBatch(u64),
    /// The stream would need more than [`MAX_CHUNKS`] chunks.
    #[error("the input needs more than 2^32 chunks; use a larger chunk size")]
    TooManyChunks,
    /// The output slice is too small.
    #[error("output buffer of {got} bytes, {need} needed")]
    OutputTooSmall {
        /// Needed.
        need: usize,
        /// Given.
        got: usize,
    },
    /// The crypto library failed. Its message is in this one and not also the
    /// `source()`, so that a chain printer does not repeat it.
    #[error("crypto library: {0}")]
    Crypto(CryptoError),
}

impl From<CryptoError> for SealError {
    fn from(e: CryptoError) -> SealError {
        SealError::Crypto(e)
    }
}

/// Seals chunks. One per thread.
pub struct Sealer {
    aead: Aead,
    prefix: [u8; NONCE_PREFIX_LEN],
    aad: [u8; HEADER_LEN],
    chunk_size: usize,
}

impl Sealer {
    pub(crate) fn new(
        header: &Header,
        header_bytes: &[u8; HEADER_LEN],
        payload_key: &[u8],
    ) -> Result<Sealer, CryptoError> {
        Ok(Sealer {
            aead: Aead::new(header.algorithm.aead(), payload_key)?,
            prefix: header.nonce_prefix,
            aad: *header_bytes,
            chunk_size: header.chunk_size(),
        })
    }

    /// Bytes [`Sealer::seal_batch`] writes for a batch of `input_len` bytes.
    pub fn sealed_len(&self, input_len: usize) -> usize {
        sealed_len(input_len as u64, self.chunk_size) as usize
    }

    /// Seals the chunks of `input`, the first being chunk `first_index`, into
    /// `output`; `last` says the batch ends the stream (its final chunk gets the
    /// last-chunk flag and may be short). Returns the bytes written.
    pub fn seal_batch(
        &mut self,
        first_index: u64,
        input: &[u8],
        last: bool,
        output: &mut [u8],
    ) -> Result<usize, SealError> {
        let c = self.chunk_size;
        if !last && (input.is_empty() || !input.len().is_multiple_of(c)) {
            return Err(SealError::Misaligned { len: input.len() });
        }
        if input.is_empty() && first_index != 0 {
            return Err(SealError::EmptyFinalBatch(first_index));
        }
        let count = input.len().div_ceil(c).max(1);
        if first_index.saturating_add(count as u64) > MAX_CHUNKS {
            return Err(SealError::TooManyChunks);
        }
        let need = self.sealed_len(input.len());
        if output.len() < need {
            return Err(SealError::OutputTooSmall {
                need,
                got: output.len(),
            });
        }
        for i in 0..count {
            let start = i * c;
            let end = (start + c).min(input.len());
            let plaintext = &input[start..end];
            let out_start = start + i * TAG_LEN;
            let (ciphertext, rest) = output[out_start..].split_at_mut(plaintext.len());
            // Checked above: first_index + count <= 2^32.
            let index = (first_index + i as u64) as u32;
            let is_last = last && i == count - 1;
            self.aead.seal(
                &nonce(&self.prefix, index, is_last),
                &self.aad,
                plaintext,
                ciphertext,
                &mut rest[..TAG_LEN],
            )?;
        }
        Ok(need)
    }
}

/// What was wrong with a chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkFailure {
    /// The tag did not verify under either flag.
    Forged,
    /// The chunk verifies as a non-final chunk, but the stream ends after it.
    Truncated,
    /// The chunk verifies as the final chunk, but more data follows it.
    Appended,
    /// The stream ends inside what should be this chunk's tag.
    ShorterThanTag(usize),
    /// An empty final chunk after other chunks (a sealer never writes one).
    EmptyFinalChunk,
    /// The stream ends where this chunk should begin.
    Missing,
    /// More chunks than a nonce can count.
    TooManyChunks,
    /// A caller passed a batch that was not whole units, or too small an output.
    BadBatch(String),
    /// The crypto library failed.
    Crypto(CryptoError),
}

/// A chunk that did not open, by index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkError {
    /// The chunk's index (0 is the first chunk after the header).
    pub index: u64,
    /// What was wrong.
    pub failure: ChunkFailure,
}

impl std::fmt::Display for ChunkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let i = self.index;
        match &self.failure {
            ChunkFailure::Forged => write!(
                f,
                "chunk {i} did not verify: the file was altered, reordered, spliced, truncated inside a chunk, or sealed with another key"
            ),
            ChunkFailure::Truncated => write!(
                f,
                "chunk {i} is not the final chunk but the file ends after it: the file was truncated"
            ),
            ChunkFailure::Appended => write!(
                f,
                "chunk {i} is the final chunk but more data follows it: data was appended"
            ),
            ChunkFailure::ShorterThanTag(n) => write!(
                f,
                "chunk {i} is {n} bytes, shorter than its {TAG_LEN}-byte tag: the file was truncated"
            ),
            ChunkFailure::EmptyFinalChunk => write!(
                f,
                "chunk {i} is an empty final chunk, which a sealer never writes: the file was altered"
            ),
            ChunkFailure::Missing if i == 0 => {
                write!(f, "chunk 0 is missing: the file ends right after the header")
            }
            ChunkFailure::Missing => write!(f, "chunk {i} is missing: the file ends early"),
            ChunkFailure::TooManyChunks => {
                write!(f, "chunk {i} is beyond the 2^32 chunks a file may hold")
            }
            ChunkFailure::BadBatch(what) => write!(f, "chunk {i}: {what}"),
            ChunkFailure::Crypto(e) => write!(f, "chunk {i}: crypto library: {e}"),
        }
    }
}

impl std::error::Error for ChunkError {}

/// Opens chunks. One per thread.
pub struct Opener {
    aead: Aead,
    prefix: [u8; NONCE_PREFIX_LEN],
    aad: [u8; HEADER_LEN],
    chunk_size: usize,
}

impl Opener {
    pub(crate) fn new(
        header: &Header,
        header_bytes: &[u8; HEADER_LEN],
        payload_key: &[u8],
    ) -> Result<Opener, CryptoError> {
        Ok(Opener {
            aead: Aead::new(header.algorithm.aead(), payload_key)?,
            prefix: header.nonce_prefix,
            aad: *header_bytes,
            chunk_size: header.chunk_size(),
        })
    }

    /// A sealed chunk's size on disk (chunk plus tag), except a short final one.
    pub fn unit(&self) -> usize {
        self.chunk_size + TAG_LEN
    }

    /// The most plaintext a batch of `input_len` sealed bytes can hold.
    pub fn max_opened_len(&self, input_len: usize) -> usize {
        let unit = self.unit();
        (input_len / unit) * self.chunk_size + (input_len % unit).saturating_sub(TAG_LEN)
    }

    /// Opens the sealed chunks in `input` (whole units of chunk + tag, except that
    /// the final one may be short when `last`), the first being chunk `first_index`,
    /// into `output`. `last` says the stream ends with this batch. Returns the
    /// plaintext length. On failure, `output` is zeroed and the error names the first
    /// chunk that failed.
    pub fn open_batch(
        &mut self,
        first_index: u64,
        input: &[u8],
        last: bool,
        output: &mut [u8],
    ) -> Result<usize, ChunkError> {
        let result = self.open_steps(first_index, input, last, output);
        if result.is_err() {
            output.fill(0);
        }
        result
    }

    fn open_steps(
        &mut self,
        first_index: u64,
        input: &[u8],
        last: bool,
        output: &mut [u8],
    ) -> Result<usize, ChunkError> {
        let unit = self.unit();
        let c = self.chunk_size;
        let fail = |index: u64, failure: ChunkFailure| Err(ChunkError { index, failure });
        if input.is_empty() {
            return fail(
                first_index,
                if last {
                    ChunkFailure::Missing
                } else {
                    ChunkFailure::BadBatch("empty batch".into())
                },
            );
        }
        if !last && !input.len().is_multiple_of(unit) {
            return fail(
                first_index,
                ChunkFailure::BadBatch(format!(
                    "a {}-byte batch that does not end the stream is not whole chunks",
                    input.len()
                )),
            );
        }
        let count = input.len().div_ceil(unit);
        if output.len() < self.max_opened_len(input.len()) {
            return fail(
                first_index,
                ChunkFailure::BadBatch("output buffer too small".into()),
            );
        }
        let mut written = 0;
        for i in 0..count {
            let index = first_index + i as u64;
            let Ok(index32) = u32::try_from(index) else {
                return fail(index, ChunkFailure::TooManyChunks);
            };
            let sealed = &input[i * unit..((i + 1) * unit).min(input.len())];
            let is_last = last && i == count - 1;
            if sealed.len() < TAG_LEN {
                return fail(index, ChunkFailure::ShorterThanTag(sealed.len()));
            }
            if is_last && sealed.len() == TAG_LEN && index != 0 {
                return fail(index, ChunkFailure::EmptyFinalChunk);
            }
            let (ciphertext, tag) = sealed.split_at(sealed.len() - TAG_LEN);
            let out = &mut output[i * c..i * c + ciphertext.len()];
            match self.aead.open(
                &nonce(&self.prefix, index32, is_last),
                &self.aad,
                ciphertext,
                out,
                tag,
            ) {
                Ok(()) => written = i * c + ciphertext.len(),
                Err(CryptoError::AuthenticationFailed) => {
                    // Would it verify with the other flag? Then the chunk is genuine
                    // and only its place at the end (or not) of the stream is wrong.
                    // The trial's plaintext is zeroed with the batch by the caller.
                    let other = self.aead.open(
                        &nonce(&self.prefix, index32, !is_last),
                        &self.aad,
                        ciphertext,
                        out,
                        tag,
                    );
                    let failure = match (other, is_last) {
                        (Ok(()), true) => ChunkFailure::Truncated,
                        (Ok(()), false) => ChunkFailure::Appended,
                        (Err(_), _) => ChunkFailure::Forged,
                    };
                    return fail(index, failure);
                }
                Err(e) => return fail(index, ChunkFailure::Crypto(e)),
            }
        }
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonce_layout_is_prefix_index_flag() {
        let n = nonce(&[1, 2, 3, 4, 5, 6, 7], 0x0a0b0c0d, true);
        assert_eq!(n, [1, 2, 3, 4, 5, 6, 7, 0x0a, 0x0b, 0x0c, 0x0d, 1]);
        assert_eq!(nonce(&[0; 7], 1, false)[11], 0);
    }

    #[test]
    fn sealed_length_counts_one_tag_per_chunk() {
        assert_eq!(sealed_len(0, 256), 16);
        assert_eq!(sealed_len(1, 256), 17);
        assert_eq!(sealed_len(256, 256), 272);
        assert_eq!(sealed_len(257, 256), 257 + 32);
    }
}
