//! [`KubeNrtApi`]: [`NrtApi`] over kube-rs' client (TLS, kubeconfig and in-cluster
//! credentials, token refresh), with raw requests so that every answer is bounded: a
//! deadline per call, a cap on the body read, and the `Retry-After` of a 429 kept.

use std::time::Duration;

use corral_nrt::{API_VERSION, NodeResourceTopology, PLURAL};
use http_body_util::BodyExt;
use kube::client::Body;

use super::api::{ApiError, NrtApi};
use crate::config::Credentials;

/// The longest a call may take, connection included.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer read: a NodeResourceTopology of 64 NUMA nodes with a hundred device
/// resources each is under 2 MiB.
pub(crate) const MAX_BODY_BYTES: usize = 4 << 20;

/// Why no client could be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig {path}")]
    Kubeconfig {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The pod's service account could not be read.
    #[error("in-cluster configuration (the pod's service account)")]
    InCluster(#[source] kube::config::InClusterError),
    /// The client could not be built from the configuration.
    #[error("building the API client")]
    Client(#[source] kube::Error),
}

/// NodeResourceTopology calls on a real API server.
#[derive(Clone)]
pub(crate) struct KubeNrtApi {
    client: kube::Client,
    timeout: Duration,
}

impl KubeNrtApi {
    /// A client with `credentials`. Reads files, opens no connection.
    pub(crate) async fn connect(credentials: &Credentials) -> Result<Self, ClientError> {
        let mut config = match credentials {
            Credentials::Kubeconfig(path) => {
                let file = kube::config::Kubeconfig::read_from(path).map_err(|source| {
                    ClientError::Kubeconfig {
                        path: path.clone(),
                        source,
                    }
                })?;
                kube::Config::from_custom_kubeconfig(file, &Default::default())
                    .await
                    .map_err(|source| ClientError::Kubeconfig {
                        path: path.clone(),
                        source,
                    })?
            }
            Credentials::InCluster => kube::Config::incluster().map_err(ClientError::InCluster)?,
        };
        // The publisher retries with its own backoff (honouring `Retry-After`, logging each
        // episode once); kube-rs' retry of 429/503 would hide both inside one call.
        config.default_retry = false;
        config.connect_timeout = Some(CALL_TIMEOUT);
        config.read_timeout = Some(CALL_TIMEOUT);
        config.write_timeout = Some(CALL_TIMEOUT);
        let client = kube::Client::try_from(config).map_err(ClientError::Client)?;
        Ok(Self {
            client,
            timeout: CALL_TIMEOUT,
        })
    }

    /// The same client with another deadline per call (tests shorten it).
    #[cfg(test)]
    pub(crate) fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    async fn call(
        &self,
        method: http::Method,
        path: String,
        body: Option<Vec<u8>>,
    ) -> Result<(http::StatusCode, Vec<u8>), ApiError> {
        let mut request = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::ACCEPT, "application/json");
        if body.is_some() {
            request = request.header(http::header::CONTENT_TYPE, "application/json");
        }
        let request = request
            .body(body.map_or_else(|| Body::from(Vec::new()), Body::from))
            .map_err(|e| ApiError::Transport(Box::new(e)))?;
        let exchange = async {
            let response = self
                .client
                .send(request)
                .await
                .map_err(|e| ApiError::Transport(Box::new(e)))?;
            let status = response.status();
            let retry_after = response
                .headers()
                .get(http::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            let body = http_body_util::Limited::new(response.into_body(), MAX_BODY_BYTES)
                .collect()
                .await
                .map_err(|e| {
                    if e.is::<http_body_util::LengthLimitError>() {
                        ApiError::TooLarge {
                            limit: MAX_BODY_BYTES,
                        }
                    } else {
                        ApiError::Transport(e)
                    }
                })?
                .to_bytes()
                .to_vec();
            if status == http::StatusCode::TOO_MANY_REQUESTS {
                return Err(ApiError::TooManyRequests { retry_after });
            }
            Ok((status, body))
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| ApiError::Timeout(self.timeout))?
    }
}

fn collection() -> String {
    format!("/apis/{API_VERSION}/{PLURAL}")
}

fn object(name: &str) -> String {
    format!("{}/{name}", collection())
}

/// The object in a 2xx answer, or the error another status means.
fn answer(status: http::StatusCode, body: &[u8]) -> Result<NodeResourceTopology, ApiError> {
    match status.as_u16() {
        200..=299 => serde_json::from_slice(body).map_err(ApiError::Malformed),
        404 => Err(ApiError::NotFound),
        409 => Err(ApiError::Conflict),
        code => Err(ApiError::Status {
            status: code,
            message: status_message(body),
        }),
    }
}

/// The message of a `Status` body, else the body's start; at most 200 characters.
fn status_message(body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct Status {
        message: Option<String>,
    }
    let text = serde_json::from_slice::<Status>(body)
        .ok()
        .and_then(|s| s.message)
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    text.chars().take(200).collect()
}

#[async_trait::async_trait]
impl NrtApi for KubeNrtApi {
    async fn get(&self, name: &str) -> Result<Option<NodeResourceTopology>, ApiError> {
        let (status, body) = self.call(http::Method::GET, object(name), None).await?;
        match answer(status, &body) {
            Ok(nrt) => Ok(Some(nrt)),
            Err(ApiError::NotFound) => Ok(None),
            Err(err) => Err(err),
        }
    }

    async fn create(&self, nrt: &NodeResourceTopology) -> Result<NodeResourceTopology, ApiError> {
        let body = serde_json::to_vec(nrt).map_err(ApiError::Malformed)?;
        let (status, body) = self
            .call(http::Method::POST, collection(), Some(body))
            .await?;
        match answer(status, &body) {
            // Someone created it first: read it and replace.
            Err(ApiError::Status { status: 409, .. }) => Err(ApiError::Conflict),
            other => other,
        }
    }

    async fn replace(&self, nrt: &NodeResourceTopology) -> Result<NodeResourceTopology, ApiError> {
        let body = serde_json::to_vec(nrt).map_err(ApiError::Malformed)?;
        let (status, body) = self
            .call(http::Method::PUT, object(&nrt.metadata.name), Some(body))
            .await?;
        answer(status, &body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_what_the_publisher_does_next() {
        let ok = br#"{"apiVersion":"topology.node.k8s.io/v1alpha2","kind":"NodeResourceTopology","metadata":{"name":"n","resourceVersion":"7"},"topologyPolicies":[],"zones":[]}"#;
        let nrt = answer(http::StatusCode::OK, ok).unwrap();
        assert_eq!(nrt.metadata.resource_version.as_deref(), Some("7"));
        assert!(matches!(
            answer(http::StatusCode::OK, b"<html>"),
            Err(ApiError::Malformed(_))
        ));
        assert!(matches!(
            answer(http::StatusCode::NOT_FOUND, b""),
            Err(ApiError::NotFound)
        ));
        assert!(matches!(
            answer(http::StatusCode::CONFLICT, b""),
            Err(ApiError::Conflict)
        ));
        let forbidden = br#"{"kind":"Status","message":"noderesourcetopologies.topology.node.k8s.io \"n\" is forbidden"}"#;
        match answer(http::StatusCode::FORBIDDEN, forbidden) {
            Err(ApiError::Status { status, message }) => {
                assert_eq!(status, 403);
                assert!(message.ends_with("is forbidden"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        let long = vec![b'x'; 10_000];
        match answer(http::StatusCode::INTERNAL_SERVER_ERROR, &long) {
            Err(ApiError::Status { message, .. }) => assert_eq!(message.len(), 200),
            other => panic!("{other:?}"),
        }
    }
}
