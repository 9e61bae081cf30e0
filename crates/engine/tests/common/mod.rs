//! Helpers shared by the engine's integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use jetproof_engine::DatabaseOptions;
use jetproof_io::IoBackend;
use jetproof_io::mem::MemBackend;

/// The seed of a randomized test: `JETPROOF_SEED` if set, else a fresh one. Printed, so that a
/// failure can be replayed with `JETPROOF_SEED=<seed> cargo nextest run ...`.
#[allow(unused_imports)] // each test binary uses only some of these
pub use jetproof_test_support::announced_seed as seed;

/// Small options for tests: a file of 64 pages grown by 32, a cache of 16 to `cache_pages`
/// pages, inline flushing, no direct I/O (`jetproof_test_support::engine::small_options`).
pub fn small_options(page_size: usize, cache_pages: u64) -> DatabaseOptions {
    jetproof_test_support::engine::small_options(page_size, 64, 32, 16, cache_pages)
}

pub fn mem() -> (Arc<MemBackend>, &'static Path) {
    (MemBackend::new(), Path::new("/data/db0.jpdb"))
}

pub fn backend_ref(b: &Arc<MemBackend>) -> &dyn IoBackend {
    b.as_ref()
}
