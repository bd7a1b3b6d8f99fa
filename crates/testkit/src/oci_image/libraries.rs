//! The shared libraries a dynamically linked program needs, as the dynamic loader resolves
//! them on this machine: `ldd`'s answer (every `DT_NEEDED`, transitively, and the loader
//! itself), so the image holds exactly those files at the paths the loader searches.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Why the libraries of a program cannot be listed.
#[derive(Debug, thiserror::Error)]
pub enum LibrariesError {
    /// `ldd` cannot be run.
    #[error("running ldd on {}", binary.display())]
    Spawn {
        /// The program.
        binary: PathBuf,
        /// Why.
        #[source]
        error: std::io::Error,
    },
    /// `ldd` failed for another reason than a static program.
    #[error("ldd {}: {stderr}", binary.display())]
    Failed {
        /// The program.
        binary: PathBuf,
        /// What ldd said, trimmed.
        stderr: String,
    },
    /// ldd resolved a library to a relative path (an `LD_LIBRARY_PATH` of `.` or the like):
    /// there is no place in the image where the loader would find it.
    #[error("{library} (needed by {}) resolves to the relative path {path}", binary.display())]
    Relative {
        /// The program.
        binary: PathBuf,
        /// The library's soname.
        library: String,
        /// Where ldd found it.
        path: String,
    },
    /// A library the program needs is not on this machine.
    #[error("{library} (needed by {}) is not found", binary.display())]
    NotFound {
        /// The program.
        binary: PathBuf,
        /// The library's soname.
        library: String,
    },
}

/// The absolute paths of the libraries `binary` loads, the dynamic loader included, in
/// `ldd`'s order; none for a static program.
pub fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>, LibrariesError> {
    let output =
        Command::new("ldd")
            .arg(binary)
            .output()
            .map_err(|error| LibrariesError::Spawn {
                binary: binary.to_owned(),
                error,
            })?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if is_static(&stdout) || is_static(&stderr) {
        return Ok(Vec::new());
    }
    if !output.status.success() {
        return Err(LibrariesError::Failed {
            binary: binary.to_owned(),
            stderr: stderr.trim().to_owned(),
        });
    }
    parse_ldd(binary, &stdout)
}

/// What ldd says of a program without dynamic sections (glibc's and musl's wording).
fn is_static(said: &str) -> bool {
    said.contains("not a dynamic executable") || said.contains("statically linked")
}

/// The paths in ldd's lines (`soname => /path (0x…)`, `/path/of/the/loader (0x…)`); the
/// vDSO, which the kernel maps, has no file and is left out. A loader named by its absolute
/// path and resolved elsewhere (`/lib64/ld-linux-x86-64.so.2 => /usr/lib64/… (0x…)`, as
/// some distributions' ldd prints it) gives both paths: the kernel execs the first, the
/// program's `PT_INTERP`. Each path once. `Err`: a soname not found, or found at a
/// relative path.
fn parse_ldd(binary: &Path, stdout: &str) -> Result<Vec<PathBuf>, LibrariesError> {
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut push = |path: &str| {
        let path = PathBuf::from(path);
        if !paths.contains(&path) {
            paths.push(path);
        }
    };
    for line in stdout.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (soname, resolved) = match line.split_once(" => ") {
            Some((soname, rest)) => (soname.trim(), rest),
            None => ("", line),
        };
        let path = resolved.split(" (0x").next().unwrap_or_default().trim();
        if path == "not found" {
            return Err(LibrariesError::NotFound {
                binary: binary.to_owned(),
                library: soname.to_owned(),
            });
        }
        if soname.starts_with('/') {
            push(soname);
        }
        if path.starts_with('/') {
            push(path);
        } else if !soname.is_empty() && !path.is_empty() && !path.starts_with("(0x") {
            // `soname => path`: a file the loader found, not where the image can have it.
            return Err(LibrariesError::Relative {
                binary: binary.to_owned(),
                library: soname.to_owned(),
                path: path.to_owned(),
            });
        }
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_lines_give_the_files_and_the_loader() {
        let said = "\tlinux-vdso.so.1 (0x00007ffd5d9f4000)\n\
                    \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f1)\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f2)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f3)\n";
        let paths = parse_ldd(Path::new("corral"), said).unwrap();
        let want: Vec<PathBuf> = [
            "/lib/x86_64-linux-gnu/libgcc_s.so.1",
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/lib64/ld-linux-x86-64.so.2",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(paths, want);
        let missing = "\tlibfoo.so.1 => not found\n\tlibc.so.6 => /lib/libc.so.6 (0x1)\n";
        let refused = parse_ldd(Path::new("corral"), missing);
        assert!(
            matches!(&refused, Err(LibrariesError::NotFound { library, .. }) if library == "libfoo.so.1"),
            "{refused:?}"
        );
    }

    /// ldd's odd lines: a vDSO with an empty arrow (old glibc, i386's linux-gate), a
    /// library directory with spaces, a loader named by `PT_INTERP` and resolved under
    /// `/usr`, a library named twice, tabs and blank lines.
    #[test]
    fn odd_ldd_lines_give_every_file_once() {
        let said = "\n\tlinux-gate.so.1 =>  (0xf7f3a000)\n\
                    \tlinux-vdso.so.1 (0x00007ffd5d9f4000)\n\
                    \tlibspace.so.2 => /opt/my libs/libspace.so.2 (0x00007f1)\n\
                    \tlibc.so.6 => /usr/lib/libc.so.6 (0x00007f2)\n\
                    \tlibc.so.6 => /usr/lib/libc.so.6 (0x00007f2)\n\
                    \t/lib64/ld-linux-x86-64.so.2 => /usr/lib64/ld-linux-x86-64.so.2 (0x7f3)\n\n";
        let paths = parse_ldd(Path::new("corral"), said).unwrap();
        let want: Vec<PathBuf> = [
            "/opt/my libs/libspace.so.2",
            "/usr/lib/libc.so.6",
            "/lib64/ld-linux-x86-64.so.2",
            "/usr/lib64/ld-linux-x86-64.so.2",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(paths, want);
    }

    /// A library ldd found at a relative path (`LD_LIBRARY_PATH=.`) is refused, not left
    /// out of the image.
    #[test]
    fn a_library_at_a_relative_path_is_refused() {
        let said =
            "\tlibfoo.so.1 => ./libfoo.so.1 (0x00007f1)\n\tlibc.so.6 => /lib/libc.so.6 (0x1)\n";
        let refused = parse_ldd(Path::new("corral"), said);
        assert!(
            matches!(&refused, Err(LibrariesError::Relative { library, path, .. })
                if library == "libfoo.so.1" && path == "./libfoo.so.1"),
            "{refused:?}"
        );
    }

    #[test]
    fn this_test_program_needs_libc_and_the_loader() {
        let exe = std::env::current_exe().unwrap();
        let libraries = shared_libraries(&exe).unwrap();
        let names: Vec<String> = libraries
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().any(|n| n.starts_with("libc.so")), "{names:?}");
        assert!(names.iter().any(|n| n.starts_with("ld-")), "{names:?}");
    }
}
