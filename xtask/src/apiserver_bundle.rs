//! The real Kubernetes API server the NodeResourceTopology tests publish to, built from
//! Debian sid's packages: `target/apiserver-bundle/bin/` holds `etcd` (etcd-server),
//! `kubectl` and `apiextensions-apiserver`, the standalone CRD API server `go build` makes
//! in GOPATH mode from `golang-k8s-apiextensions-apiserver-dev` and the `golang-*-dev`
//! packages it depends on, with sid's Go. `READY` names the packages' versions.
//!
//! Prepared by `cargo xtask test` before the tests (which reach no network), or by
//! `cargo xtask apiserver-bundle`; `READY` means done, so a second run does nothing. The
//! package lists, `.deb`s, Go sources and build cache (about 3 GB) are removed once the
//! binaries are in `bin/`. When it cannot be prepared (no Debian archive, the packages gone
//! from sid, a build failure), the reason is printed and the tests skip saying so.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Result, anyhow, bail};

use crate::debian::{self, PrivateApt, output};

/// The bundle's directory under the workspace root.
pub(crate) const BUNDLE_DIR: &str = "target/apiserver-bundle";

/// The Debian suite everything comes from.
const SUITE: &str = "sid";

/// The Go sources of the API server; its root is the server's `main` package.
const SERVER_SOURCE_PACKAGE: &str = "golang-k8s-apiextensions-apiserver-dev";
const SERVER_IMPORT_PATH: &str = "k8s.io/apiextensions-apiserver";

/// The Go toolchain (compiler and standard library) that builds it.
const GO_PACKAGES: [&str; 2] = ["golang-1.27-go", "golang-1.27-src"];
const GOROOT: &str = "usr/lib/go-1.27";

/// The bundle's programs: (package, path in the package).
const PROGRAMS: [(&str, &str); 2] = [
    ("etcd-server", "usr/bin/etcd"),
    ("kubectl", "usr/bin/kubectl"),
];

/// The bundle, prepared if it is not yet; `Err` with the reason it cannot be.
pub(crate) fn ensure(root: &Path) -> Result<PathBuf> {
    let dir = root.join(BUNDLE_DIR);
    if dir.join("READY").exists() {
        return Ok(dir);
    }
    let started = Instant::now();
    // What an earlier, unfinished attempt left would be mixed with the new files.
    let (work, bin) = (dir.join("work"), dir.join("bin"));
    debian::remove_stale(&work)?;
    debian::remove_stale(&bin)?;
    let built = build(&work, &bin);
    // Gigabytes of sources and cache: removed whether the build worked or not.
    debian::remove_stale(&work)?;
    let versions = built?;
    let ready = format!("{versions}prepared in {} s\n", started.elapsed().as_secs());
    std::fs::write(dir.join("READY"), ready)
        .map_err(|e| anyhow!("marking {} ready: {e}", dir.display()))?;
    Ok(dir)
}

/// Downloads, unpacks and builds under `work`, copies the programs to `bin`; returns the
/// `READY` lines naming every package's version and what the programs say of theirs.
fn build(work: &Path, bin: &Path) -> Result<String> {
    let (debs, unpacked) = (work.join("debs"), work.join("root"));
    let apt = PrivateApt::update(&work.join("apt"), SUITE)?;
    let fetched = download(&apt, &debs);
    apt.forget();
    fetched?;
    debian::unpack_all(&debs, &unpacked)?;
    let mut versions = String::new();
    for package in [SERVER_SOURCE_PACKAGE, GO_PACKAGES[0]]
        .into_iter()
        .chain(PROGRAMS.map(|(package, _)| package))
    {
        let version = debian::deb_version(&debs, package)?;
        versions.push_str(&format!("{package} {version}\n"));
    }
    std::fs::create_dir_all(bin).map_err(|e| anyhow!("creating {}: {e}", bin.display()))?;
    go_build(work, &unpacked, &bin.join("apiextensions-apiserver"))?;
    for (_, path) in PROGRAMS {
        let name = Path::new(path)
            .file_name()
            .expect("a program's path names a file");
        std::fs::copy(unpacked.join(path), bin.join(name))
            .map_err(|e| anyhow!("copying {path}: {e}"))?;
    }
    let etcd = output(Command::new(bin.join("etcd")).arg("--version"))?;
    let kubectl = output(Command::new(bin.join("kubectl")).args(["version", "--client"]))?;
    for said in [&etcd, &kubectl] {
        versions.push_str(said.lines().next().unwrap_or_default());
        versions.push('\n');
    }
    if !kubectl.contains("v1.") {
        bail!("kubectl from Debian {SUITE} says {}", kubectl.trim());
    }
    Ok(versions)
}

/// The server's sources and their `golang-*-dev` dependencies, the Go toolchain and the
/// programs, from sid, into `debs`. sid's `kubectl` is asked for by suite: a host may have
/// another vendor's `kubectl` installed with a higher version.
fn download(apt: &PrivateApt, debs: &Path) -> Result<()> {
    let mut packages: Vec<String> = apt
        .depends_closure(SERVER_SOURCE_PACKAGE)?
        .into_iter()
        .filter(|name| name.starts_with("golang-") && name.ends_with("-dev"))
        .collect();
    if !packages.iter().any(|name| name == SERVER_SOURCE_PACKAGE) {
        bail!("Debian {SUITE} has no {SERVER_SOURCE_PACKAGE}");
    }
    packages.extend(GO_PACKAGES.map(str::to_owned));
    packages.extend(PROGRAMS.map(|(package, _)| format!("{package}/{SUITE}")));
    apt.download(&packages, debs)
}

/// `go build` of the server in GOPATH mode: every import resolved from the unpacked
/// `/usr/share/gocode`, no module download, no cgo (a static binary, no C toolchain), at
/// most two packages compiled at once, the build cache under `work`.
fn go_build(work: &Path, unpacked: &Path, out: &Path) -> Result<()> {
    let gopath = unpacked.join("usr/share/gocode");
    let goroot = unpacked.join(GOROOT);
    output(
        Command::new(goroot.join("bin/go"))
            .current_dir(gopath.join("src").join(SERVER_IMPORT_PATH))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", work)
            .env("GOROOT", &goroot)
            .env("GOPATH", &gopath)
            .env("GOCACHE", work.join("gocache"))
            .env("GO111MODULE", "off")
            .env("GOTOOLCHAIN", "local")
            .env("GOPROXY", "off")
            .env("CGO_ENABLED", "0")
            .args(["build", "-p", "2", "-ldflags=-s -w", "-o"])
            .arg(out)
            .arg("."),
    )?;
    Ok(())
}
