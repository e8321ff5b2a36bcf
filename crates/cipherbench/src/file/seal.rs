//! `cipherbench seal` and `cipherbench open`: the I/O shell around the stream format
//! (`cipherbench-stream`). Files or stdin/stdout in, the [`pipeline`] in the middle,
//! an [`AtomicFile`] (or stdout) out.
//!
//! `open` into a file is all-or-nothing: plaintext reaches the target name only after
//! the last chunk verified. `open` to stdout writes each chunk only after it
//! verified, in order; a later failure ends it with a non-zero exit naming the chunk
//! (docs/FORMAT.md §5 explains the choice).

use super::keys::{self, Secret, SecretSource};
use super::output::{same_file, AtomicFile};
use super::pipeline::{self, Shape, Totals, Transform};
use super::sys;
use anyhow::{bail, Context, Result};
use cipherbench_crypto::kdf::ScryptParams;
use cipherbench_stream::{
    Algorithm, Header, KeySource, Opener, Sealer, StreamKeys, HEADER_LEN, TAG_LEN,
};
use std::fs::File;
use std::io::{Read, Write};
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

fn open_input(input: &Endpoint) -> Result<Box<dyn Read + Send>> {
    match input {
        Endpoint::Std => Ok(Box::new(std::io::stdin())),
        Endpoint::Path(p) => {
            let f = File::open(p).with_context(|| format!("cannot read {}", p.display()))?;
            if f.metadata().map(|m| m.is_dir()).unwrap_or(false) {
                bail!("{} is a directory", p.display());
            }
            // Advisory: read-ahead for one pass from start to end.
            let _ = sys::fadvise(&f, sys::Advice::Sequential);
            Ok(Box::new(f))
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
    Stdout(std::io::Stdout),
}

impl Sink {
    fn create(output: &Endpoint, force: bool, mode: u32, fsync: bool) -> Result<Sink> {
        Ok(match output {
            Endpoint::Std => Sink::Stdout(std::io::stdout()),
            Endpoint::Path(p) => Sink::File(AtomicFile::create(p, force, mode, fsync)?),
        })
    }

    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Sink::File(f) => f,
            Sink::Stdout(s) => s,
        }
    }

    fn commit(self) -> Result<()> {
        match self {
            Sink::File(f) => f.commit(),
            Sink::Stdout(mut s) => Ok(s.flush()?),
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

/// Seals `input` into `output`.
pub fn seal(options: &SealOptions) -> Result<Totals> {
    check_distinct(&options.input, &options.output)?;
    precheck_target(&options.output, options.force)?;
    if options.output == Endpoint::Std && stdout_is_terminal() {
        bail!(
            "refusing to write a sealed file to a terminal; give an output file or redirect stdout"
        );
    }
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
    sink.writer()
        .write_all(keys.header_bytes())
        .context("writing the output")?;
    let c = header.chunk_size();
    let shape = Shape::new(c, c + TAG_LEN, options.threads);
    let make = || -> Result<SealBatch> { Ok(SealBatch(keys.sealer()?)) };
    let mut totals = pipeline::run(
        &mut *input,
        sink.writer(),
        &shape,
        &make,
        &crate::interrupt::requested,
    )
    .with_context(|| format!("sealing {}", options.input.describe("stdin")))?;
    totals.bytes_out += HEADER_LEN as u64;
    sink.commit()?;
    Ok(totals)
}

/// Opens `input` into `output`, refusing anything that does not verify.
pub fn open(options: &OpenOptions) -> Result<Totals> {
    check_distinct(&options.input, &options.output)?;
    precheck_target(&options.output, options.force)?;
    let name = options.input.describe("stdin");
    let mut input = open_input(&options.input)?;
    let mut header = [0u8; HEADER_LEN];
    let got = super::pipeline::read_full(&mut *input, &mut header)
        .with_context(|| format!("reading {name}"))?;
    // Checks magic, version and fields before asking for a passphrase.
    Header::parse(&header[..got]).with_context(|| format!("opening {name}"))?;
    let secret = keys::load(&options.secret, false)?;
    let keys = StreamKeys::open(&header, secret.credential())
        .with_context(|| format!("opening {name}"))?;
    drop(secret);
    let mut sink = Sink::create(&options.output, options.force, 0o600, options.fsync)?;
    let c = keys.header().chunk_size();
    let shape = Shape::new(c + TAG_LEN, c, options.threads);
    let make = || -> Result<OpenBatch> { Ok(OpenBatch(keys.opener()?)) };
    let result = pipeline::run(
        &mut *input,
        sink.writer(),
        &shape,
        &make,
        &crate::interrupt::requested,
    );
    let mut totals = match result {
        Ok(t) => t,
        Err(e) => {
            let what = match (&sink, e.downcast_ref::<cipherbench_stream::ChunkError>()) {
                (Sink::File(_), Some(_)) => format!(
                    "opening {name} (nothing was written to {})",
                    options.output.describe("stdout")
                ),
                (Sink::Stdout(_), Some(_)) => format!(
                    "opening {name} (stdout got the chunks before the failing one, each verified)"
                ),
                _ => format!("opening {name}"),
            };
            // Dropping the sink removes the temporary file.
            drop(sink);
            return Err(e.context(what));
        }
    };
    totals.bytes_in += HEADER_LEN as u64;
    sink.commit()?;
    Ok(totals)
}
