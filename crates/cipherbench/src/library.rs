//! The OpenSSL library under test: the system's (whatever the loader gives a program
//! by default) or a build given with `--openssl DIR`. This module resolves and checks
//! such a directory before anything starts, finds out which library a running part
//! really loaded (its own report, or its mappings in `/proc/<pid>/maps`), holds it to
//! the one asked for, and records both in the environment.
//!
//! A library is swapped the only way that reaches unmodified programs: its directory
//! goes first on `LD_LIBRARY_PATH` ([`Loader`], applied by the supervisor), and since
//! an OpenSSL 3.x build has the same sonames (`libcrypto.so.3`, `libssl.so.3`) and
//! symbol versions as a distribution's, nginx, the `openssl` tool and cipherbench's own
//! children load it. What that cannot reach (a statically linked program, one with an
//! `RPATH`, a wrapper that clears the environment) is caught by the check of each
//! part, never assumed.
//!
//! OpenSSL 4 has other sonames (`libcrypto.so.4`): no program built for the system's
//! OpenSSL 3 loads it. cipherbench's own children then run as a cipherbench built
//! against it (`scripts/build-against.sh` installs one in the prefix,
//! `libexec/cipherbench/cipherbench`), held to this one's version and commit; a part
//! not built by the project (nginx, charon) is asked beforehand which libcrypto it
//! would load ([`Library::would_load`]) and refused, in one line naming it, where
//! that is not the directory's.
//!
//! Resolving runs `cipherbench __library` under the directory: the child reports
//! `OpenSSL_version(OPENSSL_VERSION)` and the files it mapped. When the loader refuses
//! the library, a second child opens the file beside the system's library
//! (`__library --open FILE`) to say what it is.
//!
//! It does not name variants (that is [`crate::variant::cross`]) or judge them.

use crate::supervisor::{Loader, Spawn};
use anyhow::{anyhow, bail, Context, Result};
use cipherbench_model::env::{Environment, LibraryUnderTest, PartLibrary};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// libcrypto's file name (OpenSSL 3's soname).
pub const LIBCRYPTO: &str = "libcrypto.so.3";
/// libssl's file name.
pub const LIBSSL: &str = "libssl.so.3";
/// The soname numbers a directory may hold: 3 for every 3.x, 4 for 4.x.
const SONAMES: [u32; 2] = [3, 4];
/// Where in an OpenSSL prefix `scripts/build-against.sh` installs the cipherbench
/// built against it.
pub const OWN_BUILD: &str = "libexec/cipherbench/cipherbench";
/// Where `scripts/build-nginx.sh` installs the nginx built against it.
pub const OWN_NGINX: &str = "libexec/cipherbench/nginx";
/// What to do about an nginx that cannot load the library under test.
const NGINX_REMEDY: &str = "build one against it with `scripts/build-nginx.sh PREFIX` from cipherbench's source tree (Debian's nginx source, about 1 minute), or pass --nginx with one";
/// The name of the system's library in `--openssl` lists and records.
pub const SYSTEM: &str = "system";
/// Set in a cipherbench child's environment, this makes it say which library it
/// loaded, as one stderr line ([`REPORT_PREFIX`] and JSON): for the children whose
/// own protocol has no room for it (`seal`, `open`).
pub const REPORT_ENV: &str = "CIPHERBENCH_REPORT_LIBRARY";
/// The start of that line.
pub const REPORT_PREFIX: &str = "cipherbench-library: ";
/// How long the resolving child may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// Which OpenSSL one process loaded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Loaded {
    /// `OpenSSL_version(OPENSSL_VERSION)`, when the process itself said it.
    pub version: Option<String>,
    /// The libcrypto file it mapped.
    pub libcrypto: Option<PathBuf>,
    /// The libssl file it mapped.
    pub libssl: Option<PathBuf>,
}

impl Loaded {
    /// What a person reads: the libcrypto path, then the version where known.
    fn describe(&self) -> String {
        match (&self.libcrypto, &self.version) {
            (Some(p), Some(v)) => format!("{} ({v})", p.display()),
            (Some(p), None) => p.display().to_string(),
            (None, Some(v)) => v.clone(),
            (None, None) => "no libcrypto at all".into(),
        }
    }
}

/// The files mapped in `/proc/<pid>/maps` text, one per mapping line that names a
/// file. The path is everything from the first '/' (after address, perms, offset,
/// device and inode, so it may hold spaces); a file replaced since it was mapped
/// says "(deleted)", which is left out. Pure.
pub fn mapped_paths(maps: &str) -> impl Iterator<Item = &Path> {
    maps.lines().filter_map(|line| {
        let path = line[line.find('/')?..].trim_end();
        Some(Path::new(path.strip_suffix(" (deleted)").unwrap_or(path)))
    })
}

/// The libcrypto and libssl files in `/proc/<pid>/maps` text. Pure.
pub fn mapped(maps: &str) -> Loaded {
    let mut out = Loaded::default();
    for path in mapped_paths(maps) {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with("libcrypto.so") && out.libcrypto.is_none() {
            out.libcrypto = Some(PathBuf::from(path));
        } else if name.starts_with("libssl.so") && out.libssl.is_none() {
            out.libssl = Some(PathBuf::from(path));
        }
    }
    out
}

/// Which library this process loaded: its own version and mappings.
pub fn this_process() -> Loaded {
    Loaded {
        version: Some(cipherbench_crypto::info::library_version()),
        ..mapped(&std::fs::read_to_string("/proc/self/maps").unwrap_or_default())
    }
}

/// The libraries a running process mapped (`/proc/<pid>/maps`; the version is not
/// known from outside).
pub fn of_process(pid: u32) -> Result<Loaded> {
    let path = format!("/proc/{pid}/maps");
    let maps = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    Ok(mapped(&maps))
}

/// Entry point of `cipherbench __library`: prints this process's [`Loaded`] as JSON,
/// or with `open`, what `OpenSSL_version` the file says (`{"version": ...}` or
/// `{"error": ...}`) when opened beside this process's own library.
pub fn child_main(open: Option<&Path>) -> Result<()> {
    let json = match open {
        None => {
            let mut v = serde_json::to_value(this_process())?;
            v["build"] = build_identity().into();
            v.to_string()
        }
        Some(file) => match cipherbench_crypto::info::version_of_file(file) {
            Ok(v) => serde_json::json!({ "version": v }).to_string(),
            Err(e) => serde_json::json!({ "error": e }).to_string(),
        },
    };
    println!("{json}");
    Ok(())
}

/// What a cipherbench built against another library must match: version and commit
/// (the children's protocol changes with the source, not with the library).
pub fn build_identity() -> String {
    format!(
        "cipherbench {} (commit {})",
        env!("CARGO_PKG_VERSION"),
        env!("CIPHERBENCH_COMMIT")
    )
}

/// The library an `openssl version` line says the CLI runs with: the `(Library:
/// ...)` part, which OpenSSL prints when the library differs from the one the CLI
/// was built with, else the version itself. Pure.
pub fn cli_library(version_line: &str) -> Loaded {
    let line = version_line.trim();
    let version = match line.split_once("(Library: ") {
        Some((_, rest)) => rest.trim_end_matches(')').trim(),
        None => line,
    };
    Loaded {
        version: Some(version.to_string()),
        ..Loaded::default()
    }
}

/// Writes the [`REPORT_ENV`] line on stderr if this process was asked for it.
pub fn report_if_asked() {
    if std::env::var_os(REPORT_ENV).is_some() {
        if let Ok(json) = serde_json::to_string(&this_process()) {
            eprintln!("{REPORT_PREFIX}{json}");
        }
    }
}

/// The [`REPORT_ENV`] line in a child's stderr, if there is one.
pub fn parse_report(stderr: &str) -> Option<Loaded> {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix(REPORT_PREFIX))
        .and_then(|json| serde_json::from_str(json).ok())
}

/// Set in a cipherbench started again under a library ([`run_under`]): the
/// directory, as given.
pub const UNDER_ENV: &str = "CIPHERBENCH_UNDER_LIBRARY";

/// Whether this process is cipherbench started again under `library`
/// ([`run_under`]): what it does in its own process (the TLS load generator) runs on
/// that library.
pub fn runs_under(library: &Library) -> bool {
    library.dir.as_ref().is_some_and(|d| {
        std::env::var_os(UNDER_ENV).is_some_and(|u| Path::new(&u) == d.given.as_path())
    })
}

impl Library {
    /// Whether this process runs on this library: the system's, unless cipherbench
    /// started itself again under a directory ([`run_under`]), which then is the one.
    pub fn runs_here(&self) -> bool {
        match &self.dir {
            None => std::env::var_os(UNDER_ENV).is_none(),
            Some(_) => runs_under(self),
        }
    }
}

/// Starts this very command again, in place (`exec`: the same process, so Ctrl-C,
/// the exit code and everything cleaned up at exit are unchanged), with `library`'s
/// directory first on `LD_LIBRARY_PATH`, so that what cipherbench does in its own
/// process (the TLS load generator) runs on that library too. In the process so
/// started, it checks that the library is the one mapped, and returns. For the
/// system's library, nothing. Children still start on the library their variant
/// names ([`crate::supervisor::OUTER_LD_LIBRARY_PATH`]).
pub fn run_under(library: &Library) -> Result<()> {
    let Some(dir) = &library.dir else {
        return Ok(());
    };
    if runs_under(library) {
        return library.check(
            "cipherbench's own process (the load generator), started again under it",
            &this_process(),
        );
    }
    let outer = std::env::var_os("LD_LIBRARY_PATH").unwrap_or_default();
    let path = dir.loader.library_path();
    let mut args = std::env::args_os();
    // The cipherbench built against it where this one cannot load it.
    let exe = match &dir.loader.cipherbench {
        Some(own) => own.clone(),
        None => std::env::current_exe().context("finding cipherbench's own executable")?,
    };
    let mut command = std::process::Command::new(exe);
    if let Some(name) = args.next() {
        std::os::unix::process::CommandExt::arg0(&mut command, name);
    }
    let error = std::os::unix::process::CommandExt::exec(
        command
            .args(args)
            .env("LD_LIBRARY_PATH", path)
            .env(crate::supervisor::OUTER_LD_LIBRARY_PATH, outer)
            .env(UNDER_ENV, &dir.given),
    );
    Err(anyhow!(
        "--openssl {}: starting cipherbench again under it for its load generator: {error}",
        dir.given.display()
    ))
}

/// A directory given with `--openssl`, resolved and checked.
#[derive(Debug, PartialEq, Eq)]
pub struct LibraryDir {
    /// As the user wrote it.
    pub given: PathBuf,
    /// Its library directory and CLI, for the supervisor.
    pub loader: Loader,
    /// What a child started under it reported: the version and the files it mapped.
    pub loaded: Loaded,
    /// Its sonames' number: 3 (`libcrypto.so.3`) or 4.
    pub soname: u32,
}

/// The library a variant's processes run under.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Library {
    /// None: the system's; Some: a directory given with `--openssl`.
    pub dir: Option<Arc<LibraryDir>>,
    /// The suffix of its variants' names when it is not the first of a list
    /// (`3.6.3` in `accel@3.6.3`).
    pub tag: Option<String>,
}

impl Library {
    /// The system's: programs load what the loader finds without help.
    pub fn system() -> Library {
        Library::default()
    }

    /// Whether this is the system's library.
    pub fn is_system(&self) -> bool {
        self.dir.is_none()
    }

    /// `system`, or the directory as given.
    pub fn name(&self) -> String {
        match &self.dir {
            None => SYSTEM.into(),
            Some(d) => d.given.display().to_string(),
        }
    }

    /// How the supervisor starts a child under it (None: the environment as it is).
    pub fn loader(&self) -> Option<&Loader> {
        self.dir.as_ref().map(|d| &d.loader)
    }

    /// `OpenSSL_version(OPENSSL_VERSION)`: as the resolving child reported it, or, for
    /// the system's, as cipherbench's own (system) library says.
    pub fn version(&self) -> String {
        match &self.dir {
            Some(d) => d.loaded.version.clone().unwrap_or_default(),
            None => cipherbench_crypto::info::library_version(),
        }
    }

    /// Holds what a part loaded to this library: for a directory, the part must have
    /// mapped the directory's libcrypto (and its libssl, if it mapped one), or, where
    /// only a version is known, report the same version. The system's accepts what
    /// the loader gave (nothing of ours changed its environment). The error is one
    /// line naming the part and both libraries.
    pub fn check(&self, part: &str, loaded: &Loaded) -> Result<()> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let expected = &dir.loaded;
        let same = |found: &Option<PathBuf>, want: &Option<PathBuf>| match (found, want) {
            (Some(f), Some(w)) => canonical(f) == canonical(w),
            _ => true,
        };
        let agrees = match (&loaded.libcrypto, &loaded.version) {
            (Some(_), _) => {
                same(&loaded.libcrypto, &expected.libcrypto)
                    && same(&loaded.libssl, &expected.libssl)
                    && loaded
                        .version
                        .as_ref()
                        .is_none_or(|v| Some(v) == expected.version.as_ref())
            }
            (None, Some(v)) => Some(v) == expected.version.as_ref(),
            (None, None) => false,
        };
        if agrees {
            return Ok(());
        }
        let why = if loaded.libcrypto.is_none() && loaded.version.is_none() {
            " (statically linked, or not an OpenSSL program: LD_LIBRARY_PATH cannot swap its library)"
        } else {
            ""
        };
        bail!(
            "{part} loaded {}, not the library asked for with --openssl {}: {}{why}; stopped so that results do not mix libraries",
            loaded.describe(),
            dir.given.display(),
            expected.describe()
        )
    }

    /// The record of this library in the environment.
    pub fn record(&self) -> LibraryUnderTest {
        let (loaded, cli) = match &self.dir {
            Some(d) => (
                d.loaded.clone(),
                d.loader.openssl.as_ref().map(|p| p.display().to_string()),
            ),
            None => (this_process(), None),
        };
        LibraryUnderTest {
            name: self.name(),
            tag: self.tag.clone(),
            version: loaded.version.unwrap_or_default(),
            libcrypto: loaded.libcrypto.map(|p| p.display().to_string()),
            libssl: loaded.libssl.map(|p| p.display().to_string()),
            cli,
        }
    }

    /// The record of one part that ran under this library.
    pub fn part(
        &self,
        layer: &str,
        part: &str,
        loaded: &Loaded,
        source: &str,
        checked: bool,
    ) -> PartLibrary {
        PartLibrary {
            layer: layer.into(),
            part: part.into(),
            asked: self.name(),
            version: loaded.version.clone(),
            libcrypto: loaded.libcrypto.as_ref().map(|p| p.display().to_string()),
            libssl: loaded.libssl.as_ref().map(|p| p.display().to_string()),
            source: source.into(),
            checked,
        }
    }

    /// Checks what `part` loaded against this library and records it in `env`, the
    /// record first so that a mismatch is in run.json too.
    pub fn check_and_note(
        &self,
        env: &mut Environment,
        layer: &str,
        part: &str,
        loaded: &Loaded,
        source: &str,
    ) -> Result<()> {
        note(env, self.part(layer, part, loaded, source, true));
        self.check(part, loaded)
    }
}

impl Library {
    /// The soname number of its libraries: 3 for the system's and every 3.x build,
    /// 4 for an OpenSSL 4 build.
    pub fn soname(&self) -> u32 {
        self.dir.as_ref().map_or(3, |d| d.soname)
    }

    /// Which libcrypto and libssl `program` would load under this library, asked of
    /// the dynamic loader before it runs a line of the program
    /// (`LD_TRACE_LOADED_OBJECTS`, what `ldd` does). None: the system's library,
    /// nothing to ask.
    pub fn would_load(&self, program: &Path) -> Result<Option<Loaded>> {
        let Some(dir) = &self.dir else {
            return Ok(None);
        };
        let out = Spawn::new(program)
            .loader(Some(&dir.loader))
            .env("LD_TRACE_LOADED_OBJECTS", "1")
            .output(CHECK_TIMEOUT)
            .with_context(|| format!("asking the loader what {} links", program.display()))?;
        Ok(Some(traced(&out.stdout)))
    }

    /// Refuses, in one line naming the part and ending with `remedy`, a program
    /// (nginx, charon) the loader says would load another libcrypto: one that links
    /// another soname (Debian's nginx and `libssl.so.3` against an OpenSSL 4), or has
    /// an `RPATH`. Checked before anything starts; where the loader cannot say (a
    /// script, a static build), the part's own check by its mappings decides when it
    /// runs.
    pub fn check_program(&self, part: &str, program: &Path, remedy: &str) -> Result<()> {
        let Some(loaded) = self.would_load(program)? else {
            return Ok(());
        };
        let dir = self
            .dir
            .as_ref()
            .expect("would_load answered for a directory");
        let wanted = canonical(
            &dir.loader
                .lib_dir
                .join(format!("libcrypto.so.{}", dir.soname)),
        );
        if loaded
            .libcrypto
            .as_ref()
            .is_some_and(|p| canonical(p) == wanted)
        {
            return Ok(());
        }
        // No libcrypto in the trace (a wrapper script, a static build): the loader
        // cannot say; the part's own check by its mappings decides when it runs.
        let Some(found) = &loaded.libcrypto else {
            return Ok(());
        };
        let links = format!(
            "links {}",
            found.file_name().unwrap_or_default().to_string_lossy()
        );
        bail!(
            "{part} {} {links} and cannot load OpenSSL {} from --openssl {}: {remedy}",
            program.display(),
            dir.loaded
                .version
                .as_deref()
                .map_or("", |v| v.split_whitespace().nth(1).unwrap_or(v)),
            dir.given.display()
        )
    }
}

impl Library {
    /// The nginx to run under this library: `asked` where it loads the library (the
    /// system's library: always), else the one built against it in its prefix
    /// ([`OWN_NGINX`]) where that loads it, else the one line saying neither can.
    pub fn nginx_for(&self, asked: &Path) -> Result<PathBuf> {
        let Some(dir) = &self.dir else {
            return Ok(asked.to_path_buf());
        };
        let refusal = match self.check_program("nginx", asked, NGINX_REMEDY) {
            Ok(()) => return Ok(asked.to_path_buf()),
            Err(e) => e,
        };
        match &dir.loader.nginx {
            Some(own) => {
                self.check_program(
                    "the nginx built against it,",
                    own,
                    "build it again with `scripts/build-nginx.sh PREFIX` from cipherbench's source tree",
                )?;
                Ok(own.clone())
            }
            None => Err(refusal),
        }
    }
}

/// The libcrypto and libssl in the dynamic loader's trace of a program
/// (`LD_TRACE_LOADED_OBJECTS=1`: lines of `name => path (address)`). Pure.
pub fn traced(trace: &str) -> Loaded {
    let mut out = Loaded::default();
    for line in trace.lines() {
        let Some((name, rest)) = line.trim().split_once(" => ") else {
            continue;
        };
        let path = rest.rsplit_once(" (").map_or(rest, |(p, _)| p).trim();
        if !path.starts_with('/') {
            continue;
        }
        if name.starts_with("libcrypto.so") && out.libcrypto.is_none() {
            out.libcrypto = Some(path.into());
        } else if name.starts_with("libssl.so") && out.libssl.is_none() {
            out.libssl = Some(path.into());
        }
    }
    out
}

/// Adds a part's record unless the same one is there (a sweep starts nginx per point).
pub fn note(env: &mut Environment, part: PartLibrary) {
    if !env.loaded.contains(&part) {
        env.loaded.push(part);
    }
}

/// Records the libraries a run measures in its environment.
pub fn describe(env: &mut Environment, libraries: &[Library]) {
    env.libraries = libraries.iter().map(Library::record).collect();
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Parses and resolves an `--openssl` value: `system` or directories,
/// comma-separated, each checked before anything starts. With several, the first is
/// the baseline and the others get tags for their variants' names.
pub fn resolve_list(text: &str) -> Result<Vec<Library>> {
    let mut out: Vec<Library> = Vec::new();
    for item in text.split(',').map(str::trim) {
        if item.is_empty() {
            bail!("--openssl {text}: an empty entry; give `system` or OpenSSL 3 or 4 directories, comma-separated");
        }
        let library = if item == SYSTEM {
            Library::system()
        } else {
            resolve_dir(Path::new(item))?
        };
        let twice = out.iter().any(|l| match (&l.dir, &library.dir) {
            (None, None) => true,
            (Some(a), Some(b)) => a.loaded.libcrypto == b.loaded.libcrypto,
            _ => false,
        });
        if twice {
            bail!("--openssl {text}: {item} is listed twice (or names the same library as another entry)");
        }
        out.push(library);
    }
    let versions: Vec<String> = out.iter().map(Library::version).collect();
    let names: Vec<String> = out.iter().map(Library::name).collect();
    for (i, tag) in tags(&versions, &names)?.into_iter().enumerate() {
        out[i].tag = tag;
    }
    Ok(out)
}

/// The tags of a list's libraries: none for the first; for the others, the version
/// number (`3.6.3`), or, where two report the same version, the directory's last
/// component. Pure.
pub fn tags(versions: &[String], names: &[String]) -> Result<Vec<Option<String>>> {
    let clean = |s: &str| -> String {
        s.chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+'))
            .collect()
    };
    let number = |v: &str| clean(v.split_whitespace().nth(1).unwrap_or(v));
    let mut out = vec![None];
    for i in 1..versions.len() {
        let short = number(&versions[i]);
        let clash = (1..versions.len()).any(|j| j != i && number(&versions[j]) == short);
        let tag = if clash || short.is_empty() {
            clean(
                &Path::new(&names[i])
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| names[i].clone()),
            )
        } else {
            short
        };
        if tag.is_empty() || out.iter().flatten().any(|t: &String| *t == tag) {
            bail!(
                "--openssl: {} and another library both report {} and cannot be told apart in variant names; measure them in separate runs and use `cipherbench compare`",
                names[i],
                versions[i]
            );
        }
        out.push(Some(tag));
    }
    Ok(out)
}

/// Where in a directory the libraries may be, in the order looked at.
fn lib_dirs(dir: &Path) -> Vec<PathBuf> {
    vec![
        dir.to_path_buf(),
        dir.join("lib"),
        dir.join("lib64"),
        dir.join(format!("lib/{}-linux-gnu", std::env::consts::ARCH)),
    ]
}

/// Resolves one `--openssl DIR`: the directory exists and holds both libraries, a
/// child started under it loads those very files (a link in the directory counts as
/// the file it points to) and reports an OpenSSL 3, or an OpenSSL 4 with a
/// cipherbench built against it in the prefix.
fn resolve_dir(dir: &Path) -> Result<Library> {
    let flag = format!("--openssl {}", dir.display());
    let meta = std::fs::metadata(dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => anyhow!("{flag}: no such directory"),
        _ => anyhow!("{flag}: {e}"),
    })?;
    if !meta.is_dir() {
        bail!("{flag}: not a directory; give the prefix of an OpenSSL 3 or 4 build (holding lib/{LIBCRYPTO} or lib/libcrypto.so.4) or its lib directory");
    }
    let candidates = lib_dirs(dir);
    let found = candidates.iter().find_map(|d| {
        SONAMES
            .iter()
            .find(|n| d.join(format!("libcrypto.so.{n}")).is_file())
            .map(|n| (d, *n))
    });
    let Some((lib_dir, soname)) = found else {
        bail!(
            "{flag}: has no {LIBCRYPTO} or libcrypto.so.4 (looked in {}); give the prefix of an OpenSSL build (`scripts/build-openssl.sh` in cipherbench's source tree makes one)",
            candidates
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    let (libcrypto, libssl) = (
        format!("libcrypto.so.{soname}"),
        format!("libssl.so.{soname}"),
    );
    if !lib_dir.join(&libssl).is_file() {
        bail!(
            "{flag}: {} has {libcrypto} but no {libssl} (nginx and cipherbench need both)",
            lib_dir.display()
        );
    }
    let lib_dir = canonical(lib_dir);
    let in_prefix = |rel: &str| {
        [dir.join(rel), lib_dir.join("..").join(rel)]
            .into_iter()
            .find(|p| is_executable(p))
            .map(|p| canonical(&p))
    };
    let cli = in_prefix("bin/openssl");
    // A cipherbench of its own where this one cannot load the library.
    let cipherbench = if soname == 3 {
        None
    } else {
        let Some(own) = in_prefix(OWN_BUILD) else {
            bail!(
                "{flag}: holds {libcrypto} (OpenSSL {soname}), which this cipherbench, built against libcrypto.so.3, cannot load: build one against it with `scripts/build-against.sh {}` from cipherbench's source tree (installs {OWN_BUILD} there; about 3 minutes), then run this again",
                dir.display()
            );
        };
        Some(own)
    };
    let loader = Loader {
        lib_dir: lib_dir.clone(),
        openssl: cli,
        cipherbench,
        nginx: in_prefix(OWN_NGINX),
    };
    let loaded = check_child(&flag, &loader, soname)?;
    Ok(Library {
        dir: Some(Arc::new(LibraryDir {
            given: dir.to_path_buf(),
            loader,
            loaded,
            soname,
        })),
        tag: None,
    })
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Starts `cipherbench __library` under the loader (the loader's own cipherbench
/// where it has one) and checks what it reports: an OpenSSL of the directory's soname,
/// loaded from the directory, and, from a cipherbench of its own, this one's build.
fn check_child(flag: &str, loader: &Loader, soname: u32) -> Result<Loaded> {
    let me = std::env::current_exe().context("finding cipherbench's own executable")?;
    let exe = loader.cipherbench.clone().unwrap_or_else(|| me.clone());
    let out = Spawn::new(&me)
        .args(["__library"])
        .loader(Some(loader))
        .output(CHECK_TIMEOUT)
        .with_context(|| format!("{flag}: starting a program under it"))?;
    let reported: Option<serde_json::Value> = out
        .status
        .success()
        .then(|| serde_json::from_str(out.stdout.trim()).ok())
        .flatten();
    let Some(loaded) = reported
        .as_ref()
        .and_then(|v| serde_json::from_value::<Loaded>(v.clone()).ok())
    else {
        return Err(refused(flag, &exe, loader, &out.stderr, soname));
    };
    let version = loaded.version.clone().unwrap_or_default();
    if !version.starts_with(&format!("OpenSSL {soname}.")) {
        bail!("{flag}: is not an OpenSSL {soname} library (it reports '{version}')");
    }
    if let Some(own) = &loader.cipherbench {
        let build = reported.as_ref().and_then(|v| v["build"].as_str());
        if build != Some(build_identity().as_str()) {
            bail!(
                "{flag}: {} is {}, not {} as this one is: build it again with `scripts/build-against.sh {}` from cipherbench's source tree",
                own.display(),
                build.unwrap_or("an older cipherbench"),
                build_identity(),
                loader.lib_dir.parent().unwrap_or(&loader.lib_dir).display()
            );
        }
    }
    for name in [
        format!("libcrypto.so.{soname}"),
        format!("libssl.so.{soname}"),
    ] {
        let path = if name.starts_with("libcrypto") {
            &loaded.libcrypto
        } else {
            &loaded.libssl
        };
        // The file itself, wherever a link in the directory points.
        let wanted = canonical(&loader.lib_dir.join(&name));
        let inside = path.as_ref().is_some_and(|p| canonical(p) == wanted);
        if !inside {
            bail!(
                "{flag}: a program started with {} first on LD_LIBRARY_PATH still loaded {}, not its {name}",
                loader.lib_dir.display(),
                path.as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| format!("no {name}"))
            );
        }
    }
    Ok(loaded)
}

/// Why the loader would not start a program under the library: what the library
/// says it is when opened on its own, else ld.so's own message.
fn refused(flag: &str, exe: &Path, loader: &Loader, stderr: &str, soname: u32) -> anyhow::Error {
    let file = loader.lib_dir.join(format!("libcrypto.so.{soname}"));
    let opened = Spawn::new(exe)
        .args(["__library", "--open"])
        .args([&file])
        .output(CHECK_TIMEOUT)
        .ok()
        .and_then(|o| serde_json::from_str::<serde_json::Value>(o.stdout.trim()).ok());
    if let Some(version) = opened.as_ref().and_then(|v| v["version"].as_str()) {
        if !version.starts_with(&format!("OpenSSL {soname}.")) {
            return anyhow!("{flag}: is not an OpenSSL {soname} library (it reports '{version}')");
        }
    }
    let exe_prefix = format!("{}: ", exe.display());
    let message = stderr
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| l.strip_prefix(&exe_prefix).unwrap_or(l).to_string())
        .or_else(|| {
            opened
                .as_ref()
                .and_then(|v| v["error"].as_str().map(str::to_string))
        })
        .unwrap_or_else(|| "the program exited without a word".into());
    anyhow!("{flag}: the loader refused it: {message}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c0a00000-55d0c0a2c000 r--p 00000000 08:01 1234 /usr/sbin/nginx
7f1e2a000000-7f1e2a0a0000 r--p 00000000 08:01 99 /opt/ossl 3/lib/libcrypto.so.3
7f1e2a0a0000-7f1e2a300000 r-xp 000a0000 08:01 99 /opt/ossl 3/lib/libcrypto.so.3
7f1e2b000000-7f1e2b020000 r--p 00000000 08:01 98 /opt/ossl 3/lib/libssl.so.3 (deleted)
7ffd5e9f0000-7ffd5ea11000 rw-p 00000000 00:00 0 [stack]
";

    #[test]
    fn reads_the_libraries_a_process_mapped() {
        let m = mapped(MAPS);
        assert_eq!(
            m.libcrypto.as_deref(),
            Some(Path::new("/opt/ossl 3/lib/libcrypto.so.3"))
        );
        assert_eq!(
            m.libssl.as_deref(),
            Some(Path::new("/opt/ossl 3/lib/libssl.so.3"))
        );
        assert_eq!(m.version, None);
        assert_eq!(
            mapped("7ffd-7ffe rw-p 0 00:00 0 [heap]\n"),
            Loaded::default()
        );
    }

    #[test]
    fn this_process_reports_the_library_it_links() {
        let me = this_process();
        assert!(me.version.unwrap().starts_with("OpenSSL 3."));
        assert!(me.libcrypto.is_some_and(|p| p.ends_with(LIBCRYPTO)));
    }

    #[test]
    fn a_report_line_is_found_among_other_stderr() {
        let text = format!(
            "warning: something\n{REPORT_PREFIX}{{\"version\":\"OpenSSL 3.6.3\",\"libcrypto\":\"/x/libcrypto.so.3\",\"libssl\":null}}\n"
        );
        let loaded = parse_report(&text).unwrap();
        assert_eq!(loaded.version.as_deref(), Some("OpenSSL 3.6.3"));
        assert_eq!(parse_report("nothing"), None);
    }

    #[test]
    fn the_openssl_cli_says_which_library_it_runs_with() {
        let mixed = cli_library("OpenSSL 3.0.19 27 Jan 2026 (Library: OpenSSL 3.6.3 9 Jun 2026)\n");
        assert_eq!(mixed.version.as_deref(), Some("OpenSSL 3.6.3 9 Jun 2026"));
        let own = cli_library("OpenSSL 3.6.3 9 Jun 2026");
        assert_eq!(own.version.as_deref(), Some("OpenSSL 3.6.3 9 Jun 2026"));
        assert_eq!(own.libcrypto, None);
    }

    #[test]
    fn the_loaders_trace_gives_the_libraries_a_program_would_load() {
        let trace = "\tlinux-vdso.so.1 (0x00007ffd)\n\
            \tlibssl.so.3 => /usr/lib/x86_64-linux-gnu/libssl.so.3 (0x00007f10)\n\
            \tlibcrypto.so.3 => /opt/ossl 3/lib/libcrypto.so.3 (0x00007f20)\n\
            \tlibz.so.1 => not found\n\
            \t/lib64/ld-linux-x86-64.so.2 (0x00007f30)\n";
        let loaded = traced(trace);
        assert_eq!(
            loaded.libcrypto.as_deref(),
            Some(Path::new("/opt/ossl 3/lib/libcrypto.so.3"))
        );
        assert_eq!(
            loaded.libssl.as_deref(),
            Some(Path::new("/usr/lib/x86_64-linux-gnu/libssl.so.3"))
        );
        assert_eq!(traced("\tstatically linked\n"), Loaded::default());
    }

    fn dir_library(lib: &str, version: &str) -> Library {
        Library {
            dir: Some(Arc::new(LibraryDir {
                given: "up".into(),
                loader: Loader {
                    lib_dir: lib.into(),
                    openssl: None,
                    cipherbench: None,
                    nginx: None,
                },
                loaded: Loaded {
                    version: Some(version.into()),
                    libcrypto: Some(format!("{lib}/libcrypto.so.3").into()),
                    libssl: Some(format!("{lib}/libssl.so.3").into()),
                },
                soname: 3,
            })),
            tag: None,
        }
    }

    #[test]
    fn a_part_must_load_the_directorys_library() {
        let up = dir_library("/nonexistent/up/lib", "OpenSSL 3.6.3 1 Jul 2025");
        let right = Loaded {
            version: None,
            libcrypto: Some("/nonexistent/up/lib/libcrypto.so.3".into()),
            libssl: Some("/nonexistent/up/lib/libssl.so.3".into()),
        };
        up.check("nginx worker", &right).unwrap();
        let system = Loaded {
            libcrypto: Some("/usr/lib/x86_64-linux-gnu/libcrypto.so.3".into()),
            ..right.clone()
        };
        let err = up.check("nginx worker", &system).unwrap_err().to_string();
        assert!(
            err.starts_with("nginx worker loaded /usr/lib/x86_64-linux-gnu/libcrypto.so.3")
                && err.contains("/nonexistent/up/lib/libcrypto.so.3 (OpenSSL 3.6.3"),
            "{err}"
        );
        // A version alone (the openssl CLI's `Library:`) is compared as a version.
        let cli = |v: &str| Loaded {
            version: Some(v.into()),
            ..Loaded::default()
        };
        up.check("openssl CLI", &cli("OpenSSL 3.6.3 1 Jul 2025"))
            .unwrap();
        assert!(up
            .check("openssl CLI", &cli("OpenSSL 3.0.19 27 Jan 2026"))
            .is_err());
        // Nothing mapped: statically linked, said so.
        let err = up
            .check("nginx master", &Loaded::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("statically linked"), "{err}");
        // The system's takes whatever the loader gave.
        Library::system().check("nginx worker", &system).unwrap();
    }

    #[test]
    fn later_libraries_of_a_list_are_tagged_by_version_then_by_directory() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            tags(
                &v(&["OpenSSL 3.0.19 27 Jan 2026", "OpenSSL 3.6.3 1 Jul 2025"]),
                &v(&["system", "target/openssl-upstream/3.6.3"])
            )
            .unwrap(),
            [None, Some("3.6.3".to_string())]
        );
        // Two builds of one version: their directories tell them apart.
        assert_eq!(
            tags(
                &v(&["OpenSSL 3.0.19", "OpenSSL 3.5.0 x", "OpenSSL 3.5.0 y"]),
                &v(&["system", "/opt/a/fips", "/opt/b/plain"])
            )
            .unwrap(),
            [None, Some("fips".to_string()), Some("plain".to_string())]
        );
        assert!(tags(
            &v(&["OpenSSL 3.0.19", "OpenSSL 3.5.0", "OpenSSL 3.5.0"]),
            &v(&["system", "/a/x", "/b/x"])
        )
        .is_err());
    }

    #[test]
    fn bad_directories_are_one_clear_line() {
        let err = resolve_list("/nonexistent/openssl")
            .unwrap_err()
            .to_string();
        assert_eq!(err, "--openssl /nonexistent/openssl: no such directory");
        let err = resolve_list("system,,system").unwrap_err().to_string();
        assert!(err.contains("an empty entry"), "{err}");
        let err = resolve_list("system,system").unwrap_err().to_string();
        assert!(err.contains("listed twice"), "{err}");
        let empty = std::env::temp_dir().join(format!("cb-lib-empty-{}", std::process::id()));
        std::fs::create_dir_all(&empty).unwrap();
        let err = resolve_list(empty.to_str().unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("has no libcrypto.so.3"), "{err}");
        std::fs::remove_dir_all(&empty).unwrap();
    }
}
