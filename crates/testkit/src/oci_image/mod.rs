//! An OCI image of `corral`, assembled from the binary and the libraries it loads — no base
//! image, since none can be downloaded where corral is built and tested.
//!
//! [`write_archive`] writes an OCI image layout (`oci-layout`, `index.json`, `blobs/`) as a
//! tar archive that `ctr images import`, `docker load` and `skopeo` take. Its one layer,
//! uncompressed, holds:
//! - `/usr/local/bin/corral`, the [`ENTRYPOINT`];
//! - exactly the shared libraries `ldd` says the binary loads (glibc's, `libgcc_s`, the
//!   dynamic loader), copied from this machine to the paths the loader searches;
//! - `/etc/passwd` and `/etc/group` naming root and the `corral` user ([`CORRAL_UID`]), so
//!   the image runs as either (`--user 65532` for `corral --version` or `topology`; the
//!   DaemonSet runs as root to reach the runtime's NRI socket);
//! - the state directory [`STATE_DIR`], owned by `corral`.
//!
//! The default command is [`DEFAULT_ARGS`], the arguments of deploy/base's DaemonSet
//! (which the overlays extend).
//!
//! **Reproducible:** every mtime is 0, owners and modes are fixed, entries sorted, no
//! creation date in the config: the same binary (and libraries) give the same bytes, so the
//! same digest. Why the layers are written here rather than by `umoci` or `buildah` from
//! Debian: those need root or extra packages (and `buildah` a storage set-up) and would add
//! nothing for one static layer of files whose headers are all chosen here (see `ustar`).
//!
//! ```no_run
//! let binary = std::path::Path::new("target/release/corral");
//! let output = std::path::Path::new("target/image/corral-oci.tar");
//! let image = corral_testkit::oci_image::write_archive(
//!     binary,
//!     corral_testkit::oci_image::REFERENCE,
//!     output,
//! )
//! .unwrap();
//! println!("{} ({} bytes)", image.manifest_digest, image.archive_bytes);
//! ```

mod digest;
mod layer;
mod layout;
mod libraries;
mod ustar;

use std::io;
use std::path::{Path, PathBuf};

pub use libraries::{LibrariesError, shared_libraries};

/// The name the image is imported under (`image: corral:dev` in deploy/, normalized).
pub const REFERENCE: &str = "docker.io/library/corral:dev";
/// Where the binary is, and the image's entrypoint.
pub const ENTRYPOINT: &str = "/usr/local/bin/corral";
/// The image's default arguments: deploy/base's DaemonSet's.
pub const DEFAULT_ARGS: [&str; 7] = [
    "run",
    "-c",
    "/etc/corral/config.yaml",
    "--root",
    "/var/lib/corral",
    "--host-root",
    "/host",
];
/// corral's state directory (`--root`), owned by [`CORRAL_UID`] in the image.
pub const STATE_DIR: &str = "/var/lib/corral";
/// The uid and gid of the image's unprivileged `corral` user (distroless' `nonroot` id).
pub const CORRAL_UID: u32 = 65532;

/// Why an image cannot be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// The binary's libraries cannot be listed.
    #[error("listing the binary's libraries")]
    Libraries(#[from] LibrariesError),
    /// A file to put in the image cannot be read.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        error: io::Error,
    },
    /// The archive (or its layer, beside it) cannot be written.
    #[error("writing {}", path.display())]
    Write {
        /// The archive.
        path: PathBuf,
        /// Why.
        #[source]
        error: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// What [`write_archive`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// The manifest's digest (`sha256:…`): the image's identity, as `ctr images ls` shows.
    pub manifest_digest: String,
    /// The layer's digest (also its diff id: it is not compressed).
    pub layer_digest: String,
    /// The archive's size in bytes.
    pub archive_bytes: u64,
    /// The layer's entries in archive order.
    pub layer: Vec<LayerEntry>,
}

/// One entry of the layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerEntry {
    /// Its path (absolute, as in the container).
    pub path: String,
    /// Its size in bytes; `None` for a directory.
    pub bytes: Option<u64>,
    /// Its permission bits.
    pub mode: u32,
    /// Its owner's uid (and gid).
    pub owner: u32,
}

/// Writes the image of `binary` (a `corral` built for this machine) named `reference` as an
/// OCI image layout tar archive at `output` (replaced whole, never left half-written; the
/// layer is staged in an unnamed temporary file beside it).
pub fn write_archive(binary: &Path, reference: &str, output: &Path) -> Result<Image, ImageError> {
    let plan = layer::plan(binary)?;
    let failed = |error: Box<dyn std::error::Error + Send + Sync>| ImageError::Write {
        path: output.to_owned(),
        error,
    };
    let dir = output.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| failed(e.into()))?;
    let mut staged = tempfile::tempfile_in(dir).map_err(|e| failed(e.into()))?;
    let (layer, listing) = layer::write(plan, &mut staged, output)?;
    let mut archive = tempfile::NamedTempFile::new_in(dir).map_err(|e| failed(e.into()))?;
    let manifest_digest = layout::write(archive.as_file_mut(), &layer, &mut staged, reference)
        .map_err(|e| failed(e.into()))?;
    // Readable by all, as a build's output (a temporary file is its owner's only).
    let readable = std::os::unix::fs::PermissionsExt::from_mode(0o644);
    let file = archive.as_file();
    file.set_permissions(readable)
        .map_err(|e| failed(e.into()))?;
    let archive_bytes = file.metadata().map_err(|e| failed(e.into()))?.len();
    archive
        .persist(output)
        .map_err(|e| failed(e.error.into()))?;
    Ok(Image {
        manifest_digest,
        layer_digest: layer.digest,
        archive_bytes,
        layer: listing,
    })
}

#[cfg(test)]
mod tests;
