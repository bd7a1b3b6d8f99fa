//! CPU topology hints (upstream `(*staticPolicy).generateCPUTopologyHints` and
//! `isHintSocketAligned`).
//!
//! Every combination of the topology's NUMA nodes (1-node masks ascending, then 2-node masks
//! in lexicographic order, …) that holds all reusable CPUs and has enough reusable plus
//! available CPUs becomes a hint. Hints whose node count equals the minimal affinity size are
//! preferred; with `align-by-socket`, so are hints spanning the minimal number of sockets.
//!
//! As upstream, the minimal affinity size is computed from the *total* CPUs of each
//! combination, not the available ones, so a fragmented node can yield no preferred hint;
//! a CPU that is both reusable and available counts twice; and a CPU the topology does not
//! know counts as NUMA node 0.

use corral_topology::topologymanager::{
    Demand, HintFamily, Preferred, SocketSpan, min_affinity_size,
};
use corral_topology::{CpuSet, NumaMask, TopologyHint};

use crate::index::TopologyIndex;

/// Which hints [`generate_cpu_topology_hints`] prefers besides those with the fewest NUMA
/// nodes (the static policy's `align-by-socket` option).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum SocketAlignment {
    /// Only the hints with the minimal number of NUMA nodes are preferred (the default).
    #[default]
    Ignore,
    /// Hints whose NUMA nodes span the minimal number of sockets are preferred too
    /// (`align-by-socket`, upstream `isHintSocketAligned`).
    Prefer,
}

/// Upstream `generateCPUTopologyHints(available, reusable, request)` with the static
/// policy's `align-by-socket` option given explicitly.
///
/// ```
/// use corral_cpumgr::{SocketAlignment, TopologyIndex, generate_cpu_topology_hints};
/// use corral_topology::{CpuInfo, CpuRecord, CpuSet, CpuTopology, NumaMask};
///
/// // Two NUMA nodes with 4 CPUs each.
/// let records: Vec<CpuRecord> = (0..8)
///     .map(|cpu| CpuRecord { cpu, info: CpuInfo { core: cpu, socket: cpu / 4, numa: cpu / 4, uncore: cpu / 4 } })
///     .collect();
/// let index = TopologyIndex::new(&CpuTopology::new(&records)?);
/// let all = CpuSet::from_range(0, 7);
/// let hints = generate_cpu_topology_hints(&index, &all, &CpuSet::new(), 3, SocketAlignment::Ignore);
/// let masks: Vec<_> = hints.iter().map(|h| (h.numa_affinity.unwrap().get_bits(), h.preferred)).collect();
/// assert_eq!(masks, vec![(vec![0], true), (vec![1], true), (vec![0, 1], false)]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn generate_cpu_topology_hints(
    index: &TopologyIndex,
    available: &CpuSet,
    reusable: &CpuSet,
    request: usize,
    socket_alignment: SocketAlignment,
) -> Vec<TopologyHint> {
    let numa_ids = index.numa_node_ids();
    // Per NUMA id (< 64; upstream's masks cannot hold more): total and available CPUs.
    let mut total = [0usize; 64];
    let avail = available_per_node(index, available);
    for (dense, &id) in numa_ids.iter().enumerate() {
        if id < 64 {
            total[id] = index
                .groups(crate::index::Level::Numa)
                .cpus
                .get(dense)
                .map_or(0, CpuSet::len);
        }
    }
    // Reusable CPUs: the mask must hold all their nodes.
    let mut reusable_mask = 0u64;
    let mut reusable_outside = false;
    for cpu in reusable {
        match index.numa_of(cpu).unwrap_or(0) {
            numa @ 0..64 => reusable_mask |= 1 << numa,
            _ => reusable_outside = true,
        }
    }
    let reusable_count = reusable.len();

    let mut min_affinity_size = numa_ids.len();
    let mut hints = Vec::with_capacity(1 << numa_ids.len().min(10));
    // Each hint's number of nodes (its mask's count, known along the walk).
    let mut sizes = Vec::with_capacity(hints.capacity());
    walk_masks(
        numa_ids,
        &total,
        &avail,
        &mut |mask, size, cpus_in_mask, avail_in_mask| {
            if cpus_in_mask >= request && size < min_affinity_size {
                min_affinity_size = size;
            }
            if reusable_outside || mask.as_u64() & reusable_mask != reusable_mask {
                return;
            }
            if reusable_count + avail_in_mask < request {
                return;
            }
            hints.push(TopologyHint::new(Some(mask), false));
            sizes.push(size);
        },
    );
    for (hint, size) in hints.iter_mut().zip(sizes) {
        let Some(mask) = hint.numa_affinity else {
            continue;
        };
        if socket_alignment == SocketAlignment::Prefer
            && is_hint_socket_aligned(index, mask, min_affinity_size)
        {
            hint.preferred = true;
            continue;
        }
        if size == min_affinity_size {
            hint.preferred = true;
        }
    }
    hints
}

/// Available CPUs per NUMA id below 64, counted as upstream's hint generators count them
/// CPU by CPU, where a CPU the topology does not know counts on node 0
/// (`numa_of(cpu).unwrap_or(0)`): one intersection per node instead of a lookup per CPU.
fn available_per_node(index: &TopologyIndex, available: &CpuSet) -> [usize; 64] {
    let numa = index.groups(crate::index::Level::Numa);
    let mut avail = [0usize; 64];
    let mut known = 0;
    for (&id, cpus) in numa.ids.iter().zip(&numa.cpus) {
        // Nodes are disjoint: every known CPU is counted once.
        let n = available.intersection_len(cpus);
        known += n;
        if id < 64 {
            avail[id] += n;
        }
    }
    avail[0] += available.len() - known;
    avail
}

/// [`NumaMask::iterate_masks`] (upstream's `IterateBitMasks` order: by size, then
/// lexicographic combinations of `ids`) calling `callback` with each mask, its number of
/// nodes, its nodes' `total` and its nodes' `avail`. Without recursion: the picked positions
/// advance as an odometer and each prefix's sums are kept, so a mask costs O(1) amortised.
/// Ids ≥ 64 add nothing, as they add no bit.
fn walk_masks(
    ids: &[usize],
    total: &[usize; 64],
    avail: &[usize; 64],
    callback: &mut impl FnMut(NumaMask, usize, usize, usize),
) {
    /// A set's mask, size, total and available CPUs.
    type Sums = (u64, usize, usize, usize);
    let add = |(m, s, t, a): Sums, (pm, ps, pt, pa): Sums| (m | pm, s + ps, t + pt, a + pa);
    let parts: Vec<Sums> = ids
        .iter()
        .map(|&id| match id {
            0..64 => (1 << id, 1, total[id], avail[id]),
            _ => (0, 0, 0, 0),
        })
        .collect();
    let n = ids.len();
    // The picked positions, ascending, and the sums of each prefix of them.
    let mut pick = vec![0usize; n];
    let mut prefix: Vec<Sums> = vec![(0, 0, 0, 0); n + 1];
    for k in 1..=n {
        for j in 0..k {
            pick[j] = j;
            prefix[j + 1] = add(prefix[j], parts[j]);
        }
        'size: loop {
            let (mask, size, total, avail) = prefix[k];
            callback(NumaMask::from_u64(mask), size, total, avail);
            // The rightmost position that can still move right.
            let mut i = k;
            loop {
                if i == 0 {
                    break 'size;
                }
                i -= 1;
                if pick[i] < n - k + i {
                    break;
                }
            }
            pick[i] += 1;
            prefix[i + 1] = add(prefix[i], parts[pick[i]]);
            for j in i + 1..k {
                pick[j] = pick[j - 1] + 1;
                prefix[j + 1] = add(prefix[j], parts[pick[j]]);
            }
        }
    }
}

/// [`generate_cpu_topology_hints`] as the [`HintFamily`] its list is, without walking every
/// set of NUMA nodes: the sets holding every reusable CPU's node whose available CPUs (plus
/// the reusable ones) reach the request; preferred with as many nodes as the fewest whose
/// CPUs could hold it (or, with `align-by-socket`, spanning the fewest sockets such a set
/// needs). `family.to_hints()` is the list, hint for hint.
pub fn cpu_topology_hint_family(
    index: &TopologyIndex,
    available: &CpuSet,
    reusable: &CpuSet,
    request: usize,
    socket_alignment: SocketAlignment,
) -> HintFamily {
    let numa_ids = index.numa_node_ids();
    let numa_cpus = &index.groups(crate::index::Level::Numa).cpus;
    let total = Demand::per_node(
        numa_ids
            .iter()
            .enumerate()
            .map(|(dense, &id)| (id, numa_cpus.get(dense).map_or(0, CpuSet::len) as u64)),
        request as u64,
    );
    let avail = available_per_node(index, available).map(|n| n as u64);
    let mut reusable_mask = 0u64;
    for cpu in reusable {
        match index.numa_of(cpu).unwrap_or(0) {
            numa @ 0..64 => reusable_mask |= 1 << numa,
            _ => return HintFamily::empty(numa_ids),
        }
    }
    let need = request.saturating_sub(reusable.len()) as u64;
    let free = Demand::per_node(numa_ids.iter().map(|&id| (id, avail[id.min(63)])), need);
    let min_size = min_affinity_size(numa_ids, std::slice::from_ref(&total));
    let preferred = match socket_span(index, min_size) {
        Some(sockets) if socket_alignment == SocketAlignment::Prefer => Preferred::SizeOrSockets {
            size: min_size,
            sockets,
        },
        _ => Preferred::Size(min_size),
    };
    let all = NumaMask::from_u64(u64::MAX);
    HintFamily::upward(
        numa_ids,
        all,
        NumaMask::from_u64(reusable_mask),
        vec![free],
        preferred,
    )
}

/// The sockets of each NUMA node (socket indices in `socket_ids` order) and the span
/// `isHintSocketAligned` accepts for `min_affinity_size` nodes; `None` when no span is.
fn socket_span(index: &TopologyIndex, min_affinity_size: usize) -> Option<SocketSpan> {
    let counts = index.counts();
    let per_socket = counts.num_numa_nodes.checked_div(counts.num_sockets)?;
    if per_socket == 0 {
        return None;
    }
    let sockets = index.socket_ids();
    let nodes = index
        .numa_node_ids()
        .iter()
        .enumerate()
        .map(|(dense, &id)| {
            let bits = index
                .sockets_of_numa(dense)
                .iter()
                .filter_map(|s| sockets.iter().position(|&x| x == s))
                .filter(|&i| i < 64)
                .fold(0u64, |b, i| b | 1 << i);
            (id, bits)
        });
    Some(SocketSpan::new(
        nodes,
        min_affinity_size.div_ceil(per_socket),
    ))
}

/// Upstream `isHintSocketAligned`: the hint's NUMA nodes span exactly the minimal number of
/// sockets a `min_affinity_size`-node request needs.
pub(crate) fn is_hint_socket_aligned(
    index: &TopologyIndex,
    mask: NumaMask,
    min_affinity_size: usize,
) -> bool {
    let counts = index.counts();
    let Some(per_socket) = counts.num_numa_nodes.checked_div(counts.num_sockets) else {
        return false;
    };
    if per_socket == 0 {
        return false;
    }
    let min_sockets = min_affinity_size.div_ceil(per_socket);
    let mut sockets = CpuSet::new();
    for numa in mask.iter() {
        if let Some(dense) = index.numa_dense(numa) {
            sockets.union_with(index.sockets_of_numa(dense));
        }
    }
    sockets.len() == min_sockets
}

#[cfg(test)]
mod tests {
    use corral_topology::{CpuInfo, CpuRecord, CpuTopology};
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The walk lists upstream's masks in upstream's order, each with its size and sums.
        #[test]
        fn walk_is_iterate_masks_with_sums(
            ids in prop::collection::btree_set(prop_oneof![0usize..64, 64usize..70], 0..9),
            total in prop::collection::vec(0usize..50, 64),
            avail in prop::collection::vec(0usize..50, 64),
        ) {
            let ids: Vec<usize> = ids.into_iter().collect();
            let total: [usize; 64] = total.try_into().unwrap();
            let avail: [usize; 64] = avail.try_into().unwrap();
            let mut want = Vec::new();
            NumaMask::iterate_masks(&ids, |mask| {
                let sum = |per: &[usize; 64]| mask.iter().map(|n| per[n]).sum::<usize>();
                want.push((mask, mask.count(), sum(&total), sum(&avail)));
            });
            let mut got = Vec::new();
            walk_masks(&ids, &total, &avail, &mut |mask, size, t, a| got.push((mask, size, t, a)));
            prop_assert_eq!(got, want);
        }

        /// Per node intersections count what upstream's loop over the CPUs counts, CPUs the
        /// topology does not know (on node 0) and node ids past 63 (not at all) included.
        #[test]
        fn available_per_node_counts_cpu_by_cpu(
            numa_of_cpu in prop::collection::vec(prop_oneof![0usize..4, 60usize..70, 1000usize..1002], 1..40),
            available in prop::collection::btree_set(0usize..60, 0..60),
        ) {
            let records: Vec<CpuRecord> = numa_of_cpu
                .iter()
                .enumerate()
                .map(|(cpu, &numa)| CpuRecord { cpu, info: CpuInfo { core: cpu, socket: 0, numa, uncore: 0 } })
                .collect();
            let index = TopologyIndex::new(&CpuTopology::new(&records).expect("valid records"));
            let available: CpuSet = available.into_iter().collect();
            let mut want = [0usize; 64];
            for cpu in &available {
                let numa = index.numa_of(cpu).unwrap_or(0);
                if numa < 64 {
                    want[numa] += 1;
                }
            }
            prop_assert_eq!(available_per_node(&index, &available), want);
        }
    }
}
