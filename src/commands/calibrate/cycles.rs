//! The random orders the chases follow: single cycles through every node, optionally visiting
//! each group (page) of nodes in one stretch, from a small reproducible generator.

/// A small, fast generator (splitmix64): enough to defeat prefetchers, reproducible.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub(super) fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }

    fn shuffle(&mut self, v: &mut [u32]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i + 1));
        }
    }
}

/// A random cyclic permutation of `0..n` as successors: following `next` from any node visits
/// every node once before coming back (Sattolo's algorithm).
pub(super) fn random_cycle(n: usize, rng: &mut Rng) -> Vec<u32> {
    let mut next: Vec<u32> = (0..n as u32).collect();
    for i in (1..n).rev() {
        next.swap(i, rng.below(i));
    }
    next
}

/// A random single cycle over `0..n` that visits the nodes group by group (groups of `group`
/// consecutive nodes, in random order), each group's nodes in random order.
pub(super) fn grouped_cycle(n: usize, group: usize, rng: &mut Rng) -> Vec<u32> {
    let group = group.max(1);
    let mut groups: Vec<u32> = (0..n.div_ceil(group) as u32).collect();
    rng.shuffle(&mut groups);
    let mut order = Vec::with_capacity(n);
    for g in groups {
        let lo = g as usize * group;
        let start = order.len();
        order.extend(lo as u32..(lo + group).min(n) as u32);
        rng.shuffle(&mut order[start..]);
    }
    let mut next = vec![0u32; n];
    for k in 0..n {
        next[order[k] as usize] = order[(k + 1) % n];
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The length of the cycle through node 0, if `next` is a permutation.
    fn cycle_len(next: &[u32]) -> usize {
        let mut seen = vec![false; next.len()];
        let (mut i, mut len) = (0usize, 0);
        while !seen[i] {
            seen[i] = true;
            i = next[i] as usize;
            len += 1;
        }
        assert_eq!(i, 0, "the walk from 0 must come back to 0");
        len
    }

    #[test]
    fn random_cycles_are_single_cycles_over_every_node() {
        let mut rng = Rng(1);
        for n in [1, 2, 3, 7, 64, 1000, 4097] {
            let next = random_cycle(n, &mut rng);
            assert_eq!(cycle_len(&next), n, "n = {n}");
            // Sattolo never maps a node to itself (for n > 1).
            assert!(n == 1 || next.iter().enumerate().all(|(i, &j)| i != j as usize));
        }
        // Not the identity shift: it is shuffled.
        let next = random_cycle(1000, &mut rng);
        assert!(
            next.iter()
                .enumerate()
                .filter(|(i, &j)| j as usize == i + 1)
                .count()
                < 50
        );
    }

    #[test]
    fn grouped_cycles_visit_each_group_in_one_stretch() {
        let mut rng = Rng(2);
        for (n, group) in [(1, 64), (64, 64), (1000, 64), (4096, 64), (10, 3)] {
            let next = grouped_cycle(n, group, &mut rng);
            assert_eq!(cycle_len(&next), n, "n = {n}");
            let changes = (0..n)
                .filter(|&i| i / group != next[i] as usize / group)
                .count();
            let groups = n.div_ceil(group);
            assert_eq!(changes, if groups == 1 { 0 } else { groups }, "n = {n}");
        }
    }
}
