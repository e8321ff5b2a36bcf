//! The sampled receive path (issue 30): a response read off the socket record by
//! record, with only some records opened, so the generator costs a fraction of the
//! server that encrypts every byte.
//!
//! After the handshake and the request (OpenSSL's), the reader takes the socket.
//! A record is **opened** (read into memory, authenticated and decrypted with the
//! keys of [`super::secrets`]) when it:
//! - comes before the end of the HTTP head (the status line, `Content-Length`);
//! - is not a full record (16 KiB of plaintext), as its header says;
//! - holds the body's last byte, as far as the records' lengths say;
//! - is drawn by the sample (each body record with probability `rate`), or belongs
//!   to a response drawn to be opened whole (probability `whole`).
//!
//! Any other record is **discarded** by the kernel without a copy (`recv` with
//! `MSG_TRUNC` on a TCP socket) and only its sequence number is used up. From a
//! server of ours (its content known: nginx, which fills its records), a run of
//! records not drawn is discarded in one call, as so many full records, from the
//! first one's header to the next drawn one's (at most [`MAX_RUN`]), so a skipped
//! record costs no system call of its own; another server's are discarded one at a
//! time, each header read. An opened body record is compared with
//! the file's known content at its offset where the content is known
//! ([`Content`]).
//!
//! What cannot pass unseen:
//! - a short record inside a discarded run: the bytes after the run are then not a
//!   record header (type 23 or 21, version 3.3, a length TLS allows: a chance of
//!   about 3 in 10^8 that ciphertext passes for one), and the records' count is off,
//!   so the body's last record fails to authenticate: loudly;
//! - a byte altered anywhere in an opened record (its tag);
//! - a truncated response: the connection ends before the body's last record, or
//!   that record is not where the lengths say (the content check, or the count);
//! - a response of the wrong length: `Content-Length` against the expected length,
//!   and the records' lengths against `Content-Length`;
//! - TLS 1.3 hides a record's real type inside it. A full-length record that is
//!   not application data (a padded alert, ticket or key update) would be discarded,
//!   but a key update changes the keys, so the body's last record, always opened,
//!   fails to authenticate; an alert ends the stream, so the body comes short; and a
//!   padded ticket shifts every later offset, which the content check of the last
//!   record sees (without known content, only the count: the residual risk).
//! - a record altered in the discarded part is not seen: that is the sample's
//!   bargain, and its rate is recorded with the counts of what was opened.

use super::http::{self, Parsed};
use cipherbench_crypto::tls_record::{
    content, parse_header, RecordError, RecordOpener, HEADER_LEN,
};
use cipherbench_model::tls::FailureReason;
use std::io;

/// The bytes a response's file holds, to compare opened body records with: the
/// AES-128-CTR keystream of a key of the run's (the file is written from it,
/// `nginx::Workspace`), so any offset can be checked without the file.
pub struct Content {
    keystream: cipherbench_crypto::ctr::Keystream,
    expect: Vec<u8>,
}

impl Content {
    /// The content made from `key` (16 bytes).
    pub fn new(key: &[u8; 16]) -> Result<Content, cipherbench_crypto::CryptoError> {
        Ok(Content {
            keystream: cipherbench_crypto::ctr::Keystream::new(key)?,
            expect: Vec::new(),
        })
    }

    /// Whether `bytes` are the content at `offset`.
    fn matches(&mut self, offset: u64, bytes: &[u8]) -> bool {
        self.expect.resize(bytes.len(), 0);
        self.keystream.at(offset, &mut self.expect).is_ok() && self.expect[..] == *bytes
    }
}

/// How a run's responses were read: by sample, or whole through OpenSSL.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Verified {
    /// Responses read by the sampled path.
    pub sampled: u64,
    /// Responses read whole through OpenSSL (every byte decrypted there).
    pub by_openssl: u64,
    /// What the sampled path opened and discarded.
    pub counts: Counts,
}

impl Verified {
    /// Adds another's.
    pub fn add(&mut self, o: &Verified) {
        self.sampled += o.sampled;
        self.by_openssl += o.by_openssl;
        self.counts.add(&o.counts);
    }
}

/// How the generator checks what it reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verify {
    /// Every response whole through OpenSSL (every byte decrypted, as wrk).
    All,
    /// Responses of at least [`SAMPLED_FROM`] bytes by the sampled path.
    Sampled(Sampling),
}

/// The smallest response read by sample: 64 full records. Below, the records a
/// sample must open anyway (the head's, the last, the short ones) are most of them.
pub const SAMPLED_FROM: u64 = 1 << 20;

/// The default sample: one body record in 16, and one response in 64 whole.
pub const DEFAULT_SAMPLING: Sampling = Sampling {
    rate: 1.0 / 16.0,
    whole: 1.0 / 64.0,
};

/// How much of a response is opened.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    /// Each full body record is opened with this probability (0 to 1).
    pub rate: f64,
    /// Each response is opened whole with this probability (0 to 1).
    pub whole: f64,
}

/// What a response's reading has counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Records opened (authenticated and decrypted).
    pub opened: u64,
    /// Their bytes on the wire.
    pub opened_bytes: u64,
    /// Records discarded unopened.
    pub discarded: u64,
    /// Their bytes on the wire.
    pub discarded_bytes: u64,
    /// Body bytes compared with the known content.
    pub compared_bytes: u64,
}

impl Counts {
    /// Adds another's.
    pub fn add(&mut self, o: &Counts) {
        self.opened += o.opened;
        self.opened_bytes += o.opened_bytes;
        self.discarded += o.discarded;
        self.discarded_bytes += o.discarded_bytes;
        self.compared_bytes += o.compared_bytes;
    }
}

/// Where the socket's bytes come from: reads, and discards that copy nothing.
pub trait Wire {
    /// Reads into `out` (0: the peer closed; `WouldBlock`: nothing now).
    fn read_into(&mut self, out: &mut [u8]) -> io::Result<usize>;
    /// Drops up to `n` bytes unread; how many.
    fn discard(&mut self, n: usize) -> io::Result<usize>;
}

/// Drops up to `n` bytes of a TCP socket's receive queue without copying them
/// (`MSG_TRUNC`, tcp(7)).
pub fn discard_fd(fd: std::os::fd::RawFd, n: usize) -> io::Result<usize> {
    // SAFETY: with MSG_TRUNC a TCP socket discards the bytes and writes nothing to
    // the buffer, which may then be null; `fd` is the caller's open socket.
    let r = unsafe {
        libc::recv(
            fd,
            std::ptr::null_mut(),
            n,
            libc::MSG_TRUNC | libc::MSG_DONTWAIT,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Where the reader is in the byte stream.
enum At {
    /// Reading a header: bytes of it so far.
    Header(usize),
    /// Reading a record to open: its header, length, bytes so far.
    Open { len: usize, got: usize },
    /// Discarding a run of `records` full records, the first's header read: bytes
    /// left, and how many of them are behind already (counted as they pass, so the
    /// body's progress is current while a run is under way).
    Discard {
        left: usize,
        records: u64,
        passed: u64,
    },
}

/// The longest run of records discarded in one go: 1 MiB of body, so the bytes
/// counted (at the run's end) stay fine-grained against a point's intervals.
const MAX_RUN: u64 = 64;

/// How a read ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing more to read now; the response is not complete.
    Pending,
    /// The whole body arrived and checked.
    Done,
    /// The response failed, with why (for the point's failure counts) and a word.
    Failed(FailureReason, &'static str),
}

/// Reads one response off the socket.
pub struct Reader {
    opener: RecordOpener,
    sampling: Sampling,
    whole: bool,
    rng: u64,
    at: At,
    /// The sample drew the next full body record to be opened (a run's end).
    open_next: bool,
    /// The header being read follows a run of discarded records.
    after_run: bool,
    header: [u8; HEADER_LEN],
    /// Where opened records are read to (as long as the longest so far).
    record: Vec<u8>,
    head: Vec<u8>,
    /// Content-Length, once the head is parsed.
    expected: Option<u64>,
    /// What the response must be (the file's length), if known.
    must_be: Option<u64>,
    /// Body bytes so far (opened or counted by length).
    body: u64,
    content: Option<Content>,
    /// What was opened and discarded.
    pub counts: Counts,
    /// Whether any byte of the response arrived (its time to first byte).
    started: bool,
}

impl Reader {
    /// A reader for one response, whose first record has the opener's sequence
    /// number; `seed` draws its samples, `must_be` is the body's known length.
    pub fn new(
        opener: RecordOpener,
        sampling: Sampling,
        seed: u64,
        must_be: Option<u64>,
        content: Option<Content>,
    ) -> Reader {
        // splitmix64 of the seed: xorshift's first draws from a small seed are small.
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        let mut rng = (z ^ (z >> 31)) | 1;
        let whole = unit(&mut rng) < sampling.whole;
        Reader {
            opener,
            sampling,
            whole,
            rng,
            at: At::Header(0),
            open_next: false,
            after_run: false,
            header: [0; HEADER_LEN],
            record: Vec::new(),
            head: Vec::new(),
            expected: None,
            must_be,
            body: 0,
            content,
            counts: Counts::default(),
            started: false,
        }
    }

    /// Body bytes so far.
    pub fn body(&self) -> u64 {
        self.body
    }

    /// Content-Length, once known.
    pub fn expected(&self) -> Option<u64> {
        self.expected
    }

    /// Whether any byte of the response has arrived.
    pub fn started(&self) -> bool {
        self.started
    }

    /// Reads what the wire has; returns when it has nothing more now, or the
    /// response ended. `received` is told of every body byte counted.
    pub fn read(&mut self, wire: &mut impl Wire, mut received: impl FnMut(u64)) -> Outcome {
        loop {
            match self.at {
                At::Header(got) => {
                    let n = match wire.read_into(&mut self.header[got..]) {
                        Ok(0) => return self.ended(),
                        Ok(n) => {
                            self.started = true;
                            n
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Outcome::Pending,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(_) => return Outcome::Failed(FailureReason::Io, "read"),
                    };
                    if got + n < HEADER_LEN {
                        self.at = At::Header(got + n);
                        continue;
                    }
                    let (outer, len) = parse_header(&self.header);
                    // Every protected record's outer type (TLS 1.3), and TLS 1.2's
                    // after the handshake but an alert, all with version 3.3.
                    let in_place = (outer == content::APPLICATION_DATA || outer == content::ALERT)
                        && self.header[1..3] == [3, 3]
                        && len <= self.opener.full_record() + 256;
                    if !in_place {
                        return Outcome::Failed(
                            FailureReason::Integrity,
                            if std::mem::take(&mut self.after_run) {
                                "a record header out of place after discarded records \
                                 (a short record among them: --verify all reads a server \
                                 that writes those)"
                            } else {
                                "a record header of an unexpected type, version or length"
                            },
                        );
                    }
                    self.after_run = false;
                    let run = self.discards(outer, len);
                    if run == 0 {
                        if self.record.len() < len {
                            self.record.resize(len, 0);
                        }
                        self.at = At::Open { len, got: 0 };
                        if len == 0 {
                            if let Some(o) = self.complete_open(0, &mut received) {
                                return o;
                            }
                        }
                    } else {
                        let left = len + (run as usize - 1) * (HEADER_LEN + len);
                        self.at = At::Discard {
                            left,
                            records: run,
                            passed: 0,
                        };
                    }
                }
                At::Open { len, got } => {
                    let n = match wire.read_into(&mut self.record[got..len]) {
                        Ok(0) => return self.ended(),
                        Ok(n) => n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Outcome::Pending,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(_) => return Outcome::Failed(FailureReason::Io, "read"),
                    };
                    self.at = At::Open { len, got: got + n };
                    if got + n == len {
                        if let Some(o) = self.complete_open(len, &mut received) {
                            return o;
                        }
                    }
                }
                At::Discard {
                    left,
                    records,
                    passed,
                } => {
                    if let Some(o) = self.discard_run(wire, left, records, passed, &mut received) {
                        return o;
                    }
                }
            }
        }
    }

    /// Goes on with a run of discards (`At::Discard`): `Some` when the read ends
    /// here (nothing more now, or the response ended), `None` to read on.
    fn discard_run(
        &mut self,
        wire: &mut impl Wire,
        left: usize,
        records: u64,
        passed: u64,
        received: &mut impl FnMut(u64),
    ) -> Option<Outcome> {
        let n = match wire.discard(left) {
            Ok(0) => return Some(self.ended()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Some(Outcome::Pending),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return None,
            Err(_) => return Some(Outcome::Failed(FailureReason::Io, "read")),
        };
        // Discarded records are full ones: their plaintext's length is known. Were
        // one of them short, the next header is out of place (checked in `read`) or
        // the sequence numbers are, and the body's last record, always opened, does
        // not authenticate.
        let on_wire = HEADER_LEN + self.opener.full_record();
        let left = left - n;
        // The run is `records` records on the wire less the first's header.
        let dropped = records as usize * on_wire - HEADER_LEN - left;
        let now_passed = ((dropped + HEADER_LEN) / on_wire) as u64;
        self.pass(now_passed - passed, received);
        if left > 0 {
            self.at = At::Discard {
                left,
                records,
                passed: now_passed,
            };
            return None;
        }
        self.after_run = records > 1;
        self.at = At::Header(0);
        self.after_body_bytes()
    }

    /// Counts `records` discarded full records: their sequence numbers used up,
    /// their plaintext added to the body.
    fn pass(&mut self, records: u64, received: &mut impl FnMut(u64)) {
        if records == 0 {
            return;
        }
        let full = self.opener.full_record();
        self.opener.skip(records);
        self.counts.discarded += records;
        self.counts.discarded_bytes += records * (HEADER_LEN + full) as u64;
        let plain = records * (full - self.opener.overhead()) as u64;
        self.body += plain;
        received(plain);
    }

    /// How many records, from the one whose header was just read, are discarded
    /// (0: it is opened). Each full body record is drawn with the sample's rate, as
    /// if one by one; a run of undrawn ones is discarded in one call, so a 16 KiB
    /// record costs no system call of its own. A run ends before the record that
    /// holds the body's last byte, and at [`MAX_RUN`].
    fn discards(&mut self, outer: u8, len: usize) -> u64 {
        let Some(expected) = self.expected else {
            return 0;
        };
        let drawn = std::mem::take(&mut self.open_next);
        if outer != content::APPLICATION_DATA
            || len != self.opener.full_record()
            || self.whole
            || drawn
        {
            return 0;
        }
        let plain = (len - self.opener.overhead()) as u64;
        // Records wholly before the body's last byte.
        let before_last = expected.saturating_sub(self.body + 1) / plain;
        // Runs where the server is ours (its content known, so nginx, which fills
        // its records); one record at a time elsewhere, so a server that writes
        // short records in mid-body is read, each header seen.
        let most = before_last.min(if self.content.is_some() { MAX_RUN } else { 1 });
        let mut run = 0;
        while run < most {
            if unit(&mut self.rng) < self.sampling.rate {
                // This one is drawn: opened now, or as the run's next.
                self.open_next = run > 0;
                break;
            }
            run += 1;
        }
        run
    }

    /// A record read whole: open it and take what it holds.
    fn complete_open(&mut self, len: usize, received: &mut impl FnMut(u64)) -> Option<Outcome> {
        let opened = match self.opener.open(&self.header, &mut self.record[..len]) {
            Ok(o) => o,
            Err(RecordError::Authentication { .. }) => {
                return Some(Outcome::Failed(
                    FailureReason::Integrity,
                    "a record did not authenticate",
                ))
            }
            Err(_) => {
                return Some(Outcome::Failed(
                    FailureReason::Integrity,
                    "a malformed record",
                ))
            }
        };
        self.counts.opened += 1;
        self.counts.opened_bytes += (HEADER_LEN + len) as u64;
        self.at = At::Header(0);
        let data = opened.start..opened.start + opened.len;
        match opened.content_type {
            content::APPLICATION_DATA => {}
            // TLS 1.3's session tickets, before the response.
            content::HANDSHAKE if self.expected.is_none() && self.head.is_empty() => {
                return None;
            }
            content::ALERT => return Some(self.ended()),
            _ => {
                return Some(Outcome::Failed(
                    FailureReason::Integrity,
                    "a record of an unexpected type in the response",
                ))
            }
        }
        if self.expected.is_some() {
            let record = std::mem::take(&mut self.record);
            let checked = self.compare(&record[data], received);
            self.record = record;
            return checked.err().or_else(|| self.after_body_bytes());
        }
        self.head.extend_from_slice(&self.record[data]);
        match http::parse_head(&self.head) {
            Parsed::Partial => None,
            Parsed::Invalid => Some(Outcome::Failed(FailureReason::Http, "head")),
            Parsed::Done(h) => {
                if h.status != 200 {
                    return Some(Outcome::Failed(FailureReason::Http, "status"));
                }
                let Some(len) = h.content_length else {
                    return Some(Outcome::Failed(FailureReason::Http, "no length"));
                };
                if self.must_be.is_some_and(|m| m != len) {
                    return Some(Outcome::Failed(FailureReason::Length, "Content-Length"));
                }
                self.expected = Some(len);
                // The body's first bytes, if the head's record holds some.
                let rest = self.head.split_off(h.len);
                self.compare(&rest, received)
                    .err()
                    .or_else(|| self.after_body_bytes())
            }
        }
    }

    /// Takes opened body bytes: compared with the known content at their offset,
    /// then counted.
    fn compare(&mut self, bytes: &[u8], received: &mut impl FnMut(u64)) -> Result<(), Outcome> {
        if let Some(c) = self.content.as_mut() {
            if !bytes.is_empty() {
                if !c.matches(self.body, bytes) {
                    return Err(Outcome::Failed(
                        FailureReason::Integrity,
                        "the body differs from the file",
                    ));
                }
                self.counts.compared_bytes += bytes.len() as u64;
            }
        }
        let n = bytes.len() as u64;
        self.body += n;
        received(n);
        Ok(())
    }

    /// After body bytes: done, too many, or more to come.
    fn after_body_bytes(&mut self) -> Option<Outcome> {
        let expected = self.expected?;
        if self.body > expected {
            return Some(Outcome::Failed(
                FailureReason::Length,
                "more than Content-Length",
            ));
        }
        (self.body == expected).then_some(Outcome::Done)
    }

    /// The stream ended (the peer closed, or its alert).
    fn ended(&self) -> Outcome {
        match self.expected {
            Some(e) if self.body == e => Outcome::Done,
            Some(_) => Outcome::Failed(FailureReason::Length, "the response ended short"),
            None => Outcome::Failed(FailureReason::Http, "closed before the head"),
        }
    }
}

/// A uniform draw in [0, 1) from xorshift64* (a sample needs no cryptographic
/// randomness: the server cannot see which records are opened).
fn unit(state: &mut u64) -> f64 {
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
}

impl Verify {
    /// The record of how a point's or a ramp's responses were read: this mode and
    /// what the generator's threads opened, compared and discarded under it.
    pub fn record(self, v: &Verified) -> cipherbench_model::tls::Verification {
        let (sampled, rate, whole) = match self {
            Verify::Sampled(s) => (true, s.rate, s.whole),
            Verify::All => (false, 1.0, 1.0),
        };
        cipherbench_model::tls::Verification {
            sampled,
            rate,
            whole,
            sampled_responses: v.sampled,
            openssl_responses: v.by_openssl,
            records_opened: v.counts.opened,
            bytes_opened: v.counts.opened_bytes,
            records_discarded: v.counts.discarded,
            bytes_discarded: v.counts.discarded_bytes,
            bytes_compared: v.counts.compared_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::engine::{secrets, Client};
    use crate::tls::suite::Suite;
    use std::io::{Read, Write};
    use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
    use std::os::fd::AsRawFd;
    use std::thread::JoinHandle;
    use std::time::{Duration, Instant};

    const KEY: [u8; 16] = [0x5a; 16];

    /// What the test's broken server does to the bytes it sends.
    #[derive(Clone, Copy)]
    enum Tamper {
        None,
        /// Flips a bit of the byte at this offset of the TCP stream.
        Flip(usize),
        /// Closes the connection after this many bytes.
        Cut(usize),
        /// The server writes the response in two, split at this offset, so a
        /// short record ends the first write (the relay changes nothing).
        Split(usize),
    }

    /// The file's content: the keystream of [`KEY`].
    fn file(len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        cipherbench_crypto::ctr::Keystream::new(&KEY)
            .unwrap()
            .at(0, &mut out)
            .unwrap();
        out
    }

    /// A real OpenSSL server answering one request with `response` (its records
    /// full, 16 KiB, but the last), behind a relay that tampers with what it sends as
    /// told; the relay's thread gives the bytes it sent.
    fn serve(suite: &Suite, response: Vec<u8>, tamper: Tamper) -> (SocketAddr, JoinHandle<usize>) {
        let acceptor = secrets::acceptor(suite);
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let server_addr = server.local_addr().unwrap();
        std::thread::spawn(move || {
            let (tcp, _) = server.accept().unwrap();
            let Ok(mut tls) = acceptor.accept(tcp) else {
                return;
            };
            let mut request = [0u8; 256];
            let _ = tls.read(&mut request);
            let split = match tamper {
                Tamper::Split(at) => at,
                _ => response.len(),
            };
            let _ = tls.write_all(&response[..split]);
            let _ = tls.write_all(&response[split..]);
            let _ = tls.shutdown();
        });
        let relay = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = relay.local_addr().unwrap();
        let relayed = std::thread::spawn(move || {
            let (client, _) = relay.accept().unwrap();
            let upstream = TcpStream::connect(server_addr).unwrap();
            let mut c_read = client.try_clone().unwrap();
            let mut u_write = upstream.try_clone().unwrap();
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut c_read, &mut u_write);
                let _ = u_write.shutdown(Shutdown::Write);
            });
            let (mut u_read, mut c_write) = (upstream, client);
            let mut sent = 0usize;
            let mut buf = vec![0u8; 65536];
            loop {
                let n = match u_read.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let chunk = &mut buf[..n];
                match tamper {
                    Tamper::Flip(at) if (sent..sent + n).contains(&at) => {
                        chunk[at - sent] ^= 0x01;
                    }
                    Tamper::Cut(at) if sent + n >= at => {
                        let _ = c_write.write_all(&chunk[..at - sent]);
                        sent = at;
                        break;
                    }
                    _ => {}
                }
                if c_write.write_all(chunk).is_err() {
                    break;
                }
                sent += n;
            }
            let _ = c_write.shutdown(Shutdown::Both);
            sent
        });
        (addr, relayed)
    }

    struct Blocking(TcpStream);

    thread_local! {
        /// The most bytes one discard asked for, in this thread's last fetch.
        static MOST_DISCARDED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    impl Wire for Blocking {
        fn read_into(&mut self, out: &mut [u8]) -> io::Result<usize> {
            self.0.read(out)
        }
        fn discard(&mut self, n: usize) -> io::Result<usize> {
            MOST_DISCARDED.set(MOST_DISCARDED.get().max(n));
            discard_fd(self.0.as_raw_fd(), n)
        }
    }

    /// The handshake and request through OpenSSL, then the response through a
    /// [`Reader`]: how it ended, what it counted, and the bytes the relay sent.
    fn fetch(
        suite: &Suite,
        served: (SocketAddr, JoinHandle<usize>),
        sampling: Sampling,
        must_be: Option<u64>,
    ) -> (Outcome, Counts, usize) {
        fetch_as(suite, served, sampling, must_be, true)
    }

    /// [`fetch`], the file's content known (a server of ours) or not.
    fn fetch_as(
        suite: &Suite,
        (addr, relayed): (SocketAddr, JoinHandle<usize>),
        sampling: Sampling,
        must_be: Option<u64>,
        known: bool,
    ) -> (Outcome, Counts, usize) {
        let client = Client::sampling(suite, false, None).unwrap();
        let ssl = client.ssl("localhost", None).unwrap();
        let tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut tls = ssl.connect(tcp).unwrap();
        tls.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let (keys, seq) = secrets::server_keys(tls.ssl()).expect("the server's keys");
        let opener = RecordOpener::new(&keys, seq).unwrap();
        let content = known.then(|| Content::new(&KEY).unwrap());
        let mut reader = Reader::new(opener, sampling, 0x1234_5678, must_be, content);
        let mut wire = Blocking(tls.get_ref().try_clone().unwrap());
        MOST_DISCARDED.set(0);
        let mut counted = 0u64;
        let deadline = Instant::now() + Duration::from_secs(20);
        let outcome = loop {
            match reader.read(&mut wire, |n| counted += n) {
                Outcome::Pending if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                o => break o,
            }
        };
        assert_eq!(counted, reader.body());
        drop(wire);
        drop(tls);
        (outcome, reader.counts, relayed.join().unwrap())
    }

    /// A response whose head and body are exactly 64 full records (1 MiB), so its
    /// last record is full and opened only as the last; the body is `body` cut or
    /// padded to what `Content-Length` says, unless `send` overrides it.
    const SIZE: usize = 1 << 20;
    const HEAD: &str = "HTTP/1.1 200 OK\r\nContent-Length: 1048532\r\n\r\n";
    const BODY: usize = SIZE - HEAD.len();

    fn response(body: &[u8]) -> Vec<u8> {
        let mut r = HEAD.as_bytes().to_vec();
        r.extend_from_slice(body);
        r
    }

    fn suites() -> [Suite; 3] {
        [
            Suite::find("AES128-GCM-SHA256").unwrap(),
            Suite::find("ECDHE-RSA-CHACHA20-POLY1305").unwrap(),
            Suite::find("TLS_AES_128_GCM_SHA256").unwrap(),
        ]
    }

    const ALL: Sampling = Sampling {
        rate: 1.0,
        whole: 0.0,
    };
    const NONE: Sampling = Sampling {
        rate: 0.0,
        whole: 0.0,
    };
    const LEN: Option<u64> = Some(BODY as u64);

    #[test]
    fn a_response_opened_whole_or_by_sample_arrives_whole_and_checked() {
        assert_eq!(HEAD.len() + BODY, SIZE);
        let body = file(BODY);
        for suite in suites() {
            let name = suite.openssl;
            let served = serve(&suite, response(&body), Tamper::None);
            let (o, all, _) = fetch(&suite, served, ALL, LEN);
            assert_eq!(o, Outcome::Done, "{name}");
            assert_eq!(all.discarded, 0, "{name}");
            assert_eq!(all.compared_bytes, BODY as u64, "{name}");
            // 64 full records: the head's, the last and the session tickets (TLS
            // 1.3) are opened, the rest discarded unread.
            let served = serve(&suite, response(&body), Tamper::None);
            let (o, some, _) = fetch(&suite, served, NONE, LEN);
            assert_eq!(o, Outcome::Done, "{name}");
            assert_eq!(some.discarded, 62, "{name}: {some:?}");
            // In one run, asked for in one call: the 62 records on the wire, less
            // the first one's header, read to see it is full.
            let on_wire = (some.discarded_bytes / 62) as usize;
            assert_eq!(MOST_DISCARDED.get(), 62 * on_wire - 5, "{name}");
            assert_eq!(
                some.compared_bytes,
                (2 * 16384 - HEAD.len()) as u64,
                "{name}"
            );
            // A quarter of the body records, give or take the draw.
            let quarter = Sampling {
                rate: 0.25,
                whole: 0.0,
            };
            let served = serve(&suite, response(&body), Tamper::None);
            let (o, q, _) = fetch(&suite, served, quarter, LEN);
            assert_eq!(o, Outcome::Done, "{name}");
            assert!((6..=26).contains(&q.opened), "{name}: {q:?}");
            // Opened whole by the response's draw.
            let whole = Sampling {
                rate: 0.0,
                whole: 1.0,
            };
            let served = serve(&suite, response(&body), Tamper::None);
            let (o, w, _) = fetch(&suite, served, whole, None);
            assert_eq!(o, Outcome::Done, "{name}");
            assert_eq!((w.discarded, w.compared_bytes), (0, BODY as u64), "{name}");
        }
    }

    #[test]
    fn an_altered_record_fails_where_it_is_opened_and_the_last_always_is() {
        let body = file(BODY);
        let failed = Outcome::Failed(FailureReason::Integrity, "a record did not authenticate");
        for suite in suites() {
            let name = suite.openssl;
            // Where the stream ends (the same handshake but for a few bytes).
            let (_, _, total) = fetch(
                &suite,
                serve(&suite, response(&body), Tamper::None),
                NONE,
                LEN,
            );
            // In the middle of the body: seen where opened, not by a sample of none.
            let middle = total - SIZE / 2;
            let (o, _, _) = fetch(
                &suite,
                serve(&suite, response(&body), Tamper::Flip(middle)),
                ALL,
                LEN,
            );
            assert_eq!(o, failed, "{name}");
            let (o, _, _) = fetch(
                &suite,
                serve(&suite, response(&body), Tamper::Flip(middle)),
                NONE,
                LEN,
            );
            assert_eq!(o, Outcome::Done, "{name}: the sample's bargain");
            // In the last record (before the close_notify): opened at any rate.
            let (o, _, _) = fetch(
                &suite,
                serve(&suite, response(&body), Tamper::Flip(total - 200)),
                NONE,
                LEN,
            );
            assert_eq!(o, failed, "{name}");
        }
    }

    #[test]
    fn a_short_record_in_mid_body_is_seen_when_discarded_and_read_when_opened() {
        let body = file(BODY);
        for suite in suites() {
            let name = suite.openssl;
            // A short record a third of the way in: in a discarded run at rate 0,
            // so what follows the run is not a header; every record read at rate 1.
            let split = Tamper::Split(SIZE / 3);
            let (o, _, _) = fetch(&suite, serve(&suite, response(&body), split), NONE, LEN);
            assert_eq!(
                o,
                Outcome::Failed(
                    FailureReason::Integrity,
                    "a record header out of place after discarded records \
                     (a short record among them: --verify all reads a server \
                     that writes those)"
                ),
                "{name}"
            );
            let (o, c, _) = fetch(&suite, serve(&suite, response(&body), split), ALL, LEN);
            assert_eq!(o, Outcome::Done, "{name}");
            assert_eq!(c.compared_bytes, BODY as u64, "{name}");
        }
    }

    #[test]
    fn a_server_not_ours_is_read_a_record_at_a_time_so_its_short_records_pass() {
        // Its content unknown, a server is not taken to fill its records: each
        // header is read, and a short record in mid-body is opened and passes.
        let body = file(BODY);
        for suite in suites() {
            let name = suite.openssl;
            let split = Tamper::Split(SIZE / 3);
            let served = serve(&suite, response(&body), split);
            let (o, c, _) = fetch_as(&suite, served, NONE, LEN, false);
            assert_eq!(o, Outcome::Done, "{name}");
            assert_eq!(c.compared_bytes, 0, "{name}: nothing to compare with");
            let on_wire = (c.discarded_bytes / c.discarded) as usize;
            assert_eq!(
                MOST_DISCARDED.get(),
                on_wire - 5,
                "{name}: one record a call"
            );
        }
    }

    #[test]
    fn a_long_response_is_discarded_in_runs_of_at_most_max_run_records() {
        // 4 MiB, head and body exactly 256 full records: at rate 0 the head's record
        // and the last are opened, the rest discarded in runs of 64 at most.
        const BIG: usize = 4 << 20;
        let mut head = String::new();
        for digits in 1..=8 {
            let h = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
                BIG - 37 - digits
            );
            if h.len() + (BIG - 37 - digits) == BIG {
                head = h;
            }
        }
        assert!(!head.is_empty());
        let body = file(BIG - head.len());
        let mut r = head.clone().into_bytes();
        r.extend_from_slice(&body);
        for suite in suites() {
            let name = suite.openssl;
            let (o, c, _) = fetch(
                &suite,
                serve(&suite, r.clone(), Tamper::None),
                NONE,
                Some(body.len() as u64),
            );
            assert_eq!(o, Outcome::Done, "{name}");
            assert_eq!(c.discarded, 254, "{name}: {c:?}");
            let on_wire = (c.discarded_bytes / c.discarded) as usize;
            assert_eq!(MOST_DISCARDED.get(), 64 * on_wire - 5, "{name}");
        }
    }

    /// A reader past the head of a body of `records` full records, its sample's
    /// generator as [`Reader::new`] leaves it.
    fn past_head(rate: f64, records: u64) -> (Reader, u64, u64) {
        let keys = cipherbench_crypto::tls_record::RecordKeys::tls13(
            cipherbench_crypto::aead::AeadAlgorithm::Aes128Gcm,
            cipherbench_crypto::tls_record::SuiteHash::Sha256,
            &[7u8; 32],
        )
        .unwrap();
        let opener = RecordOpener::new(&keys, 0).unwrap();
        let plain = (opener.full_record() - opener.overhead()) as u64;
        let sampling = Sampling { rate, whole: 0.0 };
        let content = Some(Content::new(&KEY).unwrap());
        let mut reader = Reader::new(opener, sampling, 42, None, content);
        reader.expected = Some(records * plain);
        let rng = reader.rng;
        (reader, plain, rng)
    }

    #[test]
    fn the_records_opened_by_runs_are_those_drawn_one_by_one() {
        // Replaying the sample's generator draw by draw, one draw per body record but
        // the last: the records the runs open are exactly the ones drawn, and the
        // last, at a rate that makes runs short and at one that makes them reach
        // MAX_RUN.
        for rate in [0.25, 0.01] {
            let n = 3000u64;
            let (mut reader, plain, mut rng) = past_head(rate, n);
            let full = reader.opener.full_record();
            let (mut opened, mut i, mut longest) = (Vec::new(), 0u64, 0u64);
            while i < n {
                match reader.discards(content::APPLICATION_DATA, full) {
                    0 => {
                        opened.push(i);
                        reader.body += plain;
                        i += 1;
                    }
                    run => {
                        longest = longest.max(run);
                        reader.body += run * plain;
                        i += run;
                    }
                }
            }
            assert_eq!(i, n, "no run past the body");
            let mut drawn: Vec<u64> = (0..n - 1).filter(|_| unit(&mut rng) < rate).collect();
            drawn.push(n - 1);
            assert_eq!(opened, drawn, "rate {rate}");
            assert!(longest <= MAX_RUN);
            if rate < 0.05 {
                assert_eq!(longest, MAX_RUN, "rate {rate}: runs reach the cap");
            }
        }
    }

    #[test]
    fn a_short_or_cut_response_fails_on_its_length() {
        let body = file(BODY);
        let short = Outcome::Failed(FailureReason::Length, "the response ended short");
        for suite in suites() {
            let name = suite.openssl;
            // The head says the file's length; the server sends less and closes.
            for sampling in [ALL, NONE] {
                let served = serve(&suite, response(&body[..BODY - 100_000]), Tamper::None);
                let (o, _, _) = fetch(&suite, served, sampling, LEN);
                assert_eq!(o, short, "{name}");
            }
            // The connection cut in the middle, without a close_notify.
            let (_, _, total) = fetch(
                &suite,
                serve(&suite, response(&body), Tamper::None),
                NONE,
                LEN,
            );
            let served = serve(&suite, response(&body), Tamper::Cut(total - SIZE / 2));
            let (o, _, _) = fetch(&suite, served, NONE, LEN);
            assert_eq!(o, short, "{name}");
        }
    }

    #[test]
    fn a_response_of_the_wrong_length_or_content_fails() {
        let body = file(BODY);
        for suite in suites() {
            let name = suite.openssl;
            // A file one byte longer than the one asked for.
            let longer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", BODY + 1);
            let mut r = longer.into_bytes();
            r.extend_from_slice(&body);
            r.push(0);
            let (o, _, _) = fetch(&suite, serve(&suite, r, Tamper::None), NONE, LEN);
            assert_eq!(
                o,
                Outcome::Failed(FailureReason::Length, "Content-Length"),
                "{name}"
            );
            // More body than Content-Length says, in the record of its last byte.
            let shorter = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", BODY - 10);
            let mut r = shorter.into_bytes();
            r.extend_from_slice(&body);
            let (o, _, _) = fetch(&suite, serve(&suite, r, Tamper::None), NONE, None);
            assert_eq!(
                o,
                Outcome::Failed(FailureReason::Length, "more than Content-Length"),
                "{name}"
            );
            // Other bytes than the file's in the last record (opened at any rate) and
            // in the middle (opened with every record).
            let differs =
                Outcome::Failed(FailureReason::Integrity, "the body differs from the file");
            for (at, sampling) in [(BODY - 5, NONE), (BODY / 2, ALL)] {
                let mut other = body.clone();
                other[at] ^= 0xff;
                let (o, _, _) = fetch(
                    &suite,
                    serve(&suite, response(&other), Tamper::None),
                    sampling,
                    LEN,
                );
                assert_eq!(o, differs, "{name} at {at}");
            }
        }
    }
}
