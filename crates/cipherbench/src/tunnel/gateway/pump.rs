//! The gateway's two data paths, one thread each: TUN -> seal -> UDP and UDP -> open
//! -> TUN. Each owns its SA(s) and its buffers, allocated once; per packet there is
//! a copy in, the crypto, and a share of one batched system call. Counters are
//! published to the stats thread once per batch.
//!
//! A packet that cannot be sealed, or an ESP packet that does not open, is counted
//! (by the ESP core's counters or here) and dropped; nothing on either path panics
//! on what arrives. Every datagram read from the socket, an empty one included, goes
//! to the ESP core, which gives it exactly one outcome.

use super::offload::{self, Coalescer, Push, VnetHdr, VNET_HDR_LEN};
use super::stats::{RxCounters, TxCounters};
use super::sys::{Batch, Wakeup};
use cipherbench_esp::{Accounting, Counters, Inbound, InboundSet, OutboundSa};
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// What the threads share with the stats thread.
pub struct Shared {
    /// Set to stop the workers.
    pub stop: AtomicBool,
    /// Wakes a worker sleeping in `poll`.
    pub wakeup: Wakeup,
    /// The TUN-to-UDP thread's latest counters.
    pub tx: Mutex<(Counters, TxCounters)>,
    /// The UDP-to-TUN thread's latest counters, published together so that a
    /// snapshot's `udp_packets` and accounting agree.
    pub rx: Mutex<(Accounting, RxCounters)>,
    /// With several gateway threads ([`super::parallel`]): each seal worker's SA
    /// counters, one slot per worker, summed by a snapshot.
    pub seal_workers: Mutex<Vec<Counters>>,
    /// Each open worker's accounting and the datagrams it was given, published
    /// together (per worker, they agree as `rx` does).
    pub open_workers: Mutex<Vec<(Accounting, RxCounters)>>,
    /// Every data-path thread, registered by the thread itself as it starts: its
    /// name, pinned core, and CPU clock.
    pub threads: Mutex<Vec<(String, Option<usize>, crate::host::ThreadClock)>>,
}

impl Shared {
    /// Fresh shared state.
    pub fn new() -> io::Result<Shared> {
        Ok(Shared {
            stop: AtomicBool::new(false),
            wakeup: Wakeup::new()?,
            tx: Mutex::new(Default::default()),
            rx: Mutex::new(Default::default()),
            seal_workers: Mutex::new(Vec::new()),
            open_workers: Mutex::new(Vec::new()),
            threads: Mutex::new(Vec::new()),
        })
    }

    /// Registers the calling thread for the per-thread CPU figures.
    pub fn register_thread(&self, pinned: Option<usize>) {
        let name = std::thread::current().name().unwrap_or("?").to_string();
        if let Ok(clock) = crate::host::ThreadClock::current() {
            lock(&self.threads).push((name, pinned, clock));
        }
    }

    /// Everything published so far, summed over threads: (outbound SA counters,
    /// inbound accounting, TUN-to-UDP counts, UDP-to-TUN counts).
    pub fn totals(&self) -> (Counters, Accounting, TxCounters, RxCounters) {
        let (mut outbound, tx) = *lock(&self.tx);
        let (mut inbound, mut rx) = *lock(&self.rx);
        for c in lock(&self.seal_workers).iter() {
            outbound.add(c);
        }
        for (a, r) in lock(&self.open_workers).iter() {
            inbound.add(a);
            rx.add(r);
        }
        (outbound, inbound, tx, rx)
    }

    pub(super) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Locks a mutex of [`Shared`]; a poisoned lock only means another thread
/// panicked mid-publish of plain counters, which are still usable.
pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Room for one ESP-in-UDP datagram: the tunnel MTU plus the most ESP adds, rounded
/// up. Anything larger on the wire is not ours.
pub fn slot_len(mtu: usize) -> usize {
    (mtu + 128).next_power_of_two().max(2048)
}

/// How the TUN-to-UDP path is set up.
pub struct TxPath {
    /// The TUN queue (non-blocking).
    pub tun: File,
    /// The ESP-in-UDP socket.
    pub socket: UdpSocket,
    /// Where ESP goes.
    pub peer: SocketAddrV4,
    /// The outbound SA.
    pub sa: OutboundSa,
    /// Datagrams per `sendmmsg`.
    pub batch: usize,
    /// The TUN queue carries virtio headers (offloads on).
    pub vnet_hdr: bool,
    /// Inner packets above this are not sealed (counted as oversize).
    pub mtu: usize,
    /// Send runs of equal-length datagrams with UDP segmentation offload.
    pub udp_gso: bool,
}

struct TxState {
    batch: Batch,
    filled: usize,
    udp_gso: bool,
    counters: TxCounters,
}

impl TxState {
    fn flush(&mut self, socket: &UdpSocket) {
        send_batch(
            &mut self.batch,
            socket,
            self.filled,
            self.udp_gso,
            &mut self.counters,
        );
        self.filled = 0;
    }

    fn seal(&mut self, sa: &mut OutboundSa, socket: &UdpSocket, inner: &[u8], mtu: usize) {
        self.counters.inner_packets += 1;
        if inner.len() > mtu {
            self.counters.oversize += 1;
            return;
        }
        if self.filled == self.batch.slots() {
            self.flush(socket);
        }
        let slot = self.filled;
        // A refused seal is counted by the SA (`seal_refused`) and dropped.
        if let Ok(len) = sa.seal(inner, self.batch.slot_mut(slot)) {
            self.batch.set_len(slot, len);
            self.counters.udp_bytes += len as u64;
            self.filled += 1;
        }
    }
}

/// Sends slots `0..filled` of a sealed batch (with GSO if asked), counting the
/// calls and what was sent and refused.
pub(super) fn send_batch(
    batch: &mut Batch,
    socket: &UdpSocket,
    filled: usize,
    udp_gso: bool,
    counters: &mut TxCounters,
) {
    if filled == 0 {
        return;
    }
    let (sent, refused, calls, shared) = if udp_gso {
        batch.send_gso(socket, filled)
    } else {
        let (sent, refused) = batch.send(socket, filled);
        (sent, refused, 1, 0)
    };
    counters.send_calls += calls;
    counters.gso_datagrams += shared;
    counters.udp_packets += sent as u64;
    counters.send_errors += refused;
}

/// The TUN-to-UDP loop: read what the kernel routed into the tunnel (until the
/// queue is empty or a batch is full), seal each packet into a slot, send the batch
/// with one `sendmmsg`. Returns when asked to stop.
pub fn run_tx(mut path: TxPath, shared: &Shared) {
    let mut state = TxState {
        batch: Batch::new(path.batch, slot_len(path.mtu), Some(path.peer)),
        filled: 0,
        udp_gso: path.udp_gso,
        counters: TxCounters::default(),
    };
    let mut read_buf = vec![0u8; VNET_HDR_LEN + 65_536];
    let mut scratch = vec![0u8; 65_536];
    let tun_fd = path.tun.as_raw_fd();
    while !shared.stopping() {
        let mut reads = 0;
        while reads < path.batch {
            let len = match path.tun.read(&mut read_buf) {
                Ok(len) => len,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // WouldBlock: the queue is empty. Anything else (the device going
                // away at teardown) ends the round too; the stop flag ends the loop.
                Err(_) => break,
            };
            reads += 1;
            state.counters.tun_reads += 1;
            // A read's packets go out in one send, as one GSO group where they
            // fit one: flush first if they would straddle two batches.
            let packets = super::parallel::packets_in(&read_buf[..len], path.vnet_hdr);
            if state.filled > 0 && state.filled + packets > state.batch.slots() {
                state.flush(&path.socket);
            }
            if path.vnet_hdr {
                let Some(hdr) = VnetHdr::parse(&read_buf[..len]) else {
                    state.counters.offload_errors += 1;
                    continue;
                };
                let packet = &mut read_buf[VNET_HDR_LEN..len];
                let (sa, socket, mtu) = (&mut path.sa, &path.socket, path.mtu);
                match offload::segment(&hdr, packet, &mut scratch, |inner| {
                    state.seal(sa, socket, inner, mtu)
                }) {
                    Ok(n) if n > 1 => state.counters.segmented_reads += 1,
                    Ok(_) => {}
                    Err(_) => state.counters.offload_errors += 1,
                }
            } else {
                state.seal(&mut path.sa, &path.socket, &read_buf[..len], path.mtu);
            }
            if state.filled > 0 {
                state.batch.end_group(state.filled - 1);
            }
        }
        if state.filled > 0 {
            state.flush(&path.socket);
        }
        publish_tx(shared, &path.sa, &state.counters);
        if reads == 0 {
            shared.wakeup.wait_readable(tun_fd, Duration::from_secs(1));
        }
    }
    publish_tx(shared, &path.sa, &state.counters);
}

fn publish_tx(shared: &Shared, sa: &OutboundSa, counters: &TxCounters) {
    // A poisoned lock only means the stats thread panicked; keep publishing.
    let mut slot = shared.tx.lock().unwrap_or_else(|p| p.into_inner());
    *slot = (*sa.counters(), *counters);
}

/// How the UDP-to-TUN path is set up.
pub struct RxPath {
    /// The TUN queue (written to).
    pub tun: File,
    /// The ESP-in-UDP socket (with a receive timeout, so stop requests are seen).
    pub socket: UdpSocket,
    /// The inbound SAs.
    pub sas: InboundSet,
    /// Datagrams per `recvmmsg`.
    pub batch: usize,
    /// The TUN queue carries virtio headers: coalesce TCP segments before writing.
    pub vnet_hdr: bool,
    /// The tunnel MTU (sizes the receive slots).
    pub mtu: usize,
    /// The socket has `UDP_GRO`: a slot may hold several datagrams.
    pub udp_gro: bool,
}

/// The UDP-to-TUN loop: receive a batch with one `recvmmsg`, open each datagram,
/// write the inner packets to the TUN device (coalesced per TCP flow when offloads
/// are on). Returns when asked to stop.
pub fn run_rx(mut path: RxPath, shared: &Shared) {
    let slot = slot_len(path.mtu);
    // With UDP_GRO a slot takes a whole coalesced GSO send.
    let receive_slot = if path.udp_gro { 65_536 } else { slot };
    let mut batch = Batch::new(path.batch, receive_slot, None);
    // The inner packet is opened behind room for a virtio header, which stays zero:
    // a packet written as it is needs an empty header in front.
    let mut out = vec![0u8; VNET_HDR_LEN + slot];
    let header = if path.vnet_hdr { VNET_HDR_LEN } else { 0 };
    let mut coalescer = path.vnet_hdr.then(|| Coalescer::new(8));
    let mut counters = RxCounters::default();
    while !shared.stopping() {
        // A receive error (none is expected on a bound UDP socket) is a round
        // with nothing received; the stop flag still ends the loop.
        let n = batch.receive(&path.socket).unwrap_or_default();
        if n == 0 {
            continue;
        }
        counters.receive_calls += 1;
        for i in 0..n {
            let received = batch.received(i);
            let segment = batch.segment_size(i).unwrap_or(received.len()).max(1);
            if received.len() > segment {
                counters.gro_datagrams += received.len().div_ceil(segment) as u64;
            }
            // `chunks` yields nothing for an empty datagram, which is still one
            // datagram received (and dropped as unclassifiable).
            let empty: &[u8] = &[];
            let datagrams = received
                .chunks(segment)
                .chain(received.is_empty().then_some(empty));
            for datagram in datagrams {
                counters.udp_packets += 1;
                counters.udp_bytes += datagram.len() as u64;
                // The inbound set counts every outcome: keepalives and IKE are
                // ignored here, drops are counted under their reason.
                let len = match path.sas.receive_udp(datagram, &mut out[VNET_HDR_LEN..]) {
                    Inbound::Packet { inner, .. } => inner.len(),
                    Inbound::NatKeepalive | Inbound::NonEsp(_) | Inbound::Dropped(_) => continue,
                };
                deliver(
                    &mut path.tun,
                    &mut coalescer,
                    &out,
                    len,
                    header,
                    &mut counters,
                );
            }
        }
        if let Some(c) = coalescer.as_mut() {
            let tun = &mut path.tun;
            c.flush_all(|bytes| write_tun(tun, bytes, &mut counters));
            counters.coalesced = c.merged;
        }
        publish_rx(shared, &path.sas, &counters);
    }
    publish_rx(shared, &path.sas, &counters);
}

/// Writes one opened inner packet (at `out[VNET_HDR_LEN..][..len]`) to the TUN
/// device, or hands it to the coalescer, flushing what must go before it.
pub(super) fn deliver(
    tun: &mut File,
    coalescer: &mut Option<Coalescer>,
    out: &[u8],
    len: usize,
    header: usize,
    counters: &mut RxCounters,
) {
    let inner = &out[VNET_HDR_LEN..VNET_HDR_LEN + len];
    let Some(c) = coalescer.as_mut() else {
        write_tun(
            tun,
            &out[VNET_HDR_LEN - header..VNET_HDR_LEN + len],
            counters,
        );
        return;
    };
    loop {
        match c.push(inner) {
            Push::Held => return,
            Push::FlushThenRetry { flush } => write_tun(tun, c.take(flush), counters),
            Push::PassThrough { flush_first } => {
                if let Some(index) = flush_first {
                    write_tun(tun, c.take(index), counters);
                }
                write_tun(tun, &out[..VNET_HDR_LEN + len], counters);
                return;
            }
        }
    }
}

pub(super) fn write_tun(tun: &mut File, bytes: &[u8], counters: &mut RxCounters) {
    // A TUN write takes one whole packet or fails: a short count is an error.
    match tun.write(bytes) {
        Ok(n) if n == bytes.len() => counters.tun_writes += 1,
        _ => counters.tun_write_errors += 1,
    }
}

fn publish_rx(shared: &Shared, sas: &InboundSet, counters: &RxCounters) {
    let mut slot = shared.rx.lock().unwrap_or_else(|p| p.into_inner());
    *slot = (sas.accounting(), *counters);
}
