//! One gateway's inbound SAs, keyed by SPI, and the outcome-enum entry point for a UDP
//! payload received on the ESP-in-UDP port.
//!
//! A gateway holds more than one inbound SA while a replacement overlaps the old one;
//! the SPI of each packet picks the SA (RFC 4303 §3.4.2), and a packet no SA claims is
//! counted here as [`DropReason::UnknownSpi`]. The set owns no buffers: the caller
//! passes the received payload and an output buffer and gets an [`Inbound`] back,
//! borrowing from them. Every payload given to [`InboundSet::receive_udp`] is counted
//! as received and under exactly one outcome ([`InboundSet::accounting`]).

use crate::counters::{Accounting, DropCounts, DropReason, SetCounters};
use crate::sa::{InboundSa, SaError, Unsettled};
use crate::udp::{self, UdpPayload};
use crate::ESP_HEADER_LEN;

/// What to do with one received UDP payload.
#[derive(Debug, PartialEq, Eq)]
pub enum Inbound<'a> {
    /// An authentic inner IP packet: write it to the TUN device.
    Packet {
        /// The SA that opened it.
        spi: u32,
        /// The inner packet, inside the caller's output buffer.
        inner: &'a mut [u8],
    },
    /// An RFC 3948 NAT keepalive: nothing to do.
    NatKeepalive,
    /// An IKE message behind the non-ESP marker (the bytes after it); this crate has no
    /// IKE, so the gateway ignores or logs it.
    NonEsp(&'a [u8]),
    /// Dropped and counted.
    Dropped(DropReason),
}

/// The inbound SAs of one gateway.
#[derive(Default)]
pub struct InboundSet {
    /// A handful at most (old and new during a rekey): a linear scan beats hashing.
    sas: Vec<InboundSa>,
    counters: SetCounters,
}

impl InboundSet {
    /// An empty set.
    pub fn new() -> InboundSet {
        InboundSet::default()
    }

    /// Adds an SA; its SPI must be new to the set.
    pub fn insert(&mut self, sa: InboundSa) -> Result<(), SaError> {
        if self.get(sa.spi()).is_some() {
            return Err(SaError::DuplicateSpi(sa.spi()));
        }
        self.sas.push(sa);
        Ok(())
    }

    /// The same SAs for another thread (see [`InboundSa::worker`]): each SA's one
    /// replay window shared, cipher contexts and counters of the worker's own. The
    /// set's [`InboundSet::accounting`] then counts what this worker was given; a
    /// gateway sums its workers' ([`Accounting::add`]).
    pub fn worker(&self) -> Result<InboundSet, SaError> {
        Ok(InboundSet {
            sas: self
                .sas
                .iter()
                .map(InboundSa::worker)
                .collect::<Result<_, _>>()?,
            counters: SetCounters::default(),
        })
    }

    /// Removes and returns the SA with this SPI (its keys are wiped when dropped).
    pub fn remove(&mut self, spi: u32) -> Option<InboundSa> {
        let at = self.sas.iter().position(|sa| sa.spi() == spi)?;
        Some(self.sas.swap_remove(at))
    }

    /// The SA with this SPI.
    pub fn get(&self, spi: u32) -> Option<&InboundSa> {
        self.sas.iter().find(|sa| sa.spi() == spi)
    }

    /// Every SA, for stats.
    pub fn iter(&self) -> impl Iterator<Item = &InboundSa> {
        self.sas.iter()
    }

    /// Number of SAs.
    pub fn len(&self) -> usize {
        self.sas.len()
    }

    /// True with no SA.
    pub fn is_empty(&self) -> bool {
        self.sas.is_empty()
    }

    /// What the set counted itself (payloads received; drops before an SA was
    /// found, keepalives, IKE).
    pub fn counters(&self) -> &SetCounters {
        &self.counters
    }

    /// Every payload [`InboundSet::receive_udp`] was given, by outcome, over the set
    /// and all its SAs. Packets given to [`InboundSet::open`] directly are in the
    /// outcomes but not in `received`.
    pub fn accounting(&self) -> Accounting {
        let mut a = Accounting {
            received: self.counters.received,
            nat_keepalives: self.counters.nat_keepalives,
            non_esp: self.counters.non_esp,
            drops: self.counters.drops,
            ..Accounting::default()
        };
        for sa in &self.sas {
            let c = sa.counters();
            a.opened_packets = a.opened_packets.saturating_add(c.opened_packets);
            a.opened_bytes = a.opened_bytes.saturating_add(c.opened_bytes);
            a.drops.add(&c.drops);
        }
        a
    }

    /// Drops by reason over the set and all its SAs.
    pub fn total_drops(&self) -> DropCounts {
        let mut total = self.counters.drops;
        for sa in &self.sas {
            total.add(&sa.counters().drops);
        }
        total
    }

    /// Opens an ESP packet with the SA its SPI names (see [`InboundSa::open`]).
    pub fn open(&mut self, esp: &[u8], out: &mut [u8]) -> Result<usize, DropReason> {
        let unsettled = self.open_unsettled(esp, out)?;
        self.settle(unsettled, out)
    }

    /// [`InboundSa::open_unsettled`] with the SA its SPI names; a packet no SA claims
    /// is dropped and counted here.
    pub fn open_unsettled(&mut self, esp: &[u8], out: &mut [u8]) -> Result<Unsettled, DropReason> {
        if esp.len() < ESP_HEADER_LEN {
            self.counters.drops.increment(DropReason::Truncated);
            return Err(DropReason::Truncated);
        }
        let spi = u32::from_be_bytes([esp[0], esp[1], esp[2], esp[3]]);
        match self.sas.iter_mut().find(|sa| sa.spi() == spi) {
            Some(sa) => sa.open_unsettled(esp, out),
            None => {
                self.counters.drops.increment(DropReason::UnknownSpi);
                Err(DropReason::UnknownSpi)
            }
        }
    }

    /// [`InboundSa::settle`] on this set's handle of the packet's SA, counted here.
    /// Settle a set's packets in the order they arrived, on one thread (the
    /// [`crate::pipeline`] consumer): `out` is the buffer the packet was opened into.
    /// If the SA left the set meanwhile, the packet is dropped as `UnknownSpi`.
    pub fn settle(&mut self, packet: Unsettled, out: &mut [u8]) -> Result<usize, DropReason> {
        match self.sas.iter_mut().find(|sa| sa.spi() == packet.spi()) {
            Some(sa) => sa.settle(packet, out),
            None => {
                if let Some(written) = out.get_mut(..packet.written()) {
                    written.fill(0);
                }
                self.counters.drops.increment(DropReason::UnknownSpi);
                Err(DropReason::UnknownSpi)
            }
        }
    }

    /// RFC 3948: handles one UDP payload received on the ESP-in-UDP port, counting it
    /// as received and under its outcome.
    pub fn receive_udp<'a>(&mut self, payload: &'a [u8], out: &'a mut [u8]) -> Inbound<'a> {
        let esp = match self.classify(payload) {
            Ok(esp) => esp,
            Err(other) => return other,
        };
        match self.open(esp, out) {
            Ok(len) => Inbound::Packet {
                spi: u32::from_be_bytes([esp[0], esp[1], esp[2], esp[3]]),
                inner: &mut out[..len],
            },
            Err(reason) => Inbound::Dropped(reason),
        }
    }

    /// [`InboundSet::receive_udp`] for a parallel worker: an ESP packet comes back
    /// [`Unsettled`] (for [`InboundSet::settle`] in arrival order); anything else
    /// (a keepalive, IKE, a drop) is counted here and gives `None`.
    pub fn receive_udp_unsettled(&mut self, payload: &[u8], out: &mut [u8]) -> Option<Unsettled> {
        let esp = self.classify(payload).ok()?;
        self.open_unsettled(esp, out).ok()
    }

    /// Counts a payload as received and classifies it (RFC 3948 §2.2): the ESP packet,
    /// or the outcome of anything else, counted.
    fn classify<'a>(&mut self, payload: &'a [u8]) -> Result<&'a [u8], Inbound<'a>> {
        self.counters.received = self.counters.received.saturating_add(1);
        match udp::classify(payload) {
            UdpPayload::Esp(esp) => Ok(esp),
            UdpPayload::NatKeepalive => {
                self.counters.nat_keepalives += 1;
                Err(Inbound::NatKeepalive)
            }
            UdpPayload::NonEsp(ike) => {
                self.counters.non_esp += 1;
                Err(Inbound::NonEsp(ike))
            }
            UdpPayload::Unclassifiable => {
                self.counters.drops.increment(DropReason::Unclassifiable);
                Err(Inbound::Dropped(DropReason::Unclassifiable))
            }
        }
    }
}
