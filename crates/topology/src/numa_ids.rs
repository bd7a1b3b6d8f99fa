//! [`NumaIds`]: which bit of a [`NumaMask`] stands for which NUMA node of the machine.
//!
//! Upstream's masks are 64-bit integers whose bit *i* is the NUMA node with OS id *i*, so a
//! machine with a node id of 64 or more cannot be represented at all (kubelet's `NewBitMask`
//! fails, and corral refused to start). Real machines have such ids: Linux numbers nodes
//! sparsely on some firmware, e.g. `0-2,33-34,45,72-73` on a 48-core AMD machine (hwloc's
//! `48amd64-4pa2n6c-sparse` dump in `testdata/sysfs`).
//!
//! **Deviation from upstream.** When every node id is below 64, bit *i* is node *i* — exactly
//! upstream, and every mask, hint and order is unchanged. Otherwise (at most 64 nodes, some id
//! ≥ 64) the nodes are given the dense bits 0, 1, … in ascending id order: bit order is id
//! order, so upstream's tie-breaks (lower mask value first) still prefer lower node ids. The
//! managers (CPU manager, device manager, topology manager) then work on bits only; every edge
//! that shows or stores a node (status, podresources, the agent's pod files, `corral
//! topology`) converts bits back to OS ids through this table. More than 64 nodes cannot fit
//! in a 64-bit mask by any numbering and stays an error.

use std::fmt;

use crate::NumaMask;

/// Why a NUMA id could not be translated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NumaIdsError {
    /// More nodes than a 64-bit mask has bits.
    #[error("{count} NUMA nodes do not fit in a 64-bit NUMA mask (at most 64)")]
    TooManyNodes {
        /// The number of distinct node ids.
        count: usize,
    },
    /// An OS node id with no mask bit: not a node of this machine (when ids are renumbered),
    /// or 64 or more (when they are not).
    #[error("NUMA node {id} has no bit in this machine's NUMA masks")]
    NoBit {
        /// The OS node id.
        id: usize,
    },
    /// A mask bit that stands for no node of this machine.
    #[error("NUMA mask bit {bit} stands for no NUMA node of this machine")]
    NoNode {
        /// The bit.
        bit: usize,
    },
}

/// The table between a machine's NUMA node OS ids and the bits of [`NumaMask`]s.
///
/// Either the identity (bit *i* = node *i*, upstream's only numbering, used whenever every id
/// is below 64) or a dense numbering of at most 64 nodes in ascending id order.
///
/// # Example
///
/// ```
/// use corral_topology::{NumaIds, NumaMask};
///
/// let plain = NumaIds::new([0, 1, 3])?;
/// assert!(plain.is_identity());
/// assert_eq!(plain.bit(3)?, 3);
///
/// let sparse = NumaIds::new([0, 1, 2, 33, 34, 45, 72, 73])?;
/// assert!(!sparse.is_identity());
/// assert_eq!(sparse.bit(72)?, 6);
/// assert_eq!(sparse.os_id(7)?, 73);
/// let mask = sparse.mask_of([33, 72])?;
/// assert_eq!(mask, NumaMask::new([3, 6])?);
/// assert_eq!(sparse.os_ids_of(mask)?, vec![33, 72]);
/// assert!(sparse.bit(5).is_err(), "node 5 does not exist there");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct NumaIds {
    /// The machine's node OS ids, ascending and distinct.
    nodes: Vec<usize>,
    /// Bit = OS id (otherwise bit = position in `nodes`).
    dense: bool,
}

impl NumaIds {
    /// The identity table with no node list: bit *i* is node *i* for every *i* below 64
    /// (upstream's numbering; what a manager assumes unless told otherwise).
    pub fn identity() -> NumaIds {
        NumaIds::default()
    }

    /// The table for a machine whose NUMA nodes have these OS ids (any order, repeats
    /// ignored): the identity when every id is below 64, otherwise dense bits in ascending id
    /// order. Fails when there are more than 64 distinct ids.
    pub fn new(ids: impl IntoIterator<Item = usize>) -> Result<NumaIds, NumaIdsError> {
        let mut nodes: Vec<usize> = ids.into_iter().collect();
        nodes.sort_unstable();
        nodes.dedup();
        if nodes.len() > 64 {
            return Err(NumaIdsError::TooManyNodes { count: nodes.len() });
        }
        let dense = nodes.last().is_some_and(|&max| max >= 64);
        Ok(NumaIds { nodes, dense })
    }

    /// The identity table over `nodes` whatever their ids (for a machine with more than 64
    /// nodes, which no mask can hold: ids are kept as they are and the topology manager
    /// refuses them).
    pub(crate) fn identity_over(mut nodes: Vec<usize>) -> NumaIds {
        nodes.sort_unstable();
        nodes.dedup();
        NumaIds {
            nodes,
            dense: false,
        }
    }

    /// Whether bit *i* is node *i* (upstream's numbering).
    pub fn is_identity(&self) -> bool {
        !self.dense
    }

    /// The machine's node OS ids, ascending (empty for [`identity`](Self::identity)).
    pub fn os_ids(&self) -> &[usize] {
        &self.nodes
    }

    /// The mask bit of the node with OS id `id`. In the identity every id below 64 is its own
    /// bit (whether or not the machine has that node, as upstream's bitmask); in a dense table
    /// only the machine's nodes have bits.
    pub fn bit(&self, id: usize) -> Result<usize, NumaIdsError> {
        if self.dense {
            self.nodes
                .binary_search(&id)
                .map_err(|_| NumaIdsError::NoBit { id })
        } else if id < 64 {
            Ok(id)
        } else {
            Err(NumaIdsError::NoBit { id })
        }
    }

    /// As [`bit`](Self::bit) for a signed id as device plugins report them (`-1`, "no
    /// node", and other negative ids have no bit).
    pub fn bit_of_signed(&self, id: i64) -> Option<usize> {
        usize::try_from(id).ok().and_then(|id| self.bit(id).ok())
    }

    /// The OS id of the node mask bit `bit` stands for. The identity maps every bit to
    /// itself.
    pub fn os_id(&self, bit: usize) -> Result<usize, NumaIdsError> {
        if self.dense {
            self.nodes
                .get(bit)
                .copied()
                .ok_or(NumaIdsError::NoNode { bit })
        } else {
            Ok(bit)
        }
    }

    /// The mask of the nodes with these OS ids.
    pub fn mask_of(&self, ids: impl IntoIterator<Item = usize>) -> Result<NumaMask, NumaIdsError> {
        let mut bits = 0u64;
        for id in ids {
            bits |= 1 << self.bit(id)?;
        }
        Ok(NumaMask::from_u64(bits))
    }

    /// The OS ids of the nodes in `mask`, ascending.
    pub fn os_ids_of(&self, mask: NumaMask) -> Result<Vec<usize>, NumaIdsError> {
        mask.iter().map(|bit| self.os_id(bit)).collect()
    }

    /// `mask` for a log line or a message, saying what its bits stand for: upstream's binary
    /// string ([`NumaMask`]'s `Display`) alone in the identity, where bit *i* is node *i*; in
    /// a dense table the same bits followed by the OS ids they stand for, so a reader never
    /// takes a dense bit for a node id. A bit that stands for no node prints as `bit N?`.
    ///
    /// # Example
    ///
    /// ```
    /// use corral_topology::{NumaIds, NumaMask};
    ///
    /// let mask = NumaMask::new([0, 3])?;
    /// assert_eq!(NumaIds::new([0, 1, 2, 3])?.show(mask).to_string(), "1001");
    ///
    /// // Bits 0 and 3 of a machine numbered 0-2,33-34,45,72-73 are nodes 0 and 33.
    /// let sparse = NumaIds::new([0, 1, 2, 33, 34, 45, 72, 73])?;
    /// assert_eq!(sparse.show(mask).to_string(), "1001 (dense bits: NUMA nodes 0,33)");
    /// assert_eq!(
    ///     sparse.show(NumaMask::new([9])?).to_string(),
    ///     "1000000000 (dense bits: NUMA nodes bit 9?)"
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn show(&self, mask: NumaMask) -> impl fmt::Display + '_ {
        ShowMask { ids: self, mask }
    }

    /// The suffix [`show`](Self::show) puts after a mask: empty in the identity, otherwise
    /// ` (dense bits: NUMA nodes …)`.
    pub(crate) fn write_dense_suffix(
        &self,
        f: &mut fmt::Formatter<'_>,
        mask: NumaMask,
    ) -> fmt::Result {
        if !self.dense {
            return Ok(());
        }
        f.write_str(" (dense bits: NUMA nodes ")?;
        for (i, bit) in mask.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match self.os_id(bit) {
                Ok(id) => write!(f, "{id}")?,
                Err(_) => write!(f, "bit {bit}?")?,
            }
        }
        f.write_str(")")
    }
}

/// What [`NumaIds::show`] returns.
struct ShowMask<'a> {
    ids: &'a NumaIds,
    mask: NumaMask,
}

impl fmt::Display for ShowMask<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.mask)?;
        self.ids.write_dense_suffix(f, self.mask)
    }
}

impl fmt::Debug for NumaIds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.dense {
            f.debug_tuple("NumaIds::Dense").field(&self.nodes).finish()
        } else {
            f.debug_tuple("NumaIds::Identity")
                .field(&self.nodes)
                .finish()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_upstream() {
        let ids = NumaIds::new([3, 0, 1, 1]).unwrap();
        assert!(ids.is_identity());
        assert_eq!(ids.os_ids(), &[0, 1, 3]);
        // Every bit below 64 is its own node, known or not, as upstream's bitmask.
        assert_eq!(ids.bit(2), Ok(2));
        assert_eq!(ids.bit(63), Ok(63));
        assert_eq!(ids.bit(64), Err(NumaIdsError::NoBit { id: 64 }));
        assert_eq!(ids.os_id(40), Ok(40));
        assert_eq!(ids.mask_of([0, 3]), Ok(NumaMask::from_u64(0b1001)));
        assert_eq!(ids.os_ids_of(NumaMask::from_u64(0b1011)), Ok(vec![0, 1, 3]));
        assert_eq!(ids.bit_of_signed(-1), None);
        assert_eq!(ids.bit_of_signed(5), Some(5));
        assert_eq!(NumaIds::identity().bit(7), Ok(7));
        assert!(NumaIds::new(0..64).unwrap().is_identity());
        assert!(NumaIds::new([]).unwrap().is_identity());
    }

    #[test]
    fn sparse_ids_get_dense_bits_in_id_order() {
        let ids = NumaIds::new([73, 0, 72, 1]).unwrap();
        assert!(!ids.is_identity());
        assert_eq!(ids.os_ids(), &[0, 1, 72, 73]);
        assert_eq!(ids.bit(0), Ok(0));
        assert_eq!(ids.bit(72), Ok(2));
        assert_eq!(ids.bit(73), Ok(3));
        assert_eq!(ids.bit(2), Err(NumaIdsError::NoBit { id: 2 }));
        assert_eq!(ids.os_id(3), Ok(73));
        assert_eq!(ids.os_id(4), Err(NumaIdsError::NoNode { bit: 4 }));
        assert_eq!(ids.mask_of([72, 1]), Ok(NumaMask::from_u64(0b110)));
        assert_eq!(ids.mask_of([5]), Err(NumaIdsError::NoBit { id: 5 }));
        assert_eq!(ids.os_ids_of(NumaMask::from_u64(0b1001)), Ok(vec![0, 73]));
        assert_eq!(
            ids.os_ids_of(NumaMask::from_u64(1 << 10)),
            Err(NumaIdsError::NoNode { bit: 10 })
        );
        assert_eq!(ids.bit_of_signed(73), Some(3));
        assert_eq!(ids.bit_of_signed(-1), None);
        assert_eq!(format!("{ids:?}"), "NumaIds::Dense([0, 1, 72, 73])");
    }

    #[test]
    fn sixty_four_nodes_fit_sixty_five_do_not() {
        let ids = NumaIds::new((0..64).map(|i| i * 2)).unwrap();
        assert!(!ids.is_identity());
        assert_eq!(ids.bit(126), Ok(63));
        assert_eq!(
            NumaIds::new(0..65),
            Err(NumaIdsError::TooManyNodes { count: 65 })
        );
        assert_eq!(
            NumaIdsError::TooManyNodes { count: 65 }.to_string(),
            "65 NUMA nodes do not fit in a 64-bit NUMA mask (at most 64)"
        );
    }
}
