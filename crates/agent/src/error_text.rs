//! How the agent prints an error: the error, then each cause, `: `-separated, each once.
//! Library errors whose message already ends with their source's (upstream-compatible
//! texts such as `new static policy error: <cause>`) do not print that cause twice.

pub(crate) use corral_proto::error_chain;

/// [`error_chain`] of an `anyhow::Error` (its contexts and causes).
pub(crate) fn anyhow_chain(err: &anyhow::Error) -> String {
    error_chain(err.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer: {source}")]
    struct Repeats {
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Plain {
        #[source]
        source: std::io::Error,
    }

    #[test]
    fn each_cause_is_printed_once() {
        let io = || std::io::Error::other("disk full");
        assert_eq!(error_chain(&Repeats { source: io() }), "outer: disk full");
        assert_eq!(error_chain(&Plain { source: io() }), "outer: disk full");
        let err = anyhow::Error::new(Repeats { source: io() }).context("writing the state");
        assert_eq!(anyhow_chain(&err), "writing the state: outer: disk full");
    }
}
