//! The cleaner's offset map (Kafka's `SkimpyOffsetMap`): each key's latest offset in the dirty
//! part of a log, in a table of fixed size, so that a cleaning's memory is bounded however
//! many keys the log holds (`--log-cleaner-dedupe-buffer-size`, Kafka's
//! `log.cleaner.dedupe.buffer.size`). A key is kept as a 128-bit hash, not as its bytes; when
//! the table is full the cleaning stops where it is and the next one goes on from there
//! ([`super::cleaner`]).
//!
//! The hash is std's SipHash-1-3 under a random per-process key, taken twice with a domain
//! byte (0 and 1) for 128 bits. Two keys that collide would look like one, and the older
//! record of the one would be removed as superseded: at 128 bits the chance for a table of n
//! keys is about n²/2¹²⁹ (nil at any size memory allows), and since the key is secret, no
//! producer can compute keys that collide, as it could against Kafka's unkeyed MD5. SipHash
//! is a keyed pseudo-random function, so its outputs on distinct inputs are independent; it
//! comes with std (no new dependency) and hashes short keys several times faster than a
//! cryptographic digest would, and the cleaner hashes every record of every dirty segment.

use std::hash::{BuildHasher, RandomState};

/// Bytes one entry takes: a 128-bit key hash and an offset.
pub const SLOT_BYTES: usize = 24;

/// Kafka's default `log.cleaner.dedupe.buffer.size`, 128 MiB. The broker has one cleaner thread,
/// so its map may take all of it (Kafka splits it among `log.cleaner.threads`).
pub const DEFAULT_DEDUPE_BUFFER_BYTES: u64 = 128 << 20;

/// The share of slots a map fills at most (Kafka's `log.cleaner.io.buffer.load.factor`): open
/// addressing needs free slots to end its probes.
const LOAD_FACTOR: f64 = 0.9;

pub struct OffsetMap {
    /// Per slot: the key's hash (two words) and its offset. All zero is a free slot: a stored
    /// hash has its lowest bit set (127 bits of hash are left), so it is never all zero; and a
    /// table of zeros is allocated without touching its pages, which a sparse map leaves
    /// mostly unused.
    slots: Vec<[u64; 3]>,
    entries: usize,
    capacity: usize,
    hasher: RandomState,
}

impl OffsetMap {
    /// A map in at most `bytes` (at least two slots), and no larger than `expected` keys need:
    /// a small log does not take the whole buffer.
    pub fn new(bytes: usize, expected: usize) -> OffsetMap {
        let most = bytes / SLOT_BYTES;
        let needed = ((expected as f64 / LOAD_FACTOR).ceil() as usize).saturating_add(1);
        let slots = most.min(needed).max(2);
        let capacity = ((slots as f64 * LOAD_FACTOR) as usize).clamp(1, slots - 1);
        OffsetMap {
            slots: vec![[0; 3]; slots],
            entries: 0,
            capacity,
            hasher: RandomState::new(),
        }
    }

    /// How many keys the map holds at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The bytes its table takes.
    pub fn bytes(&self) -> usize {
        self.slots.len() * SLOT_BYTES
    }

    /// Notes `offset` as `key`'s latest. A new key when the map is full is not taken: `false`,
    /// and the map is as it was.
    pub fn put(&mut self, key: &[u8], offset: u64) -> bool {
        let hash = self.hash(key);
        let i = self.slot(hash);
        let slot = &mut self.slots[i];
        if slot[..2] == hash {
            slot[2] = offset;
            return true;
        }
        if self.entries == self.capacity {
            return false;
        }
        *slot = [hash[0], hash[1], offset];
        self.entries += 1;
        true
    }

    /// The offset last put for `key`.
    pub fn get(&self, key: &[u8]) -> Option<u64> {
        let hash = self.hash(key);
        let slot = &self.slots[self.slot(hash)];
        (slot[..2] == hash).then_some(slot[2])
    }

    fn hash(&self, key: &[u8]) -> [u64; 2] {
        [
            self.hasher.hash_one((0u8, key)),
            self.hasher.hash_one((1u8, key)) | 1,
        ]
    }

    /// The slot holding `hash`, or the free slot where it goes (linear probing; there is always
    /// a free slot, since the map never fills every one).
    fn slot(&self, hash: [u64; 2]) -> usize {
        let n = self.slots.len();
        let mut i = (hash[0] % n as u64) as usize;
        while self.slots[i][..2] != hash && self.slots[i] != [0; 3] {
            i = (i + 1) % n;
        }
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_to_their_latest_offset_and_a_full_map_refuses_new_keys_only() {
        let mut map = OffsetMap::new(100 * SLOT_BYTES, usize::MAX);
        assert_eq!(map.capacity(), 90, "Kafka's load factor");
        assert_eq!(map.bytes(), 100 * SLOT_BYTES, "the bound");
        for i in 0..90u64 {
            assert!(map.put(format!("k{i}").as_bytes(), i));
        }
        assert!(!map.put(b"one more", 90), "full");
        assert_eq!(map.get(b"one more"), None);
        assert!(map.put(b"k3", 91), "a known key is updated, full or not");
        assert_eq!(map.get(b"k3"), Some(91));
        assert_eq!(map.get(b"k89"), Some(89));
        assert_eq!(map.get(b"k90"), None);
    }

    #[test]
    fn a_map_is_only_as_large_as_its_keys_need_and_never_smaller_than_one_key() {
        let map = OffsetMap::new(1 << 30, 9);
        assert!(map.capacity() >= 9 && map.bytes() <= 12 * SLOT_BYTES);
        let mut tiny = OffsetMap::new(0, 1000);
        assert_eq!(tiny.capacity(), 1);
        assert!(tiny.put(b"a", 1) && tiny.put(b"a", 2) && !tiny.put(b"b", 3));
    }
}
