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
