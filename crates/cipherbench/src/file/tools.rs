//! The encryption tools layer 2 compares, how each is invoked to encrypt and decrypt
//! a file, and the throwaway secrets they need (a passphrase file, a cipherbench key
//! file, an age identity, a private GnuPG home), all made in the scratch directory
//! and gone with it.
//!
//! Every tool reads a file and writes a file; none is given a secret on its command
//! line (openssl and gpg read the passphrase from a file, age an identity file,
//! cipherbench a key file). Commands are argument vectors for the supervisor.
//!
//! gpg is the one tool that starts a helper: its agent, which it would launch as a
//! daemon (its own session, re-parented to init) that outlives a killed run. The
//! kit starts that agent itself, under a keeper, before any timed run
//! ([`Kit::prepare`]); gpg finds it on its home's socket and starts none.

use crate::interrupt;
use crate::supervisor::{self, Child, Spawn};
use anyhow::{anyhow, bail, Context, Result};
use cipherbench_model::file::SyncMode;
use cipherbench_model::speed::Direction;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolId {
    /// `cp`: no encryption, the floor the file system sets.
    Cp,
    /// `openssl enc -aes-256-cbc` (the EC2 AES-NI blog post's tool, seed 001).
    OpensslCbc,
    /// `openssl enc -aes-256-ctr`.
    OpensslCtr,
    /// `age` with an X25519 recipient.
    Age,
    /// `gpg --symmetric`.
    Gpg,
    /// `cipherbench seal`/`open`, AES-256-GCM.
    Cipherbench,
    /// `cipherbench seal --cipher chacha20-poly1305`.
    CipherbenchChacha,
}

impl ToolId {
    /// Every tool, in the order they are measured and shown.
    pub const ALL: [ToolId; 7] = [
        ToolId::Cp,
        ToolId::OpensslCbc,
        ToolId::OpensslCtr,
        ToolId::Age,
        ToolId::Gpg,
        ToolId::Cipherbench,
        ToolId::CipherbenchChacha,
    ];

    /// The id in results and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ToolId::Cp => "cp",
            ToolId::OpensslCbc => "openssl-aes-256-cbc",
            ToolId::OpensslCtr => "openssl-aes-256-ctr",
            ToolId::Age => "age",
            ToolId::Gpg => "gpg",
            ToolId::Cipherbench => "cipherbench",
            ToolId::CipherbenchChacha => "cipherbench-chacha20",
        }
    }

    /// Parses an id.
    pub fn from_name(name: &str) -> Option<ToolId> {
        let name = name.trim().to_ascii_lowercase();
        ToolId::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The cipher and the library doing the work.
    pub fn crypto(self) -> &'static str {
        match self {
            ToolId::Cp => "none (a plain copy)",
            ToolId::OpensslCbc => "AES-256-CBC, OpenSSL libcrypto (no authentication)",
            ToolId::OpensslCtr => "AES-256-CTR, OpenSSL libcrypto (no authentication)",
            ToolId::Age => "ChaCha20-Poly1305 STREAM, Go's crypto (AES-NI does not apply)",
            ToolId::Gpg => "AES-256 in OpenPGP CFB with MDC, libgcrypt (its own CPU detection)",
            ToolId::Cipherbench => "AES-256-GCM STREAM, OpenSSL libcrypto, all cores",
            ToolId::CipherbenchChacha => {
                "ChaCha20-Poly1305 STREAM, OpenSSL libcrypto, all cores (the control: AES-NI does not apply)"
            }
        }
    }

    /// Whether `OPENSSL_ia32cap` reaches the tool's crypto, so that the `noaesni`
    /// variant means something.
    pub fn variants_apply(self) -> bool {
        matches!(
            self,
            ToolId::OpensslCbc
                | ToolId::OpensslCtr
                | ToolId::Cipherbench
                | ToolId::CipherbenchChacha
        )
    }

    /// The catalogue cipher whose implementation a provider variant is judged on
    /// (None: a tool whose cipher the catalogue lacks, or not OpenSSL's).
    pub fn catalogue_cipher(self) -> Option<&'static str> {
        match self {
            ToolId::OpensslCbc => Some("aes-256-cbc"),
            ToolId::Cipherbench => Some("aes-256-gcm"),
            ToolId::CipherbenchChacha => Some("chacha20-poly1305"),
            _ => None,
        }
    }

    /// The programs it needs on PATH (cipherbench is this executable).
    fn programs(self) -> &'static [&'static str] {
        match self {
            ToolId::Cp => &["cp"],
            ToolId::OpensslCbc | ToolId::OpensslCtr => &["openssl"],
            ToolId::Age => &["age", "age-keygen"],
            ToolId::Gpg => &["gpg", "gpg-agent", "gpgconf", "gpg-connect-agent"],
            ToolId::Cipherbench | ToolId::CipherbenchChacha => &[],
        }
    }
}

/// Where a program is on PATH, if anywhere.
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| {
            std::fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// The version line of a tool, if installed.
pub fn version(tool: ToolId) -> Option<String> {
    match tool {
        ToolId::OpensslCbc | ToolId::OpensslCtr => crate::probe::openssl_cli::version(),
        ToolId::Cipherbench | ToolId::CipherbenchChacha => Some(format!(
            "cipherbench {} ({})",
            env!("CARGO_PKG_VERSION"),
            cipherbench_crypto::info::library_version()
        )),
        other => {
            let program = other.programs()[0];
            which(program)?;
            crate::probe::openssl_cli::tool_version(program)
        }
    }
}

/// Why a tool cannot run here, or None if it can.
pub fn missing(tool: ToolId) -> Option<String> {
    let absent: Vec<&str> = tool
        .programs()
        .iter()
        .copied()
        .filter(|p| which(p).is_none())
        .collect();
    if absent.is_empty() {
        None
    } else {
        Some(format!(
            "{} not installed (Debian: apt-get install {})",
            absent.join(", "),
            match tool {
                ToolId::Age => "age",
                ToolId::Gpg => "gnupg",
                ToolId::Cp => "coreutils",
                _ => "openssl",
            }
        ))
    }
}

/// The secrets and settings the tools need, in a private directory.
pub struct Kit {
    exe: PathBuf,
    threads: usize,
    passphrase_file: PathBuf,
    key_file: PathBuf,
    age_identity: PathBuf,
    age_recipients: PathBuf,
    gnupg_home: PathBuf,
    /// gpg's agent, under a keeper: it dies with cipherbench, however that ends.
    gpg_agent: Option<Child>,
}

impl Kit {
    /// Makes the secrets in `dir/secrets` (mode 0700) for the tools given; a tool
    /// whose setup fails is returned with the reason.
    pub fn prepare(
        dir: &Path,
        tools: &[ToolId],
        threads: usize,
    ) -> Result<(Kit, Vec<(ToolId, String)>)> {
        let secrets = dir.join("secrets");
        std::fs::create_dir_all(&secrets)
            .with_context(|| format!("creating {}", secrets.display()))?;
        std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o700))?;
        let mut kit = Kit {
            exe: std::env::current_exe().context("finding cipherbench's own executable")?,
            threads,
            passphrase_file: secrets.join("passphrase"),
            key_file: secrets.join("cipherbench.key"),
            age_identity: secrets.join("age-identity.txt"),
            age_recipients: secrets.join("age-recipients.txt"),
            gnupg_home: secrets.join("gnupg"),
            gpg_agent: None,
        };
        // A random passphrase: 24 bytes as hex.
        let mut raw = [0u8; 24];
        cipherbench_crypto::random_bytes(&mut raw)?;
        write_private(
            &kit.passphrase_file,
            cipherbench_crypto::digest::to_hex(&raw).as_bytes(),
        )?;
        super::keys::generate_key_file(&kit.key_file)?;
        let mut failed = Vec::new();
        if tools.contains(&ToolId::Age) {
            if let Err(e) = kit.prepare_age() {
                failed.push((ToolId::Age, format!("{e:#}")));
            }
        }
        if tools.contains(&ToolId::Gpg) {
            std::fs::create_dir_all(&kit.gnupg_home)?;
            std::fs::set_permissions(&kit.gnupg_home, std::fs::Permissions::from_mode(0o700))?;
            if let Err(e) = kit.start_gpg_agent() {
                // Stopped by Ctrl-C: the run stops, gpg has not failed.
                interrupt::check()?;
                failed.push((ToolId::Gpg, format!("{e:#}")));
            }
        }
        Ok((kit, failed))
    }

    /// Starts gpg's agent on the private home, in the foreground of a keeper.
    /// Left to gpg, the agent would be a daemon in its own session, re-parented to
    /// init: a SIGKILLed cipherbench would leave it running (until the next run's
    /// sweep). `gpg-agent --daemon --no-detach PROGRAM` (documented in
    /// gpg-agent(1)) runs PROGRAM with the agent as its child, in its process group,
    /// and ends the agent when PROGRAM ends; PROGRAM here waits forever, so the
    /// agent lives exactly as long as the kit or, if cipherbench is killed, its
    /// keeper. Its start, and its calibration of the S2K count, are thereby
    /// outside every timed run.
    fn start_gpg_agent(&mut self) -> Result<()> {
        let socket = Spawn::new("gpgconf")
            .args(["--homedir"])
            .args([&self.gnupg_home])
            .args(["--list-dirs", "agent-socket"])
            .output(Duration::from_secs(30))?
            .success("gpgconf --list-dirs")?
            .stdout
            .trim()
            .to_string();
        let socket = PathBuf::from(socket);
        let mut agent = Spawn::new("gpg-agent")
            .args(["--homedir"])
            .args([&self.gnupg_home])
            .args(["--daemon", "--no-detach", "sleep", "infinity"])
            .start()?;
        let what = format!("gpg-agent listening on {}", socket.display());
        let mut ended = None;
        supervisor::wait_until(&what, Duration::from_secs(30), || {
            ended = agent.try_wait()?;
            Ok(ended.is_some()
                || interrupt::requested()
                || std::fs::symlink_metadata(&socket).is_ok())
        })?;
        interrupt::check()?;
        if let Some(status) = ended {
            bail!("gpg-agent ended ({status}): {}", agent.stderr_tail());
        }
        self.gpg_agent = Some(agent);
        // gpg asks the agent for its S2K count, which the agent calibrates on the
        // first request by hashing for a while (2 s measured on a loaded 2-core
        // guest, longer the busier the machine): asked here, so that no timed run
        // pays it; a Ctrl-C meanwhile stops the asking.
        let mut ask = Spawn::new("gpg-connect-agent")
            .args(["--homedir"])
            .args([&self.gnupg_home])
            .args(["--no-autostart", "GETINFO s2k_count", "/bye"])
            .start()?;
        let (status, _) = ask.wait_with_usage(Duration::from_secs(120), interrupt::requested)?;
        if !status.success() {
            bail!(
                "gpg-connect-agent GETINFO s2k_count failed ({status}): {}",
                ask.stderr_tail()
            );
        }
        Ok(())
    }

    fn prepare_age(&self) -> Result<()> {
        let out = Spawn::new("age-keygen")
            .args(["-o"])
            .args([&self.age_identity])
            .output(Duration::from_secs(30))?
            .success("age-keygen")?;
        // age-keygen prints "Public key: age1..." on stderr when writing to a file.
        let recipient = format!("{}{}", out.stderr, out.stdout)
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix("Public key:")
                    .map(|k| k.trim().to_string())
            })
            .ok_or_else(|| anyhow!("age-keygen did not print a public key"))?;
        write_private(&self.age_recipients, format!("{recipient}\n").as_bytes())
    }

    /// The command that encrypts (or decrypts) `input` into `output`. `sync` only
    /// changes cipherbench, which fsyncs its output unless told not to; the harness
    /// fsyncs every tool's output the same way afterwards.
    pub fn command(
        &self,
        tool: ToolId,
        direction: Direction,
        input: &Path,
        output: &Path,
        sync: SyncMode,
    ) -> Spawn {
        let decrypt = direction == Direction::Decrypt;
        match tool {
            ToolId::Cp => Spawn::new("cp").args([input]).args([output]),
            ToolId::OpensslCbc | ToolId::OpensslCtr => {
                let cipher = if tool == ToolId::OpensslCbc {
                    "-aes-256-cbc"
                } else {
                    "-aes-256-ctr"
                };
                let mut s = Spawn::new("openssl").args(["enc"]);
                if decrypt {
                    s = s.args(["-d"]);
                }
                s.args([cipher, "-pbkdf2", "-pass"])
                    .args([format!("file:{}", self.passphrase_file.display())])
                    .args(["-in"])
                    .args([input])
                    .args(["-out"])
                    .args([output])
            }
            ToolId::Age => {
                let s = Spawn::new("age");
                let s = if decrypt {
                    s.args(["-d", "-i"]).args([&self.age_identity])
                } else {
                    s.args(["-e", "-R"]).args([&self.age_recipients])
                };
                s.args(["-o"]).args([output]).args([input])
            }
            ToolId::Gpg => {
                let s = Spawn::new("gpg")
                    .args(["--homedir"])
                    .args([&self.gnupg_home])
                    .args([
                        "--batch",
                        "--yes",
                        "--quiet",
                        "--no-tty",
                        "--no-symkey-cache",
                        "--pinentry-mode",
                        "loopback",
                        "--passphrase-file",
                    ])
                    .args([&self.passphrase_file]);
                let s = if decrypt {
                    s.args(["-o"]).args([output]).args(["-d"])
                } else {
                    // No compression: the input is incompressible, and the other
                    // tools do not compress.
                    s.args([
                        "--symmetric",
                        "--cipher-algo",
                        "AES256",
                        "--compress-algo",
                        "none",
                        "-o",
                    ])
                    .args([output])
                };
                s.args([input])
            }
            ToolId::Cipherbench | ToolId::CipherbenchChacha => {
                let mut s = Spawn::new(&self.exe)
                    .args([if decrypt { "open" } else { "seal" }, "-k"])
                    .args([&self.key_file])
                    .args(["--threads", &self.threads.to_string()]);
                if tool == ToolId::CipherbenchChacha && !decrypt {
                    s = s.args(["--cipher", "chacha20-poly1305"]);
                }
                if sync == SyncMode::None {
                    s = s.args(["--no-fsync"]);
                }
                s.args([input]).args([output])
            }
        }
    }

    /// Stops what the tools need running (gpg's agent, and with it its keeper).
    pub fn shutdown(&mut self) {
        if let Some(mut agent) = self.gpg_agent.take() {
            agent.stop();
        }
    }
}

impl Drop for Kit {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn write_private(path: &Path, contents: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.write_all(contents)
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for t in ToolId::ALL {
            assert_eq!(ToolId::from_name(t.name()), Some(t));
        }
        assert_eq!(ToolId::from_name(" Age "), Some(ToolId::Age));
        assert_eq!(ToolId::from_name("veracrypt"), None);
    }

    #[test]
    fn no_secret_is_ever_on_a_command_line() {
        let dir = std::env::temp_dir().join(format!("cb-kit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (kit, _) = Kit::prepare(&dir, &[ToolId::OpensslCbc, ToolId::Cipherbench], 2).unwrap();
        let passphrase = std::fs::read_to_string(&kit.passphrase_file).unwrap();
        let key = cipherbench_crypto::digest::to_hex(&std::fs::read(&kit.key_file).unwrap());
        for tool in ToolId::ALL {
            for direction in [Direction::Encrypt, Direction::Decrypt] {
                let words = kit
                    .command(
                        tool,
                        direction,
                        Path::new("in"),
                        Path::new("out"),
                        SyncMode::Fsync,
                    )
                    .display();
                let argv = words.join(" ");
                assert!(
                    !argv.contains(passphrase.trim()) && !argv.contains(&key),
                    "{argv}"
                );
                // The paths as whole arguments (or `-in`/`-out` values, whole too).
                assert!(
                    words.iter().any(|w| w == "in") && words.iter().any(|w| w == "out"),
                    "{argv}"
                );
            }
        }
        let cb = kit
            .command(
                ToolId::Cipherbench,
                Direction::Encrypt,
                Path::new("i"),
                Path::new("o"),
                SyncMode::None,
            )
            .display();
        assert!(cb.contains(&"--no-fsync".to_string()) && cb.contains(&"seal".to_string()));
        drop(kit);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
