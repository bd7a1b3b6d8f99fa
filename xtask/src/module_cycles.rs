//! No import circles inside a crate: the modules of each crate's `src/`, with an edge from a
//! module to every other module its code (not its comments, not its `#[cfg(test)]` part)
//! names through `crate::…` or `super::…`, must form no cycle. A module's own parents and
//! children do not count (a parent declares its children; a child uses its parent's
//! items). Run by plain `cargo test` over every crate of the workspace.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path inside one crate, e.g. `["topologymanager", "scope"]`.
type ModulePath = Vec<String>;

/// The module a file is, relative to its crate's `src/`.
fn module_of(src: &Path, file: &Path) -> ModulePath {
    let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut parts: ModulePath = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The code of a file without comment lines and without what follows `#[cfg(test)]`.
fn code_of(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::a::b…` / `super::a…` path in `code`, as (is_super, segments).
fn paths_in(code: &str) -> Vec<(bool, Vec<String>)> {
    let mut out = Vec::new();
    for (keyword, is_super) in [("crate::", false), ("super::", true)] {
        let mut rest = code;
        while let Some(at) = rest.find(keyword) {
            let before = rest[..at].chars().next_back();
            rest = &rest[at + keyword.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let segments: Vec<String> = rest
                .split("::")
                .map(|s| {
                    s.chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect::<String>()
                })
                .take_while(|s| !s.is_empty())
                .collect();
            out.push((is_super, segments));
        }
    }
    out
}

/// The cycles (strongly connected components of more than one module) of one crate.
pub(crate) fn cycles(src: &Path, files: &[PathBuf]) -> Vec<Vec<String>> {
    let modules: BTreeMap<ModulePath, &PathBuf> =
        files.iter().map(|f| (module_of(src, f), f)).collect();
    let mut edges: BTreeMap<ModulePath, BTreeSet<ModulePath>> = BTreeMap::new();
    for (module, file) in &modules {
        let code = code_of(&std::fs::read_to_string(file).unwrap_or_default());
        let targets = edges.entry(module.clone()).or_default();
        for (is_super, segments) in paths_in(&code) {
            let mut full: ModulePath = if is_super {
                module[..module.len().saturating_sub(1)].to_vec()
            } else {
                Vec::new()
            };
            full.extend(segments);
            let Some(target) = (1..=full.len())
                .rev()
                .map(|k| full[..k].to_vec())
                .find(|candidate| modules.contains_key(candidate))
            else {
                continue;
            };
            let related = target.starts_with(module) || module.starts_with(&target);
            if !related {
                targets.insert(target);
            }
        }
    }
    strongly_connected(&edges)
        .into_iter()
        .filter(|component| component.len() > 1)
        .map(|component| component.iter().map(|m| m.join("::")).collect())
        .collect()
}

/// Tarjan's strongly connected components.
fn strongly_connected(edges: &BTreeMap<ModulePath, BTreeSet<ModulePath>>) -> Vec<Vec<ModulePath>> {
    struct State<'a> {
        edges: &'a BTreeMap<ModulePath, BTreeSet<ModulePath>>,
        index: BTreeMap<&'a ModulePath, usize>,
        low: BTreeMap<&'a ModulePath, usize>,
        stack: Vec<&'a ModulePath>,
        on_stack: BTreeSet<&'a ModulePath>,
        out: Vec<Vec<ModulePath>>,
    }
    fn visit<'a>(state: &mut State<'a>, v: &'a ModulePath) {
        let n = state.index.len();
        state.index.insert(v, n);
        state.low.insert(v, n);
        state.stack.push(v);
        state.on_stack.insert(v);
        let edges = state.edges;
        for w in edges.get(v).into_iter().flatten() {
            if !state.index.contains_key(w) {
                visit(state, w);
                let low = state.low[v].min(state.low[w]);
                state.low.insert(v, low);
            } else if state.on_stack.contains(w) {
                let low = state.low[v].min(state.index[w]);
                state.low.insert(v, low);
            }
        }
        if state.low[v] == state.index[v] {
            let mut component = Vec::new();
            while let Some(w) = state.stack.pop() {
                state.on_stack.remove(w);
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            state.out.push(component);
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !state.index.contains_key(v) {
            visit(&mut state, v);
        }
    }
    state.out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    #[test]
    fn no_crate_has_an_import_circle() {
        let root = crate::workspace_root();
        let mut srcs: Vec<PathBuf> = vec![root.join("proto/src"), root.join("xtask/src")];
        for entry in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
            srcs.push(entry.path().join("src"));
        }
        let mut found = Vec::new();
        for src in srcs.iter().filter(|s| s.is_dir()) {
            let mut files = Vec::new();
            rust_files(src, &mut files);
            files.retain(|f| !f.components().any(|c| c.as_os_str() == "gen"));
            for cycle in cycles(src, &files) {
                found.push(format!("{}: {}", src.display(), cycle.join(" <-> ")));
            }
        }
        assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
    }

    #[test]
    fn a_circle_is_found_and_parents_do_not_count() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path();
        std::fs::create_dir_all(src.join("a")).unwrap();
        std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
        std::fs::write(src.join("a/mod.rs"), "use crate::b::B;\nmod c;\n").unwrap();
        std::fs::write(src.join("a/c.rs"), "use super::A; // parent\n").unwrap();
        std::fs::write(
            src.join("b.rs"),
            "// use crate::a::A; (a comment)\npub struct B;\n",
        )
        .unwrap();
        let files = ["lib.rs", "a/mod.rs", "a/c.rs", "b.rs"].map(|f| src.join(f));
        assert!(cycles(src, &files).is_empty());
        std::fs::write(src.join("b.rs"), "use crate::a::A;\npub struct B;\n").unwrap();
        assert_eq!(cycles(src, &files).len(), 1);
    }
}
