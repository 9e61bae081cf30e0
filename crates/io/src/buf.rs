//! Aligned, zero-initialised byte buffers for direct I/O.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Alignment of every [`AlignedBuf`]: covers 512-byte and 4 KiB logical blocks.
pub const IO_ALIGNMENT: usize = 4096;

/// A heap buffer whose start is aligned to [`IO_ALIGNMENT`], as O_DIRECT requires.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like a Box<[u8]>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out &[u8].
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes. `len` of zero gives an empty buffer.
    pub fn zeroed(len: usize) -> AlignedBuf {
        if len == 0 {
            return AlignedBuf {
                ptr: NonNull::dangling(),
                len: 0,
            };
        }
        let layout = Self::layout(len);
        // SAFETY: layout has a non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            std::alloc::handle_alloc_error(layout);
        };
        AlignedBuf { ptr, len }
    }

    fn layout(len: usize) -> Layout {
        match Layout::from_size_align(len, IO_ALIGNMENT) {
            Ok(layout) => layout,
            Err(_) => panic!("buffer of {len} bytes cannot be laid out"),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The allocation's own pointer, not derived from a reference: what an [`AlignedSlab`]
    /// cuts its slots from (writing through it is sound while no slice of this buffer is alive).
    fn raw(&self) -> NonNull<u8> {
        self.ptr
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.len != 0 {
            // SAFETY: allocated in `zeroed` with this very layout.
            unsafe { dealloc(self.ptr.as_ptr(), Self::layout(self.len)) }
        }
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes (or dangling with len 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and we hold &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Clone for AlignedBuf {
    fn clone(&self) -> Self {
        let mut copy = AlignedBuf::zeroed(self.len);
        copy.copy_from_slice(self);
        copy
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

/// Many fixed-size aligned buffers (slots) cut from a few large allocations (chunks of
/// `slots_per_chunk` slots, each allocated, zeroed, when one of its slots is first asked for).
///
/// Why not one [`AlignedBuf`] per slot: an aligned allocation costs the allocator up to its
/// alignment again (glibc's `memalign` carves each 4 KiB-aligned block out of a larger one and
/// leaves the gap between blocks), so a page cache of 32 KiB buffers made one by one held 12.5%
/// more resident memory than its pages, and one of 8 KiB pages 50% more
/// (`bench/results/2026-11-25-cache-memory.md`). A chunk costs that gap once.
pub struct AlignedSlab {
    slot_len: usize,
    slots_per_chunk: usize,
    slots: usize,
    /// The chunks, each an [`AlignedBuf`] that is never dereferenced: its bytes are reached
    /// only through the slots cut from its pointer ([`AlignedBuf::raw`]).
    chunks: Vec<std::sync::OnceLock<AlignedBuf>>,
}

/// One slot of an [`AlignedSlab`]: `slot_len` bytes aligned to [`IO_ALIGNMENT`], zeroed when
/// handed out, or empty ([`SlabSlot::empty`]). It does not free anything when dropped; the slab
/// does, so a slot must not be used after its slab is dropped (`AlignedSlab::slot`).
pub struct SlabSlot {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a slot is the only handle on its bytes (the contract of `AlignedSlab::slot`), like a
// `Box<[u8]>` whose memory its slab owns.
unsafe impl Send for SlabSlot {}
// SAFETY: shared access only hands out &[u8].
unsafe impl Sync for SlabSlot {}

impl SlabSlot {
    /// A slot of no bytes, owning nothing.
    pub fn empty() -> SlabSlot {
        SlabSlot {
            ptr: NonNull::dangling(),
            len: 0,
        }
    }
}

impl Deref for SlabSlot {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes while the slab lives (or dangling with len 0), and
        // no other slot covers them.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for SlabSlot {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and we hold &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl std::fmt::Debug for SlabSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SlabSlot({} bytes)", self.len)
    }
}

impl AlignedSlab {
    /// A slab of `slots` slots of `slot_len` bytes (a multiple of [`IO_ALIGNMENT`], so that
    /// every slot is aligned), allocated `slots_per_chunk` at a time. Allocates nothing yet.
    pub fn new(slot_len: usize, slots: usize, slots_per_chunk: usize) -> AlignedSlab {
        assert!(
            slot_len > 0 && slot_len.is_multiple_of(IO_ALIGNMENT),
            "slot of {slot_len} bytes is not a multiple of {IO_ALIGNMENT}"
        );
        let slots_per_chunk = slots_per_chunk.clamp(1, slots.max(1));
        let chunks = slots.div_ceil(slots_per_chunk);
        AlignedSlab {
            slot_len,
            slots_per_chunk,
            slots,
            chunks: (0..chunks).map(|_| std::sync::OnceLock::new()).collect(),
        }
    }

    /// Bytes allocated so far (whole chunks).
    pub fn allocated_bytes(&self) -> usize {
        self.chunks
            .iter()
            .filter_map(|c| c.get())
            .map(AlignedBuf::len)
            .sum()
    }

    fn chunk(&self, index: usize) -> &AlignedBuf {
        self.chunks[index].get_or_init(|| {
            let first = index * self.slots_per_chunk;
            AlignedBuf::zeroed(self.slot_len * self.slots_per_chunk.min(self.slots - first))
        })
    }

    /// Slot `index`'s buffer, zeroed (the first time it is handed out).
    ///
    /// # Safety
    /// Each index must be handed out at most once while the slab lives (two slots of one index
    /// would alias), and the slot must not be read or written after the slab is dropped.
    pub unsafe fn slot(&self, index: usize) -> SlabSlot {
        assert!(index < self.slots, "slot {index} of {}", self.slots);
        let chunk = self.chunk(index / self.slots_per_chunk);
        let offset = (index % self.slots_per_chunk) * self.slot_len;
        // SAFETY: offset + slot_len <= chunk.len() by the chunk's length.
        let ptr = unsafe { chunk.raw().add(offset) };
        SlabSlot {
            ptr,
            len: self.slot_len,
        }
    }
}

impl std::fmt::Debug for AlignedSlab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AlignedSlab({} slots of {} bytes, {} allocated)",
            self.slots,
            self.slot_len,
            self.allocated_bytes()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zeroed() {
        for len in [1usize, 512, 4096, 32768, 1 << 20] {
            let buf = AlignedBuf::zeroed(len);
            assert_eq!(buf.as_ptr() as usize % IO_ALIGNMENT, 0, "len {len}");
            assert!(buf.iter().all(|&b| b == 0));
            assert_eq!(buf.len(), len);
        }
        assert!(AlignedBuf::zeroed(0).is_empty());
    }

    #[test]
    fn slab_slots_are_aligned_zeroed_disjoint_and_allocated_by_chunk() {
        let slab = AlignedSlab::new(8192, 10, 4);
        assert_eq!(slab.allocated_bytes(), 0);
        // SAFETY: each index once; the slots are dropped before the slab.
        let mut slots: Vec<SlabSlot> = (0..10).map(|i| unsafe { slab.slot(i) }).collect();
        // Three chunks: 4 + 4 + 2 slots.
        assert_eq!(slab.allocated_bytes(), 10 * 8192);
        for (i, slot) in slots.iter_mut().enumerate() {
            assert_eq!(slot.len(), 8192);
            assert_eq!(slot.as_ptr() as usize % IO_ALIGNMENT, 0, "slot {i}");
            assert!(slot.iter().all(|&b| b == 0), "slot {i} zeroed");
            slot.fill(i as u8 + 1);
        }
        // Writing one slot left every other one as it was.
        for (i, slot) in slots.iter().enumerate() {
            assert!(slot.iter().all(|&b| b == i as u8 + 1), "slot {i}");
        }
        assert!(SlabSlot::empty().is_empty());
    }

    #[test]
    fn a_slab_allocates_only_the_chunks_asked_for() {
        let slab = AlignedSlab::new(4096, 100, 16);
        // SAFETY: index 40 once; the slot goes out of scope before the slab.
        let slot = unsafe { slab.slot(40) };
        assert_eq!(slot.len(), 4096);
        assert_eq!(slab.allocated_bytes(), 16 * 4096);
    }
}
