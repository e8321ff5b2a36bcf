//! The parallel, bounded pipeline behind `seal` and `open`: one reader thread cuts
//! the input into batches of whole chunks, worker threads seal or open batches
//! (each with its own keyed cipher context), and the calling thread writes the
//! results back in order.
//!
//! - **Bounded memory**: a fixed pool of batch buffers circulates (reader → workers →
//!   writer → reader), so memory is the same for 1 KiB and 1 TiB: about
//!   `buffers × (input + output batch)`, at most `POOL_BUDGET_BYTES` (32 MiB; about
//!   12 MiB with two workers, see [`Shape`]).
//! - **Order**: batches carry a sequence number; the writer holds early finishers
//!   until their turn.
//! - **End of stream**: a batch is the last one when the input ends inside it or
//!   right after it; the reader reads one byte past a full batch to know, and carries
//!   that byte into the next batch. An input that ends after a stop was asked for is
//!   not an end: Ctrl-C at a terminal kills the producer of a pipe too, and its end
//!   of input must not be sealed as the end of the data.
//! - **Stopping**: the reader never sits in a `read` that could block for ever: on
//!   anything but a regular file it waits with `poll` and a timeout
//!   ([`WAIT_STEP`]) and asks `cancel` between waits, so a pipe that is open but
//!   silent does not hold Ctrl-C or SIGTERM back. (Making the signal interrupt the
//!   `read` instead would need it delivered to the reader thread, while POSIX
//!   hands a process's signal to any thread that does not block it; the helper
//!   threads block the stop signals instead, see [`crate::interrupt`].) The
//!   writer, on the main thread, takes the signals itself: a `write` they cut
//!   short returns, and the writer stops.
//! - **Errors in order**: a failure (a chunk that did not verify, an I/O error,
//!   Ctrl-C) is reported when the writer reaches its place in the stream, so the
//!   error names the first failing chunk and nothing after it is written; every
//!   thread then winds down. The error comes with the bytes `write` accepted until
//!   then ([`Stopped`]): to stdout, that is what the consumer got.
//!
//! What a batch *means* (the format) is the [`Transform`]'s business; this module
//! only moves bytes.

use crate::interrupt::{self, Interrupted};
use anyhow::{anyhow, Context, Result};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a read waits for a silent input before asking whether to stop: short
/// enough that Ctrl-C feels immediate, long enough to cost nothing.
pub const WAIT_STEP: Duration = Duration::from_millis(100);

/// Something the pipeline reads from.
pub trait Source: Send {
    /// Reads into `buf`: at least one byte, or 0 at the end of the input. Gives up
    /// with [`Interrupted`] when `cancel` says so, also while waiting for data.
    fn read_some(&mut self, buf: &mut [u8], cancel: &dyn Fn() -> bool) -> Result<usize>;
}

/// A file, or stdin (a pipe, a terminal, a socket, a file).
pub struct Input {
    file: File,
    /// Not a regular file: a read can wait for ever, so wait with `poll` first.
    waits: bool,
}

impl Input {
    /// Reads `file`.
    pub fn file(file: File) -> Input {
        let waits = !file.metadata().map(|m| m.is_file()).unwrap_or(false);
        Input { file, waits }
    }

    /// Reads stdin, through a duplicate of descriptor 0 rather than `std`'s
    /// buffered handle: `poll` then sees every byte that was not read yet.
    pub fn stdin() -> std::io::Result<Input> {
        let fd = std::io::stdin().as_fd().try_clone_to_owned()?;
        Ok(Input::file(File::from(fd)))
    }
}

impl Source for Input {
    fn read_some(&mut self, buf: &mut [u8], cancel: &dyn Fn() -> bool) -> Result<usize> {
        loop {
            if cancel() {
                return Err(Interrupted.into());
            }
            if self.waits && !super::sys::wait_readable(self.file.as_fd(), WAIT_STEP)? {
                continue;
            }
            match self.file.read(buf) {
                Ok(n) => return Ok(n),
                // A signal landed in the read: ask `cancel` again.
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// Turns one batch of input into output; one instance per worker thread.
pub trait Transform: Send {
    /// Processes the batch whose first chunk is `first_chunk`; `last` says it ends
    /// the stream. Returns the bytes written to `output`.
    fn apply(
        &mut self,
        first_chunk: u64,
        input: &[u8],
        last: bool,
        output: &mut [u8],
    ) -> Result<usize>;
}

/// Plaintext (or sealed) bytes a batch aims for: 1 MiB amortises the hand-offs
/// between threads and keeps a dozen batches in flight within the pool's budget.
const BATCH_TARGET_BYTES: usize = 1 << 20;
/// Memory the batch pool may use.
const POOL_BUDGET_BYTES: usize = 32 << 20;

/// The pipeline's dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Input bytes per chunk (the chunk size to seal; chunk + tag to open).
    pub in_unit: usize,
    /// Output bytes per chunk, at most.
    pub out_unit: usize,
    /// Chunks per batch.
    pub chunks_per_batch: usize,
    /// Worker threads.
    pub workers: usize,
    /// Batch buffers in circulation.
    pub buffers: usize,
}

impl Shape {
    /// A shape for `workers` threads: batches of about 1 MiB, and two batches per
    /// worker plus two in flight, within a 32 MiB pool.
    pub fn new(in_unit: usize, out_unit: usize, workers: usize) -> Shape {
        let workers = workers.clamp(1, 64);
        let chunks_per_batch = (BATCH_TARGET_BYTES / in_unit.max(1)).max(1);
        let per_buffer = chunks_per_batch * (in_unit + out_unit);
        let buffers = (2 * workers + 2).min((POOL_BUDGET_BYTES / per_buffer).max(3));
        Shape {
            in_unit,
            out_unit,
            chunks_per_batch,
            workers,
            buffers,
        }
    }

    /// Bytes of batch buffers the pipeline holds.
    pub fn memory_bytes(&self) -> usize {
        self.buffers * self.chunks_per_batch * (self.in_unit + self.out_unit)
    }
}

/// What went through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Totals {
    /// Bytes read from the input.
    pub bytes_in: u64,
    /// Bytes written to the output.
    pub bytes_out: u64,
}

struct Batch {
    seq: u64,
    first_chunk: u64,
    last: bool,
    /// Allocated (and zeroed) once at full size; `input_len` bytes are valid. Not
    /// re-zeroed per batch: every valid byte was just read.
    input: Vec<u8>,
    input_len: usize,
    output: Vec<u8>,
}

struct Done {
    seq: u64,
    batch: Option<Batch>,
    result: Result<usize>,
}

/// Why the pipeline stopped before the end of the input, and what it had written
/// by then.
#[derive(Debug)]
pub struct Stopped {
    /// The first failure in stream order.
    pub error: anyhow::Error,
    /// Bytes read, and bytes `write` accepted: exact even when a batch was cut.
    pub totals: Totals,
}

/// Runs the pipeline from `input` to `output`. `make` builds one transform per
/// worker; `cancel` (Ctrl-C) is asked before every read and write, and while a
/// read waits.
pub fn run<T: Transform>(
    input: &mut dyn Source,
    output: &mut dyn Write,
    shape: &Shape,
    make: &(dyn Fn() -> Result<T> + Sync),
    cancel: &(dyn Fn() -> bool + Sync),
) -> Result<Totals, Stopped> {
    let in_capacity = shape.chunks_per_batch * shape.in_unit;
    let out_capacity = shape.chunks_per_batch * shape.out_unit;
    let (pool_tx, pool_rx) = sync_channel::<Batch>(shape.buffers);
    for _ in 0..shape.buffers {
        // The channel has room for every buffer, and its receiver is alive.
        let _ = pool_tx.send(Batch {
            seq: 0,
            first_chunk: 0,
            last: false,
            input: vec![0u8; in_capacity],
            input_len: 0,
            output: vec![0u8; out_capacity],
        });
    }
    let (work_tx, work_rx) = sync_channel::<Batch>(shape.buffers);
    let work_rx = Arc::new(Mutex::new(work_rx));
    let (done_tx, done_rx) = sync_channel::<Done>(shape.buffers + 1);
    let abort = AtomicBool::new(false);
    let mut totals = Totals::default();

    let result = std::thread::scope(|scope| {
        {
            let done_tx = done_tx.clone();
            let abort = &abort;
            scope.spawn(move || {
                interrupt::keep_off_this_thread();
                read_batches(input, shape, pool_rx, work_tx, done_tx, abort, cancel)
            });
        }
        for _ in 0..shape.workers {
            let work_rx = Arc::clone(&work_rx);
            let done_tx = done_tx.clone();
            let abort = &abort;
            scope.spawn(move || {
                interrupt::keep_off_this_thread();
                work(make, work_rx, done_tx, abort)
            });
        }
        drop(done_tx);
        let result = write_in_order(output, done_rx, pool_tx, cancel, &mut totals);
        if result.is_err() {
            // Also wakes a reader waiting on a silent input.
            abort.store(true, Ordering::SeqCst);
        }
        result
    });
    match result {
        Ok(()) => Ok(totals),
        Err(error) => Err(Stopped { error, totals }),
    }
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
pub fn read_full(
    input: &mut dyn Source,
    buf: &mut [u8],
    cancel: &dyn Fn() -> bool,
) -> Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read_some(&mut buf[filled..], cancel)? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

/// Writes all of `buf`, adding to `written` what each `write` accepted, so that a
/// failure leaves `written` exact. A `write` cut short by a signal returns what it
/// had written; then `cancel` decides whether to go on.
pub fn write_all(
    output: &mut dyn Write,
    mut buf: &[u8],
    cancel: &dyn Fn() -> bool,
    written: &mut u64,
) -> Result<()> {
    while !buf.is_empty() {
        if cancel() {
            return Err(Interrupted.into());
        }
        match output.write(buf) {
            Ok(0) => {
                return Err(std::io::Error::from(ErrorKind::WriteZero))
                    .context("writing the output")
            }
            Ok(n) => {
                *written += n as u64;
                buf = &buf[n..];
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("writing the output"),
        }
    }
    Ok(())
}

fn read_batches(
    input: &mut dyn Source,
    shape: &Shape,
    pool: Receiver<Batch>,
    work: SyncSender<Batch>,
    done: SyncSender<Done>,
    abort: &AtomicBool,
    cancel: &(dyn Fn() -> bool + Sync),
) {
    let capacity = shape.chunks_per_batch * shape.in_unit;
    let stop = || abort.load(Ordering::SeqCst) || cancel();
    let mut carry: Option<u8> = None;
    let mut seq = 0u64;
    let mut chunk = 0u64;
    let fail = |seq: u64, error: anyhow::Error| {
        let _ = done.send(Done {
            seq,
            batch: None,
            result: Err(error),
        });
    };
    loop {
        if abort.load(Ordering::SeqCst) {
            return;
        }
        if cancel() {
            return fail(seq, Interrupted.into());
        }
        let Ok(mut batch) = pool.recv() else { return };
        let mut filled = 0;
        if let Some(byte) = carry.take() {
            batch.input[0] = byte;
            filled = 1;
        }
        let outcome = read_full(input, &mut batch.input[filled..], &stop).and_then(|n| {
            filled += n;
            if filled < capacity {
                return Ok(true);
            }
            // A full batch: is there anything after it?
            let mut one = [0u8; 1];
            let more = read_full(input, &mut one, &stop)?;
            if more == 1 {
                carry = Some(one[0]);
            }
            Ok(more == 0)
        });
        let last = match outcome {
            // The input ended, but a stop was asked for first: the end may be the
            // stop's doing (the producer killed by the same Ctrl-C).
            Ok(true) if cancel() => return fail(seq, Interrupted.into()),
            Ok(last) => last,
            Err(e) if e.downcast_ref::<Interrupted>().is_some() => return fail(seq, e),
            Err(e) => return fail(seq, e.context("reading the input")),
        };
        batch.input_len = filled;
        batch.seq = seq;
        batch.first_chunk = chunk;
        batch.last = last;
        chunk += filled.div_ceil(shape.in_unit) as u64;
        seq += 1;
        if work.send(batch).is_err() || last {
            return;
        }
    }
}

fn work<T: Transform>(
    make: &(dyn Fn() -> Result<T> + Sync),
    work: Arc<Mutex<Receiver<Batch>>>,
    done: SyncSender<Done>,
    abort: &AtomicBool,
) {
    // A worker that cannot set up still answers every batch it takes (with the
    // error), so the writer reports it in order instead of waiting forever.
    let mut transform = make();
    loop {
        let next = {
            // A poisoned lock means another worker panicked; the receiver is intact.
            let rx = work.lock().unwrap_or_else(|p| p.into_inner());
            rx.recv()
        };
        let Ok(mut batch) = next else { return };
        if abort.load(Ordering::SeqCst) {
            return;
        }
        let result = match &mut transform {
            Ok(t) => {
                let Batch {
                    first_chunk,
                    last,
                    input,
                    input_len,
                    output,
                    ..
                } = &mut batch;
                t.apply(*first_chunk, &input[..*input_len], *last, output)
            }
            Err(e) => Err(anyhow!("setting up a worker: {e:#}")),
        };
        let seq = batch.seq;
        if done
            .send(Done {
                seq,
                batch: Some(batch),
                result,
            })
            .is_err()
        {
            return;
        }
    }
}

fn write_in_order(
    output: &mut dyn Write,
    done: Receiver<Done>,
    pool: SyncSender<Batch>,
    cancel: &dyn Fn() -> bool,
    totals: &mut Totals,
) -> Result<()> {
    let mut next = 0u64;
    let mut waiting: BTreeMap<u64, Done> = BTreeMap::new();
    loop {
        let Ok(d) = done.recv() else {
            return Err(anyhow!(
                "the pipeline stopped before the end of the input (a thread failed)"
            ));
        };
        waiting.insert(d.seq, d);
        while let Some(d) = waiting.remove(&next) {
            let n = d.result?;
            // A result with no batch is always an error (reader failures), handled
            // by `?` above.
            let batch = d
                .batch
                .ok_or_else(|| anyhow!("pipeline result without a batch"))?;
            write_all(output, &batch.output[..n], cancel, &mut totals.bytes_out)?;
            totals.bytes_in += batch.input_len as u64;
            let last = batch.last;
            // The reader may have finished; a closed pool is fine then.
            let _ = pool.send(batch);
            next += 1;
            if last {
                output.flush().context("writing the output")?;
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    /// Upper-cases, and checks that chunk numbering and the last flag are right.
    struct Upper {
        unit: usize,
    }

    impl Transform for Upper {
        fn apply(
            &mut self,
            first: u64,
            input: &[u8],
            last: bool,
            output: &mut [u8],
        ) -> Result<usize> {
            if !last {
                assert_eq!(
                    input.len() % self.unit,
                    0,
                    "a middle batch must be whole chunks"
                );
            }
            for (i, piece) in input.chunks(self.unit).enumerate() {
                // Every chunk starts with its index as a byte, in this test's data.
                assert_eq!(piece[0], ((first + i as u64) % 251) as u8);
            }
            for (o, i) in output.iter_mut().zip(input) {
                *o = i.to_ascii_uppercase();
            }
            Ok(input.len())
        }
    }

    fn data(len: usize, unit: usize) -> Vec<u8> {
        (0..len)
            .map(|i| {
                if i % unit == 0 {
                    ((i / unit) % 251) as u8
                } else {
                    b'a' + (i % 26) as u8
                }
            })
            .collect()
    }

    /// An in-memory input: where the bytes come from is not the pipeline's logic.
    struct Mem<R>(R);

    impl<R: Read + Send> Source for Mem<R> {
        fn read_some(&mut self, buf: &mut [u8], cancel: &dyn Fn() -> bool) -> Result<usize> {
            if cancel() {
                return Err(Interrupted.into());
            }
            Ok(self.0.read(buf)?)
        }
    }

    /// A reader that hands out at most 7 bytes per read, like a slow pipe.
    struct Trickle(Cursor<Vec<u8>>);

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(7);
            self.0.read(&mut buf[..n])
        }
    }

    #[test]
    fn preserves_order_and_bytes_at_every_boundary() {
        let unit = 64;
        for workers in [1, 3] {
            let shape = Shape {
                in_unit: unit,
                out_unit: unit,
                chunks_per_batch: 4,
                workers,
                buffers: 3,
            };
            let batch = 4 * unit;
            for len in [
                1,
                unit - 1,
                unit,
                unit + 1,
                batch - 1,
                batch,
                batch + 1,
                10 * batch + 5,
                37 * unit,
            ] {
                let input = data(len, unit);
                let mut out = Vec::new();
                let totals = run(
                    &mut Mem(Trickle(Cursor::new(input.clone()))),
                    &mut out,
                    &shape,
                    &|| Ok(Upper { unit }),
                    &|| false,
                )
                .unwrap();
                assert_eq!(
                    out,
                    input.to_ascii_uppercase(),
                    "len {len}, {workers} workers"
                );
                assert_eq!(totals.bytes_in, len as u64);
            }
        }
    }

    #[test]
    fn an_empty_input_is_one_empty_last_batch() {
        struct Count(Arc<Mutex<Vec<(u64, usize, bool)>>>);
        impl Transform for Count {
            fn apply(
                &mut self,
                first: u64,
                input: &[u8],
                last: bool,
                _: &mut [u8],
            ) -> Result<usize> {
                self.0.lock().unwrap().push((first, input.len(), last));
                Ok(0)
            }
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        let shape = Shape::new(64, 80, 2);
        let mut out = Vec::new();
        run(
            &mut Mem(Cursor::new(Vec::new())),
            &mut out,
            &shape,
            &|| Ok(Count(Arc::clone(&seen))),
            &|| false,
        )
        .unwrap();
        assert_eq!(*seen.lock().unwrap(), vec![(0, 0, true)]);
    }

    #[test]
    fn reports_the_first_failing_batch_and_writes_nothing_after_it() {
        struct FailAt(u64);
        impl Transform for FailAt {
            fn apply(
                &mut self,
                first: u64,
                input: &[u8],
                _: bool,
                output: &mut [u8],
            ) -> Result<usize> {
                if first >= self.0 {
                    anyhow::bail!("chunk {first} failed");
                }
                output[..input.len()].copy_from_slice(input);
                Ok(input.len())
            }
        }
        let shape = Shape {
            in_unit: 16,
            out_unit: 16,
            chunks_per_batch: 2,
            workers: 3,
            buffers: 4,
        };
        let input = vec![1u8; 16 * 40];
        let mut out = Vec::new();
        let err = run(
            &mut Mem(Cursor::new(input)),
            &mut out,
            &shape,
            &|| Ok(FailAt(10)),
            &|| false,
        )
        .unwrap_err();
        assert_eq!(err.error.to_string(), "chunk 10 failed");
        assert_eq!(err.totals.bytes_out, 16 * 10);
        assert_eq!(
            out.len(),
            16 * 10,
            "only the batches before the failure are written"
        );
    }

    #[test]
    fn cancelling_stops_with_interrupted() {
        let shape = Shape::new(64, 64, 2);
        let mut out = Vec::new();
        let err = run(
            &mut Mem(Cursor::new(vec![0u8; 1 << 22])),
            &mut out,
            &shape,
            &|| Ok(Upper { unit: 64 }),
            &|| true,
        )
        .unwrap_err();
        assert!(
            err.error.downcast_ref::<Interrupted>().is_some(),
            "{}",
            err.error
        );
    }

    #[test]
    fn a_silent_pipe_does_not_hold_back_a_cancel() {
        // A real socket pair: one end is the input, the other stays open and silent.
        let (ours, silent) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut input = Input::file(File::from(std::os::fd::OwnedFd::from(ours)));
        let cancelled = AtomicBool::new(false);
        let (finished, wait_finished) = std::sync::mpsc::channel::<()>();
        let started = std::time::Instant::now();
        let err = std::thread::scope(|scope| {
            let cancelled = &cancelled;
            scope.spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                cancelled.store(true, Ordering::SeqCst);
                // A safety net, so that a reader deaf to the cancel fails the test
                // below instead of hanging it: the input ends after 5 s.
                let _ = wait_finished.recv_timeout(Duration::from_secs(5));
                drop(silent);
            });
            let mut out = Vec::new();
            let result = run(
                &mut input,
                &mut out,
                &Shape::new(64, 64, 2),
                &|| Ok(Upper { unit: 64 }),
                &|| cancelled.load(Ordering::SeqCst),
            );
            let _ = finished.send(());
            result.unwrap_err()
        });
        assert!(
            err.error.downcast_ref::<Interrupted>().is_some(),
            "{}",
            err.error
        );
        assert!(
            started.elapsed() < Duration::from_millis(300) + 5 * WAIT_STEP,
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn an_input_that_ends_after_a_cancel_is_not_taken_as_whole() {
        /// Ends, and by the time it says so a stop has been asked for (as when
        /// Ctrl-C kills the producer of a pipe and us together).
        struct EndsOnCtrlC<'a>(Cursor<Vec<u8>>, &'a AtomicBool);
        impl Source for EndsOnCtrlC<'_> {
            fn read_some(&mut self, buf: &mut [u8], _: &dyn Fn() -> bool) -> Result<usize> {
                let n = self.0.read(buf)?;
                if n == 0 {
                    self.1.store(true, Ordering::SeqCst);
                }
                Ok(n)
            }
        }
        let stop = AtomicBool::new(false);
        let lasts = Arc::new(Mutex::new(0));
        struct CountLast(Arc<Mutex<usize>>);
        impl Transform for CountLast {
            fn apply(&mut self, _: u64, input: &[u8], last: bool, out: &mut [u8]) -> Result<usize> {
                *self.0.lock().unwrap() += usize::from(last);
                out[..input.len()].copy_from_slice(input);
                Ok(input.len())
            }
        }
        let mut out = Vec::new();
        let err = run(
            &mut EndsOnCtrlC(Cursor::new(vec![5u8; 3 << 20]), &stop),
            &mut out,
            &Shape::new(64, 64, 2),
            &|| Ok(CountLast(Arc::clone(&lasts))),
            &|| stop.load(Ordering::SeqCst),
        )
        .unwrap_err();
        assert!(
            err.error.downcast_ref::<Interrupted>().is_some(),
            "{}",
            err.error
        );
        assert_eq!(*lasts.lock().unwrap(), 0, "a last chunk was made");
    }

    #[test]
    fn counts_the_bytes_write_accepted_when_a_write_fails() {
        /// Accepts 1000 bytes in pieces of 300, then fails like a closed pipe.
        struct Closes(usize);
        impl Write for Closes {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                if self.0 == 0 {
                    return Err(ErrorKind::BrokenPipe.into());
                }
                let n = buf.len().min(300).min(self.0);
                self.0 -= n;
                Ok(n)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let stopped = run(
            &mut Mem(Cursor::new(data(64 * 100, 64))),
            &mut Closes(1000),
            &Shape::new(64, 64, 2),
            &|| Ok(Upper { unit: 64 }),
            &|| false,
        )
        .unwrap_err();
        assert_eq!(stopped.totals.bytes_out, 1000);
        assert!(
            format!("{:#}", stopped.error).contains("broken pipe"),
            "{:#}",
            stopped.error
        );
    }

    #[test]
    fn memory_stays_bounded_for_any_chunk_size() {
        for log2 in 8..=22 {
            let c = 1usize << log2;
            for workers in [1, 2, 64] {
                let shape = Shape::new(c + 16, c, workers);
                assert!(
                    shape.memory_bytes() <= 40 << 20,
                    "{log2} {workers}: {shape:?}"
                );
                assert!(shape.buffers >= 3);
            }
        }
    }
}
