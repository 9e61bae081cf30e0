//! The pages a replay visited, as it first found them on disk, and the one check over them that
//! the log did not lose a change they carry (`docs/log.md`, "The log's end is proved";
//! `docs/design.md`, "Recovery").
//!
//! Why it holds: a page reaches the disk only after the log is durable past its log position
//! (the write-ahead gate), and every change a page carries was logged with its update stamp. So a
//! page the replay reads whose log position (header offset 48) is at or past the end of the log
//! found, or whose update stamp is above the highest stamp of any record in the found log and at
//! or above the checkpoint's engine stamp (every page written before the checkpoint carries a
//! lower one), was written after records that are no longer in the log: the log lost them.
//!
//! Only the pages the replay reads are checked (the pages its records name): reading every page
//! of the database would make a soft recovery's time that of a full scan. A lost change on a page
//! no surviving record names is not seen here.
//!
//! Memory: an entry is kept only while it could still be flagged. Once the replay has passed a
//! page's log position and redone a record with a stamp at or above the page's, no end and no
//! stamp the rest of the log can give will flag it, so such entries are dropped as the replay
//! goes (`VisitedPages::settle`).
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use jetproof_engine::page;
use jetproof_log::Lsn;

/// Pages listed in a lost-log report, at most (the count says how many there were).
pub const LISTED_PAGES: usize = 20;

/// Entries kept before the replay prunes those that can no longer be flagged.
const SETTLE_AT: usize = 4096;

/// One page as the replay first read it from disk.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Found {
    page: u32,
    update_stamp: u64,
    /// The packed log position of its last change ([`Lsn::to_u64`]; 0: never changed under a
    /// log).
    log_position: u64,
}

/// The pages a replay read from disk that could still carry a change past the log's end.
#[derive(Debug, Default)]
pub(crate) struct VisitedPages {
    found: Vec<Found>,
    /// Pages read from disk, in all.
    pub(crate) visited: u64,
}

/// The pages that carry a change the log does not hold, for the lost-log report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PagesAhead {
    /// The first [`LISTED_PAGES`] page numbers, ascending.
    pub listed: Vec<u32>,
    /// How many pages in all.
    pub count: u64,
}

impl VisitedPages {
    /// Records a page as it was on disk, before the replay changes it.
    pub(crate) fn record(&mut self, page: u32, bytes: &[u8]) {
        self.visited += 1;
        let update_stamp = page::update_stamp(bytes).unwrap_or(0);
        let log_position = page::log_position(bytes).unwrap_or(0);
        if update_stamp == 0 && log_position == 0 {
            return;
        }
        self.found.push(Found {
            page,
            update_stamp,
            log_position,
        });
    }

    /// Drops the entries the rest of the replay can no longer flag: the replay has redone a
    /// record at `position` (the log ends past it) and seen stamps up to `max_stamp`.
    pub(crate) fn settle(&mut self, position: Lsn, max_stamp: u64) {
        if self.found.len() < SETTLE_AT {
            return;
        }
        self.found.retain(|found| {
            found.update_stamp > max_stamp || Lsn::from_u64(found.log_position) > position
        });
    }

    /// **The check** (the one place it is made): the pages, as the replay first found them,
    /// whose log position is at or past `log_end`, or whose update stamp is above `max_stamp` (the
    /// highest of any record in the log found) while at or above `checkpoint_stamp` (the engine
    /// stamp stored with the checkpoint; 0, unknown, skips the stamp test).
    pub(crate) fn pages_ahead_of_the_log(
        &self,
        log_end: Lsn,
        max_stamp: u64,
        checkpoint_stamp: u64,
    ) -> PagesAhead {
        let mut pages: Vec<u32> = self
            .found
            .iter()
            .filter(|found| {
                let position_ahead =
                    found.log_position != 0 && Lsn::from_u64(found.log_position) >= log_end;
                let stamp_ahead = checkpoint_stamp != 0
                    && found.update_stamp > max_stamp
                    && found.update_stamp >= checkpoint_stamp;
                position_ahead || stamp_ahead
            })
            .map(|found| found.page)
            .collect();
        pages.sort_unstable();
        pages.dedup();
        PagesAhead {
            count: pages.len() as u64,
            listed: pages.into_iter().take(LISTED_PAGES).collect(),
        }
    }
}

impl std::fmt::Display for PagesAhead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list: Vec<String> = self.listed.iter().map(u32::to_string).collect();
        write!(f, "{}", list.join(", "))?;
        if self.count > self.listed.len() as u64 {
            write!(f, " and {} more", self.count - self.listed.len() as u64)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page_with(stamp: u64, position: Lsn) -> Vec<u8> {
        let mut bytes = vec![0u8; 4096];
        page::write_common(&mut bytes, 9, page::PageType::Leaf, stamp);
        page::put_u64(&mut bytes, page::OFFSET_LOG_POSITION, position.to_u64());
        bytes
    }

    #[test]
    fn pages_past_the_end_or_above_every_stamp_are_flagged_and_settled_ones_dropped() {
        let mut visited = VisitedPages::default();
        visited.record(3, &page_with(10, Lsn::new(2, 5000)));
        visited.record(4, &page_with(50, Lsn::new(2, 9000)));
        visited.record(5, &page_with(0, Lsn::ZERO));
        visited.record(6, &page_with(60, Lsn::new(1, 100)));
        // The log ends at 2:8000; stamps up to 40 replayed; the checkpoint's stamp is 20.
        let ahead = visited.pages_ahead_of_the_log(Lsn::new(2, 8000), 40, 20);
        assert_eq!(ahead.listed, vec![4, 6]);
        assert_eq!(ahead.count, 2);
        // Unknown checkpoint stamp: only the position test.
        let ahead = visited.pages_ahead_of_the_log(Lsn::new(2, 8000), 40, 0);
        assert_eq!(ahead.listed, vec![4]);
        // A page below the checkpoint's stamp is not flagged by its stamp.
        let ahead = visited.pages_ahead_of_the_log(Lsn::new(3, 0), 40, 70);
        assert!(ahead.listed.is_empty());
        // Settling keeps what may still be flagged.
        for page in 100..(SETTLE_AT as u32 + 100) {
            visited.record(page, &page_with(5, Lsn::new(1, 50)));
        }
        visited.settle(Lsn::new(2, 100), 30);
        assert_eq!(
            visited
                .found
                .iter()
                .map(|found| found.page)
                .collect::<Vec<_>>(),
            vec![3, 4, 6]
        );
        assert_eq!(
            PagesAhead {
                listed: vec![1, 2],
                count: 5
            }
            .to_string(),
            "1, 2 and 3 more"
        );
    }
}
