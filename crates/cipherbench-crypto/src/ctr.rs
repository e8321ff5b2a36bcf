//! The AES-128-CTR keystream at any offset: content a writer and a far reader can
//! both make from one key, as the TLS layer's served files are (the load
//! generator's sampled path compares the body records it opens with it, at their
//! offsets, without the file). The counter block is the offset in 16-byte blocks,
//! big-endian, from zero (NIST SP 800-38A §6.5 with the whole block as counter).

use crate::ffi::CipherCtx;
use crate::CryptoError;

/// A keyed keystream.
pub struct Keystream {
    ctx: CipherCtx,
    zeros: Vec<u8>,
}

impl Keystream {
    /// The keystream of a 16-byte key.
    pub fn new(key: &[u8]) -> Result<Keystream, CryptoError> {
        Ok(Keystream {
            ctx: CipherCtx::new("AES-128-CTR", key, None, true)?,
            zeros: Vec::new(),
        })
    }

    /// Writes the keystream's bytes `offset..offset + out.len()` into `out`.
    pub fn at(&mut self, offset: u64, out: &mut [u8]) -> Result<(), CryptoError> {
        let block = offset / 16;
        let skip = (offset % 16) as usize;
        let mut iv = [0u8; 16];
        iv[8..].copy_from_slice(&block.to_be_bytes());
        self.ctx.start(&iv)?;
        if skip > 0 {
            let mut lead = [0u8; 16];
            self.ctx.update_in_place(&mut lead[..skip])?;
        }
        out.fill(0);
        self.ctx.update_in_place(out)?;
        Ok(())
    }

    /// The keystream from `offset` on, `len` bytes at a time, to `sink`.
    pub fn stream(
        &mut self,
        len: u64,
        chunk: usize,
        mut sink: impl FnMut(&[u8]) -> std::io::Result<()>,
    ) -> Result<(), CryptoError> {
        let iv = [0u8; 16];
        self.ctx.start(&iv)?;
        self.zeros.resize(chunk.max(16), 0);
        let mut left = len;
        while left > 0 {
            let n = left.min(self.zeros.len() as u64) as usize;
            let buf = &mut self.zeros[..n];
            buf.fill(0);
            self.ctx.update_in_place(buf)?;
            sink(buf).map_err(|e| CryptoError::Library(format!("writing the keystream: {e}")))?;
            left -= n as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_offset_gives_the_bytes_the_stream_has_there() {
        let mut ks = Keystream::new(&[9u8; 16]).unwrap();
        let mut whole = Vec::new();
        ks.stream(100_000, 4096, |b| {
            whole.extend_from_slice(b);
            Ok(())
        })
        .unwrap();
        assert_eq!(whole.len(), 100_000);
        for (offset, len) in [
            (0u64, 1usize),
            (15, 2),
            (16, 16),
            (4095, 3000),
            (99_000, 1000),
        ] {
            let mut out = vec![0u8; len];
            ks.at(offset, &mut out).unwrap();
            assert_eq!(
                out,
                whole[offset as usize..offset as usize + len],
                "{offset}"
            );
        }
        // NIST SP 800-38A F.5.1's key, counter block zero: AES(key, 0^128).
        let mut ks = Keystream::new(&[
            0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6, 0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf,
            0x4f, 0x3c,
        ])
        .unwrap();
        let mut first = [0u8; 16];
        ks.at(0, &mut first).unwrap();
        assert_eq!(
            first,
            [
                0x7d, 0xf7, 0x6b, 0x0c, 0x1a, 0xb8, 0x99, 0xb3, 0x3e, 0x42, 0xf0, 0x47, 0xb9, 0x1b,
                0x54, 0x6f
            ]
        );
    }
}
