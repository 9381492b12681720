//! Symmetry reduction over broker permutations.
//!
//! Renaming brokers (the core's [`Cluster::permute_brokers`], which renames the `assigned`
//! order too) maps behaviours onto behaviours and leaves every property's verdict unchanged, so
//! the checker need only visit one state per class of renamings. The representative of a class
//! is the renaming with the smallest fingerprint: every member of the class has the same set of
//! renamings, so they all pick the same one. stateright applies it under DFS only.

use isr::sim::Cluster;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::OnceLock;

/// A stable 64-bit fingerprint of a state.
pub fn fingerprint<T: Hash>(value: &T) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

/// Every permutation of `0..n`, identity first.
pub fn permutations(n: u32) -> Vec<Vec<u32>> {
    fn extend(prefix: &mut Vec<u32>, n: u32, out: &mut Vec<Vec<u32>>) {
        if prefix.len() == n as usize {
            out.push(prefix.clone());
            return;
        }
        for b in 0..n {
            if !prefix.contains(&b) {
                prefix.push(b);
                extend(prefix, n, out);
                prefix.pop();
            }
        }
    }
    let mut out = Vec::new();
    extend(&mut Vec::new(), n, &mut out);
    out
}

/// Symmetry reduction is offered up to this many brokers (their permutations are computed once;
/// beyond, canonicalising would cost more than it saves).
pub const MAX_SYMMETRIC_BROKERS: usize = 5;

fn cached_permutations(n: usize) -> &'static [Vec<u32>] {
    static TABLE: OnceLock<Vec<Vec<Vec<u32>>>> = OnceLock::new();
    &TABLE.get_or_init(|| {
        (0..=MAX_SYMMETRIC_BROKERS as u32)
            .map(permutations)
            .collect()
    })[n]
}

/// The canonical member of `c`'s class of broker renamings (a `symmetry_fn` for stateright).
pub fn representative(c: &Cluster) -> Cluster {
    let n = c.replicas.len();
    assert!(
        n <= MAX_SYMMETRIC_BROKERS,
        "symmetry supports up to {MAX_SYMMETRIC_BROKERS} brokers"
    );
    let mut best: Option<(u64, Cluster)> = None;
    for perm in cached_permutations(n) {
        let renamed = c.permute_brokers(perm);
        let fp = fingerprint(&renamed);
        if best.as_ref().is_none_or(|(b, _)| fp < *b) {
            best = Some((fp, renamed));
        }
    }
    best.map(|(_, c)| c)
        .expect("there is at least the identity")
}
