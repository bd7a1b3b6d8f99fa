//! A writer of POSIX ustar archives with every header field chosen by the caller, none
//! taken from the host: the same entries give the same bytes on every machine.
//!
//! Why not the `tar` crate: an image here is a dozen entries with short names, which fixed
//! ustar headers (below) hold exactly; `tar` would add three crates to the graph and its
//! `Builder` copies the host's metadata (mtimes, owners, modes) unless every header is
//! overwritten by hand anyway — the part that makes an archive reproducible.

use std::io::{self, Read, Write};

/// The size of a header and of the blocks contents are padded to.
const BLOCK: usize = 512;

/// What an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A regular file of this many bytes, its contents following the header.
    File(u64),
    /// A directory.
    Directory,
}

/// One entry's header: its path (relative, no leading `/`; a directory's without the
/// trailing `/`, which the writer adds), permission bits and owner. The modification time
/// is always 0.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Header<'a> {
    /// The path inside the archive.
    pub(crate) path: &'a str,
    /// File or directory.
    pub(crate) kind: Kind,
    /// The permission bits (e.g. `0o755`).
    pub(crate) mode: u32,
    /// The owner's numeric uid and gid.
    pub(crate) owner: u32,
}

/// Why an entry cannot be written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UstarError {
    /// The path does not fit a ustar name field (100 bytes; no prefix split is done).
    #[error("path {0:?} is longer than a ustar name (100 bytes)")]
    LongPath(String),
    /// The sink failed.
    #[error("writing the archive")]
    Io(#[from] io::Error),
    /// The contents were shorter or longer than the header said.
    #[error("{path:?}: the header says {declared} bytes, the contents had {actual}")]
    SizeMismatch {
        /// The entry.
        path: String,
        /// The size in the header.
        declared: u64,
        /// The bytes read.
        actual: u64,
    },
}

/// Writes `header` and `contents` (read to its end; empty for a directory) to `out`.
pub(crate) fn append(
    out: &mut impl Write,
    header: &Header<'_>,
    contents: &mut impl Read,
) -> Result<(), UstarError> {
    out.write_all(&encode(header)?)?;
    let Kind::File(declared) = header.kind else {
        return Ok(());
    };
    let actual = io::copy(contents, out)?;
    if actual != declared {
        return Err(UstarError::SizeMismatch {
            path: header.path.to_owned(),
            declared,
            actual,
        });
    }
    out.write_all(&[0; BLOCK][..padding(actual)])?;
    Ok(())
}

/// The end of an archive: two zero blocks.
pub(crate) fn finish(out: &mut impl Write) -> io::Result<()> {
    out.write_all(&[0; 2 * BLOCK])
}

/// Zero bytes after `len` bytes of contents, up to the next block.
fn padding(len: u64) -> usize {
    let rest = (len % BLOCK as u64) as usize;
    if rest == 0 { 0 } else { BLOCK - rest }
}

/// The 512-byte ustar header of `header`.
fn encode(header: &Header<'_>) -> Result<[u8; BLOCK], UstarError> {
    let (name, typeflag, size) = match header.kind {
        Kind::File(size) => (header.path.to_owned(), b'0', size),
        Kind::Directory => (format!("{}/", header.path), b'5', 0),
    };
    if name.len() > 100 {
        return Err(UstarError::LongPath(name));
    }
    let mut block = [0u8; BLOCK];
    block[..name.len()].copy_from_slice(name.as_bytes());
    octal(&mut block[100..108], u64::from(header.mode));
    octal(&mut block[108..116], u64::from(header.owner));
    octal(&mut block[116..124], u64::from(header.owner));
    octal(&mut block[124..136], size);
    octal(&mut block[136..148], 0);
    block[156] = typeflag;
    block[257..263].copy_from_slice(b"ustar\0");
    block[263..265].copy_from_slice(b"00");
    // The checksum is taken with its own field as spaces, then written as six octal
    // digits, a NUL and a space.
    block[148..156].copy_from_slice(b"        ");
    let sum: u64 = block.iter().map(|&b| u64::from(b)).sum();
    octal(&mut block[148..155], sum);
    block[155] = b' ';
    Ok(block)
}

/// `value` in octal, zero-padded to fill `field` but its last byte, which is NUL.
fn octal(field: &mut [u8], value: u64) {
    let digits = format!("{value:0width$o}", width = field.len() - 1);
    debug_assert_eq!(digits.len(), field.len() - 1, "{value} overflows the field");
    field[..digits.len()].copy_from_slice(digits.as_bytes());
    field[field.len() - 1] = 0;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_block_aligned_and_checksummed() {
        let mut out = Vec::new();
        let dir = Header {
            path: "etc",
            kind: Kind::Directory,
            mode: 0o755,
            owner: 0,
        };
        append(&mut out, &dir, &mut io::empty()).unwrap();
        let file = Header {
            path: "etc/passwd",
            kind: Kind::File(5),
            mode: 0o644,
            owner: 0,
        };
        append(&mut out, &file, &mut &b"root\n"[..]).unwrap();
        finish(&mut out).unwrap();
        assert_eq!(out.len(), 5 * BLOCK);
        assert_eq!(&out[..4], b"etc/");
        assert_eq!(&out[BLOCK + 124..BLOCK + 136], b"00000000005\0");
        assert_eq!(&out[2 * BLOCK..2 * BLOCK + 5], b"root\n");
        // The checksum as GNU tar computes it.
        let header = &out[BLOCK..2 * BLOCK];
        let mut spaced = header.to_vec();
        spaced[148..156].copy_from_slice(b"        ");
        let sum: u64 = spaced.iter().map(|&b| u64::from(b)).sum();
        let written = std::str::from_utf8(&header[148..154]).unwrap();
        assert_eq!(u64::from_str_radix(written, 8).unwrap(), sum);
    }

    #[test]
    fn a_wrong_size_and_a_long_path_are_refused() {
        let file = Header {
            path: "a",
            kind: Kind::File(3),
            mode: 0o644,
            owner: 0,
        };
        let short = append(&mut Vec::new(), &file, &mut &b"ab"[..]);
        assert!(matches!(
            short,
            Err(UstarError::SizeMismatch { actual: 2, .. })
        ));
        let long = "d/".repeat(60);
        let dir = Header {
            path: &long,
            kind: Kind::Directory,
            mode: 0o755,
            owner: 0,
        };
        let refused = append(&mut Vec::new(), &dir, &mut io::empty());
        assert!(matches!(refused, Err(UstarError::LongPath(_))));
    }
}
