//! Small instance options for tests.

use std::time::Duration;

use jetproof_instance::InstanceOptions;

/// The page size of [`small_options`].
pub const PAGE: usize = 4096;

/// A small instance for tests: 4 KiB pages, a file of `initial_pages` grown by 64 pages, a cache
/// of `cache_min_pages`..`cache_max_pages` (the rest as [`crate::engine::small_options`]), 64 KiB
/// log files with a 32 KiB buffer and 4 KiB sectors, lazy commits durable within 1 ms, a 20 MiB
/// checkpoint depth, log files kept, and no background checkpointer (tests call `checkpoint`
/// themselves). Tests change fields with `..`.
pub fn small_options(
    initial_pages: u64,
    cache_min_pages: u64,
    cache_max_pages: u64,
) -> InstanceOptions {
    InstanceOptions {
        database: crate::engine::small_options(
            PAGE,
            initial_pages,
            64,
            cache_min_pages,
            cache_max_pages,
        ),
        log_file_size_bytes: 64 << 10,
        log_buffer_size_bytes: 32 << 10,
        log_sector_size_bytes: 4096,
        lazy_flush_interval: Duration::from_millis(1),
        checkpoint_depth_bytes: 20 << 20,
        keep_files: true,
        circular: false,
        checkpoint_interval: None,
        checkpoint_write_interval: Duration::from_secs(1),
    }
}
