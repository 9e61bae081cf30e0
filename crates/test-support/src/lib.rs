//! Dev-only helpers shared by jetproof's tests (a `[dev-dependencies]` entry only):
//! * the seed of a randomised test ([`announced_seed`], [`seed_or`]): every randomised test takes
//!   its seed from `JETPROOF_SEED` when set, so a failure replays, and names the seed in its
//!   failure messages;
//! * a small job's text ([`job::SmallJob`]): N databases of a size, in a directory, as the CLI's,
//!   the procedures' and the instance's tests build them;
//! * small engine options (`engine::small_options`, feature `engine`) and small instance
//!   options (`instance::small_options`, feature `instance`).

#[cfg(feature = "engine")]
pub mod engine;
#[cfg(feature = "instance")]
pub mod instance;
pub mod job;

/// `JETPROOF_SEED` if set, else the clock's nanoseconds (`fallback` if the clock reads before
/// 1970).
pub fn seed_or_clock(fallback: u64) -> u64 {
    from_env().unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(fallback, |d| d.as_nanos() as u64)
    })
}

/// [`seed_or_clock`], printed on stderr with how to replay it:
/// `TEST: seed N (replay with JETPROOF_SEED=N)`.
pub fn announced_seed(test: &str) -> u64 {
    let seed = seed_or_clock(1);
    eprintln!("{test}: seed {seed} (replay with JETPROOF_SEED={seed})");
    seed
}

/// `JETPROOF_SEED` if set, else `default`: for tests whose default run is fixed.
pub fn seed_or(default: u64) -> u64 {
    from_env().unwrap_or(default)
}

fn from_env() -> Option<u64> {
    std::env::var("JETPROOF_SEED").ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests of this crate share the process environment: one test sets and clears it.
    #[test]
    fn the_environment_wins_over_the_defaults() {
        // SAFETY: no other thread of this test binary reads or writes the environment.
        unsafe { std::env::set_var("JETPROOF_SEED", "424242") };
        assert_eq!(seed_or(7), 424242);
        assert_eq!(seed_or_clock(7), 424242);
        assert_eq!(announced_seed("t"), 424242);
        unsafe { std::env::remove_var("JETPROOF_SEED") };
        assert_eq!(seed_or(7), 7);
        assert_ne!(seed_or_clock(7), seed_or_clock(7).wrapping_add(1));
    }
}
