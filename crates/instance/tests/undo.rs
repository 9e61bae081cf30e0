//! Logical undo (`jetproof_instance::undo`): a rollback restores every key the transaction
//! changed, a second writer of a key held by an open transaction gets a write conflict, close
//! rolls back what is still open, and recovery takes back a transaction whose records reached the
//! durable log without its commit record, also when that recovery is itself cut by a crash.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::path::Path;
use std::sync::Arc;

use jetproof_instance::undo::{self, Prior, UndoEntry};
use jetproof_instance::{Instance, InstanceError, InstanceOptions, recover};
use jetproof_io::IoBackend;
use jetproof_io::fault::{CrashMode, FaultBackend, FaultConfig};
use jetproof_io::mem::MemBackend;

const DB: &str = "/undo/db.jpdb";
const LOGS: &str = "/undo/logs";
mod common;

fn options() -> InstanceOptions {
    common::small_options(256, 16, 32)
}

fn fresh(backend: Arc<dyn IoBackend>) -> Instance {
    let (db, logs) = (Path::new(DB), Path::new(LOGS));
    Instance::create(backend.clone(), db, logs, options())
        .unwrap()
        .close()
        .unwrap();
    Instance::open(backend, db, logs, options()).unwrap()
}

fn content(instance: &Instance) -> Vec<(Vec<u8>, Vec<u8>)> {
    instance.scan(b"", usize::MAX).unwrap()
}

/// Committed base content: ten keys, some with values large enough that later changes split
/// and merge leaves.
fn base(instance: &Instance) {
    for n in 0..10u8 {
        let len = if n % 3 == 0 { 1500 } else { 40 };
        assert!(instance.insert(&[b'k', n], &vec![n; len]).unwrap());
    }
    instance.commit(false).unwrap().unwrap();
}

/// Inserts, replaces and deletes (some twice on one key) in the open transaction.
fn changes(instance: &Instance) {
    assert!(instance.insert(b"new", &[9; 1800]).unwrap());
    assert!(instance.replace(&[b'k', 1], &[1; 1700]).unwrap());
    assert!(instance.replace(&[b'k', 1], b"again").unwrap());
    assert!(instance.delete(&[b'k', 3]).unwrap());
    assert!(instance.insert(&[b'k', 3], b"back, different").unwrap());
    assert!(instance.delete(&[b'k', 6]).unwrap());
    for n in 0..8u8 {
        assert!(instance.insert(&[b'z', n], &[n; 1200]).unwrap());
    }
}

#[test]
fn rollback_restores_every_key_and_the_log_holds_one_undo_entry_per_key() {
    let backend = MemBackend::new();
    let instance = fresh(backend.clone());
    base(&instance);
    let before = content(&instance);
    let id = instance.begin();
    changes(&instance);
    assert_ne!(content(&instance), before);
    assert!(instance.rollback().unwrap());
    assert_eq!(content(&instance), before);
    instance.database().check().unwrap();
    // Nothing open any more: a commit writes nothing, and the keys are free again.
    assert_eq!(instance.commit(false).unwrap(), None);
    assert!(instance.insert(b"new", b"x").unwrap());
    instance.commit(false).unwrap().unwrap();
    instance.close().unwrap();

    // The transaction's undo entries as the log holds them, in order: an undo record, or the
    // change's own record (an insert of an absent key, a flag delete, a replace in place whose
    // value is on the page: kinds 11, 12, 10).
    use jetproof_instance::format::{EngineRecord, RecordUndo};
    let mut entries: Vec<(Vec<u8>, String)> = Vec::new();
    let mut rollbacks = 0;
    for record in common::read_log(backend, Path::new(LOGS)).0 {
        if record.transaction_id != id {
            continue;
        }
        match record.record_type {
            undo::RECORD_UNDO => {
                let entry = undo::decode_undo(&record.payload).unwrap();
                let what = match entry.before {
                    Prior::Absent => "absent".to_string(),
                    Prior::Marked => "marked".to_string(),
                    Prior::Value(v) => format!("value of {} bytes", v.len()),
                };
                entries.push((entry.key, what));
            }
            undo::RECORD_ROLLBACK => rollbacks += 1,
            other => {
                for change in
                    jetproof_instance::group::engine_records(other, &record.payload).unwrap()
                {
                    let EngineRecord::PageChange { change, undo, .. } = change else {
                        continue;
                    };
                    let what = match undo {
                        RecordUndo::None => continue,
                        RecordUndo::Absent => "absent, in the insert",
                        RecordUndo::Marked => "marked, in the mark",
                        RecordUndo::OnPage => "value on the page",
                    };
                    let key = match change {
                        jetproof_engine::OwnedPageChange::LeafInsert { key, .. }
                        | jetproof_engine::OwnedPageChange::LeafMark { key, .. }
                        | jetproof_engine::OwnedPageChange::LeafReplace { key, .. } => key,
                        other => panic!("{other:?} carries an undo"),
                    };
                    entries.push((key, what.to_string()));
                }
            }
        }
    }
    // One per key: new, k1, k3, k6 and the eight z keys, each with its state before; and one
    // more for k3, deleted (marked: no value) and then inserted again over its mark (the
    // marked record's value, needed to take that insert back). Changes that split or merge
    // their leaf log an undo record; the others carry their undo.
    let at = |n: usize| (entries[n].0.as_slice(), entries[n].1.as_str());
    assert_eq!(entries.len(), 13, "{entries:?}");
    assert_eq!(at(0), (&b"new"[..], "absent"), "{entries:?}");
    assert_eq!(at(1), (&[b'k', 1][..], "value of 40 bytes"), "{entries:?}");
    assert_eq!(
        at(2),
        (&[b'k', 3][..], "marked, in the mark"),
        "{entries:?}"
    );
    // The re-insert shrinks k3's record from 1,500 bytes: an undo record with the marked value
    // if that took its leaf into a merge check, else the change's own record with the value
    // kept on the page (the deferred before image). Which one depends on the leaves' layout,
    // which the merge rule shapes: since leaves merge within the table density (2026-11-27,
    // the earlier changes of this transaction may merge leaves), the second is what happens.
    assert_eq!(at(3).0, &[b'k', 3][..], "{entries:?}");
    assert!(
        ["value of 1500 bytes", "value on the page"].contains(&at(3).1),
        "{entries:?}"
    );
    assert_eq!(
        at(4),
        (&[b'k', 6][..], "marked, in the mark"),
        "{entries:?}"
    );
    assert!(
        entries[5..].iter().all(|(key, _)| key[0] == b'z'),
        "{entries:?}"
    );
    assert!(
        entries[5..]
            .iter()
            .any(|(_, what)| what == "absent, in the insert"),
        "{entries:?}"
    );
    assert_eq!(rollbacks, 1);
}

#[test]
fn a_key_held_by_an_open_transaction_is_a_write_conflict_until_it_ends() {
    let backend = MemBackend::new();
    let instance = Arc::new(fresh(backend));
    base(&instance);
    instance.begin();
    assert!(instance.replace(&[b'k', 2], b"mine").unwrap());
    let other = instance.clone();
    std::thread::spawn(move || {
        let error = other.replace(&[b'k', 2], b"theirs").unwrap_err();
        assert!(
            matches!(error, InstanceError::WriteConflict { .. }),
            "{error}"
        );
        assert!(
            error.to_string().contains("write conflict on key 6b02"),
            "{error}"
        );
        // Other keys are free; the conflicting transaction rolls back what it did.
        assert!(other.replace(&[b'k', 4], b"theirs").unwrap());
        assert!(other.rollback().unwrap());
    })
    .join()
    .unwrap();
    assert_eq!(instance.get(&[b'k', 4]).unwrap(), Some(vec![4; 40]));
    assert_eq!(
        instance
            .counters()
            .write_conflicts
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    instance.commit(true).unwrap().unwrap();
    let other = instance.clone();
    std::thread::spawn(move || {
        assert!(other.replace(&[b'k', 2], b"theirs").unwrap());
        other.commit(false).unwrap().unwrap();
    })
    .join()
    .unwrap();
    assert_eq!(instance.get(&[b'k', 2]).unwrap(), Some(b"theirs".to_vec()));
    Arc::into_inner(instance).unwrap().close().unwrap();
}

#[test]
fn close_rolls_back_transactions_left_open_by_any_session() {
    let backend = MemBackend::new();
    let instance = Arc::new(fresh(backend.clone()));
    base(&instance);
    let before = content(&instance);
    let session = instance.clone();
    // A session that ends without committing.
    std::thread::spawn(move || changes(&session))
        .join()
        .unwrap();
    assert_ne!(content(&instance), before);
    Arc::into_inner(instance).unwrap().close().unwrap();
    let reopened = Instance::open(backend, Path::new(DB), Path::new(LOGS), options()).unwrap();
    assert_eq!(content(&reopened), before);
    reopened.database().check().unwrap();
    reopened.close().unwrap();
}

/// The open transaction's records and some of its pages are durable, its commit record is not:
/// recovery takes it back; cut by a crash at every few operations, recovery run again still
/// ends with the same content.
#[test]
fn recovery_takes_back_a_transaction_without_its_commit_record() {
    let (db, logs) = (Path::new(DB), Path::new(LOGS));
    let backend = FaultBackend::new(FaultConfig::default());
    let instance = fresh(backend.clone());
    base(&instance);
    let before = content(&instance);
    instance.begin();
    changes(&instance);
    // The log is durable, and dirty pages reach the file (after the log, by the write-ahead
    // rule): the uncommitted changes are both in the log and on disk.
    instance.log().flush().unwrap();
    instance.database().flush().unwrap();
    let crashed = backend.crash(CrashMode::SyncedOnly);
    std::mem::forget(instance);

    let report = recover(crashed.clone(), db, logs, &options()).unwrap();
    assert_eq!(report.transactions_rolled_back, 1, "{report:?}");
    assert_eq!(report.undo_entries, 13, "{report:?}");
    assert_eq!(report.records_purged, 0, "{report:?}");
    assert!(report.cpu_seconds > 0.0, "{report:?}");
    let reopened = Instance::open(crashed.clone(), db, logs, options()).unwrap();
    assert_eq!(content(&reopened), before);
    // The deletes' marks were cleared, not left behind.
    assert_eq!(reopened.database().check().unwrap().marked_records, 0);
    reopened.close().unwrap();

    // The same crash, with recovery cut after 1, 2, … operations and run again.
    let cut_during_undo = recovery_cut_anywhere_ends_at(&backend, &before, 7, "");
    assert!(cut_during_undo > 0, "no recovery was cut");
}

/// Recovers copies of `backend` crashed now, each recovery cut by a crash after 1, 1 + `step`,
/// … operations and then run again in full: each must end with `before`. Returns how many
/// were cut after redo, while taking the loser back.
fn recovery_cut_anywhere_ends_at(
    backend: &FaultBackend,
    before: &[(Vec<u8>, Vec<u8>)],
    step: usize,
    case: &str,
) -> usize {
    let (db, logs) = (Path::new(DB), Path::new(LOGS));
    let mut cut_during_undo = 0;
    for ops in (1..400u64).step_by(step) {
        let twin = backend.crash(CrashMode::SyncedOnly);
        let limit = twin.operations() + ops;
        twin.configure(|c| c.eio_after_ops = Some(limit));
        let first = recover(twin.clone(), db, logs, &options());
        let again = twin.crash(CrashMode::SyncedOnly);
        again.configure(|c| c.eio_after_ops = None);
        let report = recover(again.clone(), db, logs, &options())
            .unwrap_or_else(|e| panic!("{case}cut after {ops} operations: {e}"));
        if first.is_err() && report.transactions_rolled_back == 1 && !report.was_clean {
            cut_during_undo += 1;
        }
        let reopened = Instance::open(again, db, logs, options()).unwrap();
        assert!(
            content(&reopened) == before,
            "{case}cut after {ops} operations: the content differs from before the transaction"
        );
        reopened.database().check().unwrap();
        reopened.close().unwrap();
    }
    cut_during_undo
}

/// A delete only marks the record (reads no longer see it, a second delete finds nothing, a
/// rollback clears the mark); the commit removes it, and a delete whose removal never reached the
/// log (a crash between the commit and the purge) is removed by recovery.
#[test]
fn committed_deletes_are_purged_and_recovery_purges_what_a_crash_left_marked() {
    let (db, logs) = (Path::new(DB), Path::new(LOGS));
    let backend = FaultBackend::new(FaultConfig::default());
    let instance = fresh(backend.clone());
    base(&instance);
    let marked = |instance: &Instance| instance.database().check().unwrap().marked_records;

    assert!(instance.delete(&[b'k', 1]).unwrap());
    assert_eq!(instance.get(&[b'k', 1]).unwrap(), None);
    assert!(!instance.delete(&[b'k', 1]).unwrap());
    assert!(!instance.replace(&[b'k', 1], b"x").unwrap());
    assert_eq!(marked(&instance), 1);
    assert!(instance.rollback().unwrap());
    assert_eq!(instance.get(&[b'k', 1]).unwrap(), Some(vec![1; 40]));
    assert_eq!(marked(&instance), 0);

    assert!(instance.delete(&[b'k', 1]).unwrap());
    assert!(instance.delete(&[b'k', 3]).unwrap());
    instance.commit(true).unwrap().unwrap();
    assert_eq!(marked(&instance), 0);
    let counters = instance.counters();
    assert_eq!(
        counters
            .records_purged
            .load(std::sync::atomic::Ordering::Relaxed),
        2
    );
    assert_eq!(instance.database().check().unwrap().records, 8);

    // A mark with no open transaction behind it, as a committed delete leaves when the crash
    // comes before its purge reached the log.
    assert!(instance.database().mark_deleted(&[b'k', 2]).unwrap());
    instance.log().flush().unwrap();
    let crashed = backend.crash(CrashMode::SyncedOnly);
    std::mem::forget(instance);
    let report = recover(crashed.clone(), db, logs, &options()).unwrap();
    assert_eq!(report.records_purged, 1, "{report:?}");
    assert_eq!(report.transactions_rolled_back, 0, "{report:?}");
    let reopened = Instance::open(crashed, db, logs, options()).unwrap();
    assert_eq!(reopened.get(&[b'k', 2]).unwrap(), None);
    let stats = reopened.database().check().unwrap();
    assert_eq!((stats.records, stats.marked_records), (7, 0));
    reopened.close().unwrap();
}

/// The undo records and page changes of transaction `id` in the log, decoded, and how many
/// rollback records it has.
fn records_of(
    backend: Arc<dyn IoBackend>,
    id: u64,
) -> (
    Vec<UndoEntry>,
    Vec<jetproof_instance::format::EngineRecord>,
    usize,
) {
    let (mut undo_entries, mut changes, mut rollbacks) = (Vec::new(), Vec::new(), 0);
    for record in common::read_log(backend, Path::new(LOGS)).0 {
        if record.transaction_id != id {
            continue;
        }
        match record.record_type {
            undo::RECORD_UNDO => undo_entries.push(undo::decode_undo(&record.payload).unwrap()),
            undo::RECORD_ROLLBACK => rollbacks += 1,
            other => changes
                .extend(jetproof_instance::group::engine_records(other, &record.payload).unwrap()),
        }
    }
    (undo_entries, changes, rollbacks)
}

/// A replace that fits its leaf logs no prior value: the value is kept in memory (ESE's deferred
/// before image) and its record says recovery finds it on the page. Only a write of the page
/// while the transaction is open logs it, before the write; once the transaction's end is
/// appended, a write of the page waits for that end instead.
#[test]
fn a_replaced_value_is_logged_only_when_its_page_is_written_while_the_transaction_is_open() {
    use jetproof_instance::format::EngineRecord;
    let backend = MemBackend::new();
    let instance = fresh(backend.clone());
    base(&instance);
    instance.database().flush().unwrap();
    let before = content(&instance);
    let counters = instance.counters();
    let kept_before = counters
        .undo_deferred
        .load(std::sync::atomic::Ordering::Relaxed);

    let id = instance.begin();
    // Same size: replaced in place, one leaf replace record.
    assert!(instance.replace(&[b'k', 2], &[0xAB; 40]).unwrap());
    // A second replace of the key in the transaction needs no undo at all.
    assert!(instance.replace(&[b'k', 2], &[0xCD; 40]).unwrap());
    assert_eq!(
        counters
            .undo_deferred
            .load(std::sync::atomic::Ordering::Relaxed),
        kept_before + 1
    );
    assert_eq!(instance.deferred_undo_logged(), (0, 1));
    instance.log().flush().unwrap();
    let (undo_entries, changes, _) = records_of(backend.clone(), id);
    assert!(undo_entries.is_empty(), "{undo_entries:?}");
    let marked: Vec<bool> = changes
        .iter()
        .map(|c| match c {
            EngineRecord::PageChange { undo, .. } => {
                *undo == jetproof_instance::format::RecordUndo::OnPage
            }
            EngineRecord::Commit { .. } => false,
        })
        .collect();
    assert_eq!(marked, [true, false], "{changes:?}");

    // The page goes to disk while the transaction is open: its prior value is logged first.
    instance.database().flush().unwrap();
    assert_eq!(instance.deferred_undo_logged(), (1, 0));
    let (undo_entries, _, _) = records_of(backend.clone(), id);
    assert_eq!(
        undo_entries,
        [UndoEntry {
            key: vec![b'k', 2],
            before: Prior::Value(vec![2; 40]),
        }]
    );
    assert!(instance.rollback().unwrap());
    assert_eq!(content(&instance), before);

    // Committed lazily, then the page is written: the write waits for the commit record
    // instead of logging the value.
    let id = instance.begin();
    assert!(instance.replace(&[b'k', 4], &[0xEF; 40]).unwrap());
    let commit = instance.commit(true).unwrap().unwrap();
    instance.database().flush().unwrap();
    assert!(instance.log().is_durable(commit));
    assert_eq!(instance.deferred_undo_logged(), (1, 0));
    let (undo_entries, _, _) = records_of(backend.clone(), id);
    assert!(undo_entries.is_empty(), "{undo_entries:?}");
    instance.close().unwrap();
}

/// A transaction whose replaces (in place: values kept in memory) reached the durable log
/// without its commit record is taken back by recovery, whether its pages were written before
/// the crash (the values then logged by the write-ahead gate) or not (recovery takes them from
/// the pages as it redoes the replaces); and recovery cut by a crash at every few operations,
/// then run again, still ends with the content from before the transaction.
#[test]
fn recovery_takes_back_replaces_whose_values_were_kept_in_memory() {
    let (db, logs) = (Path::new(DB), Path::new(LOGS));
    for pages_written in [false, true] {
        let backend = FaultBackend::new(FaultConfig::default());
        let instance = fresh(backend.clone());
        base(&instance);
        instance.database().flush().unwrap();
        instance.checkpoint().unwrap();
        let before = content(&instance);
        instance.begin();
        for n in [1u8, 2, 4, 5, 7, 8] {
            assert!(instance.replace(&[b'k', n], &[0x5A ^ n; 40]).unwrap());
        }
        assert!(instance.delete(&[b'k', 2]).unwrap());
        assert!(instance.insert(&[b'k', 2], &[0x77; 40]).unwrap());
        // Six replaced values, and k2's value again: deleted, then inserted over its own mark.
        assert_eq!(instance.deferred_undo_logged(), (0, 7));
        instance.log().flush().unwrap();
        if pages_written {
            instance.database().flush().unwrap();
            assert_eq!(instance.deferred_undo_logged(), (7, 0));
        }
        let crashed = backend.crash(CrashMode::SyncedOnly);
        std::mem::forget(instance);

        let report = recover(crashed.clone(), db, logs, &options()).unwrap();
        assert_eq!(report.transactions_rolled_back, 1, "{report:?}");
        assert_eq!(
            report.undo_entries, 7,
            "written {pages_written}: {report:?}"
        );
        let reopened = Instance::open(crashed.clone(), db, logs, options()).unwrap();
        assert_eq!(content(&reopened), before, "written {pages_written}");
        reopened.database().check().unwrap();
        reopened.close().unwrap();

        let case = format!("pages written {pages_written}, ");
        let cut = recovery_cut_anywhere_ends_at(&backend, &before, 5, &case);
        assert!(cut > 0, "{case}no recovery was cut during undo");
    }
}
