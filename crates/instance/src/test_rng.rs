//! The seeded generator of the crate's randomised unit tests: `JETPROOF_SEED` replays a run, and
//! each test names the seed in its failure messages.

/// The seed (`JETPROOF_SEED`, else `default`; made odd) and a xorshift generator started from it.
pub(crate) fn xorshift(default: u64) -> (u64, impl FnMut() -> u64) {
    let seed = jetproof_test_support::seed_or(default) | 1;
    let mut state = seed;
    let next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (seed, next)
}
