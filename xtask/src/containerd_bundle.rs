//! The real container runtimes the NRI tests drive, one bundle per containerd release the
//! tests cover: Debian's containerd 1.7 (trixie) and 2.1 (sid), each unpacked with runc and
//! busybox-static under `target/containerd-bundle/<release>/root` (runc from the host's
//! release, for its glibc; busybox is static), and a one-layer OCI image of busybox
//! (`busybox.tar`, tagged `docker.io/library/busybox:corral`, `sleep` as its command, so
//! it serves as the sandbox image too). Prepared by `cargo xtask test` before the tests,
//! since tests reach no network; a release that cannot be prepared (not root, no Debian
//! archive, the suite moved to another release) is printed with the reason and its tests
//! skip, saying so, while the other release's tests run.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Result, anyhow, bail};

use crate::debian::{self, PrivateApt, output};

/// The bundles' directory under the workspace root.
pub(crate) const BUNDLE_DIR: &str = "target/containerd-bundle";

/// A containerd release the real-runtime tests cover.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Release {
    /// containerd 1.7 (Debian trixie): config version 2, NRI off unless enabled.
    V1_7,
    /// containerd 2.1 (Debian sid): config version 3, NRI on by default.
    V2_1,
}

impl Release {
    /// Every release, oldest first.
    pub(crate) const ALL: [Release; 2] = [Release::V1_7, Release::V2_1];

    /// `1.7`, `2.1`: the bundle's directory name, and what `containerd --version` shows.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Release::V1_7 => "1.7",
            Release::V2_1 => "2.1",
        }
    }

    /// The suffix of the environment variables that hand the bundle (or why there is none)
    /// to the tests: `CORRAL_CONTAINERD_BUNDLE_1_7`, `CORRAL_CONTAINERD_SKIP_1_7`.
    pub(crate) fn env_suffix(self) -> String {
        self.name().replace('.', "_")
    }

    /// The Debian suite whose `containerd` package is this release.
    fn suite(self) -> &'static str {
        match self {
            Release::V1_7 => "trixie",
            Release::V2_1 => "sid",
        }
    }
}

/// Every release's bundle, each prepared if it is not yet, or the reason it cannot be.
pub(crate) fn ensure_all(root: &Path) -> Vec<(Release, Result<PathBuf>)> {
    forget_single_release_layout(&root.join(BUNDLE_DIR));
    Release::ALL
        .into_iter()
        .map(|release| (release, ensure(root, release)))
        .collect()
}

/// Before there was a bundle per release, the 1.7 bundle filled the whole directory; its
/// files (about 200 MB) are removed, since nothing reads them any more.
fn forget_single_release_layout(dir: &Path) {
    if dir.join("READY").exists() {
        for stale in ["root", "apt"] {
            let _ = std::fs::remove_dir_all(dir.join(stale));
        }
        for stale in ["busybox.tar", "READY"] {
            let _ = std::fs::remove_file(dir.join(stale));
        }
    }
}

/// `release`'s bundle, prepared if it is not yet; `Err` with the reason it cannot be.
pub(crate) fn ensure(root: &Path, release: Release) -> Result<PathBuf> {
    let dir = root.join(BUNDLE_DIR).join(release.name());
    if dir.join("READY").exists() {
        return Ok(dir);
    }
    let uid = output(Command::new("id").arg("-u"))?;
    if uid.trim() != "0" {
        bail!("containerd needs root to run containers (uid is not 0)");
    }
    // What an earlier, unfinished attempt left would be unpacked with the new debs.
    let (apt, unpacked) = (dir.join("apt"), dir.join("root"));
    debian::remove_stale(&apt)?;
    debian::remove_stale(&unpacked)?;
    let debs = apt.join("debs");
    download(&apt, release.suite(), &debs)?;
    debian::unpack_all(&debs, &unpacked)?;
    let version = output(Command::new(unpacked.join("usr/bin/containerd")).arg("--version"))?;
    if !version.contains(&format!(" {}.", release.name())) {
        bail!(
            "expected containerd {} from Debian {}, got {}",
            release.name(),
            release.suite(),
            version.trim()
        );
    }
    let image = dir.join("busybox.tar");
    output(
        Command::new("python3")
            .args(["-c", IMAGE_BUILDER])
            .arg(unpacked.join("usr/bin/busybox"))
            .arg(&image),
    )?;
    std::fs::write(dir.join("READY"), version)
        .map_err(|e| anyhow!("marking {} ready: {e}", dir.display()))?;
    Ok(dir)
}

/// Downloads `containerd` and `busybox-static` from Debian `suite` with a private apt
/// state under `apt`, and the host release's `runc` (the newer suites' runc needs a newer
/// glibc than bookworm has), into `debs`. The suite's package lists are removed afterwards.
fn download(apt: &Path, suite: &str, debs: &Path) -> Result<()> {
    let private = PrivateApt::update(apt, suite)?;
    let fetched = private.download(&["containerd".into(), "busybox-static".into()], debs);
    private.forget();
    fetched?;
    debian::download_from_host_release(&["runc"], debs)
}

/// Writes an OCI image archive of one layer: busybox and its applets `sh`, `sleep`, `cat`.
const IMAGE_BUILDER: &str = r#"
import hashlib, io, json, sys, tarfile
busybox = open(sys.argv[1], "rb").read()
layer = io.BytesIO()
with tarfile.open(fileobj=layer, mode="w", format=tarfile.PAX_FORMAT) as t:
    for d in ["bin", "tmp", "proc", "sys", "dev", "etc"]:
        info = tarfile.TarInfo(d); info.type = tarfile.DIRTYPE; info.mode = 0o755; t.addfile(info)
    info = tarfile.TarInfo("bin/busybox"); info.size = len(busybox); info.mode = 0o755
    t.addfile(info, io.BytesIO(busybox))
    for applet in ["sh", "sleep", "cat"]:
        info = tarfile.TarInfo("bin/" + applet); info.type = tarfile.SYMTYPE; info.linkname = "busybox"
        t.addfile(info)
layer = layer.getvalue()
digest = lambda b: "sha256:" + hashlib.sha256(b).hexdigest()
config = json.dumps({"architecture": "amd64", "os": "linux",
    "config": {"Cmd": ["/bin/sleep", "1000000"], "Env": ["PATH=/bin"]},
    "rootfs": {"type": "layers", "diff_ids": [digest(layer)]}}).encode()
manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(config), "size": len(config)},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": digest(layer), "size": len(layer)}]}).encode()
index = json.dumps({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
    "digest": digest(manifest), "size": len(manifest),
    "annotations": {"io.containerd.image.name": "docker.io/library/busybox:corral"}}]}).encode()
with tarfile.open(sys.argv[2], "w") as t:
    def add(name, data):
        info = tarfile.TarInfo(name); info.size = len(data); info.mode = 0o644; t.addfile(info, io.BytesIO(data))
    add("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
    add("index.json", index)
    for blob in [layer, config, manifest]:
        add("blobs/sha256/" + hashlib.sha256(blob).hexdigest(), blob)
"#;
