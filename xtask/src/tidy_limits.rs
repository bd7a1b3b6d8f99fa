//! Tidy limits over the source tree, run by plain `cargo test`: every hand-written product
//! file keeps at most [`MAX_PRODUCT_LINES`] lines before its tests (unit tests that would
//! push it over go to a sibling `tests.rs`), and ARCHITECTURE.md stays a bird's-eye view of
//! at most [`MAX_ARCHITECTURE_LINES`] lines whose dependency diagram names every crate of the
//! workspace. Each rule counts what it scanned, so it cannot pass on an empty tree.

use std::path::{Path, PathBuf};

/// Lines of product code a file may hold before its first `#[cfg(test)]`.
const MAX_PRODUCT_LINES: usize = 600;

/// Lines ARCHITECTURE.md may have (figures go to the bench README, details to `//!` docs).
const MAX_ARCHITECTURE_LINES: usize = 300;

/// Lines before the first line starting with `#[cfg(test)]` (every line without one).
fn lines_before_tests(text: &str) -> usize {
    text.lines()
        .position(|line| line.starts_with("#[cfg(test)]"))
        .unwrap_or_else(|| text.lines().count())
}

/// Whether `path` (relative to a crate's `src/`) is test code: under a `tests` or `benches`
/// directory, a `tests.rs` or a `tests_*.rs`.
fn is_test_file(rel: &Path) -> bool {
    let in_test_dir = rel
        .parent()
        .into_iter()
        .flat_map(Path::components)
        .any(|c| c.as_os_str() == "tests" || c.as_os_str() == "benches");
    let name = rel.file_name().unwrap_or_default().to_string_lossy();
    in_test_dir || name == "tests.rs" || name.starts_with("tests_")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// The hand-written product files: `crates/*/src` and `xtask/src`, less test code (`proto`
/// is left out: most of it is generated).
fn product_files(root: &Path) -> Vec<PathBuf> {
    let mut sources = vec![root.join("xtask/src")];
    if let Ok(crates) = std::fs::read_dir(root.join("crates")) {
        sources.extend(crates.flatten().map(|c| c.path().join("src")));
    }
    let mut files = Vec::new();
    for src in sources {
        let mut found = Vec::new();
        rust_files(&src, &mut found);
        files.extend(
            found
                .into_iter()
                .filter(|f| !is_test_file(f.strip_prefix(&src).unwrap_or(f))),
        );
    }
    files.sort();
    files
}

/// The first fenced code block of a Markdown text (between its ```` ``` ```` lines).
fn first_code_block(markdown: &str) -> Option<String> {
    let mut lines = markdown.lines();
    lines.find(|line| line.trim_start().starts_with("```"))?;
    let mut block = Vec::new();
    for line in lines {
        if line.trim_start().starts_with("```") {
            return Some(block.join("\n"));
        }
        block.push(line);
    }
    None
}

/// The `members` of a Cargo.toml's `[workspace]`, as written.
fn workspace_members(cargo_toml: &str) -> Vec<String> {
    let Some(start) = cargo_toml.find("\nmembers = [") else {
        return Vec::new();
    };
    let list = &cargo_toml[start + "\nmembers = [".len()..];
    let list = &list[..list.find(']').unwrap_or(list.len())];
    list.split(',')
        .map(|item| item.trim().trim_matches('"'))
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The `name` of a crate's Cargo.toml `[package]`.
fn package_name(cargo_toml: &str) -> Option<String> {
    cargo_toml.lines().find_map(|line| {
        let value = line.strip_prefix("name = \"")?;
        Some(value.trim_end_matches('"').to_owned())
    })
}

/// Whether `text` holds `word` with no name character (alphanumeric, `_`, `-`) either side.
fn names(text: &str, word: &str) -> bool {
    let is_name = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(is_name) && !after.is_some_and(is_name)
    })
}

/// The crates (directory, package name) the diagram names by neither.
fn unnamed_crates(diagram: &str, crates: &[(String, String)]) -> Vec<String> {
    crates
        .iter()
        .filter(|(dir, package)| !names(diagram, dir) && !names(diagram, package))
        .map(|(dir, package)| format!("{package} ({dir})"))
        .collect()
}

#[test]
fn product_files_stay_under_the_line_limit() {
    let root = crate::workspace_root();
    let files = product_files(&root);
    assert!(files.len() > 100, "scanned only {} files", files.len());
    let mut over: Vec<String> = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let lines = lines_before_tests(&text);
        if lines > MAX_PRODUCT_LINES {
            let rel = path.strip_prefix(&root).unwrap_or(path);
            over.push(format!("{} ({lines} lines)", rel.display()));
        }
    }
    assert!(
        over.is_empty(),
        "over {MAX_PRODUCT_LINES} lines before `#[cfg(test)]` (split by meaning; unit tests go to a sibling tests.rs):\n{}",
        over.join("\n")
    );
}

#[test]
fn the_architecture_diagram_names_every_crate() {
    let root = crate::workspace_root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let members = workspace_members(&manifest);
    assert!(members.len() > 8, "found only {members:?}");
    let crates: Vec<(String, String)> = members
        .iter()
        .map(|member| {
            let toml = std::fs::read_to_string(root.join(member).join("Cargo.toml")).unwrap();
            let package = package_name(&toml).unwrap_or_else(|| panic!("{member}: no name"));
            let dir = Path::new(member).file_name().unwrap().to_string_lossy();
            (dir.into_owned(), package)
        })
        .collect();
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let lines = architecture.lines().count();
    assert!(
        lines <= MAX_ARCHITECTURE_LINES,
        "ARCHITECTURE.md has {lines} lines, over {MAX_ARCHITECTURE_LINES}: move details to the \
         modules' docs"
    );
    let diagram = first_code_block(&architecture).expect("ARCHITECTURE.md has a diagram");
    assert!(diagram.lines().count() > 2, "{diagram}");
    let missing = unnamed_crates(&diagram, &crates);
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's diagram (its first code block) does not name: {}",
        missing.join(", ")
    );
}

#[test]
fn the_line_count_stops_at_the_first_test_attribute() {
    assert_eq!(lines_before_tests(""), 0);
    assert_eq!(lines_before_tests("a\nb\n"), 2);
    assert_eq!(lines_before_tests("a\nb\n#[cfg(test)]\nmod tests;\n"), 2);
    // An indented attribute (a test-only method) does not end the product code.
    let text = "impl A {\n    #[cfg(test)]\n    fn f() {}\n}\n#[cfg(test)]\nmod tests {}\n";
    assert_eq!(lines_before_tests(text), 4);
    let long = "fn f() {}\n".repeat(MAX_PRODUCT_LINES + 1);
    assert!(lines_before_tests(&long) > MAX_PRODUCT_LINES);
}

#[test]
fn test_files_are_told_from_product_files() {
    for test in [
        "tests.rs",
        "node/tests.rs",
        "node/tests_large_machines.rs",
        "tests/it/main.rs",
        "benches/x.rs",
    ] {
        assert!(is_test_file(Path::new(test)), "{test}");
    }
    for product in [
        "lib.rs",
        "node/mod.rs",
        "testing.rs",
        "config/tests_helper/mod.rs",
    ] {
        assert!(!is_test_file(Path::new(product)), "{product}");
    }
}

#[test]
fn the_diagram_is_the_first_code_block() {
    let markdown = "# A\n\ntext\n\n```\na ──► b\n```\n\n```rust\nc\n```\n";
    assert_eq!(first_code_block(markdown).as_deref(), Some("a ──► b"));
    assert_eq!(first_code_block("no block"), None);
    assert_eq!(first_code_block("```\nunclosed"), None);
}

#[test]
fn members_and_names_are_read_from_cargo_toml() {
    let manifest = "[workspace]\nresolver = \"3\"\nmembers = [\n    \"proto\",\n    \"crates/memmgr\",\n]\ndefault-members = [\"x\"]\n";
    assert_eq!(workspace_members(manifest), ["proto", "crates/memmgr"]);
    assert!(workspace_members("[package]\n").is_empty());
    let package = "[package]\nname = \"corral-memmgr\"\nversion = \"0.1.0\"\n";
    assert_eq!(package_name(package).as_deref(), Some("corral-memmgr"));
}

#[test]
fn a_crate_missing_from_the_diagram_is_named() {
    let crates = |list: &[(&str, &str)]| -> Vec<(String, String)> {
        list.iter()
            .map(|(d, p)| ((*d).to_owned(), (*p).to_owned()))
            .collect()
    };
    let diagram = "agent ──► cpumgr\ncorral-proto\n";
    let all = crates(&[
        ("agent", "corral-agent"),
        ("cpumgr", "corral-cpumgr"),
        ("proto", "corral-proto"),
        ("memmgr", "corral-memmgr"),
        ("mgr", "corral-mgr"),
    ]);
    // A name inside a longer one (`mgr` in `cpumgr`) does not count.
    assert_eq!(
        unnamed_crates(diagram, &all),
        ["corral-memmgr (memmgr)", "corral-mgr (mgr)"]
    );
}
