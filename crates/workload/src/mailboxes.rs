//! Which items each mailbox holds, found from the data itself at the start of a run, and
//! handed out to sessions while it runs.
//!
//! Each mailbox holds a range of item numbers `[first, next)`; deletes, replaces and reads pick an
//! item uniformly in the range. An insert first takes back the item number of the mailbox's most
//! recent committed delete, if one is waiting, and otherwise `next` (an atomic counter, so two
//! sessions never insert the same key): the new record lands in the leaf the delete freed room in,
//! so freed space is reused at once, as the reference reports' growth (about the net of inserts
//! and deletes) and their I/O shape (random deletes, inserts coalesced in cached leaves) together
//! require (`docs/faithfulness.md`, "Where inserts go against deletes"). A hole not yet taken back
//! is read or deleted like any key (the same walk to the leaf) and counted as a miss. The ranges
//! are not stored anywhere: they are found by binary search over the tree at attach time, which
//! also warms the upper levels of the tree in the cache; the freed numbers live only in memory
//! (a run starts with none).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use rand::Rng;

use crate::keys::MailKey;
use crate::store::{Store, StoreError};

#[derive(Debug)]
pub struct Mailboxes {
    first: Vec<AtomicU32>,
    next: Vec<AtomicU32>,
    /// Per mailbox, item numbers whose delete committed and that no insert has taken back yet,
    /// most recent last (at most [`FREED_PER_MAILBOX`]).
    freed: Vec<Mutex<Vec<u32>>>,
}

/// How many freed item numbers a mailbox remembers. Inserts outnumber deletes in every mix the
/// job accepts, so the list stays short; the bound only keeps memory flat under a mix that
/// deletes more than it inserts (the oldest numbers are then forgotten and stay holes).
pub const FREED_PER_MAILBOX: usize = 32;

impl Mailboxes {
    /// Finds the item range of every mailbox `0..count` in `store`.
    pub fn discover(store: &dyn Store, count: u32) -> Result<Mailboxes, StoreError> {
        let mut first = Vec::with_capacity(count as usize);
        let mut next = Vec::with_capacity(count as usize);
        for mailbox in 0..count {
            let lowest = match store.first_at_or_after(&MailKey::new(mailbox, 0).encode())? {
                Some(key) => match MailKey::decode(&key) {
                    Some(k) if k.mailbox == mailbox => Some(k.item),
                    _ => None,
                },
                None => None,
            };
            let (lo, hi) = match lowest {
                None => (0, 0),
                Some(lowest) => (lowest, highest_item(store, mailbox, lowest)? + 1),
            };
            first.push(AtomicU32::new(lo));
            next.push(AtomicU32::new(hi));
        }
        let freed = (0..count).map(|_| Mutex::new(Vec::new())).collect();
        Ok(Mailboxes { first, next, freed })
    }

    pub fn count(&self) -> u32 {
        self.first.len() as u32
    }

    /// Items in the mailbox's range (holes included).
    pub fn span(&self, mailbox: u32) -> u32 {
        let (first, next) = self.range(mailbox);
        next.saturating_sub(first)
    }

    fn range(&self, mailbox: u32) -> (u32, u32) {
        let index = mailbox as usize;
        match (self.first.get(index), self.next.get(index)) {
            (Some(f), Some(n)) => (f.load(Ordering::Relaxed), n.load(Ordering::Relaxed)),
            _ => (0, 0),
        }
    }

    /// A key for a new item of `mailbox`: the item number its most recent committed delete
    /// freed, if one is waiting, else the next number; None if the mailbox's item numbers are
    /// exhausted.
    pub fn new_item(&self, mailbox: u32) -> Option<MailKey> {
        if let Some(item) = self
            .freed
            .get(mailbox as usize)
            .and_then(|freed| freed.lock().ok()?.pop())
        {
            return Some(MailKey::new(mailbox, item));
        }
        let next = self.next.get(mailbox as usize)?;
        let item = next
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_add(1))
            .ok()?;
        Some(MailKey::new(mailbox, item))
    }

    /// Hands back the item number of a deleted record, once its delete has committed, for a
    /// later insert into the same mailbox to take (and so land in the leaf the delete freed room
    /// in). Keys outside the mailboxes are ignored.
    pub fn freed(&self, key: MailKey) {
        if let Some(Ok(mut freed)) = self.freed.get(key.mailbox as usize).map(Mutex::lock) {
            if freed.len() >= FREED_PER_MAILBOX {
                freed.remove(0);
            }
            freed.push(key.item);
        }
    }

    /// A key of an existing (or deleted) item of `mailbox`, uniformly; None if it never had any.
    pub fn existing_item(&self, mailbox: u32, rng: &mut impl Rng) -> Option<MailKey> {
        let (first, next) = self.range(mailbox);
        (next > first).then(|| MailKey::new(mailbox, rng.random_range(first..next)))
    }
}

/// The largest item number of `mailbox`, knowing `lowest` exists: binary search for the last
/// item number whose successor set in the mailbox is non-empty.
fn highest_item(store: &dyn Store, mailbox: u32, lowest: u32) -> Result<u32, StoreError> {
    let mut known = lowest; // an item at or above which something exists
    let mut beyond = u64::from(u32::MAX) + 1; // nothing exists at or above this
    while u64::from(known) + 1 < beyond {
        let mid = ((u64::from(known) + beyond) / 2) as u32;
        let found = store
            .first_at_or_after(&MailKey::new(mailbox, mid).encode())?
            .and_then(|key| MailKey::decode(&key))
            .filter(|k| k.mailbox == mailbox);
        match found {
            Some(k) => known = k.item,
            None => beyond = u64::from(mid),
        }
    }
    Ok(known)
}
