//! `cipherbench seal` and `cipherbench open`: the I/O shell around the stream format
//! (`cipherbench-stream`). Files or stdin/stdout in, the [`pipeline`] in the middle,
//! an [`AtomicFile`] (or stdout) out.
//!
//! `open` into a file is all-or-nothing: plaintext reaches the target name only after
//! the last chunk verified. `open` to stdout writes each chunk only after it
//! verified, in order; a later failure ends it with a non-zero exit naming the chunk
//! and exactly what stdout got (docs/FORMAT.md §5 explains the choice).
//!
//! `seal` publishes only an input that ended by itself: Ctrl-C or SIGTERM at any
//! point leaves nothing under the target's name (docs/FORMAT.md §6; the pipeline
//! and [`crate::interrupt`] say how a silent pipe and a killed producer are told
//! apart from an end).

use super::keys::{self, Secret, SecretSource};
use super::output::{same_file, AtomicFile};
use super::pipeline::{self, Input, Shape, Totals, Transform};
use super::sys;
use crate::interrupt::{self, Interrupted};
use anyhow::{bail, Context, Result};
use cipherbench_crypto::kdf::ScryptParams;
use cipherbench_stream::{
    Algorithm, Header, KeySource, Opener, Sealer, StreamKeys, HEADER_LEN, TAG_LEN,
};
use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

/// A file or a standard stream (`-`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// stdin or stdout.
    Std,
    /// A path.
    Path(PathBuf),
}

impl Endpoint {
    /// `-` is the standard stream.
    pub fn parse(p: &Path) -> Endpoint {
        if p.as_os_str() == "-" {
            Endpoint::Std
        } else {
            Endpoint::Path(p.to_path_buf())
        }
    }

    fn describe(&self, std: &str) -> String {
        match self {
            Endpoint::Std => std.to_string(),
            Endpoint::Path(p) => p.display().to_string(),
        }
    }
}

/// Everything `seal` needs, resolved from the flags.
#[derive(Debug, Clone)]
pub struct SealOptions {
    /// Plaintext.
    pub input: Endpoint,
    /// Sealed output.
    pub output: Endpoint,
    /// The secret.
    pub secret: SecretSource,
    /// Chunk AEAD.
    pub algorithm: Algorithm,
    /// log2 of the chunk size.
    pub chunk_log2: u8,
    /// scrypt parameters for a passphrase.
    pub scrypt: ScryptParams,
    /// Worker threads.
    pub threads: usize,
    /// Replace an existing output.
    pub force: bool,
    /// fsync the output before it takes the target's name.
    pub fsync: bool,
}

/// Everything `open` needs.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// Sealed input.
    pub input: Endpoint,
    /// Plaintext output.
    pub output: Endpoint,
    /// The secret.
    pub secret: SecretSource,
    /// Worker threads.
    pub threads: usize,
    /// Replace an existing output.
    pub force: bool,
    /// fsync the output before it takes the target's name.
    pub fsync: bool,
}

struct SealBatch(Sealer);

impl Transform for SealBatch {
    fn apply(&mut self, first: u64, input: &[u8], last: bool, output: &mut [u8]) -> Result<usize> {
        Ok(self.0.seal_batch(first, input, last, output)?)
    }
}

struct OpenBatch(Opener);

impl Transform for OpenBatch {
    fn apply(&mut self, first: u64, input: &[u8], last: bool, output: &mut [u8]) -> Result<usize> {
        Ok(self.0.open_batch(first, input, last, output)?)
    }
}

fn open_input(input: &Endpoint) -> Result<Input> {
    match input {
        Endpoint::Std => Input::stdin().context("reading stdin"),
        Endpoint::Path(p) => {
            let f = File::open(p).with_context(|| format!("cannot read {}", p.display()))?;
            if f.metadata().map(|m| m.is_dir()).unwrap_or(false) {
                bail!("{} is a directory", p.display());
            }
            // Advisory: read-ahead for one pass from start to end.
            let _ = sys::fadvise(&f, sys::Advice::Sequential);
            Ok(Input::file(f))
        }
    }
}

fn check_distinct(input: &Endpoint, output: &Endpoint) -> Result<()> {
    if let (Endpoint::Path(i), Endpoint::Path(o)) = (input, output) {
        if same_file(i, o) {
            bail!(
                "the input and the output are the same file ({})",
                o.display()
            );
        }
    }
    Ok(())
}

fn stdout_is_terminal() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stdout())
}

/// Where the output goes: a temporary file to commit, or stdout.
enum Sink {
    File(AtomicFile),
    /// Descriptor 1 unbuffered (a duplicate of it): every byte `write` accepts has
    /// reached the pipe or file, so the count in an error message is what the
    /// consumer got, not what sat in `std`'s line buffer.
    Stdout(File),
}

impl Sink {
    fn create(output: &Endpoint, force: bool, mode: u32, fsync: bool) -> Result<Sink> {
        Ok(match output {
            Endpoint::Std => {
                let stdout = std::io::stdout();
                // Nothing should be buffered there; if something is, it goes first.
                stdout.lock().flush().context("writing to stdout")?;
                let fd = stdout
                    .as_fd()
                    .try_clone_to_owned()
                    .context("using stdout")?;
                Sink::Stdout(File::from(fd))
            }
            Endpoint::Path(p) => Sink::File(AtomicFile::create(p, force, mode, fsync)?),
        })
    }

    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Sink::File(f) => f,
            Sink::Stdout(s) => s,
        }
    }

    /// Publishes a file output, unless a stop was asked for (or is on its way) by
    /// then; stdout has nothing to publish, but a stop still ends in
    /// [`Interrupted`], so the exit status says the run was stopped.
    fn commit(self) -> Result<()> {
        match self {
            Sink::File(f) => f.commit(&interrupt::requested_or_pending),
            Sink::Stdout(_) if interrupt::requested_or_pending() => Err(Interrupted.into()),
            Sink::Stdout(_) => Ok(()),
        }
    }
}

/// Checks a file target before any work (or passphrase prompt), so that an existing
/// output fails at once.
fn precheck_target(output: &Endpoint, force: bool) -> Result<()> {
    match output {
        Endpoint::Path(p) => super::output::check_target(p, force),
        Endpoint::Std => Ok(()),
    }
}

/// Seals `input` into `output`. The output is published (the file takes its name,
/// or the final chunk goes to stdout) only when the input ended by itself: Ctrl-C
/// or SIGTERM at any point before leaves no file, and a stream on stdout without
/// its final chunk, which `open` refuses.
pub fn seal(options: &SealOptions) -> Result<Totals> {
    check_distinct(&options.input, &options.output)?;
    precheck_target(&options.output, options.force)?;
    if options.output == Endpoint::Std && stdout_is_terminal() {
        bail!(
            "refusing to write a sealed file to a terminal; give an output file or redirect stdout"
        );
    }
    let name = options.input.describe("stdin");
    let mut input = open_input(&options.input)?;
    let secret = keys::load(&options.secret, true)?;
    let key_source = match secret {
        Secret::Key(_) => KeySource::KeyFile,
        Secret::Passphrase(_) => KeySource::Scrypt(options.scrypt),
    };
    let header = Header::random(options.algorithm, options.chunk_log2, key_source)?;
    let keys = StreamKeys::create(header, secret.credential())?;
    drop(secret);
    // Sealed files are not secret: the usual mode, narrowed by the umask.
    let mut sink = Sink::create(&options.output, options.force, 0o666, options.fsync)?;
    let c = header.chunk_size();
    let shape = Shape::new(c, c + TAG_LEN, options.threads);
    let make = || -> Result<SealBatch> { Ok(SealBatch(keys.sealer()?)) };
    let cancel = &interrupt::requested;
    let mut written = 0;
    let outcome = pipeline::write_all(sink.writer(), keys.header_bytes(), cancel, &mut written)
        .and_then(|()| {
            pipeline::run(&mut input, sink.writer(), &shape, &make, cancel).map_err(|s| {
                written += s.totals.bytes_out;
                s.error
            })
        });
    let left = |written: u64, complete: bool| {
        match (&options.output, complete) {
        (Endpoint::Path(p), _) => format!("{} was not written", p.display()),
        (Endpoint::Std, _) if written == 0 => "nothing was written to stdout".to_string(),
        (Endpoint::Std, false) => format!(
            "stdout got {written} bytes of a sealed stream without its final chunk, which `open` refuses"
        ),
        (Endpoint::Std, true) => format!("stdout got the whole sealed stream, {written} bytes"),
    }
    };
    let mut totals = match outcome {
        Ok(t) => t,
        Err(e) => {
            // Dropping the sink removes the temporary file.
            drop(sink);
            return Err(e.context(format!("sealing {name} ({})", left(written, false))));
        }
    };
    totals.bytes_out += HEADER_LEN as u64;
    sink.commit()
        .with_context(|| format!("sealing {name} ({})", left(totals.bytes_out, true)))?;
    Ok(totals)
}

/// What stdout got from `open` before it stopped: whole chunks of `chunk` bytes
/// (every chunk but the last has that size) and perhaps part of the next, all
/// verified (a batch is written only after every chunk in it verified).
fn opened_prefix(written: u64, chunk: u64) -> String {
    let (whole, rest) = (written / chunk, written % chunk);
    let first = match whole {
        1 => "the first chunk".to_string(),
        n => format!("the first {n} chunks"),
    };
    match (written, whole, rest) {
        (0, _, _) => "nothing was written to stdout".to_string(),
        (_, _, 0) => format!("stdout got {first}, {written} bytes, each verified"),
        (_, 0, _) => format!("stdout got {written} verified bytes of chunk 0"),
        _ => format!(
            "stdout got {written} verified bytes: {first} and {rest} bytes of chunk {whole}"
        ),
    }
}

/// Opens `input` into `output`, refusing anything that does not verify.
pub fn open(options: &OpenOptions) -> Result<Totals> {
    check_distinct(&options.input, &options.output)?;
    precheck_target(&options.output, options.force)?;
    let name = options.input.describe("stdin");
    let cancel = &interrupt::requested;
    let mut input = open_input(&options.input)?;
    let mut header = [0u8; HEADER_LEN];
    let got = pipeline::read_full(&mut input, &mut header, cancel)
        .with_context(|| format!("reading {name}"))?;
    // Checks magic, version and every field (scrypt's cost among them) before
    // asking for a passphrase or deriving anything.
    Header::parse(&header[..got]).with_context(|| format!("opening {name}"))?;
    let secret = keys::load(&options.secret, false)?;
    let keys = StreamKeys::open(&header, secret.credential())
        .with_context(|| format!("opening {name}"))?;
    drop(secret);
    let mut sink = Sink::create(&options.output, options.force, 0o600, options.fsync)?;
    let c = keys.header().chunk_size();
    let shape = Shape::new(c + TAG_LEN, c, options.threads);
    let make = || -> Result<OpenBatch> { Ok(OpenBatch(keys.opener()?)) };
    let outcome = pipeline::run(&mut input, sink.writer(), &shape, &make, cancel);
    let left = |written: u64| match &options.output {
        Endpoint::Path(p) => format!("nothing was written to {}", p.display()),
        Endpoint::Std => opened_prefix(written, c as u64),
    };
    let mut totals = match outcome {
        Ok(t) => t,
        Err(stopped) => {
            // Dropping the sink removes the temporary file.
            drop(sink);
            let what = format!("opening {name} ({})", left(stopped.totals.bytes_out));
            return Err(stopped.error.context(what));
        }
    };
    totals.bytes_in += HEADER_LEN as u64;
    sink.commit()
        .with_context(|| format!("opening {name} ({})", left(totals.bytes_out)))?;
    Ok(totals)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stdout_prefix_is_said_in_chunks_and_bytes() {
        for (written, said) in [
            (0, "nothing was written to stdout"),
            (64, "stdout got the first chunk, 64 bytes, each verified"),
            (
                192,
                "stdout got the first 3 chunks, 192 bytes, each verified",
            ),
            (10, "stdout got 10 verified bytes of chunk 0"),
            (
                74,
                "stdout got 74 verified bytes: the first chunk and 10 bytes of chunk 1",
            ),
            (
                138,
                "stdout got 138 verified bytes: the first 2 chunks and 10 bytes of chunk 2",
            ),
        ] {
            assert_eq!(opened_prefix(written, 64), said);
        }
    }
}
