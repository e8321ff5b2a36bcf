//! A generator thread: its epoll loop over its connections, starting requests as
//! the arrival policy says and reading every response whole.

use super::*;
use foreign_types::ForeignTypeRef;

pub(super) struct Worker<'a> {
    pub(super) client: &'a Client,
    pub(super) spec: &'a Spec,
    pub(super) request: &'a [u8],
    pub(super) index: usize,
    pub(super) threads: usize,
    pub(super) t0: Instant,
    pub(super) window_start: Instant,
    pub(super) window_end: Instant,
    pub(super) poll: Poll,
    pub(super) conns: Vec<Option<Conn>>,
    pub(super) free: Vec<usize>,
    pub(super) active: usize,
    pub(super) buffers: Vec<Box<[u8]>>,
    pub(super) scratch: Vec<u8>,
    pub(super) session: Option<SslSession>,
    /// [`Spec::pace`]: park large bodies between reads.
    pub(super) pace: bool,
    /// Connections parked now.
    pub(super) parked: usize,
    /// Responses given a sampled reader so far (their seeds).
    pub(super) seeds: u64,
    pub(super) report: ThreadReport,
}

impl<'a> Worker<'a> {
    pub(super) fn new(
        client: &'a Client,
        spec: &'a Spec,
        request: &'a [u8],
        index: usize,
        threads: usize,
        t0: Instant,
    ) -> Result<Worker<'a>> {
        let (window_start, window_end, buckets) = match spec.arrivals {
            Arrivals::Closed { .. } => {
                let ws = t0 + spec.warmup;
                let n = (spec.window.as_nanos() / spec.interval.as_nanos().max(1)) as usize;
                (ws, ws + spec.window, n.max(1))
            }
            Arrivals::Open(s) => {
                let warmup = spec.warmup.min(s.duration());
                let n = (s.duration() - warmup)
                    .as_nanos()
                    .div_ceil(spec.interval.as_nanos().max(1)) as usize;
                (t0 + warmup, t0 + s.duration(), n.max(1))
            }
        };
        Ok(Worker {
            client,
            spec,
            request,
            index,
            threads,
            t0,
            window_start,
            window_end,
            poll: Poll::new().context("creating the generator's epoll instance")?,
            conns: Vec::new(),
            free: Vec::new(),
            active: 0,
            buffers: Vec::new(),
            scratch: vec![0u8; SOCKET_BUFFER],
            session: None,
            pace: spec.pace,
            parked: 0,
            seeds: 0,
            report: ThreadReport::new(buckets, (window_start, window_end)),
        })
    }

    #[expect(
        clippy::too_many_lines,
        reason = "a client thread's event loop: start requests, poll, advance connections, close the window"
    )]
    pub(super) fn run(mut self) -> Result<ThreadReport> {
        let mut events = Events::with_capacity(1024);
        let closed_slots = match self.spec.arrivals {
            Arrivals::Closed { concurrency } => Some(
                concurrency / self.threads + usize::from(self.index < concurrency % self.threads),
            ),
            Arrivals::Open(_) => None,
        };
        let schedule = match self.spec.arrivals {
            Arrivals::Open(s) => Some(s),
            Arrivals::Closed { .. } => None,
        };
        let total_scheduled = schedule.map(|s| s.count()).unwrap_or(0);
        // This thread's share of the schedule: every `threads`-th request.
        let mut next_k = self.index as u64;
        let mut cpu_at_start: Option<u64> = None;
        let mut cpu_at_end: Option<u64> = None;
        let mut last_timeout_check = Instant::now();
        let hard_end = match schedule {
            Some(s) => self.t0 + s.duration() + self.spec.timeout + Duration::from_secs(1),
            None => self.window_end + self.spec.drain,
        };
        loop {
            let now = Instant::now();
            if interrupt::requested() {
                self.report.interrupted = true;
                self.cancel_all();
                break;
            }
            if cpu_at_start.is_none() && now >= self.window_start {
                cpu_at_start = Some(host::thread_cpu_ns());
            }
            if let Some(slots) = closed_slots {
                if now >= self.window_end {
                    if cpu_at_end.is_none() {
                        cpu_at_end = Some(host::thread_cpu_ns());
                        self.note_waiting_at(self.window_end);
                    }
                    if self.active == 0 || now >= hard_end {
                        self.cancel_all();
                        break;
                    }
                } else {
                    // One start per free slot per turn: a start that fails at once
                    // (connection refused) frees its slot again, and must not spin.
                    for _ in self.active..slots {
                        self.start(now, now);
                    }
                }
            }
            if let Some(s) = schedule {
                while next_k < total_scheduled {
                    let at = self.t0 + s.offset(next_k);
                    if at > now {
                        break;
                    }
                    // The warm-up's requests run, uncounted.
                    if at >= self.window_start {
                        let bucket = self.bucket_of(at);
                        self.report.buckets[bucket].attempted += 1;
                        self.report.attempted += 1;
                    }
                    self.start(at, now);
                    next_k += self.threads as u64;
                }
                if next_k >= total_scheduled && self.active == 0 {
                    break;
                }
                if now >= hard_end {
                    self.cancel_all();
                    break;
                }
            }
            if now.duration_since(last_timeout_check) >= TIMEOUT_CHECK {
                last_timeout_check = now;
                self.expire(now);
            }
            // Sleep until the next event, the next scheduled start, or a window edge.
            let mut wait = MAX_WAIT;
            if let Some(s) = schedule {
                if next_k < total_scheduled {
                    let at = self.t0 + s.offset(next_k);
                    wait = wait.min(at.saturating_duration_since(now));
                }
            } else if now < self.window_end {
                wait = wait.min(self.window_end.saturating_duration_since(now));
            }
            // ... or the end of the first nap.
            let wake = self.next_unpark();
            if let Some(t) = wake {
                wait = wait.min(t.saturating_duration_since(now));
            }
            match self.poll.poll(&mut events, Some(wait)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).context("waiting for socket events"),
            }
            for event in events.iter() {
                let i = event.token().0;
                self.drive(i);
            }
            if wake.is_some() {
                self.unpark_due(Instant::now());
            }
        }
        let end_cpu = cpu_at_end.unwrap_or_else(host::thread_cpu_ns);
        self.report.cpu_ns = end_cpu.saturating_sub(cpu_at_start.unwrap_or(end_cpu));
        self.report.thread_cpu_ns = vec![self.report.cpu_ns];
        if schedule.is_some() {
            // The open loop's span: from the warm-up's end until its last request
            // finished. Its requests are those scheduled in the window, however late
            // they finish (the ramp's counts), so a server that falls behind the
            // schedule shows its real rate over the longer span, not the rate asked.
            self.report.window_edges = (self.window_start, Instant::now().max(self.window_end));
        }
        Ok(self.report)
    }

    /// When the first parked connection's nap ends.
    pub(super) fn next_unpark(&self) -> Option<Instant> {
        if self.parked == 0 {
            return None;
        }
        self.conns
            .iter()
            .flatten()
            .filter_map(|c| c.parked_until)
            .min()
    }

    /// Reads every parked connection whose nap has ended.
    pub(super) fn unpark_due(&mut self, now: Instant) {
        for i in 0..self.conns.len() {
            if matches!(&self.conns[i], Some(c) if c.parked_until.is_some_and(|t| t <= now)) {
                self.drive(i);
            }
        }
    }

    pub(super) fn bucket_of(&self, at: Instant) -> usize {
        let i = (at.saturating_duration_since(self.window_start).as_nanos()
            / self.spec.interval.as_nanos().max(1)) as usize;
        i.min(self.report.buckets.len() - 1)
    }

    pub(super) fn in_window(&self, at: Instant) -> bool {
        at >= self.window_start && at < self.window_end
    }

    /// Starts a request scheduled at `scheduled` (closed loop: now).
    pub(super) fn start(&mut self, scheduled: Instant, now: Instant) {
        if matches!(self.spec.arrivals, Arrivals::Closed { .. }) {
            self.report.attempted += 1;
        }
        if self.active >= self.spec.max_connections {
            self.complete_without_conn(scheduled, now, FailureReason::Overload);
            return;
        }
        let tcp = match TcpStream::connect(self.spec.target.addr) {
            Ok(t) => t,
            Err(e) => {
                let reason = if e.raw_os_error() == Some(libc::EMFILE)
                    || e.raw_os_error() == Some(libc::ENFILE)
                {
                    FailureReason::Overload
                } else {
                    FailureReason::Connect
                };
                self.complete_without_conn(scheduled, now, reason);
                return;
            }
        };
        let _ = tcp.set_nodelay(true);
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.conns.push(None);
                self.conns.len() - 1
            }
        };
        let mut sock = Sock {
            tcp,
            buf: self
                .buffers
                .pop()
                .unwrap_or_else(|| vec![0u8; SOCKET_BUFFER].into_boxed_slice()),
            pos: 0,
            end: 0,
        };
        if self
            .poll
            .registry()
            .register(
                &mut sock.tcp,
                Token(index),
                Interest::READABLE | Interest::WRITABLE,
            )
            .is_err()
        {
            self.buffers.push(std::mem::take(&mut sock.buf));
            self.free.push(index);
            self.complete_without_conn(scheduled, now, FailureReason::Overload);
            return;
        }
        self.conns[index] = Some(Conn::new(Phase::Connecting(Some(sock)), scheduled, now));
        self.active += 1;
    }

    pub(super) fn complete_without_conn(
        &mut self,
        scheduled: Instant,
        now: Instant,
        reason: FailureReason,
    ) {
        let conn = Conn::new(Phase::Handshaking, scheduled, now);
        self.account(&conn, now, Step::Failed(reason));
    }

    /// Advances connection `i` as far as it can go without blocking.
    pub(super) fn drive(&mut self, i: usize) {
        let Some(Some(mut conn)) = self.conns.get_mut(i).map(Option::take) else {
            return;
        };
        conn.park = false;
        let step = self.advance(&mut conn);
        match step {
            Step::Pending => {
                self.park_or_unpark(i, &mut conn);
                self.conns[i] = Some(conn);
            }
            done => {
                let now = Instant::now();
                if let Phase::Records(reader) = &conn.phase {
                    self.report.verified.counts.add(&reader.counts);
                }
                if self.client.resumption && matches!(done, Step::Ok) {
                    // The server closed first, after the whole body: the session is
                    // good. OpenSSL forgets a session whose connection is freed
                    // without a close_notify sent (`ssl_clear_bad_session`), so send
                    // one (non-blocking; a peer that already closed need not read it).
                    if let Some(t) = conn.tls.as_mut() {
                        let _ = t.shutdown();
                    }
                }
                self.account(&conn, now, done);
                self.release(i, conn);
            }
        }
    }

    /// After a read that drained connection `i`: parks it (out of the epoll set, so the
    /// server's writes find no sleeper to wake and no window moving) for the next nap,
    /// or, once little of its body is left, puts it back in the set. A socket
    /// registered again reports data already queued (epoll checks readiness on ADD).
    pub(super) fn park_or_unpark(&mut self, i: usize, conn: &mut Conn) {
        let now = Instant::now();
        let (park, paced, first_byte, body_read) =
            (conn.park, conn.paced, conn.first_byte, conn.body_read);
        let parked_until = conn.parked_until;
        let Some(sock) = conn.sock_mut() else {
            return;
        };
        if park {
            if parked_until.is_none() {
                if self.poll.registry().deregister(&mut sock.tcp).is_err() {
                    // Left in the set: read as before, only with more wake-ups.
                    return;
                }
                self.parked += 1;
                if !paced {
                    conn.paced = true;
                    self.report.paced += 1;
                }
            }
            let streaming = first_byte.map_or(Duration::ZERO, |f| now - f);
            conn.parked_until = Some(now + nap_for(body_read, streaming));
        } else if parked_until.is_some() {
            let registered = self.poll.registry().register(
                &mut sock.tcp,
                Token(i),
                Interest::READABLE | Interest::WRITABLE,
            );
            if registered.is_err() {
                // Out of the set for good: read at the next nap's end instead.
                conn.parked_until = Some(now + NAP_MIN);
            } else {
                conn.parked_until = None;
                self.parked -= 1;
            }
        }
    }

    #[expect(
        clippy::too_many_lines,
        reason = "one match arm per phase of a connection's state machine"
    )]
    pub(super) fn advance(&mut self, conn: &mut Conn) -> Step {
        loop {
            match &mut conn.phase {
                Phase::Connecting(sock) => {
                    let Some(s) = sock.as_ref() else {
                        return Step::Failed(FailureReason::Connect);
                    };
                    match s.tcp.take_error() {
                        Ok(None) => {}
                        Ok(Some(_)) | Err(_) => return Step::Failed(FailureReason::Connect),
                    }
                    match s.tcp.peer_addr() {
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::NotConnected => return Step::Pending,
                        Err(_) => return Step::Failed(FailureReason::Connect),
                    }
                    conn.connected = Some(Instant::now());
                    let Some(sock) = sock.take() else {
                        return Step::Failed(FailureReason::Connect);
                    };
                    if self.client.plain {
                        // Plain HTTP: no handshake (none recorded), the request at once.
                        conn.plain = Some(sock);
                        conn.phase = Phase::Writing(0);
                        continue;
                    }
                    let ssl = match self
                        .client
                        .ssl(&self.spec.target.host, self.session.as_ref())
                    {
                        Ok(s) => s,
                        Err(_) => return Step::Failed(FailureReason::Handshake),
                    };
                    match SslStream::new(ssl, sock) {
                        Ok(t) => conn.tls = Some(t),
                        Err(_) => return Step::Failed(FailureReason::Handshake),
                    }
                    conn.phase = Phase::Handshaking;
                }
                Phase::Handshaking => {
                    let Some(tls) = conn.tls.as_mut() else {
                        return Step::Failed(FailureReason::Handshake);
                    };
                    match tls.do_handshake() {
                        Ok(()) => {}
                        Err(e) if want(&e) => return Step::Pending,
                        Err(_) => return Step::Failed(FailureReason::Handshake),
                    }
                    conn.handshaked = Some(Instant::now());
                    let ssl = tls.ssl();
                    let suite = ssl.current_cipher().map(|c| c.name()).unwrap_or("");
                    let version = ssl.version_str();
                    if suite != self.client.suite || version != self.client.protocol {
                        return Step::Failed(FailureReason::WrongSuite);
                    }
                    if self.report.negotiated.is_none() {
                        // SAFETY: `ssl` is this connection's, alive, its handshake
                        // just finished.
                        let group =
                            unsafe { cipherbench_crypto::negotiated_group(ssl.as_ptr().cast()) };
                        self.report.negotiated =
                            Some((suite.to_string(), version.to_string(), group));
                    }
                    conn.resumed = ssl.session_reused();
                    if self.client.resumption && self.client.protocol != "TLSv1.3" {
                        if let Some(s) = ssl.session() {
                            self.session = Some(s.to_owned());
                        }
                    }
                    conn.phase = Phase::Writing(0);
                }
                Phase::Writing(at) => {
                    let mut sent = *at;
                    match conn.write(&self.request[sent..]) {
                        Ok(n) => sent += n,
                        Err(None) => return Step::Pending,
                        Err(Some(())) => return Step::Failed(FailureReason::Io),
                    }
                    conn.phase = Phase::Writing(sent);
                    if sent >= self.request.len() {
                        self.report.requests_sent += 1;
                        let Some(tls) = conn.tls.as_ref() else {
                            // Plain HTTP: read whole, nothing to open.
                            conn.phase = Phase::Head;
                            continue;
                        };
                        conn.phase = match self.sampled_reader(tls) {
                            Some(reader) => {
                                self.report.verified.sampled += 1;
                                Phase::Records(Box::new(reader))
                            }
                            None => {
                                self.report.verified.by_openssl += 1;
                                Phase::Head
                            }
                        };
                    }
                }
                Phase::Records(reader) => {
                    let Some(tls) = conn.tls.as_mut() else {
                        return Step::Failed(FailureReason::Io);
                    };
                    let mut counted = 0u64;
                    let outcome = reader.read(tls.get_mut(), |n| counted += n);
                    let now = Instant::now();
                    if conn.first_byte.is_none() && reader.started() {
                        conn.first_byte = Some(now);
                    }
                    conn.body_read = reader.body();
                    conn.body_expected = reader.expected().unwrap_or(0);
                    self.count_body(now, counted);
                    return match outcome {
                        sampled::Outcome::Pending => {
                            if self.pace && reader.expected().is_some() {
                                conn.park =
                                    parks(conn.body_expected.saturating_sub(conn.body_read));
                            }
                            Step::Pending
                        }
                        sampled::Outcome::Done => Step::Ok,
                        sampled::Outcome::Failed(reason, _) => Step::Failed(reason),
                    };
                }
                Phase::Head | Phase::Body => {
                    let got = match conn.phase {
                        // A plain body is counted, not copied ([`Conn::discard`]); up to
                        // more than is left, so bytes past Content-Length fail it.
                        Phase::Body if conn.plain.is_some() => {
                            conn.discard(SOCKET_BUFFER * 16).unwrap_or(Got::Failed)
                        }
                        _ => conn.read(&mut self.scratch),
                    };
                    let n = match got {
                        Got::Eof => return self.eof(conn),
                        Got::Data(n) => n,
                        Got::NotNow => {
                            if self.pace && matches!(conn.phase, Phase::Body) {
                                conn.park =
                                    parks(conn.body_expected.saturating_sub(conn.body_read));
                            }
                            return Step::Pending;
                        }
                        Got::Failed => return Step::Failed(FailureReason::Io),
                    };
                    let now = Instant::now();
                    if conn.first_byte.is_none() {
                        conn.first_byte = Some(now);
                    }
                    let body_now = if matches!(conn.phase, Phase::Head) {
                        conn.head.extend_from_slice(&self.scratch[..n]);
                        match http::parse_head(&conn.head) {
                            Parsed::Partial => continue,
                            Parsed::Invalid => return Step::Failed(FailureReason::Http),
                            Parsed::Done(head) => {
                                if head.status != 200 {
                                    return Step::Failed(FailureReason::Http);
                                }
                                let Some(len) = head.content_length else {
                                    return Step::Failed(FailureReason::Http);
                                };
                                if self.spec.target.expected_len.is_some_and(|e| e != len) {
                                    return Step::Failed(FailureReason::Length);
                                }
                                conn.body_expected = len;
                                conn.phase = Phase::Body;
                                (conn.head.len() - head.len) as u64
                            }
                        }
                    } else {
                        n as u64
                    };
                    conn.body_read += body_now;
                    self.count_body(now, body_now);
                    if conn.body_read > conn.body_expected {
                        return Step::Failed(FailureReason::Length);
                    }
                    if matches!(conn.phase, Phase::Body) && conn.body_read == conn.body_expected {
                        return Step::Ok;
                    }
                }
            }
        }
    }

    /// Books body bytes read at `now` in the window and its series. Open loop too: a
    /// sweep point at `--rate` is judged by its throughput (the ramp reads only its
    /// request counts); its span runs on past the schedule until the last request
    /// finished.
    pub(super) fn count_body(&mut self, now: Instant, body_now: u64) {
        if body_now == 0 {
            return;
        }
        let open = matches!(self.spec.arrivals, Arrivals::Open(_));
        if self.in_window(now) {
            self.report.window_bytes += body_now;
            let b = self.bucket_of(now);
            self.report.buckets[b].bytes += body_now;
        } else if open && now >= self.window_end {
            // The tail: in the total, not in the schedule's intervals.
            self.report.window_bytes += body_now;
        }
    }

    /// The sampled path's reader for a connection whose request was just written,
    /// where the spec asks for it and it can take over from OpenSSL: a response
    /// large enough, an AEAD suite whose keys were kept, and nothing of the
    /// server's already read by OpenSSL (its read-ahead) or held in its buffer.
    /// None: the response is read whole through OpenSSL.
    pub(super) fn sampled_reader(&mut self, tls: &SslStream<Sock>) -> Option<sampled::Reader> {
        let sampled::Verify::Sampled(sampling) = self.spec.verify else {
            return None;
        };
        let expected = self.spec.target.expected_len;
        if expected.is_some_and(|e| e < sampled::SAMPLED_FROM) || !self.client.keeps_secrets {
            return None;
        }
        let ssl = tls.ssl();
        // SAFETY: `ssl` is this connection's, alive, its handshake finished.
        if ssl.pending() > 0 || unsafe { cipherbench_crypto::ssl_has_pending(ssl.as_ptr().cast()) }
        {
            return None;
        }
        let (keys, seq) = secrets::server_keys(ssl)?;
        let opener = cipherbench_crypto::tls_record::RecordOpener::new(&keys, seq).ok()?;
        let content = match &self.spec.target.content {
            Some(key) => Some(sampled::Content::new(key).ok()?),
            None => None,
        };
        self.seeds += 1;
        let seed = ((self.index as u64) << 48) ^ self.seeds ^ self.t0.elapsed().as_nanos() as u64;
        Some(sampled::Reader::new(
            opener, sampling, seed, expected, content,
        ))
    }

    pub(super) fn eof(&self, conn: &Conn) -> Step {
        match conn.phase {
            Phase::Body if conn.body_read == conn.body_expected => Step::Ok,
            Phase::Body => Step::Failed(FailureReason::Length),
            _ => Step::Failed(FailureReason::Http),
        }
    }

    /// Time to first byte, for the latency limit: every request that overlapped the
    /// window counts, including the wait so far of one that never got a first byte.
    pub(super) fn note_first_byte_wait(&mut self, conn: &Conn, now: Instant) {
        let fb_end = conn.first_byte.unwrap_or(now);
        if conn.scheduled < self.window_end && fb_end >= self.window_start {
            self.report.max_first_byte = self
                .report
                .max_first_byte
                .max(fb_end.duration_since(conn.scheduled));
        }
    }

    /// Books a finished request.
    pub(super) fn account(&mut self, conn: &Conn, now: Instant, step: Step) {
        let closed = matches!(self.spec.arrivals, Arrivals::Closed { .. });
        self.note_first_byte_wait(conn, now);
        let counts = if closed {
            self.in_window(now)
        } else {
            conn.scheduled >= self.window_start
        };
        match step {
            Step::Pending => {}
            Step::Ok => {
                self.report.ok_total += 1;
                self.report.resumed_total += u64::from(conn.resumed);
                // TLS 1.3 sends its tickets after the handshake (RFC 8446 §4.6.1):
                // the session worth resuming is the one read to the end.
                if self.client.resumption && self.client.protocol == "TLSv1.3" {
                    if let Some(s) = conn.tls.as_ref().and_then(|t| t.ssl().session()) {
                        self.session = Some(s.to_owned());
                    }
                }
                self.report.body_bytes += conn.body_read;
                let latency = now.duration_since(conn.scheduled);
                if counts {
                    self.report.ok += 1;
                    self.report.latency.saturating_record(micros(latency));
                    if let Some(fb) = conn.first_byte {
                        self.report
                            .first_byte
                            .saturating_record(micros(fb.duration_since(conn.scheduled)));
                    }
                    if let (Some(c), Some(h)) = (conn.connected, conn.handshaked) {
                        self.report
                            .handshake
                            .saturating_record(micros(h.duration_since(c)));
                    }
                    if let Some(c) = conn.connected {
                        self.report
                            .connect
                            .saturating_record(micros(c.duration_since(conn.started)));
                    }
                    let b = self.bucket_of(if closed { now } else { conn.scheduled });
                    let bucket = &mut self.report.buckets[b];
                    bucket.ok += 1;
                    bucket.max_latency_ns = bucket.max_latency_ns.max(latency.as_nanos() as u64);
                }
            }
            Step::Failed(reason) => {
                if counts {
                    self.report.failed += 1;
                    *self.report.failures.entry(reason).or_default() += 1;
                    let b = self.bucket_of(if closed { now } else { conn.scheduled });
                    self.report.buckets[b].failed += 1;
                }
            }
        }
    }

    /// At the window's end, requests still waiting for a first byte have waited at
    /// least this long.
    pub(super) fn note_waiting_at(&mut self, at: Instant) {
        for c in self.conns.iter().flatten() {
            if c.first_byte.is_none() && c.scheduled < at {
                self.report.max_first_byte = self
                    .report
                    .max_first_byte
                    .max(at.duration_since(c.scheduled));
            }
        }
    }

    pub(super) fn release(&mut self, i: usize, mut conn: Conn) {
        if conn.parked_until.is_some() {
            self.parked -= 1;
        }
        if let Some(sock) = conn.sock_mut() {
            let _ = self.poll.registry().deregister(&mut sock.tcp);
            self.buffers.push(std::mem::take(&mut sock.buf));
        } else if let Phase::Connecting(Some(sock)) = &mut conn.phase {
            let _ = self.poll.registry().deregister(&mut sock.tcp);
            self.buffers.push(std::mem::take(&mut sock.buf));
        }
        self.conns[i] = None;
        self.free.push(i);
        self.active -= 1;
    }

    pub(super) fn expire(&mut self, now: Instant) {
        for i in 0..self.conns.len() {
            let expired = matches!(&self.conns[i], Some(c) if now.duration_since(c.scheduled) > self.spec.timeout);
            if expired {
                if let Some(conn) = self.conns[i].take() {
                    self.account(&conn, now, Step::Failed(FailureReason::Timeout));
                    self.release(i, conn);
                }
            }
        }
    }

    pub(super) fn cancel_all(&mut self) {
        let now = Instant::now();
        for i in 0..self.conns.len() {
            if let Some(conn) = self.conns[i].take() {
                self.note_first_byte_wait(&conn, now);
                self.report.cancelled += 1;
                self.release(i, conn);
            }
        }
    }
}
