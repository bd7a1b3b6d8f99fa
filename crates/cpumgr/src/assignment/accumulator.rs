//! The CPU accumulator (upstream `cpuAccumulator`): the free CPUs, the CPUs taken so far,
//! how many are still needed, and upstream's sorted views of the free CPUs.
//!
//! Every list here is built exactly as upstream builds it, nesting included: with NUMA nodes
//! above sockets ("NUMA first", when `NumSockets >= NumNUMANodes`) sockets are listed per
//! sorted NUMA node, cores per sorted socket; otherwise NUMA nodes per sorted socket and cores
//! per sorted NUMA node. A group that straddles two parents is listed under both, as upstream
//! does. Within one parent, groups sort by ascending free CPUs, then ascending id. Lists hold
//! dense group indices (see [`TopologyIndex`]), whose order is the id order.

use corral_topology::CpuSet;

use super::{CpuSortingStrategy, TakeError};
use crate::index::{Level, TopologyIndex};

pub(crate) struct Accumulator<'a> {
    pub(crate) ix: &'a TopologyIndex,
    /// Free CPUs (upstream `details`).
    pub(crate) free: CpuSet,
    /// CPUs taken so far.
    pub(crate) result: CpuSet,
    /// CPUs still needed; may go negative as upstream's `int` can.
    pub(crate) needed: i64,
    numa_first: bool,
    strategy: CpuSortingStrategy,
}

/// CPUs of `free` in group `dense` of `level`.
fn free_in(ix: &TopologyIndex, free: &CpuSet, level: Level, dense: usize) -> usize {
    free.intersection_len(ix.group_cpus(level, dense))
}

impl<'a> Accumulator<'a> {
    pub(crate) fn new(
        ix: &'a TopologyIndex,
        available: &CpuSet,
        num_cpus: usize,
        strategy: CpuSortingStrategy,
    ) -> Accumulator<'a> {
        let counts = ix.counts();
        Accumulator {
            ix,
            free: available.intersection(ix.all_cpus()),
            result: CpuSet::new(),
            needed: i64::try_from(num_cpus).unwrap_or(i64::MAX),
            numa_first: counts.num_sockets >= counts.num_numa_nodes,
            strategy,
        }
    }

    /// Upstream's prologue of both `takeByTopology…` algorithms: `Ok(None)` when nothing is
    /// needed (the empty result), [`TakeError::NotEnoughCpus`] when `available` cannot hold
    /// the request, else a fresh accumulator.
    pub(crate) fn start(
        ix: &'a TopologyIndex,
        available: &CpuSet,
        num_cpus: usize,
        strategy: CpuSortingStrategy,
    ) -> Result<Option<Accumulator<'a>>, TakeError> {
        let acc = Accumulator::new(ix, available, num_cpus, strategy);
        if acc.is_satisfied() {
            return Ok(None);
        }
        if acc.is_failed() {
            return Err(TakeError::NotEnoughCpus {
                requested: num_cpus,
                available: available.len(),
            });
        }
        Ok(Some(acc))
    }

    /// Free CPUs in group `dense` of `level`.
    pub(crate) fn free_in(&self, level: Level, dense: usize) -> usize {
        free_in(self.ix, &self.free, level, dense)
    }

    /// The dense ids at `level` of the CPUs of `free` in `within` (all of `free` when
    /// `None`), sorted by ascending CPUs of `free` then id, appended to `out`.
    fn push_sorted(
        &self,
        free: &CpuSet,
        level: Level,
        within: Option<(Level, usize)>,
        out: &mut Vec<usize>,
    ) {
        let ids = match within {
            None => self.ix.dense_ids_of(free, level),
            Some((parent, dense)) => self
                .ix
                .dense_ids_of(&free.intersection(self.ix.group_cpus(parent, dense)), level),
        };
        let mut keyed: Vec<(usize, usize)> = ids
            .iter()
            .map(|d| (free_in(self.ix, free, level, d), d))
            .collect();
        keyed.sort_unstable();
        out.extend(keyed.into_iter().map(|(_, d)| d));
    }

    /// The level whose sorted groups `level`'s groups are listed under (see [`Self::sort`]).
    fn parent(&self, level: Level) -> Option<Level> {
        let (first, second) = if self.numa_first {
            (Level::Numa, Level::Socket)
        } else {
            (Level::Socket, Level::Numa)
        };
        match level {
            Level::Core => Some(second),
            Level::Uncore => Some(Level::Numa),
            _ if level == first => None,
            _ => Some(first),
        }
    }

    /// Upstream `sortAvailableNUMANodes` / `sortAvailableSockets` / `sortAvailableCores` /
    /// `sortAvailableUncoreCaches`: the groups of `level` holding free CPUs, sorted within
    /// each sorted group of the level above (NUMA nodes and sockets in the machine's order,
    /// cores under the second of them, uncore caches under NUMA nodes).
    pub(crate) fn sort(&self, level: Level) -> Vec<usize> {
        self.sort_of(&self.free, level)
    }

    /// [`Self::sort`] over the free CPUs `free`.
    fn sort_of(&self, free: &CpuSet, level: Level) -> Vec<usize> {
        let mut out = Vec::new();
        match self.parent(level) {
            None => self.push_sorted(free, level, None, &mut out),
            Some(parent) => {
                for dense in self.sort_of(free, parent) {
                    self.push_sorted(free, level, Some((parent, dense)), &mut out);
                }
            }
        }
        out
    }

    /// Upstream `availableCPUSorter.sort()`: free CPU ids, packed (per sorted core), spread
    /// (per sorted socket, round-robin over its cores) or spread by CPU id (per sorted socket,
    /// ascending ids).
    pub(crate) fn sort_cpus(&self) -> Vec<usize> {
        match self.strategy {
            CpuSortingStrategy::Packed => {
                let mut out = Vec::new();
                for core in self.sort(Level::Core) {
                    out.extend(
                        self.free
                            .intersection(self.ix.group_cpus(Level::Core, core))
                            .iter(),
                    );
                }
                out
            }
            CpuSortingStrategy::Spread => self.sort_cpus_spread(),
            CpuSortingStrategy::SpreadByCpuId => {
                let mut out = Vec::new();
                for socket in self.sort(Level::Socket) {
                    out.extend(
                        self.free
                            .intersection(self.ix.group_cpus(Level::Socket, socket))
                            .iter(),
                    );
                }
                out
            }
        }
    }

    /// Upstream `sortAvailableCPUsSpread` as of v1.38 (#140766, issue #140688): per sorted
    /// socket, the socket's cores with free CPUs in upstream's core order (ascending free
    /// CPUs, then id), then one CPU of each core per pass (ascending ids within a core) until
    /// every free CPU is listed. v1.31–v1.37 listed a socket's CPUs by id, which spreads only
    /// where firmware numbers every core's first thread before the second ones.
    fn sort_cpus_spread(&self) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.free.len());
        for socket in self.sort(Level::Socket) {
            let in_socket = self
                .free
                .intersection(self.ix.group_cpus(Level::Socket, socket));
            let mut cores = Vec::new();
            self.push_sorted(&in_socket, Level::Core, None, &mut cores);
            let threads: Vec<Vec<usize>> = cores
                .iter()
                .map(|&core| {
                    in_socket
                        .intersection(self.ix.group_cpus(Level::Core, core))
                        .iter()
                        .collect()
                })
                .collect();
            let passes = threads.iter().map(Vec::len).max().unwrap_or(0);
            for pass in 0..passes {
                out.extend(threads.iter().filter_map(|cpus| cpus.get(pass).copied()));
            }
        }
        out
    }

    pub(crate) fn take(&mut self, cpus: &CpuSet) {
        self.result.union_with(cpus);
        self.free.difference_with(&self.result);
        self.needed -= cpus.len() as i64;
    }

    pub(crate) fn needs_at_least(&self, n: usize) -> bool {
        self.needed >= n as i64
    }

    pub(crate) fn is_satisfied(&self) -> bool {
        self.needed < 1
    }

    pub(crate) fn is_failed(&self) -> bool {
        self.needed > self.free.len() as i64
    }

    /// Whether group `dense` of `level` is wholly in `free`, as upstream counts it.
    fn is_free(&self, free: &CpuSet, level: Level, dense: usize) -> bool {
        let counts = self.ix.counts();
        let whole = match level {
            Level::Socket => counts.num_cpus.checked_div(counts.num_sockets).unwrap_or(0),
            Level::Core => counts.num_cpus.checked_div(counts.num_cores).unwrap_or(0),
            Level::Numa | Level::Uncore => self.ix.group_cpus(level, dense).len(),
        };
        free_in(self.ix, free, level, dense) == whole
    }

    /// Upstream `takeFullNUMANodes` / `takeFullSockets` / `takeFullUncore` /
    /// `takeFullCores`: the free groups of the sorted list (computed once, before taking),
    /// each taken whole (the topology's CPUs of the group) while it fits the need.
    ///
    /// The same answer with less work: nothing is listed when no group of the level could
    /// fit the need, and the list is built a parent at a time (over the free CPUs as they
    /// were before taking, as upstream's list is) until the need is met — after that
    /// upstream's loop takes nothing more.
    fn take_full(&mut self, level: Level) {
        if !self.needs_at_least(self.ix.groups(level).smallest.max(1)) {
            return;
        }
        let before = self.free.clone();
        let parents = match self.parent(level) {
            None => vec![None],
            Some(parent) => self
                .sort_of(&before, parent)
                .into_iter()
                .map(|dense| Some((parent, dense)))
                .collect(),
        };
        let mut listed = Vec::new();
        for within in parents {
            listed.clear();
            self.push_sorted(&before, level, within, &mut listed);
            for &dense in &listed {
                if !self.is_free(&before, level, dense) {
                    continue;
                }
                // Only its free CPUs. Upstream takes the topology's CPUs of the group: on
                // a machine whose sockets differ in size, a socket counts as free when its
                // free CPUs number `num_cpus / num_sockets`, and upstream then hands out
                // its reserved or already assigned CPUs too (a flaw corral does not copy).
                let cpus = self.ix.group_cpus(level, dense).intersection(&before);
                if self.needs_at_least(cpus.len()) {
                    self.take(&cpus);
                }
            }
            if self.is_satisfied() {
                return;
            }
        }
    }

    pub(crate) fn take_full_numas(&mut self) {
        self.take_full(Level::Numa);
    }

    pub(crate) fn take_full_sockets(&mut self) {
        self.take_full(Level::Socket);
    }

    pub(crate) fn take_full_cores(&mut self) {
        self.take_full(Level::Core);
    }

    /// Upstream `takeFullFirstLevel`.
    pub(crate) fn take_full_first_level(&mut self) {
        if self.numa_first {
            self.take_full_numas();
        } else {
            self.take_full_sockets();
        }
    }

    /// Upstream `takeFullSecondLevel`.
    pub(crate) fn take_full_second_level(&mut self) {
        if self.numa_first {
            self.take_full_sockets();
        } else {
            self.take_full_numas();
        }
    }

    /// Upstream `takePartialUncore`: the lowest-id free cores of the uncore cache that cover
    /// the need, taken only when their free CPUs are exactly the need.
    fn take_partial_uncore(&mut self, uncore: usize) {
        let Some(cores_needed) = usize::try_from(self.needed).ok().and_then(|n| {
            n.checked_div(
                self.ix
                    .counts()
                    .num_cpus
                    .checked_div(self.ix.counts().num_cores)?,
            )
        }) else {
            return;
        };
        let in_uncore = self
            .free
            .intersection(self.ix.group_cpus(Level::Uncore, uncore));
        let cores = self.ix.dense_ids_of(&in_uncore, Level::Core);
        let cores = if cores.len() <= cores_needed {
            cores
        } else {
            cores.first_n(cores_needed)
        };
        let mut cpus = CpuSet::new();
        for core in &cores {
            cpus.union_with(self.ix.group_cpus(Level::Core, core));
        }
        cpus.intersect_with(&self.free);
        if self.needed == cpus.len() as i64 {
            self.take(&cpus);
        }
    }

    /// Upstream `takeUncoreCache`.
    pub(crate) fn take_uncore_cache(&mut self) {
        let counts = self.ix.counts();
        let per_uncore = counts
            .num_cpus
            .checked_div(counts.num_uncore_caches)
            .unwrap_or(0);
        for uncore in self.sort(Level::Uncore) {
            if self.needs_at_least(per_uncore) {
                self.take_full(Level::Uncore);
            }
            if self.is_satisfied() {
                return;
            }
            self.take_partial_uncore(uncore);
            if self.is_satisfied() {
                return;
            }
        }
    }

    /// Upstream `takeRemainingCPUs`.
    pub(crate) fn take_remaining_cpus(&mut self) {
        for cpu in self.sort_cpus() {
            self.take(&CpuSet::from_iter([cpu]));
            if self.is_satisfied() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use corral_testkit::upstream_topologies::*;

    use super::*;
    use crate::test_util::topology_index;

    fn index(machine: Machine) -> std::sync::Arc<TopologyIndex> {
        topology_index(machine.cpu_ids(), machine.counts.values())
    }

    fn set(s: &str) -> CpuSet {
        s.parse().unwrap()
    }

    /// `f` of a fresh accumulator (nothing needed, packed) over `available` on `machine`.
    fn with_acc<T>(machine: Machine, available: &str, f: impl FnOnce(&Accumulator<'_>) -> T) -> T {
        let ix = index(machine);
        f(&Accumulator::new(
            &ix,
            &set(available),
            0,
            CpuSortingStrategy::Packed,
        ))
    }

    /// A machine and its rows: (available CPUs, wanted ids).
    type MachineRows = (fn() -> Machine, &'static [(&'static str, &'static [usize])]);

    /// For every machine's rows (available CPUs, wanted ids): `got` of a fresh accumulator.
    fn check_rows(cases: &[MachineRows], got: impl Fn(&Accumulator<'_>) -> Vec<usize>) {
        for (machine, rows) in cases {
            for &(available, want) in *rows {
                assert_eq!(with_acc(machine(), available, &got), want, "{available}");
            }
        }
    }

    /// Upstream `freeNUMANodes` / `freeSockets` / `freeCores` as ids.
    fn free(acc: &Accumulator<'_>, level: Level) -> Vec<usize> {
        acc.sort(level)
            .into_iter()
            .filter(|&d| acc.is_free(&acc.free, level, d))
            .map(|d| acc.ix.groups(level).ids[d])
            .collect()
    }

    /// Upstream `TestCPUAccumulatorFreeSockets` and `TestCPUAccumulatorFreeNUMANodes`
    /// (cpu_assignment_test.go): per machine, rows of (available CPUs, free sockets) and
    /// rows of (available CPUs, free NUMA nodes).
    #[test]
    fn free_sockets_and_free_numa_nodes() {
        type Rows = &'static [(&'static str, &'static [usize])];
        type Case = (fn() -> Machine, Rows, Rows);
        #[rustfmt::skip]
        let cases: [Case; 4] = [
            (single_socket_ht, &[("0-7", &[0]), ("1-7", &[])], &[("0-7", &[0]), ("1-7", &[])]),
            (dual_socket_ht, &[("0-11", &[0, 1]), ("0-9,11", &[1]), ("0,2-9,11", &[])], &[("0-11", &[0, 1]), ("0-9,11", &[1]), ("0,2-9,11", &[])]),
            (dual_socket_multi_numa_per_socket_ht, &[("0-79", &[0, 1]), ("1-79", &[1]), ("1-78", &[])], &[("0-79", &[0, 1, 2, 3]), ("1-79", &[1, 2, 3]), ("1-9,11-79", &[2, 3]), ("1-9,11-59,61-79", &[3]), ("1-9,11-59,61-78", &[])]),
            (fake_multi_socket_dual_socket_per_numa_ht, &[("0-79", &[0, 1, 2, 3]), ("0-19,21-79", &[0, 1, 3]), ("0-59,61-78", &[0, 1]), ("1-19,21-38,41-60,61-78", &[1]), ("0-40,42-49,51-68,71-79", &[])], &[("0-79", &[0, 1]), ("0-9,11-79", &[1]), ("0-9,11-59,61-79", &[])]),
        ];
        let sockets: Vec<MachineRows> = cases.iter().map(|&(m, s, _)| (m, s)).collect();
        check_rows(&sockets, |acc| {
            let mut ids = free(acc, Level::Socket);
            ids.sort_unstable();
            ids
        });
        let numa_nodes: Vec<MachineRows> = cases.iter().map(|&(m, _, n)| (m, n)).collect();
        check_rows(&numa_nodes, |acc| free(acc, Level::Numa));
    }

    /// Upstream `TestCPUAccumulatorFreeSocketsAndNUMANodes` (cpu_assignment_test.go).
    #[test]
    fn free_sockets_and_numa_nodes() {
        #[rustfmt::skip]
        let cases: [(&str, &[usize], &[usize]); 4] = [
            ("0-79", &[0, 1], &[0, 1, 2, 3]),
            ("1-79", &[1], &[1, 2, 3]),
            ("1-9,11-79", &[1], &[2, 3]),
            ("1-59,61-79", &[], &[1, 3]),
        ];
        let ix = index(dual_socket_multi_numa_per_socket_ht());
        for (available, sockets, numas) in cases {
            let acc = Accumulator::new(&ix, &set(available), 0, CpuSortingStrategy::Packed);
            assert_eq!(free(&acc, Level::Numa), numas, "{available}");
            assert_eq!(free(&acc, Level::Socket), sockets, "{available}");
        }
    }

    /// Upstream `TestCPUAccumulatorFreeCores` (cpu_assignment_test.go).
    #[test]
    fn free_cores() {
        #[rustfmt::skip]
        let cases: [MachineRows; 2] = [
            (single_socket_ht, &[("0-7", &[0, 1, 2, 3]), ("0-2,4-6", &[0, 1, 2]), ("0-6", &[0, 1, 2]), ("", &[]), ("0-3", &[])]),
            (dual_socket_ht, &[("0-11", &[0, 2, 4, 1, 3, 5]), ("1-5,7-11", &[2, 4, 1, 3, 5]), ("2-5,8-11", &[2, 4, 3, 5])]),
        ];
        check_rows(&cases, |acc| free(acc, Level::Core));
    }

    /// Upstream `TestCPUAccumulatorFreeCPUs` (cpu_assignment_test.go).
    #[test]
    fn free_cpus() {
        #[rustfmt::skip]
        let cases: [MachineRows; 3] = [
            (single_socket_ht, &[("0-7", &[0, 4, 1, 5, 2, 6, 3, 7]), ("3-7", &[4, 5, 6, 3, 7])]),
            (dual_socket_ht, &[("0-11", &[0, 6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11]), ("1-11", &[6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11]), ("1-5,7-11", &[2, 8, 4, 10, 1, 7, 3, 9, 5, 11])]),
            (triple_socket_ht, &[("0-3,6-13", &[12, 13, 0, 1, 2, 3, 6, 7, 8, 9, 10, 11])]),
        ];
        check_rows(&cases, |acc| acc.sort_cpus());
    }

    /// Upstream `TestCPUAccumulatorTake` (cpu_assignment_test.go).
    #[test]
    fn take() {
        #[rustfmt::skip]
        let cases: [(&str, &[&str], usize, bool, bool); 6] = [
            ("0-7", &[""], 1, false, false),
            ("", &[""], 1, false, true),
            ("0-7", &["0"], 1, true, false),
            ("0-7", &["0"], 2, false, false),
            ("0-2", &["0", "1"], 4, false, true),
            ("0-7", &["0", "1", "2", "3", "4", "5", "6", "7"], 8, true, false),
        ];
        let ix = index(single_socket_ht());
        for (available, takes, n, satisfied, failed) in cases {
            let mut acc = Accumulator::new(&ix, &set(available), n, CpuSortingStrategy::Packed);
            let mut taken = 0;
            for t in takes {
                acc.take(&set(t));
                taken += set(t).len();
            }
            assert_eq!(acc.is_satisfied(), satisfied, "{available} {takes:?}");
            assert_eq!(acc.is_failed(), failed, "{available} {takes:?}");
            for t in takes {
                assert!(!set(t).intersects(&acc.free));
                assert!(set(t).is_subset_of(&acc.result));
            }
            assert_eq!(acc.needed, n as i64 - taken as i64);
        }
    }

    /// `take_full` as upstream writes it: the whole sorted list of free groups first, then
    /// each taken while it fits.
    fn take_full_listing_all(acc: &mut Accumulator<'_>, level: Level) {
        let free: Vec<usize> = acc
            .sort(level)
            .into_iter()
            .filter(|&d| acc.is_free(&acc.free, level, d))
            .collect();
        for dense in free {
            let ix = acc.ix;
            let cpus = ix.group_cpus(level, dense);
            if acc.needs_at_least(cpus.len()) {
                acc.take(cpus);
            }
        }
    }

    proptest::proptest! {
        /// The lazy `take_full` (skips levels nothing fits, stops once satisfied) leaves the
        /// accumulator exactly as upstream's listing does, step after step, on machines with
        /// groups straddling their parents too.
        #[test]
        fn take_full_equals_listing_everything(
            machine in 0usize..6,
            keep in proptest::collection::vec(proptest::bool::weighted(0.8), 256),
            needed in 1usize..80,
            levels in proptest::collection::vec(0usize..4, 1..4),
            spread in proptest::bool::ANY,
        ) {
            let machines: [fn() -> Machine; 6] = [
                dual_socket_ht,
                triple_socket_ht,
                dual_socket_multi_numa_per_socket_ht,
                fake_multi_socket_dual_socket_per_numa_ht,
                quad_socket_four_way_ht,
                dual_socket_no_ht,
            ];
            let ix = index(machines[machine]());
            let available: CpuSet = ix.all_cpus().iter().filter(|&c| keep[c % keep.len()]).collect();
            let strategy = if spread { CpuSortingStrategy::Spread } else { CpuSortingStrategy::Packed };
            let mut lazy = Accumulator::new(&ix, &available, needed, strategy);
            let mut listing = Accumulator::new(&ix, &available, needed, strategy);
            for level in levels {
                let level = [Level::Numa, Level::Socket, Level::Core, Level::Uncore][level];
                lazy.take_full(level);
                take_full_listing_all(&mut listing, level);
                proptest::prop_assert_eq!(&lazy.result, &listing.result, "{:?}", level);
                proptest::prop_assert_eq!(&lazy.free, &listing.free);
                proptest::prop_assert_eq!(lazy.needed, listing.needed);
            }
        }
    }
}
