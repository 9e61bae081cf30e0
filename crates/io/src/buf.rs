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
    /// Registered with io_uring ([`AlignedBuf::register_fixed`]); released before the memory.
    registration: Option<crate::fixed::Registration>,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like a Box<[u8]>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out &[u8].
unsafe impl Sync for AlignedBuf {}

/// Memory the allocator would not give: a buffer (or a table sized by a setting) of `bytes`
/// bytes. Returned by the fallible allocations ([`AlignedBuf::try_zeroed`],
/// [`AlignedSlab::try_new`], [`AlignedSlab::slot`]) that a setting such as the cache size decides,
/// so that an impossible size is an error the caller reports, not an abort of the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
#[error("the allocator could not give {bytes} bytes of memory")]
pub struct AllocError {
    pub bytes: usize,
}

impl AllocError {
    pub fn new(bytes: usize) -> AllocError {
        AllocError { bytes }
    }
}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes. `len` of zero gives an empty buffer. Aborts the process
    /// when the allocator has no memory, like `Vec`; buffers whose size a user's setting decides
    /// use [`AlignedBuf::try_zeroed`].
    pub fn zeroed(len: usize) -> AlignedBuf {
        match Self::try_zeroed(len) {
            Ok(buf) => buf,
            Err(_) => match Layout::from_size_align(len, IO_ALIGNMENT) {
                Ok(layout) => std::alloc::handle_alloc_error(layout),
                Err(_) => panic!("buffer of {len} bytes cannot be laid out"),
            },
        }
    }

    /// A zeroed buffer of `len` bytes, or [`AllocError`] when the allocator cannot give it (or
    /// the size cannot be laid out at all).
    pub fn try_zeroed(len: usize) -> Result<AlignedBuf, AllocError> {
        if len == 0 {
            return Ok(AlignedBuf {
                ptr: NonNull::dangling(),
                len: 0,
                registration: None,
            });
        }
        let layout =
            Layout::from_size_align(len, IO_ALIGNMENT).map_err(|_| AllocError::new(len))?;
        // SAFETY: layout has a non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or(AllocError::new(len))?;
        Ok(AlignedBuf {
            ptr,
            len,
            registration: None,
        })
    }

    /// Registers the buffer's memory with io_uring ([`crate::fixed`]), so that the io_uring
    /// backend's direct I/O into or out of it pins no pages of its own. Does nothing when
    /// io_uring's registered buffers are not in use in this process (the std backend, an older
    /// kernel), when the buffer is already registered, or when the shared table is full. Meant
    /// for buffers that live long and see many I/Os: the page cache's memory, the write-back
    /// and log buffers.
    pub fn register_fixed(&mut self) {
        if self.registration.is_none() && self.len != 0 {
            // SAFETY: the registration is dropped in `drop` before the memory is freed, and the
            // allocation never moves.
            self.registration = unsafe { crate::fixed::register(self.ptr.as_ptr(), self.len) };
        }
    }

    /// [`AlignedBuf::zeroed`], then [`AlignedBuf::register_fixed`]: a long-lived I/O buffer.
    pub fn zeroed_registered(len: usize) -> AlignedBuf {
        let mut buf = AlignedBuf::zeroed(len);
        buf.register_fixed();
        buf
    }

    /// Whether [`AlignedBuf::register_fixed`] registered it.
    pub fn is_registered(&self) -> bool {
        self.registration.is_some()
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
        // Released before the memory goes back to the allocator (`crate::fixed`).
        drop(self.registration.take());
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
    /// every slot is aligned), allocated `slots_per_chunk` at a time. Allocates no slot yet, only
    /// the table of chunks, and that fallibly: the slot count comes from a user's cache size.
    pub fn try_new(
        slot_len: usize,
        slots: usize,
        slots_per_chunk: usize,
    ) -> Result<AlignedSlab, AllocError> {
        assert!(
            slot_len > 0 && slot_len.is_multiple_of(IO_ALIGNMENT),
            "slot of {slot_len} bytes is not a multiple of {IO_ALIGNMENT}"
        );
        let slots_per_chunk = slots_per_chunk.clamp(1, slots.max(1));
        let count = slots.div_ceil(slots_per_chunk);
        let mut chunks = Vec::new();
        chunks.try_reserve_exact(count).map_err(|_| {
            AllocError::new(count.saturating_mul(size_of::<std::sync::OnceLock<AlignedBuf>>()))
        })?;
        chunks.extend((0..count).map(|_| std::sync::OnceLock::new()));
        Ok(AlignedSlab {
            slot_len,
            slots_per_chunk,
            slots,
            chunks,
        })
    }

    /// Bytes allocated so far (whole chunks).
    pub fn allocated_bytes(&self) -> usize {
        self.chunks
            .iter()
            .filter_map(|c| c.get())
            .map(AlignedBuf::len)
            .sum()
    }

    /// Chunk `index`, allocated (zeroed) on first use. When two threads race to allocate it,
    /// one allocation is kept and the other freed.
    fn chunk(&self, index: usize) -> Result<&AlignedBuf, AllocError> {
        let cell = &self.chunks[index];
        if let Some(chunk) = cell.get() {
            return Ok(chunk);
        }
        let first = index * self.slots_per_chunk;
        let mut fresh =
            AlignedBuf::try_zeroed(self.slot_len * self.slots_per_chunk.min(self.slots - first))?;
        // The frames' memory sees every page read and write: registered for io_uring where it
        // is in use (a chunk that loses the race below is released with it).
        fresh.register_fixed();
        Ok(cell.get_or_init(|| fresh))
    }

    /// Slot `index`'s buffer, zeroed (the first time it is handed out), or [`AllocError`] when
    /// its chunk is not allocated yet and the allocator cannot give it.
    ///
    /// # Safety
    /// Each index must be handed out at most once while the slab lives (two slots of one index
    /// would alias), and the slot must not be read or written after the slab is dropped.
    pub unsafe fn slot(&self, index: usize) -> Result<SlabSlot, AllocError> {
        assert!(index < self.slots, "slot {index} of {}", self.slots);
        let chunk = self.chunk(index / self.slots_per_chunk)?;
        let offset = (index % self.slots_per_chunk) * self.slot_len;
        // SAFETY: offset + slot_len <= chunk.len() by the chunk's length.
        let ptr = unsafe { chunk.raw().add(offset) };
        Ok(SlabSlot {
            ptr,
            len: self.slot_len,
        })
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
    fn an_impossible_buffer_is_an_error_not_an_abort() {
        // More than any address space holds: the layout itself is refused.
        let error = AlignedBuf::try_zeroed(usize::MAX - 100).expect_err("cannot be laid out");
        assert_eq!(error.bytes, usize::MAX - 100);
        // Layable but far beyond any machine (64 TiB of 1 EiB): the allocator says no.
        let huge = 1usize << 60;
        assert_eq!(
            AlignedBuf::try_zeroed(huge)
                .expect_err("no machine has 1 EiB")
                .bytes,
            huge
        );
        let slab = AlignedSlab::try_new(4096, 1 << 40, 1).map(|s| s.allocated_bytes());
        assert!(slab.is_err(), "a table of 2^40 chunks is refused: {slab:?}");
        // A slab whose table fits, but whose chunk does not: the slot is an error.
        let slab = AlignedSlab::try_new(4096, 1 << 48, 1 << 47).expect("two chunks in the table");
        // SAFETY: index 0 once; nothing is handed out.
        let slot = unsafe { slab.slot(0) };
        assert!(slot.is_err(), "a 512 PiB chunk is refused");
    }

    #[test]
    fn slab_slots_are_aligned_zeroed_disjoint_and_allocated_by_chunk() {
        let slab = AlignedSlab::try_new(8192, 10, 4).expect("small slab");
        assert_eq!(slab.allocated_bytes(), 0);
        // SAFETY: each index once; the slots are dropped before the slab.
        let mut slots: Vec<SlabSlot> = (0..10)
            .map(|i| unsafe { slab.slot(i) }.expect("small chunk"))
            .collect();
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
        let slab = AlignedSlab::try_new(4096, 100, 16).expect("small slab");
        // SAFETY: index 40 once; the slot goes out of scope before the slab.
        let slot = unsafe { slab.slot(40) }.expect("small chunk");
        assert_eq!(slot.len(), 4096);
        assert_eq!(slab.allocated_bytes(), 16 * 4096);
    }
}
