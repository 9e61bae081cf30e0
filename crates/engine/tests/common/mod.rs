//! Helpers shared by the engine's integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use jetproof_engine::DatabaseOptions;
use jetproof_io::IoBackend;
use jetproof_io::mem::MemBackend;

/// The seed of a randomized test: `JETPROOF_SEED` if set, else a fresh one. Printed, so that a
/// failure can be replayed with `JETPROOF_SEED=<seed> cargo nextest run ...`.
pub fn seed(test: &str) -> u64 {
    jetproof_test_support::announced_seed(test)
}

/// Small options for tests: small cache, inline flushing, no direct I/O.
pub fn small_options(page_size: usize, cache_pages: u64) -> DatabaseOptions {
    DatabaseOptions {
        page_size,
        initial_size_bytes: 64 * page_size as u64,
        extent_bytes: 32 * page_size as u64,
        cache_min_bytes: 16 * page_size as u64,
        cache_max_bytes: cache_pages * page_size as u64,
        direct_io: false,
        stats: None,
        flush_thread: false,
        accept_dirty: false,
        write_back_depth: jetproof_engine::cache::DEFAULT_WRITE_BACK_DEPTH,
    }
}

pub fn mem() -> (Arc<MemBackend>, &'static Path) {
    (MemBackend::new(), Path::new("/data/db0.jpdb"))
}

pub fn backend_ref(b: &Arc<MemBackend>) -> &dyn IoBackend {
    b.as_ref()
}
