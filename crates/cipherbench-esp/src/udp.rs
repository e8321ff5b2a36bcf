//! RFC 3948 ESP-in-UDP: the port, and what a UDP payload on that port is.
//!
//! On port 4500 the UDP payload is the ESP packet itself (RFC 3948 §2.1: no extra
//! header), an IKE message behind the 4-byte non-ESP marker (§2.2), or a one-byte NAT
//! keepalive (§2.3). The last two are recognised here and never parsed as ESP; a
//! payload too short for either an SPI or the marker is none of the three. The UDP
//! header itself is the socket's business.

/// RFC 3948 §2.1 and RFC 7296 §2.23: ESP-in-UDP and IKE with NAT traversal use
/// UDP port 4500 on both sides.
pub const NAT_T_PORT: u16 = 4500;

/// RFC 3948 §2.2: four zero bytes where an ESP packet would have its SPI mark the
/// rest of the payload as IKE (SPI 0 is never an ESP SPI).
pub const NON_ESP_MARKER: [u8; 4] = [0; 4];

/// RFC 4303 §2.1: the SPI, the first four bytes of an ESP packet, and as long as the
/// non-ESP marker that takes its place: the least a payload needs to be classified.
pub const SPI_LEN: usize = 4;

/// RFC 3948 §2.3: the NAT keepalive is a single 0xFF byte.
pub const NAT_KEEPALIVE: [u8; 1] = [0xFF];

/// What a UDP payload received on the ESP-in-UDP port is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UdpPayload<'a> {
    /// An ESP packet (possibly a truncated one: `open` decides).
    Esp(&'a [u8]),
    /// An IKE message: the bytes after the non-ESP marker.
    NonEsp(&'a [u8]),
    /// A NAT keepalive: to be ignored (RFC 3948 §2.3).
    NatKeepalive,
    /// Shorter than an SPI and not a keepalive (an empty payload too): neither ESP
    /// nor IKE can be told from it.
    Unclassifiable,
}

/// Classifies a UDP payload (RFC 3948 §2.1 to §2.3).
pub fn classify(payload: &[u8]) -> UdpPayload<'_> {
    if payload == NAT_KEEPALIVE {
        UdpPayload::NatKeepalive
    } else if payload.len() < SPI_LEN {
        UdpPayload::Unclassifiable
    } else if let Some(ike) = payload.strip_prefix(&NON_ESP_MARKER) {
        UdpPayload::NonEsp(ike)
    } else {
        UdpPayload::Esp(payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_keepalive_marker_and_esp() {
        assert_eq!(classify(&[0xFF]), UdpPayload::NatKeepalive);
        assert_eq!(classify(&[0, 0, 0, 0]), UdpPayload::NonEsp(&[]));
        assert_eq!(classify(&[0, 0, 0, 0, 9, 9]), UdpPayload::NonEsp(&[9, 9]));
        // Too short for an SPI or the marker: none of the three.
        assert_eq!(classify(&[]), UdpPayload::Unclassifiable);
        assert_eq!(classify(&[0xFF, 0xFF]), UdpPayload::Unclassifiable);
        assert_eq!(classify(&[0, 0, 0]), UdpPayload::Unclassifiable);
        // Anything else is ESP, even when too short to be a valid one.
        assert_eq!(
            classify(&[0xFF, 0xFF, 0xFF, 0xFF]),
            UdpPayload::Esp(&[0xFF; 4])
        );
        assert_eq!(
            classify(&[0, 0, 1, 0, 0]),
            UdpPayload::Esp(&[0, 0, 1, 0, 0])
        );
    }
}
