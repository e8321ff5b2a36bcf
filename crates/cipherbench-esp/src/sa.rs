//! Security associations, one per direction: [`OutboundSa::seal`] builds ESP packets
//! (RFC 4303 §3.3), [`InboundSa::open`] checks and unwraps them (§3.4).
//!
//! Packet layout (RFC 4303 §2, tunnel mode):
//!
//! ```text
//! SPI (4) | sequence (4) | IV (0/8/16) | inner packet | padding 1,2,3.. | pad len (1) | next header (1) | ICV (0/16)
//!                                      '------------- encrypted, aligned --------------------------------'
//! ```
//!
//! AEAD transforms (RFC 4106, RFC 7634): IV = the 64-bit sequence counter, nonce =
//! salt || IV, AAD = SPI || sequence (no ESN), ICV = the AEAD tag. `aes256-sha256`
//! (RFC 3602, RFC 4868): a random IV, CBC over the aligned payload, then
//! HMAC-SHA-256-128 over SPI, sequence, IV and ciphertext (§3.3.2, encrypt-then-MAC).
//!
//! Neither direction allocates per packet, reads a clock or does I/O. Key material is
//! held only in the engines (see [`crate::engine`]) and wiped when an SA is dropped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use cipherbench_crypto::secret::SecretBytes;
use cipherbench_crypto::CryptoError;
use serde::{Deserialize, Serialize};

use crate::counters::{Counters, DropReason};
use crate::engine::Engine;
use crate::replay::{ReplayCheck, ReplayWindow};
use crate::transform::{Transform, AEAD_IV_LEN, CBC_IV_LEN};
use crate::{inner, ESP_HEADER_LEN, MAX_REPLAY_WINDOW, MAX_SEQUENCE, MIN_REPLAY_WINDOW, MIN_SPI};
use crate::{NEXT_HEADER_IPV4, NEXT_HEADER_IPV6, TRAILER_LEN};

/// Hard lifetimes (RFC 4301 §4.4.2.1): once a limit is reached the SA refuses to seal
/// and drops inbound packets. Counted like Linux xfrm: the packet that crosses the byte
/// limit still passes, the next one does not. `None` is no limit (the sequence number
/// still caps an SA at 2^32 - 1 packets).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lifetime {
    /// Most packets the SA protects.
    pub packets: Option<u64>,
    /// Most inner bytes the SA protects.
    pub bytes: Option<u64>,
}

impl Lifetime {
    /// No limit but the sequence number's.
    pub const UNLIMITED: Lifetime = Lifetime {
        packets: None,
        bytes: None,
    };

    fn expired(&self, packets: u64, bytes: u64) -> bool {
        self.packets.is_some_and(|limit| packets >= limit)
            || self.bytes.is_some_and(|limit| bytes >= limit)
    }
}

/// Everything that configures one SA (one direction).
#[derive(Debug, Clone)]
pub struct SaParams {
    /// The SPI on the wire (at least [`MIN_SPI`]).
    pub spi: u32,
    /// The transform.
    pub transform: Transform,
    /// Key material, [`Transform::keymat_len`] bytes: encryption key, salt, integrity
    /// key. Wiped when dropped.
    pub keymat: SecretBytes,
    /// Anti-replay window in packets (inbound only; [`MIN_REPLAY_WINDOW`] to
    /// [`MAX_REPLAY_WINDOW`]).
    pub replay_window: u32,
    /// Hard lifetimes.
    pub lifetime: Lifetime,
}

impl SaParams {
    /// Parameters with the default window and no lifetime limit.
    pub fn new(spi: u32, transform: Transform, keymat: SecretBytes) -> SaParams {
        SaParams {
            spi,
            transform,
            keymat,
            replay_window: crate::DEFAULT_REPLAY_WINDOW,
            lifetime: Lifetime::UNLIMITED,
        }
    }

    fn validate(&self) -> Result<(), SaError> {
        if self.spi < MIN_SPI {
            return Err(SaError::ReservedSpi(self.spi));
        }
        if self.keymat.len() != self.transform.keymat_len() {
            return Err(SaError::KeymatLength {
                transform: self.transform,
                expected: self.transform.keymat_len(),
                got: self.keymat.len(),
            });
        }
        if !(MIN_REPLAY_WINDOW..=MAX_REPLAY_WINDOW).contains(&self.replay_window) {
            return Err(SaError::ReplayWindow(self.replay_window));
        }
        Ok(())
    }
}

/// Why an SA could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaError {
    /// RFC 4303 §2.1: SPIs 0 to 255 are reserved.
    #[error("SPI {0} is reserved (RFC 4303 §2.1); use 256 or above")]
    ReservedSpi(u32),
    /// Key material of the wrong length for the transform.
    #[error("{transform} needs {expected} bytes of key material, got {got}")]
    KeymatLength {
        /// The transform.
        transform: Transform,
        /// [`Transform::keymat_len`].
        expected: usize,
        /// What was given.
        got: usize,
    },
    /// A replay window outside what RFC 4303 §3.4.3 and this implementation allow.
    #[error(
        "replay window of {0} packets: must be {MIN_REPLAY_WINDOW} (RFC 4303 §3.4.3) to {MAX_REPLAY_WINDOW}"
    )]
    ReplayWindow(u32),
    /// A starting sequence number past the last one an SA may send.
    #[error("sequence number {0} is past 2^32 - 1 (no ESN)")]
    Sequence(u64),
    /// An inbound set already holds an SA with this SPI.
    #[error("an inbound SA with SPI {0:#010x} already exists")]
    DuplicateSpi(u32),
    /// A shared secret too short to derive keys from.
    #[error("the shared secret has {got} bytes; at least {min} are needed")]
    WeakSecret {
        /// Given length.
        got: usize,
        /// Required length.
        min: usize,
    },
    /// The crypto library refused the key or the algorithm.
    #[error("keying the SA failed: {0}")]
    Crypto(CryptoError),
}

// Not `#[from]`: that would also make the library's error the source, and a chain
// printed with its causes (`{:#}`) would say the library's message twice.
impl From<CryptoError> for SaError {
    fn from(e: CryptoError) -> Self {
        SaError::Crypto(e)
    }
}

/// Why `seal` refused a packet. Nothing was sent; the output buffer's contents are
/// unspecified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// The output buffer cannot hold the ESP packet.
    #[error("output buffer of {available} bytes, the ESP packet needs {needed}")]
    OutputTooSmall {
        /// [`Transform::sealed_len`] of the inner packet.
        needed: usize,
        /// The buffer's length.
        available: usize,
    },
    /// RFC 4303 §3.3.3: the SA has sent sequence number 2^32 - 1 and must not wrap;
    /// a new SA (new keys and SPI) is needed.
    #[error("SA {spi:#010x} has used every sequence number (RFC 4303 §3.3.3): it must be rekeyed")]
    SequenceExhausted {
        /// The SA.
        spi: u32,
    },
    /// The SA's hard lifetime is used up (RFC 4301 §4.4.2.1).
    #[error("SA {spi:#010x} reached its hard lifetime: it must be rekeyed")]
    LifetimeExpired {
        /// The SA.
        spi: u32,
    },
    /// The inner packet is not a consistent IPv4 or IPv6 packet, so it has no next
    /// header (RFC 4303 §2.6) and the peer would drop it.
    #[error("the inner packet is not a well-formed IPv4 or IPv6 packet")]
    MalformedInner,
    /// The crypto library failed.
    #[error("encryption failed: {0}")]
    Crypto(CryptoError),
}

// Not `#[from]`: that would also make the library's error the source, and a chain
// printed with its causes (`{:#}`) would say the library's message twice.
impl From<CryptoError> for SealError {
    fn from(e: CryptoError) -> Self {
        SealError::Crypto(e)
    }
}

/// An outbound SA's sequence counter (RFC 4303 §3.3.3), one per SA however many
/// workers seal for it: every number from the start to [`MAX_SEQUENCE`] is handed out
/// exactly once across all threads, and none after (no wrap, no ESN), so no AEAD
/// nonce is ever used twice.
#[derive(Debug)]
pub struct SequenceCounter {
    next: AtomicU64,
}

impl SequenceCounter {
    /// A counter whose first number is `next` (1 for a new SA).
    pub fn starting_at(next: u64) -> Result<SequenceCounter, SaError> {
        if next == 0 || next > MAX_SEQUENCE + 1 {
            return Err(SaError::Sequence(next));
        }
        Ok(SequenceCounter {
            next: AtomicU64::new(next),
        })
    }

    /// The number the next [`take`](Self::take) returns (past [`MAX_SEQUENCE`] once
    /// exhausted).
    pub fn peek(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }

    /// Takes `n` consecutive numbers at once (fewer if the counter runs out first;
    /// `None` once [`MAX_SEQUENCE`] has been taken). A pipeline's single reader
    /// reserves each batch's numbers in arrival order, so that packets sealed by
    /// parallel workers still leave with increasing numbers; every number is still
    /// handed out once, because the range is taken with one read-modify-write.
    pub fn reserve(&self, n: u64) -> Option<Reserved> {
        let first = self
            .next
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |next| {
                (next <= MAX_SEQUENCE && n > 0).then(|| (next + n).min(MAX_SEQUENCE + 1))
            })
            .ok()?;
        Some(Reserved {
            next: first,
            end: (first + n).min(MAX_SEQUENCE + 1),
        })
    }

    /// Takes the next number, or `None` once [`MAX_SEQUENCE`] has been taken. One
    /// read-modify-write on one atomic: all takes are totally ordered, so two threads
    /// never get the same number (ordering against other memory is not needed).
    pub fn take(&self) -> Option<u64> {
        self.next
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n <= MAX_SEQUENCE).then_some(n + 1)
            })
            .ok()
    }
}

/// Sequence numbers taken from an SA's counter ahead of sealing
/// ([`OutboundSa::reserve`]), used up by [`OutboundSa::seal_reserved`] in order. Not
/// `Clone`: each number can be used once, like a number taken by [`OutboundSa::seal`].
#[derive(Debug, PartialEq, Eq)]
pub struct Reserved {
    next: u64,
    end: u64,
}

impl Reserved {
    /// Numbers left.
    pub fn remaining(&self) -> u64 {
        self.end - self.next
    }

    /// The number the next sealed packet will carry, if any is left.
    pub fn peek(&self) -> Option<u64> {
        (self.next < self.end).then_some(self.next)
    }

    fn take(&mut self) -> Option<u64> {
        let n = self.peek()?;
        self.next += 1;
        Some(n)
    }
}

/// The sending side of an SA. [`OutboundSa::worker`] gives another thread its own
/// cipher context on the same SA: one sequence counter, shared.
pub struct OutboundSa {
    spi: u32,
    transform: Transform,
    engine: Engine,
    /// Kept (zeroed on drop) to key the cipher contexts of further workers.
    keymat: SecretBytes,
    /// The SA's sequence counter, shared by its workers (RFC 4303 §3.3.3: starts at 1).
    sequence: Arc<SequenceCounter>,
    lifetime: Lifetime,
    counters: Counters,
}

impl OutboundSa {
    /// Keys an outbound SA; the first packet carries sequence number 1.
    pub fn new(params: SaParams) -> Result<OutboundSa, SaError> {
        OutboundSa::starting_at(params, 1)
    }

    /// Keys an outbound SA whose first packet carries `next_sequence`. For tests of
    /// exhaustion and long-running benchmarks: never start a key over at a number it
    /// has already sent, which would reuse AEAD nonces.
    pub fn starting_at(params: SaParams, next_sequence: u64) -> Result<OutboundSa, SaError> {
        params.validate()?;
        let sequence = Arc::new(SequenceCounter::starting_at(next_sequence)?);
        Ok(OutboundSa {
            spi: params.spi,
            transform: params.transform,
            engine: Engine::new(params.transform, params.keymat.expose())?,
            keymat: params.keymat,
            sequence,
            lifetime: params.lifetime,
            counters: Counters::default(),
        })
    }

    /// Another sender on the same SA for another thread: its own cipher context and
    /// counters, the SA's one sequence counter. The lifetime is checked against each
    /// worker's own counters (a worker of an SA with a packet or byte limit may send
    /// up to that limit on its own).
    pub fn worker(&self) -> Result<OutboundSa, SaError> {
        Ok(OutboundSa {
            spi: self.spi,
            transform: self.transform,
            engine: Engine::new(self.transform, self.keymat.expose())?,
            keymat: self.keymat.clone(),
            sequence: Arc::clone(&self.sequence),
            lifetime: self.lifetime,
            counters: Counters::default(),
        })
    }

    /// The SPI.
    pub fn spi(&self) -> u32 {
        self.spi
    }

    /// The transform.
    pub fn transform(&self) -> Transform {
        self.transform
    }

    /// The sequence number the next packet will carry (past [`MAX_SEQUENCE`] once
    /// exhausted).
    pub fn next_sequence(&self) -> u64 {
        self.sequence.peek()
    }

    /// The counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The ESP packet length for an inner packet of `inner_len` bytes.
    pub fn sealed_len(&self, inner_len: usize) -> usize {
        self.transform.sealed_len(inner_len)
    }

    /// Takes `n` consecutive sequence numbers from the SA's counter for
    /// [`OutboundSa::seal_reserved`] (fewer near exhaustion; `None` once exhausted).
    pub fn reserve(&self, n: u64) -> Option<Reserved> {
        self.sequence.reserve(n)
    }

    /// RFC 4303 §3.3: wraps the inner IP packet into an ESP packet in
    /// `out[..returned length]`. The next header (4 or 41) comes from the inner
    /// packet's version nibble.
    pub fn seal(&mut self, inner: &[u8], out: &mut [u8]) -> Result<usize, SealError> {
        self.seal_counted(Inner::Copy(inner), out, None)
    }

    /// Where in an ESP packet's buffer the inner packet goes: after the ESP header
    /// and the IV. For [`OutboundSa::seal_placed`].
    pub fn inner_offset(&self) -> usize {
        ESP_HEADER_LEN + self.transform.iv_len()
    }

    /// [`OutboundSa::seal`] of the `inner_len`-byte inner packet the caller has
    /// already written at `out[self.inner_offset()..]`: the packet is sealed where it
    /// lies, without a copy (the gateway segments TUN super-packets straight into
    /// its send buffers). The same checks and outcomes as `seal`; on an error
    /// `out` holds no ESP packet.
    pub fn seal_placed(&mut self, inner_len: usize, out: &mut [u8]) -> Result<usize, SealError> {
        self.seal_counted(Inner::Placed(inner_len), out, None)
    }

    /// [`OutboundSa::seal`] with the next number of `numbers` (taken from this SA's
    /// counter by [`OutboundSa::reserve`], on this worker or another of the same SA).
    /// A refused packet uses no number unless the crypto itself failed; a range
    /// used up is [`SealError::SequenceExhausted`] for the packet, which the caller
    /// avoids by reserving as many numbers as it has packets.
    pub fn seal_reserved(
        &mut self,
        numbers: &mut Reserved,
        inner: &[u8],
        out: &mut [u8],
    ) -> Result<usize, SealError> {
        self.seal_counted(Inner::Copy(inner), out, Some(numbers))
    }

    fn seal_counted(
        &mut self,
        inner: Inner<'_>,
        out: &mut [u8],
        numbers: Option<&mut Reserved>,
    ) -> Result<usize, SealError> {
        let inner_len = inner.len();
        let result = self.seal_checked(inner, out, numbers);
        match result {
            Ok(_) => {
                self.counters.sealed_packets += 1;
                self.counters.sealed_bytes += inner_len as u64;
            }
            Err(_) => self.counters.seal_refused += 1,
        }
        result
    }

    fn seal_checked(
        &mut self,
        inner: Inner<'_>,
        out: &mut [u8],
        numbers: Option<&mut Reserved>,
    ) -> Result<usize, SealError> {
        let inner_len = inner.len();
        let offset = self.inner_offset();
        let placed = match inner {
            Inner::Copy(packet) => packet,
            Inner::Placed(len) => {
                out.get(offset..offset + len)
                    .ok_or(SealError::OutputTooSmall {
                        needed: self.transform.sealed_len(len),
                        available: out.len(),
                    })?
            }
        };
        let next_header = inner::next_header(placed).ok_or(SealError::MalformedInner)?;
        let exhausted = match &numbers {
            Some(reserved) => reserved.peek().is_none(),
            None => self.sequence.peek() > MAX_SEQUENCE,
        };
        if exhausted {
            return Err(SealError::SequenceExhausted { spi: self.spi });
        }
        if self
            .lifetime
            .expired(self.counters.sealed_packets, self.counters.sealed_bytes)
        {
            return Err(SealError::LifetimeExpired { spi: self.spi });
        }
        let transform = self.transform;
        let total = transform.sealed_len(inner_len);
        if out.len() < total {
            return Err(SealError::OutputTooSmall {
                needed: total,
                available: out.len(),
            });
        }
        // Consumed before the crypto runs, so even a failed attempt never lets a
        // sequence number (and with it an AEAD nonce) be used twice.
        let sequence = match numbers {
            Some(reserved) => reserved.take(),
            None => self.sequence.take(),
        }
        .ok_or(SealError::SequenceExhausted { spi: self.spi })?;

        let (authenticated, icv) = out[..total].split_at_mut(total - transform.icv_len());
        let (header, rest) = authenticated.split_at_mut(ESP_HEADER_LEN);
        header[..4].copy_from_slice(&self.spi.to_be_bytes());
        // No ESN: the low 32 bits travel, and `sequence` is at most 2^32 - 1 here.
        header[4..].copy_from_slice(&(sequence as u32).to_be_bytes());
        let (iv, body) = rest.split_at_mut(transform.iv_len());
        if let Inner::Copy(packet) = inner {
            body[..inner_len].copy_from_slice(packet);
        }
        write_trailer(&mut body[inner_len..], next_header);

        match &mut self.engine {
            Engine::Null => {}
            Engine::Aead(engine) => {
                // RFC 4106 §3.1: a counter is the natural unique IV; ours is the
                // sequence counter, unique for the key's life because it never wraps.
                let explicit: [u8; AEAD_IV_LEN] = sequence.to_be_bytes();
                iv.copy_from_slice(&explicit);
                engine.seal(&explicit, header, body, icv)?;
            }
            Engine::CbcHmac(engine) => {
                let mut random_iv = [0u8; CBC_IV_LEN];
                engine.fill_iv(&mut random_iv)?;
                iv.copy_from_slice(&random_iv);
                engine.encrypt(&random_iv, body)?;
                engine.compute_icv(authenticated, icv)?;
            }
        }
        Ok(total)
    }
}

/// The inner packet of a seal: a slice to copy in, or already in place in the
/// output ([`OutboundSa::seal_placed`]).
#[derive(Clone, Copy)]
enum Inner<'a> {
    Copy(&'a [u8]),
    Placed(usize),
}

impl Inner<'_> {
    fn len(&self) -> usize {
        match self {
            Inner::Copy(packet) => packet.len(),
            Inner::Placed(len) => *len,
        }
    }
}

/// RFC 4303 §2.4: padding bytes 1, 2, 3, ..., then the pad length and next header.
/// `tail` is everything after the inner packet in the aligned payload.
fn write_trailer(tail: &mut [u8], next_header: u8) {
    let pad_len = tail.len() - TRAILER_LEN;
    for (i, byte) in tail[..pad_len].iter_mut().enumerate() {
        // Alignment is at most 16, so pad_len < 16 and i + 1 fits a byte.
        *byte = (i + 1) as u8;
    }
    tail[pad_len] = pad_len as u8;
    tail[pad_len + 1] = next_header;
}

/// RFC 4303 §2.4 and §2.6: checks the trailer of a decrypted payload and returns the
/// inner packet's length.
fn parse_trailer(payload: &[u8]) -> Result<usize, DropReason> {
    let n = payload.len();
    if n < TRAILER_LEN {
        return Err(DropReason::Truncated);
    }
    let pad_len = usize::from(payload[n - 2]);
    let next_header = payload[n - 1];
    if pad_len + TRAILER_LEN > n {
        return Err(DropReason::BadPadding);
    }
    let inner_len = n - TRAILER_LEN - pad_len;
    let padding = &payload[inner_len..n - TRAILER_LEN];
    // §2.4: the receiver SHOULD inspect the padding; 1, 2, 3... is the default the
    // sender MUST use unless the algorithm says otherwise (none here does).
    if padding
        .iter()
        .enumerate()
        .any(|(i, &b)| usize::from(b) != i + 1)
    {
        return Err(DropReason::BadPadding);
    }
    if next_header != NEXT_HEADER_IPV4 && next_header != NEXT_HEADER_IPV6 {
        return Err(DropReason::BadNextHeader);
    }
    if !inner::is_consistent(next_header, &payload[..inner_len]) {
        return Err(DropReason::MalformedInner);
    }
    Ok(inner_len)
}

fn read_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// The receiving side of an SA. [`InboundSa::worker`] gives another thread its own
/// cipher context on the same SA: one replay window, shared.
pub struct InboundSa {
    spi: u32,
    transform: Transform,
    engine: Engine,
    /// Kept (zeroed on drop) to key the cipher contexts of further workers.
    keymat: SecretBytes,
    /// One window per SA (RFC 4303 §3.4.3) whatever the number of workers; held only
    /// for the check and the update, never across the crypto.
    window: Arc<Mutex<ReplayWindow>>,
    lifetime: Lifetime,
    /// Packets and bytes this handle decrypted whole, what its lifetime counts
    /// (settled here or by another handle of the SA).
    decrypted: (u64, u64),
    counters: Counters,
}

/// An ESP packet that passed every check that does not depend on the packets around
/// it (length, SPI, lifetime, ICV, trailer) but whose sequence number the SA's
/// replay window has not yet taken. [`InboundSa::settle`] decides it.
///
/// Workers that open one SA's packets in parallel settle them afterwards in arrival
/// order, on one thread: the window then sees the sequence numbers exactly as a single
/// receiver would, whatever order the workers finished in and however many packets
/// were in flight, so parallel opening needs no wider window (wireguard-go checks its
/// replay counter in its sequential receive stage for the same reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "an unsettled packet is neither delivered nor counted until settled"]
pub struct Unsettled {
    spi: u32,
    sequence: u64,
    /// The inner packet's length, or why it cannot be delivered (a drop the window
    /// may still turn into `Replayed` or `TooOld`, as it would have come first).
    outcome: Result<usize, DropReason>,
    /// Bytes written to the output buffer, zeroed if the packet is dropped.
    written: usize,
    /// The ICV verified: the packet is the peer's, so it slides the window even if
    /// its contents are malformed (§3.4.3).
    authentic: bool,
}

impl Unsettled {
    /// The SPI of the SA that opened it.
    pub fn spi(&self) -> u32 {
        self.spi
    }

    /// The bytes of the output buffer it occupies (the decrypted payload; 0 once
    /// dropped): the next packet may be opened just past them.
    pub fn written(&self) -> usize {
        self.written
    }
}

impl InboundSa {
    /// Keys an inbound SA with an empty replay window.
    pub fn new(params: SaParams) -> Result<InboundSa, SaError> {
        params.validate()?;
        Ok(InboundSa {
            spi: params.spi,
            transform: params.transform,
            engine: Engine::new(params.transform, params.keymat.expose())?,
            keymat: params.keymat,
            window: Arc::new(Mutex::new(ReplayWindow::new(params.replay_window))),
            lifetime: params.lifetime,
            decrypted: (0, 0),
            counters: Counters::default(),
        })
    }

    /// Another receiver on the same SA for another thread: its own cipher context and
    /// counters, the SA's one replay window. The lifetime is checked against what each
    /// handle decrypted.
    pub fn worker(&self) -> Result<InboundSa, SaError> {
        Ok(InboundSa {
            spi: self.spi,
            transform: self.transform,
            engine: Engine::new(self.transform, self.keymat.expose())?,
            keymat: self.keymat.clone(),
            window: Arc::clone(&self.window),
            lifetime: self.lifetime,
            decrypted: (0, 0),
            counters: Counters::default(),
        })
    }

    fn lock_window(&self) -> MutexGuard<'_, ReplayWindow> {
        // The window's methods do not panic midway, so a poisoned lock (a worker that
        // panicked elsewhere) still guards a consistent window.
        self.window.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The SPI.
    pub fn spi(&self) -> u32 {
        self.spi
    }

    /// The transform.
    pub fn transform(&self) -> Transform {
        self.transform
    }

    /// The counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// A copy of the anti-replay window as it is now (shared with the SA's workers).
    pub fn window(&self) -> ReplayWindow {
        self.lock_window().clone()
    }

    /// RFC 4303 §3.4: checks and decrypts an ESP packet, writing the inner IP packet to
    /// `out[..returned length]`. `out` must hold the encrypted part (at most
    /// `esp.len()` bytes) or the packet is dropped as [`DropReason::TooLarge`].
    ///
    /// Order: length, SPI, lifetime, replay check (before any crypto), ICV, then the
    /// window update (only once the ICV verified, §3.4.3, so a forged packet never
    /// moves it), then padding, next header and the inner header. Every drop is
    /// counted once under its reason, and leaves no plaintext in `out`.
    ///
    /// The same as [`InboundSa::open_unsettled`] then [`InboundSa::settle`] at once.
    pub fn open(&mut self, esp: &[u8], out: &mut [u8]) -> Result<usize, DropReason> {
        let unsettled = self.open_unsettled(esp, out)?;
        self.settle(unsettled, out)
    }

    /// The part of [`InboundSa::open`] that can run on any worker: everything but the
    /// window's last word. A drop that no other packet can change (length, SPI,
    /// lifetime) is counted here and returned as an error; anything else comes back
    /// [`Unsettled`], counted by [`InboundSa::settle`] on whichever handle of the SA
    /// settles it. The window is only read here (a packet it already rejects skips the
    /// crypto, as in `open`).
    pub fn open_unsettled(&mut self, esp: &[u8], out: &mut [u8]) -> Result<Unsettled, DropReason> {
        self.unsettled(esp, out)
            .inspect_err(|&reason| self.counters.drops.increment(reason))
    }

    /// Decides an [`Unsettled`] packet against the SA's window and counts its outcome
    /// on this handle: the packet's inner length, or its drop (its bytes in `out`, the
    /// buffer `open_unsettled` wrote, are zeroed). Settling an SA's packets in the
    /// order they arrived gives exactly the outcomes of calling `open` on each in
    /// that order.
    pub fn settle(&mut self, packet: Unsettled, out: &mut [u8]) -> Result<usize, DropReason> {
        let result = self.settled(&packet);
        match result {
            Ok(len) => {
                self.counters.opened_packets += 1;
                self.counters.opened_bytes += len as u64;
            }
            Err(reason) => {
                if let Some(written) = out.get_mut(..packet.written) {
                    written.fill(0);
                }
                self.counters.drops.increment(reason);
            }
        }
        result
    }

    /// §3.4.3: the window has the first word (a packet it rejects now it would have
    /// rejected before the ICV, so before any other reason); a packet the peer sent
    /// (ICV verified), or a whole one of the null baseline that has no ICV, then
    /// slides it.
    fn settled(&self, packet: &Unsettled) -> Result<usize, DropReason> {
        let mut window = self.lock_window();
        if let ReplayCheck::Drop(reason) = window.check(packet.sequence) {
            return Err(reason);
        }
        if packet.authentic || packet.outcome.is_ok() {
            window.update(packet.sequence);
        }
        packet.outcome
    }

    fn unsettled(&mut self, esp: &[u8], out: &mut [u8]) -> Result<Unsettled, DropReason> {
        let transform = self.transform;
        if esp.len() < ESP_HEADER_LEN {
            return Err(DropReason::Truncated);
        }
        if read_u32(esp, 0) != self.spi {
            return Err(DropReason::UnknownSpi);
        }
        if esp.len() < transform.min_packet_len() {
            return Err(DropReason::Truncated);
        }
        let body_start = ESP_HEADER_LEN + transform.iv_len();
        let body_end = esp.len() - transform.icv_len();
        let body_len = body_end - body_start;
        if !body_len.is_multiple_of(transform.alignment()) {
            return Err(DropReason::Truncated);
        }
        if body_len > out.len() {
            return Err(DropReason::TooLarge);
        }
        if self.lifetime.expired(self.decrypted.0, self.decrypted.1) {
            return Err(DropReason::SaExpired);
        }
        let sequence = u64::from(read_u32(esp, 4));
        let mut packet = Unsettled {
            spi: self.spi,
            sequence,
            outcome: Err(DropReason::AuthenticationFailed),
            written: 0,
            authentic: false,
        };
        // A packet the window rejects already is not decrypted; `settle` gives the
        // reason the window has then.
        if let ReplayCheck::Drop(reason) = self.lock_window().check(sequence) {
            packet.outcome = Err(reason);
            return Ok(packet);
        }
        let payload = &mut out[..body_len];
        packet.outcome = self.decrypt(esp, body_start, body_end, payload, &mut packet.authentic);
        if let Ok(len) = packet.outcome {
            packet.written = body_len;
            self.decrypted.0 += 1;
            self.decrypted.1 += len as u64;
        }
        Ok(packet)
    }

    /// Verifies and decrypts the body into `payload` and parses its trailer: the inner
    /// length. `authentic` is set once the ICV verified. On any error `payload` holds
    /// no plaintext.
    fn decrypt(
        &mut self,
        esp: &[u8],
        body_start: usize,
        body_end: usize,
        payload: &mut [u8],
        authentic: &mut bool,
    ) -> Result<usize, DropReason> {
        let header = &esp[..ESP_HEADER_LEN];
        let iv = &esp[ESP_HEADER_LEN..body_start];
        let body = &esp[body_start..body_end];
        let icv = &esp[body_end..];
        match &mut self.engine {
            Engine::Null => payload.copy_from_slice(body),
            Engine::Aead(engine) => {
                let mut explicit = [0u8; AEAD_IV_LEN];
                explicit.copy_from_slice(iv);
                // The AEAD zeroes `payload` when the tag does not verify. Any other
                // library failure is equally a packet we cannot accept.
                engine
                    .open(&explicit, header, body, payload, icv)
                    .map_err(|_| DropReason::AuthenticationFailed)?;
                *authentic = true;
            }
            Engine::CbcHmac(engine) => {
                // §3.4.4: verify before decrypting (encrypt-then-MAC).
                engine
                    .verify_icv(&esp[..body_end], icv)
                    .map_err(|_| DropReason::AuthenticationFailed)?;
                *authentic = true;
                let mut cbc_iv = [0u8; CBC_IV_LEN];
                cbc_iv.copy_from_slice(iv);
                // Whole blocks (checked above) with a 16-byte IV cannot fail short of
                // a library fault; treat one as an unverifiable packet.
                engine.decrypt(&cbc_iv, body, payload).map_err(|_| {
                    payload.fill(0);
                    DropReason::AuthenticationFailed
                })?;
            }
        }
        parse_trailer(payload).inspect_err(|_| payload.fill(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailer_round_trips_for_every_pad_length() {
        for pad_len in 0..16usize {
            let mut payload = vec![0x45u8; 20 + pad_len + TRAILER_LEN];
            payload[2..4].copy_from_slice(&20u16.to_be_bytes());
            write_trailer(&mut payload[20..], NEXT_HEADER_IPV4);
            assert_eq!(parse_trailer(&payload), Ok(20), "pad {pad_len}");
        }
    }

    #[test]
    fn trailer_rejects_bad_padding_and_next_header() {
        let mut payload = vec![0u8; 24];
        payload[0] = 0x45;
        payload[2..4].copy_from_slice(&20u16.to_be_bytes());
        write_trailer(&mut payload[20..], NEXT_HEADER_IPV4);
        assert_eq!(parse_trailer(&payload), Ok(20));
        let mut bad = payload.clone();
        bad[21] = 7;
        assert_eq!(parse_trailer(&bad), Err(DropReason::BadPadding));
        let mut past = payload.clone();
        past[22] = 23;
        assert_eq!(parse_trailer(&past), Err(DropReason::BadPadding));
        let mut next = payload.clone();
        next[23] = 59;
        assert_eq!(parse_trailer(&next), Err(DropReason::BadNextHeader));
        let mut v6 = payload.clone();
        v6[23] = NEXT_HEADER_IPV6;
        assert_eq!(parse_trailer(&v6), Err(DropReason::MalformedInner));
        assert_eq!(parse_trailer(&[1]), Err(DropReason::Truncated));
    }

    #[test]
    fn lifetime_counts_like_xfrm() {
        let l = Lifetime {
            packets: Some(2),
            bytes: Some(100),
        };
        assert!(!l.expired(1, 99));
        assert!(l.expired(2, 0));
        assert!(l.expired(0, 100));
        assert!(!Lifetime::UNLIMITED.expired(u64::MAX, u64::MAX));
    }
}
