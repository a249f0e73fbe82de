//! The search data of every node in one contiguous arena: per node a block of 32-bit words with
//! a small header, the node's name (so that the lookup's name check reads the line the search
//! reads next), each device's occupancy and a 16-bit value id per device and attribute,
//! column by column. A gang check then reads the index's table and one block of a few adjacent
//! cache lines per candidate, instead of chasing a node entry, its view and a separate heap block.
//! Kept in step with the public [`NodeView`]s by the inventory. Pure data; no I/O.

use super::compact::Usage;
use super::inventory::{Cells, NodeView};

/// Header words: device count, attribute columns, name length in bytes, devices in use.
const HEAD: usize = 4;
/// Words per device in the occupancy rows: a [`Usage`] as it stores itself.
const ROW: usize = 2;
/// The cell of a device that does not carry the attribute.
const MISSING: u16 = u16::MAX;
/// The cell of a value whose id does not fit in 16 bits (an attribute with more than 65,533
/// distinct values, such as a serial number): the id is then found through the node's view.
const WIDE: u16 = u16::MAX - 1;
/// The offset of a slot without a block.
const NO_BLOCK: u32 = u32::MAX;

/// What a block says about one attribute of one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cell {
    /// The device does not carry the attribute.
    Missing,
    /// The interned value id.
    Value(u32),
    /// The device carries the attribute, with an id too large for the block.
    Wide,
}

/// One node's block, borrowed from the arena, with the offsets of its parts read once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Block<'a> {
    words: &'a [u32],
    devices: usize,
    width: usize,
    usage_at: usize,
    cells_at: usize,
}

impl<'a> Block<'a> {
    #[inline]
    fn new(words: &'a [u32]) -> Self {
        let devices = words[0] as usize;
        let usage_at = HEAD + (words[2] as usize).div_ceil(4);
        Block {
            words,
            devices,
            width: words[1] as usize,
            usage_at,
            cells_at: usage_at + ROW * devices,
        }
    }

    /// How many devices the node has.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.devices
    }

    /// How many devices have at least one consumer.
    #[inline]
    pub(crate) fn in_use(&self) -> usize {
        self.words[3] as usize
    }

    /// How many words the block spans.
    fn size(&self) -> usize {
        self.cells_at + (self.width * self.devices).div_ceil(2)
    }

    /// Whether the node is named `name`.
    #[inline]
    pub(crate) fn name_is(&self, name: &str) -> bool {
        let bytes = name.as_bytes();
        if self.words[2] as usize != bytes.len() {
            return false;
        }
        let (whole, tail) = bytes.split_at(bytes.len() / 4 * 4);
        let words = &self.words[HEAD..];
        let mut i = 0;
        for chunk in whole.chunks_exact(4) {
            if words[i] != u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]) {
                return false;
            }
            i += 1;
        }
        if tail.is_empty() {
            return true;
        }
        let mut last = [0u8; 4];
        last[..tail.len()].copy_from_slice(tail);
        words[i] == u32::from_le_bytes(last)
    }

    /// The occupancy of every device, in device order.
    #[inline]
    pub(crate) fn usages(&self) -> impl Iterator<Item = Usage> + '_ {
        self.words[self.usage_at..self.usage_at + ROW * self.devices]
            .chunks_exact(ROW)
            .map(|row| Usage::from_words(row[0], row[1]))
    }

    /// The value of `attribute` on device `d`.
    #[inline]
    pub(crate) fn cell(&self, d: usize, attribute: u32) -> Cell {
        let attribute = attribute as usize;
        if attribute >= self.width {
            // An attribute first seen after this block was written: no device here has it.
            return Cell::Missing;
        }
        let k = attribute * self.devices + d;
        let word = self.words[self.cells_at + k / 2];
        match (word >> (16 * (k % 2))) as u16 {
            MISSING => Cell::Missing,
            WIDE => Cell::Wide,
            id => Cell::Value(u32::from(id)),
        }
    }

    /// Reads one word of every cache line of the block, so that the lines are on their way while
    /// other candidates are looked up (a prefetch hint; the values are not used).
    pub(crate) fn touch(&self) {
        for word in self.words[..self.size()].iter().step_by(16) {
            std::hint::black_box(*word);
        }
    }
}

/// One node as the search reads it: its block in the arena, its view when the search needs
/// what the block does not hold (device names, reservations), and its devices' interned
/// attributes for values with wide ids.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NodeRef<'a> {
    pub(crate) block: Block<'a>,
    views: &'a [Option<NodeView>],
    cells: &'a [Cells],
    slot: usize,
}

impl<'a> NodeRef<'a> {
    pub(crate) fn new(
        block: Block<'a>,
        views: &'a [Option<NodeView>],
        cells: &'a [Cells],
        slot: usize,
    ) -> Self {
        NodeRef {
            block,
            views,
            cells,
            slot,
        }
    }

    /// The node's slot in the inventory (stable while the node is in it).
    #[inline]
    pub(crate) fn slot(&self) -> usize {
        self.slot
    }

    /// The node's public view.
    #[inline]
    pub(crate) fn view(&self) -> &'a NodeView {
        self.views[self.slot]
            .as_ref()
            .expect("a slot with a block has a view")
    }

    /// The value id of `attribute` on device `d`, if the device carries the attribute.
    #[inline]
    pub(crate) fn value_id(&self, d: usize, attribute: u32) -> Option<u32> {
        match self.block.cell(d, attribute) {
            Cell::Missing => None,
            Cell::Value(id) => Some(id),
            Cell::Wide => self.cells[d]
                .iter()
                .find(|&&(a, _)| a == attribute)
                .map(|&(_, value)| value),
        }
    }
}

fn size(name_len: usize, devices: usize, width: usize) -> usize {
    HEAD + name_len.div_ceil(4) + ROW * devices + (width * devices).div_ceil(2)
}

/// Every node's block, addressed by the inventory's slot numbers.
#[derive(Clone, Debug, Default)]
pub(crate) struct Blocks {
    words: Vec<u32>,
    /// The first word of each slot's block, or [`NO_BLOCK`].
    offsets: Vec<u32>,
    /// Words of replaced or removed blocks, reclaimed by [`Blocks::compact`].
    dead: usize,
}

impl Blocks {
    /// The block of `slot`; the slot must have one.
    #[inline]
    pub(crate) fn block(&self, slot: usize) -> Block<'_> {
        Block::new(&self.words[self.offsets[slot] as usize..])
    }

    /// Writes the block of `slot` for `view`, whose devices carry the interned attributes
    /// `cells` (of `width` attribute names in all), replacing its earlier block.
    pub(crate) fn write(&mut self, slot: usize, view: &NodeView, cells: &[Cells], width: usize) {
        self.release(slot);
        if self.dead > 4096 && 2 * self.dead > self.words.len() {
            self.compact();
        }
        let (n, name) = (view.devices.len(), view.name.as_bytes());
        let start = self.words.len();
        self.words.resize(start + size(name.len(), n, width), 0);
        let block = &mut self.words[start..];
        block[0] = u32::try_from(n).expect("fewer than 2^32 devices on a node");
        block[1] = u32::try_from(width).expect("fewer than 2^32 attribute names");
        block[2] = u32::try_from(name.len()).expect("node name under 4 GiB");
        for (word, chunk) in block[HEAD..].iter_mut().zip(name.chunks(4)) {
            let mut bytes = [0u8; 4];
            bytes[..chunk.len()].copy_from_slice(chunk);
            *word = u32::from_le_bytes(bytes);
        }
        let cells_at = HEAD + name.len().div_ceil(4) + ROW * n;
        let mut column = vec![MISSING; width * n];
        for (d, pairs) in cells.iter().enumerate() {
            for &(attribute, value) in pairs {
                column[attribute as usize * n + d] = u16::try_from(value)
                    .ok()
                    .filter(|&v| v < WIDE)
                    .unwrap_or(WIDE);
            }
        }
        for (word, pair) in block[cells_at..].iter_mut().zip(column.chunks(2)) {
            let high = pair.get(1).copied().unwrap_or(MISSING);
            *word = u32::from(pair[0]) | (u32::from(high) << 16);
        }
        self.set_offset(slot, start);
        for (d, device) in view.devices.iter().enumerate() {
            self.set_usage(slot, d, Usage::of(device));
        }
        self.set_in_use(slot, view.in_use());
    }

    fn set_offset(&mut self, slot: usize, start: usize) {
        if slot >= self.offsets.len() {
            self.offsets.resize(slot + 1, NO_BLOCK);
        }
        self.offsets[slot] = u32::try_from(start).expect("search arena under 16 GiB");
    }

    /// Records the occupancy of device `d` of `slot`.
    pub(crate) fn set_usage(&mut self, slot: usize, d: usize, usage: Usage) {
        let start = self.offsets[slot] as usize;
        let at = start + self.block(slot).usage_at + ROW * d;
        self.words[at..at + ROW].copy_from_slice(&usage.words());
    }

    /// Records how many devices of `slot` are in use.
    pub(crate) fn set_in_use(&mut self, slot: usize, in_use: usize) {
        let at = self.offsets[slot] as usize + 3;
        self.words[at] = u32::try_from(in_use).expect("fewer than 2^32 devices on a node");
    }

    /// Drops the block of `slot`, if it has one.
    pub(crate) fn release(&mut self, slot: usize) {
        let Some(&start) = self.offsets.get(slot) else {
            return;
        };
        if start == NO_BLOCK {
            return;
        }
        self.dead += self.block(slot).size();
        self.offsets[slot] = NO_BLOCK;
    }

    /// Moves the live blocks together, in slot order.
    fn compact(&mut self) {
        let mut words = Vec::with_capacity(self.words.len() - self.dead);
        for offset in &mut self.offsets {
            if *offset == NO_BLOCK {
                continue;
            }
            let start = *offset as usize;
            let end = start + Block::new(&self.words[start..]).size();
            *offset = u32::try_from(words.len()).expect("search arena under 16 GiB");
            words.extend_from_slice(&self.words[start..end]);
        }
        self.words = words;
        self.dead = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::{Blocks, Cell};
    use crate::fit::compact::{Interner, Usage};
    use crate::fit::inventory::Cells;
    use crate::fit::inventory::{Consumers, DeviceView, NodeView, SharedConsumer};
    use crate::model::{AttributeValue, Device, Sharing};

    fn node(name: &str, serials: std::ops::Range<u32>) -> NodeView {
        let devices = serials
            .map(|s| {
                DeviceView::free(
                    Device::new(format!("d{s:06}"))
                        .with("serial", AttributeValue::Int(i64::from(s)))
                        .with("model", AttributeValue::String("H200".into())),
                )
            })
            .collect();
        NodeView::new(name, devices)
    }

    #[test]
    fn blocks_keep_names_occupancy_and_values_across_rewrites_and_compaction() {
        let mut interner = Interner::default();
        let mut blocks = Blocks::default();
        let mut views = Vec::new();
        let mut write = |blocks: &mut Blocks, slot: usize, view: &NodeView| {
            let cells: Vec<Cells> = view
                .devices
                .iter()
                .map(|d| interner.intern(&d.device.attributes).into_boxed_slice())
                .collect();
            blocks.write(slot, view, &cells, interner.width());
        };
        for slot in 0..300u32 {
            let view = node(&format!("node-{slot}"), slot * 300..slot * 300 + 300);
            write(&mut blocks, slot as usize, &view);
            views.push(view);
        }
        // Rewrite every node twice (enough garbage for a compaction), every other one with a
        // shared consumer on its first device.
        for _ in 0..2 {
            for (slot, view) in views.iter_mut().enumerate() {
                if slot % 2 == 0 {
                    view.devices[0].consumers = Consumers::Shared(vec![SharedConsumer {
                        claim_uid: "c".into(),
                        max_consumers: 3,
                    }]);
                }
                write(&mut blocks, slot, view);
            }
        }
        blocks.release(299);
        assert!(blocks.words.len() < 2 * 300 * 1206, "compacted");
        let serial = interner.attribute("serial").unwrap();
        let model = interner.attribute("model").unwrap();
        for (slot, view) in views.iter().enumerate().take(299) {
            let block = blocks.block(slot);
            assert!(block.name_is(&view.name));
            assert!(!block.name_is("node-"));
            assert_eq!(block.len(), 300);
            assert_eq!(block.in_use(), usize::from(slot % 2 == 0));
            let mut expected = Usage::of(&DeviceView::free(Device::new("x")));
            if slot % 2 == 0 {
                expected.take(Sharing::Shared { max_consumers: 3 });
            }
            assert_eq!(block.usages().next(), Some(expected));
            for d in [0, 150, 299] {
                let id = view.devices[d]
                    .device
                    .attributes
                    .get("serial")
                    .and_then(|value| interner.values(serial).id(value));
                match block.cell(d, serial) {
                    Cell::Value(v) => assert_eq!(Some(v), id),
                    // 90,000 distinct serials: the later ones do not fit in a cell.
                    Cell::Wide => assert!(id.unwrap() >= u32::from(u16::MAX - 1)),
                    Cell::Missing => panic!("serial missing on {} device {d}", view.name),
                }
                assert_eq!(block.cell(d, model), Cell::Value(0));
            }
        }
        assert_eq!(blocks.block(298).cell(0, 7), Cell::Missing);
    }
}
