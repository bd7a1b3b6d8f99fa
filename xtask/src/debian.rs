//! Debian packages fetched and unpacked privately, for the bundles of real programs the tests
//! drive (`containerd_bundle`, `apiserver_bundle`): a suite's package lists and downloads live
//! in an apt state of their own under the bundle's directory (the system's sources, lists and
//! installed packages untouched), and `.deb`s are unpacked with `dpkg-deb -x`, never installed.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Result, anyhow, bail};

/// A private apt state for one Debian suite, under `dir` (`lists/`, `cache/`).
pub(crate) struct PrivateApt {
    dir: PathBuf,
    options: Vec<String>,
}

impl PrivateApt {
    /// Fetches `suite`'s package lists (main, this architecture) into `dir`.
    pub(crate) fn update(dir: &Path, suite: &str) -> Result<PrivateApt> {
        for sub in ["lists/partial", "cache/archives/partial"] {
            let sub = dir.join(sub);
            std::fs::create_dir_all(&sub)
                .map_err(|e| anyhow!("creating {}: {e}", sub.display()))?;
        }
        let sources = dir.join(format!("{suite}.list"));
        let line = format!("deb http://deb.debian.org/debian {suite} main\n");
        std::fs::write(&sources, line)
            .map_err(|e| anyhow!("writing {}: {e}", sources.display()))?;
        let options = vec![
            format!("-oDir::Etc::SourceList={}", sources.display()),
            "-oDir::Etc::SourceParts=/dev/null".to_owned(),
            format!("-oDir::State::Lists={}", dir.join("lists").display()),
            format!("-oDir::Cache={}", dir.join("cache").display()),
            "-oAPT::Sandbox::User=root".to_owned(),
            // Lists kept compressed, no translations: a third of the disk.
            "-oAcquire::GzipIndexes=true".to_owned(),
            "-oAcquire::Languages=none".to_owned(),
        ];
        output(Command::new("apt-get").args(&options).arg("update"))?;
        Ok(PrivateApt {
            dir: dir.to_path_buf(),
            options,
        })
    }

    /// Downloads `packages` (apt-get spellings: `name`, `name/suite`, `name=version`) into
    /// `debs`.
    pub(crate) fn download(&self, packages: &[String], debs: &Path) -> Result<()> {
        std::fs::create_dir_all(debs).map_err(|e| anyhow!("creating {}: {e}", debs.display()))?;
        output(
            Command::new("apt-get")
                .current_dir(debs)
                .args(&self.options)
                .arg("download")
                .args(packages),
        )?;
        Ok(())
    }

    /// `package` and every package it depends on, recursively (`Depends` only), by name;
    /// virtual packages (`<name>`) left out, since a real package providing each is listed.
    pub(crate) fn depends_closure(&self, package: &str) -> Result<Vec<String>> {
        let listing = output(
            Command::new("apt-cache")
                .args(&self.options)
                .args(["depends", "--recurse", "--no-recommends", "--no-suggests"])
                .args([
                    "--no-conflicts",
                    "--no-breaks",
                    "--no-replaces",
                    "--no-enhances",
                ])
                .arg(package),
        )?;
        let mut names: Vec<String> = listing
            .lines()
            .filter(|line| !line.starts_with([' ', '<']) && !line.is_empty())
            .map(str::to_owned)
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// Removes the package lists and apt's cache (sid's lists are tens of MB).
    pub(crate) fn forget(self) {
        for done in ["lists", "cache"] {
            let _ = std::fs::remove_dir_all(self.dir.join(done));
        }
    }
}

/// Downloads `packages` from the host's own release (its configured sources), into `debs`:
/// for programs whose newer builds need a newer glibc than the host has.
pub(crate) fn download_from_host_release(packages: &[&str], debs: &Path) -> Result<()> {
    std::fs::create_dir_all(debs).map_err(|e| anyhow!("creating {}: {e}", debs.display()))?;
    output(
        Command::new("apt-get")
            .current_dir(debs)
            .arg("-oAPT::Sandbox::User=root")
            .arg("download")
            .args(packages),
    )?;
    Ok(())
}

/// Unpacks every `.deb` in `debs` into `root`.
pub(crate) fn unpack_all(debs: &Path, root: &Path) -> Result<()> {
    for deb in std::fs::read_dir(debs).map_err(|e| anyhow!("reading {}: {e}", debs.display()))? {
        let deb = deb?.path();
        if deb.extension().is_some_and(|ext| ext == "deb") {
            output(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(root))?;
        }
    }
    Ok(())
}

/// The `Version` field of the downloaded `.deb` of `package` in `debs`.
pub(crate) fn deb_version(debs: &Path, package: &str) -> Result<String> {
    let prefix = format!("{package}_");
    for deb in std::fs::read_dir(debs).map_err(|e| anyhow!("reading {}: {e}", debs.display()))? {
        let deb = deb?.path();
        let name = deb.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with(&prefix) && name.ends_with(".deb") {
            let version = output(Command::new("dpkg-deb").arg("-f").arg(&deb).arg("Version"))?;
            return Ok(version.trim().to_owned());
        }
    }
    bail!("no {package} package among {}", debs.display())
}

/// Removes what an earlier, unfinished attempt left at `path`, if anything.
pub(crate) fn remove_stale(path: &Path) -> Result<()> {
    if path.exists() {
        std::fs::remove_dir_all(path).map_err(|e| anyhow!("removing {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Runs `command`; its standard output, or an error with its standard error.
pub(crate) fn output(command: &mut Command) -> Result<String> {
    let shown = format!("{command:?}");
    let out = command.output().map_err(|e| anyhow!("{shown}: {e}"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        // A compiler's complaint can be thousands of lines: its end says what failed.
        let lines: Vec<&str> = stderr.trim().lines().collect();
        let tail = lines[lines.len().saturating_sub(40)..].join("\n");
        bail!("{shown} failed: {tail}");
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
