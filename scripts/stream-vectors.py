#!/usr/bin/env python3
"""An independent implementation of docs/FORMAT.md (version 1), written from the
document alone, that reproduces its test vectors. Needs Python's `cryptography`
package. Usage: scripts/stream-vectors.py  (prints the vectors; exit 1 on mismatch
with docs/FORMAT.md)."""
import hashlib, hmac, re, sys, pathlib
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

def hkdf(salt, ikm, info, n=32):
    prk = hmac.new(salt, ikm, hashlib.sha256).digest()
    out, t, i = b"", b"", 1
    while len(out) < n:
        t = hmac.new(prk, t + info + bytes([i]), hashlib.sha256).digest()
        out += t
        i += 1
    return out[:n]

def seal(alg, k, source, params, salt, prefix, secret, plaintext):
    log_n, r, p = params if source == 2 else (0, 0, 0)
    body = b"CBSTREAM" + bytes([1, alg, k, source, log_n, r, p]) + salt + prefix
    if source == 1:
        master = secret
    else:
        master = hashlib.scrypt(secret, salt=salt, n=1 << log_n, r=r, p=p, maxmem=1 << 28, dklen=32)
    header_key = hkdf(salt, master, b"cipherbench-stream v1 header")
    payload_key = hkdf(salt, master, b"cipherbench-stream v1 payload")
    header = body + hmac.new(header_key, body, hashlib.sha256).digest()
    aead = AESGCM(payload_key) if alg == 1 else ChaCha20Poly1305(payload_key)
    c = 1 << k
    pieces = [plaintext[i:i + c] for i in range(0, len(plaintext), c)] or [b""]
    out = header
    for i, piece in enumerate(pieces):
        nonce = prefix + i.to_bytes(4, "big") + bytes([1 if i == len(pieces) - 1 else 0])
        out += aead.encrypt(nonce, piece, header)
    return header_key, payload_key, out

def doc_hex(doc, name):
    m = re.search(r"<!-- begin %s -->(.*?)<!-- end %s -->" % (name, name), doc, re.S)
    return "".join(ch for ch in m.group(1) if ch in "0123456789abcdef")

doc = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "FORMAT.md").read_text()
hk, pk, v1 = seal(1, 8, 1, None, bytes(range(0x10, 0x20)), bytes(range(0xa0, 0xa7)),
                  bytes(range(32)), bytes(j % 256 for j in range(300)))
_, _, v2 = seal(2, 8, 2, (10, 8, 1), b"\x5a" * 16, b"\x00" * 7,
                b"correct horse battery staple", b"cipherbench" * 100)
got = {
    "vector-1-header-key": hk.hex(),
    "vector-1-payload-key": pk.hex(),
    "vector-1-sealed": v1.hex(),
    "vector-2-header": v2[:70].hex(),
    "vector-2-sha256": hashlib.sha256(v2).hexdigest(),
}
bad = 0
for name, value in got.items():
    ok = doc_hex(doc, name) == value
    bad += not ok
    print(f"{name}: {'matches' if ok else 'DIFFERS'}")
sys.exit(1 if bad else 0)
