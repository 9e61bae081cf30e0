//! Small engine options for tests.

use jetproof_engine::DatabaseOptions;

/// Options for a small test database: pages of `page_size`, a file created with `initial_pages`,
/// grown by `extent_pages`, a cache of `cache_min_pages` to `cache_max_pages`; buffered I/O (runs
/// on any file system), no flush thread (the cache flushes inline), no I/O counters, a dirty
/// database refused, the default write-back depth. Tests change fields with `..`.
pub fn small_options(
    page_size: usize,
    initial_pages: u64,
    extent_pages: u64,
    cache_min_pages: u64,
    cache_max_pages: u64,
) -> DatabaseOptions {
    let page = page_size as u64;
    DatabaseOptions {
        page_size,
        initial_size_bytes: initial_pages * page,
        extent_bytes: extent_pages * page,
        cache_min_bytes: cache_min_pages * page,
        cache_max_bytes: cache_max_pages * page,
        direct_io: false,
        stats: None,
        flush_thread: false,
        accept_dirty: false,
        write_back_depth: jetproof_engine::cache::DEFAULT_WRITE_BACK_DEPTH,
        content: None,
    }
}
