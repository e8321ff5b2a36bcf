//! `cipherbench seal` and `open` under the faults a user meets, with the real binary,
//! real pipes and real signals: Ctrl-C or SIGTERM while the input pipe is open but
//! silent, after megabytes went through, or as a terminal sends it (to the producer
//! of the pipe and to us at once); a stalled or damaged stream to stdout; a header
//! whose scrypt settings RFC 7914 forbids. Each ends with exit 130 (stopped) or 1
//! (refused), one line on stderr that says what the output got, and nothing under
//! the target's name nor any temporary file.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use crate::common::{bin, data, Scratch};
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long a stopped command may take to exit: the reader asks every 100 ms.
const PROMPT: Duration = Duration::from_secs(5);
const MIB: usize = 1 << 20;

/// A child killed (SIGKILL) and reaped if the test fails before it exits.
struct Running(Child);

impl Running {
    fn spawn(cmd: &mut Command) -> Running {
        Running(cmd.spawn().unwrap())
    }

    fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill with the pid of our own unreaped child.
        unsafe { libc::kill(self.0.id() as i32, signal) };
    }

    fn stdin(&mut self) -> ChildStdin {
        self.0.stdin.take().unwrap()
    }

    /// The exit status within `PROMPT`, or a failed test.
    fn exit(&mut self, what: &str) -> ExitStatus {
        let deadline = Instant::now() + PROMPT;
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: still running {PROMPT:?} after the signal"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stderr(&mut self) -> String {
        let mut s = String::new();
        self.0
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        s
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The one line on stderr; fails unless there is exactly one.
fn one_line(stderr: &str) -> &str {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line, got:\n{stderr}");
    lines[0]
}

fn seal_from_pipe(s: &Scratch, output: &str) -> Running {
    Running::spawn(
        bin()
            .args(["seal", "-k"])
            .arg(s.key())
            .arg("-")
            .arg(output)
            .current_dir(s.dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    )
}

/// `seal - out.cbs` gets `sent` bytes through a pipe that then stays open and
/// silent, and `signal`: it must stop promptly, with nothing under out.cbs.
fn seal_stopped_on_an_open_pipe(name: &str, sent: usize, signal: libc::c_int, word: &str) {
    let s = Scratch::new("faults", name);
    let mut seal = seal_from_pipe(&s, "out.cbs");
    let mut stdin = seal.stdin();
    stdin.write_all(&data(sent)).unwrap();
    // Let the reader take what the pipe holds and wait on the silence.
    std::thread::sleep(Duration::from_millis(300));
    seal.signal(signal);
    let status = seal.exit(name);
    drop(stdin);
    assert_eq!(status.code(), Some(130), "{name}");
    let err = seal.stderr();
    let line = one_line(&err);
    assert!(
        line.contains(&format!("interrupted by {word}"))
            && line.contains("out.cbs was not written"),
        "{line}"
    );
    assert_eq!(s.entries(), vec!["key"], "{name}: output or temporary left");
}

#[test]
fn sigint_after_8_mib_on_an_open_pipe_seals_nothing() {
    let _turn = crate::turn!();
    seal_stopped_on_an_open_pipe("int-8mib", 8 * MIB, libc::SIGINT, "SIGINT");
}

#[test]
fn sigterm_after_8_mib_on_an_open_pipe_seals_nothing() {
    let _turn = crate::turn!();
    seal_stopped_on_an_open_pipe("term-8mib", 8 * MIB, libc::SIGTERM, "SIGTERM");
}

#[test]
fn sigint_on_a_pipe_silent_from_the_start_seals_nothing() {
    let _turn = crate::turn!();
    seal_stopped_on_an_open_pipe("int-silent", 0, libc::SIGINT, "SIGINT");
}

#[test]
fn sigterm_on_a_pipe_silent_from_the_start_seals_nothing() {
    let _turn = crate::turn!();
    seal_stopped_on_an_open_pipe("term-silent", 0, libc::SIGTERM, "SIGTERM");
}

/// Ctrl-C at a terminal signals the whole foreground job: the producer dies (its
/// end of the pipe closes) and seal is interrupted at the same moment. Seal must
/// not take the producer's death for the end of the data.
#[test]
fn ctrl_c_to_producer_and_seal_together_seals_nothing() {
    let _turn = crate::turn!();
    for round in 0..3 {
        let s = Scratch::new("faults", &format!("ctrl-c-{round}"));
        let key = s.key();
        let mut producer = Running::spawn(
            Command::new("sh")
                .args(["-c", "head -c 8388608 /dev/zero; exec sleep 60"])
                .stdout(Stdio::piped())
                .process_group(0),
        );
        let pipe = producer.0.stdout.take().unwrap();
        let job = producer.0.id() as i32;
        let mut seal = Running::spawn(
            bin()
                .args(["seal", "-k"])
                .arg(&key)
                .args(["-", "out.cbs"])
                .current_dir(s.dir())
                .stdin(pipe)
                .stderr(Stdio::piped())
                .process_group(job),
        );
        std::thread::sleep(Duration::from_millis(500));
        // SAFETY: signals the process group this test made.
        unsafe { libc::killpg(job, libc::SIGINT) };
        let status = seal.exit("seal");
        assert_eq!(status.code(), Some(130), "round {round}");
        let err = seal.stderr();
        assert!(one_line(&err).contains("out.cbs was not written"), "{err}");
        assert_eq!(
            s.entries(),
            vec!["key"],
            "round {round}: output or temporary left"
        );
        // And the producer went with the job (its pipe end closed first).
        assert_eq!(producer.exit("producer").code(), None);
    }
}

/// To stdout nothing can be taken back: the stream lacks its final chunk, the line
/// says how many bytes went out (exactly those the consumer got), and `open` of
/// what the consumer got is refused.
#[test]
fn sigint_on_seal_to_stdout_leaves_a_stream_open_refuses() {
    let _turn = crate::turn!();
    let s = Scratch::new("faults", "seal-stdout");
    let key = s.key();
    let mut seal = Running::spawn(
        bin()
            .args(["seal", "-k"])
            .arg(&key)
            .args(["-", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let mut stdout = seal.0.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        stdout.read_to_end(&mut v).unwrap();
        v
    });
    let mut stdin = seal.stdin();
    stdin.write_all(&data(3 * MIB)).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    seal.signal(libc::SIGINT);
    assert_eq!(seal.exit("seal").code(), Some(130));
    drop(stdin);
    let got = reader.join().unwrap();
    let err = seal.stderr();
    let line = one_line(&err);
    assert!(
        line.contains(&format!(
            "stdout got {} bytes of a sealed stream without its final chunk",
            got.len()
        )),
        "{} bytes reached stdout; {line}",
        got.len()
    );
    std::fs::write(s.path("cut.cbs"), &got).unwrap();
    let open = bin()
        .args(["open", "-k"])
        .arg(&key)
        .arg(s.path("cut.cbs"))
        .arg(s.path("back"))
        .output()
        .unwrap();
    assert_eq!(open.status.code(), Some(1));
    let err = String::from_utf8_lossy(&open.stderr);
    assert!(
        one_line(&err).contains("the file was truncated") || one_line(&err).contains("is missing"),
        "{err}"
    );
    assert_eq!(s.entries(), vec!["cut.cbs", "key"]);
}

/// A sealed file of `chunks` chunks of `chunk` bytes (the last one 100 bytes).
fn sealed(s: &Scratch, chunk: usize, chunks: usize) -> (Vec<u8>, Vec<u8>) {
    let plain = data((chunks - 1) * chunk + 100);
    std::fs::write(s.path("plain"), &plain).unwrap();
    let out = bin()
        .args(["seal", "-k"])
        .arg(s.key())
        .args(["--chunk-size", &chunk.to_string()])
        .arg(s.path("plain"))
        .arg(s.path("sealed"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let sealed = std::fs::read(s.path("sealed")).unwrap();
    std::fs::remove_file(s.path("plain")).unwrap();
    std::fs::remove_file(s.path("sealed")).unwrap();
    (plain, sealed)
}

/// The bytes the one-line message says stdout got, checked against the chunks it
/// names: "nothing was written to stdout", "stdout got the first chunk, B bytes",
/// "stdout got the first N chunks, B bytes", "stdout got B verified bytes: the
/// first N chunks and R bytes of chunk N".
fn bytes_claimed(line: &str, chunk: usize) -> usize {
    if line.contains("(nothing was written to stdout)") {
        return 0;
    }
    let (_, said) = line
        .split_once("stdout got ")
        .unwrap_or_else(|| panic!("no count in {line}"));
    // The count ends the parenthesis the message puts it in.
    let said = said.split(')').next().unwrap();
    let words: Vec<&str> = said
        .split([' ', ',', ':'])
        .filter(|w| !w.is_empty())
        .collect();
    let number = |i: usize| -> usize {
        words[i]
            .parse()
            .unwrap_or_else(|_| panic!("{:?} in {line}", words[i]))
    };
    match words[..] {
        ["the", "first", "chunk", _, "bytes", "each", "verified"] => {
            assert_eq!(number(3), chunk, "{line}");
            chunk
        }
        ["the", "first", _, "chunks", _, "bytes", "each", "verified"] => {
            let bytes = number(4);
            assert_eq!(bytes, number(2) * chunk, "{line}");
            bytes
        }
        [_, "verified", "bytes", "of", "chunk", "0"] => {
            let bytes = number(0);
            assert!(bytes < chunk, "{line}");
            bytes
        }
        [_, "verified", "bytes", "the", "first", "chunk", "and", _, "bytes", "of", "chunk", "1"] => {
            let bytes = number(0);
            assert_eq!(bytes, chunk + number(7), "{line}");
            bytes
        }
        [_, "verified", "bytes", "the", "first", _, "chunks", "and", _, "bytes", "of", "chunk", _] =>
        {
            let bytes = number(0);
            assert_eq!(number(5), number(12), "{line}");
            assert_eq!(bytes, number(5) * chunk + number(8), "{line}");
            bytes
        }
        _ => panic!("unexpected count in {line}"),
    }
}

/// Chunk 20 of 201 damaged, opened to stdout: the message says how many verified
/// chunks and bytes stdout got, and that is what it got, for small and default
/// chunk sizes (a batch holds 255 or 15 chunks) and one or three threads.
#[test]
fn a_damaged_chunk_20_of_201_to_stdout_reports_exactly_what_stdout_got() {
    let _turn = crate::turn!();
    let s = Scratch::new("faults", "chunk-20");
    for chunk in [4096, 65536] {
        let (plain, mut bad) = sealed(&s, chunk, 201);
        bad[70 + 20 * (chunk + 16) + 5] ^= 1;
        std::fs::write(s.path("bad.cbs"), &bad).unwrap();
        for threads in ["1", "3"] {
            let out = bin()
                .args(["open", "--threads", threads, "-k"])
                .arg(s.key())
                .arg(s.path("bad.cbs"))
                .arg("-")
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(1));
            let err = String::from_utf8_lossy(&out.stderr);
            let line = one_line(&err);
            assert!(line.contains("chunk 20 did not verify"), "{line}");
            let claimed = bytes_claimed(line, chunk);
            assert_eq!(
                claimed,
                out.stdout.len(),
                "chunk {chunk}, {threads} threads: {line}"
            );
            assert!(out.stdout.len() <= 20 * chunk);
            assert_eq!(out.stdout.len() % chunk, 0);
            assert!(out.stdout[..] == plain[..out.stdout.len()]);
        }
        if chunk == 65536 {
            // 15 chunks to a batch: the batch holding chunk 20 is withheld whole.
            let out = bin()
                .args(["open", "-k"])
                .arg(s.key())
                .arg(s.path("bad.cbs"))
                .arg("-")
                .output()
                .unwrap();
            assert_eq!(out.stdout.len(), 15 * chunk);
        }
    }
    assert_eq!(s.entries(), vec!["bad.cbs", "key"]);
}

/// A consumer that stops reading, then SIGTERM: `open` stops although its write
/// is blocked, and the bytes it reports are exactly those that reached the pipe.
#[test]
fn sigterm_on_open_to_a_stalled_stdout_reports_exactly_what_write_accepted() {
    let _turn = crate::turn!();
    let s = Scratch::new("faults", "stalled");
    let (plain, sealed) = sealed(&s, 65536, 100);
    std::fs::write(s.path("f.cbs"), &sealed).unwrap();
    let mut open = Running::spawn(
        bin()
            .args(["open", "-k"])
            .arg(s.key())
            .arg(s.path("f.cbs"))
            .arg("-")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    std::thread::sleep(Duration::from_millis(500));
    open.signal(libc::SIGTERM);
    assert_eq!(open.exit("open").code(), Some(130));
    let mut got = Vec::new();
    open.0.stdout.take().unwrap().read_to_end(&mut got).unwrap();
    let err = open.stderr();
    let line = one_line(&err);
    assert!(line.contains("interrupted by SIGTERM"), "{line}");
    assert!(!got.is_empty() && got.len() < plain.len());
    assert_eq!(bytes_claimed(line, 65536), got.len(), "{line}");
    assert!(got[..] == plain[..got.len()]);
}

fn open_from_pipe(s: &Scratch, output: &str, stdout: Stdio) -> Running {
    Running::spawn(
        bin()
            .args(["open", "-k"])
            .arg(s.key())
            .arg("-")
            .arg(output)
            .current_dir(s.dir())
            .stdin(Stdio::piped())
            .stdout(stdout)
            .stderr(Stdio::piped()),
    )
}

#[test]
fn open_stops_on_a_silent_pipe_before_the_header_and_after_chunks() {
    let _turn = crate::turn!();
    let s = Scratch::new("faults", "open-silent");
    let (_, sealed) = sealed(&s, 65536, 100);
    for (sent, signal, word) in [
        (0, libc::SIGINT, "SIGINT"),
        (30, libc::SIGTERM, "SIGTERM"),
        (3 * MIB, libc::SIGINT, "SIGINT"),
        (3 * MIB, libc::SIGTERM, "SIGTERM"),
    ] {
        let mut open = open_from_pipe(&s, "out", Stdio::null());
        let mut stdin = open.stdin();
        stdin.write_all(&sealed[..sent]).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        open.signal(signal);
        let status = open.exit(word);
        drop(stdin);
        assert_eq!(status.code(), Some(130), "{sent} bytes, {word}");
        let err = open.stderr();
        let line = one_line(&err);
        assert!(line.contains(&format!("interrupted by {word}")), "{line}");
        if sent > 70 {
            assert!(line.contains("nothing was written to out"), "{line}");
        }
        assert_eq!(s.entries(), vec!["key"], "{sent} bytes, {word}: left");
    }
}

#[test]
fn open_to_stdout_from_a_silent_pipe_reports_the_verified_prefix() {
    let _turn = crate::turn!();
    let s = Scratch::new("faults", "open-silent-stdout");
    let (plain, sealed) = sealed(&s, 65536, 100);
    let mut open = open_from_pipe(&s, "-", Stdio::piped());
    let mut stdout = open.0.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        stdout.read_to_end(&mut v).unwrap();
        v
    });
    let mut stdin = open.stdin();
    stdin.write_all(&sealed[..5_000_000]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    open.signal(libc::SIGINT);
    assert_eq!(open.exit("open").code(), Some(130));
    drop(stdin);
    let got = reader.join().unwrap();
    let err = open.stderr();
    let line = one_line(&err);
    // 5,000,000 sealed bytes hold 76 whole chunks; batches of 15 give 75.
    assert_eq!(got.len(), 75 * 65536, "{line}");
    assert_eq!(bytes_claimed(line, 65536), got.len(), "{line}");
    assert!(got[..] == plain[..got.len()]);
}

/// log2 N = 16 with r = 1 breaks RFC 7914 §2 (N < 2^(16·r)); it is refused from
/// the header, before the passphrase is read or anything derived, in one line.
#[test]
fn an_rfc_7914_violating_scrypt_header_is_refused_once_before_deriving() {
    let _turn = crate::turn!();
    let s = Scratch::new("faults", "scrypt");
    let pass = s.path("pass");
    std::fs::write(&pass, "correct horse\n").unwrap();
    std::fs::set_permissions(&pass, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = bin()
        .args(["seal", "--scrypt-log-n", "10", "--passphrase-file"])
        .arg(&pass)
        .arg("-")
        .arg(s.path("f.cbs"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut bytes = std::fs::read(s.path("f.cbs")).unwrap();
    (bytes[12], bytes[13], bytes[14]) = (16, 1, 1);
    std::fs::write(s.path("f.cbs"), &bytes).unwrap();
    // A passphrase file nobody may read: were it opened, that would be the error.
    std::fs::set_permissions(&pass, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = bin()
        .args(["open", "--passphrase-file"])
        .arg(&pass)
        .arg(s.path("f.cbs"))
        .arg(s.path("out"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let line = one_line(&err);
    assert!(
        line.contains("(log2 N 16, r 1, p 1)")
            && line.contains("RFC 7914 §2 needs N < 2^(16·r) = 2^16"),
        "{line}"
    );
    assert_eq!(line.matches("RFC 7914").count(), 1, "{line}");
    assert!(!line.contains("OpenSSL"), "{line}");
    assert_eq!(s.entries(), vec!["f.cbs", "pass"]);
}
