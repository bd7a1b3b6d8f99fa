//! Writing to stdout without panicking: `corral … | head -1` closes the pipe early, and a
//! plain `println!` would panic on EPIPE. Commands print through [`outln!`], which returns
//! the write error; `main` exits quietly (status 0) when the error is a broken pipe.

use std::io::Write as _;

/// `println!` that returns the write error (with `?`) instead of panicking.
macro_rules! outln {
    () => { $crate::output::line(format_args!(""))? };
    ($($arg:tt)*) => { $crate::output::line(format_args!($($arg)*))? };
}
pub(crate) use outln;

/// Write one line to stdout.
pub(crate) fn line(args: std::fmt::Arguments<'_>) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_fmt(args)?;
    out.write_all(b"\n")
}

/// Whether `err` (or one of its causes) is a broken pipe on stdout.
pub(crate) fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
