//! `cipherbench agent`'s own loop: read a request per line on stdin, hand it to the
//! layer it belongs to (a load share to `tls::agents`, a tunnel end to
//! `tunnel::peer`), write the reply as one line on stdout, until stdin closes; while
//! a request is being handled, a heartbeat line every [`HEARTBEAT`] before the reply.
//! It sits above the layers, as `run` does; the protocol is `crate::agent`'s.

use crate::agent::{version, Hello, Reply, Request, HEARTBEAT};
use anyhow::{Context, Result};
use std::io::{BufRead, Write};
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

/// `cipherbench agent`: answers requests on stdin until it closes. Returns when the
/// coordinator hangs up; a load in progress is abandoned the moment stdin closes (the
/// process exits), so nothing outlives the coordinator's connection.
pub fn main() -> Result<()> {
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    // The reader owns stdin. EOF while a load runs ends the process at once (a load
    // holds nothing outside it); otherwise the loop below ends and drops what the
    // tunnel brought up (its TUN, gateway, iperf3) before the agent exits.
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                return;
            }
        }
        if LOADING.load(std::sync::atomic::Ordering::SeqCst) {
            std::process::exit(0);
        }
    });
    let mut peer = crate::tunnel::peer::PeerState::default();
    // An agent nobody talks to for this long ends (every run is bounded in time).
    const IDLE: Duration = Duration::from_secs(30 * 60);
    loop {
        let line = match rx.recv_timeout(IDLE) {
            Ok(l) => l,
            Err(_) => return Ok(()),
        };
        let reply = match serde_json::from_str::<Request>(&line) {
            Err(e) => Reply::Error {
                message: format!("not a request this agent understands ({e}): is the coordinator cipherbench {}?", version()),
            },
            // Answered at once, with no heartbeat's thread to start: its round trip
            // is the clock offset's uncertainty.
            Ok(Request::Clock) => Reply::Clock {
                unix_ns: crate::agent::unix_ns(),
            },
            Ok(req) => with_heartbeat(|| answer(req, &mut peer)),
        };
        write_reply(&reply)?;
    }
}

/// Runs `work`, writing [`Reply::Working`] every [`HEARTBEAT`] meanwhile. The
/// heartbeat's thread ends (and is joined) before this returns, so no heartbeat
/// ever follows the reply.
fn with_heartbeat(work: impl FnOnce() -> Reply) -> Reply {
    std::thread::scope(|s| {
        let (done, stop) = std::sync::mpsc::channel::<()>();
        s.spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = stop.recv_timeout(HEARTBEAT) {
                if write_reply(&Reply::Working).is_err() {
                    return;
                }
            }
        });
        let reply = work();
        drop(done);
        reply
    })
}

/// Writes one reply line to the coordinator.
fn write_reply(reply: &Reply) -> Result<()> {
    let mut text = serde_json::to_string(reply).context("encoding a reply")?;
    text.push('\n');
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("writing to the coordinator")
}

/// The reply to a request that takes work.
fn answer(req: Request, peer: &mut crate::tunnel::peer::PeerState) -> Reply {
    let failed = |e: anyhow::Error| Reply::Error {
        message: crate::progress::one_line(&e),
    };
    match req {
        Request::Hello => Reply::Hello(Box::new(Hello::here())),
        Request::Clock => Reply::Clock {
            unix_ns: crate::agent::unix_ns(),
        },
        Request::Load(req) => {
            LOADING.store(true, std::sync::atomic::Ordering::SeqCst);
            let r = crate::tls::agents::load(&req);
            LOADING.store(false, std::sync::atomic::Ordering::SeqCst);
            r.map_or_else(failed, |r| Reply::Load(Box::new(r)))
        }
        req => peer.handle(req).unwrap_or_else(failed),
    }
}

/// Set while a load runs (see [`main`]'s reader).
static LOADING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
