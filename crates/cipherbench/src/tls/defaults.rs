//! What a library does in a TLS handshake when nothing configures its groups, as
//! nginx runs it (`ssl_ecdh_curve auto` leaves the library's list) and as the load
//! generator's client does outside `tls handshake --groups`.
//!
//! Found by effect, not from the version: one TLS 1.3 handshake over a socket pair
//! between a client and a server both left at the library's defaults (a throwaway
//! P-256 certificate on the server). The server's ClientHello callback reads what
//! the client offered (`supported_groups`, extension 10) and sent key shares for
//! (`key_share`, 51); the finished handshake says which group it used. OpenSSL 3.0
//! offers x25519 first with one key share; 3.5 puts X25519MLKEM768 first with key
//! shares for it and x25519.
//!
//! The library this process runs on (the system's, or the one `--openssl` named
//! alone, see [`crate::library::run_under`]) is asked in this process, once for
//! nginx's side and the generator's; any other in a `cipherbench __tls-defaults` child
//! started under it.

use crate::library::Library;
use crate::results::Session;
use crate::supervisor::Spawn;
use anyhow::{anyhow, bail, Context, Result};
use cipherbench_model::tls::{DefaultGroups, SideGroups};
use foreign_types::ForeignTypeRef;
use openssl::ssl::{ClientHelloResponse, Ssl, SslContext, SslMethod, SslVersion};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// IANA extension numbers (RFC 8446 section 4.2).
const SUPPORTED_GROUPS: u32 = 10;
const KEY_SHARE: u32 = 51;
/// How long the handshake, or the child running it, may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The group ids of a `supported_groups` extension body: a 2-byte length, then
/// 2-byte ids. Pure; a malformed body gives the ids before the fault.
pub fn supported_groups(body: &[u8]) -> Vec<u16> {
    let Some((len, rest)) = split_u16(body) else {
        return Vec::new();
    };
    let list = &rest[..rest.len().min(usize::from(len))];
    list.chunks_exact(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect()
}

/// The groups of a client's `key_share` extension body: a 2-byte length, then
/// entries of a 2-byte group, a 2-byte key length and the key. Pure; a malformed
/// body gives the groups before the fault.
pub fn key_share_groups(body: &[u8]) -> Vec<u16> {
    let mut out = Vec::new();
    let Some((len, rest)) = split_u16(body) else {
        return out;
    };
    let mut entries = &rest[..rest.len().min(usize::from(len))];
    while let Some((group, after)) = split_u16(entries) {
        let Some((key_len, key)) = split_u16(after) else {
            break;
        };
        let Some(next) = key.get(usize::from(key_len)..) else {
            break;
        };
        out.push(group);
        entries = next;
    }
    out
}

fn split_u16(b: &[u8]) -> Option<(u16, &[u8])> {
    let (head, rest) = b.split_first_chunk::<2>()?;
    Some((u16::from_be_bytes(*head), rest))
}

/// What the ClientHello callback saw, by name.
#[derive(Default)]
struct Seen {
    offered: Vec<String>,
    key_shares: Vec<String>,
}

/// This process's library's defaults: one handshake between its own client and
/// server, both at their defaults.
pub fn here() -> Result<DefaultGroups> {
    let key = super::cert::key(super::suite::KeyType::EcdsaP256)?;
    let cert = super::cert::self_signed(&key)?;
    let seen = Arc::new(Mutex::new(None::<Seen>));
    let mut server = SslContext::builder(SslMethod::tls_server())?;
    server.set_certificate(&cert)?;
    server.set_private_key(&key)?;
    server.set_min_proto_version(Some(SslVersion::TLS1_3))?;
    let noted = Arc::clone(&seen);
    server.set_client_hello_callback(move |ssl, _alert| {
        let ptr = ssl.as_ptr().cast();
        let names = |ids: Vec<u16>| -> Vec<String> {
            ids.into_iter()
                .map(|id| {
                    // SAFETY: `ptr` is the live SSL this callback was called for.
                    unsafe { cipherbench_crypto::group_name(ptr, id) }
                        .unwrap_or_else(|| format!("0x{id:04x}"))
                })
                .collect()
        };
        // SAFETY: inside this SSL's ClientHello callback, as the function needs.
        let groups = unsafe { cipherbench_crypto::client_hello_extension(ptr, SUPPORTED_GROUPS) };
        // SAFETY: as above.
        let shares = unsafe { cipherbench_crypto::client_hello_extension(ptr, KEY_SHARE) };
        let mut slot = noted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *slot = Some(Seen {
            offered: names(supported_groups(&groups.unwrap_or_default())),
            key_shares: names(key_share_groups(&shares.unwrap_or_default())),
        });
        Ok(ClientHelloResponse::SUCCESS)
    });
    let server = server.build();
    let client = SslContext::builder(SslMethod::tls_client())?.build();
    let (c, s) = UnixStream::pair().context("a socket pair for the handshake")?;
    for end in [&c, &s] {
        end.set_read_timeout(Some(TIMEOUT))?;
        end.set_write_timeout(Some(TIMEOUT))?;
    }
    let serving = std::thread::spawn(move || -> Result<()> {
        let stream = Ssl::new(&server)?
            .accept(s)
            .map_err(|e| anyhow!("the server's side: {e}"))?;
        drop(stream);
        Ok(())
    });
    let stream = Ssl::new(&client)?
        .connect(c)
        .map_err(|e| anyhow!("the client's side: {e}"))?;
    // SAFETY: the stream's SSL is live and its handshake finished.
    let negotiated = unsafe { cipherbench_crypto::negotiated_group(stream.ssl().as_ptr().cast()) };
    drop(stream);
    serving
        .join()
        .map_err(|_| anyhow!("the server's side panicked"))??;
    let seen = seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take()
        .ok_or_else(|| anyhow!("the server never saw a ClientHello"))?;
    Ok(DefaultGroups {
        offered: seen.offered,
        key_shares: seen.key_shares,
        negotiated,
    })
}

/// Entry point of `cipherbench __tls-defaults`: prints [`here`] as JSON, or
/// `{"error": ...}`.
pub fn child_main() -> Result<()> {
    let json = match here() {
        Ok(d) => serde_json::to_string(&d)?,
        Err(e) => serde_json::json!({ "error": format!("{e:#}") }).to_string(),
    };
    println!("{json}");
    Ok(())
}

/// `library`'s defaults: in this process if it runs on it ([`Library::runs_here`]),
/// else in a child started under it.
pub fn of(library: &Library) -> Result<DefaultGroups> {
    if library.runs_here() {
        return here();
    }
    let exe = std::env::current_exe().context("finding cipherbench's own executable")?;
    let out = Spawn::new(&exe)
        .args(["__tls-defaults"])
        .loader(library.loader())
        .output(TIMEOUT)?;
    let line = out.stdout.trim();
    if let Ok(d) = serde_json::from_str::<DefaultGroups>(line) {
        return Ok(d);
    }
    match serde_json::from_str::<serde_json::Value>(line)
        .ok()
        .and_then(|v| v.get("error")?.as_str().map(str::to_string))
    {
        Some(e) => bail!("{e}"),
        None => bail!(
            "the child under it answered {line:?}: {}",
            out.stderr.trim()
        ),
    }
}

/// The defaults of nginx's side under each of `libraries` and of the load
/// generator's (this process's library), into the TLS record once per run (a resumed
/// run reads none again); one that cannot be read is a warning in `run.json`, not a
/// failed layer. The library this process runs on is read once, for both sides.
pub fn note(session: &mut Session, libraries: &[Library]) {
    let mut sides: Vec<(&str, String, Option<&Library>)> = libraries
        .iter()
        .map(|l| ("nginx", l.version(), Some(l)))
        .collect();
    sides.push((
        "load generator",
        cipherbench_crypto::info::library_version(),
        None,
    ));
    let mut own: Option<std::result::Result<DefaultGroups, String>> = None;
    for (side, library, lib) in sides {
        let known = &super::results(session).default_groups;
        if known.iter().any(|s| s.side == side && s.library == library) {
            continue;
        }
        let groups = match lib {
            Some(l) if !l.runs_here() => of(l).map_err(|e| crate::progress::one_line(&e)),
            _ => own
                .get_or_insert_with(|| here().map_err(|e| crate::progress::one_line(&e)))
                .clone(),
        };
        match groups {
            Ok(groups) => super::results(session).default_groups.push(SideGroups {
                side: side.into(),
                library,
                groups,
            }),
            Err(e) => session.record.warn(
                "tls",
                "default_groups_unknown",
                format!(
                    "the default TLS groups of {side}'s library ({library}) could not be read: {e}"
                ),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_extensions_read_to_their_groups_and_stop_at_a_fault() {
        // x25519, secp256r1, X25519MLKEM768.
        assert_eq!(
            supported_groups(&[0, 6, 0x00, 0x1d, 0x00, 0x17, 0x11, 0xec]),
            [0x1d, 0x17, 0x11ec]
        );
        // A length past the body: the whole ids in it.
        assert_eq!(supported_groups(&[0, 9, 0x00, 0x1d, 0x00]), [0x1d]);
        assert!(supported_groups(&[0]).is_empty());
        // Two shares: x25519 with a 2-byte key, secp256r1 with a 1-byte one.
        let shares = [0, 11, 0x00, 0x1d, 0, 2, 0xaa, 0xbb, 0x00, 0x17, 0, 1, 0xcc];
        assert_eq!(key_share_groups(&shares), [0x1d, 0x17]);
        // A key longer than what is left ends the list there.
        assert_eq!(
            key_share_groups(&[0, 8, 0x00, 0x1d, 0, 9, 1, 2, 3, 4]),
            [] as [u16; 0]
        );
        assert!(key_share_groups(&[]).is_empty());
    }

    #[test]
    fn this_librarys_default_handshake_is_read_back() {
        let d = here().expect("a handshake with the library's defaults");
        // Every library of ours offers x25519, sends at least one key share, and a
        // handshake of its own defaults agrees on a group it offered.
        assert!(d.offered.iter().any(|g| g == "x25519"), "{d:?}");
        assert!(!d.key_shares.is_empty(), "{d:?}");
        let negotiated = d.negotiated.clone().expect("a negotiated group");
        assert!(d.offered.contains(&negotiated), "{d:?}");
        assert!(d.key_shares.contains(&negotiated), "{d:?}");
    }
}
