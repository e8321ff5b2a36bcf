//! Manual keying: both directions' SPIs and keys from one shared secret (HKDF-SHA-256,
//! RFC 5869), so two gateways configured with the same secret and label agree.
//!
//! There is no IKE here: the secret is per run and given to both gateways. The
//! initiator sends on the initiator-to-responder SA and receives on the other; the
//! responder the reverse. This module derives parameters; it keys nothing itself.

use cipherbench_crypto::hkdf::hkdf_sha256;
use cipherbench_crypto::secret::SecretBytes;
use zeroize::Zeroize;

use crate::sa::{SaError, SaParams};
use crate::transform::Transform;
use crate::MIN_SPI;

/// Which end of the tunnel a gateway is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Sends on the initiator-to-responder SA.
    Initiator,
    /// Sends on the responder-to-initiator SA.
    Responder,
}

/// One gateway's two SAs.
#[derive(Debug, Clone)]
pub struct SaPair {
    /// The SA this gateway seals with.
    pub outbound: SaParams,
    /// The SA this gateway opens with (the peer's outbound).
    pub inbound: SaParams,
}

/// The shortest secret accepted: 128 bits.
pub const MIN_SECRET_LEN: usize = 16;

/// HKDF salt: separates these keys from anything else derived from the same secret.
const HKDF_SALT: &[u8] = b"cipherbench-esp manual keying v1";

/// The HKDF info for one direction: length-prefixed label, transform, direction, so no
/// two (label, transform, direction) triples share keys.
fn info(label: &str, transform: Transform, direction: &str) -> Vec<u8> {
    let mut info = Vec::with_capacity(label.len() + 48);
    info.extend_from_slice(&(label.len() as u64).to_be_bytes());
    info.extend_from_slice(label.as_bytes());
    info.push(0);
    info.extend_from_slice(transform.name().as_bytes());
    info.push(0);
    info.extend_from_slice(direction.as_bytes());
    info
}

fn derive_one(
    secret: &[u8],
    label: &str,
    transform: Transform,
    direction: &str,
) -> Result<SaParams, SaError> {
    let mut okm = vec![0u8; 4 + transform.keymat_len()];
    hkdf_sha256(
        HKDF_SALT,
        secret,
        &info(label, transform, direction),
        &mut okm,
    )?;
    let raw = u32::from_be_bytes([okm[0], okm[1], okm[2], okm[3]]);
    // RFC 4303 §2.1: map onto 256..=2^32-1, the SPIs not reserved.
    let spi = MIN_SPI + raw % (u32::MAX - MIN_SPI + 1);
    let keymat = SecretBytes::new(okm[4..].to_vec());
    okm.zeroize();
    Ok(SaParams::new(spi, transform, keymat))
}

/// Derives the SA pair of the gateway playing `role`. Both gateways call this with the
/// same secret, label and transform and opposite roles; each one's outbound is the
/// other's inbound. The default replay window and no lifetime limit; change them on
/// the returned parameters.
pub fn derive_sa_pair(
    secret: &[u8],
    label: &str,
    transform: Transform,
    role: Role,
) -> Result<SaPair, SaError> {
    if secret.len() < MIN_SECRET_LEN {
        return Err(SaError::WeakSecret {
            got: secret.len(),
            min: MIN_SECRET_LEN,
        });
    }
    let initiator_to_responder = derive_one(secret, label, transform, "initiator->responder")?;
    let mut responder_to_initiator = derive_one(secret, label, transform, "responder->initiator")?;
    if responder_to_initiator.spi == initiator_to_responder.spi {
        // One chance in 2^32; flipping bit 0 keeps it at 256 or above and distinct.
        responder_to_initiator.spi ^= 1;
    }
    Ok(match role {
        Role::Initiator => SaPair {
            outbound: initiator_to_responder,
            inbound: responder_to_initiator,
        },
        Role::Responder => SaPair {
            outbound: responder_to_initiator,
            inbound: initiator_to_responder,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_roles_agree_and_directions_differ() {
        let secret = [7u8; 32];
        for t in Transform::ALL {
            let a = derive_sa_pair(&secret, "run-1", t, Role::Initiator).unwrap();
            let b = derive_sa_pair(&secret, "run-1", t, Role::Responder).unwrap();
            assert_eq!(a.outbound.spi, b.inbound.spi);
            assert_eq!(a.inbound.spi, b.outbound.spi);
            assert_eq!(a.outbound.keymat, b.inbound.keymat);
            assert_eq!(a.inbound.keymat, b.outbound.keymat);
            assert_ne!(a.outbound.spi, a.inbound.spi);
            assert!(a.outbound.spi >= MIN_SPI && a.inbound.spi >= MIN_SPI);
            assert_eq!(a.outbound.keymat.len(), t.keymat_len());
            if t.keymat_len() > 0 {
                assert_ne!(a.outbound.keymat, a.inbound.keymat);
            }
        }
    }

    #[test]
    fn label_transform_and_secret_all_change_the_keys() {
        let base =
            derive_sa_pair(&[7u8; 32], "run-1", Transform::Aes256Gcm, Role::Initiator).unwrap();
        let other_label =
            derive_sa_pair(&[7u8; 32], "run-2", Transform::Aes256Gcm, Role::Initiator).unwrap();
        let other_secret =
            derive_sa_pair(&[8u8; 32], "run-1", Transform::Aes256Gcm, Role::Initiator).unwrap();
        let other_transform = derive_sa_pair(
            &[7u8; 32],
            "run-1",
            Transform::ChaCha20Poly1305,
            Role::Initiator,
        )
        .unwrap();
        for other in [&other_label, &other_secret, &other_transform] {
            assert_ne!(base.outbound.keymat, other.outbound.keymat);
            assert_ne!(base.outbound.spi, other.outbound.spi);
        }
    }

    #[test]
    fn refuses_short_secrets() {
        assert!(matches!(
            derive_sa_pair(&[1u8; 15], "x", Transform::Aes128Gcm, Role::Initiator),
            Err(SaError::WeakSecret { got: 15, min: 16 })
        ));
    }
}
