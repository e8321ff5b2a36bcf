//! iperf3: the command lines we run and the parser of their `-J` output.
//!
//! [`parse`] is a pure function of the JSON text (tested on captured fixtures); the
//! rest starts iperf3 in a namespace through the supervisor. iperf3 exits 0 even
//! when a test fails under `-J` and puts the reason in `error`, so the parser, not
//! the exit status, decides. The server runs with `-J` too, so that the client's
//! `--get-server-output` carries the server's per-interval figures as JSON.

use crate::interrupt;
use crate::supervisor::{wait_until, Child, Line, Spawn};
use anyhow::{anyhow, Context, Result};
use cipherbench_model::tunnel::{IperfRun, Protocol, TcpSample};
use serde_json::Value;
use std::time::{Duration, Instant};

/// Why iperf3's output could not be used.
#[derive(Debug, thiserror::Error)]
pub enum IperfError {
    /// Not JSON.
    #[error("iperf3 did not print JSON: {0}")]
    NotJson(serde_json::Error),
    /// iperf3 reported a failure.
    #[error("iperf3 failed: {0}")]
    Reported(String),
    /// A field we need is missing.
    #[error("iperf3's JSON has no {0}")]
    Missing(&'static str),
    /// The client did not end this long after its test's end.
    #[error("iperf3 did not finish within {0} s of its test's end; it was stopped")]
    Hung(u64),
}

// Not `#[from]`: that would also make the library's error the source, and a chain
// printed with its causes (`{:#}`) would say the library's message twice.
impl From<serde_json::Error> for IperfError {
    fn from(e: serde_json::Error) -> Self {
        IperfError::NotJson(e)
    }
}

fn num(v: &Value, path: &[&str]) -> Option<f64> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_f64()
}

fn int(v: &Value, path: &[&str]) -> Option<u64> {
    let n = num(v, path)?;
    (n >= 0.0).then_some(n as u64)
}

/// Sums a field over the `sum` of every interval (`include_omitted` or not).
fn over_intervals(
    intervals: Option<&Value>,
    field: &str,
    include_omitted: bool,
) -> Option<Vec<f64>> {
    let list = intervals?.as_array()?;
    Some(
        list.iter()
            .filter(|i| include_omitted || !i["sum"]["omitted"].as_bool().unwrap_or(false))
            .filter_map(|i| i["sum"][field].as_f64())
            .collect(),
    )
}

/// The measured rates of the intervals, one per interval of about the reporting
/// length. The server ends its last interval when the client's test ends, a moment
/// after its last full one: that sliver (tens of µs to a few ms) has a rate of
/// whatever arrived in it, 0.25 Gbit/s in a run of 5 on loopback, and as a sample of
/// the run's spread it would widen every interval drawn from the run; its bytes stay
/// in the totals.
fn interval_rates(intervals: Option<&Value>) -> Option<Vec<f64>> {
    let list = intervals?.as_array()?;
    let measured: Vec<&Value> = list
        .iter()
        .map(|i| &i["sum"])
        .filter(|sum| !sum["omitted"].as_bool().unwrap_or(false))
        .collect();
    let longest = measured
        .iter()
        .filter_map(|sum| sum["seconds"].as_f64())
        .fold(0.0, f64::max);
    Some(
        measured
            .iter()
            .filter(|sum| sum["seconds"].as_f64().is_none_or(|t| t >= longest / 2.0))
            .filter_map(|sum| sum["bits_per_second"].as_f64())
            .collect(),
    )
}

/// Parses an iperf3 client's `-J` output (with `--get-server-output`).
pub fn parse(json: &str, command: Vec<String>) -> Result<IperfRun, IperfError> {
    let v: Value = serde_json::from_str(json)?;
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        return Err(IperfError::Reported(e.to_string()));
    }
    let test = &v["start"]["test_start"];
    let protocol = match test["protocol"].as_str() {
        Some("TCP") => Protocol::Tcp,
        Some("UDP") => Protocol::Udp,
        _ => return Err(IperfError::Missing("start.test_start.protocol")),
    };
    let end = &v["end"];
    let sent = &end["sum_sent"];
    let received = &end["sum_received"];
    let sent_bytes = int(sent, &["bytes"]).ok_or(IperfError::Missing("end.sum_sent.bytes"))?;
    let received_bytes =
        int(received, &["bytes"]).ok_or(IperfError::Missing("end.sum_received.bytes"))?;
    let server = v.get("server_output_json");
    let server_intervals = server.and_then(|s| s.get("intervals"));
    let client_intervals = v.get("intervals");
    let interval_bits_per_sec = interval_rates(server_intervals)
        // Without the server's output, TCP's client-side rates are the next best
        // (flow control keeps them close); UDP's would only show the offered rate.
        .or_else(|| match protocol {
            Protocol::Tcp => interval_rates(client_intervals),
            Protocol::Udp => None,
        })
        .unwrap_or_default();
    let total = |intervals: Option<&Value>, fallback: u64| {
        over_intervals(intervals, "bytes", true)
            .filter(|b| !b.is_empty())
            .map(|b| b.iter().sum::<f64>() as u64)
            .unwrap_or(fallback)
    };
    let udp_stream = |field: &str| -> Option<u64> {
        end["streams"]
            .as_array()?
            .iter()
            .map(|s| int(s, &["udp", field]))
            .sum()
    };
    let (retransmits, retransmits_total) = match protocol {
        Protocol::Tcp => (
            int(sent, &["retransmits"]),
            over_intervals(client_intervals, "retransmits", true)
                .map(|r| r.iter().sum::<f64>() as u64),
        ),
        Protocol::Udp => (None, None),
    };
    Ok(IperfRun {
        protocol,
        command,
        // iperf3 reports `-b` per stream; the run's target is every stream's.
        target_bits_per_sec: num(test, &["target_bitrate"])
            .filter(|&b| b > 0.0)
            .map(|b| b * num(test, &["num_streams"]).unwrap_or(1.0).max(1.0)),
        length_bytes: int(test, &["blksize"]).unwrap_or(0),
        tcp_mss_bytes: int(&v["start"], &["tcp_mss_default"]),
        seconds: num(received, &["seconds"])
            .or(num(sent, &["seconds"]))
            .unwrap_or(0.0),
        sent_bytes,
        received_bytes,
        sent_bytes_total: total(client_intervals, sent_bytes),
        received_bytes_total: total(server_intervals, received_bytes),
        retransmits_total,
        sender_bits_per_sec: num(sent, &["bits_per_second"]).unwrap_or(0.0),
        receiver_bits_per_sec: num(received, &["bits_per_second"])
            .ok_or(IperfError::Missing("end.sum_received.bits_per_second"))?,
        retransmits,
        packets: match protocol {
            Protocol::Udp => int(sent, &["packets"]).or(int(end, &["sum", "packets"])),
            Protocol::Tcp => None,
        },
        lost_packets: int(received, &["lost_packets"]).filter(|_| protocol == Protocol::Udp),
        lost_percent: num(received, &["lost_percent"]).filter(|_| protocol == Protocol::Udp),
        out_of_order: udp_stream("out_of_order").filter(|_| protocol == Protocol::Udp),
        jitter_ms: num(received, &["jitter_ms"]).filter(|_| protocol == Protocol::Udp),
        interval_bits_per_sec,
        cpu_client_percent: num(end, &["cpu_utilization_percent", "host_total"]),
        cpu_server_percent: num(end, &["cpu_utilization_percent", "remote_total"]),
    })
}

/// Datagrams the server received (UDP).
pub fn received_datagrams(run: &IperfRun) -> u64 {
    match (run.packets, run.lost_packets) {
        (Some(p), Some(l)) => p.saturating_sub(l),
        _ => 0,
    }
}

/// The TCP port iperf3 listens on. A fixed port is safe: the server runs in a
/// namespace this run created, where nothing else listens.
pub const PORT: u16 = 5201;

/// What one client run looks like.
#[derive(Debug, Clone)]
pub struct ClientRun {
    /// Namespace of the client (empty: this process's own, as `tunnel --peer` runs
    /// it).
    pub netns: String,
    /// Server address.
    pub server: String,
    /// TCP or UDP.
    pub protocol: Protocol,
    /// `-t`, whole seconds.
    pub seconds: u64,
    /// `-O`, whole seconds.
    pub omit_seconds: u64,
    /// `-l`.
    pub length_bytes: Option<u64>,
    /// `-b` for UDP.
    pub rate_bits_per_sec: Option<f64>,
    /// `-w`: socket buffer size, bytes.
    pub window_bytes: Option<u64>,
    /// `-A client,server`.
    pub affinity: Option<(usize, usize)>,
    /// `-P`: parallel streams (1: none). A UDP rate is the total, split evenly
    /// (iperf3 applies `-b` to each stream).
    pub parallel: usize,
}

impl ClientRun {
    /// The iperf3 arguments (after `ip netns exec NS`).
    pub fn iperf3_args(&self) -> Vec<String> {
        let mut a: Vec<String> = vec![
            "iperf3".into(),
            "-c".into(),
            self.server.clone(),
            "-p".into(),
            PORT.to_string(),
            "-t".into(),
            self.seconds.to_string(),
        ];
        if self.omit_seconds > 0 {
            a.extend(["-O".into(), self.omit_seconds.to_string()]);
        }
        if let Some(l) = self.length_bytes {
            a.extend(["-l".into(), l.to_string()]);
        }
        if self.parallel > 1 {
            a.extend(["-P".into(), self.parallel.to_string()]);
        }
        // Whole bits per second: iperf3 reads the number as is, per stream. UDP
        // always has one (iperf3's own default is 1 Mbit/s); TCP only when asked.
        let rate = match self.protocol {
            Protocol::Udp => Some(self.rate_bits_per_sec.unwrap_or(1e6)),
            Protocol::Tcp => self.rate_bits_per_sec,
        }
        .map(|total| (total / self.parallel.max(1) as f64).round().max(1.0));
        if self.protocol == Protocol::Udp {
            a.push("-u".into());
        }
        if let Some(rate) = rate {
            a.extend(["-b".into(), format!("{rate:.0}")]);
        }
        if let Some(w) = self.window_bytes {
            a.extend(["-w".into(), w.to_string()]);
        }
        if let Some((c, s)) = self.affinity {
            a.extend(["-A".into(), format!("{c},{s}")]);
        }
        a.extend(["-J".into(), "--get-server-output".into()]);
        a
    }

    /// Runs the client to the end and parses its output. Returns early with
    /// [`interrupt::Interrupted`] on Ctrl-C.
    pub fn run(&self) -> Result<IperfRun> {
        self.run_watching(|| Ok(()))
    }

    /// Like [`ClientRun::run`], calling `watch` every 100 ms while iperf3 runs: an
    /// error from it (a gateway that died) stops iperf3 and is returned at once,
    /// instead of waiting for a test that can no longer finish.
    ///
    /// iperf3 sets up a UDP stream with one datagram each way and never sends
    /// them again (esnet/iperf#862): on a lossy path one lost set-up datagram
    /// fails the test with "unable to read from stream socket" before a byte was
    /// measured. That failure, and only that one, is retried, at most
    /// [`UDP_SETUP_ATTEMPTS`] times in all. A UDP client that does not end after
    /// its test (the end-of-test exchange stuck, esnet/iperf#1527; seen once in the
    /// two-host test on a busy 2-vCPU guest) produced no result: it is stopped and
    /// run again, once.
    pub fn run_watching(&self, mut watch: impl FnMut() -> Result<()>) -> Result<IperfRun> {
        let mut attempt = 1;
        let mut hung = 0;
        loop {
            match self.run_once(&mut watch) {
                Err(e)
                    if self.protocol == Protocol::Udp
                        && attempt < UDP_SETUP_ATTEMPTS
                        && is_udp_setup_failure(&e) =>
                {
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(300));
                }
                Err(e) if self.protocol == Protocol::Udp && hung == 0 && is_hung(&e) => {
                    hung += 1;
                    std::thread::sleep(Duration::from_millis(300));
                }
                other => return other,
            }
        }
    }

    /// Like [`ClientRun::run_watching`], and for TCP the client's data connection
    /// sampled once, in the middle of the measured part (after `-O`), by `ss` on
    /// `spare_cpus` (empty: wherever this process may run). A sample that could
    /// not be taken is None; it never fails the run.
    pub fn run_sampled(
        &self,
        watch: impl FnMut() -> Result<()>,
        spare_cpus: &[usize],
    ) -> Result<(IperfRun, Option<TcpSample>)> {
        let sampler = (self.protocol == Protocol::Tcp).then(|| {
            let middle =
                Duration::from_secs(self.omit_seconds) + Duration::from_millis(self.seconds * 500);
            super::tcpinfo::Sampler::start(&self.netns, &self.server, middle, spare_cpus.to_vec())
        });
        let run = self.run_watching(watch)?;
        Ok((run, sampler.and_then(super::tcpinfo::Sampler::finish)))
    }

    fn run_once(&self, watch: &mut impl FnMut() -> Result<()>) -> Result<IperfRun> {
        let mut command: Vec<String> = if self.netns.is_empty() {
            Vec::new()
        } else {
            vec![
                "ip".into(),
                "netns".into(),
                "exec".into(),
                self.netns.clone(),
            ]
        };
        command.extend(self.iperf3_args());
        let mut child = Spawn::new(&command[0])
            .args(&command[1..])
            .piped_stdout()
            .start()
            .context("starting the iperf3 client")?;
        // -t plus -O plus connection set-up and result exchange, generously.
        let grace = Duration::from_secs(30);
        let deadline =
            Instant::now() + Duration::from_secs(self.seconds + self.omit_seconds) + grace;
        let json = collect_stdout(&mut child, deadline, grace, watch).with_context(|| {
            format!(
                "iperf3 {} client to {}",
                self.protocol.as_str(),
                self.server
            )
        })?;
        let status = child.wait(Duration::from_secs(10))?;
        match parse(&json, command) {
            Ok(run) => Ok(run),
            Err(e) => Err(anyhow!(e)).with_context(|| {
                format!(
                    "iperf3 client ({status}) to {}{}: {}",
                    self.server,
                    if self.netns.is_empty() {
                        String::new()
                    } else {
                        format!(" in {}", self.netns)
                    },
                    child.stderr_tail()
                )
            }),
        }
    }
}

/// How many times a UDP test whose stream set-up datagram was lost is tried.
pub const UDP_SETUP_ATTEMPTS: u32 = 3;

/// Whether `e` is iperf3's lost UDP set-up datagram (see
/// [`ClientRun::run_watching`]), not a failure of the test itself.
fn is_udp_setup_failure(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<IperfError>(),
            Some(IperfError::Reported(m)) if m.contains("unable to read from stream socket")
        )
    })
}

/// Whether `e` is a client stopped for not ending after its test.
fn is_hung(e: &anyhow::Error) -> bool {
    e.chain()
        .any(|c| matches!(c.downcast_ref::<IperfError>(), Some(IperfError::Hung(_))))
}

fn collect_stdout(
    child: &mut Child,
    deadline: Instant,
    grace: Duration,
    watch: &mut impl FnMut() -> Result<()>,
) -> Result<String> {
    let mut out = String::new();
    loop {
        if interrupt::requested() {
            child.stop();
            return Err(interrupt::Interrupted.into());
        }
        if let Err(e) = watch() {
            child.stop();
            return Err(e);
        }
        match child.next_line(Duration::from_millis(100)) {
            Line::Text(line) => {
                out.push_str(&line);
                out.push('\n');
            }
            Line::Closed => return Ok(out),
            Line::Timeout => {
                if Instant::now() > deadline {
                    child.stop();
                    return Err(IperfError::Hung(grace.as_secs()).into());
                }
            }
        }
    }
}

/// Starts the iperf3 server in `netns` and waits until it listens. Its JSON (one
/// document per test, and any error it hits) goes to `log`.
pub fn start_server(netns: &str, log: &std::path::Path) -> Result<Child> {
    let child = Spawn::new("ip")
        .args(["netns", "exec", netns, "iperf3", "-s", "-J", "-p"])
        .args([PORT.to_string()])
        .args(["--logfile".as_ref(), log.as_os_str()])
        .start()
        .context("starting the iperf3 server")?;
    let mut child = child;
    let pid = child.pid();
    let mut exited = None;
    wait_until(
        &format!("the iperf3 server listening on port {PORT} in {netns}"),
        Duration::from_secs(10),
        || {
            if let Some(status) = child.try_wait()? {
                exited = Some(status);
                return Ok(true);
            }
            // /proc/PID/net/tcp shows the sockets of PID's namespace.
            let table = std::fs::read_to_string(format!("/proc/{pid}/net/tcp"))?;
            Ok(listening(&table, PORT)
                || std::fs::read_to_string(format!("/proc/{pid}/net/tcp6"))
                    .map(|t| listening(&t, PORT))
                    .unwrap_or(false))
        },
    )
    .and_then(|()| match exited {
        Some(status) => Err(anyhow!("the iperf3 server exited ({status})")),
        None => Ok(()),
    })
    .with_context(|| {
        let said = std::fs::read_to_string(log).unwrap_or_default();
        let error = serde_json::from_str::<Value>(said.trim())
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_string))
            .unwrap_or_else(|| said.lines().last().unwrap_or("").to_string());
        format!("{} {error}", child.stderr_tail())
    })?;
    Ok(child)
}

/// Whether `/proc/net/tcp` text has a listening socket on `port`.
pub fn listening(table: &str, port: u16) -> bool {
    let wanted = format!(":{port:04X}");
    table.lines().skip(1).any(|line| {
        let mut fields = line.split_whitespace();
        let local = fields.nth(1).unwrap_or("");
        let state = fields.nth(1).unwrap_or("");
        local.ends_with(&wanted) && state == "0A"
    })
}

/// `iperf 3.12` from `iperf3 --version`.
pub fn version() -> Option<String> {
    let out = Spawn::new("iperf3")
        .args(["--version"])
        .output(Duration::from_secs(5))
        .ok()?;
    out.stdout
        .lines()
        .next()
        .map(|l| l.split(" (").next().unwrap_or(l).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP: &str = include_str!("../../tests/fixtures/iperf3-tcp-tunnel.json");
    const UDP: &str = include_str!("../../tests/fixtures/iperf3-udp-tunnel.json");
    const ERROR: &str = include_str!("../../tests/fixtures/iperf3-error.json");

    #[test]
    fn parses_a_tcp_run_with_the_servers_intervals() {
        let r = parse(TCP, vec!["iperf3".into()]).unwrap();
        assert_eq!(r.protocol, Protocol::Tcp);
        assert_eq!(r.length_bytes, 1220);
        assert_eq!(r.tcp_mss_bytes, Some(1348));
        assert_eq!(r.sent_bytes, 626_335_800);
        assert_eq!(r.received_bytes, 627_407_728);
        assert_eq!(r.retransmits, Some(0));
        assert_eq!(r.target_bits_per_sec, None);
        assert!((r.receiver_bits_per_sec - 1_669_556_718.7).abs() < 1.0);
        // The server's three measured seconds: the omitted first second is out, and
        // so is the 6 ms sliver that ends its output (its bytes are in the totals).
        assert_eq!(r.interval_bits_per_sec.len(), 3);
        assert!((r.interval_bits_per_sec[0] - 1_745_896_578.1).abs() < 1.0);
        // Totals include the omitted second: that is what crossed the tunnel.
        assert_eq!(r.sent_bytes_total, 779_824_000);
        assert_eq!(r.received_bytes_total, 778_119_232);
        assert_eq!(r.retransmits_total, Some(0));
        assert!(r.lost_packets.is_none() && r.packets.is_none());
        assert!(r.cpu_client_percent.unwrap() > 0.0);
    }

    #[test]
    fn parses_a_lossy_udp_run() {
        let r = parse(UDP, vec![]).unwrap();
        assert_eq!(r.protocol, Protocol::Udp);
        assert_eq!(r.target_bits_per_sec, Some(1.2e9));
        assert_eq!(r.packets, Some(245_812));
        assert_eq!(r.lost_packets, Some(73_727));
        assert!((r.lost_percent.unwrap() - 29.997).abs() < 0.01);
        assert_eq!(r.received_bytes, 209_905_880);
        assert_eq!(r.received_bytes % 1220, 0);
        assert_eq!(received_datagrams(&r), 245_812 - 73_727);
        // The server read the payload of 172,054 datagrams, 31 fewer than sent -
        // lost: datagrams after the last one it saw are neither received nor lost
        // to iperf3 (why the byte check counts payload / length).
        assert_eq!(r.received_bytes / 1220, 172_054);
        // With -P the target is the streams' sum (iperf3 reports -b per stream).
        let two = UDP.replacen("\"num_streams\":\t1", "\"num_streams\":\t2", 1);
        assert_ne!(two, UDP);
        assert_eq!(
            parse(&two, vec![]).unwrap().target_bits_per_sec,
            Some(2.4e9)
        );
        assert_eq!(r.received_bytes_total, r.received_bytes);
        assert!((r.receiver_bits_per_sec - 838_031_260.6).abs() < 1.0);
        assert_eq!(r.out_of_order, Some(0));
        assert!(r.retransmits.is_none());
        // Two seconds; the 3.7 ms sliver after them is out.
        assert_eq!(r.interval_bits_per_sec.len(), 2);
    }

    #[test]
    fn reports_iperf3s_own_error() {
        let e = parse(ERROR, vec![]).unwrap_err().to_string();
        assert!(e.contains("Network is unreachable"), "{e}");
        assert!(matches!(
            parse("garbage", vec![]),
            Err(IperfError::NotJson(_))
        ));
        assert!(matches!(
            parse(r#"{"start":{},"end":{}}"#, vec![]),
            Err(IperfError::Missing(_))
        ));
    }

    #[test]
    fn only_a_lost_udp_setup_datagram_is_retried() {
        let setup = r#"{"start":{},"intervals":[],"end":{},
            "error":"error - unable to read from stream socket: Resource temporarily unavailable"}"#;
        let e = Err::<IperfRun, _>(anyhow!(parse(setup, vec![]).unwrap_err()))
            .context("iperf3 client (exit status: 0)")
            .unwrap_err();
        assert!(is_udp_setup_failure(&e));
        let other = anyhow!(parse(ERROR, vec![]).unwrap_err()).context("client");
        assert!(!is_udp_setup_failure(&other));
        assert!(!is_udp_setup_failure(&anyhow!(
            "unable to read from stream socket"
        )));
    }

    #[test]
    fn builds_the_seeds_command_lines() {
        let mut run = ClientRun {
            netns: "ns".into(),
            server: "198.19.0.2".into(),
            protocol: Protocol::Tcp,
            seconds: 20,
            omit_seconds: 0,
            length_bytes: Some(1220),
            rate_bits_per_sec: None,
            window_bytes: None,
            affinity: None,
            parallel: 1,
        };
        assert_eq!(
            run.iperf3_args().join(" "),
            "iperf3 -c 198.19.0.2 -p 5201 -t 20 -l 1220 -J --get-server-output"
        );
        run.protocol = Protocol::Udp;
        run.rate_bits_per_sec = Some(180e6);
        run.affinity = Some((0, 1));
        run.window_bytes = Some(4 << 20);
        assert_eq!(
            run.iperf3_args().join(" "),
            "iperf3 -c 198.19.0.2 -p 5201 -t 20 -l 1220 -u -b 180000000 -w 4194304 -A 0,1 -J --get-server-output"
        );
        // -P 4: the UDP rate is the total, a quarter per stream.
        run.parallel = 4;
        assert_eq!(
            run.iperf3_args().join(" "),
            "iperf3 -c 198.19.0.2 -p 5201 -t 20 -l 1220 -P 4 -u -b 45000000 -w 4194304 -A 0,1 -J --get-server-output"
        );
        // TCP at a fixed load (tunnel --rate): -b without -u, split per stream too.
        run.protocol = Protocol::Tcp;
        run.rate_bits_per_sec = Some(2e9);
        run.length_bytes = None;
        run.window_bytes = None;
        assert_eq!(
            run.iperf3_args().join(" "),
            "iperf3 -c 198.19.0.2 -p 5201 -t 20 -P 4 -b 500000000 -A 0,1 -J --get-server-output"
        );
    }

    #[test]
    fn finds_a_listening_socket() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue\n\
   0: 00000000:1451 00000000:0000 0A 00000000:00000000 00:00000000 00000000\n\
   1: 0100007F:9C40 0100007F:1451 01 00000000:00000000 00:00000000 00000000\n";
        assert!(listening(table, 5201));
        assert!(!listening(table, 40000));
    }
}
