//! SHA-256 digests in the OCI spelling (`sha256:` and lowercase hex), of bytes at hand or of
//! what goes through a writer.

use std::io::{self, Write};

/// A writer that hashes (SHA-256) and counts what goes through it.
pub(super) struct Hashing<W> {
    inner: W,
    context: ring::digest::Context,
    bytes: u64,
}

impl<W: Write> Hashing<W> {
    pub(super) fn new(inner: W) -> Hashing<W> {
        Hashing {
            inner,
            context: ring::digest::Context::new(&ring::digest::SHA256),
            bytes: 0,
        }
    }

    /// `sha256:…` and the size of what was written, and the inner writer.
    pub(super) fn finish(self) -> (String, u64, W) {
        let digest = format!("sha256:{}", hex(self.context.finish().as_ref()));
        (digest, self.bytes, self.inner)
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let written = self.inner.write(buf)?;
        self.context.update(&buf[..written]);
        self.bytes += written as u64;
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `sha256:…` of `bytes`.
pub(super) fn digest(bytes: &[u8]) -> String {
    format!(
        "sha256:{}",
        hex(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref())
    )
}
