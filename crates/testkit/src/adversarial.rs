//! Adversarial inputs for the topology manager's searches, as plain numbers (issue 29,
//! "bounded decisions"): machines and pods on which the exact searches behind hint families
//! are exponential, drawn from fixed seeds by a tiny xorshift generator so every run sees
//! the same input.
//!
//! - [`pulling_apart`]: two resources per node that pull apart — node `i` has `20 + e_i` of
//!   the first and `20 − e_i` of the second (`e_i` in −2..=2), the pod asks `20k + 1` of the
//!   first and `20k` of the second. Each alone fits in `k` nodes, no `k` nodes hold both
//!   (a `k`-set with more than `20k` of the first has less than `20k` of the second), and
//!   every `k + 1` nodes hold both (for `k` ≤ 8).
//! - [`near_ties`]: 4 CPUs per node, off-diagonal distances randomly 20 or 21, a pod that
//!   needs a quarter of the nodes: many sets of the minimum size whose average distances
//!   differ by little, for `prefer-closest-numa-nodes` to rank.
//!
//! ```
//! let input = corral_testkit::adversarial::pulling_apart(32, 4, 1);
//! assert_eq!(input.first.len(), 32);
//! assert_eq!((input.need_first, input.need_second), (81, 80));
//! assert!(input.first.iter().zip(&input.second).all(|(a, b)| a + b == 40));
//! ```

/// The per-node base amount of each resource in [`pulling_apart`].
pub const BASE: u64 = 20;

/// How far a node's amounts stray from [`BASE`] in [`pulling_apart`] (both ways).
pub const SPREAD: i64 = 2;

/// A xorshift64 generator: deterministic, tiny, good enough for test inputs.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator from `seed` (0 is replaced by a fixed non-zero state; xorshift would
    /// stay at 0 forever).
    pub fn new(seed: u64) -> XorShift {
        // Spread small seeds over the state (splitmix64's increment and finaliser).
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        XorShift(if z == 0 { 0x2545_F491_4F6C_DD1D } else { z })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A value in `0..n` (`n` > 0; the modulo bias is irrelevant for test inputs).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// Two resources pulling apart on `first.len()` nodes (see [`pulling_apart`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullingApart {
    /// Per node (index = node id), the amount of the first resource (e.g. CPUs).
    pub first: Vec<u64>,
    /// Per node, the amount of the second resource (e.g. devices); `first[i] + second[i]`
    /// is always `2 × BASE` (40).
    pub second: Vec<u64>,
    /// The pod's request of the first resource: `20k + 1`.
    pub need_first: u64,
    /// The pod's request of the second resource: `20k`.
    pub need_second: u64,
}

/// `nodes` nodes where each resource alone fits in `k` nodes and both together need `k + 1`.
///
/// Node `i` has `20 + e_i` of the first resource and `20 − e_i` of the second, `e_i` drawn
/// uniformly from −2..=2 by [`XorShift`] from `seed`; the request is `20k + 1` of the first
/// and `20k` of the second. A `k`-set holds enough of the first only if its `e` sum is ≥ 1,
/// and enough of the second only if it is ≤ 0, so no `k` nodes hold both; `k − 1` nodes hold
/// at most `22(k − 1)` of either, too little for `k` ≤ 10, and any `k + 1` nodes hold at
/// least `18(k + 1)`, enough of both for `k` ≤ 8. Draws whose `k` best nodes cannot serve
/// one of the resources alone (no positive `e`, say) are redrawn from the same generator,
/// so the result is still a function of the arguments.
///
/// # Panics
///
/// When `k` is 0, or `nodes` < `k + 1` (the pod would not fit at all).
pub fn pulling_apart(nodes: usize, k: usize, seed: u64) -> PullingApart {
    assert!(k > 0, "k must be positive");
    assert!(
        nodes > k,
        "{nodes} nodes cannot hold k + 1 = {} nodes",
        k + 1
    );
    let mut rng = XorShift::new(seed);
    loop {
        let e: Vec<i64> = (0..nodes)
            .map(|_| rng.below(2 * SPREAD as u64 + 1) as i64 - SPREAD)
            .collect();
        let mut sorted = e.clone();
        sorted.sort_unstable();
        let top: i64 = sorted.iter().rev().take(k).sum();
        let bottom: i64 = sorted.iter().take(k).sum();
        if top >= 1 && bottom <= 0 {
            let k = k as u64;
            return PullingApart {
                first: e.iter().map(|&e| (BASE as i64 + e) as u64).collect(),
                second: e.iter().map(|&e| (BASE as i64 - e) as u64).collect(),
                need_first: BASE * k + 1,
                need_second: BASE * k,
            };
        }
    }
}

/// CPUs, distances and a request with many near-tied best sets (see [`near_ties`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NearTies {
    /// Per node (index = node id), its CPUs: 4 each.
    pub per_node_cpus: Vec<u64>,
    /// `distances[i][j]`: 10 on the diagonal, 20 or 21 elsewhere, symmetric.
    pub distances: Vec<Vec<u64>>,
    /// The pod's CPUs: `4 × (nodes / 4)`, so `nodes / 4` nodes is the fewest that fit.
    pub need: u64,
}

/// The CPUs each node has in [`near_ties`].
pub const NEAR_TIES_CPUS: u64 = 4;

/// `nodes` nodes of 4 CPUs with off-diagonal distances drawn 20 or 21 (symmetric) by
/// [`XorShift`] from `seed`, and a request of `4 × (nodes / 4)` CPUs: every set of
/// `nodes / 4` nodes fits exactly, and their average distances differ only by the few 21s
/// among their pairs.
///
/// # Panics
///
/// When `nodes` < 4 (the request would be empty).
pub fn near_ties(nodes: usize, seed: u64) -> NearTies {
    assert!(nodes >= 4, "near_ties needs at least 4 nodes, got {nodes}");
    let mut rng = XorShift::new(seed);
    let mut distances = vec![vec![10; nodes]; nodes];
    let pairs = (0..nodes).flat_map(|i| (i + 1..nodes).map(move |j| (i, j)));
    for (i, j) in pairs {
        let d = 20 + rng.below(2);
        distances[i][j] = d;
        distances[j][i] = d;
    }
    NearTies {
        per_node_cpus: vec![NEAR_TIES_CPUS; nodes],
        distances,
        need: NEAR_TIES_CPUS * (nodes / 4) as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The most of `amounts` any `size` nodes hold.
    fn best(amounts: &[u64], size: usize) -> u64 {
        let mut sorted = amounts.to_vec();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        sorted.iter().take(size).sum()
    }

    /// The least of `amounts` any `size` nodes hold.
    fn worst(amounts: &[u64], size: usize) -> u64 {
        let mut sorted = amounts.to_vec();
        sorted.sort_unstable();
        sorted.iter().take(size).sum()
    }

    #[test]
    fn pulling_apart_each_alone_fits_k_and_together_need_k_plus_one() {
        for (nodes, k) in [
            (16, 2),
            (16, 4),
            (32, 4),
            (48, 4),
            (48, 6),
            (64, 4),
            (64, 8),
        ] {
            for seed in 0..20 {
                let p = pulling_apart(nodes, k, seed);
                assert_eq!(p, pulling_apart(nodes, k, seed), "deterministic");
                assert_eq!((p.first.len(), p.second.len()), (nodes, nodes));
                assert_eq!(p.need_first, 20 * k as u64 + 1);
                assert_eq!(p.need_second, 20 * k as u64);
                for (a, b) in p.first.iter().zip(&p.second) {
                    assert_eq!(a + b, 40);
                    assert!((18..=22).contains(a));
                }
                // Each alone: some k nodes suffice, no k - 1 nodes do.
                assert!(best(&p.first, k) >= p.need_first);
                assert!(best(&p.second, k) >= p.need_second);
                assert!(best(&p.first, k - 1) < p.need_first);
                assert!(best(&p.second, k - 1) < p.need_second);
                // Together: a k-set's two amounts sum to 40k < need_first + need_second,
                // so none holds both; every k + 1 nodes hold both.
                assert!(40 * (k as u64) < p.need_first + p.need_second);
                assert!(worst(&p.first, k + 1) >= p.need_first);
                assert!(worst(&p.second, k + 1) >= p.need_second);
            }
        }
    }

    #[test]
    fn near_ties_is_symmetric_with_a_quarter_of_the_nodes_needed() {
        for nodes in [16, 32, 48, 64] {
            let t = near_ties(nodes, 7);
            assert_eq!(t, near_ties(nodes, 7), "deterministic");
            assert_eq!(t.per_node_cpus, vec![4; nodes]);
            assert_eq!(t.need, nodes as u64);
            assert_eq!(best(&t.per_node_cpus, nodes / 4), t.need);
            assert!(best(&t.per_node_cpus, nodes / 4 - 1) < t.need);
            let mut seen = [0usize; 2];
            for i in 0..nodes {
                assert_eq!(t.distances[i].len(), nodes);
                assert_eq!(t.distances[i][i], 10);
                for j in 0..nodes {
                    assert_eq!(t.distances[i][j], t.distances[j][i]);
                    if i != j {
                        assert!(matches!(t.distances[i][j], 20 | 21));
                        seen[(t.distances[i][j] - 20) as usize] += 1;
                    }
                }
            }
            assert!(seen[0] > 0 && seen[1] > 0, "both distances drawn: {seen:?}");
        }
    }

    #[test]
    fn xorshift_is_deterministic_and_never_stuck_at_zero() {
        let mut a = XorShift::new(0);
        let mut b = XorShift::new(0);
        let drawn: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        assert_eq!(drawn, (0..8).map(|_| b.next_u64()).collect::<Vec<_>>());
        assert!(drawn.iter().all(|&x| x != 0));
        assert_ne!(XorShift::new(1).next_u64(), XorShift::new(2).next_u64());
    }
}
