//! [`NrtApi`]: the three calls the publisher makes on NodeResourceTopology objects, and
//! [`ApiError`], the answers it must tell apart. The real one is `kube_api::KubeNrtApi`;
//! tests put scripted servers behind the same trait.

use std::time::Duration;

use corral_nrt::NodeResourceTopology;

/// Reads and writes one cluster-scoped NodeResourceTopology.
#[async_trait::async_trait]
pub(crate) trait NrtApi: Send + Sync {
    /// The object named `name`, or `None` when the server has none.
    async fn get(&self, name: &str) -> Result<Option<NodeResourceTopology>, ApiError>;
    /// Create `nrt`; the server's copy (with its `resourceVersion`).
    async fn create(&self, nrt: &NodeResourceTopology) -> Result<NodeResourceTopology, ApiError>;
    /// Replace the object with `nrt`, whose `resourceVersion` must be the server's.
    async fn replace(&self, nrt: &NodeResourceTopology) -> Result<NodeResourceTopology, ApiError>;
}

/// Why a call did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    /// The object changed since it was read (409): read it again.
    #[error("the object changed on the server since it was read (409 Conflict)")]
    Conflict,
    /// The object is not there (404 on a replace): create it.
    #[error("the object is not on the server (404 Not Found)")]
    NotFound,
    /// The server asks to slow down (429), for `retry_after` when it says.
    #[error("the server asks to slow down (429 Too Many Requests)")]
    TooManyRequests {
        /// The `Retry-After` header, when it held a number of seconds.
        retry_after: Option<Duration>,
    },
    /// Any other error status, with the server's message (cut to 200 characters).
    #[error("the server answered {status}: {message}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The `Status` object's message, or the start of the body.
        message: String,
    },
    /// The answer's body is larger than any NodeResourceTopology corral writes.
    #[error("the answer is larger than {limit} bytes")]
    TooLarge {
        /// The largest body read.
        limit: usize,
    },
    /// The answer is not a NodeResourceTopology.
    #[error("the answer is not a NodeResourceTopology")]
    Malformed(#[source] serde_json::Error),
    /// No answer in time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The request did not reach the server, or the connection failed.
    #[error("the request failed")]
    Transport(#[source] Box<dyn std::error::Error + Send + Sync>),
}
