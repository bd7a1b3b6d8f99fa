//! The image archive as GNU tar reads it: reproducible, the layout and the layer complete.

use std::path::Path;
use std::process::Command;

use super::*;

/// `tar -tv` of `archive` (GNU tar: it checks every header's checksum), one entry a line.
fn listed(archive: &Path, member: Option<&str>) -> Vec<String> {
    let output = Command::new("tar")
        .args(["-tvf"])
        .arg(archive)
        .args(member)
        .output()
        .expect("run tar");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// `member` of the tar `archive`, extracted by GNU tar.
fn extracted(archive: &Path, member: &str) -> Vec<u8> {
    let output = Command::new("tar")
        .arg("-xOf")
        .arg(archive)
        .arg(member)
        .output()
        .expect("run tar");
    assert!(output.status.success(), "{output:?}");
    output.stdout
}

#[test]
fn the_same_binary_gives_the_same_archive_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    // This test program stands in for corral: a dynamically linked program of this machine.
    let binary = std::env::current_exe().unwrap();
    let (first, second) = (dir.path().join("a/image.tar"), dir.path().join("b.tar"));
    let image = write_archive(&binary, REFERENCE, &first).unwrap();
    let again = write_archive(&binary, REFERENCE, &second).unwrap();
    assert_eq!(image, again);
    assert_eq!(
        std::fs::read(&first).unwrap(),
        std::fs::read(&second).unwrap()
    );
    assert_eq!(
        image.archive_bytes,
        std::fs::metadata(&first).unwrap().len()
    );
    // Only the archive is left: the staged layer and the temporary archive are gone.
    let left: Vec<_> = std::fs::read_dir(dir.path().join("a")).unwrap().collect();
    assert_eq!(left.len(), 1);
}

#[test]
fn the_layout_names_the_image_and_the_layer_holds_the_binary_and_its_libraries() {
    let dir = tempfile::tempdir().unwrap();
    let binary = std::env::current_exe().unwrap();
    let archive = dir.path().join("image.tar");
    let image = write_archive(&binary, "example.org/corral:v1", &archive).unwrap();

    let layout: Vec<String> = listed(&archive, None)
        .iter()
        .map(|line| line.rsplit(' ').next().unwrap().to_owned())
        .collect();
    assert_eq!(layout.len(), 7, "{layout:?}");
    assert_eq!(&layout[..2], ["blobs/", "blobs/sha256/"]);
    assert_eq!(&layout[5..], ["index.json", "oci-layout"]);
    let index: serde_json::Value =
        serde_json::from_slice(&extracted(&archive, "index.json")).unwrap();
    let entry = &index["manifests"][0];
    assert_eq!(entry["digest"], image.manifest_digest);
    let names = &entry["annotations"];
    assert_eq!(names["io.containerd.image.name"], "example.org/corral:v1");
    assert_eq!(names["org.opencontainers.image.ref.name"], "v1");

    let blob = |digest: &str| format!("blobs/sha256/{}", digest.trim_start_matches("sha256:"));
    let manifest: serde_json::Value =
        serde_json::from_slice(&extracted(&archive, &blob(&image.manifest_digest))).unwrap();
    assert_eq!(manifest["layers"][0]["digest"], image.layer_digest);
    let config_digest = manifest["config"]["digest"].as_str().unwrap();
    let config: serde_json::Value =
        serde_json::from_slice(&extracted(&archive, &blob(config_digest))).unwrap();
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!([ENTRYPOINT])
    );
    assert_eq!(config["config"]["Cmd"], serde_json::json!(DEFAULT_ARGS));
    assert_eq!(config["rootfs"]["diff_ids"][0], image.layer_digest);

    // The layer, as GNU tar reads it: the binary, every library ldd names, the user files
    // and the corral-owned state dir; nothing dated.
    let layer_path = dir.path().join("layer.tar");
    std::fs::write(&layer_path, extracted(&archive, &blob(&image.layer_digest))).unwrap();
    let layer = listed(&layer_path, None);
    let paths: Vec<&str> = layer
        .iter()
        .map(|l| l.rsplit(' ').next().unwrap())
        .collect();
    let listing: Vec<String> = image
        .layer
        .iter()
        .map(|e| {
            let path = e.path.trim_start_matches('/');
            if e.bytes.is_some() {
                path.to_owned()
            } else {
                format!("{path}/")
            }
        })
        .collect();
    assert_eq!(paths, listing);
    assert!(paths.contains(&"usr/local/bin/corral"), "{paths:?}");
    for library in shared_libraries(&binary).unwrap() {
        let path = library.to_string_lossy();
        assert!(paths.contains(&path.trim_start_matches('/')), "{path}");
    }
    for line in &layer {
        assert!(line.contains("1970-01-01"), "{line}");
    }
    let state = layer
        .iter()
        .find(|l| l.ends_with(" var/lib/corral/"))
        .unwrap();
    assert!(state.contains("65532/65532"), "{state}");
    let binary_bytes = std::fs::metadata(&binary).unwrap().len();
    let corral = image.layer.iter().find(|e| e.path == ENTRYPOINT).unwrap();
    assert_eq!(corral.bytes, Some(binary_bytes));
    let passwd = String::from_utf8(extracted(&layer_path, "etc/passwd")).unwrap();
    assert!(passwd.contains(&format!("corral:x:{CORRAL_UID}:{CORRAL_UID}:")));
}

#[test]
fn a_missing_binary_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nothing");
    let err = write_archive(&missing, REFERENCE, &dir.path().join("i.tar")).unwrap_err();
    assert!(matches!(err, ImageError::Libraries(_)), "{err:?}");
    assert!(!dir.path().join("i.tar").exists());
}

/// `sha256sum FILE`'s digest, as `sha256:HEX`.
fn sha256sum(file: &Path) -> String {
    let output = Command::new("sha256sum")
        .arg(file)
        .output()
        .expect("run sha256sum");
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    format!("sha256:{}", text.split_whitespace().next().unwrap())
}

/// Every blob, checked without this crate's hashing: GNU tar unpacks the archive,
/// `sha256sum` hashes each blob, and every descriptor (index → manifest → config and layer)
/// names a blob by its true digest and size; the config's `diff_ids` is the layer's.
#[test]
fn every_descriptor_names_its_blob_by_the_digest_sha256sum_gives() {
    let dir = tempfile::tempdir().unwrap();
    let binary = std::env::current_exe().unwrap();
    let archive = dir.path().join("image.tar");
    let image = write_archive(&binary, REFERENCE, &archive).unwrap();
    let unpacked = dir.path().join("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    let status = Command::new("tar")
        .arg("-xf")
        .arg(&archive)
        .arg("-C")
        .arg(&unpacked)
        .status()
        .expect("run tar");
    assert!(status.success());
    let blobs = unpacked.join("blobs/sha256");
    let mut names = 0;
    for entry in std::fs::read_dir(&blobs).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(sha256sum(&path), format!("sha256:{name}"));
        names += 1;
    }
    assert_eq!(names, 3, "manifest, config, layer");
    let layout: serde_json::Value =
        serde_json::from_slice(&std::fs::read(unpacked.join("oci-layout")).unwrap()).unwrap();
    assert_eq!(layout["imageLayoutVersion"], "1.0.0");
    // A descriptor's blob: there, of its size, of its digest.
    let blob = |descriptor: &serde_json::Value| -> Vec<u8> {
        let digest = descriptor["digest"].as_str().unwrap();
        let path = blobs.join(digest.trim_start_matches("sha256:"));
        assert_eq!(sha256sum(&path), digest);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(descriptor["size"].as_u64(), Some(bytes.len() as u64));
        bytes
    };
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(unpacked.join("index.json")).unwrap()).unwrap();
    assert_eq!(index["schemaVersion"], 2);
    let manifests = index["manifests"].as_array().unwrap();
    assert_eq!(manifests.len(), 1);
    assert_eq!(
        manifests[0]["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    assert_eq!(manifests[0]["digest"], image.manifest_digest);
    let manifest: serde_json::Value = serde_json::from_slice(&blob(&manifests[0])).unwrap();
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.oci.image.config.v1+json"
    );
    let config: serde_json::Value = serde_json::from_slice(&blob(&manifest["config"])).unwrap();
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1);
    assert_eq!(
        layers[0]["mediaType"],
        "application/vnd.oci.image.layer.v1.tar"
    );
    blob(&layers[0]);
    // Uncompressed: the layer's diff_id is its digest.
    assert_eq!(config["rootfs"]["type"], "layers");
    assert_eq!(
        config["rootfs"]["diff_ids"],
        serde_json::json!([layers[0]["digest"]])
    );
    assert_eq!(config["os"], "linux");
}

/// A binary named through a symlink (in a directory with a space) is copied, not linked:
/// the same archive as from its own path.
#[test]
fn a_binary_behind_a_symlink_gives_the_archive_of_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let binary = std::env::current_exe().unwrap();
    let spaced = dir.path().join("a dir");
    std::fs::create_dir(&spaced).unwrap();
    let link = spaced.join("corral link");
    std::os::unix::fs::symlink(&binary, &link).unwrap();
    let (direct, linked) = (dir.path().join("direct.tar"), dir.path().join("linked.tar"));
    let image = write_archive(&binary, REFERENCE, &direct).unwrap();
    let again = write_archive(&link, REFERENCE, &linked).unwrap();
    assert_eq!(image, again);
    assert_eq!(
        std::fs::read(&direct).unwrap(),
        std::fs::read(&linked).unwrap()
    );
    let corral = image.layer.iter().find(|e| e.path == ENTRYPOINT).unwrap();
    assert_eq!(
        corral.bytes,
        Some(std::fs::metadata(&binary).unwrap().len())
    );
}
