//! A real Kubernetes API server for one test: etcd and the standalone CRD API server
//! (`apiextensions-apiserver`) from the bundle `cargo xtask apiserver-bundle` prepares, on
//! free loopback ports, with a CA, a serving certificate and a `system:masters` client
//! certificate made for it, everything in a temporary directory removed at the end.
//!
//! The server serves CustomResourceDefinitions and their resources only: no core `v1`, no
//! `/api` or `/apis` discovery, so typed clients work and discovery-driven ones (most of
//! `kubectl`) do not; [`ApiServer::kubectl`] with `get --raw`, `create --raw`,
//! `replace --raw` and `delete --raw` does. Its `/readyz` never passes `informer-sync` (the
//! Service informer has no Service resource to list): readiness is `/readyz` without it.
//!
//! Every method blocks (processes and short sleeps, each wait bounded): from an async test,
//! call them on a blocking thread (`tokio::task::spawn_blocking`) or from a multi-thread
//! runtime, so the code under test keeps running meanwhile.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use credentials::{kubeconfig, write_certificates};

use crate::workspace_root;

mod credentials;

/// How long etcd and the API server get to become ready: generous, for a busy machine.
pub const APISERVER_READY_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a new CRD gets to be Established and its resources served.
pub const CRD_SERVED_TIMEOUT: Duration = Duration::from_secs(60);

/// Every request `kubectl` makes for [`ApiServer::kubectl`] is bounded by this.
const KUBECTL_REQUEST_TIMEOUT: &str = "--request-timeout=20s";

/// The pause between two polls of a condition.
const POLL: Duration = Duration::from_millis(250);

/// Admission plugins the CRD server enables by default that need what it does not serve
/// (namespaces, webhooks' Services, admission policies).
const DISABLED_ADMISSION: &str = "NamespaceLifecycle,MutatingAdmissionPolicy,\
MutatingAdmissionWebhook,ValidatingAdmissionPolicy,ValidatingAdmissionWebhook";

/// The prepared bundle: `bin/etcd`, `bin/apiextensions-apiserver`, `bin/kubectl`.
#[derive(Debug, Clone)]
pub struct ApiServerBundle {
    dir: PathBuf,
}

/// Why there is no bundle to test with: the tests print it and skip.
#[derive(Debug, thiserror::Error)]
pub enum NoBundle {
    /// `cargo xtask test` could not prepare it (`CORRAL_APISERVER_SKIP`).
    #[error("the API server bundle could not be prepared: {0}")]
    NotPrepared(String),
    /// Nothing ready where it is looked for.
    #[error("no API server bundle at {} (run `cargo xtask apiserver-bundle`)", .0.display())]
    Missing(PathBuf),
}

impl ApiServerBundle {
    /// The bundle `cargo xtask test` names in `CORRAL_APISERVER_BUNDLE` (or the reason it
    /// gave in `CORRAL_APISERVER_SKIP`), else `target/apiserver-bundle` of the workspace,
    /// if its `READY` marker is there.
    pub fn locate() -> Result<ApiServerBundle, NoBundle> {
        if let Ok(why) = std::env::var("CORRAL_APISERVER_SKIP") {
            return Err(NoBundle::NotPrepared(why));
        }
        let dir = std::env::var_os("CORRAL_APISERVER_BUNDLE")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join("target/apiserver-bundle"));
        if dir.join("READY").is_file() {
            Ok(ApiServerBundle { dir })
        } else {
            Err(NoBundle::Missing(dir))
        }
    }

    /// The bundle's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn program(&self, name: &str) -> PathBuf {
        self.dir.join("bin").join(name)
    }
}

/// What went wrong running the API server.
#[derive(Debug, thiserror::Error)]
pub enum ApiServerError {
    /// Generating the CA or a certificate.
    #[error("generating the test certificates")]
    Certificates(#[from] rcgen::Error),
    /// A file or directory of the fixture.
    #[error("{}", path.display())]
    Io {
        /// The file, directory or program.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// A process exited while it was awaited.
    #[error("{program} exited ({status}); its log ends:\n{log}")]
    Exited {
        /// `etcd` or `apiextensions-apiserver`.
        program: &'static str,
        /// How it ended.
        status: std::process::ExitStatus,
        /// The last lines it wrote.
        log: String,
    },
    /// A condition did not hold within its bound.
    #[error("{what} not within {} s; last: {last}", bound.as_secs())]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        bound: Duration,
        /// The last answer seen (an error, a status, a log's end).
        last: String,
    },
    /// `kubectl` failed.
    #[error("kubectl {args} failed: {stderr}")]
    Kubectl {
        /// Its arguments after the kubeconfig.
        args: String,
        /// What it wrote to standard error.
        stderr: String,
    },
    /// A manifest that is not YAML or JSON.
    #[error("reading {} as YAML", path.display())]
    Manifest {
        /// The manifest.
        path: PathBuf,
        /// The parser's complaint (boxed: it is large).
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    /// A manifest that is not a CustomResourceDefinition with what its resources need.
    #[error("{} is not a CustomResourceDefinition with {missing}", path.display())]
    NotACrd {
        /// The manifest.
        path: PathBuf,
        /// The field missing.
        missing: &'static str,
    },
}

/// A running etcd and API server; dropping it kills and reaps both and removes its files.
///
/// # Example
///
/// ```no_run
/// use corral_testkit::{ApiServer, ApiServerBundle};
///
/// let bundle = match ApiServerBundle::locate() {
///     Ok(bundle) => bundle,
///     Err(why) => return eprintln!("skipped: {why}"),
/// };
/// let mut server = ApiServer::start(&bundle).unwrap();
/// let crd = corral_testkit::workspace_root().join("deploy/crd/noderesourcetopologies.yaml");
/// server.apply_crd(&crd).unwrap();
/// // A client reads `server.kubeconfig_path()`; the server can crash and come back.
/// server.stop_apiserver().unwrap();
/// server.start_apiserver().unwrap();
/// let list = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies";
/// assert!(server.kubectl(&["get", "--raw", list]).unwrap().contains("NodeResourceTopologyList"));
/// ```
#[derive(Debug)]
pub struct ApiServer {
    bundle: ApiServerBundle,
    port: u16,
    etcd_url: String,
    /// Killed after the server, in `Drop`.
    etcd: Child,
    server: Option<Child>,
    /// Removed last (fields drop after `Drop::drop`).
    dir: tempfile::TempDir,
}

impl ApiServer {
    /// Generates the certificates, starts etcd, then the API server, and waits until it is
    /// ready (each within [`APISERVER_READY_TIMEOUT`]).
    pub fn start(bundle: &ApiServerBundle) -> Result<ApiServer, ApiServerError> {
        let dir = tempfile::Builder::new()
            .prefix("corral-apiserver-")
            .tempdir()
            .map_err(|source| io_error(std::env::temp_dir(), source))?;
        let [port, etcd_port, peer_port] = free_ports()?;
        write_certificates(dir.path())?;
        let kubeconfig = kubeconfig(dir.path(), port);
        write(&dir.path().join("kubeconfig"), &kubeconfig)?;
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let etcd = Command::new(bundle.program("etcd"))
            .current_dir(dir.path())
            .arg("--name=corral-test")
            .arg(format!("--data-dir={}", dir.path().join("etcd").display()))
            .arg(format!("--listen-client-urls={etcd_url}"))
            .arg(format!("--advertise-client-urls={etcd_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=corral-test={peer_url}"))
            // A test's data need not survive a power cut; etcd outlives the API server.
            .arg("--unsafe-no-fsync")
            .stdin(Stdio::null())
            .stdout(log_file(dir.path(), "etcd.log")?)
            .stderr(log_file(dir.path(), "etcd.log")?)
            .spawn()
            .map_err(|source| io_error(bundle.program("etcd"), source))?;
        let mut server = ApiServer {
            bundle: bundle.clone(),
            port,
            etcd_url,
            etcd,
            server: None,
            dir,
        };
        server.wait_for_etcd()?;
        server.start_apiserver()?;
        Ok(server)
    }

    /// The server's address, `https://127.0.0.1:PORT` (the same after a restart).
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// A kubeconfig for the server, as the `system:masters` client.
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// The CA (PEM) that signed the serving and client certificates.
    pub fn ca_cert_path(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// The client certificate (PEM, `O=system:masters`) and its key.
    pub fn client_cert_paths(&self) -> (PathBuf, PathBuf) {
        (
            self.dir.path().join("client.crt"),
            self.dir.path().join("client.key"),
        )
    }

    /// A directory for the test's own files, removed with the server.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Whether the API server process is running (etcd always is).
    pub fn apiserver_running(&self) -> bool {
        self.server.is_some()
    }

    /// Kills the API server (SIGKILL, as a crash) and reaps it; etcd and its data stay.
    pub fn stop_apiserver(&mut self) -> Result<(), ApiServerError> {
        if let Some(mut server) = self.server.take() {
            // Err only when it has already exited: reaping it below is all there is to do.
            let _ = server.kill();
            server.wait().map_err(|source| {
                io_error(self.bundle.program("apiextensions-apiserver"), source)
            })?;
        }
        Ok(())
    }

    /// Starts the API server (on the same port, with the same etcd) unless it runs, and
    /// waits until it is ready, within [`APISERVER_READY_TIMEOUT`].
    pub fn start_apiserver(&mut self) -> Result<(), ApiServerError> {
        if self.server.is_some() {
            return Ok(());
        }
        let dir = self.dir.path();
        let file = |name: &str| dir.join(name).display().to_string();
        let program = self.bundle.program("apiextensions-apiserver");
        let child = Command::new(&program)
            .current_dir(dir)
            .arg(format!("--etcd-servers={}", self.etcd_url))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={}", self.port))
            .arg(format!("--tls-cert-file={}", file("server.crt")))
            .arg(format!("--tls-private-key-file={}", file("server.key")))
            .arg(format!("--client-ca-file={}", file("ca.crt")))
            .arg(format!("--kubeconfig={}", file("kubeconfig")))
            .arg(format!(
                "--authentication-kubeconfig={}",
                file("kubeconfig")
            ))
            .arg(format!("--authorization-kubeconfig={}", file("kubeconfig")))
            .arg("--authentication-skip-lookup")
            .arg("--enable-priority-and-fairness=false")
            .arg(format!("--disable-admission-plugins={DISABLED_ADMISSION}"))
            .arg("--profiling=false")
            .stdin(Stdio::null())
            .stdout(log_file(dir, "apiserver.log")?)
            .stderr(log_file(dir, "apiserver.log")?)
            .spawn()
            .map_err(|source| io_error(program, source))?;
        self.server = Some(child);
        self.wait_until_ready()
    }

    /// Runs the bundle's `kubectl` with the server's kubeconfig (and a bounded request
    /// timeout) and `args`; its standard output.
    pub fn kubectl(&self, args: &[&str]) -> Result<String, ApiServerError> {
        let program = self.bundle.program("kubectl");
        let out = Command::new(&program)
            .env_remove("KUBECONFIG")
            // Its discovery cache goes under $HOME/.kube: the fixture's, not the user's.
            .env("HOME", self.dir.path())
            .arg(format!("--kubeconfig={}", self.kubeconfig_path().display()))
            .arg(KUBECTL_REQUEST_TIMEOUT)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|source| io_error(program, source))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(ApiServerError::Kubectl {
                args: args.join(" "),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            })
        }
    }

    /// `GET path`, retried until it answers 200 (a new resource answers 404, or 429 with
    /// Retry-After, for a moment), within `bound`; the body.
    pub fn get_when_served(&self, path: &str, bound: Duration) -> Result<String, ApiServerError> {
        let deadline = Instant::now() + bound;
        loop {
            match self.kubectl(&["get", "--raw", path]) {
                Ok(body) => return Ok(body),
                Err(err) if Instant::now() >= deadline => {
                    return Err(ApiServerError::Timeout {
                        what: format!("GET {path} answering 200"),
                        bound,
                        last: err.to_string(),
                    });
                }
                Err(_) => std::thread::sleep(POLL),
            }
        }
    }

    /// Creates (or replaces) the CustomResourceDefinition in the YAML or JSON manifest at
    /// `path`, waits until it is Established and a list of its resources (storage version)
    /// answers 200, within [`CRD_SERVED_TIMEOUT`].
    pub fn apply_crd(&self, path: &Path) -> Result<(), ApiServerError> {
        let text = std::fs::read_to_string(path).map_err(|source| io_error(path, source))?;
        let mut crd: Value =
            serde_saphyr::from_str(&text).map_err(|source| ApiServerError::Manifest {
                path: path.to_path_buf(),
                source: Box::new(source),
            })?;
        let served = CrdNames::of(&crd).map_err(|missing| ApiServerError::NotACrd {
            path: path.to_path_buf(),
            missing,
        })?;
        const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
        let this = format!("{CRDS}/{}", served.name);
        let json = self.dir.path().join(format!("{}.json", served.name));
        write(&json, &crd.to_string())?;
        let file = json.display().to_string();
        match self.kubectl(&["create", "--raw", CRDS, "-f", &file]) {
            Ok(_) => {}
            Err(ApiServerError::Kubectl { stderr, .. }) if stderr.contains("AlreadyExists") => {
                let current: Value = serde_json::from_str(&self.kubectl(&["get", "--raw", &this])?)
                    .unwrap_or_default();
                crd["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
                write(&json, &crd.to_string())?;
                self.kubectl(&["replace", "--raw", &this, "-f", &file])?;
            }
            Err(err) => return Err(err),
        }
        let deadline = Instant::now() + CRD_SERVED_TIMEOUT;
        loop {
            let current: Value =
                serde_json::from_str(&self.kubectl(&["get", "--raw", &this])?).unwrap_or_default();
            let conditions = current["status"]["conditions"].as_array().cloned();
            let established = conditions.iter().flatten().any(|condition| {
                condition["type"] == "Established" && condition["status"] == "True"
            });
            if established {
                break;
            }
            if Instant::now() >= deadline {
                return Err(ApiServerError::Timeout {
                    what: format!("{} Established", served.name),
                    bound: CRD_SERVED_TIMEOUT,
                    last: current["status"].to_string(),
                });
            }
            std::thread::sleep(POLL);
        }
        let list = format!(
            "/apis/{}/{}/{}",
            served.group, served.version, served.plural
        );
        let left = deadline.saturating_duration_since(Instant::now());
        self.get_when_served(&list, left.max(POLL)).map(drop)
    }

    fn wait_for_etcd(&mut self) -> Result<(), ApiServerError> {
        let address = self.etcd_url.trim_start_matches("http://").to_owned();
        let deadline = Instant::now() + APISERVER_READY_TIMEOUT;
        loop {
            if let Some(status) = self
                .etcd
                .try_wait()
                .map_err(|source| io_error(self.bundle.program("etcd"), source))?
            {
                return Err(ApiServerError::Exited {
                    program: "etcd",
                    status,
                    log: self.log_tail("etcd.log"),
                });
            }
            let last = match etcd_health(&address) {
                Ok(body) if body.contains(r#""health":"true""#) => return Ok(()),
                Ok(body) => body,
                Err(err) => err.to_string(),
            };
            if Instant::now() >= deadline {
                return Err(ApiServerError::Timeout {
                    what: "etcd healthy".into(),
                    bound: APISERVER_READY_TIMEOUT,
                    last,
                });
            }
            std::thread::sleep(POLL);
        }
    }

    fn wait_until_ready(&mut self) -> Result<(), ApiServerError> {
        let deadline = Instant::now() + APISERVER_READY_TIMEOUT;
        loop {
            let server = self.server.as_mut().expect("the server was just started");
            if let Some(status) = server.try_wait().map_err(|source| {
                io_error(self.bundle.program("apiextensions-apiserver"), source)
            })? {
                self.server = None;
                return Err(ApiServerError::Exited {
                    program: "apiextensions-apiserver",
                    status,
                    log: self.log_tail("apiserver.log"),
                });
            }
            // `informer-sync` never passes: the Service informer has nothing to list.
            let last = match self.kubectl(&["get", "--raw", "/readyz?exclude=informer-sync"]) {
                Ok(_) => return Ok(()),
                Err(err) => err.to_string(),
            };
            if Instant::now() >= deadline {
                return Err(ApiServerError::Timeout {
                    what: "the API server ready".into(),
                    bound: APISERVER_READY_TIMEOUT,
                    last: format!("{last}; its log ends:\n{}", self.log_tail("apiserver.log")),
                });
            }
            std::thread::sleep(POLL);
        }
    }

    /// The last lines of one of the fixture's logs.
    fn log_tail(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        // Err only when a process already exited; `wait` reaps it either way.
        if let Some(mut server) = self.server.take() {
            let _ = server.kill();
            let _ = server.wait();
        }
        let _ = self.etcd.kill();
        let _ = self.etcd.wait();
    }
}

/// What serving a CRD's resources takes, from its manifest.
struct CrdNames {
    name: String,
    group: String,
    plural: String,
    /// The storage version.
    version: String,
}

impl CrdNames {
    fn of(crd: &Value) -> Result<CrdNames, &'static str> {
        if crd["kind"] != "CustomResourceDefinition" {
            return Err("kind CustomResourceDefinition");
        }
        let text = |value: &Value, missing| value.as_str().map(str::to_owned).ok_or(missing);
        let versions = crd["spec"]["versions"].as_array().ok_or("spec.versions")?;
        let storage = versions
            .iter()
            .find(|version| version["storage"] == true)
            .ok_or("a storage version")?;
        Ok(CrdNames {
            name: text(&crd["metadata"]["name"], "metadata.name")?,
            group: text(&crd["spec"]["group"], "spec.group")?,
            plural: text(&crd["spec"]["names"]["plural"], "spec.names.plural")?,
            version: text(&storage["name"], "the storage version's name")?,
        })
    }
}

/// Where the fixture's ports are drawn from: below Linux's default ephemeral range
/// (32768-60999), so no client connection's source port and no other `bind(0)` takes the
/// API server's port while it is stopped between a `stop_apiserver` and a `start_apiserver`.
const PORTS: std::ops::Range<u16> = 20000..32768;

/// Three distinct free loopback ports from [`PORTS`], drawn at random (each held bound until
/// all are found, so parallel fixtures rarely draw the same).
fn free_ports() -> Result<[u16; 3], ApiServerError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    let mut state = u64::from(nanos) << 20 ^ u64::from(std::process::id()) | 1;
    let mut held = Vec::with_capacity(3);
    let mut last_error = None;
    for _ in 0..1000 {
        // xorshift64: any spread will do.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let span = u64::from(PORTS.end - PORTS.start);
        let port = PORTS.start + u16::try_from(state % span).expect("below the span");
        match TcpListener::bind(("127.0.0.1", port)) {
            Ok(listener) => held.push((port, listener)),
            Err(err) => last_error = Some(err),
        }
        if held.len() == 3 {
            return Ok([held[0].0, held[1].0, held[2].0]);
        }
    }
    let source = last_error.unwrap_or_else(|| std::io::Error::other("no port drawn"));
    Err(io_error(
        format!("127.0.0.1:{}-{}", PORTS.start, PORTS.end - 1),
        source,
    ))
}

/// `GET /health` of etcd at `address` (HTTP/1.0, bounded by socket timeouts); the body.
fn etcd_health(address: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut answer = String::new();
    stream.take(64 * 1024).read_to_string(&mut answer)?;
    Ok(answer)
}

pub(super) fn write(path: &Path, text: &str) -> Result<(), ApiServerError> {
    std::fs::write(path, text).map_err(|source| io_error(path, source))
}

/// A log file a child appends to (each restart's lines after the last's).
fn log_file(dir: &Path, name: &str) -> Result<std::fs::File, ApiServerError> {
    let path = dir.join(name);
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|source| io_error(path, source))
}

fn io_error(path: impl Into<PathBuf>, source: std::io::Error) -> ApiServerError {
    ApiServerError::Io {
        path: path.into(),
        source,
    }
}

#[cfg(test)]
mod tests;
