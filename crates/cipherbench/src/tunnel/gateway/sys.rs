//! The gateway's I/O shell: the system calls the ESP gateway needs that the standard
//! library does not offer (joining a network namespace, attaching to a TUN queue,
//! batched UDP with `recvmmsg`/`sendmmsg`, signal masks, an eventfd to wake
//! sleeping threads), and the one CPU-specific loop of the data path (the AVX2
//! checksum sum, [`word_sum`]). Thread CPU clocks and pinning are [`crate::host`]'s.
//!
//! Every `unsafe` block of the tunnel layer is in this file, each with its `SAFETY:`
//! argument. Nothing here knows about ESP, counters or the stats file: callers own
//! the policy, this module only wraps the calls and turns `-1` into `io::Error`.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// [`super::offload::word_sum`] with AVX2 where the CPU has it (about three times
/// faster than the baseline x86-64 build's SSE2 loop for a 1380-byte segment: 13 ns
/// against 41 ns on the 2 vCPU AMD EPYC guest of BENCHMARKS.md 5c), the portable
/// loop elsewhere. The gateway checksums every TCP segment it cuts from a TUN
/// super-packet.
pub fn word_sum(data: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above; the function only reads `data`.
        return unsafe { word_sum_avx2(data) };
    }
    super::offload::word_sum(data)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn word_sum_avx2(data: &[u8]) -> u64 {
    super::offload::word_sum(data)
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Sends SIGKILL to a process (one found inside a namespace of ours at cleanup).
pub fn kill(pid: i32) {
    // SAFETY: kill has no memory-safety preconditions; the caller names a process
    // it found inside one of this tool's own namespaces.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

/// Moves the calling thread into the network namespace `/run/netns/NAME` (what
/// `ip netns add` creates). Threads started afterwards inherit it; sockets and TUN
/// devices opened afterwards belong to it.
pub fn enter_netns(name: &str) -> io::Result<()> {
    let file = File::open(format!("/run/netns/{name}"))?;
    // SAFETY: setns takes a valid open descriptor (kept alive by `file` for the
    // call) and a namespace type constant; it touches no memory of ours.
    check(unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) })?;
    Ok(())
}

/// `struct ifreq` as TUNSETIFF reads it: the name and the flags, padded to the
/// kernel's 40 bytes.
#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// RFC-less but fixed by the kernel ABI (linux/virtio_net.h): the header that
/// precedes every packet on a TUN queue opened with `IFF_VNET_HDR`.
pub const VNET_HDR_LEN: usize = 10;

/// Attaches a queue of the existing multi-queue TUN device `name` (created by the
/// runner with `ip tuntap add ... multi_queue`), non-blocking. With `vnet_hdr`,
/// every read and write carries a [`VNET_HDR_LEN`]-byte virtio header and the
/// kernel may hand over TCP segments of up to 64 KiB (TSO) and partial checksums;
/// without, one plain IP packet per read and no offloads.
pub fn attach_tun(name: &str, vnet_hdr: bool) -> io::Result<File> {
    let path = CString::new("/dev/net/tun").map_err(io::Error::other)?;
    // SAFETY: a NUL-terminated path and plain flags; the returned descriptor is
    // owned below.
    let fd = check(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: `fd` was just opened and is owned by nobody else.
    let file = unsafe { File::from_raw_fd(fd) };
    if name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("TUN name {name:?} is longer than 15 bytes"),
        ));
    }
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags: (libc::IFF_TUN
            | libc::IFF_NO_PI
            | libc::IFF_MULTI_QUEUE
            | if vnet_hdr { libc::IFF_VNET_HDR } else { 0 }) as libc::c_short,
        _pad: [0; 22],
    };
    for (dst, src) in req.name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    // SAFETY: TUNSETIFF reads a `struct ifreq`; `req` has its layout (name then a
    // short, padded to 40 bytes) and lives across the call.
    check(unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut req) })?;
    let offload: libc::c_uint = if vnet_hdr {
        libc::TUN_F_CSUM | libc::TUN_F_TSO4
    } else {
        0
    };
    // Always set, also to 0: the offload features belong to the device and outlive
    // the previous gateway's queue; a plain reader must not inherit GSO packets.
    // SAFETY: TUNSETOFFLOAD takes its argument by value.
    check(unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETOFFLOAD, offload) })?;
    if vnet_hdr {
        let size: libc::c_int = VNET_HDR_LEN as libc::c_int;
        // SAFETY: TUNSETVNETHDRSZ reads an int through the pointer, valid for the call.
        check(unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETVNETHDRSZ, &size) })?;
    }
    Ok(file)
}

/// Binds the ESP-in-UDP socket with large buffers (`SO_*BUFFORCE`: we are root,
/// and the default 208 KiB overflows within a millisecond at gigabits) and a receive
/// timeout, so a thread blocked in `recvmmsg` notices a stop request.
pub fn bind_udp(local: SocketAddrV4, buffer_bytes: usize) -> io::Result<UdpSocket> {
    let socket = UdpSocket::bind(local)?;
    let size = buffer_bytes.min(i32::MAX as usize) as libc::c_int;
    for option in [libc::SO_RCVBUFFORCE, libc::SO_SNDBUFFORCE] {
        set_int_option(socket.as_raw_fd(), libc::SOL_SOCKET, option, size)?;
    }
    socket.set_read_timeout(Some(Duration::from_millis(100)))?;
    Ok(socket)
}

fn set_int_option(
    fd: RawFd,
    level: libc::c_int,
    option: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: setsockopt reads `size_of::<c_int>()` bytes from a live local.
    check(unsafe {
        libc::setsockopt(
            fd,
            level,
            option,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Asks the kernel to hand over coalesced datagrams (`UDP_GRO`): a GSO send from
/// the peer arrives as one buffer and [`Batch::segment_size`] says where to cut it.
pub fn enable_udp_gro(socket: &UdpSocket) -> io::Result<()> {
    set_int_option(socket.as_raw_fd(), libc::SOL_UDP, libc::UDP_GRO, 1)
}

/// The inode of a socket, to find its line (and its drop count) in `/proc/net/udp`.
pub fn socket_inode(socket: &UdpSocket) -> io::Result<u64> {
    Ok(std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(
        format!("/proc/self/fd/{}", socket.as_raw_fd()),
    )?))
}

fn sockaddr_in(addr: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(addr.ip().octets()),
        },
        sin_zero: [0; 8],
    }
}

/// A fixed set of datagram buffers and the `mmsghdr`/`iovec` arrays that point into
/// them, built once and reused for every batch (no allocation per packet).
pub struct Batch {
    /// One contiguous arena of `slots * slot_len` bytes; never reallocated, so the
    /// iovec pointers into it stay valid for the batch's life.
    arena: Box<[u8]>,
    slot_len: usize,
    lens: Vec<usize>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    /// Destination of sends (boxed, so the headers' pointer to it survives moves).
    peer: Option<Box<libc::sockaddr_in>>,
    /// One control-message buffer per header, 8-byte aligned: `UDP_SEGMENT` for a
    /// GSO send, `UDP_GRO` received.
    control: Box<[u64]>,
    /// Headers of a GSO send: one per group of equal-length slots.
    groups: Vec<libc::mmsghdr>,
    /// Slots per group of the last GSO send.
    group_sizes: Vec<usize>,
    /// Slots after which a GSO group must end (the last segment of one TUN read):
    /// each read leaves as a send of its own, and arrives as one `UDP_GRO` buffer.
    ends: Vec<bool>,
}

/// 64-bit words of control buffer per header: room for one `cmsghdr` and an int.
const CONTROL_WORDS: usize = 4;
/// The most segments one GSO send carries (the kernel's `UDP_MAX_SEGMENTS` is 64
/// on older kernels).
pub const GSO_MAX_SEGMENTS: usize = 64;
/// The most bytes one GSO send carries: an IPv4 datagram's 65535, less IPv4 and UDP
/// headers, rounded down.
pub const GSO_MAX_BYTES: usize = 65_000;

// SAFETY: the raw pointers inside `iovecs` and `headers` point only into heap memory
// the batch owns (`arena`, `iovecs`, `peer`), which moves with it; no other thread
// can reach them.
unsafe impl Send for Batch {}

impl Batch {
    /// `slots` buffers of `slot_len` bytes each. A batch for sending names its
    /// `peer`; a batch for receiving passes None.
    pub fn new(slots: usize, slot_len: usize, peer: Option<SocketAddrV4>) -> Batch {
        let mut batch = Batch {
            arena: vec![0u8; slots * slot_len].into_boxed_slice(),
            slot_len,
            lens: vec![0; slots],
            iovecs: Vec::with_capacity(slots),
            headers: Vec::with_capacity(slots),
            peer: peer.map(|p| Box::new(sockaddr_in(p))),
            control: vec![0u64; slots * CONTROL_WORDS].into_boxed_slice(),
            groups: Vec::with_capacity(slots),
            group_sizes: vec![0; slots],
            ends: vec![false; slots],
        };
        let base = batch.arena.as_mut_ptr();
        for i in 0..slots {
            batch.iovecs.push(libc::iovec {
                // SAFETY: i * slot_len is within the arena (i < slots).
                iov_base: unsafe { base.add(i * slot_len) }.cast(),
                iov_len: slot_len,
            });
        }
        let (name, name_len): (*mut libc::c_void, libc::socklen_t) = match &mut batch.peer {
            Some(p) => (
                (&mut **p as *mut libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            ),
            None => (std::ptr::null_mut(), 0),
        };
        for i in 0..slots {
            // SAFETY: mmsghdr is plain data for which all-zero is a valid value.
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_iov = &mut batch.iovecs[i];
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_name = name;
            h.msg_hdr.msg_namelen = name_len;
            batch.headers.push(h);
            batch.groups.push(h);
        }
        batch
    }

    /// Number of slots.
    pub fn slots(&self) -> usize {
        self.lens.len()
    }

    /// The whole buffer of slot `i`, to fill before a send.
    pub fn slot_mut(&mut self, i: usize) -> &mut [u8] {
        &mut self.arena[i * self.slot_len..(i + 1) * self.slot_len]
    }

    /// The bytes received into slot `i` by the last [`Batch::receive`].
    pub fn received(&self, i: usize) -> &[u8] {
        &self.arena[i * self.slot_len..i * self.slot_len + self.lens[i]]
    }

    /// Ends a GSO group after slot `i` in the next [`Batch::send_gso`] (cleared by
    /// the send).
    pub fn end_group(&mut self, i: usize) {
        if let Some(end) = self.ends.get_mut(i) {
            *end = true;
        }
    }

    /// Sets how many bytes of slot `i` the next send carries.
    pub fn set_len(&mut self, i: usize, len: usize) {
        self.lens[i] = len.min(self.slot_len);
    }

    /// Sends slots `0..n` to the peer with as few `sendmmsg` calls as it takes
    /// (blocking while the socket buffer is full: that is the back-pressure).
    /// Returns (sent, refused): a datagram the kernel refuses (ENOBUFS, an ICMP
    /// error reported as ECONNREFUSED) is skipped and counted.
    pub fn send(&mut self, socket: &UdpSocket, n: usize) -> (usize, u64) {
        debug_assert!(self.peer.is_some(), "a send batch needs a peer");
        for i in 0..n {
            self.iovecs[i].iov_len = self.lens[i];
        }
        let mut done = 0;
        let mut refused = 0u64;
        while done < n {
            // SAFETY: headers[done..n] are initialised, their iovecs point into the
            // arena with lengths within their slots, and their name points to the
            // boxed peer; everything outlives the call.
            let ret = unsafe {
                libc::sendmmsg(
                    socket.as_raw_fd(),
                    self.headers[done..].as_mut_ptr(),
                    (n - done) as libc::c_uint,
                    0,
                )
            };
            if ret < 0 {
                if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                refused += 1;
                done += 1;
            } else {
                done += ret as usize;
            }
        }
        for i in 0..n {
            self.iovecs[i].iov_len = self.slot_len;
        }
        self.ends[..n].fill(false);
        (n - refused as usize, refused)
    }

    /// Sends slots `0..n` like [`Batch::send`], but with UDP segmentation offload:
    /// each run of consecutive slots of one length (the last may be shorter) goes
    /// out as one `UDP_SEGMENT` message, which the kernel splits into the same
    /// datagrams only when it must (at a real NIC, or for a receiver without
    /// `UDP_GRO`). Returns (datagrams sent, datagrams refused, system calls,
    /// datagrams that shared a message with others).
    pub fn send_gso(&mut self, socket: &UdpSocket, n: usize) -> (usize, u64, u64, u64) {
        debug_assert!(self.peer.is_some(), "a send batch needs a peer");
        for i in 0..n {
            self.iovecs[i].iov_len = self.lens[i];
        }
        let mut groups = 0;
        let mut i = 0;
        while i < n {
            let segment = self.lens[i];
            let mut count = 1;
            let mut total = segment;
            while i + count < n
                && count < GSO_MAX_SEGMENTS
                && !self.ends[i + count - 1]
                && self.lens[i + count - 1] == segment
                && self.lens[i + count] <= segment
                && total + self.lens[i + count] <= GSO_MAX_BYTES
            {
                total += self.lens[i + count];
                count += 1;
            }
            let control = self.control[groups * CONTROL_WORDS..].as_mut_ptr();
            let h = &mut self.groups[groups].msg_hdr;
            h.msg_iov = &mut self.iovecs[i];
            h.msg_iovlen = count;
            if count > 1 {
                // SAFETY: `control` points at CONTROL_WORDS * 8 = 32 bytes of this
                // group's own, 8-byte aligned buffer, enough for CMSG_SPACE(2) = 24;
                // the CMSG macros only compute offsets within it.
                unsafe {
                    h.msg_control = control.cast();
                    h.msg_controllen = libc::CMSG_SPACE(2) as usize;
                    let cmsg = libc::CMSG_FIRSTHDR(h);
                    (*cmsg).cmsg_level = libc::SOL_UDP;
                    (*cmsg).cmsg_type = libc::UDP_SEGMENT;
                    (*cmsg).cmsg_len = libc::CMSG_LEN(2) as usize;
                    std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), segment as u16);
                }
            } else {
                h.msg_control = std::ptr::null_mut();
                h.msg_controllen = 0;
            }
            self.group_sizes[groups] = count;
            groups += 1;
            i += count;
        }
        let mut done = 0;
        let mut refused = 0u64;
        let mut calls = 0u64;
        while done < groups {
            calls += 1;
            // SAFETY: groups[done..groups] are initialised; their iovecs point into
            // the arena with lengths within their slots, their names at the boxed
            // peer and their control data at this batch's buffers; all outlive
            // the call.
            let ret = unsafe {
                libc::sendmmsg(
                    socket.as_raw_fd(),
                    self.groups[done..].as_mut_ptr(),
                    (groups - done) as libc::c_uint,
                    0,
                )
            };
            if ret < 0 {
                if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                refused += self.group_sizes[done] as u64;
                done += 1;
            } else {
                done += ret as usize;
            }
        }
        for i in 0..n {
            self.iovecs[i].iov_len = self.slot_len;
        }
        self.ends[..n].fill(false);
        let shared = self.group_sizes[..groups]
            .iter()
            .filter(|&&c| c > 1)
            .sum::<usize>() as u64;
        (n - refused as usize, refused, calls, shared)
    }

    /// After a [`Batch::receive`] on a socket with `UDP_GRO`: the size of the
    /// datagrams the kernel coalesced into slot `i` (None: one datagram).
    pub fn segment_size(&self, i: usize) -> Option<usize> {
        let h = &self.headers[i].msg_hdr;
        if h.msg_control.is_null() || h.msg_controllen < std::mem::size_of::<libc::cmsghdr>() {
            return None;
        }
        // SAFETY: the kernel wrote `msg_controllen` bytes of well-formed control
        // messages into this header's own buffer (CONTROL_WORDS * 8 bytes); the
        // CMSG macros stay within `msg_controllen`, and the int is read unaligned.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(h);
            if cmsg.is_null()
                || (*cmsg).cmsg_level != libc::SOL_UDP
                || (*cmsg).cmsg_type != libc::UDP_GRO
            {
                return None;
            }
            let size = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
            usize::try_from(size).ok().filter(|&s| s > 0)
        }
    }

    /// Receives a batch: blocks (up to the socket's receive timeout) for the first
    /// datagram, then takes what is already queued. Returns how many arrived, 0 on a
    /// timeout.
    pub fn receive(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        self.receive_with(socket, libc::MSG_WAITFORONE, self.lens.len())
    }

    /// Receives what is already queued, into at most `max` slots, without
    /// waiting. Returns how many arrived, 0 when none was queued.
    pub fn receive_now(&mut self, socket: &UdpSocket, max: usize) -> io::Result<usize> {
        self.receive_with(socket, libc::MSG_DONTWAIT, max.clamp(1, self.lens.len()))
    }

    fn receive_with(
        &mut self,
        socket: &UdpSocket,
        flags: libc::c_int,
        slots: usize,
    ) -> io::Result<usize> {
        let slots = slots.min(self.headers.len());
        for (i, h) in self.headers[..slots].iter_mut().enumerate() {
            // The kernel overwrites the length with what it wrote: reset it.
            h.msg_hdr.msg_control = self.control[i * CONTROL_WORDS..].as_mut_ptr().cast();
            h.msg_hdr.msg_controllen = CONTROL_WORDS * 8;
        }
        // SAFETY: the first `slots` headers (no more than there are) each point at
        // their own iovec, which points at its own slot of `slot_len` bytes in the
        // arena, and at their own control buffer of `msg_controllen` bytes; all
        // outlive the call. No source address is asked for (null name). A null
        // timeout leaves the socket's own.
        let ret = unsafe {
            libc::recvmmsg(
                socket.as_raw_fd(),
                self.headers.as_mut_ptr(),
                slots as libc::c_uint,
                flags,
                std::ptr::null_mut(),
            )
        };
        if ret < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock
                | io::ErrorKind::TimedOut
                | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        let n = ret as usize;
        for i in 0..n {
            // A datagram larger than the slot is truncated by the kernel; the ESP
            // layer then drops it (its ICV cannot verify).
            self.lens[i] = (self.headers[i].msg_len as usize).min(self.slot_len);
        }
        Ok(n)
    }
}

/// An eventfd: the stop signal a sleeping thread can `poll` on.
pub struct Wakeup(OwnedFd);

impl Wakeup {
    /// A new, unsignalled eventfd.
    pub fn new() -> io::Result<Wakeup> {
        // SAFETY: plain flags; the descriptor is owned below.
        let fd = check(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
        // SAFETY: just created, owned by nobody else.
        Ok(Wakeup(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Wakes every poller (the eventfd stays readable: it is never drained).
    pub fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live local to our own descriptor.
        unsafe {
            libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8);
        }
    }

    /// Waits until any of `fds` (at most two) is readable or the wakeup fires.
    pub fn wait_any(&self, fds: &[RawFd], timeout: Duration) {
        let pollfd = |fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let mut set = [pollfd(self.0.as_raw_fd()), pollfd(-1), pollfd(-1)];
        for (slot, &fd) in set[1..].iter_mut().zip(fds) {
            slot.fd = fd;
        }
        let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: three initialised pollfd structs in a live array (poll ignores
        // the negative descriptors of unused ones).
        unsafe { libc::poll(set.as_mut_ptr(), set.len() as libc::nfds_t, ms) };
    }

    /// Waits until `fd` is readable or the wakeup fires; returns false if woken.
    pub fn wait_readable(&self, fd: RawFd, timeout: Duration) -> bool {
        let mut fds = [
            libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.0.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: two initialised pollfd structs in a live array.
        let ret = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
        !(ret > 0 && fds[1].revents != 0)
    }
}

/// The signals the gateway handles synchronously (stop, snapshot).
pub struct Signals(libc::sigset_t);

/// What arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM, SIGINT or SIGHUP: stop.
    Stop,
    /// SIGUSR1: write a stats snapshot now.
    Snapshot,
}

impl Signals {
    /// Blocks SIGTERM, SIGINT, SIGHUP and SIGUSR1 in the calling thread (and so in
    /// every thread it starts afterwards), to be taken with [`Signals::wait`].
    pub fn block() -> io::Result<Signals> {
        // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise it and
        // pthread_sigmask reads it for the call.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGUSR1] {
                libc::sigaddset(&mut set, s);
            }
            let ret = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            if ret != 0 {
                return Err(io::Error::from_raw_os_error(ret));
            }
            Ok(Signals(set))
        }
    }

    /// Waits up to `timeout` for one of the blocked signals.
    pub fn wait(&self, timeout: Duration) -> Option<Signal> {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: the set was initialised in `block`; a null siginfo is allowed.
        let ret = unsafe { libc::sigtimedwait(&self.0, std::ptr::null_mut(), &ts) };
        match ret {
            libc::SIGUSR1 => Some(Signal::Snapshot),
            s if s > 0 => Some(Signal::Stop),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Loopback keeps a GSO send whole up to a socket with `UDP_GRO`, so what one
    /// receive returns shows how the sender grouped its datagrams.
    fn gso_pair() -> (UdpSocket, UdpSocket, SocketAddrV4) {
        let receiver = UdpSocket::bind("127.0.0.1:0").expect("binding the receiver");
        enable_udp_gro(&receiver).expect("UDP_GRO");
        receiver
            .set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        let to = match receiver.local_addr().expect("address") {
            std::net::SocketAddr::V4(a) => a,
            other => panic!("{other}"),
        };
        let sender = UdpSocket::bind("127.0.0.1:0").expect("binding the sender");
        (sender, receiver, to)
    }

    fn received_groups(receiver: &UdpSocket, datagrams: usize) -> Vec<(usize, Option<usize>)> {
        let mut batch = Batch::new(8, 65_536, None);
        let mut got = Vec::new();
        let mut total = 0;
        while total < datagrams {
            let n = batch.receive(receiver).expect("receive");
            assert!(n > 0, "timed out after {total} datagrams: {got:?}");
            for i in 0..n {
                let size = batch.segment_size(i);
                let len = batch.received(i).len();
                total += size.map_or(1, |s| len.div_ceil(s));
                got.push((len, size));
            }
        }
        got
    }

    #[test]
    fn a_gso_send_ends_its_groups_where_told_and_at_a_shorter_datagram() {
        let (sender, receiver, to) = gso_pair();
        let mut batch = Batch::new(8, 2048, Some(to));
        // Two reads of three datagrams: 100, 100, 100 | 100, 100, 60.
        for (i, len) in [100, 100, 100, 100, 100, 60].into_iter().enumerate() {
            batch.slot_mut(i)[..len].fill(i as u8);
            batch.set_len(i, len);
        }
        batch.end_group(2);
        let (sent, refused, _, shared) = batch.send_gso(&sender, 6);
        assert_eq!((sent, refused, shared), (6, 0, 6));
        let groups = received_groups(&receiver, 6);
        assert_eq!(groups, vec![(300, Some(100)), (260, Some(100))]);

        // Without the mark, one group; and the mark does not outlive its send.
        for (i, len) in [100, 100, 100, 100, 100, 60].into_iter().enumerate() {
            batch.set_len(i, len);
        }
        batch.send_gso(&sender, 6);
        assert_eq!(received_groups(&receiver, 6), vec![(560, Some(100))]);
    }
}
