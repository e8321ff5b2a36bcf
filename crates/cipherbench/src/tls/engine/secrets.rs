//! What the server of a connection writes, opened by the generator itself: the
//! server-write record keys of a finished handshake, for the sampled receive path
//! (issue 30), which reads records off the socket and opens only some of them.
//!
//! OpenSSL keeps the handshake; the keys come from what it exposes. TLS 1.3: the
//! server's application traffic secret, given to the key log callback as
//! `SERVER_TRAFFIC_SECRET_0` (NSS key log format), kept in the connection's own
//! ex-data slot. TLS 1.2: the session's master secret and the two hello randoms.
//! Only AEAD suites: a CBC suite's records stay OpenSSL's to open.

use cipherbench_crypto::aead::AeadAlgorithm;
use cipherbench_crypto::tls_record::{RecordKeys, SuiteHash, Writer};
use openssl::ex_data::Index;
use openssl::ssl::{Ssl, SslContextBuilder, SslRef, SslVersion};
use std::sync::{Mutex, OnceLock};

/// The slot holding a connection's server traffic secret (TLS 1.3).
type Slot = Mutex<Option<Vec<u8>>>;

fn index() -> Option<Index<Ssl, Slot>> {
    static INDEX: OnceLock<Option<Index<Ssl, Slot>>> = OnceLock::new();
    *INDEX.get_or_init(|| Ssl::new_ex_index::<Slot>().ok())
}

/// The AEAD and hash of a suite by OpenSSL's name (TLS 1.2's `AES128-GCM-SHA256`,
/// TLS 1.3's `TLS_AES_128_GCM_SHA256`); None for a suite that is not AEAD.
pub fn aead_of(name: &str) -> Option<(AeadAlgorithm, SuiteHash)> {
    let algorithm = if name.contains("AES128-GCM") || name.contains("AES_128_GCM") {
        AeadAlgorithm::Aes128Gcm
    } else if name.contains("AES256-GCM") || name.contains("AES_256_GCM") {
        AeadAlgorithm::Aes256Gcm
    } else if name.contains("CHACHA20") {
        AeadAlgorithm::ChaCha20Poly1305
    } else {
        return None;
    };
    let hash = if name.ends_with("SHA384") {
        SuiteHash::Sha384
    } else {
        SuiteHash::Sha256
    };
    Some((algorithm, hash))
}

/// Has every connection of a context keep its server traffic secret (TLS 1.3).
/// OpenSSL formats a key log line only where a callback is set, so a context without
/// this does no such work.
pub fn capture(builder: &mut SslContextBuilder) {
    let Some(index) = index() else {
        return;
    };
    builder.set_keylog_callback(move |ssl, line| {
        let Some(hex) = line.strip_prefix("SERVER_TRAFFIC_SECRET_0 ") else {
            return;
        };
        let Some(secret) = hex
            .split(' ')
            .nth(1)
            .and_then(cipherbench_crypto::digest::from_hex)
        else {
            return;
        };
        if let Some(slot) = ssl.ex_data(index) {
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(secret);
        }
    });
}

/// Gives a new connection its slot (before its handshake).
pub fn slot(ssl: &mut Ssl) {
    if let Some(index) = index() {
        ssl.set_ex_data(index, Mutex::new(None));
    }
}

/// The keys that open what the server of a finished handshake writes, and the
/// sequence number of its first record after the handshake (TLS 1.3: 0; TLS 1.2: 1,
/// its Finished was 0). None for a suite that is not AEAD or a connection whose
/// secrets were not kept.
pub fn server_keys(ssl: &SslRef) -> Option<(RecordKeys, u64)> {
    let name = ssl.current_cipher()?.name();
    let (algorithm, hash) = aead_of(name)?;
    if ssl.version2()? == SslVersion::TLS1_3 {
        let secret = ssl.ex_data(index()?)?.lock().ok()?.clone()?;
        let keys = RecordKeys::tls13(algorithm, hash, &secret).ok()?;
        return Some((keys, 0));
    }
    let session = ssl.session()?;
    let mut master = vec![0u8; session.master_key_len()];
    let n = session.master_key(&mut master);
    master.truncate(n);
    let mut client_random = [0u8; 32];
    let mut server_random = [0u8; 32];
    if ssl.client_random(&mut client_random) != 32 || ssl.server_random(&mut server_random) != 32 {
        return None;
    }
    let keys = RecordKeys::tls12(
        algorithm,
        hash,
        &master,
        &client_random,
        &server_random,
        Writer::Server,
    )
    .ok();
    master.iter_mut().for_each(|b| *b = 0);
    Some((keys?, 1))
}

/// A test's TLS server for exactly `suite`: a fresh RSA key and certificate, the
/// suite's one protocol version.
#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]
pub(crate) fn acceptor(suite: &crate::tls::suite::Suite) -> openssl::ssl::SslAcceptor {
    use crate::tls::suite::Protocol;
    use openssl::ssl::{SslAcceptor, SslMethod};
    let key = crate::tls::cert::key(crate::tls::suite::KeyType::Rsa2048).unwrap();
    let x509 = crate::tls::cert::self_signed(&key).unwrap();
    let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server()).unwrap();
    b.set_private_key(&key).unwrap();
    b.set_certificate(&x509).unwrap();
    b.set_min_proto_version(Some(suite.protocol.version()))
        .unwrap();
    b.set_max_proto_version(Some(suite.protocol.version()))
        .unwrap();
    match suite.protocol {
        Protocol::Tls12 => b.set_cipher_list(suite.openssl).unwrap(),
        Protocol::Tls13 => b.set_ciphersuites(suite.openssl).unwrap(),
    }
    b.build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::engine::Client;
    use crate::tls::suite::Suite;
    use cipherbench_crypto::tls_record::{content, parse_header, RecordOpener, HEADER_LEN};
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    /// A real OpenSSL server on loopback that answers one request with `body` (in
    /// full 16 KiB records and the rest) and closes.
    fn serve_once(suite: &Suite, body: Vec<u8>) -> std::net::SocketAddr {
        let acceptor = acceptor(suite);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let (tcp, _) = listener.accept().unwrap();
            let mut tls = acceptor.accept(tcp).unwrap();
            let mut request = [0u8; 64];
            let _ = tls.read(&mut request).unwrap();
            // Full 16 KiB records, then the rest.
            tls.write_all(&body).unwrap();
            let _ = tls.shutdown();
        });
        addr
    }

    /// What a server sent, read off the socket record by record and opened with the
    /// keys taken from the client's OpenSSL; `skip` names application-data records
    /// (counted from 0) passed over unopened. The application data opened, and the
    /// content types seen.
    fn read_raw(suite: &Suite, addr: std::net::SocketAddr, skip: &[usize]) -> (Vec<u8>, Vec<u8>) {
        let client = Client::sampling(suite, false, None).unwrap();
        let ssl = client.ssl("localhost", None).unwrap();
        let tcp = TcpStream::connect(addr).unwrap();
        let mut tls = ssl.connect(tcp).unwrap();
        tls.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let (keys, seq) = server_keys(tls.ssl()).expect("the server's keys");
        let mut opener = RecordOpener::new(&keys, seq).unwrap();
        let tcp = tls.get_mut();
        let mut data = Vec::new();
        let mut types = Vec::new();
        let mut app = 0;
        loop {
            let mut header = [0u8; HEADER_LEN];
            if tcp.read_exact(&mut header).is_err() {
                break;
            }
            let (outer, len) = parse_header(&header);
            // TLS 1.3 hides every type inside; TLS 1.2's close_notify says its own.
            assert!(
                outer == content::APPLICATION_DATA || outer == content::ALERT,
                "{outer}"
            );
            let mut body = vec![0u8; len];
            tcp.read_exact(&mut body).unwrap();
            // A record is passed over only once it is known to be application data:
            // here by its length, as the sampled path does (a full record).
            if skip.contains(&app) && len == opener.full_record() {
                opener.skip(1);
                app += 1;
                continue;
            }
            let o = opener.open(&header, &mut body).unwrap();
            types.push(o.content_type);
            if o.content_type == content::APPLICATION_DATA {
                data.extend_from_slice(&body[o.start..o.start + o.len]);
                app += 1;
            }
        }
        (data, types)
    }

    #[test]
    fn records_off_the_socket_open_with_the_keys_from_openssl() {
        let mut body = vec![0u8; 70_000];
        cipherbench_crypto::random_bytes(&mut body).unwrap();
        for name in [
            "AES128-GCM-SHA256",
            "ECDHE-RSA-AES256-GCM-SHA384",
            "ECDHE-RSA-CHACHA20-POLY1305",
            "TLS_AES_128_GCM_SHA256",
            "TLS_AES_256_GCM_SHA384",
            "TLS_CHACHA20_POLY1305_SHA256",
        ] {
            let suite = Suite::find(name).unwrap();
            let (data, types) = read_raw(&suite, serve_once(&suite, body.clone()), &[]);
            assert_eq!(data.len(), body.len(), "{name}");
            assert!(data == body, "{name}: the plaintext differs");
            // The server's close_notify, opened as an alert.
            assert_eq!(types.last(), Some(&content::ALERT), "{name}: {types:?}");
            // Passing over the second full record keeps the sequence numbers: what
            // follows still opens, and is the body after that record.
            let (data, _) = read_raw(&suite, serve_once(&suite, body.clone()), &[1]);
            let full = cipherbench_crypto::tls_record::MAX_PLAINTEXT;
            assert_eq!(data.len(), body.len() - full, "{name}");
            assert!(
                data[..full] == body[..full] && data[full..] == body[2 * full..],
                "{name}"
            );
        }
    }

    #[test]
    fn only_aead_suites_are_opened_here() {
        assert_eq!(
            aead_of("ECDHE-RSA-AES256-GCM-SHA384"),
            Some((AeadAlgorithm::Aes256Gcm, SuiteHash::Sha384))
        );
        assert_eq!(
            aead_of("TLS_CHACHA20_POLY1305_SHA256"),
            Some((AeadAlgorithm::ChaCha20Poly1305, SuiteHash::Sha256))
        );
        assert_eq!(aead_of("AES128-SHA"), None);
        assert_eq!(aead_of("DES-CBC3-SHA"), None);
    }
}
