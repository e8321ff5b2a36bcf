//! TUN offloads as pure functions: the virtio-net header, Internet checksums, TCP
//! segmentation of the 64 KiB packets the kernel hands a TUN queue opened with
//! `IFF_VNET_HDR` (TSO), and the reverse, coalescing received TCP segments of one
//! flow into one large packet for a single write (GRO).
//!
//! Why: without offloads every 1.4 KB packet costs a `read` or `write` on the TUN
//! device and a trip through the kernel's stack; with them, one system call carries
//! up to 64 KiB and the kernel's TCP processes one large buffer. The ESP packets on
//! the wire are the same either way: segmentation happens before sealing and
//! coalescing after opening, so every ESP packet still carries one MTU-sized inner
//! packet.
//!
//! Only IPv4 TCP is segmented or coalesced (all our inner traffic is IPv4, and the
//! gateway asks the kernel for TSO4 only); every other packet passes through, with a
//! partial checksum completed when the kernel left one. Nothing here does I/O.

/// The virtio-net header (linux/virtio_net.h), little-endian, 10 bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VnetHdr {
    /// `VIRTIO_NET_HDR_F_*`.
    pub flags: u8,
    /// `VIRTIO_NET_HDR_GSO_*`.
    pub gso_type: u8,
    /// Length of the headers (IP + TCP) in front of the payload.
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Where the checksummed part starts (the transport header).
    pub csum_start: u16,
    /// Where in it the checksum field is.
    pub csum_offset: u16,
}

/// The checksum is partial: complete it over `csum_start..`.
pub const F_NEEDS_CSUM: u8 = 1;
/// No segmentation.
pub const GSO_NONE: u8 = 0;
/// TCP over IPv4 segmentation.
pub const GSO_TCPV4: u8 = 1;
/// The ECN bit of `gso_type`.
pub const GSO_ECN: u8 = 0x80;

/// Length of [`VnetHdr`] on the wire.
pub const VNET_HDR_LEN: usize = 10;

impl VnetHdr {
    /// Reads the header in front of a packet.
    pub fn parse(bytes: &[u8]) -> Option<VnetHdr> {
        let b = bytes.get(..VNET_HDR_LEN)?;
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Some(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u16_at(2),
            gso_size: u16_at(4),
            csum_start: u16_at(6),
            csum_offset: u16_at(8),
        })
    }

    /// Writes the header into `out[..VNET_HDR_LEN]`.
    pub fn write(&self, out: &mut [u8]) {
        out[0] = self.flags;
        out[1] = self.gso_type;
        out[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        out[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        out[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        out[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
    }
}

/// RFC 1071: the 16-bit ones' complement sum of `data` (not folded, not inverted),
/// added to `initial`. The sum does not depend on byte order (RFC 1071 §2(B)): the
/// data is summed as native-endian 32-bit words into a 64-bit accumulator
/// ([`word_sum`], with AVX2 where the CPU has it: [`super::sys::word_sum`]),
/// folded to 16 bits and, on a little-endian machine, byte-swapped into network
/// order.
pub fn sum(data: &[u8], initial: u64) -> u64 {
    let folded = fold(super::sys::word_sum(data));
    let network = if cfg!(target_endian = "little") {
        folded.swap_bytes()
    } else {
        folded
    };
    initial + u64::from(network)
}

/// The sum of `data` as native-endian 32-bit words (the last one zero-padded), in
/// 64 bits: no carry is lost below 2^32 words, and the loop compiles to vector
/// adds. Folded to 16 bits it is RFC 1071's sum in native byte order.
#[inline(always)]
pub fn word_sum(data: &[u8]) -> u64 {
    let mut words = data.chunks_exact(4);
    let mut acc: u64 = 0;
    for w in &mut words {
        acc += u64::from(u32::from_ne_bytes([w[0], w[1], w[2], w[3]]));
    }
    let rest = words.remainder();
    let mut tail = [0u8; 4];
    tail[..rest.len()].copy_from_slice(rest);
    acc + u64::from(u32::from_ne_bytes(tail))
}

/// Folds a sum to 16 bits.
pub fn fold(mut s: u64) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// RFC 793 §3.1 / RFC 768: the IPv4 pseudo-header sum for a transport segment of
/// `len` bytes of protocol `protocol` between the addresses in `ip_header`.
fn pseudo_header_sum(ip_header: &[u8], protocol: u8, len: usize) -> u64 {
    let mut s = sum(&ip_header[12..20], 0);
    s += u64::from(protocol);
    s += len as u64;
    s
}

/// RFC 791 §3.1: recomputes the IPv4 header checksum in place.
pub fn fix_ipv4_checksum(header: &mut [u8]) {
    header[10] = 0;
    header[11] = 0;
    let c = !fold(sum(header, 0));
    header[10..12].copy_from_slice(&c.to_be_bytes());
}

/// Why an offloaded packet could not be processed (it is dropped and counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffloadError {
    /// The virtio header or the packet's own headers are inconsistent.
    Malformed,
    /// A segmentation type this gateway did not ask the kernel for.
    Unsupported,
}

const IPPROTO_TCP: u8 = 6;
const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_RST: u8 = 0x04;
const TCP_PSH: u8 = 0x08;
const TCP_ACK: u8 = 0x10;
const TCP_URG: u8 = 0x20;
const TCP_ECE: u8 = 0x40;
const TCP_CWR: u8 = 0x80;

/// The IPv4 + TCP header lengths of a packet, checked against its length.
fn ipv4_tcp_lengths(packet: &[u8]) -> Option<(usize, usize)> {
    if packet.len() < 40 || packet[0] >> 4 != 4 || packet[9] != IPPROTO_TCP {
        return None;
    }
    let ip_len = usize::from(packet[0] & 0x0f) * 4;
    if ip_len < 20 || packet.len() < ip_len + 20 {
        return None;
    }
    let tcp_len = usize::from(packet[ip_len + 12] >> 4) * 4;
    if tcp_len < 20 || packet.len() < ip_len + tcp_len {
        return None;
    }
    Some((ip_len, tcp_len))
}

/// Completes a partial checksum the kernel left (`F_NEEDS_CSUM`): the field holds
/// the pseudo-header sum; the checksum covers `csum_start..` of the packet.
fn complete_checksum(hdr: &VnetHdr, packet: &mut [u8]) -> Result<(), OffloadError> {
    let start = usize::from(hdr.csum_start);
    let field = start + usize::from(hdr.csum_offset);
    if field + 2 > packet.len() {
        return Err(OffloadError::Malformed);
    }
    let c = !fold(sum(&packet[start..], 0));
    // RFC 768: a UDP checksum that computes to 0 is sent as all ones.
    let c = if c == 0 && hdr.csum_offset == 6 {
        0xffff
    } else {
        c
    };
    packet[field..field + 2].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

/// The largest segment [`segment_into`] cuts (an IPv4 packet's length is 16 bits).
const MAX_SEGMENT: usize = 65_535;

/// Where [`segment_into`] writes the packets it cuts: each straight into its final
/// place (the gateway's send buffer, where it is sealed in place).
pub trait Segments {
    /// Room for the next packet, exactly `len` bytes; None drops the packet (the
    /// sink counts why).
    fn room(&mut self, len: usize) -> Option<&mut [u8]>;
    /// The packet written into the last room is complete.
    fn done(&mut self, len: usize);
    /// A packet that needed no cutting, complete in the read buffer: copied into
    /// the next room.
    fn whole(&mut self, packet: &[u8]) {
        if let Some(room) = self.room(packet.len()) {
            room.copy_from_slice(packet);
            self.done(packet.len());
        }
    }
}

/// A [`Segments`] that cuts each packet in `scratch` and hands it to `each`.
struct Scratch<'a, F: FnMut(&[u8])> {
    scratch: &'a mut [u8],
    each: F,
    /// A segment did not fit `scratch` (and was not handed on).
    short: bool,
}

impl<F: FnMut(&[u8])> Segments for Scratch<'_, F> {
    fn room(&mut self, len: usize) -> Option<&mut [u8]> {
        let room = self.scratch.get_mut(..len);
        self.short |= room.is_none();
        room
    }

    fn done(&mut self, len: usize) {
        (self.each)(&self.scratch[..len]);
    }

    fn whole(&mut self, packet: &[u8]) {
        (self.each)(packet);
    }
}

/// Splits what one TUN read returned (`packet`, after its virtio header `hdr`) into
/// plain IP packets, calling `each` with every one in order ([`segment_into`] with
/// `scratch`, 64 KiB, holding one packet at a time). Returns the number of packets
/// produced; a segment longer than `scratch` makes the packet malformed.
pub fn segment(
    hdr: &VnetHdr,
    packet: &mut [u8],
    scratch: &mut [u8],
    each: impl FnMut(&[u8]),
) -> Result<usize, OffloadError> {
    let mut sink = Scratch {
        scratch,
        each,
        short: false,
    };
    let n = segment_into(hdr, packet, &mut sink)?;
    if sink.short {
        return Err(OffloadError::Malformed);
    }
    Ok(n)
}

/// Splits what one TUN read returned (`packet`, after its virtio header `hdr`) into
/// plain IP packets, writing each in order into the room `out` gives. A TCP
/// super-packet is segmented into `gso_size` payloads, each with its own IP length,
/// id and checksum and its own TCP sequence number, flags (FIN and PSH on the last
/// only, CWR on the first only) and checksum, as the kernel's own segmentation
/// would; each segment is built in its room (headers, then payload, then the
/// checksums over it while it is in cache), one copy of the payload in all.
/// Returns the number of packets produced (dropped ones too).
pub fn segment_into(
    hdr: &VnetHdr,
    packet: &mut [u8],
    out: &mut impl Segments,
) -> Result<usize, OffloadError> {
    let gso = hdr.gso_type & !GSO_ECN;
    if gso == GSO_NONE {
        if hdr.flags & F_NEEDS_CSUM != 0 {
            complete_checksum(hdr, packet)?;
        }
        out.whole(packet);
        return Ok(1);
    }
    if gso != GSO_TCPV4 {
        return Err(OffloadError::Unsupported);
    }
    let (ip_len, tcp_len) = ipv4_tcp_lengths(packet).ok_or(OffloadError::Malformed)?;
    let headers = ip_len + tcp_len;
    let mss = usize::from(hdr.gso_size);
    if mss == 0 || headers + mss > MAX_SEGMENT {
        return Err(OffloadError::Malformed);
    }
    let payload = &packet[headers..];
    if payload.len() <= mss {
        // Nothing to split (the kernel may still mark it GSO): finish the checksum.
        let tcp_total = packet.len() - ip_len;
        write_tcp_checksum(packet, ip_len, tcp_total);
        out.whole(packet);
        return Ok(1);
    }
    let id = u16::from_be_bytes([packet[4], packet[5]]);
    let sequence = tcp_sequence(packet, ip_len);
    let flags = packet[ip_len + 13];
    let count = payload.len().div_ceil(mss);
    for i in 0..count {
        let start = i * mss;
        let end = (start + mss).min(payload.len());
        let seg_len = headers + end - start;
        let Some(seg) = out.room(seg_len) else {
            continue;
        };
        seg[..headers].copy_from_slice(&packet[..headers]);
        seg[headers..].copy_from_slice(&payload[start..end]);
        // IPv4: length, a distinct id per segment (RFC 6864 permits any for DF
        // packets; the kernel increments), checksum.
        seg[2..4].copy_from_slice(&(seg_len as u16).to_be_bytes());
        seg[4..6].copy_from_slice(&id.wrapping_add(i as u16).to_be_bytes());
        fix_ipv4_checksum(&mut seg[..ip_len]);
        // TCP: sequence, flags, checksum.
        let seq = sequence.wrapping_add(start as u32);
        seg[ip_len + 4..ip_len + 8].copy_from_slice(&seq.to_be_bytes());
        let mut f = flags;
        if i + 1 < count {
            f &= !(TCP_FIN | TCP_PSH);
        }
        if i > 0 {
            f &= !TCP_CWR;
        }
        seg[ip_len + 13] = f;
        write_tcp_checksum(seg, ip_len, seg_len - ip_len);
        out.done(seg_len);
    }
    Ok(count)
}

/// The TCP sequence number of an IPv4 packet whose IP header is `ip_len` bytes.
fn tcp_sequence(packet: &[u8], ip_len: usize) -> u32 {
    let s = &packet[ip_len + 4..ip_len + 8];
    u32::from_be_bytes([s[0], s[1], s[2], s[3]])
}

/// Computes the full TCP checksum of `packet` (IPv4 header of `ip_len` bytes, TCP
/// segment of `tcp_total` bytes) and stores it.
fn write_tcp_checksum(packet: &mut [u8], ip_len: usize, tcp_total: usize) {
    packet[ip_len + 16] = 0;
    packet[ip_len + 17] = 0;
    let s = pseudo_header_sum(&packet[..ip_len], IPPROTO_TCP, tcp_total);
    let c = !fold(sum(&packet[ip_len..ip_len + tcp_total], s));
    packet[ip_len + 16..ip_len + 18].copy_from_slice(&c.to_be_bytes());
}

/// The most TCP segments the kernel should put in one TUN super-packet (the TUN
/// device's `gso_max_segs`, which the kernel's TCP honours when it sizes TSO
/// packets) for a tunnel of `mtu`: as many as fit, sealed by the most expansive
/// transform, in one UDP GSO send ([`super::sys::GSO_MAX_BYTES`]). Then one TUN read
/// leaves as one GSO send, arrives as one `UDP_GRO` buffer and is written to the
/// peer's TUN device as one coalesced packet, so the receiving TCP sees (and
/// acknowledges) the sender's super-packets whole. With the kernel's default (64 KiB,
/// 48 segments at MTU 1400) each read left as a send of 44 and one of 4, and the
/// receiver wrote, and acknowledged, twice as often.
pub fn tun_gso_max_segs(mtu: usize) -> usize {
    let sealed = cipherbench_esp::Transform::ALL
        .iter()
        .map(|t| t.sealed_len(mtu))
        .max()
        .unwrap_or(mtu)
        .max(1);
    (super::sys::GSO_MAX_BYTES / sealed).clamp(1, super::sys::GSO_MAX_SEGMENTS)
}

/// The largest packet a coalesced write may be: the IPv4 total length is 16 bits.
const MAX_COALESCED: usize = 65_535;

/// One flow's pending coalesced packet.
struct Pending {
    /// Virtio header (written at flush) then the packet.
    buf: Box<[u8]>,
    len: usize,
    ip_len: usize,
    tcp_len: usize,
    /// Payload bytes per segment (the first segment's).
    mss: usize,
    segments: usize,
    next_sequence: u32,
    /// No more segments may join (the last was short or carried PSH).
    closed: bool,
    active: bool,
}

impl Pending {
    fn packet(&self) -> &[u8] {
        &self.buf[VNET_HDR_LEN..VNET_HDR_LEN + self.len]
    }
}

/// Coalesces the TCP segments of one batch into as few TUN writes as it can (GRO).
/// Packets of a flow stay in order; packets that cannot be coalesced pass through.
/// Buffers are allocated once (`flows` x 64 KiB).
pub struct Coalescer {
    pending: Vec<Pending>,
    /// Segments that joined an earlier one (writes saved).
    pub merged: u64,
}

/// What [`Coalescer::push`] did with a packet.
#[derive(Debug, PartialEq, Eq)]
pub enum Push {
    /// Held (alone or joined to its flow's pending packet); written at a flush.
    Held,
    /// Not a coalescing candidate: the caller writes it now, after flushing
    /// `flush_first` (the flow's pending packet, which must go out before it).
    PassThrough { flush_first: Option<usize> },
    /// The flow's pending packet `flush` must be written now; then push again.
    FlushThenRetry { flush: usize },
}

impl Coalescer {
    /// Room for `flows` flows at once.
    pub fn new(flows: usize) -> Coalescer {
        Coalescer {
            pending: (0..flows.max(1))
                .map(|_| Pending {
                    buf: vec![0u8; VNET_HDR_LEN + MAX_COALESCED].into_boxed_slice(),
                    len: 0,
                    ip_len: 0,
                    tcp_len: 0,
                    mss: 0,
                    segments: 0,
                    next_sequence: 0,
                    closed: false,
                    active: false,
                })
                .collect(),
            merged: 0,
        }
    }

    fn same_flow(a: &[u8], ip_len: usize, b: &[u8]) -> bool {
        // Addresses (12..20) and ports (first 4 bytes of TCP).
        a[12..20] == b[12..20] && a[ip_len..ip_len + 4] == b[ip_len..ip_len + 4]
    }

    /// Offers one opened inner packet.
    pub fn push(&mut self, packet: &[u8]) -> Push {
        let Some((ip_len, tcp_len)) = ipv4_tcp_lengths(packet) else {
            return Push::PassThrough { flush_first: None };
        };
        let flow = self.pending.iter().position(|p| {
            p.active && p.ip_len == ip_len && Self::same_flow(p.packet(), ip_len, packet)
        });
        let headers = ip_len + tcp_len;
        let payload = packet.len() - headers;
        let flags = packet[ip_len + 13];
        let fragment = u16::from_be_bytes([packet[6], packet[7]]) & 0x3fff != 0;
        let total_len = usize::from(u16::from_be_bytes([packet[2], packet[3]]));
        let candidate = ip_len == 20
            && !fragment
            && total_len == packet.len()
            && payload > 0
            && flags & (TCP_SYN | TCP_FIN | TCP_RST | TCP_URG | TCP_ECE | TCP_CWR) == 0
            && flags & TCP_ACK != 0;
        let Some(index) = flow else {
            if !candidate || flags & TCP_PSH != 0 {
                return Push::PassThrough { flush_first: None };
            }
            return match self.pending.iter().position(|p| !p.active) {
                Some(free) => {
                    self.start(free, packet, ip_len, tcp_len);
                    Push::Held
                }
                // Every slot is busy: the caller writes this one as it is.
                None => Push::PassThrough { flush_first: None },
            };
        };
        if !candidate {
            return Push::PassThrough {
                flush_first: Some(index),
            };
        }
        let p = &self.pending[index];
        let first = p.packet();
        let sequence = tcp_sequence(packet, ip_len);
        let joins = !p.closed
            && p.tcp_len == tcp_len
            && sequence == p.next_sequence
            && payload <= p.mss
            && p.len + payload <= MAX_COALESCED
            // TOS, DF, TTL as the kernel's GRO compares them.
            && first[1] == packet[1]
            && first[6] & 0x40 == packet[6] & 0x40
            && first[8] == packet[8]
            // Acknowledgement, flags word and window, options: all equal.
            && first[ip_len + 8..ip_len + 12] == packet[ip_len + 8..ip_len + 12]
            && first[ip_len + 12] == packet[ip_len + 12]
            && first[ip_len + 14..ip_len + 16] == packet[ip_len + 14..ip_len + 16]
            && first[ip_len + 20..headers] == packet[ip_len + 20..headers]
            && first[ip_len + 13] & !TCP_PSH == flags & !TCP_PSH;
        if !joins {
            return Push::FlushThenRetry { flush: index };
        }
        let p = &mut self.pending[index];
        let at = VNET_HDR_LEN + p.len;
        p.buf[at..at + payload].copy_from_slice(&packet[headers..]);
        p.len += payload;
        p.segments += 1;
        p.next_sequence = sequence.wrapping_add(payload as u32);
        if payload < p.mss || flags & TCP_PSH != 0 {
            p.closed = true;
            if flags & TCP_PSH != 0 {
                p.buf[VNET_HDR_LEN + ip_len + 13] |= TCP_PSH;
            }
        }
        self.merged += 1;
        Push::Held
    }

    fn start(&mut self, index: usize, packet: &[u8], ip_len: usize, tcp_len: usize) {
        let p = &mut self.pending[index];
        p.buf[VNET_HDR_LEN..VNET_HDR_LEN + packet.len()].copy_from_slice(packet);
        p.len = packet.len();
        p.ip_len = ip_len;
        p.tcp_len = tcp_len;
        p.mss = packet.len() - ip_len - tcp_len;
        p.segments = 1;
        let sequence = tcp_sequence(packet, ip_len);
        p.next_sequence = sequence.wrapping_add(p.mss as u32);
        p.closed = false;
        p.active = true;
    }

    #[cfg(test)]
    /// Indexes of the flows holding a packet, for the flush at the end of a batch.
    pub fn active(&self) -> impl Iterator<Item = usize> + '_ {
        self.pending
            .iter()
            .enumerate()
            .filter(|(_, p)| p.active)
            .map(|(i, _)| i)
    }

    /// Finishes every held packet (the end of a batch), handing each to `write`.
    pub fn flush_all(&mut self, mut write: impl FnMut(&[u8])) {
        for index in 0..self.pending.len() {
            if self.pending[index].active {
                write(self.take(index));
            }
        }
    }

    /// Finishes flow `index`'s packet and returns the bytes to write (virtio header
    /// included); the flow is free again afterwards. A single segment goes out
    /// unchanged with an empty header; several become one TCP packet marked for
    /// segmentation (`GSO_TCPV4`, `gso_size` = the segments' payload) with a
    /// partial checksum, which the receiving stack accepts without recomputing: the
    /// ESP ICV has already authenticated every byte.
    pub fn take(&mut self, index: usize) -> &[u8] {
        let p = &mut self.pending[index];
        p.active = false;
        let (ip_len, len) = (p.ip_len, p.len);
        let hdr = if p.segments == 1 {
            VnetHdr::default()
        } else {
            let packet = &mut p.buf[VNET_HDR_LEN..VNET_HDR_LEN + len];
            packet[2..4].copy_from_slice(&(len as u16).to_be_bytes());
            fix_ipv4_checksum(&mut packet[..ip_len]);
            // CHECKSUM_PARTIAL: the field holds the folded pseudo-header sum.
            let partial = fold(pseudo_header_sum(
                &packet[..ip_len],
                IPPROTO_TCP,
                len - ip_len,
            ));
            packet[ip_len + 16..ip_len + 18].copy_from_slice(&partial.to_be_bytes());
            VnetHdr {
                flags: F_NEEDS_CSUM,
                gso_type: GSO_TCPV4,
                hdr_len: (ip_len + p.tcp_len) as u16,
                gso_size: p.mss as u16,
                csum_start: ip_len as u16,
                csum_offset: 16,
            }
        };
        hdr.write(&mut p.buf[..VNET_HDR_LEN]);
        &p.buf[..VNET_HDR_LEN + len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TCP/IPv4 packet with timestamps-sized options and `payload` bytes.
    fn tcp_packet(sequence: u32, payload: &[u8], flags: u8) -> Vec<u8> {
        let ip_len = 20;
        let tcp_len = 32;
        let mut p = vec![0u8; ip_len + tcp_len + payload.len()];
        p[0] = 0x45;
        let total = p.len() as u16;
        p[2..4].copy_from_slice(&total.to_be_bytes());
        p[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
        p[6] = 0x40; // DF
        p[8] = 64;
        p[9] = IPPROTO_TCP;
        p[12..16].copy_from_slice(&[198, 19, 0, 1]);
        p[16..20].copy_from_slice(&[198, 19, 0, 2]);
        p[20..22].copy_from_slice(&40000u16.to_be_bytes());
        p[22..24].copy_from_slice(&5201u16.to_be_bytes());
        p[24..28].copy_from_slice(&sequence.to_be_bytes());
        p[28..32].copy_from_slice(&77u32.to_be_bytes());
        p[32] = 8 << 4;
        p[33] = flags;
        p[34..36].copy_from_slice(&512u16.to_be_bytes());
        p[40..52].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 3]);
        p[52..].copy_from_slice(payload);
        fix_ipv4_checksum(&mut p[..20]);
        let total = p.len() - 20;
        write_tcp_checksum(&mut p, 20, total);
        p
    }

    /// RFC 1071 the slow way: 16-bit words.
    fn naive_sum(data: &[u8]) -> u16 {
        let mut s: u32 = 0;
        for c in data.chunks(2) {
            s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }

    fn checksums_verify(p: &[u8]) -> bool {
        let ip_ok = naive_sum(&p[..20]) == 0xffff;
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&p[12..20]);
        pseudo.extend_from_slice(&[0, IPPROTO_TCP]);
        pseudo.extend_from_slice(&((p.len() - 20) as u16).to_be_bytes());
        pseudo.extend_from_slice(&p[20..]);
        ip_ok && naive_sum(&pseudo) == 0xffff
    }

    #[test]
    fn a_tun_super_packet_fits_one_udp_gso_send_sealed() {
        for mtu in [576, 1280, 1400, 1420, 1500, 9000] {
            let segs = tun_gso_max_segs(mtu);
            assert!(segs >= 1, "{mtu}");
            for t in cipherbench_esp::Transform::ALL {
                assert!(
                    segs * t.sealed_len(mtu) <= super::super::sys::GSO_MAX_BYTES,
                    "{mtu} {t:?}"
                );
            }
            // And no smaller than it must be: one more would not fit.
            let widest = cipherbench_esp::Transform::ALL
                .iter()
                .map(|t| t.sealed_len(mtu))
                .max()
                .unwrap();
            assert!(
                segs == super::super::sys::GSO_MAX_SEGMENTS
                    || (segs + 1) * widest > super::super::sys::GSO_MAX_BYTES,
                "{mtu}"
            );
        }
        assert_eq!(tun_gso_max_segs(1400), 44);
    }

    #[test]
    fn wide_sum_agrees_with_rfc1071() {
        let data: Vec<u8> = (0..1501u32).map(|i| (i * 7 + 3) as u8).collect();
        for len in [0, 1, 2, 7, 8, 9, 20, 1500, 1501] {
            assert_eq!(fold(sum(&data[..len], 0)), naive_sum(&data[..len]), "{len}");
        }
        assert_eq!(fold(sum(&[0xff; 4096], 0)), naive_sum(&[0xff; 4096]));
        // Any start, any length, with an initial sum; the vector path (AVX2 here)
        // and the portable loop agree word for word.
        for start in 0..4 {
            for len in [0, 1, 3, 4, 5, 31, 32, 33, 63, 64, 65, 1380, 1400, 1496] {
                let d = &data[start..start + len];
                assert_eq!(super::super::sys::word_sum(d), word_sum(d), "{start} {len}");
                let with_initial = fold(sum(d, 0x1_2345)) as u32;
                let expected = u32::from(naive_sum(d)) + 0x1_2345;
                let expected = fold(u64::from(expected));
                assert_eq!(with_initial as u16, expected, "{start} {len}");
            }
        }
    }

    #[test]
    fn segments_a_super_packet_like_the_kernel() {
        let payload: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let mut big = tcp_packet(1000, &payload, TCP_ACK | TCP_PSH);
        // The kernel leaves a partial checksum; segmentation must not depend on it.
        big[36] = 0xde;
        let hdr = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 52,
            gso_size: 1348,
            csum_start: 20,
            csum_offset: 16,
        };
        let mut scratch = vec![0u8; 65536];
        let mut out: Vec<Vec<u8>> = Vec::new();
        let n = segment(&hdr, &mut big, &mut scratch, |s| out.push(s.to_vec())).unwrap();
        assert_eq!(n, 8);
        assert_eq!(out.len(), 8);
        let mut joined = Vec::new();
        for (i, s) in out.iter().enumerate() {
            assert!(checksums_verify(s), "segment {i}");
            let seq = u32::from_be_bytes([s[24], s[25], s[26], s[27]]);
            assert_eq!(seq, 1000 + (i * 1348) as u32);
            assert_eq!(s[33] & TCP_PSH != 0, i == 7, "PSH only on the last");
            assert_eq!(usize::from(u16::from_be_bytes([s[2], s[3]])), s.len());
            joined.extend_from_slice(&s[52..]);
        }
        assert_eq!(joined, payload);
    }

    #[test]
    fn completes_a_partial_checksum_without_segmenting() {
        let good = tcp_packet(5, b"hello", TCP_ACK);
        let mut partial = good.clone();
        let pseudo = fold(pseudo_header_sum(
            &partial[..20],
            IPPROTO_TCP,
            partial.len() - 20,
        ));
        partial[36..38].copy_from_slice(&pseudo.to_be_bytes());
        let hdr = VnetHdr {
            flags: F_NEEDS_CSUM,
            csum_start: 20,
            csum_offset: 16,
            ..VnetHdr::default()
        };
        let mut out = Vec::new();
        segment(&hdr, &mut partial, &mut [0u8; 64], |s| out.push(s.to_vec())).unwrap();
        assert_eq!(out, vec![good]);
    }

    #[test]
    fn refuses_malformed_offload_headers() {
        let mut p = tcp_packet(1, &[0; 100], TCP_ACK);
        let bad = VnetHdr {
            gso_type: GSO_TCPV4,
            gso_size: 0,
            ..VnetHdr::default()
        };
        assert_eq!(
            segment(&bad, &mut p, &mut [0u8; 2048], |_| {}),
            Err(OffloadError::Malformed)
        );
        let udp = VnetHdr {
            gso_type: 5,
            gso_size: 100,
            ..VnetHdr::default()
        };
        assert_eq!(
            segment(&udp, &mut p, &mut [0u8; 2048], |_| {}),
            Err(OffloadError::Unsupported)
        );
        let past = VnetHdr {
            flags: F_NEEDS_CSUM,
            csum_start: 4000,
            ..VnetHdr::default()
        };
        assert_eq!(
            segment(&past, &mut p, &mut [0u8; 2048], |_| {}),
            Err(OffloadError::Malformed)
        );
        // A segment longer than the scratch buffer is refused, not dropped unseen.
        let mut big = tcp_packet(1, &[7; 3000], TCP_ACK);
        let split = VnetHdr {
            gso_type: GSO_TCPV4,
            gso_size: 1448,
            ..VnetHdr::default()
        };
        assert_eq!(
            segment(&split, &mut big, &mut [0u8; 512], |_| {}),
            Err(OffloadError::Malformed)
        );
        assert_eq!(VnetHdr::parse(&[0; 9]), None);
    }

    /// What the kernel would see after a coalesced write: resegment it.
    fn resegment(written: &[u8]) -> Vec<Vec<u8>> {
        let hdr = VnetHdr::parse(written).unwrap();
        let mut packet = written[VNET_HDR_LEN..].to_vec();
        let mut out = Vec::new();
        let mut scratch = vec![0u8; 65536];
        segment(&hdr, &mut packet, &mut scratch, |s| out.push(s.to_vec())).unwrap();
        out
    }

    #[test]
    fn coalesces_consecutive_segments_and_round_trips() {
        let mut c = Coalescer::new(2);
        let segs: Vec<Vec<u8>> = (0..5u32)
            .map(|i| {
                let len = if i == 4 { 300 } else { 1348 };
                let flags = if i == 4 { TCP_ACK | TCP_PSH } else { TCP_ACK };
                tcp_packet(100 + i * 1348, &vec![i as u8; len], flags)
            })
            .collect();
        for s in &segs {
            assert_eq!(c.push(s), Push::Held);
        }
        let active: Vec<usize> = c.active().collect();
        assert_eq!(active.len(), 1);
        let written = c.take(active[0]).to_vec();
        let hdr = VnetHdr::parse(&written).unwrap();
        assert_eq!(
            (hdr.gso_type, hdr.gso_size, hdr.flags),
            (GSO_TCPV4, 1348, F_NEEDS_CSUM)
        );
        assert_eq!(written.len(), VNET_HDR_LEN + 52 + 4 * 1348 + 300);
        assert_eq!(c.merged, 4);
        // Resegmented, it is the original segments again (ids aside).
        let back = resegment(&written);
        assert_eq!(back.len(), 5);
        for (a, b) in back.iter().zip(&segs) {
            assert_eq!(a[20..], b[20..]);
            assert!(checksums_verify(a));
        }
        assert_eq!(c.active().count(), 0);
    }

    #[test]
    fn keeps_order_at_gaps_and_passes_others_through() {
        let mut c = Coalescer::new(1);
        let a = tcp_packet(0, &[1; 1000], TCP_ACK);
        let gap = tcp_packet(5000, &[2; 1000], TCP_ACK);
        assert_eq!(c.push(&a), Push::Held);
        assert_eq!(c.push(&gap), Push::FlushThenRetry { flush: 0 });
        let single = c.take(0).to_vec();
        assert_eq!(VnetHdr::parse(&single).unwrap(), VnetHdr::default());
        assert_eq!(&single[VNET_HDR_LEN..], &a[..]);
        assert_eq!(c.push(&gap), Push::Held);
        // A pure ACK of the same flow is no candidate: flush, then pass through.
        let ack = tcp_packet(6000, &[], TCP_ACK);
        assert_eq!(
            c.push(&ack),
            Push::PassThrough {
                flush_first: Some(0)
            }
        );
        // Another flow with no free slot passes through untouched.
        let mut other = tcp_packet(0, &[3; 100], TCP_ACK);
        other[20] = 1;
        assert_eq!(c.push(&other), Push::PassThrough { flush_first: None });
        // Not TCP at all.
        let mut udp = a.clone();
        udp[9] = 17;
        assert_eq!(c.push(&udp), Push::PassThrough { flush_first: None });
        assert_eq!(c.push(&[0x45, 0]), Push::PassThrough { flush_first: None });
    }
}
