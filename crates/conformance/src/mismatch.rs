//! [`Mismatch`]: why one case of a vector file failed, and the [`differs!`] and
//! [`bad_case!`] macros that build one.

/// Why one case failed: corral answered differently from upstream, or the case could not be
/// run as written. Its text is the failure line's reason (after `<file>: case <case>: `).
///
/// `?` on a reason given as text (`ok_or("…")?`) makes it a [`Mismatch::BadCase`]: such
/// reasons say what of the case could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Mismatch {
    /// corral's answer differs from the vector's: what, expected and actual, in the suite's
    /// words.
    #[error("{0}")]
    Differs(String),
    /// The case cannot be run as written: a field missing or of the wrong type, a name that
    /// refers to nothing, an input corral refuses to build.
    #[error("{0}")]
    BadCase(String),
}

impl From<String> for Mismatch {
    fn from(why: String) -> Self {
        Mismatch::BadCase(why)
    }
}

impl From<&str> for Mismatch {
    fn from(why: &str) -> Self {
        Mismatch::BadCase(why.to_owned())
    }
}

/// A [`Mismatch::Differs`], its text as `format!` makes it.
macro_rules! differs {
    ($($arg:tt)*) => {
        $crate::mismatch::Mismatch::Differs(format!($($arg)*))
    };
}

/// A [`Mismatch::BadCase`], its text as `format!` makes it.
macro_rules! bad_case {
    ($($arg:tt)*) => {
        $crate::mismatch::Mismatch::BadCase(format!($($arg)*))
    };
}

pub(crate) use {bad_case, differs};
