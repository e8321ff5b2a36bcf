//! `cipherbench agent`'s own loop: read a request per line on stdin, hand it to the
//! layer it belongs to (a load share to `tls::agents`, a tunnel end to
//! `tunnel::peer`), write the reply as one line on stdout, until stdin closes. It
//! sits above the layers, as `run` does; the protocol is `crate::agent`'s.

use crate::agent::{version, Hello, Reply, Request};
use anyhow::{Context, Result};
use std::io::{BufRead, Write};
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
    let mut out = std::io::stdout().lock();
    loop {
        let line = match rx.recv_timeout(IDLE) {
            Ok(l) => l,
            Err(_) => return Ok(()),
        };
        let reply = match serde_json::from_str::<Request>(&line) {
            Err(e) => Reply::Error {
                message: format!("not a request this agent understands ({e}): is the coordinator cipherbench {}?", version()),
            },
            Ok(Request::Hello) => Reply::Hello(Box::new(Hello::here())),
            Ok(Request::Clock) => Reply::Clock {
                unix_ns: crate::agent::unix_ns(),
            },
            Ok(Request::Load(req)) => {
                LOADING.store(true, std::sync::atomic::Ordering::SeqCst);
                let r = crate::tls::agents::load(&req);
                LOADING.store(false, std::sync::atomic::Ordering::SeqCst);
                match r {
                    Ok(r) => Reply::Load(Box::new(r)),
                    Err(e) => Reply::Error {
                        message: crate::progress::one_line(&e),
                    },
                }
            }
            Ok(req) => peer.handle(req).unwrap_or_else(|e| Reply::Error {
                message: crate::progress::one_line(&e),
            }),
        };
        let mut text = serde_json::to_string(&reply).context("encoding a reply")?;
        text.push('\n');
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .context("writing to the coordinator")?;
    }
}

/// Set while a load runs (see [`main`]'s reader).
static LOADING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
