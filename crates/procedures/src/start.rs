//! `--start-at TIME`: the measured part of a test begins at TIME on the host's clock, so that
//! many hosts started at different moments (by Ansible, by hand) measure one shared window.
//!
//! The rule every procedure follows (`docs/many-servers.md`): everything that can happen before
//! the measured part does (attach, cache warm-up and auto-tune, replication reader start, log
//! generation, opening and checking files), then the procedure waits for TIME and starts its
//! measured part then. If the preparation is not done by TIME, the measured part still starts at
//! TIME (the preparation is cut short where it can be, and the result says `ready_at_start:
//! false`); where it cannot be cut (a procedure that must finish opening its files), it starts
//! as soon as it can and `start_skew_ms` shows how late.
//!
//! The clock is `SystemTime`, read afresh on every pass of the wait, so a clock stepped by NTP
//! while waiting moves the start with it, as it moves every other host's.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use jetproof_storage::{BadInput, bad};

/// The last stretch before the start is waited out in short sleeps, not one long one, so the
/// start is late by at most this (plus the scheduler's wake-up latency).
const FINE_STEP: Duration = Duration::from_millis(1);

/// Longest single sleep while waiting: the stop flag (Ctrl-C) and the caller's tick are looked at
/// this often.
const COARSE_STEP: Duration = Duration::from_millis(100);

/// How far ahead `--start-at` may be without `--force-start-at`: 7 days. A start further off is
/// almost always a typo (a year, `9999-12-31`) that would leave the databases attached and the
/// command waiting, silently, for as long (issue 34, point 6).
pub const MAX_START_AHEAD: Duration = Duration::from_secs(7 * 24 * 3600);

/// A start time is refused (bad input, before any I/O) when it is already past at launch (the
/// hosts would not share a window), or more than [`MAX_START_AHEAD`] ahead unless `force` (the
/// user's `--force-start-at`). Checked by the command before anything else.
pub fn check_start_at(at: SystemTime, force: bool) -> Result<(), BadInput> {
    let now = SystemTime::now();
    if !force
        && at
            .duration_since(now)
            .is_ok_and(|ahead| ahead > MAX_START_AHEAD)
    {
        let ahead_s = jetproof_results::clock::millis_between(now, at) / 1e3;
        return Err(bad(
            "--start-at",
            format!(
                "{} is {:.1} days ahead on this host's clock ({}), more than the {} days a start \
                 may be ahead; give a nearer time, or add --force-start-at to wait that long",
                jetproof_results::clock::rfc3339_millis(at),
                ahead_s / 86_400.0,
                jetproof_results::clock::rfc3339_millis(now),
                MAX_START_AHEAD.as_secs() / 86_400
            ),
        ));
    }
    check_not_past_at(at, now)
}

/// A start time already past at launch is refused.
fn check_not_past_at(at: SystemTime, now: SystemTime) -> Result<(), BadInput> {
    if at <= now {
        let late_ms = jetproof_results::clock::millis_between(at, now);
        return Err(bad(
            "--start-at",
            format!(
                "{} is {:.1} s in the past on this host's clock ({}); give a time far enough ahead \
                 for every host to attach and warm up: every run prints the lead it needed \
                 (\"Preparation took N s ... give --start-at at least M s ahead\"), e.g. \
                 --start-at \"$(date -u -d '+2 min' +%Y-%m-%dT%H:%M:%SZ)\"",
                jetproof_results::clock::rfc3339_millis(at),
                late_ms / 1e3,
                jetproof_results::clock::rfc3339_millis(now)
            ),
        ));
    }
    Ok(())
}

static LAUNCHED: OnceLock<Instant> = OnceLock::new();

/// When this process was launched (the CLI calls this first thing; otherwise the first call):
/// the preparation a `--start-at` must leave room for is counted from here, since the hosts'
/// commands are launched, not attached, at the moment their operator (or Ansible) starts them.
pub fn launched() -> Instant {
    *LAUNCHED.get_or_init(Instant::now)
}

/// The lead to give `--start-at` on a host whose preparation took `preparation`: half as much
/// again, plus 5 s, rounded up to whole seconds (the preparation varies from run to run with the
/// page cache and the other hosts' load; a short one still needs room for launch skew).
pub fn suggested_lead(preparation: Duration) -> u64 {
    (preparation.as_secs_f64() * 1.5 + 5.0).ceil() as u64
}

/// True once the host's clock has reached `at`.
pub fn reached(at: SystemTime) -> bool {
    SystemTime::now() >= at
}

/// Waits until the host's clock reaches `at`, calling `tick` about every 100 ms meanwhile (a
/// run keeps pacing its sessions while it waits). Returns the moment the wait ended, or None
/// when `stop` was set first.
pub fn wait_until(at: SystemTime, stop: &AtomicBool, mut tick: impl FnMut()) -> Option<SystemTime> {
    loop {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        let now = SystemTime::now();
        let Ok(left) = at.duration_since(now) else {
            return Some(now);
        };
        if left.is_zero() {
            return Some(now);
        }
        if left > COARSE_STEP + FINE_STEP {
            tick();
            std::thread::sleep(COARSE_STEP);
        } else if left > FINE_STEP * 2 {
            std::thread::sleep(left - FINE_STEP * 2);
        } else {
            std::thread::sleep(FINE_STEP.min(left) / 4);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_ends_at_the_time_within_a_few_milliseconds() {
        let stop = AtomicBool::new(false);
        let at = SystemTime::now() + Duration::from_millis(350);
        let mut ticks = 0;
        let ended = wait_until(at, &stop, || ticks += 1).expect("not stopped");
        let late = ended.duration_since(at).expect("never early");
        assert!(late < Duration::from_millis(20), "late by {late:?}");
        assert!(ticks >= 2, "ticked {ticks} times while waiting 350 ms");
    }

    #[test]
    fn a_stop_ends_the_wait_and_a_past_time_is_refused() {
        let stop = AtomicBool::new(true);
        let at = SystemTime::now() + Duration::from_secs(3600);
        assert_eq!(wait_until(at, &stop, || {}), None);
        let past = SystemTime::now() - Duration::from_secs(5);
        for force in [false, true] {
            let error = check_start_at(past, force).expect_err("past");
            assert_eq!(error.field, "--start-at");
            assert!(error.message.contains("in the past"), "{}", error.message);
            assert!(check_start_at(at, force).is_ok());
        }
    }

    #[test]
    fn a_start_more_than_7_days_ahead_needs_force() {
        let far = SystemTime::now() + MAX_START_AHEAD + Duration::from_secs(60);
        let error = check_start_at(far, false).expect_err("far");
        assert_eq!(error.field, "--start-at");
        assert!(
            error.message.contains("7 days") && error.message.contains("--force-start-at"),
            "{}",
            error.message
        );
        assert!(check_start_at(far, true).is_ok());
        let near = SystemTime::now() + MAX_START_AHEAD - Duration::from_secs(60);
        assert!(check_start_at(near, false).is_ok());
    }
}
