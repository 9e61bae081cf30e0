//! Test-only fault points: a panic injected where a real bug could panic, so the tests of the
//! `jetproof` binary can check that a panic anywhere stops the whole process (issue 34).
//!
//! Honoured only in debug builds (the ones `cargo test` runs): `JETPROOF_TEST_PANIC=PLACE` makes
//! [`panic_point`]`(PLACE)` panic. A release build ignores the variable. Places: `main` (the
//! measured window's sampling loop, on the main thread), `session` (a session thread, a second
//! after it starts), `init` (a fill thread, as it starts a database), `checksum` (a reader, as it
//! starts a database) and `recover` (the main thread, as the replay starts).

/// The variable naming the place to panic at (debug builds only).
pub const PANIC_VARIABLE: &str = "JETPROOF_TEST_PANIC";

/// Panics when this is a debug build and [`PANIC_VARIABLE`] is `place`.
pub fn panic_point(place: &str) {
    #[cfg(debug_assertions)]
    {
        static ASKED: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
        let asked = ASKED.get_or_init(|| std::env::var(PANIC_VARIABLE).ok());
        if asked.as_deref() == Some(place) {
            panic!("test panic injected at `{place}` ({PANIC_VARIABLE})");
        }
    }
    #[cfg(not(debug_assertions))]
    let _ = place;
}
