//! The inner IP packet of a tunnel-mode SA: which next header it gets, and whether its
//! own header agrees with its length.
//!
//! Only the fields that decide framing are read (version, IPv4 IHL and total length,
//! IPv6 payload length); checksums, options and addresses are the kernel's business
//! once the packet is written to the TUN device.

use crate::{NEXT_HEADER_IPV4, NEXT_HEADER_IPV6};

/// RFC 791 §3.1: the IPv4 header without options.
const IPV4_MIN_HEADER_LEN: usize = 20;
/// RFC 8200 §3: the fixed IPv6 header.
const IPV6_HEADER_LEN: usize = 40;

/// RFC 4303 §2.6: the next header for an inner packet, from its version nibble; None
/// for anything that is not a consistent IPv4 or IPv6 packet.
pub(crate) fn next_header(packet: &[u8]) -> Option<u8> {
    let next = match packet.first()? >> 4 {
        4 => NEXT_HEADER_IPV4,
        6 => NEXT_HEADER_IPV6,
        _ => return None,
    };
    is_consistent(next, packet).then_some(next)
}

/// Does `packet` look like what `next_header` says it is: right version, header fits,
/// and the header's length field equals the packet's length?
pub(crate) fn is_consistent(next_header: u8, packet: &[u8]) -> bool {
    match next_header {
        NEXT_HEADER_IPV4 => {
            if packet.len() < IPV4_MIN_HEADER_LEN || packet[0] >> 4 != 4 {
                return false;
            }
            let header_len = usize::from(packet[0] & 0x0f) * 4;
            let total_len = usize::from(u16::from_be_bytes([packet[2], packet[3]]));
            header_len >= IPV4_MIN_HEADER_LEN
                && header_len <= packet.len()
                && total_len == packet.len()
        }
        NEXT_HEADER_IPV6 => {
            if packet.len() < IPV6_HEADER_LEN || packet[0] >> 4 != 6 {
                return false;
            }
            // Jumbograms (payload length 0, RFC 2675) never fit a tunnel MTU: refused.
            let payload_len = usize::from(u16::from_be_bytes([packet[4], packet[5]]));
            IPV6_HEADER_LEN + payload_len == packet.len()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4(len: usize) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p
    }

    fn ipv6(len: usize) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
        p
    }

    #[test]
    fn recognises_consistent_packets() {
        assert_eq!(next_header(&ipv4(20)), Some(4));
        assert_eq!(next_header(&ipv4(1500)), Some(4));
        assert_eq!(next_header(&ipv6(40)), Some(41));
        assert_eq!(next_header(&ipv6(1500)), Some(41));
    }

    #[test]
    fn rejects_inconsistent_headers() {
        assert_eq!(next_header(&[]), None);
        assert_eq!(next_header(&[0x45]), None);
        assert_eq!(next_header(&ipv4(20)[..19]), None);
        let mut long_ihl = ipv4(40);
        long_ihl[0] = 0x4f; // 60-byte header in a 40-byte packet
        assert_eq!(next_header(&long_ihl), None);
        let mut short_ihl = ipv4(40);
        short_ihl[0] = 0x44;
        assert_eq!(next_header(&short_ihl), None);
        let mut wrong_total = ipv4(40);
        wrong_total[3] = 41;
        assert_eq!(next_header(&wrong_total), None);
        let mut wrong_payload = ipv6(60);
        wrong_payload[5] = 19;
        assert_eq!(next_header(&wrong_payload), None);
        let mut version5 = ipv4(20);
        version5[0] = 0x55;
        assert_eq!(next_header(&version5), None);
        assert!(!is_consistent(NEXT_HEADER_IPV6, &ipv4(60)));
        assert!(!is_consistent(NEXT_HEADER_IPV4, &ipv6(60)));
    }
}
