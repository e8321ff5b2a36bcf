//! Key material that is wiped when dropped.

use zeroize::Zeroize;

/// Bytes of key material, zeroed on drop and never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretBytes(Vec<u8>);

impl SecretBytes {
    /// Takes ownership of key bytes.
    pub fn new(bytes: Vec<u8>) -> SecretBytes {
        SecretBytes(bytes)
    }

    /// `n` random bytes from OpenSSL's CSPRNG.
    pub fn random(n: usize) -> Result<SecretBytes, crate::CryptoError> {
        let mut v = vec![0u8; n];
        crate::random_bytes(&mut v)?;
        Ok(SecretBytes(v))
    }

    /// The bytes.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Drop for SecretBytes {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl std::fmt::Debug for SecretBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretBytes({} bytes, redacted)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_key() {
        let s = SecretBytes::new(vec![0xAB; 4]);
        let shown = format!("{s:?}");
        assert!(!shown.contains("171") && !shown.to_lowercase().contains("ab,"));
        assert!(shown.contains("redacted"));
    }
}
