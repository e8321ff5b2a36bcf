//! The one place cipherbench talks to OpenSSL.
//!
//! Every layer's crypto goes through libcrypto's EVP interface, the same code nginx
//! and `openssl speed` use, so the acceleration variants (`OPENSSL_ia32cap` set in a
//! child process's environment) apply to all of them alike. This crate offers:
//!
//! - [`aead`]: AES-GCM and ChaCha20-Poly1305 seal/open with a reusable key schedule;
//! - [`cbc`]: AES-CBC and 3DES-CBC without padding (the caller pads, as ESP and TLS do);
//! - [`ctr`]: the AES-128-CTR keystream at any offset (the TLS layer's file content);
//! - [`hmac`]: HMAC-SHA-1, -SHA-256 and -SHA-384 with truncated tags;
//! - [`stitched`]: OpenSSL's AES-128-CBC-HMAC-SHA1 TLS record cipher;
//! - [`hkdf`]: HKDF (RFC 5869), built on [`hmac`]: SHA-256 extract and expand, and
//!   expand with any of its hashes;
//! - [`kdf`]: scrypt (RFC 7914) for passphrases;
//! - [`tls_record`]: TLS 1.2 and 1.3 AEAD record keys and opening, for a reader that
//!   opens records itself (the load generator's sampled path);
//! - [`digest`]: SHA-256 (streaming);
//! - [`catalogue`]: the ciphers layer 1 measures and one benchmark operation for each;
//! - [`pk`]: the public-key operations layer 1 measures (ML-KEM, ML-DSA, X25519,
//!   P-256, RSA), one benchmark operation each;
//! - [`info`]: the library's version and the capability vector it uses.
//!
//! It does not measure time, spawn processes or print: callers do.

pub mod aead;
pub mod catalogue;
pub mod cbc;
pub mod ctr;
pub mod digest;
mod ffi;
pub mod hkdf;
pub mod hmac;
pub mod info;
pub mod kdf;
pub mod pk;
pub mod secret;
pub mod stitched;
pub mod tls_record;

pub use ffi::{
    client_hello_extension, constant_time_eq, group_name, negotiated_group, random_bytes,
    sign_certificate, ssl_has_pending,
};

/// What can go wrong in a crypto call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CryptoError {
    /// The library does not offer this algorithm here (not compiled in, or needs a CPU
    /// feature that is absent or masked, as the stitched cipher needs AES-NI).
    #[error("{cipher} is not available in this OpenSSL: {reason}")]
    Unavailable {
        /// Algorithm name as asked of OpenSSL.
        cipher: String,
        /// OpenSSL's error text.
        reason: String,
    },
    /// A key of the wrong length.
    #[error("{cipher} needs a {expected}-byte key, got {got}")]
    BadKeyLength {
        /// Algorithm.
        cipher: String,
        /// Required length.
        expected: usize,
        /// Given length.
        got: usize,
    },
    /// A nonce/IV length the algorithm does not accept.
    #[error("{cipher}: a {got}-byte nonce is not accepted")]
    BadNonceLength {
        /// Algorithm.
        cipher: String,
        /// Given length.
        got: usize,
    },
    /// A tag length the algorithm does not accept.
    #[error("tag length {0} is not accepted")]
    BadTagLength(usize),
    /// Input to a block mode without padding is not a whole number of blocks.
    #[error("input of {len} bytes is not a multiple of the {block}-byte block")]
    NotBlockAligned {
        /// Input length.
        len: usize,
        /// Block size.
        block: usize,
    },
    /// Decryption found the tag, MAC or padding wrong.
    #[error("authentication failed")]
    AuthenticationFailed,
    /// An input longer than OpenSSL's int-sized lengths allow.
    #[error("input of {0} bytes is too long for one call")]
    TooLong(usize),
    /// Any other library failure, with OpenSSL's error text.
    #[error("OpenSSL error: {0}")]
    Library(String),
}
