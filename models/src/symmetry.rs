//! Symmetry reduction over broker permutations.
//!
//! Renaming brokers (the core's [`Cluster::renamed`], which also forgets the order of `assigned`
//! and renumbers each broker's epochs by rank: see `isr::permute`) maps behaviours onto
//! behaviours and leaves every property's verdict unchanged, so the checker need only visit one
//! state per class of renamings. The representative of a class
//! is the renaming with the smallest fingerprint: every member of the class has the same set of
//! renamings, so they all pick the same one. stateright applies it under DFS only.

use isr::permute::{EpochTable, Renaming};
use isr::sim::Cluster;
use isr::BrokerId;
use std::hash::Hash;
use std::sync::OnceLock;

/// A stable 64-bit fingerprint of a state (aHash with fixed keys, as stateright's own).
pub fn fingerprint<T: Hash>(value: &T) -> u64 {
    ahash::RandomState::with_seeds(0, 0, 0, 0).hash_one(value)
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

/// The canonical member of `c`'s class of broker renamings.
pub fn representative(c: &Cluster) -> Cluster {
    let mut r = c.clone();
    canonicalize(&mut r);
    r
}

/// The renamings that list the brokers of `c` in the order of their signatures
/// ([`Cluster::broker_signature`], which no renaming changes), as permutations (`perm[b]` is
/// `b`'s new name). Every member of a class of renamings has the same set of renamed states
/// under its candidates; usually the signatures differ, and there is just one. The messages in
/// flight play no part: a signature reads none.
pub fn candidates(c: &Cluster) -> Vec<&'static [u32]> {
    let n = c.broker_count();
    assert!(
        n <= MAX_SYMMETRIC_BROKERS,
        "symmetry supports up to {MAX_SYMMETRIC_BROKERS} brokers"
    );
    let signatures: Vec<u64> = (0..n as u32)
        .map(|b| c.broker_signature(BrokerId(b)))
        .collect();
    let in_order = |perm: &&Vec<u32>| {
        (0..n).all(|a| (0..n).all(|b| signatures[a] >= signatures[b] || perm[a] < perm[b]))
    };
    cached_permutations(n)
        .iter()
        .filter(in_order)
        .map(Vec::as_slice)
        .collect()
}

/// Whether a permutation leaves every broker's name as it is.
pub fn is_identity(perm: &[u32]) -> bool {
    perm.iter().enumerate().all(|(b, &to)| to as usize == b)
}

/// The renaming of a candidate: `perm`, forgetting the order of assignments and renumbering
/// each broker's epochs by rank in `epochs` (the table of the whole state being renamed).
pub fn renaming<'a>(perm: &'a [u32], epochs: &'a EpochTable) -> Renaming<'a> {
    Renaming::new(perm)
        .forgetting_assignment_order()
        .ranking_epochs(epochs)
}

/// Replaces `c` by the canonical member of its class of broker renamings: among the renamings
/// of its [`candidates`], the one with the smallest fingerprint, with each broker's epochs
/// renumbered by rank, so every member of the class ends at the same state.
pub fn canonicalize(c: &mut Cluster) {
    let candidates = candidates(c);
    let epochs = c.broker_epochs();
    if let [perm] = candidates[..] {
        if is_identity(perm) && c.epochs_are_ranked(&epochs) {
            return;
        }
        c.rename_brokers(&renaming(perm, &epochs));
        return;
    }
    let mut best: Option<(u64, Cluster)> = None;
    for perm in candidates {
        let mut renamed = c.clone();
        renamed.rename_brokers(&renaming(perm, &epochs));
        let fp = fingerprint(&renamed);
        if best.as_ref().is_none_or(|(b, _)| fp < *b) {
            best = Some((fp, renamed));
        }
    }
    *c = best
        .map(|(_, c)| c)
        .expect("some renaming sorts brokers by signature");
}
