//! One request's connection: the socket (parked while a large body streams in),
//! its TLS state and the phase it is in.

use super::*;

/// A socket with a read buffer: OpenSSL's large reads (read-ahead fills its record
/// buffer) go straight to the socket, and any small read is served from memory so
/// that one `read` syscall serves several.
pub(super) struct Sock {
    pub(super) tcp: TcpStream,
    pub(super) buf: Box<[u8]>,
    pub(super) pos: usize,
    pub(super) end: usize,
}

/// Whether a body with `left` bytes still to read is parked between reads.
pub(super) fn parks(left: u64) -> bool {
    left > NAP_BYTES
}

/// The nap after a read that drained a body's socket: the time [`NAP_BYTES`] take at
/// the rate the body has come so far (`read` bytes since its first byte, `streaming`
/// ago), within [`NAP_MIN`] and [`NAP_MAX`]. The first nap, before there is a rate,
/// is the shortest.
pub(super) fn nap_for(read: u64, streaming: Duration) -> Duration {
    let secs = streaming.as_secs_f64();
    if read == 0 || secs <= 0.0 {
        return NAP_MIN;
    }
    Duration::from_secs_f64(NAP_BYTES as f64 * secs / read as f64).clamp(NAP_MIN, NAP_MAX)
}

/// A read at least this large bypasses [`Sock`]'s buffer.
pub(super) const DIRECT_READ: usize = 4096;

impl Read for Sock {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.end && out.len() >= DIRECT_READ {
            return self.tcp.read(out);
        }
        if self.pos == self.end {
            let n = self.tcp.read(&mut self.buf)?;
            self.pos = 0;
            self.end = n;
            if n == 0 {
                return Ok(0);
            }
        }
        let n = out.len().min(self.end - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

impl Write for Sock {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.tcp.write(data)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.tcp.flush()
    }
}

impl sampled::Wire for Sock {
    /// What the buffer holds first, then the socket's bytes straight into `out`,
    /// however few are asked (a record header's 5): never more than asked is read,
    /// so the kernel can discard what follows.
    fn read_into(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pos < self.end {
            let n = out.len().min(self.end - self.pos);
            out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
            self.pos += n;
            return Ok(n);
        }
        self.tcp.read(out)
    }

    fn discard(&mut self, n: usize) -> io::Result<usize> {
        if self.pos < self.end {
            let k = n.min(self.end - self.pos);
            self.pos += k;
            return Ok(k);
        }
        sampled::discard_fd(std::os::fd::AsRawFd::as_raw_fd(&self.tcp), n)
    }
}

pub(super) enum Phase {
    Connecting(Option<Sock>),
    Handshaking,
    Writing(usize),
    Head,
    Body,
    /// The response through the sampled path ([`sampled::Reader`]).
    Records(Box<sampled::Reader>),
}

pub(super) struct Conn {
    pub(super) phase: Phase,
    pub(super) tls: Option<SslStream<Sock>>,
    /// The socket of a plain-HTTP request ([`Client::plain`]), in place of `tls`.
    pub(super) plain: Option<Sock>,
    pub(super) head: Vec<u8>,
    pub(super) body_expected: u64,
    pub(super) body_read: u64,
    pub(super) scheduled: Instant,
    pub(super) started: Instant,
    pub(super) connected: Option<Instant>,
    pub(super) handshaked: Option<Instant>,
    pub(super) first_byte: Option<Instant>,
    /// Parked (out of the epoll set) until then; see [`NAP_BYTES`].
    pub(super) parked_until: Option<Instant>,
    /// Set by [`Worker::advance`]: the body's socket is drained and much is still to
    /// come, so it may be parked.
    pub(super) park: bool,
    /// Parked at least once (counted in [`Report::paced`]).
    pub(super) paced: bool,
    pub(super) resumed: bool,
}

impl Conn {
    /// A request scheduled at `scheduled` and started at `started`, nothing done yet.
    pub(super) fn new(phase: Phase, scheduled: Instant, started: Instant) -> Conn {
        Conn {
            phase,
            tls: None,
            plain: None,
            head: Vec::new(),
            body_expected: 0,
            body_read: 0,
            scheduled,
            started,
            connected: None,
            handshaked: None,
            first_byte: None,
            parked_until: None,
            park: false,
            paced: false,
            resumed: false,
        }
    }
}

impl Conn {
    /// The connection's socket once connected, under TLS or plain.
    pub(super) fn sock_mut(&mut self) -> Option<&mut Sock> {
        match (&mut self.tls, &mut self.plain) {
            (Some(t), _) => Some(t.get_mut()),
            (None, Some(p)) => Some(p),
            (None, None) => None,
        }
    }

    /// Writes from `data` under TLS or plain: Ok(bytes), Err(None) for "not now".
    pub(super) fn write(&mut self, data: &[u8]) -> Result<usize, Option<()>> {
        if let Some(t) = self.tls.as_mut() {
            return match t.ssl_write(data) {
                Ok(n) => Ok(n),
                Err(e) if want(&e) => Err(None),
                Err(_) => Err(Some(())),
            };
        }
        let Some(p) = self.plain.as_mut() else {
            return Err(Some(()));
        };
        match p.write(data) {
            Ok(n) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(None),
            Err(_) => Err(Some(())),
        }
    }

    /// Reads into `out` under TLS or plain.
    pub(super) fn read(&mut self, out: &mut [u8]) -> Got {
        if let Some(t) = self.tls.as_mut() {
            return match t.ssl_read(out) {
                Ok(0) => Got::Eof,
                Ok(n) => Got::Data(n),
                Err(e) if want(&e) => Got::NotNow,
                Err(e) if e.code() == ErrorCode::ZERO_RETURN => Got::Eof,
                Err(e) if e.code() == ErrorCode::SYSCALL && e.io_error().is_none() => Got::Eof,
                Err(_) => Got::Failed,
            };
        }
        let Some(p) = self.plain.as_mut() else {
            return Got::Failed;
        };
        match io::Read::read(p, out) {
            Ok(0) => Got::Eof,
            Ok(n) => Got::Data(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Got::NotNow,
            Err(_) => Got::Failed,
        }
    }
}

impl Conn {
    /// For a plain-HTTP body: drops up to `n` bytes unread (the kernel discards them
    /// without a copy, as the sampled path does a TLS record it does not open), so
    /// the generator's cost is the server's, not a copy of every byte; the length
    /// is still counted to the byte. None under TLS.
    pub(super) fn discard(&mut self, n: usize) -> Option<Got> {
        let p = self.plain.as_mut()?;
        Some(match sampled::Wire::discard(p, n) {
            Ok(0) => Got::Eof,
            Ok(k) => Got::Data(k),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Got::NotNow,
            Err(_) => Got::Failed,
        })
    }
}

/// What a read gave.
pub(super) enum Got {
    Data(usize),
    Eof,
    NotNow,
    Failed,
}

pub(super) enum Step {
    Pending,
    Ok,
    Failed(FailureReason),
}

pub(super) fn want(e: &openssl::ssl::Error) -> bool {
    e.code() == ErrorCode::WANT_READ || e.code() == ErrorCode::WANT_WRITE
}
