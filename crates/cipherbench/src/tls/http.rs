//! The little HTTP/1.1 the load generator speaks: one GET with `Connection: close`,
//! and the response head parsed for its status and `Content-Length`. Pure functions
//! over bytes, so they are tested without a server.

/// The request for `path` on `host`.
pub fn request(host: &str, path: &str) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: cipherbench\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    )
    .into_bytes()
}

/// A parsed response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Status code.
    pub status: u16,
    /// `Content-Length`, if present.
    pub content_length: Option<u64>,
    /// Length of the head including the blank line; body bytes follow.
    pub len: usize,
}

/// What parsing the bytes received so far produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// The head is not complete yet.
    Partial,
    /// A complete head.
    Done(Head),
    /// Not an HTTP/1.x response head.
    Invalid,
}

/// Longest head accepted.
pub const MAX_HEAD: usize = 16 * 1024;

/// Parses a response head from the start of `bytes`.
pub fn parse_head(bytes: &[u8]) -> Parsed {
    let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else {
        return if bytes.len() > MAX_HEAD {
            Parsed::Invalid
        } else {
            Parsed::Partial
        };
    };
    let Ok(text) = std::str::from_utf8(&bytes[..end]) else {
        return Parsed::Invalid;
    };
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    let Some(status) = parts.next().and_then(|c| c.parse::<u16>().ok()) else {
        return Parsed::Invalid;
    };
    if !version.starts_with("HTTP/1.") {
        return Parsed::Invalid;
    }
    let mut content_length = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Parsed::Invalid;
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            match value.trim().parse::<u64>() {
                Ok(n) => content_length = Some(n),
                Err(_) => return Parsed::Invalid,
            }
        }
    }
    Parsed::Done(Head {
        status,
        content_length,
        len: end + 4,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nginx_heads() {
        let raw = b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nContent-Type: application/octet-stream\r\nContent-Length: 1024\r\nConnection: close\r\n\r\nBODY";
        assert_eq!(
            parse_head(raw),
            Parsed::Done(Head {
                status: 200,
                content_length: Some(1024),
                len: raw.len() - 4
            })
        );
        let not_found = b"HTTP/1.1 404 Not Found\r\ncontent-length: 153\r\n\r\n";
        assert!(matches!(
            parse_head(not_found),
            Parsed::Done(Head {
                status: 404,
                content_length: Some(153),
                ..
            })
        ));
    }

    #[test]
    fn waits_for_a_whole_head_and_refuses_garbage() {
        assert_eq!(
            parse_head(b"HTTP/1.1 200 OK\r\nContent-Len"),
            Parsed::Partial
        );
        assert_eq!(parse_head(b"SSH-2.0-OpenSSH\r\n\r\n"), Parsed::Invalid);
        assert_eq!(
            parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n"),
            Parsed::Invalid
        );
        assert_eq!(parse_head(&vec![b'a'; MAX_HEAD + 1]), Parsed::Invalid);
    }

    #[test]
    fn builds_a_close_request() {
        let r = String::from_utf8(request("127.0.0.1", "/f/1024")).unwrap();
        assert!(r.starts_with("GET /f/1024 HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
        assert!(r.contains("Connection: close\r\n") && r.ends_with("\r\n\r\n"));
    }
}
