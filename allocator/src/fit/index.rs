//! Compact lookup of nodes by name for the hot path of the gang check: slot numbers found
//! through a table keyed by a 64-bit FNV-1a hash of the name, verified against names packed
//! into one string. Everything it touches per lookup stays small enough to remain in cache
//! between checks. Pure data; no I/O.

use std::collections::HashMap;
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

/// Passes an already computed `u64` hash through unchanged.
#[derive(Clone, Copy, Debug, Default)]
struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used by the table below; fold anything else in FNV style.
        let mut fnv = Fnv(self.0);
        fnv.write(bytes);
        self.0 = fnv.0;
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

fn hash_name(name: &str) -> u64 {
    let mut fnv = Fnv::default();
    fnv.write(name.as_bytes());
    fnv.0
}

const NONE: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Slot {
    hash: u64,
    /// The next live slot whose name has the same hash, or [`NONE`].
    next: u32,
    name_start: u32,
    name_len: u32,
    live: bool,
}

/// Node name to slot number. Slots of removed names are reused.
#[derive(Clone, Debug, Default)]
pub(crate) struct NodeIndex {
    heads: HashMap<u64, u32, BuildHasherDefault<Identity>>,
    slots: Vec<Slot>,
    names: String,
    free: Vec<u32>,
    live_bytes: usize,
}

impl NodeIndex {
    fn name(&self, slot: &Slot) -> &str {
        let start = slot.name_start as usize;
        &self.names[start..start + slot.name_len as usize]
    }

    /// The slot of `name`, if present.
    pub(crate) fn get(&self, name: &str) -> Option<usize> {
        let hash = hash_name(name);
        let mut at = *self.heads.get(&hash)?;
        while at != NONE {
            let slot = &self.slots[at as usize];
            if slot.hash == hash && self.name(slot) == name {
                return Some(at as usize);
            }
            at = slot.next;
        }
        None
    }

    /// The slot of `name`, adding it if absent; the flag says whether it was added.
    pub(crate) fn insert(&mut self, name: &str) -> (usize, bool) {
        if let Some(at) = self.get(name) {
            return (at, false);
        }
        let hash = hash_name(name);
        let name_start = u32::try_from(self.names.len()).expect("node names under 4 GiB");
        self.names.push_str(name);
        self.live_bytes += name.len();
        let next = self.heads.get(&hash).copied().unwrap_or(NONE);
        let slot = Slot {
            hash,
            next,
            name_start,
            name_len: u32::try_from(name.len()).expect("node name under 4 GiB"),
            live: true,
        };
        let at = if let Some(at) = self.free.pop() {
            self.slots[at as usize] = slot;
            at
        } else {
            self.slots.push(slot);
            u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 nodes")
        };
        self.heads.insert(hash, at);
        (at as usize, true)
    }

    /// Removes `name`, returning the slot it had.
    pub(crate) fn remove(&mut self, name: &str) -> Option<usize> {
        let at = self.get(name)?;
        let hash = self.slots[at].hash;
        let next = self.slots[at].next;
        // Unlink from the chain of its hash.
        let head = self.heads[&hash];
        if head as usize == at {
            if next == NONE {
                self.heads.remove(&hash);
            } else {
                self.heads.insert(hash, next);
            }
        } else {
            let mut prev = head as usize;
            while self.slots[prev].next as usize != at {
                prev = self.slots[prev].next as usize;
            }
            self.slots[prev].next = next;
        }
        self.slots[at].live = false;
        self.slots[at].next = NONE;
        self.live_bytes -= self.slots[at].name_len as usize;
        self.free.push(u32::try_from(at).expect("slot fits in u32"));
        if self.names.len() > 2 * self.live_bytes + 4096 {
            self.compact();
        }
        Some(at)
    }

    /// Repacks the names of live slots, dropping those of removed ones.
    fn compact(&mut self) {
        let mut names = String::with_capacity(self.live_bytes);
        for i in 0..self.slots.len() {
            if self.slots[i].live {
                let start = u32::try_from(names.len()).expect("node names under 4 GiB");
                names.push_str(self.name(&self.slots[i]));
                self.slots[i].name_start = start;
            }
        }
        self.names = names;
    }
}

#[cfg(test)]
mod tests {
    use super::NodeIndex;

    #[test]
    fn names_map_to_stable_slots_and_removed_slots_are_reused() {
        let mut index = NodeIndex::default();
        let names: Vec<String> = (0..2000).map(|i| format!("node-{i}")).collect();
        for (i, name) in names.iter().enumerate() {
            assert_eq!(index.insert(name), (i, true));
        }
        assert_eq!(index.insert("node-7"), (7, false));
        for (i, name) in names.iter().enumerate().filter(|(i, _)| i % 2 == 0) {
            assert_eq!(index.remove(name), Some(i));
        }
        assert_eq!(index.get("node-0"), None);
        assert_eq!(index.remove("node-0"), None);
        for (i, name) in names.iter().enumerate().filter(|(i, _)| i % 2 == 1) {
            assert_eq!(index.get(name), Some(i));
        }
        let (slot, added) = index.insert("another");
        assert!(added && slot % 2 == 0 && slot < 2000);
        assert_eq!(index.get("another"), Some(slot));
        assert_eq!(index.get("node-1999"), Some(1999));
    }
}
