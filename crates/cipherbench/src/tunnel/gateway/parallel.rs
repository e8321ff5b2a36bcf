//! The gateway's data paths on several cores (`--gateway-threads N`, N >= 2): each
//! direction is an ordered pipeline ([`cipherbench_esp::pipeline`]), so one SA's
//! packets are sealed or opened by N workers at once and still leave in the order
//! they arrived (what wireguard-go and the kernel's `pcrypt` do for one flow).
//!
//! - TUN -> UDP: the `tun->udp` thread reads a job's worth of TUN packets (up to
//!   `batch` reads, offloaded super-packets included) and reserves one ESP sequence
//!   number per packet they will become, in arrival order; `seal/I` workers segment
//!   and seal into the job's datagram slots with their own cipher context on the
//!   SA; `seal-out` sends each job's datagrams with one `sendmmsg` (or GSO), in
//!   order. The sequence numbers on the wire therefore increase in the order the
//!   packets are sent.
//! - UDP -> TUN: the `udp->tun` thread receives a `recvmmsg` batch; `open/I` workers
//!   check and decrypt it with their own cipher context, reading the SA's one replay
//!   window to skip packets it already rejects; `open-out` settles each packet
//!   against the window in arrival order (RFC 4303 §3.4.3 as one receiver would
//!   apply it, see [`cipherbench_esp::Unsettled`]) and writes the accepted inner
//!   packets to the TUN device (coalesced per TCP flow with offloads on), in order.
//!
//! A pool of 2N + 2 jobs per direction circulates, so at most that many batches are
//! in flight. Neither direction needs a wider replay window for it: the sealed
//! datagrams leave in sequence order, and the receiver's window moves only in
//! arrival order, however far the workers run ahead of each other (a job of
//! GRO-coalesced datagrams can hold thousands).
//!
//! The reading and the writing threads stay single: one TUN queue and one UDP socket
//! per direction, so they are where this design stops scaling (their CPU is in the
//! per-thread figures).

use super::offload::{self, Coalescer, VnetHdr, GSO_ECN, GSO_NONE, VNET_HDR_LEN};
use super::pump::{self, lock, slot_len, RxPath, Shared, TxPath};
use super::stats::{RxCounters, TxCounters};
use super::sys::Batch;
use cipherbench_esp::pipeline::{self, Hooks, Stage};
use cipherbench_esp::{Accounting, InboundSet, OutboundSa, Reserved, Unsettled};
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Jobs in flight per direction for `workers` workers: two per worker keeps each
/// busy while the reader fills and the writer drains.
pub fn jobs(workers: usize) -> usize {
    2 * workers + 2
}

/// Bytes of TUN reads one sealing job holds (four 64 KiB super-packets).
const TX_ARENA: usize = 4 * (VNET_HDR_LEN + 65_536);
/// The most bytes one TUN read returns.
const MAX_READ: usize = VNET_HDR_LEN + 65_536;
/// Datagram slots of one sealing job; the reader stops adding reads when fewer
/// than [`SLOT_MARGIN`] are left, more than any one read of a tunnel of MTU 576 or
/// more can become.
const TX_SLOTS: usize = 512;
const SLOT_MARGIN: usize = 128;

/// How many ESP packets one TUN read will become: its segments when it is an
/// offloaded TCP super-packet, else one.
pub(super) fn packets_in(read: &[u8], vnet_hdr: bool) -> usize {
    if !vnet_hdr {
        return 1;
    }
    let Some(hdr) = VnetHdr::parse(read) else {
        return 1;
    };
    if hdr.gso_type & !GSO_ECN == GSO_NONE || hdr.gso_size == 0 {
        return 1;
    }
    let payload = read
        .len()
        .saturating_sub(VNET_HDR_LEN + usize::from(hdr.hdr_len));
    payload.div_ceil(usize::from(hdr.gso_size)).max(1)
}

struct TxJob {
    arena: Vec<u8>,
    /// (start, length) of each TUN read in `arena`.
    reads: Vec<(usize, usize)>,
    numbers: Option<Reserved>,
    out: Batch,
    filled: usize,
    /// This job's counts, summed by the consumer.
    counters: TxCounters,
}

struct SealWorker {
    index: usize,
    sa: OutboundSa,
    scratch: Vec<u8>,
}

/// Seals one inner packet into the job's next slot.
fn seal_one(
    sa: &mut OutboundSa,
    job_numbers: &mut Option<Reserved>,
    out: &mut Batch,
    filled: &mut usize,
    counters: &mut TxCounters,
    inner: &[u8],
    mtu: usize,
) {
    counters.inner_packets += 1;
    if inner.len() > mtu {
        counters.oversize += 1;
        return;
    }
    if *filled == out.slots() {
        // More segments than the reader counted (it never happens for a tunnel MTU
        // of 576 or more): dropped, and counted where offload failures are.
        counters.offload_errors += 1;
        return;
    }
    let slot = out.slot_mut(*filled);
    // A refused seal is counted by the SA (`seal_refused`) and dropped. With no
    // numbers reserved (the SA is exhausted) `seal` refuses as well.
    let sealed = match job_numbers {
        Some(numbers) => sa.seal_reserved(numbers, inner, slot),
        None => sa.seal(inner, slot),
    };
    if let Ok(len) = sealed {
        out.set_len(*filled, len);
        counters.udp_bytes += len as u64;
        *filled += 1;
    }
}

/// The TUN-to-UDP direction with `workers` seal workers; returns when asked to stop.
/// `on_start` runs first on each pipeline thread (pinning, CPU clock).
#[expect(
    clippy::too_many_lines,
    reason = "the send pipeline's reader, seal job and writer: closures of one pipeline::run call"
)]
pub fn run_tx(path: TxPath, workers: usize, shared: &Shared, on_start: &(dyn Fn(Stage) + Sync)) {
    let slot = slot_len(path.mtu);
    let jobs: Vec<TxJob> = (0..jobs(workers))
        .map(|_| TxJob {
            arena: vec![0u8; TX_ARENA],
            reads: Vec::with_capacity(path.batch),
            numbers: None,
            out: Batch::new(TX_SLOTS, slot, Some(path.peer)),
            filled: 0,
            counters: TxCounters::default(),
        })
        .collect();
    let states: Vec<SealWorker> = (0..workers)
        .filter_map(|index| {
            Some(SealWorker {
                index,
                // Keying a worker only fails if OpenSSL cannot make a context; the
                // pipeline then runs with the workers it has.
                sa: path.sa.worker().ok()?,
                scratch: vec![0u8; 65_536],
            })
        })
        .collect();
    if states.is_empty() {
        return;
    }
    *lock(&shared.seal_workers) = vec![Default::default(); workers];
    let tun_fd = path.tun.as_raw_fd();
    let (vnet_hdr, mtu, udp_gso) = (path.vnet_hdr, path.mtu, path.udp_gso);
    let mut total = TxCounters::default();
    // `Read` is implemented for `&File`: the reader needs no `&mut` to the queue.
    let (mut tun, sa, socket) = (&path.tun, &path.sa, &path.socket);
    pipeline::run(
        jobs,
        states,
        &Hooks {
            name: "seal",
            on_start,
        },
        |job| loop {
            if shared.stopping() {
                return false;
            }
            job.reads.clear();
            job.filled = 0;
            job.counters = TxCounters::default();
            let (mut used, mut packets) = (0, 0);
            while job.reads.len() < path.batch
                && used + MAX_READ <= job.arena.len()
                && packets + SLOT_MARGIN <= TX_SLOTS
            {
                let len = match tun.read(&mut job.arena[used..used + MAX_READ]) {
                    Ok(len) => len,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    // WouldBlock: the queue is empty (other errors end the round too).
                    Err(_) => break,
                };
                packets += packets_in(&job.arena[used..used + len], vnet_hdr);
                job.reads.push((used, len));
                used += len;
            }
            job.counters.tun_reads = job.reads.len() as u64;
            if job.reads.is_empty() {
                shared.wakeup.wait_readable(tun_fd, Duration::from_secs(1));
                continue;
            }
            // In arrival order: the numbers follow the packets onto the wire.
            job.numbers = sa.reserve(packets as u64);
            return true;
        },
        |worker, job| {
            let TxJob {
                arena,
                reads,
                numbers,
                out,
                filled,
                counters,
            } = job;
            for &(start, len) in reads.iter() {
                if !vnet_hdr {
                    let inner = &arena[start..start + len];
                    seal_one(&mut worker.sa, numbers, out, filled, counters, inner, mtu);
                    continue;
                }
                let Some(hdr) = VnetHdr::parse(&arena[start..start + len]) else {
                    counters.offload_errors += 1;
                    continue;
                };
                let packet = &mut arena[start + VNET_HDR_LEN..start + len];
                let sa = &mut worker.sa;
                let mut seal =
                    |inner: &[u8]| seal_one(sa, numbers, out, filled, counters, inner, mtu);
                match offload::segment(&hdr, packet, &mut worker.scratch, &mut seal) {
                    Ok(n) if n > 1 => counters.segmented_reads += 1,
                    Ok(_) => {}
                    Err(_) => counters.offload_errors += 1,
                }
                // One GSO group per read (Batch::end_group).
                if *filled > 0 {
                    out.end_group(*filled - 1);
                }
            }
            lock(&shared.seal_workers)[worker.index] = *worker.sa.counters();
        },
        |job| {
            pump::send_batch(&mut job.out, socket, job.filled, udp_gso, &mut job.counters);
            total.add(&job.counters);
            lock(&shared.tx).1 = total;
        },
    );
}

struct RxJob {
    batch: Batch,
    received: usize,
    /// Opened inner packets, each behind room for a virtio header that stays zero.
    arena: Vec<u8>,
    /// Each ESP packet opened into `arena` (at its start), for `open-out` to settle.
    opened: Vec<(usize, Unsettled)>,
    /// The worker's totals once it finished this job, published by `open-out` with
    /// the job's settled outcomes so that a snapshot never counts a datagram
    /// received without its outcome.
    totals: Option<(usize, Accounting, RxCounters)>,
}

struct OpenWorker {
    index: usize,
    sas: InboundSet,
    /// The datagrams this worker was given, published with its accounting.
    counters: RxCounters,
}

/// The UDP-to-TUN direction with `workers` open workers; returns when asked to stop.
#[expect(
    clippy::too_many_lines,
    reason = "the receive pipeline's reader, open job and writer: closures of one pipeline::run call"
)]
pub fn run_rx(path: RxPath, workers: usize, shared: &Shared, on_start: &(dyn Fn(Stage) + Sync)) {
    let slot = slot_len(path.mtu);
    let receive_slot = if path.udp_gro { 65_536 } else { slot };
    // Every datagram opens to at most its own length, plus a virtio header each.
    let arena_len = path.batch * receive_slot + path.batch * receive_slot / 40 * VNET_HDR_LEN;
    let jobs: Vec<RxJob> = (0..jobs(workers))
        .map(|_| RxJob {
            batch: Batch::new(path.batch, receive_slot, None),
            received: 0,
            arena: vec![0u8; arena_len + VNET_HDR_LEN + slot],
            opened: Vec::new(),
            totals: None,
        })
        .collect();
    let states: Vec<OpenWorker> = (0..workers)
        .filter_map(|index| {
            Some(OpenWorker {
                index,
                sas: path.sas.worker().ok()?,
                counters: RxCounters::default(),
            })
        })
        .collect();
    if states.is_empty() {
        return;
    }
    // One slot per worker (what it was given), one for `open-out` (the outcomes).
    *lock(&shared.open_workers) = vec![Default::default(); workers + 1];
    // `open-out`'s handle on the SAs: the same windows, its own counters.
    let Ok(mut settler) = path.sas.worker() else {
        return;
    };
    let header = if path.vnet_hdr { VNET_HDR_LEN } else { 0 };
    let mut coalescer = path.vnet_hdr.then(|| Coalescer::new(8));
    let mut written = RxCounters::default();
    let socket = &path.socket;
    let mut tun = path.tun;
    pipeline::run(
        jobs,
        states,
        &Hooks {
            name: "open",
            on_start,
        },
        |job| loop {
            if shared.stopping() {
                return false;
            }
            // The socket has a receive timeout, so the stop flag is seen.
            job.received = job.batch.receive(socket).unwrap_or_default();
            if job.received > 0 {
                return true;
            }
        },
        |worker, job| {
            job.opened.clear();
            let mut at = 0;
            for i in 0..job.received {
                let received = job.batch.received(i);
                let segment = job.batch.segment_size(i).unwrap_or(received.len()).max(1);
                if received.len() > segment {
                    worker.counters.gro_datagrams += received.len().div_ceil(segment) as u64;
                }
                let empty: &[u8] = &[];
                let datagrams = received
                    .chunks(segment)
                    .chain(received.is_empty().then_some(empty));
                for datagram in datagrams {
                    worker.counters.udp_packets += 1;
                    worker.counters.udp_bytes += datagram.len() as u64;
                    let room = &mut job.arena[at..];
                    room[..VNET_HDR_LEN].fill(0);
                    // Keepalives, IKE and drops are counted by the set and go no further.
                    let room = &mut room[VNET_HDR_LEN..];
                    if let Some(packet) = worker.sas.receive_udp_unsettled(datagram, room) {
                        job.opened.push((at, packet));
                        at += VNET_HDR_LEN + packet.written();
                    }
                }
            }
            job.totals = Some((worker.index, worker.sas.accounting(), worker.counters));
        },
        |job| {
            written.receive_calls += 1;
            for &(start, packet) in &job.opened {
                let inner = &mut job.arena[start + VNET_HDR_LEN..];
                let Ok(len) = settler.settle(packet, inner) else {
                    continue;
                };
                pump::deliver(
                    &mut tun,
                    &mut coalescer,
                    &job.arena[start..],
                    len,
                    header,
                    &mut written,
                );
            }
            if let Some(c) = coalescer.as_mut() {
                let tun = &mut tun;
                c.flush_all(|bytes| pump::write_tun(tun, bytes, &mut written));
                written.coalesced = c.merged;
            }
            {
                let mut published = lock(&shared.open_workers);
                if let Some((index, accounting, given)) = job.totals.take() {
                    published[index] = (accounting, given);
                }
                published[workers] = (settler.accounting(), RxCounters::default());
            }
            lock(&shared.rx).1 = written;
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tunnel::gateway::offload::{GSO_TCPV4, VNET_HDR_LEN};

    fn read_with(hdr: VnetHdr, payload: usize) -> Vec<u8> {
        let mut v = vec![0u8; VNET_HDR_LEN + usize::from(hdr.hdr_len) + payload];
        hdr.write(&mut v);
        v
    }

    #[test]
    fn counts_the_segments_a_super_packet_becomes() {
        let tso = VnetHdr {
            gso_type: GSO_TCPV4,
            hdr_len: 52,
            gso_size: 1348,
            ..VnetHdr::default()
        };
        assert_eq!(packets_in(&read_with(tso, 10_000), true), 8);
        assert_eq!(packets_in(&read_with(tso, 1348), true), 1);
        assert_eq!(packets_in(&read_with(VnetHdr::default(), 1000), true), 1);
        assert_eq!(packets_in(&[0u8; 1500], false), 1);
        assert_eq!(
            packets_in(&[0u8; 3], true),
            1,
            "malformed: one, refused later"
        );
        // The largest super-packet of the smallest MSS a 576-byte MTU allows fits
        // the margin the reader keeps.
        let small = VnetHdr {
            gso_size: 536,
            ..tso
        };
        assert!(packets_in(&read_with(small, 65_535 - 52), true) <= SLOT_MARGIN);
    }
}
