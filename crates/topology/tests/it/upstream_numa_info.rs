//! Ported from upstream `pkg/kubelet/cm/topologymanager/numa_info_test.go` (`TestNUMAInfo`,
//! `TestCalculateAvgDistanceFor`; `TestClosest` is a unit test beside `NumaInfo::closest`).
//!
//! Upstream keeps a nil distance row per node when prefer-closest is off; corral keeps no rows
//! then (`distances()` is empty), which is the same "unknown" to every caller. Upstream's
//! missing-distances error says "from cadvisor"; corral has no cadvisor and names the node.

use std::collections::BTreeMap;

use corral_topology::{NumaDistances, NumaInfo, NumaInfoError, NumaMask, NumaNode};

const ROW0: &[u64] = &[10, 11, 12, 12];
const ROW1: &[u64] = &[11, 10, 12, 12];
const ROW2: &[u64] = &[12, 12, 10, 11];
const ROW3: &[u64] = &[12, 12, 11, 10];

fn node(id: usize, row: Option<&[u64]>) -> NumaNode {
    NumaNode {
        id,
        distances: row.map(<[u64]>::to_vec),
    }
}

/// Upstream `TestNUMAInfo` (13 cases).
#[test]
fn numa_info() {
    // Upstream's cases come in pairs: each machine without, then with PreferClosestNUMA.
    #[allow(clippy::type_complexity)]
    let machines: [(&str, Vec<(usize, &[u64])>); 6] = [
        ("positive test 1 node", vec![(0, ROW0)]),
        ("positive test 2 nodes", vec![(0, ROW0), (1, ROW1)]),
        (
            "positive test 3 nodes",
            vec![(0, ROW0), (1, ROW1), (2, ROW2)],
        ),
        (
            "positive test 4 nodes",
            vec![(0, ROW0), (1, ROW1), (2, ROW2), (3, ROW3)],
        ),
        ("one node and its id is 1", vec![(1, ROW1)]),
        ("two nodes not sequential", vec![(0, ROW0), (2, ROW2)]),
    ];
    let cases = machines.iter().flat_map(|(name, rows)| {
        [
            ((*name).to_owned(), rows, NumaDistances::Ignore),
            (
                format!("{name}, with PreferClosestNUMA"),
                rows,
                NumaDistances::Require,
            ),
        ]
    });
    for (name, rows, distances) in cases {
        let name = name.as_str();
        let prefer_closest = distances == NumaDistances::Require;
        // Without prefer-closest upstream's cases give no distances; giving them changes
        // nothing, as they are dropped.
        let with_rows: Vec<NumaNode> = rows.iter().map(|&(id, row)| node(id, Some(row))).collect();
        let without: Vec<NumaNode> = rows.iter().map(|&(id, _)| node(id, None)).collect();
        let inputs = if prefer_closest {
            vec![with_rows]
        } else {
            vec![with_rows, without]
        };
        for nodes in inputs {
            let info = NumaInfo::new(&nodes, distances).expect(name);
            let ids: Vec<usize> = rows.iter().map(|&(id, _)| id).collect();
            assert_eq!(info.nodes(), ids.as_slice(), "{name}");
            assert_eq!(
                info.default_affinity(),
                NumaMask::new(ids.iter().copied()).ok().unwrap_or_default(),
                "{name}"
            );
            let expected: BTreeMap<usize, Vec<u64>> = if prefer_closest {
                rows.iter().map(|&(id, row)| (id, row.to_vec())).collect()
            } else {
                BTreeMap::new()
            };
            assert_eq!(info.distances(), &expected, "{name}");
        }
    }
    // "negative test 1 node, no distance file with PreferClosestNUMA"
    let err = NumaInfo::new(&[node(9, None)], NumaDistances::Require).expect_err("no distances");
    assert_eq!(err, NumaInfoError::MissingDistances { id: 9 });
    assert!(
        err.to_string().contains("error getting NUMA distances"),
        "{err}"
    );
}

/// Upstream `TestCalculateAvgDistanceFor` (6 cases).
#[test]
fn calculate_avg_distance_for() {
    let two: &[&[u64]] = &[&[10, 11], &[11, 10]];
    let four: &[&[u64]] = &[ROW0, ROW1, ROW2, ROW3];
    #[allow(clippy::type_complexity)]
    let cases: [(&str, &[usize], &[&[u64]], f64); 6] = [
        ("1 NUMA node", &[0], &[&[10]], 10.0),
        ("2 NUMA node, 1 set in bitmask", &[0], two, 10.0),
        ("2 NUMA node, 2 set in bitmask", &[0, 1], two, 10.5),
        ("4 NUMA node, 2 set in bitmask", &[0, 2], four, 11.0),
        (
            "4 NUMA node, 3 set in bitmask",
            &[0, 2, 3],
            four,
            11.11111111111111,
        ),
        ("0 NUMA node, 0 set in bitmask", &[], &[], 0.0),
    ];
    for (name, bits, rows, expected) in cases {
        let nodes: Vec<NumaNode> = rows
            .iter()
            .enumerate()
            .map(|(id, row)| node(id, Some(row)))
            .collect();
        let info = NumaInfo::new(&nodes, NumaDistances::Require).expect(name);
        let mask = NumaMask::new(bits.iter().copied()).expect(name);
        // Exact equality, as upstream compares the float64 with `!=`.
        assert_eq!(info.average_distance(mask), expected, "{name}");
    }
}
