//! Lookup of nodes by name for the hot path of the gang check: an open-addressing table of
//! 32-bit name tags and slot numbers, one `u64` per entry, so that a lookup reads one cache line
//! of the table before it goes to the node's search block (where the caller verifies the name).
//! The table of 5,000 nodes is 128 KiB and stays in cache between checks. Pure data; no I/O.

use std::hash::{BuildHasherDefault, Hasher};

/// FNV-1a (64-bit): a fast, deterministic hash for short keys such as node names.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Builds [`Fnv`] hashers for `HashMap`/`HashSet`.
pub(crate) type FnvBuild = BuildHasherDefault<Fnv>;

/// The tag of a node name in the table: FNV-1a folded to 32 bits.
#[inline]
pub(crate) fn name_tag(name: &str) -> u32 {
    let mut fnv = Fnv::default();
    fnv.write(name.as_bytes());
    (fnv.0 ^ (fnv.0 >> 32)) as u32
}

/// An empty table entry.
const EMPTY: u64 = 0;

/// Tag and slot in one word: the tag in the high half, the slot plus one in the low half.
fn pack(tag: u32, slot: usize) -> u64 {
    let slot = u32::try_from(slot + 1).expect("fewer than 2^32 - 1 nodes");
    (u64::from(tag) << 32) | u64::from(slot)
}

fn tag_of(entry: u64) -> u32 {
    (entry >> 32) as u32
}

fn slot_of(entry: u64) -> usize {
    (entry & u64::from(u32::MAX)) as usize - 1
}

/// Node name tag to slot number, by linear probing; the caller owns the slots and the names.
/// Removal shifts later entries back, so there are no tombstones and lookups stay short.
#[derive(Clone, Debug, Default)]
pub(crate) struct NodeIndex {
    /// Power-of-two length (or empty), at most half full.
    table: Vec<u64>,
    len: usize,
}

impl NodeIndex {
    fn mask(&self) -> usize {
        self.table.len() - 1
    }

    /// The home position of `tag` (Fibonacci hashing spreads FNV's weak low bits).
    #[inline]
    fn home(&self, tag: u32) -> usize {
        let bits = self.table.len().trailing_zeros();
        (u64::from(tag).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
    }

    /// The slot whose name has `tag` and for which `is_name` says yes.
    pub(crate) fn get(&self, tag: u32, is_name: impl Fn(usize) -> bool) -> Option<usize> {
        self.find(tag, |slot| is_name(slot).then_some(slot))
    }

    /// The first answer of `probe` for the slots under `tag` (it answers `None` for a slot
    /// whose name differs).
    #[inline]
    pub(crate) fn find<T>(&self, tag: u32, probe: impl Fn(usize) -> Option<T>) -> Option<T> {
        if self.table.is_empty() {
            return None;
        }
        let mask = self.mask();
        let mut at = self.home(tag);
        loop {
            let entry = self.table[at];
            if entry == EMPTY {
                return None;
            }
            if tag_of(entry) == tag {
                if let Some(found) = probe(slot_of(entry)) {
                    return Some(found);
                }
            }
            at = (at + 1) & mask;
        }
    }

    /// Adds `slot` under `tag`; the caller makes sure the name is not present yet.
    pub(crate) fn insert(&mut self, tag: u32, slot: usize) {
        if 2 * (self.len + 1) > self.table.len() {
            self.grow();
        }
        self.place(pack(tag, slot));
        self.len += 1;
    }

    fn place(&mut self, entry: u64) {
        let mask = self.mask();
        let mut at = self.home(tag_of(entry));
        while self.table[at] != EMPTY {
            at = (at + 1) & mask;
        }
        self.table[at] = entry;
    }

    fn grow(&mut self) {
        let size = (self.table.len() * 2).max(16);
        let old = std::mem::replace(&mut self.table, vec![EMPTY; size]);
        for entry in old.into_iter().filter(|&e| e != EMPTY) {
            self.place(entry);
        }
    }

    /// Removes the entry of `slot` under `tag`; `false` when there is none.
    pub(crate) fn remove(&mut self, tag: u32, slot: usize) -> bool {
        if self.table.is_empty() {
            return false;
        }
        let mask = self.mask();
        let wanted = pack(tag, slot);
        let mut hole = self.home(tag);
        loop {
            match self.table[hole] {
                EMPTY => return false,
                entry if entry == wanted => break,
                _ => hole = (hole + 1) & mask,
            }
        }
        // Backward shift: move up every later entry of the run whose home is not between the
        // hole and its position.
        let mut at = hole;
        loop {
            at = (at + 1) & mask;
            let entry = self.table[at];
            if entry == EMPTY {
                break;
            }
            let origin = self.home(tag_of(entry));
            let distance_now = at.wrapping_sub(origin) & mask;
            let distance_hole = hole.wrapping_sub(origin) & mask;
            if distance_hole < distance_now {
                self.table[hole] = entry;
                hole = at;
            }
        }
        self.table[hole] = EMPTY;
        self.len -= 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::{name_tag, NodeIndex};

    #[test]
    fn names_are_found_after_inserts_and_removals_in_any_order() {
        let names: Vec<String> = (0..2000).map(|i| format!("node-{i}")).collect();
        let mut index = NodeIndex::default();
        let find = |index: &NodeIndex, name: &str| {
            index.get(name_tag(name), |slot| {
                names.get(slot).is_some_and(|n| n == name)
            })
        };
        for (slot, name) in names.iter().enumerate() {
            index.insert(name_tag(name), slot);
        }
        assert_eq!(find(&index, "node-7"), Some(7));
        assert_eq!(find(&index, "absent"), None);
        for (slot, name) in names.iter().enumerate().filter(|(i, _)| i % 3 != 1) {
            assert!(index.remove(name_tag(name), slot));
        }
        assert!(!index.remove(name_tag("node-0"), 0));
        for (slot, name) in names.iter().enumerate() {
            let expected = (slot % 3 == 1).then_some(slot);
            assert_eq!(find(&index, name), expected, "{name}");
        }
        index.insert(name_tag("node-0"), 0);
        assert_eq!(find(&index, "node-0"), Some(0));
        assert_eq!(find(&index, "node-1998"), None);
        assert_eq!(find(&index, "node-1999"), Some(1999));
    }

    #[test]
    fn colliding_tags_are_told_apart_by_the_name() {
        let names = ["a", "b", "c"];
        let mut index = NodeIndex::default();
        // Every name under one tag: only the name check tells them apart.
        for slot in 0..names.len() {
            index.insert(7, slot);
        }
        for (slot, name) in names.iter().enumerate() {
            assert_eq!(index.get(7, |s| names[s] == *name), Some(slot));
        }
        assert!(index.remove(7, 1));
        assert_eq!(index.get(7, |s| names[s] == "b"), None);
        assert_eq!(index.get(7, |s| names[s] == "c"), Some(2));
    }
}
