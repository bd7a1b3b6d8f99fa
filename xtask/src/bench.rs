//! `cargo xtask bench [--quick] [--json FILE] [FILTER]`: run the workspace's criterion
//! benches and print one summary table from criterion's estimates.
//!
//! Benchmarks whose id is `go/<name>` re-run an input of `testdata/bench/go_bench.json`
//! (upstream Go timings on the same input); the table shows Go's median and the ratio
//! Go / corral beside them. Rows with an entry in `testdata/bench/targets.json` (keyed by
//! the criterion id) show their target, pass or MISS, and the physical bound where one is
//! known. Timings on a shared 2-core machine are noisy (±10–20 %); this command never fails
//! on a timing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Options of one `bench` run.
pub(crate) struct BenchOptions {
    /// Short smoke run: few samples, short measurement.
    pub(crate) quick: bool,
    /// Also write the summary as JSON here.
    pub(crate) json: Option<PathBuf>,
    /// Only benchmarks whose id contains this.
    pub(crate) filter: Option<String>,
}

/// One row of the summary.
#[derive(Debug, Serialize)]
struct Row {
    id: String,
    median_ns: f64,
    throughput: Option<String>,
    go_median_ns: Option<f64>,
    go_over_corral: Option<f64>,
    /// The median this row should stay under (`targets.json`).
    target_ns: Option<f64>,
    /// Whether the median is under the target.
    meets_target: Option<bool>,
    /// The least cost the hardware allows, as text, where known.
    bound: Option<String>,
}

/// A row's target and bound, from `testdata/bench/targets.json`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct Target {
    id: String,
    target_ns: f64,
    bound: Option<String>,
}

/// Run the benches, then summarise what criterion wrote under `target/criterion`.
pub(crate) fn run(root: &Path, options: &BenchOptions) -> Result<()> {
    let target = target_dir(root);
    let criterion_dir = target.join("criterion");
    // Old estimates of renamed or filtered-out benches must not show up in this summary.
    let started = std::time::SystemTime::now();
    // `--bench '*'` selects only `benches/` targets: libraries and binaries stay out of the
    // bench build (their libtest harness would not understand criterion's flags).
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(root)
        .args(["bench", "--workspace", "--bench", "*", "--"]);
    if let Some(filter) = &options.filter {
        cmd.arg(filter);
    }
    if options.quick {
        // Criterion's quick mode stops as soon as the estimate is stable enough.
        cmd.args([
            "--quick",
            "--warm-up-time",
            "0.2",
            "--measurement-time",
            "0.5",
        ]);
    }
    let status = cmd.status().context("running cargo bench")?;
    if !status.success() {
        bail!("cargo bench failed: {status}");
    }
    let go = load_go_medians(root)?;
    let targets = load_targets(root)?;
    let mut rows = collect_rows(&criterion_dir, started, &go)?;
    if rows.is_empty() {
        bail!(
            "no criterion estimates found under {}",
            criterion_dir.display()
        );
    }
    apply_targets(&mut rows, &targets);
    print!("{}", render(&rows));
    if options.filter.is_none() {
        for target in &targets {
            if !rows.iter().any(|r| r.id == target.id) {
                println!("target without a row: {}", target.id);
            }
        }
    }
    if let Some(path) = &options.json {
        let text = serde_json::to_string_pretty(&rows)?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|dir| {
            if dir.is_relative() {
                root.join(dir)
            } else {
                dir
            }
        })
        .unwrap_or_else(|| root.join("target"))
}

/// Go medians by benchmark name, from `testdata/bench/go_bench.json`.
fn load_go_medians(root: &Path) -> Result<BTreeMap<String, f64>> {
    let path = root.join("testdata/bench/go_bench.json");
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?,
    )
    .with_context(|| format!("parsing {}", path.display()))?;
    let mut medians = BTreeMap::new();
    for entry in doc["summary"].as_array().into_iter().flatten() {
        if let (Some(name), Some(ns)) = (entry["name"].as_str(), entry["median_ns_per_op"].as_f64())
        {
            medians.insert(name.to_owned(), ns);
        }
    }
    Ok(medians)
}

/// Targets by bench id, from `testdata/bench/targets.json`; ids must be unique.
fn load_targets(root: &Path) -> Result<Vec<Target>> {
    #[derive(Deserialize)]
    struct File {
        targets: Vec<Target>,
    }
    let path = root.join("testdata/bench/targets.json");
    let file: File = serde_json::from_str(
        &std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?,
    )
    .with_context(|| format!("parsing {}", path.display()))?;
    let mut seen = std::collections::BTreeSet::new();
    for target in &file.targets {
        if !seen.insert(target.id.as_str()) {
            bail!("{}: {} has two targets", path.display(), target.id);
        }
    }
    Ok(file.targets)
}

/// Give each row its target, bound and pass/miss.
fn apply_targets(rows: &mut [Row], targets: &[Target]) {
    for row in rows {
        if let Some(target) = targets.iter().find(|t| t.id == row.id) {
            row.target_ns = Some(target.target_ns);
            row.meets_target = Some(row.median_ns < target.target_ns);
            row.bound.clone_from(&target.bound);
        }
    }
}

/// Every `new/` estimate criterion wrote since `since`, as summary rows sorted by id.
fn collect_rows(
    dir: &Path,
    since: std::time::SystemTime,
    go: &BTreeMap<String, f64>,
) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry?.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n == "new") {
                    if let Some(row) = read_estimate(&path, since, go)? {
                        rows.push(row);
                    }
                } else {
                    stack.push(path);
                }
            }
        }
    }
    rows.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(rows)
}

fn read_estimate(
    new_dir: &Path,
    since: std::time::SystemTime,
    go: &BTreeMap<String, f64>,
) -> Result<Option<Row>> {
    let estimates_path = new_dir.join("estimates.json");
    let benchmark_path = new_dir.join("benchmark.json");
    let Ok(modified) = std::fs::metadata(&estimates_path).and_then(|m| m.modified()) else {
        return Ok(None);
    };
    if modified < since {
        return Ok(None);
    }
    let estimates: Value = serde_json::from_str(&std::fs::read_to_string(&estimates_path)?)
        .with_context(|| format!("parsing {}", estimates_path.display()))?;
    let benchmark: Value = serde_json::from_str(&std::fs::read_to_string(&benchmark_path)?)
        .with_context(|| format!("parsing {}", benchmark_path.display()))?;
    let id = benchmark["full_id"]
        .as_str()
        .with_context(|| format!("{}: no full_id", benchmark_path.display()))?
        .to_owned();
    let median_ns = estimates["median"]["point_estimate"]
        .as_f64()
        .with_context(|| format!("{}: no median", estimates_path.display()))?;
    let throughput = throughput_text(&benchmark["throughput"], median_ns);
    let go_median_ns = id
        .strip_prefix("go/")
        .and_then(|name| go.get(name))
        .copied();
    Ok(Some(Row {
        go_over_corral: go_median_ns.map(|g| g / median_ns),
        id,
        median_ns,
        throughput,
        go_median_ns,
        target_ns: None,
        meets_target: None,
        bound: None,
    }))
}

/// Criterion records throughput as `{"Elements": n}` or `{"Bytes": n}` per iteration.
fn throughput_text(throughput: &Value, median_ns: f64) -> Option<String> {
    let object = throughput.as_object()?;
    let (kind, amount) = object.iter().next()?;
    let amount = amount.as_f64()?;
    let per_second = amount / (median_ns / 1e9);
    Some(match kind.as_str() {
        "Bytes" | "BytesDecimal" => format!("{:.1} MiB/s", per_second / (1024.0 * 1024.0)),
        _ => format!("{:.3} Melem/s", per_second / 1e6),
    })
}

fn human_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.1} ns")
    }
}

fn render(rows: &[Row]) -> String {
    let width = rows.iter().map(|r| r.id.len()).max().unwrap_or(9).max(9);
    let mut out = format!(
        "{:<width$}  {:>11}  {:>16}  {:>11}  {:>9}  {:>14}  bound\n",
        "benchmark", "median", "throughput", "Go median", "Go/corral", "target"
    );
    for row in rows {
        let target = match (row.target_ns, row.meets_target) {
            (Some(ns), Some(true)) => format!("< {} pass", human_ns(ns)),
            (Some(ns), _) => format!("< {} MISS", human_ns(ns)),
            _ => "-".into(),
        };
        let line = format!(
            "{:<width$}  {:>11}  {:>16}  {:>11}  {:>9}  {:>14}  {}",
            row.id,
            human_ns(row.median_ns),
            row.throughput.as_deref().unwrap_or("-"),
            row.go_median_ns.map(human_ns).unwrap_or_else(|| "-".into()),
            row.go_over_corral
                .map(|r| format!("{r:.1}x"))
                .unwrap_or_else(|| "-".into()),
            target,
            row.bound.as_deref().unwrap_or("-"),
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    let missed = rows
        .iter()
        .filter(|r| r.meets_target == Some(false))
        .count();
    let targeted = rows.iter().filter(|r| r.target_ns.is_some()).count();
    if targeted > 0 {
        out.push_str(&format!(
            "targets: {} of {targeted} met, {missed} missed (testdata/bench/targets.json)\n",
            targeted - missed
        ));
    }
    out.push_str("(medians from criterion; the machine is shared and noisy, ±10-20 %)\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_reads_criterion_output_and_matches_go_names() {
        let dir = tempfile::tempdir().unwrap();
        let new_dir = dir.path().join("go/cpuset.Parse_256cpu_fragmented/new");
        std::fs::create_dir_all(&new_dir).unwrap();
        std::fs::write(
            new_dir.join("benchmark.json"),
            r#"{"full_id":"go/cpuset.Parse/256cpu/fragmented","throughput":{"Elements":136}}"#,
        )
        .unwrap();
        std::fs::write(
            new_dir.join("estimates.json"),
            r#"{"median":{"point_estimate":1000.0}}"#,
        )
        .unwrap();
        let go = BTreeMap::from([("cpuset.Parse/256cpu/fragmented".to_string(), 12_000.0)]);
        let since = std::time::SystemTime::UNIX_EPOCH;
        let mut rows = collect_rows(dir.path(), since, &go).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].go_over_corral, Some(12.0));
        let table = render(&rows);
        assert!(
            !table.contains("pass") && !table.contains("MISS"),
            "{table}"
        );
        let target = |ns: f64| Target {
            id: "go/cpuset.Parse/256cpu/fragmented".into(),
            target_ns: ns,
            bound: Some("~0.34 µs: one pass over 335 bytes".into()),
        };
        apply_targets(&mut rows, &[target(500.0)]);
        let missed = render(&rows);
        assert!(missed.contains("< 500.0 ns MISS"), "{missed}");
        assert!(missed.contains("one pass over 335 bytes"), "{missed}");
        assert!(missed.contains("0 of 1 met, 1 missed"), "{missed}");
        apply_targets(&mut rows, &[target(2000.0)]);
        let met = render(&rows);
        assert!(met.contains("< 2.00 µs pass"), "{met}");
        assert!(
            table.contains("go/cpuset.Parse/256cpu/fragmented"),
            "{table}"
        );
        assert!(table.contains("12.0x"), "{table}");
        assert!(table.contains("136.000 Melem/s"), "{table}");

        // Estimates older than this run are left out.
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
        assert!(collect_rows(dir.path(), later, &go).unwrap().is_empty());
    }

    #[test]
    fn targets_file_parses_with_unique_ids() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let targets = load_targets(root).unwrap();
        assert!(targets.len() >= 8, "{targets:?}");
        assert!(targets.iter().all(|t| t.target_ns > 0.0), "{targets:?}");
    }
}
