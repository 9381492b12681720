//! The set of states visited, as 64-bit fingerprints only, shared by every search thread: a
//! table in memory and, past a [`Budget`], a sorted file on disk ([`Disk`]).
//!
//! Open addressing over atomic words: an insert is a probe and a compare-and-swap, with no lock
//! taken but a shard's reader count. The table is split into shards by the fingerprint's top
//! bits; a shard that fills up past three quarters is doubled under its write lock, which stops
//! only the inserts that land in that shard, for as long as the copy takes. Eight bytes per
//! state at most 75 % full: 45 M states fit in 512 MiB.
//!
//! Under a [`Budget`], a shard doubles only while the budget would hold every shard at the
//! doubled size, so the table settles at the largest size that fits (between half the budget
//! and all of it). A shard that fills up then flushes the table instead: every shard's write
//! lock is taken (the world stops), the fingerprints, sorted shard by shard (shards are in
//! fingerprint order, so the shards one after another are sorted), are merged into the file,
//! and the table is emptied, keeping its size. From then on a fingerprint the table does not
//! hold is looked up on disk before it is inserted. Beyond the table, a flush holds one
//! shard's fingerprints to sort them, and a doubling one shard's old slots while it copies:
//! 1/64 of the table either way.
//!
//! Why an insert is new exactly once: the table and the file never share a fingerprint, and an
//! insert holds its shard's read lock from its first look, through the disk's, to the
//! compare-and-swap that claims a slot. A flush, which holds every shard's write lock, cannot
//! fall in between, so a fingerprint that the insert did not find in the table or on disk is
//! in neither when it claims the slot; two inserts of one fingerprint race for the same first
//! empty slot of its probe sequence, and one compare-and-swap wins. The disk changes only
//! during a flush, so a reader holding any shard's lock sees it whole.

use super::budget::Budget;
use super::spill::{Disk, PAGE};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

const SHARD_BITS: u32 = 6;
const SHARDS: usize = 1 << SHARD_BITS;
const INITIAL_SLOTS: usize = 1 << 12;
/// The smallest shard a small budget starts with.
const MIN_SLOTS: usize = 1 << 4;

struct Shard {
    slots: RwLock<Box<[AtomicU64]>>,
    len: AtomicUsize,
}

/// What the set keeps for spilling: the budget, the file, and how a flush went.
struct Spill {
    budget: Arc<Budget>,
    disk: RwLock<Disk>,
    /// The fingerprints on disk: changed only by a flush, so stable under any shard's lock.
    on_disk: AtomicUsize,
    /// One flush at a time.
    flushing: Mutex<()>,
    /// The disk failed (the error is in the budget): the search must end. After a failed
    /// flush the set stays whole and its table grows past the budget; a failed read answered
    /// "visited".
    failed: AtomicBool,
}

/// A concurrent set of fingerprints.
pub struct Visited {
    shards: Vec<Shard>,
    spill: Option<Spill>,
}

fn empty(n: usize) -> Box<[AtomicU64]> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

/// Whether a shard of `slots` slots holding `len` fingerprints is full enough to grow.
fn full(len: usize, slots: usize) -> bool {
    len * 4 > slots * 3
}

/// Inserts into a table with room; `true` when `fp` (never 0) was not there. Most lookups
/// find the fingerprint (most successors were visited), so slots are read first and only an
/// empty one is written, with a compare-and-swap.
fn put(slots: &[AtomicU64], fp: u64) -> bool {
    let mask = slots.len() - 1;
    let mut i = (fp as usize) & mask;
    loop {
        match slots[i].load(Ordering::Acquire) {
            x if x == fp => return false,
            0 => match slots[i].compare_exchange(0, fp, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(x) if x == fp => return false,
                Err(_) => i = (i + 1) & mask,
            },
            _ => i = (i + 1) & mask,
        }
    }
}

/// Whether a table holds `fp`.
fn find(slots: &[AtomicU64], fp: u64) -> bool {
    let mask = slots.len() - 1;
    let mut i = (fp as usize) & mask;
    loop {
        match slots[i].load(Ordering::Acquire) {
            0 => return false,
            x if x == fp => return true,
            _ => i = (i + 1) & mask,
        }
    }
}

/// A shard's fingerprints in ascending order.
fn sorted(slots: &[AtomicU64]) -> std::vec::IntoIter<u64> {
    let mut fps: Vec<u64> = slots
        .iter()
        .map(|s| s.load(Ordering::Relaxed))
        .filter(|&x| x != 0)
        .collect();
    fps.sort_unstable();
    fps.into_iter()
}

impl Visited {
    /// An empty set, kept within `budget` if there is one, or in memory whatever its size.
    pub fn new(budget: Option<Arc<Budget>>) -> Visited {
        // A small budget starts with small shards, so that the table fits it.
        let mut initial = INITIAL_SLOTS;
        while budget
            .as_ref()
            .is_some_and(|b| initial > MIN_SLOTS && SHARDS * initial * 8 > b.limit)
        {
            initial /= 2;
        }
        Visited {
            shards: (0..SHARDS)
                .map(|_| Shard {
                    slots: RwLock::new(empty(initial)),
                    len: AtomicUsize::new(0),
                })
                .collect(),
            spill: budget.map(|budget| Spill {
                disk: RwLock::new(Disk::new(budget.dir.clone())),
                budget,
                on_disk: AtomicUsize::new(0),
                flushing: Mutex::new(()),
                failed: AtomicBool::new(false),
            }),
        }
    }

    /// Adds a fingerprint; `true` when it is new.
    pub fn insert(&self, fp: u64) -> bool {
        // 0 marks an empty slot.
        let fp = fp.max(1);
        let at = (fp >> (64 - SHARD_BITS)) as usize;
        let shard = &self.shards[at];
        let grow = {
            let slots = read(&shard.slots);
            if self.flushed(&slots, fp) || !put(&slots, fp) {
                return false;
            }
            let len = shard.len.fetch_add(1, Ordering::Relaxed) + 1;
            full(len, slots.len())
        };
        if grow {
            self.make_room(shard);
        }
        true
    }

    /// Whether a fingerprint is in the set.
    pub fn contains(&self, fp: u64) -> bool {
        let fp = fp.max(1);
        let slots = read(&self.shards[(fp >> (64 - SHARD_BITS)) as usize].slots);
        find(&slots, fp) || self.flushed(&slots, fp)
    }

    /// Whether `fp` was flushed to disk, looked up there only if something was and the table
    /// (`slots`, its shard's, read-locked by the caller) does not hold it. A failed read
    /// answers yes: the search is ending, and a state it does not explore twice is no harm.
    fn flushed(&self, slots: &[AtomicU64], fp: u64) -> bool {
        let Some(spill) = &self.spill else {
            return false;
        };
        if spill.on_disk.load(Ordering::Relaxed) == 0 || find(slots, fp) {
            return false;
        }
        read(&spill.disk).contains(fp).unwrap_or_else(|e| {
            spill.fail(e);
            true
        })
    }

    /// Doubles a shard that filled up, or flushes the table to disk when the budget would not
    /// hold every shard at the doubled size (and the disk has not failed). Shards then stay
    /// one size: a flush comes when the first of them fills, so a shard grown alone would hold
    /// no more than the others, only take more memory.
    fn make_room(&self, shard: &Shard) {
        if let Some(spill) = &self.spill {
            let bytes = read(&shard.slots).len() * 8;
            let needed = (SHARDS * 2 * bytes)
                .saturating_add(spill.on_disk.load(Ordering::Relaxed) / PAGE * 8);
            if needed > spill.budget.limit
                && !spill.failed.load(Ordering::Relaxed)
                && self.flush(spill)
            {
                return;
            }
        }
        let mut slots = write(&shard.slots);
        if full(shard.len.load(Ordering::Relaxed), slots.len()) {
            let bigger = empty(slots.len() * 2);
            for s in slots.iter() {
                let x = s.load(Ordering::Relaxed);
                if x != 0 {
                    put(&bigger, x);
                }
            }
            *slots = bigger;
        }
    }

    /// Moves the table's fingerprints to disk, the world stopped; `true` when the table has
    /// room again (this flush or another thread's just emptied it), `false` when the disk
    /// failed.
    fn flush(&self, spill: &Spill) -> bool {
        let _one = spill.flushing.lock().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<_> = self.shards.iter().map(|s| write(&s.slots)).collect();
        let any_full = self
            .shards
            .iter()
            .zip(&all)
            .any(|(s, slots)| full(s.len.load(Ordering::Relaxed), slots.len()));
        if !any_full {
            return true;
        }
        if spill.failed.load(Ordering::Relaxed) {
            return false;
        }
        let mut disk = write(&spill.disk);
        match disk.merge(all.iter().flat_map(|slots| sorted(slots))) {
            Ok(()) => {
                for (shard, slots) in self.shards.iter().zip(&mut all) {
                    slots.iter_mut().for_each(|s| *s.get_mut() = 0);
                    shard.len.store(0, Ordering::Relaxed);
                }
                spill.on_disk.store(disk.len(), Ordering::Relaxed);
                spill.budget.merged(disk.len());
                true
            }
            Err(e) => {
                spill.fail(e);
                false
            }
        }
    }

    /// Whether the disk failed the set: the search must end, and the caller report the error
    /// its budget holds.
    pub fn failed(&self) -> bool {
        self.spill
            .as_ref()
            .is_some_and(|s| s.failed.load(Ordering::Relaxed))
    }

    /// The number of fingerprints, in memory and on disk.
    pub fn len(&self) -> usize {
        let on_disk = self
            .spill
            .as_ref()
            .map_or(0, |s| s.on_disk.load(Ordering::Relaxed));
        on_disk
            + self
                .shards
                .iter()
                .map(|s| s.len.load(Ordering::Relaxed))
                .sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Spill {
    fn fail(&self, e: super::spill::SpillError) {
        self.budget.fail(e);
        self.failed.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::state::mix;

    /// Inserts `n` fingerprints from two threads at once; checks each was new exactly once and
    /// the set holds them and no other.
    fn inserted_once(set: &Visited, n: u64) {
        let fps = |t: u64| (0..n).map(move |i| mix(i * 2 + t));
        let news: usize = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2)
                .map(|_| s.spawn(|| fps(0).filter(|&fp| set.insert(fp)).count()))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(news, n as usize, "each fingerprint is new exactly once");
        assert_eq!(set.len(), n as usize);
        assert!(fps(0).all(|fp| set.contains(fp)));
        assert!(fps(1).all(|fp| !set.contains(fp)));
        assert!(fps(0).all(|fp| !set.insert(fp)), "none is new again");
    }

    #[test]
    fn inserts_are_new_once_across_growth_and_threads() {
        inserted_once(&Visited::new(None), 200_000);
    }

    #[test]
    fn inserts_are_new_once_across_flushes_to_disk() {
        // 64 KiB: 8,192 slots, flushed every few thousand fingerprints.
        let budget = Budget::new(64 << 10, std::env::temp_dir());
        let set = Visited::new(Some(Arc::clone(&budget)));
        inserted_once(&set, 100_000);
        let spilled = budget.spilled();
        assert!(spilled.merges >= 10, "{spilled:?}");
        assert!(spilled.fingerprints > 80_000, "{spilled:?}");
        assert!(!set.failed());
        assert!(budget.take_error().is_none());
    }

    #[test]
    fn a_disk_that_fails_ends_the_search_and_keeps_the_set_whole() {
        let budget = Budget::new(64 << 10, "/proc/no-such-place".into());
        let set = Visited::new(Some(Arc::clone(&budget)));
        inserted_once(&set, 50_000);
        assert!(set.failed());
        let e = budget
            .take_error()
            .expect("the error is kept for the caller");
        assert!(e.to_string().contains("could not spill"), "{e}");
        assert_eq!(budget.spilled().merges, 0);
    }
}
