//! `tunnel --stack strongswan`: strongSwan as a real IPsec stack in the tunnel's
//! two namespaces, measured with the same iperf3 runs, UDP loss search, CPU
//! accounting and "saturated first" as cipherbench's own gateways (the IIJ IPsec
//! post, seed 004, ran libreswan; this is the same setup with strongSwan).
//!
//! Per backend x transform x variant, two charons start (receiver first), one in
//! each namespace, with `kernel-libipsec` (userspace ESP over a TUN device: this
//! kernel, and many containers, have no xfrm ESP), configured only by generated
//! files in the run's scratch directory ([`config`]): their own `strongswan.conf`
//! (through `STRONGSWAN_CONF`), vici socket and log, and, through
//! `cipherbench __charon` ([`charon_main`]), their own `/run` for charon's
//! compiled-in pid file. swanctl loads an IKEv2 connection with a fresh PSK and
//! forced UDP encapsulation and initiates it; the CHILD_SA's algorithms and the
//! plugins that registered them are read back from charon, so a record says what
//! ran, not what was asked for.
//!
//! The charons go through the supervisor like every other child: own process
//! group, `PR_SET_PDEATHSIG`, stopped on drop. Their TUN devices and routes live in
//! the run's namespaces and go with them; their files go with the scratch
//! directory. A charon that dies during a run fails the run at once with one line.

pub mod config;
pub mod sys;

use super::topology::{self, Names};
use super::{analysis, iperf, Lab, TunnelPlan};
use crate::campaign;
use crate::results::Session;
use crate::supervisor::{Child, Spawn};
use crate::variant::{Baseline, Variant};
use anyhow::{anyhow, bail, Context, Result};
use cipherbench_esp::Transform;
use cipherbench_model::speed::VariantRecord;
use cipherbench_model::tunnel::{
    GatewayRun, Protocol, StrongswanPoint, StrongswanResults, ThreadLoad, TunnelPoint,
    TunnelResults, TunnelRun,
};
use config::{Backend, ChildSa, Side};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where distributions put charon (Debian and Ubuntu, Fedora and RHEL, Arch,
/// openSUSE, and strongSwan's own default prefix).
pub const CHARON_PATHS: [&str; 5] = [
    "/usr/lib/ipsec/charon",
    "/usr/libexec/strongswan/charon",
    "/usr/lib/strongswan/charon",
    "/usr/libexec/ipsec/charon",
    "/usr/local/libexec/ipsec/charon",
];

/// How long charon may take to open its vici socket, and swanctl to answer.
const CHARON_TIMEOUT: Duration = Duration::from_secs(15);
/// How long IKE may take to install the CHILD_SA.
const IKE_TIMEOUT_SECS: u64 = 10;
/// libipsec's TUN MTU, fixed in `kernel_libipsec_plugin.c` (TUN_DEFAULT_MTU).
pub const LIBIPSEC_MTU: u32 = 1400;
/// The name charon's kernel-libipsec gives its TUN device (`ipsec%d`, the first).
const IPSEC_TUN: &str = "ipsec0";
/// The connection and CHILD_SA name in the generated swanctl.conf.
const CONNECTION: &str = "cipherbench";

/// The programs the stack needs.
#[derive(Debug, Clone)]
pub struct Tools {
    /// charon.
    pub charon: PathBuf,
    /// swanctl.
    pub swanctl: PathBuf,
}

fn executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// What to do about a charon that cannot load the library under test.
pub const CHARON_REMEDY: &str = "measure --stack strongswan on an OpenSSL 3 library (--stack own runs cipherbench's gateways on this one)";

/// Refuses, before anything starts, a strongSwan stack under a library its charon
/// cannot load (Debian's charon links `libcrypto.so.3`: not an OpenSSL 4). Where
/// charon is not found, nothing: the layer says so when it starts.
pub fn check_libraries(plan: &crate::tunnel::TunnelPlan) -> Result<()> {
    if !plan
        .stacks
        .contains(&cipherbench_model::tunnel::Stack::Strongswan)
    {
        return Ok(());
    }
    let Ok(tools) = find_tools(plan.charon.as_deref()) else {
        return Ok(());
    };
    for library in crate::variant::libraries_of(&plan.variants) {
        library.check_program("strongSwan's charon", &tools.charon, CHARON_REMEDY)?;
    }
    Ok(())
}

/// Finds charon (`explicit`, or the distributions' places) and swanctl (PATH,
/// `/usr/sbin`), refusing with one line that says what to install.
pub fn find_tools(explicit: Option<&Path>) -> Result<Tools> {
    let charon = match explicit {
        Some(p) if executable(p) => p.to_path_buf(),
        Some(p) => bail!(
            "--charon {}: no such executable (strongSwan's IKE daemon, usually /usr/lib/ipsec/charon)",
            p.display()
        ),
        None => CHARON_PATHS
            .iter()
            .map(PathBuf::from)
            .find(|p| executable(p))
            .ok_or_else(|| {
                anyhow!(
                    "--stack strongswan needs strongSwan's charon, found in none of {}: install strongswan-charon, strongswan-swanctl, libcharon-extra-plugins, libstrongswan-standard-plugins and libstrongswan-extra-plugins (`cipherbench doctor` gives the command for this system), or give its path with --charon",
                    CHARON_PATHS.join(", ")
                )
            })?,
    };
    let path = std::env::var_os("PATH").unwrap_or_default();
    let swanctl = std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/local/sbin")])
        .map(|d| d.join("swanctl"))
        .find(|p| executable(p))
        .ok_or_else(|| {
            anyhow!("--stack strongswan needs swanctl (strongSwan's vici client): install strongswan-swanctl (`cipherbench doctor` gives the command for this system)")
        })?;
    Ok(Tools { charon, swanctl })
}

/// `charon --version`, or what went wrong.
pub fn version(tools: &Tools) -> String {
    Spawn::new(&tools.charon)
        .args(["--version"])
        .output(Duration::from_secs(5))
        .map(|o| o.stdout.trim().to_string())
        .unwrap_or_else(|e| format!("unknown ({e:#})"))
}

/// Asks the kernel of the run's sender namespace for an ESP state (a throwaway
/// SA, removed again): one line saying whether this kernel could run IPsec itself.
pub fn kernel_xfrm(names: &Names) -> String {
    let ns = &names.sender_ns;
    let added = topology::command(
        "ip",
        &[
            "-n",
            ns,
            "xfrm",
            "state",
            "add",
            "src",
            topology::UNDERLAY_SENDER,
            "dst",
            topology::UNDERLAY_RECEIVER,
            "proto",
            "esp",
            "spi",
            "0x0cb0cb01",
            "mode",
            "tunnel",
            "enc",
            "cbc(aes)",
            "0x000102030405060708090a0b0c0d0e0f",
            "auth-trunc",
            "hmac(sha256)",
            "0x000102030405060708090a0b0c0d0e0f000102030405060708090a0b0c0d0e0f",
            "128",
        ],
    );
    match added {
        Err(e) => {
            let said = format!("{e:#}");
            // The command's own words, after the quoted command line.
            let why = said.rsplit("): ").next().unwrap_or(&said);
            format!(
                "this kernel has no xfrm ESP (ip xfrm state add: {}): strongSwan runs with kernel-libipsec, ESP in userspace over TUN",
                last_line(why).trim_end_matches('.')
            )
        }
        Ok(_) => {
            let _ = topology::command("ip", &["-n", ns, "xfrm", "state", "flush"]);
            "this kernel has xfrm ESP, but cipherbench measures strongSwan with kernel-libipsec only (userspace ESP over TUN); kernel IPsec is not measured".to_string()
        }
    }
}

/// A log line without the `time_format = %s` stamp.
fn strip_log_time(line: &str) -> &str {
    let t = line.trim();
    match t.split_once(' ') {
        Some((stamp, rest)) if stamp.chars().all(|c| c.is_ascii_digit()) => rest,
        _ => t,
    }
}

fn last_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("")
        .to_string()
}

/// `cipherbench __charon --run-dir DIR [--cpus LIST] -- CHARON`: the process
/// between `ip netns exec` and charon. It gives itself a private `/run` and the
/// CPUs, then becomes charon (same pid, same process group, the supervisor's
/// death signal kept).
pub fn charon_main(run_dir: &Path, cpus: &[usize], program: &[String]) -> Result<()> {
    use std::os::unix::process::CommandExt;
    let (charon, args) = program
        .split_first()
        .context("__charon: no program to run")?;
    sys::private_run_dir(run_dir).context("__charon: a private /run for charon's pid file")?;
    sys::set_affinity(cpus).context("__charon: pinning charon")?;
    let e = std::process::Command::new(charon).args(args).exec();
    Err(anyhow!("__charon: executing {charon}: {e}"))
}

/// One side's files: `dir/strongswan.conf`, `dir/swanctl.conf` (with the PSK,
/// 0600), `dir/run/` (charon's /run), `dir/charon.vici`, `dir/charon.log`.
fn write_files(dir: &Path, backend: Backend, side: &Side, esp: &str, psk_hex: &str) -> Result<()> {
    use std::io::Write;
    std::fs::create_dir_all(dir.join("run"))
        .with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(
        dir.join("strongswan.conf"),
        config::strongswan_conf(backend, dir),
    )?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode_0600()
        .open(dir.join("swanctl.conf"))
        .with_context(|| format!("creating {}/swanctl.conf", dir.display()))?;
    f.write_all(config::swanctl_conf(side, esp, psk_hex).as_bytes())?;
    Ok(())
}

trait Mode0600 {
    fn mode_0600(&mut self) -> &mut Self;
}

impl Mode0600 for std::fs::OpenOptions {
    fn mode_0600(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.mode(0o600)
    }
}

/// One running charon.
pub struct Charon {
    child: Child,
    tools: Tools,
    dir: PathBuf,
    netns: String,
    side: &'static str,
    cpus: Vec<usize>,
    /// The variant it runs under.
    pub variant: Variant,
}

impl Charon {
    /// Writes its files and starts it in `netns`; returns once its vici socket
    /// answers and the connection and PSK are loaded.
    #[allow(clippy::too_many_arguments)]
    fn start(
        program: &Path,
        tools: &Tools,
        dir: PathBuf,
        netns: &str,
        side_name: &'static str,
        side: &Side,
        backend: Backend,
        esp: &str,
        psk_hex: &str,
        cpus: &[usize],
        variant: &Variant,
        mask: Option<&str>,
    ) -> Result<Charon> {
        write_files(&dir, backend, side, esp, psk_hex)?;
        let cpu_list = cpus
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let mut args: Vec<std::ffi::OsString> = vec![
            "netns".into(),
            "exec".into(),
            netns.into(),
            program.into(),
            "__charon".into(),
            "--run-dir".into(),
            dir.join("run").into(),
        ];
        if !cpu_list.is_empty() {
            args.extend(["--cpus".into(), cpu_list.into()]);
        }
        args.extend(["--".into(), tools.charon.clone().into()]);
        let child = Spawn::new("ip")
            .args(&args)
            .env("STRONGSWAN_CONF", dir.join("strongswan.conf"))
            .ia32cap(mask)
            .envs(variant.environment())
            .loader(variant.library.loader())
            .start()
            .with_context(|| format!("starting the {side_name} charon"))?;
        let mut charon = Charon {
            child,
            tools: tools.clone(),
            dir,
            netns: netns.to_string(),
            side: side_name,
            cpus: cpus.to_vec(),
            variant: variant.clone(),
        };
        charon.wait_ready()?;
        let file = charon.dir.join("swanctl.conf");
        let file = file.to_string_lossy().into_owned();
        charon
            .swanctl(&["--load-conns", "--file", &file])
            .with_context(|| format!("loading the {side_name} charon's connection"))?;
        charon
            .swanctl(&["--load-creds", "--noprompt", "--file", &file])
            .with_context(|| format!("loading the {side_name} charon's PSK"))?;
        Ok(charon)
    }

    fn uri(&self) -> String {
        format!("unix://{}", self.dir.join("charon.vici").display())
    }

    /// Runs swanctl against this charon; its stdout, or an error with its last line.
    fn swanctl(&self, args: &[&str]) -> Result<String> {
        let uri = self.uri();
        let out = Spawn::new(&self.tools.swanctl)
            .args(args)
            .args(["--uri", uri.as_str()])
            .env("STRONGSWAN_CONF", self.dir.join("strongswan.conf"))
            .env("SWANCTL_DIR", &self.dir)
            .output(CHARON_TIMEOUT + Duration::from_secs(IKE_TIMEOUT_SECS))?;
        if !out.status.success() {
            let said = format!("{}\n{}", out.stdout, out.stderr);
            bail!("swanctl {}: {}", args.join(" "), last_line(&said));
        }
        Ok(out.stdout)
    }

    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + CHARON_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "the {} charon exited at start ({status}): {}",
                    self.side,
                    self.why()
                );
            }
            if self.dir.join("charon.vici").exists() && self.swanctl(&["--stats"]).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "the {} charon did not open its vici socket within {CHARON_TIMEOUT:?}: {}",
                    self.side,
                    self.why()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What charon said that explains a failure: the first and the last
    /// error-looking lines of its log (the cause and the outcome), or its last
    /// line, else its stderr.
    pub fn why(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("charon.log")).unwrap_or_default();
        let errors: Vec<&str> = log
            .lines()
            .filter(|l| {
                let l = l.to_ascii_lowercase();
                [
                    "fail", "error", "unable", "critical", "unmet", "no ", "not ",
                ]
                .iter()
                .any(|w| l.contains(w))
            })
            .collect();
        let mut interesting: Vec<&str> = errors.first().into_iter().copied().collect();
        if let Some(last) = errors.last().filter(|_| errors.len() > 1) {
            interesting.push(last);
        }
        if interesting.is_empty() {
            interesting.extend(log.lines().next_back());
        }
        match interesting.is_empty() {
            false => format!(
                "charon.log: {}",
                interesting
                    .iter()
                    .map(|l| strip_log_time(l))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            true => {
                let err = self.child.stderr_tail();
                if err.trim().is_empty() {
                    "no log, no output".to_string()
                } else {
                    last_line(&err)
                }
            }
        }
    }

    /// The pid (charon's own: `ip netns exec` and `__charon` exec into it).
    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// Fails if charon has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "the {} charon exited during the run ({status}): {}",
                self.side,
                self.why()
            );
        }
        Ok(())
    }

    fn child_sa(&self) -> Result<Option<ChildSa>> {
        Ok(config::parse_list_sas(&self.swanctl(&["--list-sas"])?))
    }

    fn snapshot(&mut self) -> Result<Snapshot> {
        // A dead charon is named as such, not as a vici socket that refuses.
        self.check_alive()?;
        let sa = self
            .child_sa()?
            .with_context(|| format!("the {} charon has no CHILD_SA installed", self.side))?;
        let pid = self.pid();
        let threads = thread_times(pid);
        Ok(Snapshot {
            monotonic_ns: crate::host::monotonic_ns(),
            // /proc/PID/schedstat is the main thread's alone: the process is the
            // sum of its threads (charon's pool threads live as long as it does).
            cpu_ns: threads.iter().map(|t| t.1).sum(),
            threads,
            sa,
            veth: link_counters(&self.netns, topology::VETH)?,
            tun: link_counters(&self.netns, IPSEC_TUN)?,
            socket_drops: socket_drops(pid),
            udp_rcvbuf_errors: topology::udp_rcvbuf_errors(pid),
        })
    }

    fn stop(mut self) -> Result<()> {
        self.child.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
        Ok(())
    }
}

/// Per thread of `pid`: (`charon/TID`, CPU nanoseconds).
fn thread_times(pid: u32) -> Vec<(String, u64)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out: Vec<(String, u64)> = dir
        .flatten()
        .filter_map(|e| {
            let tid = e.file_name().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(e.path().join("schedstat")).ok()?;
            let ns = text.split_whitespace().next()?.parse().ok()?;
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            Some((format!("{}/{tid}", comm.trim()), ns))
        })
        .collect();
    out.sort();
    out
}

/// One link's counters from `ip -s -j link show`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkCounters {
    /// Transmitted packets.
    pub tx_packets: u64,
    /// Transmitted bytes (for a veth, Ethernet frames).
    pub tx_bytes: u64,
    /// Dropped on transmit (for a TUN device: not read in time).
    pub tx_dropped: u64,
    /// Received packets.
    pub rx_packets: u64,
    /// Received bytes.
    pub rx_bytes: u64,
    /// Dropped on receive.
    pub rx_dropped: u64,
}

/// Parses `ip -s -j link show dev X`.
pub fn parse_link_counters(json: &str) -> Option<LinkCounters> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let s = &v.as_array()?.first()?["stats64"];
    let n = |dir: &str, what: &str| s[dir][what].as_u64();
    Some(LinkCounters {
        tx_packets: n("tx", "packets")?,
        tx_bytes: n("tx", "bytes")?,
        tx_dropped: n("tx", "dropped")?,
        rx_packets: n("rx", "packets")?,
        rx_bytes: n("rx", "bytes")?,
        rx_dropped: n("rx", "dropped")?,
    })
}

fn link_counters(netns: &str, device: &str) -> Result<LinkCounters> {
    let out = topology::command(
        "ip",
        &["-n", netns, "-s", "-j", "link", "show", "dev", device],
    )?;
    parse_link_counters(&out).with_context(|| format!("reading {device}'s counters in {netns}"))
}

/// The `drops` of the IKE and NAT-T sockets (local ports 500 and 4500) in
/// `/proc/PID/net/udp` and `udp6`: datagrams the kernel dropped at charon's full
/// receive buffers.
pub fn parse_udp_socket_drops(table: &str) -> u64 {
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let port = f.get(1)?.rsplit(':').next()?;
            let port = u16::from_str_radix(port, 16).ok()?;
            (port == 500 || port == 4500)
                .then(|| f.last()?.parse::<u64>().ok())
                .flatten()
        })
        .sum()
}

fn socket_drops(pid: u32) -> u64 {
    ["udp", "udp6"]
        .iter()
        .filter_map(|t| std::fs::read_to_string(format!("/proc/{pid}/net/{t}")).ok())
        .map(|t| parse_udp_socket_drops(&t))
        .sum()
}

/// A charon's counters at one moment.
#[derive(Debug, Clone)]
struct Snapshot {
    monotonic_ns: u64,
    cpu_ns: u64,
    threads: Vec<(String, u64)>,
    sa: ChildSa,
    veth: LinkCounters,
    tun: LinkCounters,
    socket_drops: u64,
    udp_rcvbuf_errors: u64,
}

/// Ethernet (14) + IPv4 (20) + UDP (8) around each ESP payload in a veth's bytes.
const FRAME_OVERHEAD: u64 = analysis::ETHERNET_IPV4_UDP;

/// One charon's activity between two snapshots, in the own gateways' terms: the
/// CHILD_SA's counters are what it sealed and opened (inner packets, as libipsec
/// counts them), the veth's what crossed the underlay (ESP-in-UDP, and a few
/// packets of IKE, ARP and neighbour discovery), its TUN device's what it read and
/// wrote. charon counts no ESP drops by
/// reason, so `drops` stays empty and datagrams are not accounted one by one.
fn charon_run(
    side: &str,
    variant: &str,
    cpus: &[usize],
    before: &Snapshot,
    after: &Snapshot,
) -> GatewayRun {
    let d = |a: u64, b: u64| b.saturating_sub(a);
    let wall = d(before.monotonic_ns, after.monotonic_ns).max(1) as f64;
    let pinned = (cpus.len() == 1).then(|| cpus[0]);
    let threads = after
        .threads
        .iter()
        .map(|(name, ns)| {
            let was = before
                .threads
                .iter()
                .find(|(n, _)| n == name)
                .map_or(0, |t| t.1);
            ThreadLoad {
                name: name.clone(),
                cpu_cores_used: d(was, *ns) as f64 / wall,
                pinned_cpu: pinned,
            }
        })
        .filter(|t| t.cpu_cores_used > 0.0)
        .collect();
    let (v0, v1, t0, t1) = (&before.veth, &after.veth, &before.tun, &after.tun);
    let esp_packets_sent = d(v0.tx_packets, v1.tx_packets);
    let esp_packets_received = d(v0.rx_packets, v1.rx_packets);
    GatewayRun {
        side: side.to_string(),
        host: None,
        variant: variant.to_string(),
        sealed_packets: d(before.sa.out_packets, after.sa.out_packets),
        sealed_bytes: d(before.sa.out_bytes, after.sa.out_bytes),
        seal_refused: 0,
        esp_packets_sent,
        esp_bytes_sent: d(v0.tx_bytes, v1.tx_bytes)
            .saturating_sub(FRAME_OVERHEAD * esp_packets_sent),
        esp_packets_received,
        esp_bytes_received: d(v0.rx_bytes, v1.rx_bytes)
            .saturating_sub(FRAME_OVERHEAD * esp_packets_received),
        opened_packets: d(before.sa.in_packets, after.sa.in_packets),
        opened_bytes: d(before.sa.in_bytes, after.sa.in_bytes),
        drops: Default::default(),
        nat_keepalives: 0,
        non_esp: 0,
        socket_drops: d(before.socket_drops, after.socket_drops),
        namespace_udp_drops: d(before.udp_rcvbuf_errors, after.udp_rcvbuf_errors),
        tun_queue_drops: d(t0.tx_dropped, t1.tx_dropped),
        link_drops: d(t0.rx_dropped, t1.rx_dropped)
            + d(v0.tx_dropped, v1.tx_dropped)
            + d(v0.rx_dropped, v1.rx_dropped),
        io_errors: 0,
        tun_reads: d(t0.tx_packets, t1.tx_packets),
        tun_writes: d(t0.rx_packets, t1.rx_packets),
        seconds: wall / 1e9,
        cpu_cores_used: d(before.cpu_ns, after.cpu_ns) as f64 / wall,
        threads,
        split: None,
    }
}

/// What a pair of charons is started with.
#[derive(Debug, Clone)]
pub struct PairOptions {
    /// The cipherbench executable (runs `__charon`).
    pub program: PathBuf,
    /// charon and swanctl.
    pub tools: Tools,
    /// The crypto backend.
    pub backend: Backend,
    /// The transform (not `null`).
    pub transform: Transform,
    /// Where this pair's files go (removed when it stops).
    pub dir: PathBuf,
    /// Cores of the sender's charon (empty: not pinned).
    pub sender_cpus: Vec<usize>,
    /// Cores of the receiver's.
    pub receiver_cpus: Vec<usize>,
    /// The PSKs, hex (the same on both sides, unless a test wants IKE to fail).
    pub psk_hex: (String, String),
}

/// Two charons with an installed CHILD_SA between them.
pub struct CharonPair {
    /// The iperf3 client's side (initiator).
    pub sender: Charon,
    /// The server's side (responder).
    pub receiver: Charon,
    /// The negotiated ESP algorithms.
    pub negotiated: String,
    /// The plugins that registered them.
    pub served_by: Vec<String>,
    /// IKE's time to the installed CHILD_SA.
    pub ike: Duration,
    dir: PathBuf,
}

impl CharonPair {
    /// Starts the receiver's charon, then the sender's, and has the sender
    /// initiate; fails with one line if either does not come up or IKE fails.
    pub fn start(
        names: &Names,
        options: &PairOptions,
        sender_variant: (&Variant, Option<&str>),
        receiver_variant: (&Variant, Option<&str>),
    ) -> Result<CharonPair> {
        let esp = config::esp_proposal(options.transform).with_context(|| {
            format!(
                "strongSwan has no {} ESP transform (ESP needs encryption or integrity)",
                options.transform.name()
            )
        })?;
        let receiver = Charon::start(
            &options.program,
            &options.tools,
            options.dir.join("receiver"),
            &names.receiver_ns,
            "receiver",
            &Side {
                local: topology::UNDERLAY_RECEIVER.into(),
                remote: topology::UNDERLAY_SENDER.into(),
                inner_local: topology::INNER_RECEIVER.into(),
                inner_remote: topology::INNER_SENDER.into(),
            },
            options.backend,
            esp,
            &options.psk_hex.1,
            &options.receiver_cpus,
            receiver_variant.0,
            receiver_variant.1,
        )?;
        let sender = Charon::start(
            &options.program,
            &options.tools,
            options.dir.join("sender"),
            &names.sender_ns,
            "sender",
            &Side {
                local: topology::UNDERLAY_SENDER.into(),
                remote: topology::UNDERLAY_RECEIVER.into(),
                inner_local: topology::INNER_SENDER.into(),
                inner_remote: topology::INNER_RECEIVER.into(),
            },
            options.backend,
            esp,
            &options.psk_hex.0,
            &options.sender_cpus,
            sender_variant.0,
            sender_variant.1,
        )?;
        let started = Instant::now();
        let timeout = IKE_TIMEOUT_SECS.to_string();
        if let Err(e) =
            sender.swanctl(&["--initiate", "--child", CONNECTION, "--timeout", &timeout])
        {
            bail!(
                "IKE between the two charons failed ({} {}): {e:#}; sender {}; receiver {}",
                config::IKE_PROPOSAL,
                esp,
                sender.why(),
                receiver.why()
            );
        }
        let ike = started.elapsed();
        let sa = sender
            .child_sa()?
            .context("IKE completed but no CHILD_SA is installed on the sender")?;
        let algs = sender.swanctl(&["--list-algs"]).unwrap_or_default();
        let served_by = config::served_by(&algs, &config::algorithm_names(&sa.algorithms));
        Ok(CharonPair {
            sender,
            receiver,
            negotiated: sa.algorithms,
            served_by,
            ike,
            dir: options.dir.clone(),
        })
    }

    /// Fails if either charon has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        self.sender.check_alive()?;
        self.receiver.check_alive()
    }

    /// Stops both and removes their files.
    pub fn stop(self) -> Result<()> {
        let CharonPair {
            sender,
            receiver,
            dir,
            ..
        } = self;
        sender.stop()?;
        receiver.stop()?;
        let _ = std::fs::remove_dir_all(dir);
        Ok(())
    }
}

impl Drop for Charon {
    fn drop(&mut self) {
        // Stopped already by `stop`, or now on an error path: the PSK goes too.
        self.child.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One iperf3 run through the charons, with their counters taken just before and
/// just after it.
pub fn measured_run(
    client: &iperf::ClientRun,
    pair: &mut CharonPair,
    underlay_rate_bits_per_sec: Option<u64>,
) -> Result<TunnelRun> {
    let (s0, r0) = (pair.sender.snapshot()?, pair.receiver.snapshot()?);
    // The noise window watches the charons' CPUs (every CPU when they are not
    // pinned); the charons and iperf3 run under this process.
    let mut cpus: Vec<usize> = pair
        .sender
        .cpus
        .iter()
        .chain(&pair.receiver.cpus)
        .copied()
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    if cpus.is_empty() {
        cpus = crate::host::allowed_cpus();
    }
    let window = crate::machine::noise::Window::open(&cpus, &[std::process::id()]);
    // The mid-run `ss` keeps off the charons' and iperf3's CPUs where it can.
    let placed: Vec<usize> = cpus
        .iter()
        .copied()
        .chain(client.affinity.iter().flat_map(|&(c, s)| [c, s]))
        .collect();
    let (iperf, tcp) =
        client.run_sampled(|| pair.check_alive(), &crate::tunnel::spare_cpus(&placed))?;
    let noise = window.close();
    let (s1, r1) = (pair.sender.snapshot()?, pair.receiver.snapshot()?);
    let sender = charon_run(
        "sender",
        &pair.sender.variant.name(),
        &pair.sender.cpus,
        &s0,
        &s1,
    );
    let receiver = charon_run(
        "receiver",
        &pair.receiver.variant.name(),
        &pair.receiver.cpus,
        &r0,
        &r1,
    );
    let mut run = analysis::judged_run(
        iperf,
        sender,
        receiver,
        underlay_rate_bits_per_sec,
        LIBIPSEC_MTU,
        noise,
    );
    run.tcp = tcp.map(Box::new);
    Ok(run)
}

/// [`combinations`] grouped per backend and transform: the variants measured in
/// interleaved rounds ([`super::rounds`]).
fn groups(plan: &TunnelPlan) -> Vec<(Backend, Transform, Vec<Variant>)> {
    let mut out: Vec<(Backend, Transform, Vec<Variant>)> = Vec::new();
    for (b, t, v) in combinations(plan) {
        match out.last_mut() {
            Some((lb, lt, vs)) if *lb == b && *lt == t => vs.push(v),
            _ => out.push((b, t, vec![v])),
        }
    }
    out
}

/// strongSwan's units: a back end and a transform with their variants, measured in
/// interleaved rounds through fresh charon pairs. As with the own gateways, a
/// half-measured transform is measured again whole.
impl campaign::Units for CharonStand<'_> {
    type Unit = (Backend, Transform, Vec<Variant>);

    fn done(&self, (backend, transform, variants): &Self::Unit) -> bool {
        let points = self
            .stack
            .points
            .iter()
            .filter(|p| p.backend == backend.name())
            .map(|p| &p.point);
        super::transform_done(self.plan, points, *transform, variants)
    }

    fn skip(&mut self, (_, _, variants): &Self::Unit) {
        let n = variants.len() * self.plan.protocols.len();
        self.session.progress.skip(n);
    }

    fn forget(&mut self, (backend, transform, _): &Self::Unit) {
        self.stack
            .points
            .retain(|p| !(p.backend == backend.name() && p.point.transform == transform.name()));
    }

    fn measure(&mut self, (backend, transform, variants): &Self::Unit) -> Result<()> {
        self.backend = *backend;
        self.transform = *transform;
        self.variants.clone_from(variants);
        self.negotiated = vec![None; variants.len()];
        let (plan, underlay_tcp) = (self.plan, self.underlay_tcp);
        let mut sequence = self.sequence;
        let outcome =
            super::rounds::interleaved(plan, variants.len(), self, underlay_tcp, &mut sequence);
        self.sequence = sequence;
        outcome
    }
}

/// One backend and transform through a pair of charons, for
/// [`super::rounds::interleaved`]: a fresh pair (and PSK) per variant change.
struct CharonStand<'a> {
    plan: &'a TunnelPlan,
    lab: &'a Lab,
    session: &'a mut Session,
    results: &'a TunnelResults,
    stack: &'a mut StrongswanResults,
    baseline: &'a Baseline,
    stand_ins: &'a std::collections::BTreeMap<String, VariantRecord>,
    tools: &'a Tools,
    program: &'a Path,
    /// Pairs started so far: each gets its own directory.
    starts: usize,
    affinity: Option<(usize, usize)>,
    underlay_rate: Option<u64>,
    underlay_tcp: Option<f64>,
    /// The back end and transform being measured, and their variants.
    backend: Backend,
    transform: Transform,
    variants: Vec<Variant>,
    /// Per variant, what its latest pair negotiated: (algorithms, served by, IKE
    /// nanoseconds).
    negotiated: Vec<Option<(String, Vec<String>, u64)>>,
    /// The next run's place in the measuring order.
    sequence: usize,
}

impl super::rounds::Stand for CharonStand<'_> {
    type Pair = CharonPair;
    type Run = TunnelRun;

    fn start(&mut self, v: usize) -> Result<CharonPair> {
        let (plan, names) = (self.plan, self.lab.names());
        let variant = &self.variants[v];
        let (sender_variant, receiver_variant) = &super::side_variants(plan.variant_side, variant);
        let (sender_mask, receiver_mask) = (
            self.baseline.mask(sender_variant),
            self.baseline.mask(receiver_variant),
        );
        let psk = random_hex(32)?;
        let pinning = &self.results.config.pinning;
        let options = PairOptions {
            program: self.program.to_path_buf(),
            tools: self.tools.clone(),
            backend: self.backend,
            transform: self.transform,
            dir: names.dir.join(format!("strongswan-{}", self.starts)),
            sender_cpus: pinning.sender_gateway.clone(),
            receiver_cpus: pinning.receiver_gateway.clone(),
            psk_hex: (psk.clone(), psk),
        };
        self.starts += 1;
        let pair = CharonPair::start(
            names,
            &options,
            (sender_variant, sender_mask.as_deref()),
            (receiver_variant, receiver_mask.as_deref()),
        )?;
        if self.backend.takes_variants() {
            // The openssl backend is the library under test: checked from the
            // charons' own mappings, as nginx's are.
            for (side, charon) in [("sender", &pair.sender), ("receiver", &pair.receiver)] {
                let library = &charon.variant.library;
                let loaded = crate::library::of_process(charon.pid())?;
                crate::library::note(
                    &mut self.session.record.environment,
                    library.part(
                        "tunnel",
                        &format!("strongSwan charon ({side})"),
                        &loaded,
                        "/proc/<pid>/maps",
                        true,
                    ),
                );
                library.check(
                    &format!("strongSwan charon ({side}, pid {})", charon.pid()),
                    &loaded,
                )?;
            }
            note_variant(
                &mut self.stack.variants,
                self.stand_ins,
                self.baseline,
                &pair,
                self.session,
            );
        }
        self.negotiated[v] = Some((
            pair.negotiated.clone(),
            pair.served_by.clone(),
            pair.ike.as_nanos() as u64,
        ));
        Ok(pair)
    }

    fn stop(&mut self, pair: CharonPair) -> Result<()> {
        pair.stop()
    }

    fn run(
        &mut self,
        pair: &mut CharonPair,
        protocol: Protocol,
        seconds: u64,
        rate: Option<f64>,
    ) -> Result<TunnelRun> {
        // The same iperf3 command as through our gateways, -P included.
        let client = super::iperf_client(
            self.plan,
            self.lab,
            self.affinity,
            topology::INNER_RECEIVER,
            protocol,
            seconds,
            rate,
        );
        measured_run(&client, pair, self.underlay_rate)
    }

    fn point(
        &mut self,
        v: usize,
        protocol: Protocol,
        search: Option<cipherbench_model::tunnel::UdpSearch>,
        runs: Vec<TunnelRun>,
    ) -> Result<()> {
        let point = super::tunnel_point(
            self.transform,
            &self.variants[v],
            self.plan.variant_side,
            protocol,
            search,
            runs,
            self.underlay_tcp,
        );
        // What the variant's last pair negotiated (every pair of a transform asks
        // for the same proposal), and its IKE time.
        let (negotiated, served_by, ike_ns) = self.negotiated[v].clone().unwrap_or_default();
        let point = StrongswanPoint {
            backend: self.backend.name().to_string(),
            plugins: self.backend.plugins(),
            esp_proposal: config::esp_proposal(self.transform)
                .unwrap_or_default()
                .to_string(),
            negotiated,
            served_by,
            ike_ns,
            point,
        };
        warn_about(&point, self.session);
        self.session.progress.point(&format!(
            "strongswan/{} {} {} {}: {}",
            point.backend,
            point.point.transform,
            point.point.variant,
            protocol.as_str(),
            cipherbench_model::units::format_bits_per_sec(
                point.point.throughput_bits_per_sec.median / 8.0
            ),
        ));
        self.stack.points.push(point);
        let mut snapshot = self.results.clone();
        snapshot.strongswan = Some(self.stack.clone());
        self.session.record.tunnel = Some(snapshot);
        self.session.save()
    }
}

/// What strongSwan measures: backend x transform x variant. Only the `openssl`
/// backend takes the variants (the others never read `OPENSSL_ia32cap`: they run
/// accel alone); `null` is skipped (strongSwan refuses it).
pub fn combinations(plan: &TunnelPlan) -> Vec<(Backend, Transform, Variant)> {
    let mut out = Vec::new();
    for &b in &plan.strongswan_backends {
        for &t in &plan.transforms {
            if config::esp_proposal(t).is_none() {
                continue;
            }
            if b.takes_variants() {
                for v in &plan.variants {
                    out.push((b, t, v.clone()));
                }
            } else {
                out.push((b, t, Variant::accel()));
            }
        }
    }
    out
}

fn random_hex(bytes: usize) -> Result<String> {
    let mut buf = vec![0u8; bytes];
    cipherbench_crypto::random_bytes(&mut buf).context("drawing a PSK")?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// Measures strongSwan into `results.strongswan`, saving after every point.
pub fn measure(
    plan: &TunnelPlan,
    lab: &Lab,
    session: &mut Session,
    results: &mut TunnelResults,
    baseline: &Baseline,
    underlay_tcp: Option<f64>,
) -> Result<()> {
    let names = lab.names();
    let tools = find_tools(plan.charon.as_deref())?;
    let program = std::env::current_exe().context("finding cipherbench's own executable")?;
    let mut stack = results
        .strongswan
        .take()
        .unwrap_or_else(|| StrongswanResults {
            version: version(&tools),
            esp_path: format!("kernel-libipsec (userspace ESP over TUN, MTU {LIBIPSEC_MTU})"),
            kernel_xfrm: kernel_xfrm(names),
            points: Vec::new(),
            variants: Vec::new(),
        });
    let outcome = measure_into(
        plan,
        lab,
        session,
        results,
        &mut stack,
        baseline,
        underlay_tcp,
        &tools,
        &program,
    );
    results.strongswan = Some(stack);
    session.record.tunnel = Some(results.clone());
    session.save()?;
    outcome
}

#[allow(clippy::too_many_arguments)]
fn measure_into(
    plan: &TunnelPlan,
    lab: &Lab,
    session: &mut Session,
    results: &TunnelResults,
    stack: &mut StrongswanResults,
    baseline: &Baseline,
    underlay_tcp: Option<f64>,
    tools: &Tools,
    program: &Path,
) -> Result<()> {
    let pinning = results.config.pinning.clone();
    let affinity = pinning.iperf3_client.zip(pinning.iperf3_server);
    let underlay_rate = plan.underlay_rate.as_ref().map(|r| r.1);
    // The variants reach charon's OpenSSL through the environment alone: judged
    // by effect in probe children given charon's environment, then checked against
    // the environment of the charons themselves.
    let life = campaign::Variants::with_baseline("tunnel", &plan.variants, baseline.clone());
    let stand_ins = if plan.strongswan_backends.contains(&Backend::Openssl) {
        crate::variant::stand_in_records(&plan.variants, baseline, "charon")
    } else {
        Default::default()
    };
    let sequence = super::next_sequence(
        results
            .points
            .iter()
            .chain(stack.points.iter().map(|p| &p.point)),
    );
    let mut stand = CharonStand {
        plan,
        lab,
        session: &mut *session,
        results,
        stack: &mut *stack,
        baseline,
        stand_ins: &stand_ins,
        tools,
        program,
        starts: 0,
        affinity,
        underlay_rate,
        underlay_tcp,
        backend: Backend::Openssl,
        transform: Transform::Null,
        variants: Vec::new(),
        negotiated: Vec::new(),
        sequence,
    };
    campaign::each_unit(&groups(plan), &mut stand)?;
    super::note_implementations(&life, plan, &mut stack.variants);
    Ok(())
}

/// Records a variant the first time a pair of charons runs it: the stand-in's
/// judgement checked against the charons' own environment.
fn note_variant(
    known: &mut Vec<VariantRecord>,
    stand_ins: &std::collections::BTreeMap<String, VariantRecord>,
    baseline: &Baseline,
    pair: &CharonPair,
    session: &mut Session,
) {
    let variant = &pair.sender.variant;
    if known.iter().any(|v| v.name == variant.name()) {
        return;
    }
    let Some(stand_in) = stand_ins.get(&variant.name()) else {
        return;
    };
    let mask = baseline.mask(variant);
    let mut pids = vec![pair.sender.pid()];
    if pair.receiver.variant == *variant {
        pids.push(pair.receiver.pid());
    }
    let check = crate::variant::check_environ("charon", &pids, mask.as_deref());
    let record = crate::variant::with_check(stand_in, check);
    campaign::warn_not_effective(
        &mut session.record,
        "tunnel",
        &record,
        "in strongSwan's charon",
    );
    known.push(record);
}

fn warn_about(p: &StrongswanPoint, session: &mut Session) {
    let point: &TunnelPoint = &p.point;
    let what = format!(
        "strongswan/{} {} {} {}",
        p.backend,
        point.transform,
        point.variant,
        point.protocol.as_str()
    );
    for run in &point.runs {
        if !run.byte_check.ok {
            session.record.warn(
                "tunnel",
                "byte_mismatch",
                format!(
                    "{what}: the receiving charon's CHILD_SA opened {} inner bytes, outside the {}..{} that iperf3's {} payload bytes allow",
                    run.byte_check.opened_bytes,
                    run.byte_check.expected_min,
                    run.byte_check.expected_max,
                    run.byte_check.iperf_bytes
                ),
            );
        }
    }
    if let Some(search) = &point.search {
        if search.outcome == cipherbench_model::tunnel::SearchOutcome::SenderLimited {
            session.record.warn(
                "tunnel",
                "load_generator_saturated",
                format!("{what}: the iperf3 client could not send fast enough to reach the target loss: the figure is the load generator's limit, not the tunnel's"),
            );
        }
    }
    if point.interval_bits_per_sec.high_spread() {
        session.record.warn(
            "tunnel",
            "high_spread",
            format!(
                "{what}: per-second throughput spread ±{:.1} %",
                point.interval_bits_per_sec.rel_spread * 100.0
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_link_counters_with_bytes_and_packets() {
        let json = r#"[{"ifname":"ipsec0","stats64":{"rx":{"bytes":10,"packets":2,"dropped":3},"tx":{"bytes":40,"packets":5,"dropped":7}}}]"#;
        assert_eq!(
            parse_link_counters(json),
            Some(LinkCounters {
                tx_packets: 5,
                tx_bytes: 40,
                tx_dropped: 7,
                rx_packets: 2,
                rx_bytes: 10,
                rx_dropped: 3
            })
        );
        assert_eq!(parse_link_counters("[]"), None);
    }

    #[test]
    fn counts_drops_on_the_ike_and_nat_t_sockets_only() {
        let udp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
  1: 00000000:1194 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1 2 0000000000000000 17\n\
  2: 00000000:01F4 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1 2 0000000000000000 3\n\
  3: 00000000:1451 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1 2 0000000000000000 1000\n";
        assert_eq!(parse_udp_socket_drops(udp), 20);
        assert_eq!(parse_udp_socket_drops(""), 0);
    }

    fn snapshot(sa_out: (u64, u64), sa_in: (u64, u64), cpu_ns: u64, at_ns: u64) -> Snapshot {
        Snapshot {
            monotonic_ns: at_ns,
            cpu_ns,
            threads: vec![
                ("charon/7".into(), cpu_ns / 2),
                ("charon/8".into(), cpu_ns / 2),
            ],
            sa: ChildSa {
                algorithms: "ESP:AES_GCM_16-128".into(),
                out_bytes: sa_out.0,
                out_packets: sa_out.1,
                in_bytes: sa_in.0,
                in_packets: sa_in.1,
            },
            veth: LinkCounters {
                tx_packets: sa_out.1,
                tx_bytes: sa_out.0 + 100 * sa_out.1,
                ..LinkCounters::default()
            },
            tun: LinkCounters::default(),
            socket_drops: 0,
            udp_rcvbuf_errors: 0,
        }
    }

    #[test]
    fn a_charons_run_is_the_difference_of_its_snapshots() {
        let before = snapshot((1000, 1), (500, 1), 1_000_000_000, 0);
        let after = snapshot(
            (1_401_000, 1001),
            (700_500, 501),
            1_500_000_000,
            1_000_000_000,
        );
        let g = charon_run("sender", "accel", &[0], &before, &after);
        assert_eq!((g.sealed_packets, g.sealed_bytes), (1000, 1_400_000));
        assert_eq!((g.opened_packets, g.opened_bytes), (500, 700_000));
        assert_eq!(g.esp_packets_sent, 1000);
        // Frames less Ethernet, IPv4 and UDP headers: the ESP payload.
        assert_eq!(g.esp_bytes_sent, 1_400_000 + 100 * 1000 - 42 * 1000);
        assert!((g.cpu_cores_used - 0.5).abs() < 1e-9);
        assert_eq!(g.threads.len(), 2);
        assert!(g.threads.iter().all(|t| t.pinned_cpu == Some(0)));
        assert!(g.drops.is_empty());
    }
}
