//! A writer for outputs that are going to be fsynced anyway: it bypasses the page
//! cache (`O_DIRECT`), so the data goes from our buffers to the disk without a copy
//! into the cache, without dirty pages to flush at the end, and with two writes in
//! flight so the disk is kept busy while the pipeline computes.
//!
//! `O_DIRECT` wants the buffer address, the length and the file offset aligned to the
//! device's block. Bytes are gathered into 4 KiB-aligned blocks of 2 MiB, written at
//! 2 MiB-aligned offsets by two I/O threads; the final partial block is written
//! after `O_DIRECT` is switched off again. File systems that do not support it
//! (tmpfs) are detected when it is switched on, and the caller falls back to
//! ordinary writes.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Alignment for `O_DIRECT` (the largest logical block size in common use).
const ALIGN: usize = 4096;
/// One write.
const BLOCK: usize = 2 << 20;
/// Blocks in circulation: one being filled, the rest in flight or free.
const BUFFERS: usize = 4;
/// Concurrent writes.
const IO_THREADS: usize = 2;

/// Turns `O_DIRECT` on or off for an open file. Fails (EINVAL) where the file system
/// does not support it.
pub fn set_direct(file: &File, on: bool) -> io::Result<()> {
    let fd = file.as_raw_fd();
    // SAFETY: F_GETFL/F_SETFL on an open descriptor only read and set its flags.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        let flags = if on {
            flags | libc::O_DIRECT
        } else {
            flags & !libc::O_DIRECT
        };
        if libc::fcntl(fd, libc::F_SETFL, flags) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A heap block of `BLOCK` bytes starting at an `ALIGN`-aligned address (a `Vec`
/// with slack, used from its first aligned byte: no unsafe allocation needed).
struct Aligned {
    raw: Vec<u8>,
    start: usize,
}

impl Aligned {
    fn new() -> Aligned {
        let raw = vec![0u8; BLOCK + ALIGN];
        let start = raw.as_ptr().align_offset(ALIGN);
        Aligned { raw, start }
    }

    fn bytes(&self) -> &[u8] {
        &self.raw[self.start..self.start + BLOCK]
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + BLOCK]
    }
}

/// Writes through `O_DIRECT` with two writes in flight. Call [`DirectWriter::finish`]
/// to write the tail and learn of any error.
pub struct DirectWriter {
    file: Arc<File>,
    current: Option<Aligned>,
    filled: usize,
    offset: u64,
    free: Receiver<Aligned>,
    jobs: Option<SyncSender<(Aligned, u64)>>,
    threads: Vec<JoinHandle<()>>,
    error: Arc<Mutex<Option<io::Error>>>,
}

impl DirectWriter {
    /// Switches `file` (empty, opened for writing) to `O_DIRECT` and starts the I/O
    /// threads; returns the file back if the file system does not support it.
    pub fn new(file: File) -> Result<DirectWriter, (File, io::Error)> {
        if let Err(e) = set_direct(&file, true) {
            return Err((file, e));
        }
        let file = Arc::new(file);
        let (free_tx, free) = sync_channel::<Aligned>(BUFFERS);
        for _ in 1..BUFFERS {
            // The channel has room for every buffer.
            let _ = free_tx.send(Aligned::new());
        }
        let (jobs_tx, jobs_rx) = sync_channel::<(Aligned, u64)>(BUFFERS);
        let jobs_rx = Arc::new(Mutex::new(jobs_rx));
        let error = Arc::new(Mutex::new(None));
        let threads = (0..IO_THREADS)
            .map(|_| {
                let file = Arc::clone(&file);
                let jobs = Arc::clone(&jobs_rx);
                let free = free_tx.clone();
                let error = Arc::clone(&error);
                std::thread::spawn(move || {
                    // Ctrl-C and SIGTERM are the main thread's (see `interrupt`).
                    crate::interrupt::keep_off_this_thread();
                    loop {
                        let job = jobs.lock().unwrap_or_else(|p| p.into_inner()).recv();
                        let Ok((block, offset)) = job else { return };
                        let failed = error.lock().unwrap_or_else(|p| p.into_inner()).is_some();
                        if !failed {
                            if let Err(e) = file.write_all_at(block.bytes(), offset) {
                                *error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                            }
                        }
                        if free.send(block).is_err() {
                            return;
                        }
                    }
                })
            })
            .collect();
        Ok(DirectWriter {
            file,
            current: Some(Aligned::new()),
            filled: 0,
            offset: 0,
            free,
            jobs: Some(jobs_tx),
            threads,
            error,
        })
    }

    fn take_error(&self) -> io::Result<()> {
        match self.error.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn submit(&mut self) -> io::Result<()> {
        self.take_error()?;
        let block = self
            .current
            .take()
            .ok_or_else(|| io::Error::other("direct writer finished"))?;
        let jobs = self
            .jobs
            .as_ref()
            .ok_or_else(|| io::Error::other("direct writer finished"))?;
        jobs.send((block, self.offset))
            .map_err(|_| io::Error::other("direct writer threads ended"))?;
        self.offset += BLOCK as u64;
        self.filled = 0;
        self.current = Some(
            self.free
                .recv()
                .map_err(|_| io::Error::other("direct writer threads ended"))?,
        );
        Ok(())
    }

    /// Waits for the writes in flight, writes the final partial block without
    /// `O_DIRECT`, and returns the file (not yet fsynced).
    pub fn finish(mut self) -> io::Result<File> {
        self.jobs = None;
        for t in std::mem::take(&mut self.threads) {
            let _ = t.join();
        }
        self.take_error()?;
        set_direct(&self.file, false)?;
        if let Some(block) = &self.current {
            if self.filled > 0 {
                self.file
                    .write_all_at(&block.bytes()[..self.filled], self.offset)?;
            }
        }
        // Every thread has ended, so this is the only reference left.
        let file = Arc::clone(&self.file);
        drop(self);
        Arc::try_unwrap(file).map_err(|_| io::Error::other("direct writer file still shared"))
    }
}

impl Write for DirectWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut taken = 0;
        while taken < buf.len() {
            let filled = self.filled;
            let block = self
                .current
                .as_mut()
                .ok_or_else(|| io::Error::other("direct writer finished"))?;
            let n = (BLOCK - filled).min(buf.len() - taken);
            block.bytes_mut()[filled..filled + n].copy_from_slice(&buf[taken..taken + n]);
            self.filled += n;
            taken += n;
            if self.filled == BLOCK {
                self.submit()?;
            }
        }
        Ok(taken)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.take_error()
    }
}

impl Drop for DirectWriter {
    fn drop(&mut self) {
        self.jobs = None;
        for t in std::mem::take(&mut self.threads) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_every_byte_in_order_around_block_edges() {
        let dir = std::env::temp_dir().join(format!("cb-direct-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out");
        for len in [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 5 * BLOCK + 4097] {
            let data: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
            let file = File::create(&path).unwrap();
            let mut w = match DirectWriter::new(file) {
                Ok(w) => w,
                // A file system without O_DIRECT (tmpfs): nothing to test here.
                Err(_) => break,
            };
            // Odd-sized writes, as the pipeline's batches are.
            for piece in data.chunks(65_552) {
                w.write_all(piece).unwrap();
            }
            let f = w.finish().unwrap();
            f.sync_all().unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), data, "len {len}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
