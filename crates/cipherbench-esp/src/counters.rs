//! Why inbound packets are dropped, the per-SA and per-gateway counters, and the
//! accounting of every datagram received.
//!
//! A dropped packet is a [`DropReason`], counted in a fixed array indexed by reason
//! ([`DropCounts`]), never an error string and never a panic. Every UDP payload
//! received on the ESP-in-UDP port has exactly one outcome, and [`Accounting`] holds
//! the identity `received = opened + drops + NAT keepalives + non-ESP`. The counters
//! serialise with serde (drops as a map from reason name to count) so the gateway can
//! write them into its stats file; this module never writes anything itself.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;

/// Why an inbound packet was dropped, in the order they are checked: classifying the
/// UDP payload (RFC 3948 §2), then `open`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, thiserror::Error)]
pub enum DropReason {
    /// A UDP payload shorter than an SPI (4 bytes) that is not a NAT keepalive (one
    /// 0xFF byte, RFC 3948 §2.3): neither an ESP header (§2.1) nor the non-ESP marker
    /// (§2.2) fits in it, so it is no traffic of port 4500. An empty datagram counts
    /// here.
    #[error("UDP payload too short to be ESP, IKE or a NAT keepalive")]
    Unclassifiable,
    /// Shorter than the shortest packet the SA can produce, or its encrypted part is
    /// not a whole number of the transform's alignment (RFC 4303 §2.4; for CBC, whole
    /// cipher blocks, RFC 3602 §3): bytes are missing.
    #[error("truncated ESP packet")]
    Truncated,
    /// No inbound SA has this SPI (RFC 4303 §3.4.2).
    #[error("no inbound SA for this SPI")]
    UnknownSpi,
    /// The decrypted payload would not fit the caller's output buffer.
    #[error("ESP payload larger than the output buffer")]
    TooLarge,
    /// The SA's hard lifetime in packets or bytes is used up (RFC 4301 §4.4.2.1).
    #[error("inbound SA lifetime expired")]
    SaExpired,
    /// The sequence number is left of the anti-replay window (RFC 4303 §3.4.3), or
    /// is 0, which no sender uses (§3.3.3).
    #[error("sequence number left of the replay window")]
    TooOld,
    /// The sequence number was already received inside the window (RFC 4303 §3.4.3).
    #[error("replayed sequence number")]
    Replayed,
    /// The ICV did not verify (RFC 4303 §3.4.4): forged, corrupted or wrong key.
    #[error("ICV verification failed")]
    AuthenticationFailed,
    /// The pad length points past the payload, or the padding bytes are not the
    /// monotonic 1, 2, 3... of RFC 4303 §2.4.
    #[error("bad ESP padding")]
    BadPadding,
    /// Next header is neither 4 (IPv4) nor 41 (IPv6), the only payloads of a tunnel
    /// mode SA (RFC 4303 §2.6). TFC dummy packets (59) are counted here: this
    /// implementation never sends them.
    #[error("next header is not IPv4 or IPv6")]
    BadNextHeader,
    /// The inner packet's version or header lengths do not match the next header
    /// and the payload length.
    #[error("inner IP packet is malformed")]
    MalformedInner,
}

impl DropReason {
    /// The number of reasons.
    pub const COUNT: usize = 11;

    /// Every reason, in index order.
    pub const ALL: [DropReason; DropReason::COUNT] = [
        DropReason::Unclassifiable,
        DropReason::Truncated,
        DropReason::UnknownSpi,
        DropReason::TooLarge,
        DropReason::SaExpired,
        DropReason::TooOld,
        DropReason::Replayed,
        DropReason::AuthenticationFailed,
        DropReason::BadPadding,
        DropReason::BadNextHeader,
        DropReason::MalformedInner,
    ];

    /// Index into [`DropCounts`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The snake_case name stats files use.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Unclassifiable => "unclassifiable",
            DropReason::Truncated => "truncated",
            DropReason::UnknownSpi => "unknown_spi",
            DropReason::TooLarge => "too_large",
            DropReason::SaExpired => "sa_expired",
            DropReason::TooOld => "too_old",
            DropReason::Replayed => "replayed",
            DropReason::AuthenticationFailed => "authentication_failed",
            DropReason::BadPadding => "bad_padding",
            DropReason::BadNextHeader => "bad_next_header",
            DropReason::MalformedInner => "malformed_inner",
        }
    }

    /// Looks a stats-file name up.
    pub fn from_name(name: &str) -> Option<DropReason> {
        DropReason::ALL.into_iter().find(|r| r.name() == name)
    }
}

/// Drops by reason: a fixed array indexed by [`DropReason::index`]. Serialised as a
/// map `{"truncated": 0, "unknown_spi": 3, ...}` with every reason present.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DropCounts(pub [u64; DropReason::COUNT]);

impl DropCounts {
    /// Counts one drop.
    pub fn increment(&mut self, reason: DropReason) {
        let slot = &mut self.0[reason.index()];
        *slot = slot.saturating_add(1);
    }

    /// The count for one reason.
    pub fn get(&self, reason: DropReason) -> u64 {
        self.0[reason.index()]
    }

    /// All drops.
    pub fn total(&self) -> u64 {
        self.0.iter().fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// Adds another set of counts (for totals over several SAs).
    pub fn add(&mut self, other: &DropCounts) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a = a.saturating_add(b);
        }
    }

    /// (reason, count) pairs in index order.
    pub fn iter(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL.into_iter().map(|r| (r, self.get(r)))
    }
}

impl Serialize for DropCounts {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(DropReason::COUNT))?;
        for (reason, count) in self.iter() {
            map.serialize_entry(reason.name(), &count)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for DropCounts {
    /// Missing reasons read as 0 (a file from an older version); unknown names are an
    /// error rather than silently lost.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = BTreeMap::<String, u64>::deserialize(deserializer)?;
        let mut counts = DropCounts::default();
        for (name, count) in map {
            let reason = DropReason::from_name(&name)
                .ok_or_else(|| D::Error::custom(format!("unknown drop reason {name:?}")))?;
            counts.0[reason.index()] = count;
        }
        Ok(counts)
    }
}

/// One SA's counters. An outbound SA counts `sealed_*` and `seal_refused`; an inbound
/// SA counts `opened_*` and `drops`. Bytes are inner (plaintext IP) bytes, the unit of
/// RFC 4301 byte lifetimes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Packets sealed.
    pub sealed_packets: u64,
    /// Inner bytes sealed.
    pub sealed_bytes: u64,
    /// Packets `seal` refused (sequence exhausted, lifetime expired, malformed inner,
    /// buffer too small, crypto failure).
    pub seal_refused: u64,
    /// Packets opened and accepted.
    pub opened_packets: u64,
    /// Inner bytes of the accepted packets.
    pub opened_bytes: u64,
    /// Inbound drops by reason.
    pub drops: DropCounts,
}

impl Counters {
    /// Adds another worker's counters of the same SA (saturating).
    pub fn add(&mut self, other: &Counters) {
        self.sealed_packets = self.sealed_packets.saturating_add(other.sealed_packets);
        self.sealed_bytes = self.sealed_bytes.saturating_add(other.sealed_bytes);
        self.seal_refused = self.seal_refused.saturating_add(other.seal_refused);
        self.opened_packets = self.opened_packets.saturating_add(other.opened_packets);
        self.opened_bytes = self.opened_bytes.saturating_add(other.opened_bytes);
        self.drops.add(&other.drops);
    }
}

/// What an [`crate::InboundSet`] counts itself: every UDP payload handed to
/// [`crate::InboundSet::receive_udp`], and those that never reached an SA.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetCounters {
    /// UDP payloads received on the ESP-in-UDP port, whatever they were.
    #[serde(default)]
    pub received: u64,
    /// RFC 3948 §2.3 NAT keepalives (one 0xFF byte) received.
    pub nat_keepalives: u64,
    /// RFC 3948 §2.2 non-ESP-marker payloads (IKE) received.
    pub non_esp: u64,
    /// Drops before an SA was found: unclassifiable, too short to hold an ESP
    /// header, or an unknown SPI.
    pub drops: DropCounts,
}

/// Every UDP payload one gateway received on the ESP-in-UDP port, by outcome. Each
/// payload has exactly one (RFC 3948 §2): opened by an SA, dropped for one
/// [`DropReason`], a NAT keepalive, or an IKE message behind the non-ESP marker. So
/// `received = opened_packets + drops.total() + nat_keepalives + non_esp`, and
/// [`Accounting::unaccounted`] is 0 whenever the counting is right.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accounting {
    /// UDP payloads received.
    pub received: u64,
    /// Opened and accepted: inner packets to deliver.
    pub opened_packets: u64,
    /// Inner bytes of the accepted packets.
    pub opened_bytes: u64,
    /// Dropped, by reason (before an SA was found and by the SAs).
    pub drops: DropCounts,
    /// RFC 3948 §2.3 NAT keepalives.
    pub nat_keepalives: u64,
    /// RFC 3948 §2.2 non-ESP-marker payloads (IKE; this crate has none, so they are
    /// counted and ignored).
    pub non_esp: u64,
}

impl Accounting {
    /// The payloads that got an outcome.
    pub fn accounted(&self) -> u64 {
        self.opened_packets
            .saturating_add(self.drops.total())
            .saturating_add(self.nat_keepalives)
            .saturating_add(self.non_esp)
    }

    /// Adds another worker's accounting (saturating): the sum of the workers of
    /// one gateway is the gateway's, and keeps `unaccounted` 0 if each is.
    pub fn add(&mut self, other: &Accounting) {
        self.received = self.received.saturating_add(other.received);
        self.opened_packets = self.opened_packets.saturating_add(other.opened_packets);
        self.opened_bytes = self.opened_bytes.saturating_add(other.opened_bytes);
        self.drops.add(&other.drops);
        self.nat_keepalives = self.nat_keepalives.saturating_add(other.nat_keepalives);
        self.non_esp = self.non_esp.saturating_add(other.non_esp);
    }

    /// `received - accounted`: 0 when every payload has exactly one outcome;
    /// positive when some have none, negative when some were counted twice.
    pub fn unaccounted(&self) -> i128 {
        i128::from(self.received) - i128::from(self.accounted())
    }

    /// What happened between an earlier snapshot and this one (counters only grow;
    /// a counter that went down reads as 0).
    pub fn since(&self, earlier: &Accounting) -> Accounting {
        let d = |now: u64, then: u64| now.saturating_sub(then);
        let mut drops = DropCounts::default();
        for (reason, now) in self.drops.iter() {
            drops.0[reason.index()] = d(now, earlier.drops.get(reason));
        }
        Accounting {
            received: d(self.received, earlier.received),
            opened_packets: d(self.opened_packets, earlier.opened_packets),
            opened_bytes: d(self.opened_bytes, earlier.opened_bytes),
            drops,
            nat_keepalives: d(self.nat_keepalives, earlier.nat_keepalives),
            non_esp: d(self.non_esp, earlier.non_esp),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_indexed_in_order_and_named_uniquely() {
        for (i, r) in DropReason::ALL.into_iter().enumerate() {
            assert_eq!(r.index(), i);
            assert_eq!(DropReason::from_name(r.name()), Some(r));
        }
    }

    #[test]
    fn drop_counts_serialise_as_a_map_of_every_reason() {
        let mut c = DropCounts::default();
        c.increment(DropReason::Replayed);
        c.increment(DropReason::Replayed);
        c.increment(DropReason::UnknownSpi);
        let json = serde_json::to_value(c).unwrap();
        assert_eq!(json["replayed"], 2);
        assert_eq!(json["unknown_spi"], 1);
        assert_eq!(json["truncated"], 0);
        assert_eq!(json.as_object().unwrap().len(), DropReason::COUNT);
        let back: DropCounts = serde_json::from_value(json).unwrap();
        assert_eq!(back, c);
        assert_eq!(c.total(), 3);
        assert!(serde_json::from_str::<DropCounts>(r#"{"gremlins": 1}"#).is_err());
        let partial: DropCounts = serde_json::from_str(r#"{"too_old": 4}"#).unwrap();
        assert_eq!(partial.get(DropReason::TooOld), 4);
    }

    #[test]
    fn unaccounted_is_received_minus_every_outcome() {
        let mut a = Accounting {
            received: 10,
            opened_packets: 6,
            opened_bytes: 600,
            nat_keepalives: 1,
            non_esp: 1,
            ..Accounting::default()
        };
        a.drops.increment(DropReason::Replayed);
        a.drops.increment(DropReason::Unclassifiable);
        assert_eq!((a.accounted(), a.unaccounted()), (10, 0));
        a.received = 12;
        assert_eq!(a.unaccounted(), 2, "two without an outcome");
        a.received = 9;
        assert_eq!(a.unaccounted(), -1, "one counted twice");
        let earlier = Accounting {
            received: 4,
            opened_packets: 3,
            ..Accounting::default()
        };
        let d = a.since(&earlier);
        assert_eq!((d.received, d.opened_packets, d.opened_bytes), (5, 3, 600));
        assert_eq!(d.drops.total(), 2);
    }
}
