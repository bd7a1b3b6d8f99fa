//! [`error_chain`]: the one-line text of an error and its causes, for the places that can
//! carry only text — a gRPC status message, a plugin registration status, a log line.

/// `err`, then each of its causes, `: `-separated, each once: a cause whose text the line
/// already ends with (an upstream-worded message that ends with its source) is not repeated.
///
/// ```
/// use std::error::Error;
///
/// #[derive(Debug)]
/// struct Write(std::io::Error);
/// impl std::fmt::Display for Write {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         f.write_str("writing the state")
///     }
/// }
/// impl Error for Write {
///     fn source(&self) -> Option<&(dyn Error + 'static)> {
///         Some(&self.0)
///     }
/// }
///
/// let err = Write(std::io::Error::other("disk full"));
/// assert_eq!(corral_proto::error_chain(&err), "writing the state: disk full");
/// ```
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|l| l as _)
        }
    }

    #[test]
    fn each_cause_once() {
        let io = Layer("disk full", None);
        let repeats = Layer("outer: disk full", Some(Box::new(io)));
        assert_eq!(error_chain(&repeats), "outer: disk full");
        let plain = Layer(
            "outer",
            Some(Box::new(Layer(
                "mid",
                Some(Box::new(Layer("disk full", None))),
            ))),
        );
        assert_eq!(error_chain(&plain), "outer: mid: disk full");
    }
}
