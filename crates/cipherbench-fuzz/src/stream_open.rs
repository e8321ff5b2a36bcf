//! Target `stream_open`: the `seal`/`open` file format (`cipherbench-stream`).
//!
//! Byte 0 picks the mode. Even: the rest is a hostile file, opened as it is and
//! behind a genuine header (so the chunk parser is reached): no panic, and nothing
//! opens (a fuzzer cannot forge a tag). Odd: bytes 1..6 describe an edit and the rest
//! is plaintext; it is sealed under a fixed key and header (256-byte chunks, so small
//! inputs cross many chunk boundaries), then: the untouched file opens to the
//! plaintext, whole and in batches of 1 to 4 chunks alike; the edited file (a byte
//! changed, a cut, bytes appended, two chunks swapped), if it differs, is refused
//! and leaves no plaintext in the batch output.

use cipherbench_stream::{
    open, seal, Algorithm, Credential, Header, KeySource, StreamKeys, HEADER_LEN, TAG_LEN,
};

const KEY: [u8; 32] = [0x42; 32];
const LOG2: u8 = 8;
const C: usize = 1 << LOG2;

fn header() -> Header {
    Header {
        algorithm: Algorithm::Aes256Gcm,
        chunk_log2: LOG2,
        key_source: KeySource::KeyFile,
        salt: [7; 16],
        nonce_prefix: [9; 7],
    }
}

fn edit(sealed: &[u8], op: u8, a: usize, b: usize, value: u8) -> Vec<u8> {
    let mut out = sealed.to_vec();
    let unit = C + TAG_LEN;
    match op % 4 {
        0 => {
            let i = a % out.len();
            out[i] ^= value.max(1);
        }
        1 => out.truncate(a % out.len()),
        2 => out.extend(std::iter::repeat_n(value, 1 + b % 300)),
        _ => {
            let chunks = (out.len() - HEADER_LEN) / unit;
            if chunks >= 2 {
                let (x, y) = (a % chunks, b % chunks);
                if x != y {
                    let (x, y) = (x.min(y), x.max(y));
                    let sx = HEADER_LEN + x * unit;
                    let sy = HEADER_LEN + y * unit;
                    let cx = out[sx..sx + unit].to_vec();
                    let cy = out[sy..sy + unit].to_vec();
                    out[sx..sx + unit].copy_from_slice(&cy);
                    out[sy..sy + unit].copy_from_slice(&cx);
                }
            }
        }
    }
    out
}

/// See the module documentation.
pub fn check(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let key = Credential::Key(&KEY);
    if mode % 2 == 0 {
        let _ = open(rest, key);
        let keys = StreamKeys::create(header(), key).expect("keys");
        let mut file = keys.header_bytes().to_vec();
        file.extend_from_slice(rest);
        assert!(open(&file, key).is_err(), "forged chunks opened");
        return;
    }
    if rest.len() < 6 {
        return;
    }
    let (spec, plaintext) = rest.split_at(6);
    let sealed = seal(header(), key, plaintext).expect("seal");
    assert_eq!(open(&sealed, key).expect("open"), plaintext);

    // Opening in batches of 1 to 4 chunks gives the same plaintext.
    let keys = StreamKeys::open(&sealed, key).expect("header");
    let mut opener = keys.opener().expect("opener");
    let unit = C + TAG_LEN;
    let step = (1 + spec[5] as usize % 4) * unit;
    let body = &sealed[HEADER_LEN..];
    let (mut at, mut index, mut opened) = (0, 0u64, Vec::new());
    while at < body.len() {
        let end = (at + step).min(body.len());
        let mut out = vec![0u8; opener.max_opened_len(end - at)];
        let n = opener
            .open_batch(index, &body[at..end], end == body.len(), &mut out)
            .expect("batch");
        opened.extend_from_slice(&out[..n]);
        index += ((end - at) / unit) as u64;
        at = end;
    }
    assert_eq!(opened, plaintext);

    let a = u16::from_be_bytes([spec[1], spec[2]]) as usize;
    let b = u16::from_be_bytes([spec[3], spec[4]]) as usize;
    let edited = edit(&sealed, spec[0], a, b, spec[5]);
    if edited != sealed {
        assert!(open(&edited, key).is_err(), "an edited file opened");
        if edited.len() > HEADER_LEN && edited[..HEADER_LEN] == sealed[..HEADER_LEN] {
            let body = &edited[HEADER_LEN..];
            let mut out = vec![0xEE; opener.max_opened_len(body.len())];
            if opener.open_batch(0, body, true, &mut out).is_err() {
                assert!(
                    out.iter().all(|&x| x == 0),
                    "plaintext left after a failure"
                );
            }
        }
    }
}
