//! Registered ("fixed") buffers for the io_uring backend: memory the kernel pinned once, so that a
//! direct I/O into it needs no page pinning of its own.
//!
//! Every direct I/O from ordinary memory makes the kernel pin the buffer's pages for the I/O's
//! length (`pin_user_pages`: a page-table walk and an atomic per page, `gup_fast_fallback` in
//! `perf`; 3–4% of a run's CPU on RAM-backed storage, 2026-12-01) and release them after. A
//! buffer registered with a ring is pinned once; `IORING_OP_READ_FIXED`/`WRITE_FIXED` name it by
//! index and skip the pinning. The page cache's frames (its slab's chunks), the write-back
//! buffers and the log buffers are registered here when they are allocated
//! ([`crate::AlignedBuf::register_fixed`]); a buffer that is not registered is read and written
//! as before.
//!
//! **One table, shared.** The registry keeps one ring of its own (never used for I/O) whose
//! sparse buffer table holds every registered region (up to [`SLOTS`]). A thread's ring takes a
//! copy of that table with `IORING_REGISTER_CLONE_BUFFERS` (Linux 6.12): the kernel shares the
//! pinned pages between the rings instead of pinning them again per ring, so a hundred session
//! threads cost one pinning of the cache. Each ring remembers the registry's generation of its
//! copy and copies again before its next I/O when the generation moved (a region registered or
//! released). A kernel without cloning (or a process whose locked-memory limit refuses the
//! registration) leaves the table unused: every I/O is then an ordinary one, correct as before.
//!
//! **Why a released region is never used stale.** A region is released (its slot cleared, the
//! generation advanced, with `Release` ordering) in its buffer's `Drop`, *before* the memory is
//! freed. A ring uses a slot only for a buffer that lies wholly in a region of the snapshot it
//! copied at its current generation, and it compares generations (`Acquire`) before every
//! submission. A buffer handed to an I/O is alive and was allocated after any release of memory
//! it now occupies, so the ring sees that release's generation and copies the table again before
//! it could name the released slot; the kernel's own reference keeps the old pages pinned (never
//! freed under an I/O) until every ring has let go of them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use io_uring::IoUring;
use io_uring::types::CloneBuffersFlags;
use parking_lot::Mutex;

/// Slots of the shared buffer table: 8 GiB of 2 MiB cache chunks; regions past it are not
/// registered (their I/O is ordinary). Each ring's copy of the table costs the kernel 8 bytes a
/// slot.
pub const SLOTS: u32 = 4096;

/// A region of registered memory and its slot in the shared table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Region {
    pub start: usize,
    pub end: usize,
    pub slot: u16,
}

/// The regions registered at one generation, sorted by address.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    pub generation: u64,
    pub regions: Vec<Region>,
}

impl Snapshot {
    /// The slot of the region holding `[ptr, ptr + len)` wholly, if any.
    pub fn slot_of(&self, ptr: usize, len: usize) -> Option<u16> {
        let at = self.regions.partition_point(|r| r.start <= ptr);
        let region = self.regions.get(at.checked_sub(1)?)?;
        (ptr + len <= region.end).then_some(region.slot)
    }
}

struct Registry {
    /// The ring whose table is the shared one; made by [`enable`].
    ring: IoUring,
    regions: Vec<Region>,
    free_slots: Vec<u16>,
    snapshot: Arc<Snapshot>,
}

static ENABLED: AtomicBool = AtomicBool::new(false);
static GENERATION: AtomicU64 = AtomicU64::new(0);
static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

/// Makes the shared table (the io_uring backend calls it once it knows io_uring works). Returns
/// whether registered buffers are in use; false when the kernel refuses a sparse table.
pub fn enable() -> bool {
    let mut registry = REGISTRY.lock();
    if registry.is_some() {
        return true;
    }
    let Ok(ring) = IoUring::new(2) else {
        return false;
    };
    if ring.submitter().register_buffers_sparse(SLOTS).is_err() {
        return false;
    }
    *registry = Some(Registry {
        ring,
        regions: Vec::new(),
        free_slots: (0..SLOTS as u16).rev().collect(),
        snapshot: Arc::new(Snapshot::default()),
    });
    ENABLED.store(true, Ordering::Release);
    true
}

/// Whether [`enable`] succeeded in this process.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Acquire)
}

/// A registered region; released when dropped (before its memory is freed: the owner drops this
/// first).
#[derive(Debug)]
pub struct Registration {
    slot: u16,
}

/// Registers `[ptr, ptr + len)` in the shared table, or `None` (not enabled, table full, the
/// kernel refused: the memory's I/O stays ordinary).
///
/// # Safety
/// The memory must stay allocated, and not move, until the returned registration is dropped.
pub(crate) unsafe fn register(ptr: *const u8, len: usize) -> Option<Registration> {
    if !enabled() || len == 0 {
        return None;
    }
    let mut guard = REGISTRY.lock();
    let registry = guard.as_mut()?;
    let slot = registry.free_slots.pop()?;
    let iovec = libc::iovec {
        iov_base: ptr as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: the caller keeps the memory alive until the registration is dropped, which clears
    // the slot; rings that copied the table hold the kernel's own reference to the pages.
    let updated = unsafe {
        registry
            .ring
            .submitter()
            .register_buffers_update(u32::from(slot), &[iovec], None)
    };
    if updated.is_err() {
        registry.free_slots.push(slot);
        return None;
    }
    let start = ptr as usize;
    let at = registry.regions.partition_point(|r| r.start < start);
    registry.regions.insert(
        at,
        Region {
            start,
            end: start + len,
            slot,
        },
    );
    publish(registry);
    Some(Registration { slot })
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut guard = REGISTRY.lock();
        let Some(registry) = guard.as_mut() else {
            return;
        };
        registry.regions.retain(|r| r.slot != self.slot);
        // An empty iovec clears the slot; the pages stay pinned only while a ring's copy of the
        // table still refers to them.
        let empty = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        // SAFETY: clearing a slot hands the kernel no memory.
        let cleared = unsafe {
            registry
                .ring
                .submitter()
                .register_buffers_update(u32::from(self.slot), &[empty], None)
        };
        // A slot the kernel would not clear is not reused (it may still name the old memory).
        if cleared.is_ok() {
            registry.free_slots.push(self.slot);
        }
        publish(registry);
    }
}

fn publish(registry: &mut Registry) {
    let generation = GENERATION.fetch_add(1, Ordering::AcqRel) + 1;
    registry.snapshot = Arc::new(Snapshot {
        generation,
        regions: registry.regions.clone(),
    });
}

/// A ring's copy of the shared table.
#[derive(Debug, Default)]
pub(crate) struct RingTable {
    snapshot: Option<Arc<Snapshot>>,
    /// The kernel refused to clone (older than 6.12): never try again on this ring.
    unavailable: bool,
}

impl RingTable {
    /// The snapshot matching `ring`'s table, copying the shared table first if it moved since
    /// the last copy; `None` when registered buffers are not in use on this ring.
    pub fn current(&mut self, ring: &IoUring) -> Option<&Snapshot> {
        if self.unavailable || !enabled() {
            return None;
        }
        let generation = GENERATION.load(Ordering::Acquire);
        let fresh = self
            .snapshot
            .as_ref()
            .is_some_and(|s| s.generation == generation);
        if !fresh {
            let guard = REGISTRY.lock();
            let registry = guard.as_ref()?;
            let source = std::os::fd::AsRawFd::as_raw_fd(&registry.ring);
            let flags = if self.snapshot.is_some() {
                CloneBuffersFlags::DST_REPLACE
            } else {
                CloneBuffersFlags::empty()
            };
            // Under the registry's lock: the copy is exactly the table of `registry.snapshot`.
            let cloned = ring
                .submitter()
                .register_buffers_clone_offset(source, 0, 0, 0, flags);
            if cloned.is_err() {
                self.unavailable = true;
                self.snapshot = None;
                return None;
            }
            self.snapshot = Some(registry.snapshot.clone());
        }
        self.snapshot.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_found_only_for_a_buffer_wholly_inside_a_region() {
        let snapshot = Snapshot {
            generation: 1,
            regions: vec![
                Region {
                    start: 4096,
                    end: 8192,
                    slot: 3,
                },
                Region {
                    start: 16384,
                    end: 32768,
                    slot: 7,
                },
            ],
        };
        assert_eq!(snapshot.slot_of(4096, 4096), Some(3));
        assert_eq!(snapshot.slot_of(5000, 100), Some(3));
        assert_eq!(snapshot.slot_of(8000, 400), None, "runs past the region");
        assert_eq!(snapshot.slot_of(0, 4096), None);
        assert_eq!(snapshot.slot_of(8192, 4096), None, "between regions");
        assert_eq!(snapshot.slot_of(16384, 16384), Some(7));
        assert_eq!(snapshot.slot_of(32768, 1), None);
    }
}
