//! The pace estimator: a paced instance's transactional I/Os per transaction, from its running
//! counts, so its pacer can be set to the transaction rate that meets its share of the target.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How often the pacing controller re-estimates I/Os per transaction.
pub(super) const CONTROL_TICK: Duration = Duration::from_millis(500);

/// How far back the controller's estimate of I/Os per transaction reaches: database writes come
/// in flushes seconds apart (checkpoint passes, depth flushes), so a shorter window sees either
/// none or a burst.
pub(super) const CONTROL_HORIZON: Duration = Duration::from_secs(30);

/// Transactions an estimate of I/Os per transaction needs; fewer are too noisy.
pub(super) const CONTROL_MIN_TRANSACTIONS: u64 = 20;

/// The controller aims this much above each instance's share of the target: the achieved rate
/// wanders around the aim (the I/Os a transaction costs vary, writes come in flushes), and a
/// storage that keeps up must not fail the target by the controller's own noise.
pub const PACE_HEADROOM: f64 = 1.03;

/// Estimates an instance's transactional I/Os per transaction from its running counts: the
/// I/Os over the transactions between the oldest and the newest observation, the oldest kept
/// at least `CONTROL_HORIZON` back once the history is that long (a ratio of sums over the
/// window, so bursts of writes weigh by their size, not by how many ticks they fall in).
///
/// Until 2026-11-23 each estimate covered only the last tick (half a second) and the pacer's
/// rate moved halfway to `target / estimate` each time. Database writes come in flushes seconds
/// apart, so most ticks saw reads only and the few with a flush saw many writes: the rate swung
/// high, then low, and the mean of `1 / estimate` exceeds `1 / mean`, so the achieved rate ran
/// above the target (392 transactional IOPS for a target of 300 with 256 MiB caches, where reads
/// alone nearly met the target; `docs/faithfulness.md`).
#[derive(Debug, Default)]
pub struct PaceEstimator {
    /// (when, transactions, transactional I/Os) so far, oldest first.
    history: VecDeque<(Instant, u64, u64)>,
}

impl PaceEstimator {
    /// Records the counts at `now` (at most once per `CONTROL_TICK`) and returns the estimate
    /// of I/Os per transaction when the window holds enough transactions for one.
    pub fn observe(&mut self, now: Instant, transactions: u64, ios: u64) -> Option<f64> {
        if let Some(&(last, _, _)) = self.history.back()
            && now.saturating_duration_since(last) < CONTROL_TICK
        {
            return None;
        }
        self.history.push_back((now, transactions, ios));
        while self
            .history
            .get(1)
            .is_some_and(|&(at, _, _)| now.saturating_duration_since(at) >= CONTROL_HORIZON)
        {
            self.history.pop_front();
        }
        let &(_, first_tx, first_ios) = self.history.front()?;
        let tx = transactions.saturating_sub(first_tx);
        if tx < CONTROL_MIN_TRANSACTIONS {
            return None;
        }
        Some((ios.saturating_sub(first_ios) as f64 / tx as f64).max(0.05))
    }

    /// How long the window of the estimate spans.
    pub fn span(&self) -> Duration {
        match (self.history.front(), self.history.back()) {
            (Some(first), Some(last)) => last.0.saturating_duration_since(first.0),
            _ => Duration::ZERO,
        }
    }

    /// Forgets every observation (the caches are warm: what was counted while they filled no
    /// longer applies).
    pub fn clear(&mut self) {
        self.history.clear();
    }
}
