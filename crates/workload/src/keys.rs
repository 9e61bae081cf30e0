//! The record key layout: `mailbox (u32, big-endian) ‖ item (u32, big-endian)`.
//!
//! Why this shape: a mail database's inserts go to many mailboxes at once, so they dirty pages
//! all over the tree; keys that grow at one end would turn every insert into an append to the
//! same leaf and hide most of the write load. Big-endian makes byte order equal numeric order, so
//! each mailbox's items are contiguous and sorted, and a database can be filled in key order
//! (mailbox by mailbox) with the engine's bulk loader.

/// Length of every record key.
pub const KEY_LEN: usize = 8;

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MailKey {
    pub mailbox: u32,
    pub item: u32,
}

impl MailKey {
    pub fn new(mailbox: u32, item: u32) -> MailKey {
        MailKey { mailbox, item }
    }

    pub fn encode(self) -> [u8; KEY_LEN] {
        let mut key = [0u8; KEY_LEN];
        key[..4].copy_from_slice(&self.mailbox.to_be_bytes());
        key[4..].copy_from_slice(&self.item.to_be_bytes());
        key
    }

    /// Decodes a key; None if it is not a mail key (wrong length).
    pub fn decode(key: &[u8]) -> Option<MailKey> {
        let mailbox = u32::from_be_bytes(key.get(..4)?.try_into().ok()?);
        let item = u32::from_be_bytes(key.get(4..8)?.try_into().ok()?);
        (key.len() == KEY_LEN).then_some(MailKey { mailbox, item })
    }
}

/// Decides, while a database is being filled in key order, how many items each mailbox gets so
/// that the file ends at its target size. The bytes a record costs in the file (record, node
/// overhead, leaf fill) are only known once some are written, so the plan re-estimates before
/// every mailbox from what the file has grown so far; the last mailbox takes whatever is left.
///
/// Mailboxes differ in size, as real ones do: mailbox `m`'s share of what is left is
/// [`mailbox_share`]`(m)` over the shares of the mailboxes still to fill, between 0.75 and 1.25
/// of the average. With equal shares every mailbox's leaves came to within a few pages of the
/// same count, so the free rest `init` leaves in each mailbox's last owned extent was nearly the
/// same for all, and a run's first splits found either all of them roomy or all of them full: a
/// start-up transient of the file's growth (issue 23, `docs/faithfulness.md`, "Growth per
/// Jetstress batch"). Unequal sizes spread the rests evenly, as in a database that has run.
#[derive(Debug, Clone)]
pub struct FillPlan {
    /// Sum of the shares of the mailboxes not yet begun and the current one.
    shares_left: f64,
    mailboxes: u32,
    target_bytes: u64,
    start_bytes: u64,
    records: u64,
    mailbox: u32,
    item: u32,
    quota: u32,
    first_guess_bytes_per_record: u64,
}

impl FillPlan {
    /// `start_bytes`: the file's size before the first record (headers, empty root).
    /// `guess_bytes_per_record`: a first estimate (record size plus overhead).
    pub fn new(
        mailboxes: u32,
        target_bytes: u64,
        start_bytes: u64,
        guess_bytes_per_record: u64,
    ) -> FillPlan {
        let mailboxes = mailboxes.max(1);
        let mut plan = FillPlan {
            shares_left: (0..mailboxes).map(mailbox_share).sum(),
            mailboxes,
            target_bytes,
            start_bytes,
            records: 0,
            mailbox: 0,
            item: 0,
            quota: 0,
            first_guess_bytes_per_record: guess_bytes_per_record.max(1),
        };
        plan.quota = plan.quota_for_next_mailbox(start_bytes);
        plan
    }

    fn quota_for_next_mailbox(&self, current_bytes: u64) -> u32 {
        let per_record = if self.records == 0 || current_bytes <= self.start_bytes {
            self.first_guess_bytes_per_record
        } else {
            ((current_bytes - self.start_bytes) / self.records).max(1)
        };
        let remaining_bytes = self.target_bytes.saturating_sub(current_bytes);
        let share = mailbox_share(self.mailbox) / self.shares_left.max(f64::MIN_POSITIVE);
        let quota = (remaining_bytes / per_record) as f64 * share.min(1.0);
        u32::try_from((quota as u64).max(1)).unwrap_or(u32::MAX)
    }

    /// The key of the next record, given the file's current size; None once the file has reached
    /// its target.
    pub fn next(&mut self, current_bytes: u64) -> Option<MailKey> {
        if current_bytes >= self.target_bytes {
            return None;
        }
        let last_mailbox = self.mailbox + 1 >= self.mailboxes;
        if self.item >= self.quota && !last_mailbox {
            self.shares_left -= mailbox_share(self.mailbox);
            self.mailbox += 1;
            self.item = 0;
            self.quota = self.quota_for_next_mailbox(current_bytes);
        }
        let key = MailKey::new(self.mailbox, self.item);
        self.item = self.item.checked_add(1)?;
        self.records += 1;
        Some(key)
    }

    pub fn records(&self) -> u64 {
        self.records
    }
}

/// Mailbox `m`'s size relative to the average, 0.75 to 1.25: the fractional parts of
/// `(m + 1) × 0.618…` (the golden ratio's), which spread evenly over any run of mailboxes, so
/// every stretch of the key space averages 1 and the sizes do not depend on a seed.
pub fn mailbox_share(mailbox: u32) -> f64 {
    const GOLDEN: f64 = 0.618_033_988_749_894_9;
    let fraction = ((f64::from(mailbox) + 1.0) * GOLDEN).fract();
    0.75 + 0.5 * fraction
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_by_mailbox_then_item() {
        let a = MailKey::new(1, 500).encode();
        let b = MailKey::new(2, 0).encode();
        let c = MailKey::new(2, 1).encode();
        assert!(a < b && b < c);
        assert_eq!(MailKey::decode(&c), Some(MailKey::new(2, 1)));
        assert_eq!(MailKey::decode(&c[..7]), None);
    }

    /// A simulated file that costs 3,000 bytes per record, while the plan first guesses 1,000:
    /// the plan must still spread records over every mailbox and stop at the target.
    #[test]
    fn fill_plan_spreads_over_all_mailboxes_and_hits_the_target() {
        let target = 10_000_000u64;
        let mut plan = FillPlan::new(50, target, 65_536, 1_000);
        let mut size = 65_536u64;
        let mut per_mailbox = vec![0u32; 50];
        let mut previous = None;
        while let Some(key) = plan.next(size) {
            if let Some(p) = previous {
                assert!(key > p, "keys must come in order: {p:?} then {key:?}");
            }
            previous = Some(key);
            per_mailbox[key.mailbox as usize] += 1;
            size += 3_000;
        }
        assert!(size >= target && size < target + 3_000);
        assert!(per_mailbox.iter().all(|&n| n > 0), "{per_mailbox:?}");
        // After the first mailbox the plan has learned the real cost: each of the rest gets
        // its share of the average (0.75 to 1.25 of it), within an item or two.
        let rest: u32 = per_mailbox[1..].iter().sum();
        let shares: f64 = (1..50).map(mailbox_share).sum();
        for (m, &n) in per_mailbox.iter().enumerate().take(49).skip(1) {
            let want = f64::from(rest) * mailbox_share(m as u32) / shares;
            assert!(
                (f64::from(n) - want).abs() <= 0.02 * want + 2.0,
                "mailbox {m}: {n} items, its share is {want:.1}: {per_mailbox:?}"
            );
        }
        let (min, max) = (
            per_mailbox[1..49].iter().min().copied().unwrap_or(0),
            per_mailbox[1..49].iter().max().copied().unwrap_or(0),
        );
        assert!(
            f64::from(max) > 1.3 * f64::from(min),
            "mailboxes differ in size: {per_mailbox:?}"
        );
    }

    /// The shares average 1 over any stretch of mailboxes and stay within 0.75 – 1.25.
    #[test]
    fn mailbox_shares_average_one_and_stay_in_range() {
        for start in [0u32, 17, 1000] {
            let shares: Vec<f64> = (start..start + 200).map(mailbox_share).collect();
            assert!(
                shares.iter().all(|s| (0.75..=1.25).contains(s)),
                "{shares:?}"
            );
            let mean = shares.iter().sum::<f64>() / shares.len() as f64;
            assert!((mean - 1.0).abs() < 0.01, "start {start}: mean {mean}");
        }
    }
}
