//! Deferred before images: a replace's undo is kept in memory, and logged only if a page holding
//! the uncommitted change is about to be written (ESE's deferred undo info, `lrtypUndoInfo`,
//! "deferred before image": `ErrLGUndoInfo`, logged by the buffer manager when it flushes a page
//! whose versions' before images are not in the log).
//!
//! Why it is enough (`docs/log.md`, "Deferred before images"): a transaction's first replace of
//! a key is logged as a leaf replace marked [`crate::format::RecordUndo::OnPage`]. Recovery redoes it only if the page on disk is older than the change, and
//! then the page holds the key's value before it: that is the undo, taken from the page. The
//! page on disk can hold the change only if it was written after it; every such write passes
//! `DeferredUndo::before_write` first, which, while the transaction is open, logs the value as
//! an ordinary undo record before the write (the write-ahead gate then waits for it), and once
//! the transaction's end record is appended, makes the write wait for that record instead (a
//! transaction whose end is durable is never taken back). Either way recovery finds the value.
//!
//! The lock orders the two kinds of appends: `DeferredUndo::end` appends a transaction's end
//! record under it, and `before_write` appends undo records under it, so an undo record of a
//! transaction never follows its commit or rollback record in the log (recovery would take it
//! for a transaction still open).
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use jetproof_log::{Log, LogError, Lsn, Record};
use parking_lot::Mutex;

use crate::undo::{self, Prior};

/// One kept before image: the key's value before `transaction` first replaced it on the page.
#[derive(Debug)]
struct Deferral {
    transaction: u64,
    key: Vec<u8>,
    value: Vec<u8>,
}

#[derive(Debug, Default)]
struct Inner {
    /// By the page on which the replace was made (the page whose redo takes the undo).
    by_page: HashMap<u32, Vec<Deferral>>,
    /// Transactions with deferrals whose end record is appended, and where.
    ended: HashMap<u64, Lsn>,
}

/// The instance's kept before images (shared by the change hook, the write-ahead gate and the
/// sessions' commits and rollbacks).
#[derive(Debug, Default)]
pub(crate) struct DeferredUndo {
    inner: Mutex<Inner>,
    /// Deferrals held: the gate's fast path when there are none.
    held: AtomicUsize,
    /// Before images logged because their page was written while the transaction was open.
    logged: AtomicUsize,
}

impl DeferredUndo {
    /// Keeps `value`, the key's value before `transaction`'s replace logged on `page`. Called
    /// with the page latched, so no write of the page can copy the change before this.
    pub(crate) fn defer(&self, page: u32, transaction: u64, key: &[u8], value: Vec<u8>) {
        let mut inner = self.inner.lock();
        inner.by_page.entry(page).or_default().push(Deferral {
            transaction,
            key: key.to_vec(),
            value,
        });
        self.held.fetch_add(1, Ordering::Release);
    }

    /// Appends `transaction`'s end record (commit or rollback) with `append`, ordered against
    /// the gate's undo records. `has_deferrals`: the caller knows the transaction kept none
    /// (then nothing is locked).
    pub(crate) fn end(
        &self,
        transaction: u64,
        has_deferrals: bool,
        append: impl FnOnce() -> Result<Lsn, LogError>,
    ) -> Result<Lsn, LogError> {
        if !has_deferrals {
            return append();
        }
        let mut inner = self.inner.lock();
        let end = append()?;
        // Its values may all have been logged by now (their pages were written): nothing to
        // wait for then.
        if inner
            .by_page
            .values()
            .any(|deferrals| deferrals.iter().any(|d| d.transaction == transaction))
        {
            inner.ended.insert(transaction, end);
        }
        Ok(end)
    }

    /// Before a write of `pages`: logs the kept before images of open transactions' replaces
    /// made on them, and returns the log position that must be durable before the write (the
    /// last of those records, or the end record of a transaction that has ended but whose end
    /// may not be durable yet), at least `needed`.
    pub(crate) fn before_write(
        &self,
        pages: &[u32],
        log: &Log,
        mut needed: u64,
    ) -> Result<u64, LogError> {
        if self.held.load(Ordering::Acquire) == 0 {
            return Ok(needed);
        }
        let mut inner = self.inner.lock();
        self.forget_durable(&mut inner, log);
        let Inner { by_page, ended } = &mut *inner;
        let mut buffer = Vec::new();
        for page in pages {
            let Some(deferrals) = by_page.remove(page) else {
                continue;
            };
            let mut kept = Vec::new();
            for deferral in deferrals {
                if let Some(end) = ended.get(&deferral.transaction) {
                    // Its end record is appended: the write waits for it, and then the
                    // transaction is never taken back. Kept until that record is durable.
                    needed = needed.max(end.to_u64());
                    kept.push(deferral);
                    continue;
                }
                let prior = Prior::Value(deferral.value);
                undo::encode_undo(&deferral.key, &prior, &mut buffer);
                let at = log.append(&Record {
                    record_type: undo::RECORD_UNDO,
                    transaction_id: deferral.transaction,
                    payload: &buffer,
                })?;
                needed = needed.max(at.to_u64());
                self.held.fetch_sub(1, Ordering::AcqRel);
                self.logged.fetch_add(1, Ordering::Relaxed);
            }
            if !kept.is_empty() {
                by_page.insert(*page, kept);
            }
        }
        Ok(needed)
    }

    /// Drops the deferrals of transactions whose end record is durable, from time to time (at
    /// every transaction end and page write that finds some held).
    pub(crate) fn tidy(&self, log: &Log) {
        if self.held.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut inner = self.inner.lock();
        self.forget_durable(&mut inner, log);
    }

    fn forget_durable(&self, inner: &mut Inner, log: &Log) {
        if inner.ended.is_empty() {
            return;
        }
        let durable: Vec<u64> = inner
            .ended
            .iter()
            .filter(|(_, end)| log.is_durable(**end))
            .map(|(&transaction, _)| transaction)
            .collect();
        if durable.is_empty() {
            return;
        }
        let mut dropped = 0usize;
        inner.by_page.retain(|_, deferrals| {
            let before = deferrals.len();
            deferrals.retain(|d| !durable.contains(&d.transaction));
            dropped += before - deferrals.len();
            !deferrals.is_empty()
        });
        for transaction in durable {
            inner.ended.remove(&transaction);
        }
        self.held.fetch_sub(dropped, Ordering::AcqRel);
    }

    /// Before images kept in memory right now.
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// Before images logged because their page was written while the transaction was open.
    pub(crate) fn logged(&self) -> usize {
        self.logged.load(Ordering::Relaxed)
    }
}
