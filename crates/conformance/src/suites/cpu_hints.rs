//! Suite `cpu_hints`: upstream static policy `generateCPUTopologyHints` (with and without
//! `align-by-socket`) against `corral_cpumgr::generate_cpu_topology_hints`.

use corral_cpumgr::{SocketAlignment, generate_cpu_topology_hints};
use serde_json::Value;

use super::array;
use super::cpu_assignment::{cpuset, topologies, topology_of};
use crate::mismatch::{Mismatch, bad_case, differs};
use crate::report::SuiteOutcome;

/// Check every case of one `cpu_hints` vector file.
pub(crate) fn run(doc: &Value, out: &mut SuiteOutcome) {
    let topos = topologies(doc);
    for (i, case) in array(doc, "cases").iter().enumerate() {
        let label = format!("cases[{i}] {}", case["id"].as_str().unwrap_or("?"));
        let result = topology_of(&topos, case).and_then(|index| {
            let request = case["request"]
                .as_i64()
                .ok_or("`request` is not an integer")?;
            let align = if case["align_by_socket"]
                .as_bool()
                .ok_or("`align_by_socket` is not a bool")?
            {
                SocketAlignment::Prefer
            } else {
                SocketAlignment::Ignore
            };
            // Upstream takes an `int`; every request <= 0 behaves as 0 (all masks fit).
            let request = usize::try_from(request.max(0)).map_err(|e| bad_case!("{e}"))?;
            let hints = generate_cpu_topology_hints(
                index,
                &cpuset(case, "available")?,
                &cpuset(case, "reusable")?,
                request,
                align,
            );
            let got: Vec<(Vec<usize>, bool)> = hints
                .iter()
                .map(|h| {
                    let bits = h.numa_affinity.map(|m| m.get_bits()).unwrap_or_default();
                    (bits, h.preferred)
                })
                .collect();
            let want = expected(case)?;
            if got == want {
                Ok(())
            } else {
                Err(differs!("expected {want:?}, got {got:?}"))
            }
        });
        out.check(label, result);
    }
}

fn expected(case: &Value) -> Result<Vec<(Vec<usize>, bool)>, Mismatch> {
    case["hints"]
        .as_array()
        .ok_or("`hints` is not a list")?
        .iter()
        .map(|h| {
            let bits = h["affinity"]
                .as_array()
                .ok_or("`affinity` is not a list")?
                .iter()
                .map(|x| {
                    x.as_u64()
                        .and_then(|n| usize::try_from(n).ok())
                        .ok_or_else(|| bad_case!("bad NUMA id {x}"))
                })
                .collect::<Result<Vec<_>, Mismatch>>()?;
            let preferred = h["preferred"]
                .as_bool()
                .ok_or("`preferred` is not a bool")?;
            Ok((bits, preferred))
        })
        .collect()
}
