//! Checked clock sums: a deadline is never a panic ("overflow when adding duration to instant",
//! issue 34). Job durations are bounded (`jetproof_job::MAX_SPAN`), so the fallback only keeps a
//! bug from becoming a panic.

use std::time::{Duration, Instant};

/// About 136 years: a deadline this far is never reached by a run.
const FAR: Duration = Duration::from_secs(u32::MAX as u64);

/// `at + by`, or, when that does not fit the clock, the farthest of `at` + 136 years and `at`
/// itself that does: a deadline never reached rather than a panic.
pub fn later(at: Instant, by: Duration) -> Instant {
    at.checked_add(by)
        .or_else(|| at.checked_add(FAR))
        .unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_impossible_deadline_is_far_not_a_panic() {
        let now = Instant::now();
        assert_eq!(
            later(now, Duration::from_secs(5)),
            now + Duration::from_secs(5)
        );
        let far = later(now, Duration::MAX);
        assert!(far > now + Duration::from_secs(100 * 365 * 24 * 3600));
    }
}
