//! Read-ahead for redo recovery: a few reader threads that read, ahead of the replay, the pages
//! that the next log records name, so that several page reads are in flight while the replaying
//! thread redoes the records before them (`docs/log.md`, "Read-ahead during replay").
//!
//! ESE does the same during recovery (its log prereader collects the page numbers named by the
//! log records ahead of the redo point and asks the buffer manager to read them, skipping pages
//! already cached and giving up quietly when it cannot); jetproof's replay keeps its own map of
//! pages rather than the engine's cache, so the readers here deliver into that map.
//!
//! What it may and may not do: a read-ahead only reads a page that is neither in the replay's
//! map nor already asked for, so it never holds a second copy of a page the replay has changed,
//! and its result is used only if the replay still has no copy when it needs the page. A failed
//! read-ahead is dropped silently: the replay then reads the page itself, and that read reports
//! the error exactly as without read-ahead.
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;

use jetproof_io::{AlignedBuf, IoClass, IoError, IoFile};
use parking_lot::Mutex;

/// A page read by a reader thread: its number and its bytes, or the error that the replay's own
/// read will report again.
pub(crate) type Completion = (u32, Result<AlignedBuf, IoError>);

/// The reader threads of one replay. Dropping it stops them (reads already started finish
/// first) and waits for them.
pub(crate) struct Readers {
    jobs: Option<Sender<u32>>,
    done: Receiver<Completion>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Readers {
    /// Starts up to `count` reader threads of `page_size`-byte pages of `file`. `None` when not
    /// even one could be started (the replay then reads every page itself).
    pub(crate) fn start(file: &Arc<dyn IoFile>, page_size: usize, count: usize) -> Option<Readers> {
        let (jobs, job_queue) = mpsc::channel::<u32>();
        let (done_tx, done) = mpsc::channel::<Completion>();
        let job_queue = Arc::new(Mutex::new(job_queue));
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for n in 0..count {
            let file = file.clone();
            let job_queue = job_queue.clone();
            let done_tx = done_tx.clone();
            let stop = stop.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("replay-read-{n}"))
                .spawn(move || {
                    loop {
                        // Holding the lock while waiting is what hands each job to one reader.
                        let job = job_queue.lock().recv();
                        let Ok(page) = job else { break };
                        if stop.load(Ordering::Acquire) {
                            break;
                        }
                        let mut bytes = AlignedBuf::zeroed(page_size);
                        let result = file
                            .read_at(
                                &mut bytes,
                                u64::from(page) * page_size as u64,
                                IoClass::DbRead,
                            )
                            .map(|()| bytes);
                        if done_tx.send((page, result)).is_err() {
                            break;
                        }
                    }
                });
            // A thread that cannot be started only lowers the depth of the read-ahead.
            if let Ok(handle) = spawned {
                threads.push(handle);
            }
        }
        if threads.is_empty() {
            return None;
        }
        Some(Readers {
            jobs: Some(jobs),
            done,
            stop,
            threads,
        })
    }

    /// Asks for `page` to be read. False when no reader is left to do it.
    pub(crate) fn request(&self, page: u32) -> bool {
        self.jobs
            .as_ref()
            .is_some_and(|jobs| jobs.send(page).is_ok())
    }

    /// A finished read if there is one, without waiting.
    pub(crate) fn try_next(&self) -> Option<Completion> {
        self.done.try_recv().ok()
    }

    /// The next finished read, waiting for it; `None` when every reader has stopped.
    pub(crate) fn next(&self) -> Option<Completion> {
        self.done.recv().ok()
    }
}

impl Drop for Readers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Closing the job queue ends each reader's loop once it has finished its current read.
        self.jobs = None;
        for thread in self.threads.drain(..) {
            // A reader that panicked has nothing left to clean up.
            let _ = thread.join();
        }
    }
}
