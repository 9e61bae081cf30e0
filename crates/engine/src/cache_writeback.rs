//! The background flusher's write-back with its queue kept fed across passes (issue 22).
//!
//! A flush pass ([`CacheInner::flush_pass_filtered`]) issues its writes and then waits for every
//! one of them: its callers (close, the checkpoint, a stalled session) rely on that. For the
//! background flusher that wait emptied the write queue at the end of every pass: while the
//! pass's last writes completed, sessions kept dirtying pages and nothing new was issued until
//! the slowest write of the pass was back, so the device saw bursts of `write_back_depth`
//! writes with gaps between them instead of a steady queue.
//!
//! [`CacheInner::background_pass`] issues a pass, then, while its writes complete, starts the
//! next pass as soon as half the queue is free and the clean buffers (counting the pages in
//! flight as clean) are under the flush start threshold again. It ends, draining what is in
//! flight, once there is no such demand, after [`MAX_CONTINUED_PASSES`], or as soon as another
//! caller waits for the flush lock ([`CacheInner::lock_flush`]), so that a stalled session or
//! the checkpoint is never held behind a long stretch of background writes.
//!
//! What stays (`docs/design.md`, "Write-back"): every page has at most one write in flight (a
//! later pass never puts a frame whose write is in flight into a run: `Frame::writing`), the
//! write protocol and the coalescing are the passes' own, and when the background pass returns
//! no write of it is in flight.

use std::sync::atomic::Ordering;

use parking_lot::MutexGuard;

use super::{CacheInner, FlushState};
use crate::error::Result;

/// The most passes one background pass chains before it drains and lets the flusher look at
/// its signal again (a bound, not a rhythm: demand usually ends a chain sooner).
pub(super) const MAX_CONTINUED_PASSES: u32 = 256;

impl CacheInner {
    /// Takes the flush lock for a caller other than the background flusher, which yields to
    /// it (see the module header).
    pub(super) fn lock_flush(&self) -> MutexGuard<'_, FlushState> {
        self.flush_waiters.fetch_add(1, Ordering::AcqRel);
        let guard = self.flush_lock.lock();
        self.flush_waiters.fetch_sub(1, Ordering::AcqRel);
        guard
    }

    /// The background flusher's pass: see the module header. Like a flush pass, it returns
    /// only once every write it issued completed (or failed); the first error is returned.
    pub(super) fn background_pass(&self, state: &mut FlushState, clean_goal: usize) -> Result<()> {
        self.check_poisoned()?;
        let start = self.config.flush_start_clean_pages();
        let stop = self.config.flush_stop_clean_pages();
        let mut result = self.issue_pass(state, clean_goal, None);
        let mut passes = 1u32;
        // A pass was just issued: reap before another, so that a pass that found nothing to
        // write (every candidate in flight or latched) never spins.
        let mut just_issued = true;
        while result.is_ok() {
            let Some((in_flight, depth)) = state.queue.as_ref().map(|q| (q.in_flight(), q.depth()))
            else {
                break;
            };
            if in_flight == 0 {
                break;
            }
            let demand = !just_issued
                && depth > 1
                && in_flight <= depth / 2
                && passes < MAX_CONTINUED_PASSES
                && self.flush_waiters.load(Ordering::Acquire) == 0
                && !self.poisoned.load(Ordering::Acquire)
                && self.clean_pages() + state.in_flight_pages < start;
            if demand {
                passes += 1;
                just_issued = true;
                result = self.issue_pass(state, stop, None);
                continue;
            }
            just_issued = false;
            result = self.reap(state, true);
        }
        let drained = self.drain(state);
        result.and(drained)
    }
}
