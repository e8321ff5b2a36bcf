//! Layer 2, `cipherbench file`: the time to encrypt one file through the file system,
//! for each tool and acceleration variant, with the page cache warm and cold, to the
//! tool's exit or to the output fsynced.
//!
//! Every tool is a child process started through the supervisor (directly, with no
//! keeper in between, so that nothing but the tool is timed), timed from just
//! before the start to its exit (plus, in `fsync` mode, the fsync of its output and
//! directory), with its CPU time and peak memory from `wait4`. Repetitions go round
//! the scenarios (every tool once, then again) so that a neighbour's burst of load
//! on a shared machine hits all tools alike. Before each run, dirty data is written
//! out (`syncfs`, untimed) and the input made warm (read through) or cold (evicted).
//! Each tool's output is checked once per variant and direction: decrypted and its
//! SHA-256 compared with the input's, so a tool that silently failed cannot win.
//!
//! Big files live in a scratch directory that is removed at the end, whatever
//! happens.

use super::sys;
use super::tools::{self, Kit, ToolId};
use crate::campaign;
use crate::interrupt;
use crate::library;
use crate::lifetime::{self, Registration, RunDir};
use crate::progress::Progress;
use crate::results::{Session, FILE_SCRATCH_PREFIX};
use crate::supervisor::Spawn;
use crate::variant::{Baseline, Variant};
use anyhow::{bail, Context, Result};
use cipherbench_crypto::digest::{to_hex, Sha256};
use cipherbench_model::file::{
    Cache, ColdMethod, FileConfig, FileInput, FilePoint, FileResults, FileSample, RoundTripCheck,
    SyncMode, ToolStatus,
};
use cipherbench_model::speed::Direction;
use cipherbench_model::units::ByteSize;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputSpec {
    /// Generate this many incompressible bytes.
    Generate(u64),
    /// The user's file.
    Path(PathBuf),
}

/// How to make the cache cold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColdChoice {
    /// `posix_fadvise(DONTNEED)` on the input: any user, this file only.
    Fadvise,
    /// `/proc/sys/vm/drop_caches`: root, the whole page cache.
    DropCaches,
}

/// Everything `file` will measure, resolved once from the flags or a preset.
#[derive(Debug, Clone)]
pub struct FilePlan {
    /// The input.
    pub input: InputSpec,
    /// Tools.
    pub tools: Vec<ToolId>,
    /// Variants for tools whose crypto is OpenSSL's.
    pub variants: Vec<Variant>,
    /// Cache states.
    pub caches: Vec<Cache>,
    /// Durability modes.
    pub syncs: Vec<SyncMode>,
    /// Directions.
    pub directions: Vec<Direction>,
    /// Timed runs per point.
    pub repetitions: usize,
    /// How to make a cold cache.
    pub cold_method: ColdChoice,
    /// Scratch directory (None: inside the results directory, or the temp dir).
    pub scratch: Option<PathBuf>,
    /// Threads for cipherbench seal/open.
    pub threads: usize,
}

/// One (tool, variant, cache, sync) combination in one direction.
#[derive(Debug, Clone)]
struct Scenario {
    tool: ToolId,
    variant: Variant,
    cache: Cache,
    sync: SyncMode,
}

impl FilePlan {
    /// The variants a tool runs in: the plan's for tools whose crypto is OpenSSL's,
    /// otherwise one run in the tool's defaults, recorded as `accel`.
    fn variants_of(&self, tool: ToolId) -> Vec<Variant> {
        if tool.variants_apply() {
            self.variants.clone()
        } else {
            vec![Variant::accel()]
        }
    }

    fn scenarios(&self, tools: &[ToolId]) -> Vec<Scenario> {
        let mut out = Vec::new();
        for &tool in tools {
            for variant in self.variants_of(tool) {
                for &cache in &self.caches {
                    for &sync in &self.syncs {
                        out.push(Scenario {
                            tool,
                            variant: variant.clone(),
                            cache,
                            sync,
                        });
                    }
                }
            }
        }
        out
    }

    /// Number of timed runs.
    pub fn total_runs(&self) -> usize {
        self.scenarios(&self.tools).len() * self.directions.len() * self.repetitions
    }

    /// A rough duration, for the estimate printed before a run: about 250 MB/s per
    /// run on average (gpg and masked CBC are slow, cp and seal fast), plus
    /// preparation.
    pub fn estimate(&self) -> Duration {
        let size = match &self.input {
            InputSpec::Generate(n) => *n,
            InputSpec::Path(p) => std::fs::metadata(p).map(|m| m.len()).unwrap_or(0),
        };
        let per_run = Duration::from_secs_f64(size as f64 / 250e6) + Duration::from_millis(50);
        let checks = self.tools.len() * self.variants.len() * 2;
        per_run * (self.total_runs() + checks) as u32
    }
}

/// The scratch directory, removed with everything in it when dropped:
/// `cipherbench-file-<pid>-<start>` in the results directory or `--dir`, or a
/// [`RunDir`] in the temp root. Its name carries its owner, so the next run (or
/// `cipherbench cleanup`) removes it if this one is killed; while it exists it is
/// registered as what a third Ctrl-C would leave.
struct Scratch {
    path: PathBuf,
    _run_dir: Option<RunDir>,
    _registered: Option<Registration>,
}

impl Scratch {
    fn create(parent: Option<&Path>, progress: &mut Progress) -> Result<Scratch> {
        let Some(parent) = parent else {
            let run_dir = RunDir::create("file", "file-layer scratch directory")?;
            return Ok(Scratch {
                path: run_dir.path().to_path_buf(),
                _run_dir: Some(run_dir),
                _registered: None,
            });
        };
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
        // A killed run's scratch here (a results directory sweeps its own when it
        // is opened; --dir is swept here).
        let swept = lifetime::sweep_dir(
            parent,
            FILE_SCRATCH_PREFIX,
            "file-layer scratch directory",
            false,
        );
        if let Some(note) = swept.note() {
            progress.note(&note);
        }
        let path = parent.join(format!("{FILE_SCRATCH_PREFIX}{}", lifetime::owner_tag()));
        std::fs::create_dir(&path).with_context(|| {
            format!(
                "creating the scratch directory {}; pass --dir with a writable directory",
                path.display()
            )
        })?;
        let path = path.canonicalize()?;
        Ok(Scratch {
            _registered: Some(lifetime::register(format!(
                "file-layer scratch directory {}",
                path.display()
            ))),
            path,
            _run_dir: None,
        })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Writes `size` random bytes to `path`, fsyncs it, and returns its SHA-256.
fn generate(path: &Path, size: u64) -> Result<String> {
    let mut file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut hash = Sha256::new()?;
    let mut block = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        interrupt::check()?;
        let n = left.min(block.len() as u64) as usize;
        cipherbench_crypto::random_bytes(&mut block[..n])?;
        hash.update(&block[..n])?;
        file.write_all(&block[..n])
            .with_context(|| format!("writing {}", path.display()))?;
        left -= n as u64;
    }
    file.sync_all()?;
    Ok(to_hex(&hash.finish()?))
}

/// SHA-256 of a file, hex.
pub fn hash_file(path: &Path) -> Result<String> {
    let mut file = File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut hash = Sha256::new()?;
    let mut block = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut block)?;
        if n == 0 {
            break;
        }
        hash.update(&block[..n])?;
    }
    Ok(to_hex(&hash.finish()?))
}

/// Makes the input warm or cold; returns how much of it is cached afterwards.
fn prepare_cache(
    input: &Path,
    scratch: &Path,
    cache: Cache,
    method: ColdChoice,
) -> Result<Option<u64>> {
    // Nothing dirty may be left to write back during the timed run (the previous
    // run's output, or anyone's): flush the file systems involved first, untimed.
    sys::syncfs(scratch).context("syncfs on the scratch directory")?;
    sys::syncfs(input).context("syncfs on the input's file system")?;
    match cache {
        Cache::Warm => {
            let size = std::fs::metadata(input)?.len();
            if sys::resident_bytes(input).unwrap_or(0) < size {
                let mut f = File::open(input)?;
                let mut block = vec![0u8; 1 << 20];
                while f.read(&mut block)? > 0 {}
            }
        }
        Cache::Cold => match method {
            ColdChoice::Fadvise => {
                sys::fadvise(&File::open(input)?, sys::Advice::DontNeed)
                    .context("evicting the input from the page cache")?;
            }
            ColdChoice::DropCaches => sys::drop_caches().context("dropping the page cache")?,
        },
    }
    Ok(sys::resident_bytes(input).ok())
}

/// Runs one command and times it: start to exit, plus fsync of the output and its
/// directory in `fsync` mode.
fn time_run(
    spawn: Spawn,
    output: &Path,
    sync: SyncMode,
    timeout: Duration,
    resident: Option<u64>,
) -> Result<FileSample> {
    let name = spawn.name();
    // Direct: no keeper between us and the tool, so the time and wait4's figures
    // are the tool's alone (none of the timed tools forks: gpg's agent, which gpg
    // would start, already runs under a keeper of the kit's).
    let spawn = spawn.direct();
    let started = Instant::now();
    let mut child = spawn.start()?;
    let (status, usage) = child.wait_with_usage(timeout, interrupt::requested)?;
    if !status.success() {
        bail!("{name} failed ({status}): {}", child.stderr_tail());
    }
    if sync == SyncMode::Fsync {
        File::open(output)
            .and_then(|f| f.sync_all())
            .with_context(|| format!("fsync of {}", output.display()))?;
        if let Some(dir) = output.parent() {
            File::open(dir).and_then(|d| d.sync_all())?;
        }
    }
    let elapsed = started.elapsed();
    Ok(FileSample {
        elapsed_ns: elapsed.as_nanos() as u64,
        user_ns: usage.user.as_nanos() as u64,
        system_ns: usage.system.as_nanos() as u64,
        max_rss_bytes: usage.max_rss_bytes,
        input_resident_bytes: resident,
    })
}

fn run_untimed(spawn: Spawn, timeout: Duration) -> Result<()> {
    let name = spawn.name();
    let mut child = spawn.start()?;
    let (status, _) = child.wait_with_usage(timeout, interrupt::requested)?;
    if !status.success() {
        bail!("{name} failed ({status}): {}", child.stderr_tail());
    }
    Ok(())
}

type Key = (usize, Direction);

/// The layer's state while measuring.
struct Bench<'a> {
    plan: &'a FilePlan,
    kit: Kit,
    scratch: PathBuf,
    input: PathBuf,
    input_sha256: String,
    size: u64,
    timeout: Duration,
    /// Ciphertext per tool, kept for decryption runs.
    ciphertexts: BTreeMap<&'static str, PathBuf>,
    samples: BTreeMap<Key, Vec<FileSample>>,
    /// The noisiest window among each point's samples (the tool is not pinned: every
    /// CPU this process may use).
    noise: BTreeMap<Key, cipherbench_model::noise::Noise>,
    commands: BTreeMap<Key, Vec<String>>,
    checked: Vec<(ToolId, String, Direction)>,
    /// accel's probes and the library the tools load (None: no tool whose crypto is
    /// OpenSSL's runs, so every run is accel's).
    baseline: Option<Baseline>,
}

impl Bench<'_> {
    /// The `OPENSSL_ia32cap` a variant's tool runs under.
    fn mask(&self, variant: &Variant) -> Option<String> {
        self.baseline.as_ref().and_then(|b| b.mask(variant))
    }

    fn output_path(&self) -> PathBuf {
        self.scratch.join("output")
    }

    /// Input of a run: the plaintext to encrypt, the tool's ciphertext to decrypt
    /// (cp copies the plaintext in both directions).
    fn input_of(&self, tool: ToolId, direction: Direction) -> Result<PathBuf> {
        if direction == Direction::Encrypt || tool == ToolId::Cp {
            return Ok(self.input.clone());
        }
        self.ciphertexts
            .get(tool.name())
            .cloned()
            .with_context(|| format!("no ciphertext of {} to decrypt", tool.name()))
    }

    /// Decrypts `sealed` with the tool (accel) and compares with the input.
    fn check_ciphertext(&self, tool: ToolId, sealed: &Path) -> Result<String> {
        if tool == ToolId::Cp {
            return hash_file(sealed);
        }
        let plain = self.scratch.join("check.out");
        let _ = std::fs::remove_file(&plain);
        let spawn = self
            .kit
            .command(tool, Direction::Decrypt, sealed, &plain, SyncMode::None)
            .ia32cap(None);
        run_untimed(spawn, self.timeout)
            .with_context(|| format!("decrypting {}'s output", tool.name()))?;
        let sha = hash_file(&plain);
        let _ = std::fs::remove_file(&plain);
        sha
    }

    /// Makes a tool's ciphertext (untimed, accel) when decryption is measured without
    /// encryption, and checks it.
    fn ensure_ciphertext(&mut self, tool: ToolId, results: &mut FileResults) -> Result<()> {
        if tool == ToolId::Cp || self.ciphertexts.contains_key(tool.name()) {
            return Ok(());
        }
        let path = self.scratch.join(format!("sealed-{}", tool.name()));
        let _ = std::fs::remove_file(&path);
        let spawn = self
            .kit
            .command(tool, Direction::Encrypt, &self.input, &path, SyncMode::None)
            .ia32cap(None);
        run_untimed(spawn, self.timeout)
            .with_context(|| format!("encrypting with {}", tool.name()))?;
        let sha = self.check_ciphertext(tool, &path)?;
        self.record_check(results, tool, "accel", Direction::Encrypt, sha);
        self.ciphertexts.insert(tool.name(), path);
        Ok(())
    }

    fn record_check(
        &mut self,
        results: &mut FileResults,
        tool: ToolId,
        variant: &str,
        direction: Direction,
        sha256: String,
    ) {
        let matches = sha256 == self.input_sha256;
        results.checks.push(RoundTripCheck {
            tool: tool.name().into(),
            variant: variant.into(),
            direction,
            sha256,
            matches,
        });
        self.checked.push((tool, variant.to_string(), direction));
    }

    /// After a run: check its output once per tool, variant and direction; keep an
    /// accel ciphertext for decryption runs.
    fn after_run(
        &mut self,
        sc: &Scenario,
        direction: Direction,
        results: &mut FileResults,
    ) -> Result<()> {
        let output = self.output_path();
        let seen = self
            .checked
            .iter()
            .any(|(t, v, d)| *t == sc.tool && *v == sc.variant.name() && *d == direction);
        if seen {
            return Ok(());
        }
        let sha = match direction {
            Direction::Decrypt => hash_file(&output)?,
            Direction::Encrypt => self.check_ciphertext(sc.tool, &output)?,
        };
        self.record_check(results, sc.tool, &sc.variant.name(), direction, sha);
        let keep = direction == Direction::Encrypt
            && sc.tool != ToolId::Cp
            && sc.variant.is_accel()
            && self.plan.directions.contains(&Direction::Decrypt)
            && !self.ciphertexts.contains_key(sc.tool.name());
        if keep {
            let path = self.scratch.join(format!("sealed-{}", sc.tool.name()));
            std::fs::rename(&output, &path)?;
            self.ciphertexts.insert(sc.tool.name(), path);
        }
        Ok(())
    }

    fn run_one(&mut self, sc: &Scenario, direction: Direction, key: Key) -> Result<FileSample> {
        let input = self.input_of(sc.tool, direction)?;
        let output = self.output_path();
        if output.exists() {
            std::fs::remove_file(&output)?;
        }
        let resident = prepare_cache(&input, &self.scratch, sc.cache, self.plan.cold_method)?;
        let mask = self.mask(&sc.variant);
        let loader = sc.variant.library.loader();
        let spawn = self
            .kit
            .command(sc.tool, direction, &input, &output, sc.sync)
            .ia32cap(mask.as_deref())
            .envs(sc.variant.environment())
            .loader(loader);
        self.commands.entry(key).or_insert_with(|| {
            let mut argv = spawn.display();
            if let Some(mask) = &mask {
                argv.insert(0, format!("OPENSSL_ia32cap={mask}"));
            }
            if let Some(l) = loader {
                argv.insert(0, format!("LD_LIBRARY_PATH={}", l.lib_dir.display()));
            }
            argv
        });
        time_run(spawn, &output, sc.sync, self.timeout, resident)
    }
}

/// Where the scratch directory goes: `--dir`, else the results directory, else
/// (None) the temp root.
fn base_dir(plan: &FilePlan, session: &Session) -> Option<PathBuf> {
    match (&plan.scratch, session.dir()) {
        (Some(d), _) => Some(d.clone()),
        (None, Some(results)) => Some(results.to_path_buf()),
        (None, None) => None,
    }
}

/// Runs the plan, saving into the session after every round of repetitions.
pub fn run(plan: &FilePlan, session: &mut Session) -> Result<()> {
    let scratch = Scratch::create(base_dir(plan, session).as_deref(), &mut session.progress)?;
    let (kit, setup_failures) = Kit::prepare(&scratch.path, &plan.tools, plan.threads)?;

    let (statuses, tools_ok) = tool_statuses(plan, &setup_failures, session);
    add_tool_versions(session, &statuses);

    // Before the input is made: a tool on the wrong library stops the layer at once.
    check_libraries(plan, &kit, &tools_ok, &scratch.path, session)?;

    let (input, generated, input_sha256, size) = prepare_input(plan, &scratch.path, session)?;

    let (life, variants) = if tools_ok.iter().any(|t| t.variants_apply()) {
        let life = campaign::Variants::begin("file", &plan.variants)?;
        let variants = judge_variants(plan, &tools_ok, &life, session);
        (Some(life), variants)
    } else {
        (None, Vec::new())
    };

    let config = file_config(plan, &input, generated, size, &input_sha256, &scratch.path);
    let mut results = FileResults {
        config,
        tools: statuses,
        variants,
        points: Vec::new(),
        checks: Vec::new(),
    };
    if results.config.input_filesystem != results.config.scratch_filesystem {
        session.record.warn(
            "file",
            "different_filesystems",
            "the input and the outputs are on different file systems; pass --dir beside the input to measure one disk",
        );
    }
    session.record.file = Some(results.clone());
    session.save()?;

    let mut bench = Bench {
        plan,
        kit,
        scratch: scratch.path.clone(),
        input,
        input_sha256,
        size,
        // Generous: a 2-core machine shared with others, and gpg or masked CBC.
        timeout: Duration::from_secs(120) + Duration::from_secs_f64(size as f64 / 5e6),
        ciphertexts: BTreeMap::new(),
        samples: BTreeMap::new(),
        noise: BTreeMap::new(),
        commands: BTreeMap::new(),
        checked: Vec::new(),
        baseline: life.as_ref().map(|l| l.baseline.clone()),
    };
    let scenarios = plan.scenarios(&tools_ok);
    let total = scenarios.len() * plan.directions.len() * plan.repetitions;
    session.progress.layer("file", total, plan.estimate());
    let outcome = measure(&mut bench, &scenarios, &mut results, session);
    bench.kit.shutdown();
    finish(&mut results, session);
    // Provider and engine variants: the tally over the layer, and judged on the
    // tools' own ciphers.
    let ciphers: Vec<&str> = tools_ok
        .iter()
        .filter_map(|t| t.catalogue_cipher())
        .collect();
    if let Some(life) = &life {
        life.end(&mut results.variants, &ciphers);
    }
    session.record.file = Some(results);
    session.save()?;
    drop(bench);
    drop(scratch);
    outcome
}

/// The layer's configuration as the record keeps it: the input, where the outputs
/// go (and on which file systems), and the plan's dimensions.
fn file_config(
    plan: &FilePlan,
    input: &Path,
    generated: Option<u64>,
    size: u64,
    input_sha256: &str,
    scratch: &Path,
) -> FileConfig {
    FileConfig {
        input: FileInput {
            path: match &plan.input {
                InputSpec::Path(_) => Some(input.display().to_string()),
                InputSpec::Generate(_) => None,
            },
            generated: generated.is_some(),
            size_bytes: size,
            sha256: input_sha256.to_string(),
        },
        scratch_dir: scratch.display().to_string(),
        scratch_filesystem: sys::filesystem_of(scratch),
        input_filesystem: sys::filesystem_of(input),
        tools: plan.tools.iter().map(|t| t.name().to_string()).collect(),
        variants: plan.variants.iter().map(|v| v.name().clone()).collect(),
        caches: plan.caches.clone(),
        syncs: plan.syncs.clone(),
        directions: plan.directions.clone(),
        repetitions: plan.repetitions,
        cold_method: match plan.cold_method {
            ColdChoice::Fadvise => ColdMethod::FadviseDontneed,
            ColdChoice::DropCaches => ColdMethod::DropCaches,
        },
        cipherbench_threads: plan.threads,
    }
}

/// The layer's input: the user's file, or an incompressible one generated in the
/// scratch directory. Its path, the size generated (None: the user's), its SHA-256
/// and its size.
fn prepare_input(
    plan: &FilePlan,
    scratch: &Path,
    session: &mut Session,
) -> Result<(PathBuf, Option<u64>, String, u64)> {
    let (input, generated) = match &plan.input {
        InputSpec::Generate(size) => {
            session.progress.note(&format!(
                "file: generating a {} incompressible input in {}",
                ByteSize(*size),
                scratch.display()
            ));
            (scratch.join("input.bin"), Some(*size))
        }
        InputSpec::Path(p) => (p.canonicalize()?, None),
    };
    let input_sha256 = match generated {
        Some(size) => generate(&input, size)?,
        None => hash_file(&input)?,
    };
    let size = std::fs::metadata(&input)?.len();
    Ok((input, generated, input_sha256, size))
}

/// Each tool of the plan: its version and crypto, or why it is unavailable here
/// (missing, or its setup failed: said and warned); and the tools that can run.
fn tool_statuses(
    plan: &FilePlan,
    setup_failures: &[(ToolId, String)],
    session: &mut Session,
) -> (Vec<ToolStatus>, Vec<ToolId>) {
    let mut statuses = Vec::new();
    let mut tools_ok = Vec::new();
    for &tool in &plan.tools {
        let unavailable = tools::missing(tool).or_else(|| {
            setup_failures
                .iter()
                .find(|(t, _)| *t == tool)
                .map(|(_, e)| format!("setup failed: {e}"))
        });
        if let Some(reason) = &unavailable {
            session
                .progress
                .note(&format!("file: {} skipped: {reason}", tool.name()));
            session.record.warn(
                "file",
                "tool_unavailable",
                format!("{}: {reason}", tool.name()),
            );
        } else {
            tools_ok.push(tool);
        }
        statuses.push(ToolStatus {
            tool: tool.name().into(),
            version: if unavailable.is_none() {
                tools::version(tool)
            } else {
                None
            },
            crypto: tool.crypto().into(),
            variants_apply: tool.variants_apply(),
            unavailable,
        });
    }
    (statuses, tools_ok)
}

/// Holds every tool whose crypto is OpenSSL's to the library its variants ask for,
/// from the tool itself, before anything is timed: the `openssl` CLI by `openssl
/// version` (its `Library:`), cipherbench `seal` and `open` by their own report
/// ([`library::REPORT_ENV`]) while sealing and opening a small file. A tool that
/// loaded another library stops the layer; each finding goes into the environment.
fn check_libraries(
    plan: &FilePlan,
    kit: &Kit,
    tools: &[ToolId],
    scratch: &Path,
    session: &mut Session,
) -> Result<()> {
    let timeout = Duration::from_secs(30);
    let openssl = tools
        .iter()
        .any(|t| matches!(t, ToolId::OpensslCbc | ToolId::OpensslCtr));
    let seal = tools
        .iter()
        .any(|t| matches!(t, ToolId::Cipherbench | ToolId::CipherbenchChacha));
    let env = &mut session.record.environment;
    for lib in crate::variant::libraries_of(&plan.variants) {
        if openssl {
            let out = Spawn::new("openssl")
                .args(["version"])
                .loader(lib.loader())
                .output(timeout)?
                .success("openssl version")?;
            let loaded = library::cli_library(&out.stdout);
            lib.check_and_note(env, "file", "openssl CLI", &loaded, "openssl version")?;
        }
        if seal {
            let (plain, sealed, back) = (
                scratch.join("library-check.in"),
                scratch.join("library-check.sealed"),
                scratch.join("library-check.out"),
            );
            std::fs::write(&plain, b"which library?")?;
            for (part, direction, input, output) in [
                ("cipherbench seal", Direction::Encrypt, &plain, &sealed),
                ("cipherbench open", Direction::Decrypt, &sealed, &back),
            ] {
                let _ = std::fs::remove_file(output);
                let out = kit
                    .command(
                        ToolId::Cipherbench,
                        direction,
                        input,
                        output,
                        SyncMode::None,
                    )
                    .loader(lib.loader())
                    .env(library::REPORT_ENV, "1")
                    .output(timeout)?
                    .success(part)?;
                let loaded = library::parse_report(&out.stderr).with_context(|| {
                    format!("{part} did not say which library it loaded: {}", out.stderr)
                })?;
                lib.check_and_note(env, "file", part, &loaded, "its own report")?;
            }
            for f in [&plain, &sealed, &back] {
                let _ = std::fs::remove_file(f);
            }
        }
    }
    Ok(())
}

/// The variants of the tools whose crypto is OpenSSL's, judged by effect: a
/// `cipherbench __variant-probe` child with the tools' environment stands in for them
/// (for `cipherbench seal`/`open` it is the same executable under the same
/// environment); where `openssl enc` runs, `openssl info -cpusettings` under that
/// environment must report what the probe child did (the CLI loads the same library).
fn judge_variants(
    plan: &FilePlan,
    tools: &[ToolId],
    life: &campaign::Variants,
    session: &mut Session,
) -> Vec<cipherbench_model::variant::VariantRecord> {
    let baseline = &life.baseline;
    let cli = tools
        .iter()
        .any(|t| matches!(t, ToolId::OpensslCbc | ToolId::OpensslCtr));
    let mut records = crate::variant::stand_in_records(
        &plan.variants,
        baseline,
        "openssl enc and cipherbench seal",
    );
    let mut variants: Vec<cipherbench_model::variant::VariantRecord> = Vec::new();
    // accel first: the others are judged against it.
    let mut ordered = plan.variants.clone();
    ordered.sort_by_key(|v| !v.is_accel());
    for v in &ordered {
        let Some(mut record) = records.remove(&v.name()) else {
            continue;
        };
        if cli {
            let check = crate::variant::check_openssl_cli(v, baseline.mask(v).as_deref(), &record);
            record = crate::variant::with_check(&record, check);
        }
        life.warn_not_effective(&mut session.record, &record, "for the file tools");
        variants.push(record);
    }
    // Back in the plan's order, as the tables list them.
    variants.sort_by_key(|r| plan.variants.iter().position(|v| v.name() == r.name));
    variants
}

fn measure(
    bench: &mut Bench<'_>,
    scenarios: &[Scenario],
    results: &mut FileResults,
    session: &mut Session,
) -> Result<()> {
    let directions = bench.plan.directions.clone();
    campaign::each_unit(
        &directions,
        &mut Directions {
            bench,
            scenarios,
            results,
            session,
            failed: Vec::new(),
        },
    )
}

/// The file layer's units: a direction, every repetition of every scenario, saved
/// after each repetition. A run does not resume (its input and scratch are its
/// own), so every direction is measured; a tool that failed is skipped from then on.
struct Directions<'a, 'b> {
    bench: &'a mut Bench<'b>,
    scenarios: &'a [Scenario],
    results: &'a mut FileResults,
    session: &'a mut Session,
    /// The tools that failed, skipped for the rest of the layer.
    failed: Vec<ToolId>,
}

impl campaign::Units for Directions<'_, '_> {
    type Unit = Direction;

    fn done(&self, _: &Direction) -> bool {
        false
    }

    fn skip(&mut self, _: &Direction) {}

    fn forget(&mut self, _: &Direction) {}

    fn measure(&mut self, &direction: &Direction) -> Result<()> {
        let scenarios = self.scenarios;
        if direction == Direction::Decrypt {
            self.ciphertexts()?;
        }
        for rep in 0..self.bench.plan.repetitions {
            for (i, sc) in scenarios.iter().enumerate() {
                interrupt::check()?;
                if self.failed.contains(&sc.tool) {
                    self.session.progress.skip(1);
                    continue;
                }
                self.sample(sc, (i, direction), rep)?;
            }
            self.results.points = points(self.bench, scenarios);
            self.session.record.file = Some(self.results.clone());
            self.session.save()?;
        }
        // Decryption inputs are not needed once decryption is done.
        if direction == Direction::Decrypt {
            for (_, path) in std::mem::take(&mut self.bench.ciphertexts) {
                let _ = std::fs::remove_file(path);
            }
        }
        Ok(())
    }
}

impl Directions<'_, '_> {
    /// Each tool's ciphertext, made once before decryption is measured.
    fn ciphertexts(&mut self) -> Result<()> {
        let mut tools: Vec<ToolId> = self.scenarios.iter().map(|s| s.tool).collect();
        tools.dedup();
        for tool in tools {
            if self.failed.contains(&tool) {
                continue;
            }
            interrupt::check()?;
            if let Err(e) = self.bench.ensure_ciphertext(tool, self.results) {
                self.fail(tool, &e);
            }
        }
        Ok(())
    }

    /// One run of scenario `sc` in repetition `rep`: its sample, the noise of its
    /// window (the busiest of its repetitions is kept), the output's check; a tool
    /// that fails is stopped for the rest of the layer.
    fn sample(&mut self, sc: &Scenario, key: Key, rep: usize) -> Result<()> {
        let direction = key.1;
        // The tool runs under this process; the window closes once it exited, which
        // is why its ticks are counted through its parent (waited-for children's time
        // is the parent's cutime in /proc, and the run's).
        let window = crate::machine::noise::Window::open(
            &crate::host::allowed_cpus(),
            &[std::process::id()],
        );
        let sample = self.bench.run_one(sc, direction, key);
        let noise = window.close();
        let busier = |n: &cipherbench_model::noise::Noise| n.foreign_share + n.steal_share;
        if self
            .bench
            .noise
            .get(&key)
            .is_none_or(|old| busier(&noise) > busier(old))
        {
            self.bench.noise.insert(key, noise);
        }
        let sample = match sample {
            Ok(s) => s,
            Err(e) => {
                interrupt::check()?;
                self.fail(sc.tool, &e);
                self.session.progress.skip(1);
                return Ok(());
            }
        };
        if let Err(e) = self.bench.after_run(sc, direction, self.results) {
            self.fail(sc.tool, &e);
        }
        if let Some(check) = self
            .results
            .checks
            .last()
            .filter(|c| c.tool == sc.tool.name() && !c.matches)
        {
            let e = anyhow::anyhow!(
                "its {} output does not match the input (SHA-256 {} instead of {})",
                direction.as_str(),
                check.sha256,
                self.bench.input_sha256
            );
            self.fail(sc.tool, &e);
        }
        self.session.progress.point(&format!(
            "{} {} {} {} {} #{}: {:.2} s",
            sc.tool.name(),
            sc.variant.name(),
            direction.as_str(),
            sc.cache.as_str(),
            sc.sync.as_str(),
            rep + 1,
            sample.elapsed_ns as f64 / 1e9
        ));
        self.bench.samples.entry(key).or_default().push(sample);
        Ok(())
    }

    fn fail(&mut self, tool: ToolId, e: &anyhow::Error) {
        fail_tool(tool, e, &mut self.failed, self.results, self.session);
    }
}

fn fail_tool(
    tool: ToolId,
    e: &anyhow::Error,
    failed: &mut Vec<ToolId>,
    results: &mut FileResults,
    session: &mut Session,
) {
    let message = format!("{} stopped: {}", tool.name(), crate::progress::one_line(e));
    session.progress.note(&format!("file: {message}"));
    session.record.warn("file", "tool_failed", message.clone());
    if let Some(s) = results.tools.iter_mut().find(|s| s.tool == tool.name()) {
        s.unavailable = Some(crate::progress::one_line(e));
    }
    if !failed.contains(&tool) {
        failed.push(tool);
    }
}

fn points(bench: &Bench<'_>, scenarios: &[Scenario]) -> Vec<FilePoint> {
    let mut out = Vec::new();
    for (&(i, direction), samples) in &bench.samples {
        let sc = &scenarios[i];
        if let Some(p) = FilePoint::from_samples(
            sc.tool.name(),
            &sc.variant.name(),
            direction,
            sc.cache,
            sc.sync,
            bench
                .commands
                .get(&(i, direction))
                .cloned()
                .unwrap_or_default(),
            bench.size,
            samples.clone(),
        ) {
            let mut p = p;
            p.noise = bench.noise.get(&(i, direction)).cloned().map(Box::new);
            out.push(p);
        }
    }
    out
}

/// Warnings that travel with the data.
fn finish(results: &mut FileResults, session: &mut Session) {
    for p in &results.points {
        for f in p.noise_findings() {
            session.record.warn(
                "file",
                &f.kind,
                format!(
                    "{} {} {} {} {}: {}",
                    p.tool,
                    p.variant,
                    p.direction.as_str(),
                    p.cache.as_str(),
                    p.sync.as_str(),
                    f.message
                ),
            );
        }
    }
    if let Some(f) = cipherbench_model::noise::governor_finding(
        results.points.iter().filter_map(|p| p.noise.as_deref()),
    ) {
        session.record.warn("file", &f.kind, f.message);
    }
    for p in &results.points {
        if p.elapsed_seconds.high_spread() {
            session.record.warn(
                "file",
                "high_spread",
                format!(
                    "{} {} {} {} {}: spread ±{:.1} % across {} runs",
                    p.tool,
                    p.variant,
                    p.direction.as_str(),
                    p.cache.as_str(),
                    p.sync.as_str(),
                    p.elapsed_seconds.rel_spread * 100.0,
                    p.samples.len()
                ),
            );
        }
        if p.cache == Cache::Cold {
            let warm_start = p
                .samples
                .iter()
                .filter_map(|s| s.input_resident_bytes)
                .any(|r| r * 10 > p.bytes);
            if warm_start {
                session.record.warn(
                    "file",
                    "cold_cache_not_cold",
                    format!(
                        "{} {} {}: more than 10 % of the input was still cached at the start of a cold run (the file system may not evict, as tmpfs cannot)",
                        p.tool, p.variant, p.direction.as_str()
                    ),
                );
            }
        }
    }
}

fn add_tool_versions(session: &mut Session, statuses: &[ToolStatus]) {
    for s in statuses {
        let name = match s.tool.as_str() {
            t if t.starts_with("openssl") => "openssl",
            t if t.starts_with("cipherbench") => continue,
            t => t,
        };
        let tools = &mut session.record.environment.tools;
        if !tools.iter().any(|t| t.name == name) {
            tools.push(cipherbench_model::env::ToolVersion {
                name: name.to_string(),
                version: s.version.clone(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> FilePlan {
        FilePlan {
            input: InputSpec::Generate(1 << 20),
            tools: vec![ToolId::Cp, ToolId::OpensslCbc, ToolId::Age],
            variants: vec![Variant::accel(), Variant::noaesni()],
            caches: vec![Cache::Warm, Cache::Cold],
            syncs: vec![SyncMode::Fsync],
            directions: vec![Direction::Encrypt],
            repetitions: 3,
            cold_method: ColdChoice::Fadvise,
            scratch: None,
            threads: 2,
        }
    }

    #[test]
    fn variants_apply_only_to_openssl_tools() {
        let p = plan();
        let s = p.scenarios(&p.tools);
        // cp: 1 variant x 2 caches; openssl: 2 x 2; age: 1 x 2.
        assert_eq!(s.len(), 8);
        assert!(s
            .iter()
            .filter(|x| x.tool == ToolId::Age)
            .all(|x| x.variant.name() == "accel"));
        assert_eq!(p.total_runs(), 24);
    }

    #[test]
    fn generated_input_hashes_like_a_later_read() {
        let dir = std::env::temp_dir().join(format!("cb-gen-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("in");
        let sha = generate(&f, 3 << 20 | 5).unwrap();
        assert_eq!(std::fs::metadata(&f).unwrap().len(), 3 << 20 | 5);
        assert_eq!(hash_file(&f).unwrap(), sha);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
