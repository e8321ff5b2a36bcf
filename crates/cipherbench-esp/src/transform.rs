//! The ESP transforms: their names, packet layout and key material.
//!
//! This module owns the numbers (IV, ICV, alignment, key and salt lengths) and the
//! names users type. It does not key anything: [`crate::engine`] does that.

use serde::{Deserialize, Serialize};

/// An ESP transform: the encryption and integrity algorithms of an SA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Transform {
    /// No encryption and no integrity. Not a valid RFC 4303 configuration (§3.2:
    /// at least one of confidentiality and integrity), only a baseline for measuring
    /// the cost of everything but the crypto. Refused by [`Transform::from_name`]
    /// unless null is explicitly allowed.
    #[serde(rename = "null")]
    Null,
    /// AES-256-CBC with a random IV per packet (RFC 3602) and HMAC-SHA-256-128
    /// (RFC 4868): the transform of the IIJ IPsec post (seed 004).
    #[serde(rename = "aes256-sha256")]
    Aes256Sha256,
    /// AES-128-GCM with a 16-byte ICV (RFC 4106).
    #[serde(rename = "aes128-gcm")]
    Aes128Gcm,
    /// AES-256-GCM with a 16-byte ICV (RFC 4106).
    #[serde(rename = "aes256-gcm")]
    Aes256Gcm,
    /// ChaCha20-Poly1305 (RFC 7634).
    #[serde(rename = "chacha20-poly1305")]
    ChaCha20Poly1305,
}

/// A transform name that was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransformError {
    /// Not a transform this crate knows.
    #[error("unknown ESP transform {name:?}; known: {known}")]
    Unknown {
        /// What was asked for.
        name: String,
        /// The accepted names, comma-separated.
        known: String,
    },
    /// `null` was asked for without allowing it.
    #[error(
        "the null ESP transform has no encryption and no integrity (not valid per RFC 4303 §3.2); \
         it is only a measurement baseline and must be allowed explicitly"
    )]
    NullRefused,
}

/// RFC 4106 §3.1 and RFC 7634 §2: the explicit IV of the AEAD transforms is 8 bytes.
pub const AEAD_IV_LEN: usize = 8;
/// RFC 4106 §4 and RFC 7634 §2: the 4-byte salt completing the 12-byte nonce.
pub const AEAD_SALT_LEN: usize = 4;
/// RFC 4106 §6 (the 16-byte ICV variant) and RFC 7634 §2: a 16-byte ICV.
pub const AEAD_ICV_LEN: usize = 16;
/// RFC 3602 §3: the CBC IV is one AES block, 16 bytes.
pub const CBC_IV_LEN: usize = 16;
/// RFC 4868 §2.3: HMAC-SHA-256-128 keeps the leftmost 128 bits of the MAC.
pub const HMAC_SHA256_128_ICV_LEN: usize = 16;
/// RFC 4868 §2.1.1: the HMAC-SHA-256-128 key is 256 bits.
pub const HMAC_SHA256_KEY_LEN: usize = 32;
/// RFC 4303 §2.4: the ciphertext ends on a 4-byte boundary whatever the cipher.
pub const MIN_ALIGNMENT: usize = 4;

impl Transform {
    /// The transforms that protect traffic, in the order reports list them.
    pub const SECURE: [Transform; 4] = [
        Transform::Aes256Sha256,
        Transform::Aes128Gcm,
        Transform::Aes256Gcm,
        Transform::ChaCha20Poly1305,
    ];

    /// Every transform, the null baseline first.
    pub const ALL: [Transform; 5] = [
        Transform::Null,
        Transform::Aes256Sha256,
        Transform::Aes128Gcm,
        Transform::Aes256Gcm,
        Transform::ChaCha20Poly1305,
    ];

    /// The name users type and results record.
    pub fn name(self) -> &'static str {
        match self {
            Transform::Null => "null",
            Transform::Aes256Sha256 => "aes256-sha256",
            Transform::Aes128Gcm => "aes128-gcm",
            Transform::Aes256Gcm => "aes256-gcm",
            Transform::ChaCha20Poly1305 => "chacha20-poly1305",
        }
    }

    /// Looks a name up (any case). `null` is refused unless `allow_null`: it is a
    /// baseline, never something to configure by accident.
    pub fn from_name(name: &str, allow_null: bool) -> Result<Transform, TransformError> {
        let lower = name.trim().to_ascii_lowercase();
        match Transform::ALL.into_iter().find(|t| t.name() == lower) {
            Some(Transform::Null) if !allow_null => Err(TransformError::NullRefused),
            Some(t) => Ok(t),
            None => Err(TransformError::Unknown {
                name: name.to_string(),
                known: Transform::SECURE.map(Transform::name).join(", "),
            }),
        }
    }

    /// True for the combined-mode (AEAD) transforms.
    pub fn is_aead(self) -> bool {
        matches!(
            self,
            Transform::Aes128Gcm | Transform::Aes256Gcm | Transform::ChaCha20Poly1305
        )
    }

    /// Length of the IV carried in every packet.
    pub fn iv_len(self) -> usize {
        match self {
            Transform::Null => 0,
            Transform::Aes256Sha256 => CBC_IV_LEN,
            _ => AEAD_IV_LEN,
        }
    }

    /// Length of the ICV at the end of every packet.
    pub fn icv_len(self) -> usize {
        match self {
            Transform::Null => 0,
            Transform::Aes256Sha256 => HMAC_SHA256_128_ICV_LEN,
            _ => AEAD_ICV_LEN,
        }
    }

    /// What payload + padding + trailer is rounded up to: the cipher's block for CBC
    /// (RFC 3602 §3), 4 bytes otherwise (RFC 4303 §2.4).
    pub fn alignment(self) -> usize {
        match self {
            Transform::Aes256Sha256 => 16,
            _ => MIN_ALIGNMENT,
        }
    }

    /// Encryption key length in bytes.
    pub fn encryption_key_len(self) -> usize {
        match self {
            Transform::Null => 0,
            Transform::Aes128Gcm => 16,
            Transform::Aes256Sha256 | Transform::Aes256Gcm | Transform::ChaCha20Poly1305 => 32,
        }
    }

    /// Salt length in bytes (the AEAD transforms' implicit nonce part).
    pub fn salt_len(self) -> usize {
        if self.is_aead() {
            AEAD_SALT_LEN
        } else {
            0
        }
    }

    /// Integrity key length in bytes (only the non-AEAD transform has one).
    pub fn integrity_key_len(self) -> usize {
        match self {
            Transform::Aes256Sha256 => HMAC_SHA256_KEY_LEN,
            _ => 0,
        }
    }

    /// The key material one SA needs, laid out as IKEv2's KEYMAT would give it:
    /// encryption key, then salt (RFC 4106 §8.1, RFC 7634 §4), then integrity key.
    pub fn keymat_len(self) -> usize {
        self.encryption_key_len() + self.salt_len() + self.integrity_key_len()
    }

    /// The encrypted part (payload, padding, trailer) for an inner packet of
    /// `inner_len` bytes: RFC 4303 §2.4 padding to the alignment.
    pub fn padded_len(self, inner_len: usize) -> usize {
        (inner_len + crate::TRAILER_LEN).div_ceil(self.alignment()) * self.alignment()
    }

    /// The ESP packet length `seal` produces for an inner packet of `inner_len` bytes.
    pub fn sealed_len(self, inner_len: usize) -> usize {
        crate::ESP_HEADER_LEN + self.iv_len() + self.padded_len(inner_len) + self.icv_len()
    }

    /// The most ESP adds to any inner packet: what a gateway subtracts from the
    /// underlay MTU to find the tunnel's.
    pub fn max_overhead(self) -> usize {
        crate::ESP_HEADER_LEN
            + self.iv_len()
            + self.icv_len()
            + crate::TRAILER_LEN
            + self.alignment()
            - 1
    }

    /// The shortest ESP packet this transform can produce (an empty payload).
    pub fn min_packet_len(self) -> usize {
        self.sealed_len(0)
    }
}

impl std::fmt::Display for Transform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_null_must_be_allowed() {
        for t in Transform::SECURE {
            assert_eq!(Transform::from_name(t.name(), false), Ok(t));
            assert_eq!(Transform::from_name(&t.name().to_uppercase(), false), Ok(t));
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(json, format!("\"{}\"", t.name()));
        }
        assert_eq!(
            Transform::from_name("null", false),
            Err(TransformError::NullRefused)
        );
        assert_eq!(Transform::from_name("null", true), Ok(Transform::Null));
        let unknown = Transform::from_name("aes-128-cbc", true).unwrap_err();
        assert!(unknown.to_string().contains("aes256-sha256"), "{unknown}");
    }

    #[test]
    fn lengths_follow_the_rfcs() {
        // RFC 4106: 8 + 8 + payload + 16; 20 bytes of keymat (16 key + 4 salt).
        assert_eq!(Transform::Aes128Gcm.keymat_len(), 20);
        assert_eq!(Transform::Aes256Gcm.keymat_len(), 36);
        assert_eq!(Transform::ChaCha20Poly1305.keymat_len(), 36);
        assert_eq!(Transform::Aes256Sha256.keymat_len(), 64);
        assert_eq!(Transform::Null.keymat_len(), 0);
        // 100 bytes + 2 trailer = 102 -> 104 (AEAD), 112 (CBC).
        assert_eq!(Transform::Aes128Gcm.sealed_len(100), 8 + 8 + 104 + 16);
        assert_eq!(Transform::Aes256Sha256.sealed_len(100), 8 + 16 + 112 + 16);
        assert_eq!(Transform::Null.sealed_len(100), 8 + 104);
        for t in Transform::ALL {
            for n in 0..100 {
                let overhead = t.sealed_len(n) - n;
                assert!(overhead <= t.max_overhead(), "{t} {n}");
                assert_eq!(t.padded_len(n) % t.alignment(), 0);
            }
        }
    }
}
