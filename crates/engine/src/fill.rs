//! What the engine writes into the bytes of a page that hold nothing (issue 33): the space a
//! change frees in a node (a deleted record, a shrunk value, a split's or merge's rewrite), the
//! body of a page it frees, and the body of every free page it formats when the file grows.
//!
//! Without a [`PageContent`] (the default, and every engine unit test) those bytes are zeros, as
//! they always were. With one (`DatabaseOptions::content`; a run passes the job's content, see
//! `docs/design.md`, "Content and data reduction") they are its bytes, so a file that a run
//! changed or grew compresses and deduplicates as its records do instead of drifting towards
//! zeros.
//!
//! What the bytes are never matters to anything that reads the page: a node's free space is
//! `data_start - (80 + 2 * count)` by its framing, not by its bytes; a free page is free by its
//! space map bit and its type. So:
//! * the checksum covers them as every byte (a changed byte is still detected), and no check
//!   asks for zeros;
//! * the log never carries them: an image is logged before its free space is filled (the log
//!   leaves out the image's run of zeros, so its size is what it was), and redo rebuilds pages
//!   from records, leaving zeros in the free space of the pages it writes: a page recovery
//!   rebuilt differs from the one the crash lost only in bytes that hold nothing.
//!
//! Growth may also lay a share of its new pages down as long-value pages (attachments, sealed
//! and marked in use, as `init` lays them between the leaves at `workload.dedup_ratio` above 1):
//! [`PageContent::long_value_share`], in whole owned extents (`space::Space`'s growth).
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use crate::page::HEADER_SIZE;

/// The largest share of growth laid down as long-value pages (`jetproof_job`'s
/// `MAX_LONG_VALUE_SHARE`, as `init`'s): a larger share is taken as this.
pub const MAX_LONG_VALUE_SHARE: f64 = 0.9;

/// The bytes a database writes where its pages hold nothing (see the module). Called on the
/// sessions' path, under the page's exclusive latch: it must be cheap and must not block.
pub trait PageContent: Send + Sync + std::fmt::Debug {
    /// Fills `out`, the bytes at `offset..offset + out.len()` of page `page`.
    fn fill_free(&self, page: u32, offset: usize, out: &mut [u8]);

    /// The share of the pages the file grows by that are laid down as long-value pages (0 to
    /// 0.9; 0, the default: none).
    fn long_value_share(&self) -> f64 {
        0.0
    }

    /// Fills the body (everything after the page header) of long-value page `page`.
    fn fill_long_value(&self, page: u32, body: &mut [u8]) {
        self.fill_free(page, HEADER_SIZE, body);
    }
}

/// Fills `page[range]` (page number `number`) from `content`.
pub(crate) fn fill_range(
    page: &mut [u8],
    number: u32,
    range: std::ops::Range<usize>,
    content: &dyn PageContent,
) {
    let offset = range.start;
    if let Some(bytes) = page.get_mut(range) {
        content.fill_free(number, offset, bytes);
    }
}

/// The bytes of a node's free space that were not free in `before` (its free range before a
/// change, [`crate::node::free_range`]) and are in `after`: the slots the change dropped and the
/// records' bytes it gave up. At most two runs.
pub(crate) fn newly_free(
    before: std::ops::Range<usize>,
    after: std::ops::Range<usize>,
) -> [std::ops::Range<usize>; 2] {
    // The slot array shrank: its end moved down into what was slots.
    let slots = after.start..before.start.min(after.end).max(after.start);
    // The records' area shrank: its start moved up into what were records.
    let records = before.end.max(after.start).min(after.end)..after.end;
    [slots, records]
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn newly_free_bytes_are_those_the_change_gave_up() {
        // A delete: one slot (2 bytes) and a 100-byte record given up.
        let [slots, records] = newly_free(100..900, 98..1000);
        assert_eq!((slots, records), (98..100, 900..1000));
        // An insert: nothing freed.
        let [slots, records] = newly_free(100..900, 102..800);
        assert!(slots.is_empty() && records.is_empty());
        // A value shrunk in place: records only.
        let [slots, records] = newly_free(100..900, 100..950);
        assert!(slots.is_empty());
        assert_eq!(records, 900..950);
        // A rewrite that emptied the node.
        let [slots, records] = newly_free(300..400, 80..4096);
        assert_eq!((slots, records), (80..300, 400..4096));
    }
}
