//! The image's one layer: what goes in it ([`plan`]) and its tar, written once ([`write`]).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Seek, Write};
use std::path::{Path, PathBuf};

use super::digest::Hashing;
use super::ustar::{self, Header, Kind};
use super::{CORRAL_UID, ENTRYPOINT, ImageError, LayerEntry, STATE_DIR, shared_libraries};

/// `/etc/passwd`: root, and the unprivileged `corral` user whose home is the state dir.
const PASSWD: &str = "root:x:0:0:root:/root:/sbin/nologin\n\
                      corral:x:65532:65532:corral:/var/lib/corral:/sbin/nologin\n";
/// `/etc/group`.
const GROUP: &str = "root:x:0:\ncorral:x:65532:\n";

/// Where an entry's contents come from.
pub(super) enum Contents {
    /// A directory: none.
    Directory,
    /// A file on this machine (symbolic links followed).
    Copied(PathBuf),
    /// Bytes written here.
    Written(&'static str),
}

/// One planned entry of the layer.
pub(super) struct Planned {
    contents: Contents,
    mode: u32,
    owner: u32,
}

/// The layer's entries by path (relative; the map's order is the archive's, a directory
/// before what it holds), every parent directory included.
pub(super) type Plan = BTreeMap<String, Planned>;

/// The written layer.
pub(super) struct Layer {
    /// `sha256:…` of its tar.
    pub(super) digest: String,
    /// Its size in bytes.
    pub(super) bytes: u64,
}

/// What the image of `binary` holds: the binary, its libraries, the user files and the
/// state directory.
pub(super) fn plan(binary: &Path) -> Result<Plan, ImageError> {
    let mut plan = Plan::new();
    add(
        &mut plan,
        ENTRYPOINT,
        Contents::Copied(binary.to_owned()),
        0o755,
        0,
    );
    for library in shared_libraries(binary)? {
        let path = library.to_string_lossy().into_owned();
        add(&mut plan, &path, Contents::Copied(library), 0o755, 0);
    }
    add(
        &mut plan,
        "/etc/passwd",
        Contents::Written(PASSWD),
        0o644,
        0,
    );
    add(&mut plan, "/etc/group", Contents::Written(GROUP), 0o644, 0);
    add(&mut plan, STATE_DIR, Contents::Directory, 0o755, CORRAL_UID);
    Ok(plan)
}

/// Adds `path` and, as root's `0755` directories, its parents not planned yet.
fn add(plan: &mut Plan, path: &str, contents: Contents, mode: u32, owner: u32) {
    let path = path.trim_start_matches('/');
    let mut parent = Path::new(path).parent();
    while let Some(dir) = parent.filter(|d| !d.as_os_str().is_empty()) {
        let directory = Planned {
            contents: Contents::Directory,
            mode: 0o755,
            owner: 0,
        };
        plan.entry(dir.to_string_lossy().into_owned())
            .or_insert(directory);
        parent = dir.parent();
    }
    let planned = Planned {
        contents,
        mode,
        owner,
    };
    plan.insert(path.to_owned(), planned);
}

/// Writes the layer's tar to `file`, rewound afterwards for the archive to copy; its digest
/// and size, and its entries. `output` is the archive, named in a write error.
pub(super) fn write(
    plan: Plan,
    file: &mut File,
    output: &Path,
) -> Result<(Layer, Vec<LayerEntry>), ImageError> {
    let failed = |error: Box<dyn std::error::Error + Send + Sync>| ImageError::Write {
        path: output.to_owned(),
        error,
    };
    let mut out = Hashing::new(BufWriter::new(&mut *file));
    let mut listing = Vec::with_capacity(plan.len());
    for (path, entry) in &plan {
        let mut header = Header {
            path,
            kind: Kind::Directory,
            mode: entry.mode,
            owner: entry.owner,
        };
        let appended = match &entry.contents {
            Contents::Directory => ustar::append(&mut out, &header, &mut io::empty()),
            Contents::Written(text) => {
                header.kind = Kind::File(text.len() as u64);
                ustar::append(&mut out, &header, &mut text.as_bytes())
            }
            Contents::Copied(source) => {
                let unreadable = |error| ImageError::Read {
                    path: source.clone(),
                    error,
                };
                let mut opened = File::open(source).map_err(unreadable)?;
                header.kind = Kind::File(opened.metadata().map_err(unreadable)?.len());
                ustar::append(&mut out, &header, &mut opened)
            }
        };
        appended.map_err(|e| failed(e.into()))?;
        listing.push(LayerEntry {
            path: format!("/{path}"),
            bytes: match header.kind {
                Kind::File(bytes) => Some(bytes),
                Kind::Directory => None,
            },
            mode: entry.mode,
            owner: entry.owner,
        });
    }
    ustar::finish(&mut out).map_err(|e| failed(e.into()))?;
    let (digest, bytes, mut buffered) = out.finish();
    buffered.flush().map_err(|e| failed(e.into()))?;
    drop(buffered);
    file.rewind().map_err(|e| failed(e.into()))?;
    Ok((Layer { digest, bytes }, listing))
}
