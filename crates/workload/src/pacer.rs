//! Pacing: spreading an instance's transactions evenly in time to reach a target rate.
//!
//! Sessions ask the pacer for the *intended start* of their next transaction and sleep until
//! it. The rate is set from outside (the run's controller converts the transactional IOPS target
//! into transactions per second from the I/Os each transaction has been costing). When the
//! storage cannot keep up, intended starts fall behind the clock; the latency measured from the
//! intended start then shows the stall instead of hiding it (coordinated omission). The backlog
//! is capped at one second, so a long stall is followed by the target rate, not by a burst.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Backlog beyond which intended starts are reset to now.
const MAX_BACKLOG: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub struct Pacer {
    epoch: Instant,
    /// Nanoseconds between transactions; 0 = not paced (flat out).
    gap_ns: AtomicU64,
    /// Intended start of the next transaction, ns since `epoch`.
    next_ns: AtomicU64,
    /// Transactions whose intended start was dropped because of the backlog cap.
    dropped: AtomicU64,
}

impl Default for Pacer {
    fn default() -> Self {
        Pacer::new()
    }
}

impl Pacer {
    /// An unpaced pacer: `acquire` returns at once until a rate is set.
    pub fn new() -> Pacer {
        Pacer {
            epoch: Instant::now(),
            gap_ns: AtomicU64::new(0),
            next_ns: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Sets the rate in transactions per second (None or a non-positive rate: flat out).
    pub fn set_rate(&self, per_sec: Option<f64>) {
        let gap = match per_sec {
            Some(rate) if rate > 0.0 && rate.is_finite() => (1e9 / rate).max(1.0) as u64,
            _ => 0,
        };
        self.gap_ns.store(gap, Ordering::Relaxed);
    }

    /// Transactions per second in force, if paced.
    pub fn rate(&self) -> Option<f64> {
        let gap = self.gap_ns.load(Ordering::Relaxed);
        (gap > 0).then(|| 1e9 / gap as f64)
    }

    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64
    }

    /// Waits until this transaction's turn and returns its intended start. Unpaced: now.
    /// Returns early (with the intended start) if `stop` says so while waiting.
    pub fn acquire(&self, stop: &dyn Fn() -> bool) -> Instant {
        let gap = self.gap_ns.load(Ordering::Relaxed);
        let now = self.now_ns();
        if gap == 0 {
            return self.epoch + Duration::from_nanos(now);
        }
        let floor = now.saturating_sub(MAX_BACKLOG.as_nanos() as u64);
        let mut slot = self.next_ns.fetch_add(gap, Ordering::Relaxed);
        if slot < floor {
            // Too far behind: forget the backlog rather than burst to catch up.
            self.dropped.fetch_add(1, Ordering::Relaxed);
            self.next_ns.store(now + gap, Ordering::Relaxed);
            slot = now;
        }
        loop {
            let now = self.now_ns();
            if now >= slot || stop() {
                break;
            }
            std::thread::sleep(Duration::from_nanos((slot - now).min(50_000_000)));
        }
        self.epoch + Duration::from_nanos(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpaced_returns_at_once() {
        let pacer = Pacer::new();
        let start = Instant::now();
        for _ in 0..1000 {
            pacer.acquire(&|| false);
        }
        assert!(start.elapsed() < Duration::from_secs(1));
        assert_eq!(pacer.rate(), None);
    }

    #[test]
    fn intended_starts_are_evenly_spaced() {
        let pacer = Pacer::new();
        pacer.set_rate(Some(1000.0));
        let starts: Vec<Instant> = (0..50).map(|_| pacer.acquire(&|| false)).collect();
        for pair in starts.windows(2) {
            let gap = pair[1].duration_since(pair[0]);
            // Consecutive intended starts are exactly one gap apart unless the backlog was reset.
            assert_eq!(gap, Duration::from_millis(1), "{gap:?}");
        }
        assert!((pacer.rate().expect("paced") - 1000.0).abs() < 1e-6);
    }

    #[test]
    fn a_stall_shows_in_the_intended_start_but_does_not_burst() {
        let pacer = Pacer::new();
        pacer.set_rate(Some(100.0));
        pacer.acquire(&|| false);
        std::thread::sleep(Duration::from_millis(1200));
        // The next slot was due 10 ms after the first: over a second ago, past the cap.
        let intended = pacer.acquire(&|| false);
        assert!(intended.elapsed() < Duration::from_millis(100));
        assert_eq!(pacer.dropped(), 1);
    }
}
