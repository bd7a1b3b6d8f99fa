//! The OCI image layout around the layer — its config, manifest, index and `oci-layout`
//! file — written as the archive's tar, blobs named by their SHA-256.

use std::fs::File;
use std::io::{self, BufWriter, Write};

use serde_json::json;

use super::digest::digest;
use super::layer::Layer;
use super::ustar::{self, Header, Kind, UstarError};
use super::{DEFAULT_ARGS, ENTRYPOINT};

/// The media types of what the manifest points at.
const MANIFEST_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
const CONFIG_TYPE: &str = "application/vnd.oci.image.config.v1+json";
const LAYER_TYPE: &str = "application/vnd.oci.image.layer.v1.tar";

/// The image architecture (GOARCH's spelling) of this machine's programs.
fn architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// The image config: how a runtime starts the container, and the layer's diff id.
fn config(layer: &Layer) -> Vec<u8> {
    let config = json!({
        "architecture": architecture(),
        "os": "linux",
        "config": {
            "Entrypoint": [ENTRYPOINT],
            "Cmd": DEFAULT_ARGS,
            "Env": ["PATH=/usr/local/bin"],
            "WorkingDir": "/",
        },
        "rootfs": {"type": "layers", "diff_ids": [layer.digest]},
    });
    serde_json::to_vec(&config).expect("JSON values serialize")
}

fn manifest(config: &[u8], layer: &Layer) -> Vec<u8> {
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": {"mediaType": CONFIG_TYPE, "digest": digest(config), "size": config.len()},
        "layers": [{"mediaType": LAYER_TYPE, "digest": layer.digest, "size": layer.bytes}],
    });
    serde_json::to_vec(&manifest).expect("JSON values serialize")
}

/// The index naming the manifest `reference` (containerd's annotation, which `ctr images
/// import` and `docker load` read) and its tag (the OCI annotation).
fn index(manifest: &[u8], reference: &str) -> Vec<u8> {
    let tag = reference
        .rsplit_once(':')
        .filter(|(name, _)| !name.is_empty())
        .map_or("latest", |(_, tag)| tag);
    let index = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": MANIFEST_TYPE,
            "digest": digest(manifest),
            "size": manifest.len(),
            "annotations": {
                "io.containerd.image.name": reference,
                "org.opencontainers.image.ref.name": tag,
            },
        }],
    });
    serde_json::to_vec(&index).expect("JSON values serialize")
}

fn directory(path: &str) -> Header<'_> {
    Header {
        path,
        kind: Kind::Directory,
        mode: 0o755,
        owner: 0,
    }
}

fn file_header(path: &str, bytes: u64) -> Header<'_> {
    Header {
        path,
        kind: Kind::File(bytes),
        mode: 0o644,
        owner: 0,
    }
}

/// Writes the layout's tar to `file`: `blobs/sha256/` (config, manifest and the layer read
/// from `layer_file`, sorted by digest), `index.json`, `oci-layout`. The manifest's digest.
pub(super) fn write(
    file: &mut File,
    layer: &Layer,
    layer_file: &mut File,
    reference: &str,
) -> Result<String, UstarError> {
    let config = config(layer);
    let manifest = manifest(&config, layer);
    let index = index(&manifest, reference);
    let mut out = BufWriter::new(file);
    ustar::append(&mut out, &directory("blobs"), &mut io::empty())?;
    ustar::append(&mut out, &directory("blobs/sha256"), &mut io::empty())?;
    let mut blobs: Vec<(String, Option<&[u8]>)> = vec![
        (digest(&config), Some(&config)),
        (digest(&manifest), Some(&manifest)),
        (layer.digest.clone(), None),
    ];
    blobs.sort();
    for (blob_digest, bytes) in blobs {
        let path = format!("blobs/sha256/{}", blob_digest.trim_start_matches("sha256:"));
        match bytes {
            Some(mut bytes) => {
                let header = file_header(&path, bytes.len() as u64);
                ustar::append(&mut out, &header, &mut bytes)?;
            }
            None => ustar::append(&mut out, &file_header(&path, layer.bytes), layer_file)?,
        }
    }
    ustar::append(
        &mut out,
        &file_header("index.json", index.len() as u64),
        &mut index.as_slice(),
    )?;
    let oci_layout = br#"{"imageLayoutVersion":"1.0.0"}"#;
    ustar::append(
        &mut out,
        &file_header("oci-layout", oci_layout.len() as u64),
        &mut &oci_layout[..],
    )?;
    ustar::finish(&mut out)?;
    out.flush()?;
    Ok(digest(&manifest))
}
