//! Keys (docs/FORMAT.md §3): the master key from a key file or a passphrase
//! (scrypt with the header's salt), the header MAC key and the payload key derived
//! from it with HKDF-SHA-256, and the header MAC itself.
//!
//! Everything secret lives in [`SecretBytes`], wiped on drop. This module takes key
//! bytes and passphrases as arguments: reading them from files or a terminal is the
//! app's job.

use crate::chunk::{Opener, Sealer};
use crate::header::{scrypt_check, Header, HeaderError, KeySource, BODY_LEN, HEADER_LEN, MAC_LEN};
use cipherbench_crypto::hkdf::hkdf_sha256;
use cipherbench_crypto::hmac::{Hmac, HmacDigest};
use cipherbench_crypto::secret::SecretBytes;
use cipherbench_crypto::CryptoError;

/// Length of a key file's key and of every derived key.
pub const KEY_LEN: usize = 32;
/// HKDF info for the header MAC key.
pub const HEADER_KEY_INFO: &[u8] = b"cipherbench-stream v1 header";
/// HKDF info for the payload (chunk AEAD) key.
pub const PAYLOAD_KEY_INFO: &[u8] = b"cipherbench-stream v1 payload";

/// What the user holds.
#[derive(Clone, Copy)]
pub enum Credential<'a> {
    /// The 32 bytes of a key file.
    Key(&'a [u8]),
    /// A passphrase (any bytes; the app refuses empty ones).
    Passphrase(&'a [u8]),
}

impl Credential<'_> {
    fn describe(&self) -> &'static str {
        match self {
            Credential::Key(_) => "a key file",
            Credential::Passphrase(_) => "a passphrase",
        }
    }
}

impl std::fmt::Debug for Credential<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credential({}, redacted)", self.describe())
    }
}

/// A file's header, its encoding with MAC, and the payload key: everything needed to
/// make [`Sealer`]s and [`Opener`]s (one per thread).
pub struct StreamKeys {
    header: Header,
    header_bytes: [u8; HEADER_LEN],
    payload_key: SecretBytes,
}

impl std::fmt::Debug for StreamKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamKeys")
            .field("header", &self.header)
            .field("payload_key", &self.payload_key)
            .finish()
    }
}

impl StreamKeys {
    /// Keys for sealing a new file with `header` (normally from
    /// [`Header::random`](crate::Header::random)); computes the header MAC.
    pub fn create(header: Header, credential: Credential<'_>) -> Result<StreamKeys, HeaderError> {
        let body = header.encode_body();
        // Parse our own encoding back: a header we write is one we can read.
        let mut probe = [0u8; HEADER_LEN];
        probe[..BODY_LEN].copy_from_slice(&body);
        let parsed = Header::parse(&probe)?;
        debug_assert_eq!(parsed, header);
        let master = master_key(&header, credential)?;
        let (header_key, payload_key) = derive(&master, &header)?;
        let mut header_bytes = [0u8; HEADER_LEN];
        header_bytes[..BODY_LEN].copy_from_slice(&body);
        let mut mac = [0u8; MAC_LEN];
        Hmac::new(HmacDigest::Sha256, header_key.expose())?.compute(&[&body], &mut mac)?;
        header_bytes[BODY_LEN..].copy_from_slice(&mac);
        Ok(StreamKeys {
            header,
            header_bytes,
            payload_key,
        })
    }

    /// Parses the header at the start of `bytes`, derives the keys and checks the
    /// header MAC. A wrong key or passphrase is refused here, before any chunk.
    pub fn open(bytes: &[u8], credential: Credential<'_>) -> Result<StreamKeys, HeaderError> {
        let header = Header::parse(bytes)?;
        let master = master_key(&header, credential)?;
        let (header_key, payload_key) = derive(&master, &header)?;
        let mut mac = [0u8; MAC_LEN];
        Hmac::new(HmacDigest::Sha256, header_key.expose())?
            .compute(&[&bytes[..BODY_LEN]], &mut mac)?;
        if !cipherbench_crypto::constant_time_eq(&mac, &bytes[BODY_LEN..HEADER_LEN]) {
            return Err(HeaderError::BadMac);
        }
        let mut header_bytes = [0u8; HEADER_LEN];
        header_bytes.copy_from_slice(&bytes[..HEADER_LEN]);
        Ok(StreamKeys {
            header,
            header_bytes,
            payload_key,
        })
    }

    /// The header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The header as written at the start of the file (MAC included).
    pub fn header_bytes(&self) -> &[u8; HEADER_LEN] {
        &self.header_bytes
    }

    /// A chunk sealer (each thread needs its own: it owns a keyed cipher context).
    pub fn sealer(&self) -> Result<Sealer, CryptoError> {
        Sealer::new(&self.header, &self.header_bytes, self.payload_key.expose())
    }

    /// A chunk opener (one per thread).
    pub fn opener(&self) -> Result<Opener, CryptoError> {
        Opener::new(&self.header, &self.header_bytes, self.payload_key.expose())
    }
}

fn master_key(header: &Header, credential: Credential<'_>) -> Result<SecretBytes, HeaderError> {
    match (header.key_source, credential) {
        (KeySource::KeyFile, Credential::Key(key)) => {
            if key.len() != KEY_LEN {
                return Err(HeaderError::BadKeyLength(key.len()));
            }
            Ok(SecretBytes::new(key.to_vec()))
        }
        (KeySource::Scrypt(params), Credential::Passphrase(passphrase)) => {
            // Parsed headers were checked already; this covers one built in code.
            if let Err(reason) = scrypt_check(params) {
                return Err(HeaderError::BadKdfParameters {
                    log_n: params.log_n,
                    r: params.r.min(255) as u8,
                    p: params.p.min(255) as u8,
                    reason,
                });
            }
            // OpenSSL writes the output only once the derivation succeeded, so nothing
            // secret is in `buf` on the error path.
            let mut buf = vec![0u8; KEY_LEN];
            cipherbench_crypto::kdf::scrypt(passphrase, &header.salt, params, &mut buf)?;
            Ok(SecretBytes::new(buf))
        }
        (source, given) => Err(HeaderError::WrongKeyKind {
            file: source.describe(),
            given: given.describe(),
        }),
    }
}

/// HKDF-SHA-256(master, salt, info) for the header key and the payload key.
fn derive(
    master: &SecretBytes,
    header: &Header,
) -> Result<(SecretBytes, SecretBytes), CryptoError> {
    let mut header_key = vec![0u8; KEY_LEN];
    hkdf_sha256(
        &header.salt,
        master.expose(),
        HEADER_KEY_INFO,
        &mut header_key,
    )?;
    let header_key = SecretBytes::new(header_key);
    let mut payload_key = vec![0u8; KEY_LEN];
    hkdf_sha256(
        &header.salt,
        master.expose(),
        PAYLOAD_KEY_INFO,
        &mut payload_key,
    )?;
    Ok((header_key, SecretBytes::new(payload_key)))
}
