//! A session: one thread issuing transactions of the mix against one database instance, as a
//! Jetstress thread does. Each transaction is one operation on one mailbox's items followed by a
//! commit, lazy or durable per the mix.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use rand::{Rng, SeedableRng};

use crate::content::Content;
use crate::keys::MailKey;
use crate::mailboxes::Mailboxes;
use crate::mix::{Mix, Operation};
use crate::pacer::Pacer;
use crate::store::{Store, StoreError};

/// Counts of what the sessions of one instance did.
#[derive(Debug, Default)]
pub struct LoadCounters {
    pub transactions: AtomicU64,
    pub inserts: AtomicU64,
    pub deletes: AtomicU64,
    pub replaces: AtomicU64,
    pub reads: AtomicU64,
    /// Reads, replaces and deletes that found no record (a hole left by a delete).
    pub misses: AtomicU64,
    pub lazy_commits: AtomicU64,
    pub durable_commits: AtomicU64,
    /// Sum of transaction latencies from the intended start, in ns.
    pub latency_ns_total: AtomicU64,
}

impl LoadCounters {
    pub fn transactions(&self) -> u64 {
        self.transactions.load(Ordering::Relaxed)
    }
}

/// Everything the sessions of one instance share.
pub struct InstanceLoad {
    pub store: Arc<dyn Store>,
    pub mailboxes: Arc<Mailboxes>,
    pub mix: Mix,
    pub record_size: usize,
    /// `workload.compression_ratio`: how far the values inserted and replaced compress.
    pub compression_ratio: f64,
    pub pacer: Arc<Pacer>,
    pub counters: Arc<LoadCounters>,
}

/// Runs transactions until `stop` is set. Returns the first storage error, which ends the
/// session (the caller stops the instance: STYLE.md, a failed I/O is never limped past).
/// `stop` is polled between transactions (and while waiting for the pacer).
pub fn run_session(
    load: &InstanceLoad,
    seed: u64,
    stop: &dyn Fn() -> bool,
) -> Result<(), StoreError> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    // Every value is new content of the job's setting (never a slice of one pool: slices of a
    // pool repeat within a page, which compressors find), made in one buffer reused by every
    // record of the session.
    let mut content = Content::new(load.compression_ratio, seed);
    let mut value = vec![0u8; load.record_size * 3 / 2 + 1];
    let mailbox_count = load.mailboxes.count().max(1);
    while !stop() {
        let intended = load.pacer.acquire(stop);
        if stop() {
            break;
        }
        // While paced, every I/O of this transaction is also measured from its intended start,
        // so time spent waiting behind a stalled device is not hidden.
        let _paced = load
            .pacer
            .rate()
            .map(|_| jetproof_io::meter::paced(intended));
        let mailbox = rng.random_range(0..mailbox_count);
        let operation = load.mix.operation(&mut rng);
        let counters = &load.counters;
        // The item a committed delete freed, handed back after the commit (so no insert takes
        // it while the delete can still roll back).
        let mut freed = None;
        let found = match operation {
            Operation::Insert => match load.mailboxes.new_item(mailbox) {
                Some(key) => {
                    let data = record(&mut rng, &mut content, &mut value, load.record_size);
                    counters.inserts.fetch_add(1, Ordering::Relaxed);
                    load.store.insert(&key.encode(), data)?
                }
                None => false,
            },
            Operation::Delete | Operation::Replace | Operation::Read => {
                let Some(key) = load.mailboxes.existing_item(mailbox, &mut rng) else {
                    continue;
                };
                let key = key.encode();
                match operation {
                    Operation::Delete => {
                        counters.deletes.fetch_add(1, Ordering::Relaxed);
                        let deleted = load.store.delete(&key)?;
                        if deleted {
                            freed = MailKey::decode(&key);
                        }
                        deleted
                    }
                    Operation::Replace => {
                        counters.replaces.fetch_add(1, Ordering::Relaxed);
                        let data = record(&mut rng, &mut content, &mut value, load.record_size);
                        load.store.replace(&key, data)?
                    }
                    _ => {
                        counters.reads.fetch_add(1, Ordering::Relaxed);
                        load.store.read(&key)?
                    }
                }
            }
        };
        if !found {
            counters.misses.fetch_add(1, Ordering::Relaxed);
        }
        let lazy = load.mix.lazy(&mut rng);
        load.store.commit(lazy)?;
        if let Some(key) = freed {
            load.mailboxes.freed(key);
        }
        if lazy {
            counters.lazy_commits.fetch_add(1, Ordering::Relaxed);
        } else {
            counters.durable_commits.fetch_add(1, Ordering::Relaxed);
        }
        counters.transactions.fetch_add(1, Ordering::Relaxed);
        let latency = Instant::now()
            .saturating_duration_since(intended)
            .as_nanos();
        counters
            .latency_ns_total
            .fetch_add(latency.min(u128::from(u64::MAX)) as u64, Ordering::Relaxed);
    }
    Ok(())
}

/// A record value of a size around the average (half to one and a half), made by `content`
/// into `buffer`.
fn record<'a>(
    rng: &mut impl Rng,
    content: &mut Content,
    buffer: &'a mut [u8],
    average: usize,
) -> &'a [u8] {
    let length = rng
        .random_range(average / 2..=average * 3 / 2)
        .min(buffer.len());
    let value = &mut buffer[..length];
    content.fill(value);
    value
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::mailboxes::FREED_PER_MAILBOX;
    use jetproof_job::Workload;

    /// The model store: a BTreeMap behind a mutex.
    #[derive(Default)]
    struct Model {
        records: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
        commits: AtomicU64,
    }

    impl Store for Model {
        fn insert(&self, key: &[u8], value: &[u8]) -> Result<bool, StoreError> {
            let mut r = self.records.lock().map_err(|_| "poisoned")?;
            if r.contains_key(key) {
                return Ok(false);
            }
            r.insert(key.to_vec(), value.to_vec());
            Ok(true)
        }
        fn replace(&self, key: &[u8], value: &[u8]) -> Result<bool, StoreError> {
            let mut r = self.records.lock().map_err(|_| "poisoned")?;
            Ok(r.get_mut(key).map(|v| *v = value.to_vec()).is_some())
        }
        fn delete(&self, key: &[u8]) -> Result<bool, StoreError> {
            Ok(self
                .records
                .lock()
                .map_err(|_| "poisoned")?
                .remove(key)
                .is_some())
        }
        fn read(&self, key: &[u8]) -> Result<bool, StoreError> {
            Ok(self
                .records
                .lock()
                .map_err(|_| "poisoned")?
                .contains_key(key))
        }
        fn first_at_or_after(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
            let r = self.records.lock().map_err(|_| "poisoned")?;
            Ok(r.range(key.to_vec()..).next().map(|(k, _)| k.clone()))
        }
        fn commit(&self, _lazy: bool) -> Result<(), StoreError> {
            self.commits.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }

    fn filled(mailboxes: u32, items: u32) -> Arc<Model> {
        let model = Arc::new(Model::default());
        for m in 0..mailboxes {
            for i in 0..items {
                model
                    .insert(&MailKey::new(m, i + 7).encode(), b"x")
                    .expect("insert");
            }
        }
        model
    }

    #[test]
    fn discovery_finds_every_mailbox_range() {
        let model = filled(5, 1000);
        // A mailbox with holes and a mailbox that is empty.
        model
            .delete(&MailKey::new(2, 500).encode())
            .expect("delete");
        let boxes = Mailboxes::discover(model.as_ref(), 7).expect("discover");
        for m in 0..5 {
            assert_eq!(boxes.span(m), 1000, "mailbox {m}");
        }
        assert_eq!(boxes.span(5), 0);
        assert_eq!(boxes.new_item(0), Some(MailKey::new(0, 1007)));
        assert_eq!(boxes.new_item(0), Some(MailKey::new(0, 1008)));
    }

    #[test]
    fn an_insert_takes_back_the_item_a_committed_delete_freed() {
        let model = filled(2, 100);
        let boxes = Mailboxes::discover(model.as_ref(), 2).expect("discover");
        boxes.freed(MailKey::new(1, 40));
        boxes.freed(MailKey::new(1, 60));
        // Another mailbox's inserts still go to its tail.
        assert_eq!(boxes.new_item(0), Some(MailKey::new(0, 107)));
        // Latest freed first, then the tail again.
        assert_eq!(boxes.new_item(1), Some(MailKey::new(1, 60)));
        assert_eq!(boxes.new_item(1), Some(MailKey::new(1, 40)));
        assert_eq!(boxes.new_item(1), Some(MailKey::new(1, 107)));
        // A mailbox remembers at most FREED_PER_MAILBOX numbers: the oldest are forgotten.
        let extra = FREED_PER_MAILBOX as u32 + 5;
        for item in 0..extra {
            boxes.freed(MailKey::new(0, 7 + item));
        }
        let taken: Vec<u32> = (0..FREED_PER_MAILBOX)
            .filter_map(|_| boxes.new_item(0).map(|k| k.item))
            .collect();
        let expected: Vec<u32> = (7 + extra - FREED_PER_MAILBOX as u32..7 + extra)
            .rev()
            .collect();
        assert_eq!(taken, expected);
        assert_eq!(boxes.new_item(0), Some(MailKey::new(0, 108)));
        // A key outside the mailboxes is ignored.
        boxes.freed(MailKey::new(9, 1));
        assert_eq!(boxes.span(0), 102);
    }

    #[test]
    fn sessions_run_the_mix_and_keep_keys_consistent() {
        let seed = 42;
        let model = filled(20, 200);
        let boxes = Arc::new(Mailboxes::discover(model.as_ref(), 20).expect("discover"));
        let load = InstanceLoad {
            store: model.clone(),
            mailboxes: boxes.clone(),
            mix: Mix::from_job(&Workload::default()),
            record_size: 100,
            compression_ratio: 1.0,
            pacer: Arc::new(Pacer::new()),
            counters: Arc::new(LoadCounters::default()),
        };
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            for session in 0..4 {
                let (load, stop) = (&load, &stop);
                scope.spawn(move || {
                    run_session(load, seed + session, &|| stop.load(Ordering::Relaxed))
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
            stop.store(true, Ordering::Relaxed);
        });
        let c = &load.counters;
        let tx = c.transactions();
        assert!(tx > 1000, "seed {seed}: only {tx} transactions");
        assert_eq!(model.commits.load(Ordering::Relaxed), tx, "seed {seed}");
        let share = |n: &AtomicU64| n.load(Ordering::Relaxed) as f64 * 100.0 / tx as f64;
        assert!((share(&c.inserts) - 40.0).abs() < 3.0, "seed {seed}");
        assert!((share(&c.reads) - 35.0).abs() < 3.0, "seed {seed}");
        // Every insert took a fresh key: the records are the initial ones plus inserts less
        // successful deletes.
        let deleted = c.deletes.load(Ordering::Relaxed);
        let records = model.records.lock().expect("lock").len() as u64;
        let misses = c.misses.load(Ordering::Relaxed);
        assert!(
            records + deleted >= 4000 + c.inserts.load(Ordering::Relaxed)
                && records + deleted <= 4000 + c.inserts.load(Ordering::Relaxed) + misses,
            "seed {seed}: {records} records, {deleted} deletes, {misses} misses"
        );
        // Inserts took back the items deletes freed: the holes left in the mailboxes' ranges
        // are only those freed since their mailbox's last insert, a small share of the deletes
        // (every delete would leave one if inserts always went to the tail).
        let removed = 4000 + c.inserts.load(Ordering::Relaxed) - records;
        let spans: u64 = (0..20).map(|m| u64::from(boxes.span(m))).sum();
        let holes = spans - records;
        assert!(
            removed > 100 && holes * 4 < removed,
            "seed {seed}: {holes} holes left by {removed} deletes"
        );
    }

    /// Issue 33: what a session inserts and replaces is the job's content, not slices of one
    /// pool: the values the sessions wrote, compressed in 8 KiB blocks with zstd level 1 (the
    /// figure `init` and `checksum` report), compress at the setting, and no two values share
    /// a piece of random content (a pool's slices would).
    #[test]
    fn inserted_and_replaced_values_keep_the_compression_setting() {
        let seed = jetproof_test_support::seed_or(0x33);
        for ratio in [1.0, 2.0, 4.0] {
            let model = filled(8, 50);
            let boxes = Arc::new(Mailboxes::discover(model.as_ref(), 8).expect("discover"));
            let load = InstanceLoad {
                store: model.clone(),
                mailboxes: boxes,
                mix: Mix::from_job(&Workload {
                    insert_percent: 60,
                    delete_percent: 10,
                    replace_percent: 30,
                    read_percent: 0,
                    ..Workload::default()
                }),
                record_size: 2400,
                compression_ratio: ratio,
                pacer: Arc::new(Pacer::new()),
                counters: Arc::new(LoadCounters::default()),
            };
            let done = AtomicU64::new(0);
            run_session(&load, seed, &|| {
                done.fetch_add(1, Ordering::Relaxed) > 12_000
            })
            .expect("session");
            let values: Vec<Vec<u8>> = model
                .records
                .lock()
                .expect("lock")
                .values()
                .filter(|v| v.len() > 1)
                .cloned()
                .collect();
            assert!(values.len() > 1000, "seed {seed}: {} values", values.len());
            let stream: Vec<u8> = values.concat();
            let mut compressor = zstd::bulk::Compressor::new(1).expect("zstd");
            let blocks = stream.chunks_exact(8192);
            let bytes = blocks.len() * 8192;
            let compressed: usize = blocks
                .map(|b| compressor.compress(b).expect("compress").len().min(8192))
                .sum();
            let measured = bytes as f64 / compressed as f64;
            assert!(
                (measured / ratio - 1.0).abs() < 0.05,
                "seed {seed}: values set to {ratio} compress {measured:.3}"
            );
            // 64-byte pieces holding at least 32 random bytes: a value cut from a pool would share
            // them with the values cut from the same place.
            let mut pieces = std::collections::HashSet::new();
            let repeated = values
                .iter()
                .flat_map(|v| v.chunks_exact(64))
                .filter(|w| w.iter().filter(|b| **b != 0).count() >= 32)
                .filter(|w| !pieces.insert(w.to_vec()))
                .count();
            assert_eq!(repeated, 0, "seed {seed}: values repeat content");
        }
    }
}
