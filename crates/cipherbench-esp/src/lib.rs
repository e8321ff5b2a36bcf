//! ESP (RFC 4303) as pure logic: security associations, `seal`, `open`, the
//! anti-replay window, and the RFC 3948 ESP-in-UDP helpers.
//!
//! This crate takes bytes and returns bytes or a typed reason. It never touches a
//! socket, a file or a clock and never prints: the tunnel gateway (TUN device, UDP
//! socket, stats file) is a separate layer that drives it. Callers own every buffer,
//! and the per-packet paths do not allocate.
//!
//! - [`Transform`]: the five transforms (`aes256-sha256`, `aes128-gcm`, `aes256-gcm`,
//!   `chacha20-poly1305` and the `null` baseline, refused unless asked for by name);
//! - [`SaParams`], [`OutboundSa`], [`InboundSa`]: manually keyed SAs, one per
//!   direction, and [`derive_sa_pair`] to derive both directions from a shared secret;
//! - [`InboundSet`]: the inbound SAs of one gateway keyed by SPI, with the
//!   outcome-enum entry point [`InboundSet::receive_udp`];
//! - [`DropReason`] and [`Counters`]: every dropped packet is a reason, counted;
//!   [`Accounting`]: every received payload has exactly one outcome;
//! - [`ReplayWindow`]: the RFC 4303 §3.4.3 sliding window (RFC 6479 bitmap);
//! - [`udp`]: RFC 3948 port, non-ESP marker and NAT keepalive;
//! - [`keylog`]: an SA as a record of Wireshark's ESP SA table, for independent
//!   decryption of a capture;
//! - [`pipeline`]: the ordered parallel pipeline that lets one SA's workers seal or
//!   open on several cores while its packets keep their order
//!   ([`OutboundSa::reserve`] numbers them in arrival order).
//!
//! The crypto goes through `cipherbench-crypto` (OpenSSL EVP), so the acceleration
//! variants (`OPENSSL_ia32cap` in the process environment) apply here as in every
//! other layer.
//!
//! Sequence numbers: the counter is 64 bits internally, but extended sequence numbers
//! (ESN, RFC 4303 §2.2.1) are not implemented: only the low 32 bits travel, and an SA
//! refuses to send once 2^32 - 1 has been used (RFC 4303 §3.3.3).

#![forbid(unsafe_code)]

mod counters;
mod derive;
pub mod engine;
mod inbound;
mod inner;
pub mod keylog;
pub mod pipeline;
mod replay;
mod sa;
mod transform;
pub mod udp;

pub use counters::{Accounting, Counters, DropCounts, DropReason, SetCounters};
pub use derive::{derive_sa_pair, Role, SaPair};
pub use inbound::{Inbound, InboundSet};
pub use replay::{ReplayCheck, ReplayWindow};
pub use sa::{
    InboundSa, Lifetime, OutboundSa, Reserved, SaError, SaParams, SealError, SequenceCounter,
    Unsettled,
};
pub use transform::{Transform, TransformError};

/// RFC 4303 §2: SPI (4) + sequence number (4), in front of every ESP packet.
pub const ESP_HEADER_LEN: usize = 8;

/// RFC 4303 §2.4 and §2.6: pad length (1) + next header (1), at the end of the
/// encrypted payload.
pub const TRAILER_LEN: usize = 2;

/// RFC 4303 §3.3.3: the highest sequence number an SA without ESN may send. The
/// counter never wraps: after this the SA must be replaced.
pub const MAX_SEQUENCE: u64 = u32::MAX as u64;

/// RFC 4303 §2.1: SPI values 1 to 255 are reserved by IANA and 0 is for local use,
/// so no SA carries one of them on the wire.
pub const MIN_SPI: u32 = 256;

/// RFC 4303 §2.6: next header 4 is an IPv4 packet (tunnel mode).
pub const NEXT_HEADER_IPV4: u8 = 4;

/// RFC 4303 §2.6: next header 41 is an IPv6 packet (tunnel mode).
pub const NEXT_HEADER_IPV6: u8 = 41;

/// RFC 4303 §3.4.3: the default anti-replay window, in packets (the RFC's own
/// default is 64; 128 tolerates more reordering at little cost).
pub const DEFAULT_REPLAY_WINDOW: u32 = 128;

/// RFC 4303 §3.4.3: "a minimum window size of 32 packets MUST be supported".
pub const MIN_REPLAY_WINDOW: u32 = 32;

/// The largest window this implementation accepts (an 8 KiB bitmap per SA).
pub const MAX_REPLAY_WINDOW: u32 = 1 << 16;

#[cfg(test)]
mod tests {
    /// The gateway moves SAs into its worker threads.
    #[test]
    fn sas_and_sets_are_send() {
        fn assert_send<T: Send>() {}
        assert_send::<super::OutboundSa>();
        assert_send::<super::InboundSa>();
        assert_send::<super::InboundSet>();
        fn assert_sync<T: Sync>() {}
        assert_sync::<super::SequenceCounter>();
    }
}
