//! The iperf3 client's TCP connection, sampled once in the middle of a TCP run:
//! `ss -tinH state established dst SERVER` in the sender's namespace, the data
//! connection (the one with the most bytes acknowledged, not iperf3's control
//! connection) parsed into a [`TcpSample`]. So a run that carried a tenth of its
//! siblings says what held it: its congestion window, the receiver's window, its
//! pacing rate or its RTT.
//!
//! [`parse`] is a pure function of `ss`'s text (tested on captured lines); the
//! [`Sampler`] runs `ss` once per run on a thread of its own, on a CPU no part of
//! the system under test is pinned to where the machine has one, with a deadline.
//! Any failure (no `ss`, a timeout, no connection, text it cannot read) is an
//! absent sample, never a failed run.

use crate::supervisor::Spawn;
use cipherbench_model::tunnel::TcpSample;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long `ss` may take.
pub const SS_TIMEOUT: Duration = Duration::from_secs(2);

/// The `ss` command that lists the established TCP connections to `server` with
/// their `TCP_INFO`, entering `netns` (empty: this process's own namespace).
pub fn ss_command(netns: &str, server: &str) -> Vec<String> {
    let mut command: Vec<String> = if netns.is_empty() {
        Vec::new()
    } else {
        ["ip", "netns", "exec", netns].map(String::from).to_vec()
    };
    command.extend(["ss", "-tinH", "state", "established", "dst", server].map(String::from));
    command
}

/// The connection with the most bytes acknowledged in `ss -tinH` output (each
/// connection an address line, then its indented `TCP_INFO` line), taken
/// `at_seconds` into the run. None when the text lists no connection with
/// `TCP_INFO`.
pub fn parse(text: &str, at_seconds: f64) -> Option<TcpSample> {
    let mut connections: Vec<String> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        // One space between fields: `ss` pads its columns.
        let fields = line.split_whitespace().collect::<Vec<_>>().join(" ");
        match connections.last_mut() {
            Some(last) if line.starts_with([' ', '\t']) => {
                last.push(' ');
                last.push_str(&fields);
            }
            _ => connections.push(fields),
        }
    }
    let samples: Vec<TcpSample> = connections
        .iter()
        .map(|c| connection(c))
        .filter(|s| s.cwnd.is_some() || s.rtt_ms.is_some())
        .collect();
    let count = samples.len();
    let mut best = samples
        .into_iter()
        .max_by_key(|s| s.bytes_acked.unwrap_or(0))?;
    best.connections = count;
    best.at_seconds = at_seconds;
    Some(best)
}

/// One connection's text (address and `TCP_INFO`, on one line).
fn connection(text: &str) -> TcpSample {
    let mut s = TcpSample {
        raw: truncate(text, TcpSample::RAW_MAX),
        ..TcpSample::default()
    };
    let mut tokens = text.split_whitespace();
    while let Some(token) = tokens.next() {
        // `send 1.2Gbps`, `pacing_rate 2.4Gbps[/max]`, `delivery_rate 1.1Gbps`.
        match token {
            "send" => s.send_bits_per_sec = tokens.next().and_then(rate),
            "pacing_rate" => s.pacing_bits_per_sec = tokens.next().and_then(rate),
            "delivery_rate" => s.delivery_bits_per_sec = tokens.next().and_then(rate),
            "app_limited" => s.app_limited = true,
            _ => {}
        }
        let Some((key, value)) = token.split_once(':') else {
            continue;
        };
        match key {
            "cwnd" => s.cwnd = value.parse().ok(),
            "ssthresh" => s.ssthresh = value.parse().ok(),
            "rtt" => {
                let (rtt, var) = value.split_once('/').unwrap_or((value, ""));
                s.rtt_ms = rtt.parse().ok();
                s.rttvar_ms = var.parse().ok();
            }
            "minrtt" => s.min_rtt_ms = value.parse().ok(),
            "mss" => s.mss = value.parse().ok(),
            "snd_wnd" => s.snd_wnd = value.parse().ok(),
            "rcv_space" => s.rcv_space = value.parse().ok(),
            "bytes_acked" => s.bytes_acked = value.parse().ok(),
            // `retrans:now/total`.
            "retrans" => s.retrans = value.rsplit('/').next().and_then(|t| t.parse().ok()),
            "busy" => s.busy_ms = millis(value),
            "rwnd_limited" => s.rwnd_limited_ms = millis(value),
            "sndbuf_limited" => s.sndbuf_limited_ms = millis(value),
            _ => {}
        }
    }
    // `ss` prints the limited times only when they are not zero, and only with a
    // busy time.
    if s.busy_ms.is_some() {
        s.rwnd_limited_ms.get_or_insert(0);
        s.sndbuf_limited_ms.get_or_insert(0);
    }
    s
}

/// `20ms` or `10ms(50.0%)`: the milliseconds.
fn millis(value: &str) -> Option<u64> {
    value.split('(').next()?.strip_suffix("ms")?.parse().ok()
}

/// `ss`'s rates: `6123.4Mbps`, `1.2Gbps`, `512Kbps`, `800bps`, a `/max` after a
/// pacing rate, or a bare number of bit/s (`ss -n`).
fn rate(token: &str) -> Option<f64> {
    let token = token.split('/').next()?;
    let number = token.strip_suffix("bps").unwrap_or(token);
    let (digits, scale) = match number.as_bytes().last()? {
        b'G' => (&number[..number.len() - 1], 1e9),
        b'M' => (&number[..number.len() - 1], 1e6),
        b'K' | b'k' => (&number[..number.len() - 1], 1e3),
        _ => (number, 1.0),
    };
    digits
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .map(|v| v * scale)
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// One `ss` call, waiting on a thread of its own until the run's middle.
pub struct Sampler {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<Option<TcpSample>>>,
}

impl Sampler {
    /// Starts waiting: `after` from now, `ss` lists `netns`'s connections to
    /// `server`. `cpus`: where `ss` may run (the thread pins itself there first, and
    /// its children inherit it); empty: wherever this process may.
    pub fn start(netns: &str, server: &str, after: Duration, cpus: Vec<usize>) -> Sampler {
        let (stop, stopped) = mpsc::channel::<()>();
        let command = ss_command(netns, server);
        let started = Instant::now();
        let thread = std::thread::Builder::new()
            .name("tcp-sample".into())
            .spawn(move || {
                // A message or a hang-up: the run ended first.
                if stopped.recv_timeout(after) != Err(mpsc::RecvTimeoutError::Timeout) {
                    return None;
                }
                if !cpus.is_empty() {
                    let _ = crate::host::pin_to_cores(&cpus);
                }
                let at = started.elapsed().as_secs_f64();
                let out = Spawn::new(&command[0])
                    .args(&command[1..])
                    .output(SS_TIMEOUT)
                    .ok()?;
                if !out.status.success() {
                    return None;
                }
                parse(&out.stdout, at)
            })
            .ok();
        Sampler {
            stop: Some(stop),
            thread,
        }
    }

    /// The sample, if it was taken: stops waiting if the run ended first, and waits
    /// for an `ss` under way (at most [`SS_TIMEOUT`]).
    pub fn finish(mut self) -> Option<TcpSample> {
        drop(self.stop.take());
        self.thread.take()?.join().ok().flatten()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MID_RUN: &str = include_str!("../../tests/fixtures/ss-tinH-tunnel-mid-run.txt");
    const START: &str = include_str!("../../tests/fixtures/ss-tinH-tunnel-start.txt");

    #[test]
    fn takes_the_data_connection_not_iperf3s_control_connection() {
        let s = parse(MID_RUN, 1.52).unwrap();
        assert_eq!((s.connections, s.at_seconds), (2, 1.52));
        assert_eq!(s.cwnd, Some(684));
        assert_eq!(s.ssthresh, Some(154));
        assert_eq!(s.rtt_ms, Some(2.383));
        assert_eq!(s.rttvar_ms, Some(0.834));
        assert_eq!(s.min_rtt_ms, Some(0.032));
        assert_eq!(s.mss, Some(1348));
        assert_eq!(s.send_bits_per_sec, Some(3_095_365_506.0));
        assert_eq!(s.pacing_bits_per_sec, Some(3_972_524_632.0));
        assert_eq!(s.delivery_bits_per_sec, Some(2_052_318_336.0));
        assert_eq!(s.snd_wnd, Some(2_420_736));
        assert_eq!(s.rcv_space, Some(13_480));
        assert_eq!(s.bytes_acked, Some(477_525_138));
        assert_eq!(s.retrans, None, "none printed: none happened");
        assert_eq!(s.busy_ms, Some(1512));
        assert_eq!(s.rwnd_limited_ms, Some(212));
        assert_eq!(s.sndbuf_limited_ms, Some(0));
        assert!(!s.app_limited);
        // ss's own share: 212 ms of 1512 is 14.0 %.
        assert!((s.rwnd_limited_share().unwrap() - 0.140).abs() < 0.001);
        assert!(s
            .raw
            .starts_with("0 2581500 198.19.0.1:59918 198.19.0.2:5201 bbr wscale:10,10"));
        assert!(s.raw.ends_with("snd_wnd:2420736"), "{}", s.raw);
        // The control connection alone: its own state, app-limited.
        let control: String = MID_RUN.lines().take(2).map(|l| format!("{l}\n")).collect();
        let c = parse(&control, 1.0).unwrap();
        assert_eq!(
            (c.connections, c.cwnd, c.bytes_acked),
            (1, Some(13), Some(205))
        );
        assert!(c.app_limited && c.busy_ms.is_none() && c.rwnd_limited_share().is_none());
    }

    #[test]
    fn a_busy_time_without_limited_times_means_none_limited() {
        let s = parse(START, 0.1).unwrap();
        assert_eq!((s.cwnd, s.busy_ms), (Some(652), Some(36)));
        assert_eq!((s.rwnd_limited_ms, s.sndbuf_limited_ms), (Some(0), Some(0)));
        assert_eq!(s.rwnd_limited_share(), Some(0.0));
    }

    #[test]
    fn reads_older_ss_layouts_and_cuts_long_text() {
        // Scaled rates, retransmissions and a send-buffer limit, as other ss
        // versions print them.
        let text = "0 0 10.0.0.1:1 10.0.0.2:5201\n\t cubic rtt:0.5/0.25 mss:1448 cwnd:40 \
            retrans:0/7 send 926.7Mbps pacing_rate 1.1Gbps/2.0Gbps delivery_rate 512.3Kbps \
            busy:100ms sndbuf_limited:25ms(25.0%) bytes_acked:99\n";
        let s = parse(text, 0.5).unwrap();
        assert_eq!(s.retrans, Some(7));
        assert_eq!(s.send_bits_per_sec, Some(926_700_000.0));
        assert_eq!(s.pacing_bits_per_sec, Some(1.1e9));
        assert!((s.delivery_bits_per_sec.unwrap() - 512_300.0).abs() < 1e-6);
        assert_eq!(s.sndbuf_limited_share(), Some(0.25));
        assert_eq!(s.rwnd_limited_share(), Some(0.0));
        assert_eq!((s.snd_wnd, s.ssthresh), (None, None));
        let long = format!("{text}{}", "\t x:1".repeat(1000));
        assert_eq!(parse(&long, 0.5).unwrap().raw.len(), TcpSample::RAW_MAX);
    }

    #[test]
    fn reads_rates_and_times_as_ss_prints_them() {
        assert_eq!(rate("6123.4Mbps"), Some(6_123_400_000.0));
        assert_eq!(rate("1.5Gbps"), Some(1.5e9));
        assert_eq!(rate("512Kbps"), Some(512_000.0));
        assert_eq!(rate("800bps"), Some(800.0));
        assert_eq!(rate("2400.0Mbps/4800.0Mbps"), Some(2.4e9));
        assert_eq!(rate("12345"), Some(12345.0));
        assert_eq!(rate("fastbps"), None);
        assert_eq!(millis("20ms"), Some(20));
        assert_eq!(millis("10ms(50.0%)"), Some(10));
        assert_eq!(millis("10"), None);
        assert_eq!(truncate("abcdef", 4), "abcd");
        assert_eq!(truncate("aé", 2), "a");
    }

    #[test]
    fn no_connection_is_no_sample() {
        assert_eq!(parse("", 1.0), None);
        assert_eq!(parse("0 0 198.19.0.1:1 198.19.0.2:5201\n", 1.0), None);
    }

    #[test]
    fn builds_the_command_in_and_out_of_a_namespace() {
        assert_eq!(
            ss_command("ns-s", "198.19.0.2").join(" "),
            "ip netns exec ns-s ss -tinH state established dst 198.19.0.2"
        );
        assert_eq!(
            ss_command("", "10.0.0.2").join(" "),
            "ss -tinH state established dst 10.0.0.2"
        );
    }

    #[test]
    fn a_run_that_ends_first_takes_no_sample() {
        let sampler = Sampler::start("", "192.0.2.1", Duration::from_secs(60), Vec::new());
        let started = Instant::now();
        assert_eq!(sampler.finish(), None);
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
