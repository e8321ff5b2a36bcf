//! The format as a user of the crate meets it: every size round-trips in both
//! algorithms with a key and with a passphrase; every kind of tampering (header,
//! chunk, tag, truncation, reordering, splicing, appending, wrong key) is refused
//! with the right chunk index and no plaintext; batching never changes the bytes;
//! and docs/FORMAT.md's test vectors are what the code produces.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test; clippy's allow-unwrap-in-tests does not reach helpers outside #[test] functions"
)]

use cipherbench_crypto::kdf::ScryptParams;
use cipherbench_stream::chunk::ChunkFailure;
use cipherbench_stream::header::{HeaderError, MAC_LEN};
use cipherbench_stream::{
    open, seal, Algorithm, ChunkError, Credential, Error, Header, KeySource, StreamKeys,
    HEADER_LEN, TAG_LEN,
};
use proptest::prelude::*;

const KEY: [u8; 32] = [7u8; 32];
/// Small chunks keep the tests fast and put many boundaries in small inputs.
const LOG2: u8 = 8;
const C: usize = 1 << LOG2;
const FAST_SCRYPT: ScryptParams = ScryptParams {
    log_n: 10,
    r: 8,
    p: 1,
};

fn header(algorithm: Algorithm, key_source: KeySource) -> Header {
    Header::random(algorithm, LOG2, key_source).unwrap()
}

fn data(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 31 + 7) as u8).collect()
}

fn key_sealed(plaintext: &[u8]) -> Vec<u8> {
    seal(
        header(Algorithm::Aes256Gcm, KeySource::KeyFile),
        Credential::Key(&KEY),
        plaintext,
    )
    .unwrap()
}

fn chunk_error(result: Result<Vec<u8>, Error>) -> ChunkError {
    match result {
        Err(Error::Chunk(e)) => e,
        other => panic!("expected a chunk error, got {other:?}"),
    }
}

#[test]
fn round_trips_every_boundary_size_in_both_algorithms_and_key_kinds() {
    for algorithm in [Algorithm::Aes256Gcm, Algorithm::ChaCha20Poly1305] {
        for (source, credential) in [
            (KeySource::KeyFile, Credential::Key(&KEY)),
            (
                KeySource::Scrypt(FAST_SCRYPT),
                Credential::Passphrase(b"correct horse"),
            ),
        ] {
            for n in [0, 1, C - 1, C, C + 1, 2 * C, 7 * C + 3, 40 * C] {
                let plaintext = data(n);
                let sealed = seal(header(algorithm, source), credential, &plaintext).unwrap();
                assert_eq!(
                    sealed.len() as u64,
                    HEADER_LEN as u64 + cipherbench_stream::sealed_len(n as u64, C),
                    "{algorithm:?} {n}"
                );
                assert_eq!(
                    open(&sealed, credential).unwrap(),
                    plaintext,
                    "{algorithm:?} {source:?} {n}"
                );
            }
        }
    }
}

#[test]
fn a_flipped_bit_anywhere_is_refused() {
    let plaintext = data(3 * C + 10);
    let sealed = key_sealed(&plaintext);
    let unit = C + TAG_LEN;
    // Every byte of the header, and in every chunk the first and last ciphertext
    // byte and the first and last tag byte.
    let mut positions: Vec<usize> = (0..HEADER_LEN).collect();
    for chunk in 0..4 {
        let start = HEADER_LEN + chunk * unit;
        let end = (start + unit).min(sealed.len());
        positions.extend([start, end - TAG_LEN - 1, end - TAG_LEN, end - 1]);
    }
    for &pos in &positions {
        for bit in [0, 7] {
            let mut bad = sealed.clone();
            bad[pos] ^= 1 << bit;
            let result = open(&bad, Credential::Key(&KEY));
            assert!(
                result.is_err(),
                "flip at byte {pos} bit {bit} went unnoticed"
            );
            if pos >= HEADER_LEN {
                let e = chunk_error(result);
                assert_eq!(e.index as usize, (pos - HEADER_LEN) / unit, "byte {pos}");
                assert_eq!(e.failure, ChunkFailure::Forged);
            }
        }
    }
    // Header flips in the MAC-covered fields other than the checked enums say "wrong
    // key or altered header".
    let mut bad = sealed.clone();
    bad[20] ^= 1; // the salt
    assert_eq!(
        open(&bad, Credential::Key(&KEY)),
        Err(Error::Header(HeaderError::BadMac))
    );
    let mut bad = sealed.clone();
    bad[HEADER_LEN - MAC_LEN] ^= 1; // the MAC
    assert_eq!(
        open(&bad, Credential::Key(&KEY)),
        Err(Error::Header(HeaderError::BadMac))
    );
}

#[test]
fn truncation_at_a_boundary_and_inside_a_chunk_is_refused() {
    let plaintext = data(3 * C);
    let sealed = key_sealed(&plaintext);
    let unit = C + TAG_LEN;
    // After chunk 1: chunk 1 was sealed as a middle chunk.
    let e = chunk_error(open(
        &sealed[..HEADER_LEN + 2 * unit],
        Credential::Key(&KEY),
    ));
    assert_eq!((e.index, e.failure), (1, ChunkFailure::Truncated));
    // Everything after the header.
    let e = chunk_error(open(&sealed[..HEADER_LEN], Credential::Key(&KEY)));
    assert_eq!((e.index, e.failure), (0, ChunkFailure::Missing));
    // Inside chunk 2's ciphertext, and inside its tag.
    let e = chunk_error(open(
        &sealed[..HEADER_LEN + 2 * unit + 100],
        Credential::Key(&KEY),
    ));
    assert_eq!((e.index, e.failure), (2, ChunkFailure::Forged));
    let e = chunk_error(open(
        &sealed[..HEADER_LEN + 2 * unit + 5],
        Credential::Key(&KEY),
    ));
    assert_eq!((e.index, e.failure), (2, ChunkFailure::ShorterThanTag(5)));
    let e = chunk_error(open(&sealed[..sealed.len() - 1], Credential::Key(&KEY)));
    assert_eq!((e.index, e.failure), (2, ChunkFailure::Forged));
    // Inside the header.
    assert_eq!(
        open(&sealed[..HEADER_LEN - 1], Credential::Key(&KEY)),
        Err(Error::Header(HeaderError::TooShort(HEADER_LEN - 1)))
    );
}

#[test]
fn reordered_appended_and_spliced_chunks_are_refused() {
    let plaintext = data(4 * C);
    let sealed = key_sealed(&plaintext);
    let unit = C + TAG_LEN;
    let chunk = |s: &[u8], i: usize| s[HEADER_LEN + i * unit..HEADER_LEN + (i + 1) * unit].to_vec();

    // Chunks 1 and 2 swapped.
    let mut swapped = sealed[..HEADER_LEN].to_vec();
    for i in [0, 2, 1, 3] {
        swapped.extend(chunk(&sealed, i));
    }
    let e = chunk_error(open(&swapped, Credential::Key(&KEY)));
    assert_eq!((e.index, e.failure), (1, ChunkFailure::Forged));

    // A copy of a chunk appended after the final chunk.
    let mut appended = sealed.clone();
    appended.extend(chunk(&sealed, 0));
    let e = chunk_error(open(&appended, Credential::Key(&KEY)));
    assert_eq!((e.index, e.failure), (3, ChunkFailure::Appended));

    // Two files under the same key: chunk 1 of another file, same position.
    let other = key_sealed(&plaintext);
    let mut spliced = sealed.clone();
    spliced[HEADER_LEN + unit..HEADER_LEN + 2 * unit].copy_from_slice(&chunk(&other, 1));
    let e = chunk_error(open(&spliced, Credential::Key(&KEY)));
    assert_eq!((e.index, e.failure), (1, ChunkFailure::Forged));

    // Another file's header in front of this file's chunks.
    let mut reheaded = other[..HEADER_LEN].to_vec();
    reheaded.extend_from_slice(&sealed[HEADER_LEN..]);
    let e = chunk_error(open(&reheaded, Credential::Key(&KEY)));
    assert_eq!((e.index, e.failure), (0, ChunkFailure::Forged));
}

#[test]
fn wrong_key_passphrase_or_key_kind_is_refused_at_the_header() {
    let sealed = key_sealed(&data(100));
    assert_eq!(
        open(&sealed, Credential::Key(&[8u8; 32])),
        Err(Error::Header(HeaderError::BadMac))
    );
    assert_eq!(
        open(&sealed, Credential::Key(&[7u8; 31])),
        Err(Error::Header(HeaderError::BadKeyLength(31)))
    );
    assert_eq!(
        open(&sealed, Credential::Passphrase(b"hunter2")),
        Err(Error::Header(HeaderError::WrongKeyKind {
            file: "a key file",
            given: "a passphrase"
        }))
    );
    let by_passphrase = seal(
        header(Algorithm::ChaCha20Poly1305, KeySource::Scrypt(FAST_SCRYPT)),
        Credential::Passphrase(b"hunter2"),
        &data(100),
    )
    .unwrap();
    assert_eq!(
        open(&by_passphrase, Credential::Passphrase(b"hunter3")),
        Err(Error::Header(HeaderError::BadMac))
    );
    assert!(matches!(
        open(&by_passphrase, Credential::Key(&KEY)),
        Err(Error::Header(HeaderError::WrongKeyKind { .. }))
    ));
    assert_eq!(
        open(b"PK\x03\x04 a zip file", Credential::Key(&KEY)),
        Err(Error::Header(HeaderError::NotAStream))
    );
}

#[test]
fn a_failed_batch_leaves_no_plaintext_in_the_output() {
    let plaintext = vec![0xAA; 3 * C];
    let sealed = key_sealed(&plaintext);
    let keys = StreamKeys::open(&sealed, Credential::Key(&KEY)).unwrap();
    let mut opener = keys.opener().unwrap();
    let mut body = sealed[HEADER_LEN..].to_vec();
    let last = body.len() - 1;
    body[last] ^= 1; // the final tag: chunks 0 and 1 verify first
    let mut out = vec![0u8; 3 * C];
    let e = opener.open_batch(0, &body, true, &mut out).unwrap_err();
    assert_eq!(e.index, 2);
    assert!(
        out.iter().all(|&b| b == 0),
        "verified chunks of a failed batch were left"
    );
}

#[test]
fn header_records_algorithm_chunk_size_and_key_source() {
    let h = header(Algorithm::ChaCha20Poly1305, KeySource::Scrypt(FAST_SCRYPT));
    let sealed = seal(h, Credential::Passphrase(b"pw"), b"x").unwrap();
    let parsed = Header::parse(&sealed).unwrap();
    assert_eq!(parsed, h);
    assert_eq!(parsed.chunk_size(), C);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// open(seal(x)) == x, and sealing in any batch split gives the same bytes.
    #[test]
    fn batching_never_changes_the_bytes(len in 0usize..(9 * C), split_chunks in 1usize..5) {
        let plaintext = data(len);
        let h = header(Algorithm::Aes256Gcm, KeySource::KeyFile);
        let whole = seal(h, Credential::Key(&KEY), &plaintext).unwrap();
        prop_assert_eq!(open(&whole, Credential::Key(&KEY)).unwrap(), plaintext.clone());

        let keys = StreamKeys::create(h, Credential::Key(&KEY)).unwrap();
        let mut sealer = keys.sealer().unwrap();
        let mut batched = keys.header_bytes().to_vec();
        let step = split_chunks * C;
        let mut index = 0u64;
        let mut offset = 0;
        loop {
            let end = (offset + step).min(len);
            // A batch is final when nothing follows it.
            let last = end == len;
            let piece = &plaintext[offset..end];
            let mut out = vec![0u8; sealer.sealed_len(piece.len())];
            let n = sealer.seal_batch(index, piece, last, &mut out).unwrap();
            batched.extend_from_slice(&out[..n]);
            if last {
                break;
            }
            index += (piece.len() / C) as u64;
            offset = end;
        }
        prop_assert_eq!(&batched, &whole);

        // And opening in batches agrees with opening in one go.
        let mut opener = keys.opener().unwrap();
        let body = &whole[HEADER_LEN..];
        let unit = C + TAG_LEN;
        let mut opened = Vec::new();
        let mut at = 0;
        let mut index = 0u64;
        while at < body.len() {
            let end = (at + split_chunks * unit).min(body.len());
            let last = end == body.len();
            let mut out = vec![0u8; opener.max_opened_len(end - at)];
            let n = opener.open_batch(index, &body[at..end], last, &mut out).unwrap();
            opened.extend_from_slice(&out[..n]);
            index += ((end - at) / unit) as u64;
            at = end;
        }
        prop_assert_eq!(opened, plaintext);
    }

    /// Any single changed byte is refused.
    #[test]
    fn any_changed_byte_is_refused(len in 0usize..(4 * C), pos in any::<prop::sample::Index>(), delta in 1u8..=255) {
        let sealed = key_sealed(&data(len));
        let mut bad = sealed.clone();
        let at = pos.index(bad.len());
        bad[at] = bad[at].wrapping_add(delta);
        prop_assert!(open(&bad, Credential::Key(&KEY)).is_err());
    }

    /// Any truncation or extension is refused.
    #[test]
    fn any_length_change_is_refused(len in 0usize..(4 * C), cut in 1usize..600, extra in proptest::collection::vec(any::<u8>(), 1..300)) {
        let sealed = key_sealed(&data(len));
        let keep = sealed.len().saturating_sub(cut);
        prop_assert!(open(&sealed[..keep], Credential::Key(&KEY)).is_err());
        let mut longer = sealed.clone();
        longer.extend_from_slice(&extra);
        prop_assert!(open(&longer, Credential::Key(&KEY)).is_err());
    }
}

// ---- docs/FORMAT.md test vectors ----

fn doc() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/FORMAT.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The hex between `<!-- begin NAME -->` and `<!-- end NAME -->` in FORMAT.md.
fn doc_hex(doc: &str, name: &str) -> String {
    let begin = format!("<!-- begin {name} -->");
    let end = format!("<!-- end {name} -->");
    let start = doc
        .find(&begin)
        .unwrap_or_else(|| panic!("{begin} not in FORMAT.md"))
        + begin.len();
    let stop = start
        + doc[start..]
            .find(&end)
            .unwrap_or_else(|| panic!("{end} not in FORMAT.md"));
    doc[start..stop]
        .chars()
        .filter(|c| c.is_ascii_hexdigit())
        .collect::<String>()
        .to_lowercase()
}

fn hex(bytes: &[u8]) -> String {
    cipherbench_crypto::digest::to_hex(bytes)
}

/// Pretty hex, 32 bytes a line, as pasted into FORMAT.md.
fn hex_lines(bytes: &[u8]) -> String {
    bytes.chunks(32).map(hex).collect::<Vec<_>>().join("\n")
}

fn vector_1() -> (Header, [u8; 32], Vec<u8>) {
    let key: [u8; 32] = std::array::from_fn(|i| i as u8);
    let h = Header {
        algorithm: Algorithm::Aes256Gcm,
        chunk_log2: 8,
        key_source: KeySource::KeyFile,
        salt: std::array::from_fn(|i| 0x10 + i as u8),
        nonce_prefix: std::array::from_fn(|i| 0xa0 + i as u8),
    };
    let plaintext: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
    (h, key, plaintext)
}

#[test]
fn format_md_vector_1_key_file_aes_256_gcm() {
    let (h, key, plaintext) = vector_1();
    let sealed = seal(h, Credential::Key(&key), &plaintext).unwrap();
    let mut header_key = [0u8; 32];
    cipherbench_crypto::hkdf::hkdf_sha256(
        &h.salt,
        &key,
        b"cipherbench-stream v1 header",
        &mut header_key,
    )
    .unwrap();
    let mut payload_key = [0u8; 32];
    cipherbench_crypto::hkdf::hkdf_sha256(
        &h.salt,
        &key,
        b"cipherbench-stream v1 payload",
        &mut payload_key,
    )
    .unwrap();
    let doc = doc();
    let want: [(&str, &[u8]); 3] = [
        ("vector-1-header-key", &header_key),
        ("vector-1-payload-key", &payload_key),
        ("vector-1-sealed", &sealed),
    ];
    for (name, got) in want {
        assert_eq!(
            doc_hex(&doc, name),
            hex(got),
            "docs/FORMAT.md {name} differs from what the code produces; the code gives:\n{}",
            hex_lines(got)
        );
    }
    assert_eq!(open(&sealed, Credential::Key(&key)).unwrap(), plaintext);
}

#[test]
fn format_md_vector_2_passphrase_chacha20_poly1305() {
    let h = Header {
        algorithm: Algorithm::ChaCha20Poly1305,
        chunk_log2: 8,
        key_source: KeySource::Scrypt(FAST_SCRYPT),
        salt: [0x5a; 16],
        nonce_prefix: [0; 7],
    };
    let plaintext = b"cipherbench".repeat(100);
    let sealed = seal(
        h,
        Credential::Passphrase(b"correct horse battery staple"),
        &plaintext,
    )
    .unwrap();
    let doc = doc();
    assert_eq!(
        doc_hex(&doc, "vector-2-header"),
        hex(&sealed[..HEADER_LEN]),
        "docs/FORMAT.md vector-2-header; the code gives:\n{}",
        hex_lines(&sealed[..HEADER_LEN])
    );
    assert_eq!(
        doc_hex(&doc, "vector-2-sha256"),
        hex(&cipherbench_crypto::digest::sha256(&sealed).unwrap()),
        "docs/FORMAT.md vector-2-sha256 ({} bytes sealed)",
        sealed.len()
    );
    assert_eq!(
        open(
            &sealed,
            Credential::Passphrase(b"correct horse battery staple")
        )
        .unwrap(),
        plaintext
    );
}
