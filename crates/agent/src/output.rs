//! Writing to stdout without panicking: `corral … | head -1` closes the pipe early, and a
//! plain `println!` would panic on EPIPE. Commands print through [`outln!`], whose write
//! error is a [`StdoutError`]; `main` exits quietly (status 0) only when that error says the
//! reader closed stdout. A broken pipe anywhere else — the agent's socket closed before it
//! answered — is an error like any other.

use std::io::Write as _;

/// `println!` that returns the write error (with `?`) instead of panicking.
macro_rules! outln {
    () => { $crate::output::line(format_args!(""))? };
    ($($arg:tt)*) => { $crate::output::line(format_args!($($arg)*))? };
}
pub(crate) use outln;

/// A line could not be written to standard output.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StdoutError {
    /// The reader went away (`corral … | head -1`): nothing is left to say.
    #[error("standard output was closed")]
    Closed(#[source] std::io::Error),
    /// Any other failure (a full disk behind a redirect): the output is incomplete.
    #[error("cannot write to standard output")]
    Write(#[source] std::io::Error),
}

impl From<std::io::Error> for StdoutError {
    fn from(err: std::io::Error) -> Self {
        if err.kind() == std::io::ErrorKind::BrokenPipe {
            StdoutError::Closed(err)
        } else {
            StdoutError::Write(err)
        }
    }
}

/// Write one line to stdout.
pub(crate) fn line(args: std::fmt::Arguments<'_>) -> Result<(), StdoutError> {
    let mut out = std::io::stdout().lock();
    out.write_fmt(args)?;
    out.write_all(b"\n")?;
    Ok(())
}

/// Write `data` to stdout as it is (a generated script or page).
pub(crate) fn bytes(data: &[u8]) -> Result<(), StdoutError> {
    let mut out = std::io::stdout().lock();
    out.write_all(data)?;
    out.flush()?;
    Ok(())
}

/// Whether `err` comes from a write to a closed stdout ([`StdoutError::Closed`] is in its
/// chain). No other error is: an `io::ErrorKind::BrokenPipe` from a socket is not.
pub(crate) fn is_stdout_closed(err: &anyhow::Error) -> bool {
    err.chain()
        .any(|cause| matches!(cause.downcast_ref(), Some(StdoutError::Closed(_))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_closed_stdout_is_quiet() {
        let pipe = || std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let closed = anyhow::Error::new(StdoutError::from(pipe())).context("printing");
        assert!(is_stdout_closed(&closed));
        // The agent's socket closed: the same io error kind, not stdout.
        let socket = anyhow::Error::new(pipe()).context("calling the agent");
        assert!(!is_stdout_closed(&socket));
        let full = StdoutError::from(std::io::Error::from(std::io::ErrorKind::StorageFull));
        assert!(!is_stdout_closed(&anyhow::Error::new(full)));
    }
}
