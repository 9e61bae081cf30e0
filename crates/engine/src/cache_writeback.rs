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
//! It waits for half the queue at a time ([`jetproof_io::WriteQueue::reap_down_to`]: the writer
//! threads wake it once, when that many writes are done), never for one write at a time: the
//! first version of this loop reaped one completion per wake-up and cost the std engine more
//! CPU per I/O than the drain it replaced (`bench/results/2026-11-27-ceiling-continued.md`).
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
        // A pass was just issued: it is not followed at once by another, so that a pass that
        // found nothing to write (every candidate in flight or latched) never spins.
        let mut just_issued = true;
        while result.is_ok() {
            let Some((in_flight, depth)) = state.queue.as_ref().map(|q| (q.in_flight(), q.depth()))
            else {
                break;
            };
            let half = depth / 2;
            if in_flight == 0 || depth < 2 {
                break;
            }
            if in_flight > half {
                // One wake-up (writer threads) for half the queue, not one per write.
                just_issued = false;
                result = self.reap_down_to(state, half);
                continue;
            }
            let demand = !just_issued
                && passes < MAX_CONTINUED_PASSES
                && self.flush_waiters.load(Ordering::Acquire) == 0
                && !self.poisoned.load(Ordering::Acquire)
                && self.clean_pages() + state.in_flight_pages < start;
            if !demand {
                break;
            }
            passes += 1;
            just_issued = true;
            result = self.issue_pass(state, stop, None);
        }
        let drained = self.drain(state);
        result.and(drained)
    }

    /// Waits until at most `target` writes are in flight and processes the completions.
    fn reap_down_to(&self, state: &mut FlushState, target: usize) -> Result<()> {
        let Some(queue) = state.queue.as_mut() else {
            return Ok(());
        };
        let mut done = Vec::new();
        queue.reap_down_to(target, &mut done);
        self.complete(state, done)
    }
}
