//! The job's content where a run's pages hold nothing (issue 33): what each database's engine
//! writes into the space a change frees in a page, into the bodies of the free pages it formats
//! when the file grows, and, at `workload.dedup_ratio` above 1, into the long-value pages
//! (attachments) that growth lays down in `init`'s proportion (`docs/design.md`, "Content and
//! data reduction").
//!
//! Each database has its own content, seeded as `init` seeds it (the job's content seed and the
//! database's index among the job's instances), so no block of one database equals a block of
//! another; the attachments are drawn from the pool `init` drew from (the job's), so a run's
//! copies repeat `init`'s within a database and across databases.

use std::sync::Arc;

use jetproof_engine::PageContent;
use jetproof_job::Job;
use jetproof_workload::content::{Attachments, PositionedContent};

/// A database's content for the engine ([`jetproof_engine::DatabaseOptions::content`]).
#[derive(Debug)]
pub struct JobContent {
    free: PositionedContent,
    /// The share of growth's pages that are long values, and their attachments.
    long_values: Option<(f64, Attachments)>,
}

impl PageContent for JobContent {
    fn fill_free(&self, page: u32, offset: usize, out: &mut [u8]) {
        self.free.fill(u64::from(page), offset, out);
    }

    fn long_value_share(&self) -> f64 {
        self.long_values.as_ref().map_or(0.0, |(share, _)| *share)
    }

    fn fill_long_value(&self, page: u32, body: &mut [u8]) {
        match &self.long_values {
            Some((_, attachments)) => attachments.fill_page_at(u64::from(page), body),
            None => self
                .free
                .fill(u64::from(page), jetproof_engine::page::HEADER_SIZE, body),
        }
    }
}

/// The content of the job's database `index` (its place among `job.instances()`), as `init`
/// made it: the compression setting, the database's own seed, and at a dedup ratio above 1 the
/// long-value share and the job's attachment pool `init` sized.
pub fn database_content(job: &Job, index: usize) -> Arc<dyn PageContent> {
    let ratio = job.workload.compression_ratio;
    let seed = crate::init::content_seed(crate::init::CONTENT_SEED, index);
    let (share, pool) = long_value_layout(job);
    let long_values = (share > 0.0).then(|| {
        (
            share,
            Attachments::new(ratio, crate::init::CONTENT_SEED, seed, pool),
        )
    });
    Arc::new(JobContent {
        free: PositionedContent::new(ratio, seed),
        long_values,
    })
}

/// The share of each database's pages that are long values (attachments) at the job's dedup
/// ratio, and the number of attachments in the job's pool, as `init` lays them down and a run's
/// growth after it: (0, 0) at a dedup ratio of 1.
pub(crate) fn long_value_layout(job: &Job) -> (f64, u64) {
    let page_size = job.storage.page_size.bytes();
    let unit = job.workload.dedup_unit.bytes();
    let share = jetproof_job::long_value_share(job.workload.dedup_ratio, page_size, unit)
        .clamp(0.0, jetproof_job::MAX_LONG_VALUE_SHARE);
    if share <= 0.0 {
        return (0.0, 0);
    }
    let job_bytes = job.db_size().bytes() * job.instances().len() as u64;
    let job_pages = job_bytes as f64 / page_size as f64;
    (share, Attachments::pool_for(job_pages * share))
}
