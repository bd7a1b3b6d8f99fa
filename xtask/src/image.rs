//! `cargo xtask image [--binary PATH] [--output PATH] [--reference NAME]`: corral's OCI image
//! archive (`target/image/corral-oci.tar` by default), assembled offline by
//! `corral_testkit::oci_image` from the release `corral` (built first) or from `--binary`,
//! e.g. the debug binary CI checks the assembler on. Prints the manifest digest, the
//! archive's size and the layer's entries.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use corral_testkit::oci_image;

/// What to build the image from and where to write it.
#[derive(Debug, Default)]
pub(crate) struct ImageOptions {
    /// The binary to put in the image (default: `cargo build --release`'s `corral`).
    pub(crate) binary: Option<PathBuf>,
    /// The archive (default: `<target dir>/image/corral-oci.tar`).
    pub(crate) output: Option<PathBuf>,
    /// The image's name (default: [`oci_image::REFERENCE`]).
    pub(crate) reference: Option<String>,
}

/// The archive's path under the target directory.
pub(crate) const DEFAULT_OUTPUT: &str = "image/corral-oci.tar";

/// Writes the image; what was written.
pub(crate) fn run(root: &Path, options: &ImageOptions) -> Result<(PathBuf, oci_image::Image)> {
    let binary = match &options.binary {
        Some(binary) => binary.clone(),
        None => build_release(root)?,
    };
    let output = options
        .output
        .clone()
        .unwrap_or_else(|| target_dir(root).join(DEFAULT_OUTPUT));
    let reference = options.reference.as_deref().unwrap_or(oci_image::REFERENCE);
    let image = oci_image::write_archive(&binary, reference, &output)
        .with_context(|| format!("assembling the image of {}", binary.display()))?;
    Ok((output, image))
}

/// What `cargo xtask image` prints: where, which digest, how big, what the layer holds.
pub(crate) fn describe(output: &Path, image: &oci_image::Image) -> String {
    let mut text = format!(
        "{}: {} bytes\nmanifest {}\nlayer {}\n",
        output.display(),
        image.archive_bytes,
        image.manifest_digest,
        image.layer_digest
    );
    for entry in &image.layer {
        let size = entry
            .bytes
            .map_or_else(|| "dir".to_owned(), |b| b.to_string());
        text += &format!(
            "  {:o} {:>5} {:>10} {}\n",
            entry.mode, entry.owner, size, entry.path
        );
    }
    text
}

/// `cargo build --release -p corral-agent --bin corral --locked`; the binary's path.
fn build_release(root: &Path) -> Result<PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let args = [
        "build",
        "--release",
        "--locked",
        "-p",
        "corral-agent",
        "--bin",
        "corral",
    ];
    let status = Command::new(cargo)
        .current_dir(root)
        .args(args)
        .status()
        .context("running cargo build --release")?;
    if !status.success() {
        bail!("`cargo {}` failed: {status}", args.join(" "));
    }
    Ok(target_dir(root).join("release/corral"))
}

/// The target directory cargo builds into (`CARGO_TARGET_DIR`, or `target/`).
fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|dir| {
            if dir.is_absolute() {
                dir
            } else {
                root.join(dir)
            }
        })
        .unwrap_or_else(|| root.join("target"))
}

/// CI's check of `cargo xtask image` without a release build (about 4 minutes more on CI's
/// 2 cores): the image of the debug `corral` the tests built, its layer holding the
/// entrypoint; the archive is removed afterwards (the debug binary makes it ~370 MB).
pub(crate) fn check_on_debug_binary(root: &Path) -> Result<()> {
    let target = target_dir(root);
    let options = ImageOptions {
        binary: Some(target.join("debug/corral")),
        output: Some(target.join("image/ci-debug-oci.tar")),
        reference: None,
    };
    let (output, image) = run(root, &options)?;
    let _ = std::fs::remove_file(&output);
    if !image.layer.iter().any(|e| e.path == oci_image::ENTRYPOINT) {
        bail!("the image's layer has no {}", oci_image::ENTRYPOINT);
    }
    println!(
        "image of the debug corral: {} ({} bytes, {} layer entries)",
        image.manifest_digest,
        image.archive_bytes,
        image.layer.len()
    );
    Ok(())
}
