//! [`NumaInfo`]: the machine's NUMA node ids and distances, as the policies see them
//! (upstream `numa_info.go`).

use std::collections::BTreeMap;

use crate::NumaMask;

/// Why a [`NumaInfo`] could not be built.
///
/// # Example
///
/// ```
/// use corral_topology::{NumaInfo, NumaInfoError};
///
/// assert_eq!(NumaInfo::from_ids([0, 64]).unwrap_err(), NumaInfoError::IdOutOfRange { id: 64 });
/// assert_eq!(NumaInfo::from_ids([1, 1]).unwrap_err(), NumaInfoError::DuplicateNode { id: 1 });
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NumaInfoError {
    /// A NUMA node id the 64-bit affinity mask cannot hold (node ids here are mask bits:
    /// [`CpuTopology::numa_nodes_for_manager`](crate::CpuTopology::numa_nodes_for_manager)
    /// renumbers sparse OS ids into 0–63).
    #[error("NUMA node id {id} is out of range: the topology manager handles ids 0-63")]
    IdOutOfRange {
        /// The node id.
        id: usize,
    },
    /// More nodes than a 64-bit affinity mask has bits (no numbering can help).
    #[error("{count} NUMA nodes: the topology manager handles at most 64")]
    TooManyNodes {
        /// The number of nodes given.
        count: usize,
    },
    /// The same node id twice.
    #[error("NUMA node {id} is listed twice")]
    DuplicateNode {
        /// The node id.
        id: usize,
    },
    /// `prefer-closest-numa-nodes` needs distances and a node has none (upstream: "error
    /// getting NUMA distances from cadvisor").
    #[error("error getting NUMA distances: node {id} has no distance row")]
    MissingDistances {
        /// The node id.
        id: usize,
    },
    /// A distance row too short to be indexed by every node id.
    #[error("NUMA node {id}'s distance row has {len} entries but node ids go up to {max_id}")]
    ShortDistanceRow {
        /// The node id.
        id: usize,
        /// The row's length.
        len: usize,
        /// The largest node id.
        max_id: usize,
    },
}

/// One NUMA node as discovery reports it: its id and its distance row (indexed by node id).
/// Ids are mask bits: the Linux node ids, unless the machine has one of 64 or more (see
/// [`NumaIds`](crate::NumaIds)).
///
/// # Example
///
/// ```
/// use corral_topology::{NumaDistances, NumaInfo, NumaNode};
///
/// let nodes = [
///     NumaNode { id: 0, distances: Some(vec![10, 21]) },
///     NumaNode { id: 1, distances: Some(vec![21, 10]) },
/// ];
/// let info = NumaInfo::new(&nodes, NumaDistances::Require)?;
/// assert_eq!(info.distances()[&1], [21, 10]);
/// // `prefer-closest-numa-nodes` needs every row.
/// let blind = [NumaNode { id: 0, distances: None }];
/// assert!(NumaInfo::new(&blind, NumaDistances::Require).is_err());
/// assert!(NumaInfo::new(&blind, NumaDistances::Ignore).is_ok());
/// # Ok::<(), corral_topology::NumaInfoError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaNode {
    /// Node id (mask bit).
    pub id: usize,
    /// `node<id>/distance`, indexed by node id; `None` when unknown.
    pub distances: Option<Vec<u64>>,
}

/// Whether [`NumaInfo::new`] keeps the nodes' distance rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NumaDistances {
    /// Distances are not used and not required (every policy without
    /// `prefer-closest-numa-nodes`).
    #[default]
    Ignore,
    /// Every node must have a distance row, indexable by every node id
    /// (`prefer-closest-numa-nodes`; see
    /// [`PolicyOptions::numa_distances`](super::PolicyOptions::numa_distances)).
    Require,
}

/// The NUMA nodes of the machine and, when `prefer-closest-numa-nodes` is on, their distances.
///
/// # Example
///
/// ```
/// use corral_topology::{NumaDistances, NumaInfo, NumaMask, NumaNode};
///
/// let info = NumaInfo::from_ids([0, 1, 2])?;
/// assert_eq!(info.nodes(), &[0, 1, 2]);
/// assert_eq!(info.default_affinity(), NumaMask::new([0, 1, 2])?);
///
/// // With distances, `closest` prefers the pair of nodes nearer to each other.
/// let rows = [vec![10, 11, 20], vec![11, 10, 20], vec![20, 20, 10]];
/// let nodes: Vec<NumaNode> = rows
///     .iter()
///     .enumerate()
///     .map(|(id, row)| NumaNode { id, distances: Some(row.clone()) })
///     .collect();
/// let info = NumaInfo::new(&nodes, NumaDistances::Require)?;
/// let near = NumaMask::new([0, 1])?;
/// let far = NumaMask::new([0, 2])?;
/// assert_eq!(info.closest(far, near), near);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaInfo {
    nodes: Vec<usize>,
    default_affinity: NumaMask,
    distances: BTreeMap<usize, Vec<u64>>,
    /// `distances` as a dense 64 × 64 table (row-major, 0 where unknown), for the merge's
    /// searches; empty without distances.
    matrix: Vec<u64>,
}

impl NumaInfo {
    /// Build from the machine's nodes (upstream `NewNUMAInfo`). Distances are kept only with
    /// [`NumaDistances::Require`] (the prefer-closest option) and are then required for every
    /// node and checked to be indexable by every node id (upstream would panic instead).
    pub fn new(nodes: &[NumaNode], distances: NumaDistances) -> Result<NumaInfo, NumaInfoError> {
        if nodes.len() > 64 {
            return Err(NumaInfoError::TooManyNodes { count: nodes.len() });
        }
        let mut ids = Vec::with_capacity(nodes.len());
        let mut mask = NumaMask::EMPTY;
        for node in nodes {
            if node.id >= 64 {
                return Err(NumaInfoError::IdOutOfRange { id: node.id });
            }
            if mask.is_set(node.id) {
                return Err(NumaInfoError::DuplicateNode { id: node.id });
            }
            mask = mask.or(NumaMask::from_u64(1 << node.id));
            ids.push(node.id);
        }
        let with_distances = distances == NumaDistances::Require;
        let mut distances = BTreeMap::new();
        if with_distances {
            let max_id = ids.iter().copied().max().unwrap_or(0);
            for node in nodes {
                let row = node
                    .distances
                    .clone()
                    .ok_or(NumaInfoError::MissingDistances { id: node.id })?;
                if row.len() <= max_id {
                    return Err(NumaInfoError::ShortDistanceRow {
                        id: node.id,
                        len: row.len(),
                        max_id,
                    });
                }
                distances.insert(node.id, row);
            }
        }
        let mut matrix = Vec::new();
        if with_distances {
            matrix = vec![0; 64 * 64];
            for (&a, row) in &distances {
                for (b, &d) in row.iter().enumerate().take(64) {
                    matrix[a * 64 + b] = d;
                }
            }
        }
        Ok(NumaInfo {
            nodes: ids,
            default_affinity: mask,
            distances,
            matrix,
        })
    }

    /// A `NumaInfo` for nodes `ids` without distances.
    pub fn from_ids(ids: impl IntoIterator<Item = usize>) -> Result<NumaInfo, NumaInfoError> {
        let nodes: Vec<NumaNode> = ids
            .into_iter()
            .map(|id| NumaNode {
                id,
                distances: None,
            })
            .collect();
        NumaInfo::new(&nodes, NumaDistances::Ignore)
    }

    /// The node ids, in the order given.
    pub fn nodes(&self) -> &[usize] {
        &self.nodes
    }

    /// Every node of the machine (upstream `DefaultAffinityMask`).
    pub fn default_affinity(&self) -> NumaMask {
        self.default_affinity
    }

    /// The distance rows kept (empty unless built with distances).
    pub fn distances(&self) -> &BTreeMap<usize, Vec<u64>> {
        &self.distances
    }

    /// `distance[a][b]` as [`average_distance`](Self::average_distance) reads it (0 when
    /// unknown).
    pub(crate) fn distance(&self, a: usize, b: usize) -> u64 {
        if a < 64 && b < 64 {
            self.matrix.get(a * 64 + b).copied().unwrap_or(0)
        } else {
            0
        }
    }

    /// Upstream `Narrowest`: `m1` if it is narrower than `m2`, else `m2`.
    pub fn narrowest(&self, m1: NumaMask, m2: NumaMask) -> NumaMask {
        if m1.is_narrower_than(m2) { m1 } else { m2 }
    }

    /// Upstream `Closest`: the narrower mask; at equal size the one with the smaller average
    /// distance; at equal average the smaller integer value.
    pub fn closest(&self, m1: NumaMask, m2: NumaMask) -> NumaMask {
        if m1.count() != m2.count() {
            return self.narrowest(m1, m2);
        }
        let d1 = self.average_distance(m1);
        let d2 = self.average_distance(m2);
        if d1 == d2 {
            return if m1.is_less_than(m2) { m1 } else { m2 };
        }
        if d1 < d2 { m1 } else { m2 }
    }

    /// Upstream `CalculateAverageFor`: the mean of `distance[i][j]` over all ordered pairs of
    /// ids in `mask` (0 for the empty mask), summed in `f64` in upstream's order. Ids with no
    /// row (or beyond a row) count as distance 0.
    pub fn average_distance(&self, mask: NumaMask) -> f64 {
        if mask.is_empty() {
            return 0.0;
        }
        let mut sum = 0f64;
        let mut count = 0f64;
        for a in mask.iter() {
            let row = self.distances.get(&a);
            for b in mask.iter() {
                sum += row.and_then(|r| r.get(b)).copied().unwrap_or(0) as f64;
                count += 1.0;
            }
        }
        sum / count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(rows: &[&[u64]]) -> NumaInfo {
        let nodes: Vec<NumaNode> = rows
            .iter()
            .enumerate()
            .map(|(id, row)| NumaNode {
                id,
                distances: Some(row.to_vec()),
            })
            .collect();
        NumaInfo::new(&nodes, NumaDistances::Require).expect("valid")
    }

    fn m(ids: &[usize]) -> NumaMask {
        NumaMask::new(ids.iter().copied()).expect("mask")
    }

    /// Upstream `TestClosest` (numa_info_test.go): `Closest(candidate, current)`.
    #[test]
    fn closest() {
        let flat3 = info(&[&[10, 10, 10], &[10, 10, 10], &[10, 10, 10]]);
        let flat4 = info(&[&[10; 4], &[10; 4], &[10; 4], &[10; 4]]);
        let two = info(&[
            &[10, 11, 12, 12],
            &[11, 10, 12, 12],
            &[12, 12, 10, 11],
            &[12, 12, 11, 10],
        ]);
        // current narrower
        assert_eq!(flat3.closest(m(&[0, 2]), m(&[0])), m(&[0]));
        // same distance, current has more lower bits set
        assert_eq!(flat3.closest(m(&[0, 2]), m(&[0, 1])), m(&[0, 1]));
        // same distance, candidate has more lower bits set
        assert_eq!(flat4.closest(m(&[0, 2]), m(&[0, 3])), m(&[0, 2]));
        // candidate average distance smaller
        assert_eq!(two.closest(m(&[0, 1]), m(&[0, 3])), m(&[0, 1]));
        // current average distance smaller
        assert_eq!(two.closest(m(&[0, 3]), m(&[2, 3])), m(&[2, 3]));
        assert_eq!(two.average_distance(m(&[0, 1])), 10.5);
        assert_eq!(two.average_distance(NumaMask::EMPTY), 0.0);
    }

    #[test]
    fn construction_errors() {
        assert_eq!(
            NumaInfo::from_ids([0, 64]),
            Err(NumaInfoError::IdOutOfRange { id: 64 })
        );
        assert_eq!(
            NumaInfo::from_ids(0..65),
            Err(NumaInfoError::TooManyNodes { count: 65 })
        );
        assert_eq!(
            NumaInfo::from_ids([1, 1]),
            Err(NumaInfoError::DuplicateNode { id: 1 })
        );
        let missing = [NumaNode {
            id: 0,
            distances: None,
        }];
        assert_eq!(
            NumaInfo::new(&missing, NumaDistances::Require),
            Err(NumaInfoError::MissingDistances { id: 0 })
        );
        let short = [
            NumaNode {
                id: 0,
                distances: Some(vec![10]),
            },
            NumaNode {
                id: 3,
                distances: Some(vec![10]),
            },
        ];
        assert!(matches!(
            NumaInfo::new(&short, NumaDistances::Require),
            Err(NumaInfoError::ShortDistanceRow { .. })
        ));
        assert_eq!(
            NumaInfo::from_ids([0, 2]).map(|i| i.default_affinity()),
            Ok(m(&[0, 2]))
        );
    }
}
