//! The real container runtime the NRI tests drive: Debian's containerd 1.7 (trixie), runc
//! and busybox-static (the host's release, for its glibc; busybox is static), unpacked under
//! `target/containerd-bundle/root`, and a one-layer OCI image of busybox
//! (`busybox.tar`, tagged `docker.io/library/busybox:corral`, `sleep` as its command, so
//! it serves as the sandbox image too). Prepared by `cargo xtask test` before the tests,
//! since tests reach no network; where it cannot be prepared (not root, no Debian archive)
//! the reason is printed and the containerd tests skip, saying so.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Result, anyhow, bail};

/// The bundle's directory under the workspace root.
pub(crate) const BUNDLE_DIR: &str = "target/containerd-bundle";

/// The bundle, prepared if it is not yet; `Err` with the reason it cannot be.
pub(crate) fn ensure(root: &Path) -> Result<PathBuf> {
    let dir = root.join(BUNDLE_DIR);
    if dir.join("READY").exists() {
        return Ok(dir);
    }
    let uid = output(Command::new("id").arg("-u"))?;
    if uid.trim() != "0" {
        bail!("containerd needs root to run containers (uid is not 0)");
    }
    let apt = dir.join("apt");
    for sub in ["lists/partial", "cache/archives/partial", "debs"] {
        std::fs::create_dir_all(apt.join(sub)).map_err(|e| anyhow!("creating {sub}: {e}"))?;
    }
    let sources = apt.join("trixie.list");
    std::fs::write(&sources, "deb http://deb.debian.org/debian trixie main\n")
        .map_err(|e| anyhow!("writing {}: {e}", sources.display()))?;
    let trixie = [
        format!("-oDir::Etc::SourceList={}", sources.display()),
        "-oDir::Etc::SourceParts=/dev/null".to_owned(),
        format!("-oDir::State::Lists={}", apt.join("lists").display()),
        format!("-oDir::Cache={}", apt.join("cache").display()),
        "-oAPT::Sandbox::User=root".to_owned(),
    ];
    let debs = apt.join("debs");
    output(Command::new("apt-get").args(&trixie).arg("update"))?;
    output(
        Command::new("apt-get")
            .current_dir(&debs)
            .args(&trixie)
            .args(["download", "containerd", "busybox-static"]),
    )?;
    // runc from the host's own release: trixie's needs a newer glibc than bookworm has.
    output(Command::new("apt-get").current_dir(&debs).args([
        "-oAPT::Sandbox::User=root",
        "download",
        "runc",
    ]))?;
    let unpacked = dir.join("root");
    for deb in std::fs::read_dir(&debs).map_err(|e| anyhow!("reading {}: {e}", debs.display()))? {
        let deb = deb?.path();
        output(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&unpacked))?;
    }
    let version = output(Command::new(unpacked.join("usr/bin/containerd")).arg("--version"))?;
    if !version.contains(" 1.7.") {
        bail!("expected containerd 1.7, got {}", version.trim());
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

fn output(command: &mut Command) -> Result<String> {
    let shown = format!("{command:?}");
    let out = command.output().map_err(|e| anyhow!("{shown}: {e}"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        bail!("{shown} failed: {}", stderr.trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
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
