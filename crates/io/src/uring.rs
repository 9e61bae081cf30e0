//! The io_uring backend (Linux): same checks and semantics as [`crate::std_backend`] (it opens
//! files through the same code), but I/O goes through rings, so a batch is truly overlapped:
//! [`IoFile::read_batch`] and [`IoFile::write_batch`] put every operation in flight with one
//! system call and wait for all of them.
//!
//! Rings: each thread that makes a synchronous call (a session's read on a miss, a batch, a sync)
//! has one ring of its own for every file, made on its first call and kept until the thread
//! ends, so any number of sessions share a file without sharing a ring or taking a lock. The
//! ring is single-issuer with deferred task work (completion work runs in the thread's own wait,
//! as fio's rings do). A ring of its own matters beyond the lock: the kernel links a task to each
//! ring it submits to and looks the link up again whenever the task's last ring was a different
//! one, so threads taking rings from a shared pool (as until 2026-11-28) paid an xarray lookup
//! per submit, ~4% of the process's CPU at 256 sessions. Files are not registered with these
//! rings (a ring serves every file; the kernel looks the descriptor up per I/O).
//!
//! [`UringQueue`] is the streaming form used by `jetproof probe`: a fixed number of buffers,
//! registered with the kernel (no page pinning per I/O), each always in flight; a completion is
//! reaped and the slot resubmitted at once, as fio's io_uring engine does, so the device sees a
//! constant queue depth.
//!
//! Safety invariant of this module: a buffer handed to the kernel is neither freed nor reused
//! until its completion has been reaped. Every function that submits waits for all of its
//! completions before returning, even when one of them failed; [`UringQueue`] drains its
//! in-flight operations in `Drop` before its buffers are freed.

use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;

use io_uring::{IoUring, opcode, squeue, types};

use crate::fixed::RingTable;
use crate::std_backend::{StdFile, open_file, path_error};
use crate::writeq::{WriteCompletion, WriteQueue, WriteRequest};
use crate::{AlignedBuf, IoBackend, IoClass, IoError, IoFile, OpenOptions, ReadOp, WriteOp};

thread_local! {
    /// This thread's ring for synchronous calls (module doc), taken out for the length of a
    /// call and put back after it.
    static THREAD_RING: RefCell<Option<Ring>> = const { RefCell::new(None) };
}

/// Reads and writes the calling thread's ring submitted with a registered buffer
/// ([`crate::fixed`]) so far: for tests, which show with it that registered memory is read and
/// written by index.
pub fn thread_fixed_ios() -> u64 {
    THREAD_RING
        .try_with(|slot| slot.borrow().as_ref().map_or(0, |ring| ring.fixed_ios))
        .unwrap_or(0)
}

/// Entries per thread's ring: the largest batch put in flight at once (bigger batches
/// go in chunks of this size).
pub const RING_ENTRIES: u32 = 128;

#[derive(Debug)]
pub struct UringBackend {
    _probe: (),
}

impl UringBackend {
    /// Checks that io_uring works here (a ring can be made and a no-op completes), so that an
    /// unusable io_uring is reported once, clearly, instead of on the first I/O.
    pub fn new() -> Result<Arc<UringBackend>, IoError> {
        let unavailable = |source| IoError::UringUnavailable { source };
        let mut ring = IoUring::new(4).map_err(unavailable)?;
        let nop = opcode::Nop::new().build().user_data(7);
        // SAFETY: a no-op references no memory.
        unsafe { ring.submission().push(&nop) }
            .map_err(|_| unavailable(std::io::Error::other("submission queue full")))?;
        ring.submit_and_wait(1).map_err(unavailable)?;
        let done = ring.completion().next();
        match done {
            Some(cqe) if cqe.result() >= 0 => {
                // Registered buffers for the memory that sees the most I/O (`crate::fixed`);
                // without them every I/O is an ordinary one.
                crate::fixed::enable();
                Ok(Arc::new(UringBackend { _probe: () }))
            }
            Some(cqe) => Err(unavailable(std::io::Error::from_raw_os_error(
                -cqe.result(),
            ))),
            None => Err(unavailable(std::io::Error::other(
                "no completion for a no-op",
            ))),
        }
    }

    /// Opens with the concrete type, for [`UringFile::queue`].
    pub fn open_uring(
        &self,
        path: &Path,
        options: &OpenOptions,
    ) -> Result<Arc<UringFile>, IoError> {
        let inner = Arc::new(open_file(path, options)?);
        Ok(Arc::new(UringFile { inner }))
    }
}

impl IoBackend for UringBackend {
    fn name(&self) -> &'static str {
        "io_uring"
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Arc<dyn IoFile>, IoError> {
        Ok(self.open_uring(path, options)?)
    }

    fn exists(&self, path: &Path) -> bool {
        path.symlink_metadata().is_ok()
    }

    fn remove(&self, path: &Path) -> Result<(), IoError> {
        std::fs::remove_file(path).map_err(|e| path_error("remove", path, e))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<(), IoError> {
        std::fs::rename(from, to).map_err(|e| path_error("rename", from, e))
    }

    fn rename_new(&self, from: &Path, to: &Path) -> Result<(), IoError> {
        crate::std_backend::rename_no_replace(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> Result<(), IoError> {
        let handle = std::fs::File::open(dir).map_err(|e| path_error("open directory", dir, e))?;
        handle
            .sync_all()
            .map_err(|e| path_error("sync directory", dir, e))
    }

    fn create_dir_all(&self, dir: &Path) -> Result<(), IoError> {
        std::fs::create_dir_all(dir).map_err(|e| path_error("create directory", dir, e))
    }
}

/// One ring, with the file registered as fixed file 0 when the kernel allowed it, and its copy
/// of the registered buffers' table ([`crate::fixed`]).
struct Ring {
    ring: IoUring,
    fixed_file: bool,
    buffers: RingTable,
    /// Reads and writes this ring submitted with a registered buffer.
    fixed_ios: u64,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Ring(fixed_file: {}, fixed I/Os: {})",
            self.fixed_file, self.fixed_ios
        )
    }
}

impl Ring {
    /// The calling thread's ring for synchronous calls on any file (no file registered): only
    /// ever used by this thread.
    fn for_this_thread(entries: u32) -> Result<Ring, IoError> {
        Ok(Ring {
            ring: Ring::build_single_issuer(entries)?,
            fixed_file: false,
            buffers: RingTable::default(),
            fixed_ios: 0,
        })
    }

    /// A ring with `fd` registered that any thread may use (a write-back queue, which may
    /// change threads).
    fn shared(fd: i32, entries: u32) -> Result<Ring, IoError> {
        // COOP_TASKRUN: completions do not interrupt the submitting thread with an IPI; they are
        // run at its next entry into the kernel, which every caller here makes right away.
        let ring = IoUring::builder()
            .setup_coop_taskrun()
            .build(entries)
            .or_else(|_| IoUring::new(entries))
            .map_err(|source| IoError::UringUnavailable { source })?;
        Ok(Ring::register(ring, fd))
    }

    /// A ring only ever used by the thread that made it ([`UringQueue`]), with `fd` registered.
    fn single_issuer(fd: i32, entries: u32) -> Result<Ring, IoError> {
        Ok(Ring::register(Ring::build_single_issuer(entries)?, fd))
    }

    /// A ring for one thread only: the kernel may then defer completion work to that thread's
    /// own wait (SINGLE_ISSUER and DEFER_TASKRUN), as fio does; older kernels get cooperative
    /// task work, or a plain ring.
    fn build_single_issuer(entries: u32) -> Result<IoUring, IoError> {
        IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_coop_taskrun()
            .build(entries)
            .or_else(|_| IoUring::builder().setup_coop_taskrun().build(entries))
            .or_else(|_| IoUring::new(entries))
            .map_err(|source| IoError::UringUnavailable { source })
    }

    fn register(ring: IoUring, fd: i32) -> Ring {
        let fixed_file = ring.submitter().register_files(&[fd]).is_ok();
        Ring {
            ring,
            fixed_file,
            buffers: RingTable::default(),
            fixed_ios: 0,
        }
    }

    /// The registered buffer holding `[ptr, ptr + len)` wholly, if any (counted as a fixed I/O).
    fn fixed_buffer(&mut self, ptr: *const u8, len: usize) -> Option<u16> {
        let slot = self
            .buffers
            .current(&self.ring)?
            .slot_of(ptr as usize, len)?;
        self.fixed_ios += 1;
        Some(slot)
    }

    /// Submits what is queued and waits until `want` completions are available, retrying on
    /// interruption.
    fn submit_and_wait(&mut self, want: usize) -> std::io::Result<()> {
        loop {
            match self.ring.submit_and_wait(want) {
                Ok(_) => return Ok(()),
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EBUSY)
                    ) => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// What one operation of a batch is, for [`UringFile::run`].
#[derive(Clone, Copy)]
enum Op {
    Read {
        ptr: *mut u8,
        len: usize,
        offset: u64,
    },
    Write {
        ptr: *const u8,
        len: usize,
        offset: u64,
    },
    Sync,
}

/// An open file of the io_uring backend.
#[derive(Debug)]
pub struct UringFile {
    inner: Arc<StdFile>,
}

impl UringFile {
    /// This thread's ring, taken out of its slot for one call (a nested call makes another).
    fn take_ring(&self) -> Result<Ring, IoError> {
        let kept = THREAD_RING
            .try_with(|slot| slot.borrow_mut().take())
            .ok()
            .flatten();
        match kept {
            Some(ring) => Ok(ring),
            None => Ring::for_this_thread(RING_ENTRIES).map_err(|error| {
                crate::limits::out_of_descriptors(error, "make an io_uring", &self.inner.path)
            }),
        }
    }

    /// Puts a ring back in this thread's slot (dropped if the slot is taken or the thread is
    /// ending).
    fn give_back(ring: Ring) {
        let _ = THREAD_RING.try_with(|slot| {
            let mut slot = slot.borrow_mut();
            if slot.is_none() {
                *slot = Some(ring);
            }
        });
    }

    fn entry(&self, ring: &mut Ring, op: Op, user_data: u64) -> squeue::Entry {
        let fd = self.inner.raw_fd();
        macro_rules! target {
            ($builder:ident, $($arg:expr),*) => {
                if ring.fixed_file {
                    opcode::$builder::new(types::Fixed(0), $($arg),*)
                } else {
                    opcode::$builder::new(types::Fd(fd), $($arg),*)
                }
            };
        }
        // A buffer in registered memory goes by its index: the kernel pins nothing for it.
        let entry = match op {
            Op::Read { ptr, len, offset } => match ring.fixed_buffer(ptr, len) {
                Some(index) => target!(ReadFixed, ptr, len as u32, index)
                    .offset(offset)
                    .build(),
                None => target!(Read, ptr, len as u32).offset(offset).build(),
            },
            Op::Write { ptr, len, offset } => match ring.fixed_buffer(ptr, len) {
                Some(index) => target!(WriteFixed, ptr, len as u32, index)
                    .offset(offset)
                    .build(),
                None => target!(Write, ptr, len as u32).offset(offset).build(),
            },
            Op::Sync => target!(Fsync,).flags(types::FsyncFlags::DATASYNC).build(),
        };
        entry.user_data(user_data)
    }

    /// Puts `ops` in flight (in chunks of the ring size) and waits for all of them. Returns each
    /// operation's raw result (bytes moved, or a negative errno).
    fn run(&self, ops: &[Op]) -> Result<Vec<i32>, IoError> {
        let mut results = vec![0i32; ops.len()];
        self.run_into(ops, &mut results)?;
        Ok(results)
    }

    /// One operation, its raw result. No heap allocation: a session's read on a miss, a log
    /// write and a sync each come here, once per I/O (issue 38: the two small vectors `run`
    /// allocated and freed per I/O were ~1.5% of a run's CPU on RAM-backed storage).
    fn run_one(&self, op: Op) -> Result<i32, IoError> {
        let mut result = [0i32; 1];
        self.run_into(&[op], &mut result)?;
        Ok(result[0])
    }

    /// [`UringFile::run`] into `results` (as long as `ops`).
    fn run_into(&self, ops: &[Op], results: &mut [i32]) -> Result<(), IoError> {
        let mut ring = self.take_ring()?;
        let mut failure = None;
        for (chunk_index, chunk) in ops.chunks(RING_ENTRIES as usize).enumerate() {
            let base = chunk_index * RING_ENTRIES as usize;
            let mut pushed = 0;
            for (i, op) in chunk.iter().enumerate() {
                let entry = self.entry(&mut ring, *op, (base + i) as u64);
                // SAFETY: the buffers of `ops` are borrowed by our caller for the whole call, and
                // we wait below for every completion before returning (module invariant).
                if unsafe { ring.ring.submission().push(&entry) }.is_err() {
                    break;
                }
                pushed += 1;
            }
            let mut reaped = 0;
            while reaped < pushed {
                if let Err(e) = ring.submit_and_wait(1) {
                    // Nothing left in the kernel's hands if the queue was never consumed.
                    let unsubmitted = ring.ring.submission().len();
                    if reaped + unsubmitted >= pushed {
                        failure = Some(IoError::Os {
                            op: "io_uring submit",
                            path: self.inner.path.clone(),
                            offset: 0,
                            len: 0,
                            source: e,
                        });
                        // Drop the queued entries: they reference our caller's buffers.
                        ring = Ring::for_this_thread(RING_ENTRIES)?;
                        break;
                    }
                    continue;
                }
                for cqe in ring.ring.completion() {
                    if let Some(slot) = results.get_mut(cqe.user_data() as usize) {
                        *slot = cqe.result();
                    }
                    reaped += 1;
                }
            }
            if failure.is_some() {
                break;
            }
            if pushed < chunk.len() {
                // The ring was smaller than promised; finish the rest one by one.
                self.run_into(
                    &chunk[pushed..],
                    &mut results[base + pushed..base + chunk.len()],
                )?;
            }
        }
        Self::give_back(ring);
        match failure {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Turns a read's raw result into success, finishing a short read with pread.
    fn finish_read(&self, result: i32, buf: &mut [u8], offset: u64) -> Result<(), IoError> {
        if result < 0 {
            return Err(self.inner.os_error(
                "read",
                offset,
                buf.len(),
                std::io::Error::from_raw_os_error(-result),
            ));
        }
        let done = result as usize;
        if done < buf.len() {
            return self.inner.pread_all(buf, offset, done);
        }
        Ok(())
    }

    fn finish_write(&self, result: i32, data: &[u8], offset: u64) -> Result<(), IoError> {
        if result < 0 {
            self.inner.poison();
            return Err(self.inner.os_error(
                "write",
                offset,
                data.len(),
                std::io::Error::from_raw_os_error(-result),
            ));
        }
        let done = result as usize;
        if done < data.len() {
            use std::os::unix::fs::FileExt;
            self.inner
                .file
                .write_all_at(&data[done..], offset + done as u64)
                .map_err(|e| {
                    self.inner.poison();
                    self.inner.os_error("write", offset, data.len(), e)
                })?;
        }
        Ok(())
    }

    /// A streaming queue of `depth` registered buffers of `buffer_size` bytes each.
    pub fn queue(
        self: &Arc<Self>,
        depth: usize,
        buffer_size: usize,
    ) -> Result<UringQueue, IoError> {
        let entries = depth.next_power_of_two().max(1) as u32;
        let ring = Ring::single_issuer(self.inner.raw_fd(), entries).map_err(|error| {
            crate::limits::out_of_descriptors(error, "make an io_uring", &self.inner.path)
        })?;
        let buffers: Vec<AlignedBuf> = (0..depth)
            .map(|_| AlignedBuf::zeroed(buffer_size))
            .collect();
        let iovecs: Vec<libc::iovec> = buffers
            .iter()
            .map(|b| libc::iovec {
                iov_base: b.as_ptr() as *mut libc::c_void,
                iov_len: b.len(),
            })
            .collect();
        // SAFETY: the buffers live as long as the queue and are dropped after the ring (Drop).
        let registered_buffers = unsafe { ring.ring.submitter().register_buffers(&iovecs) }.is_ok();
        Ok(UringQueue {
            ring,
            buffers,
            busy: vec![false; depth],
            in_flight: 0,
            registered_buffers,
            file: self.clone(),
        })
    }
}

impl IoFile for UringFile {
    fn path(&self) -> &Path {
        &self.inner.path
    }

    fn read_at(&self, buf: &mut [u8], offset: u64, _class: IoClass) -> Result<(), IoError> {
        self.inner.check_poisoned()?;
        self.inner.check_aligned(offset, buf.len(), buf.as_ptr())?;
        let result = self.run_one(Op::Read {
            ptr: buf.as_mut_ptr(),
            len: buf.len(),
            offset,
        })?;
        self.finish_read(result, buf, offset)
    }

    fn write_at(&self, data: &[u8], offset: u64, _class: IoClass) -> Result<(), IoError> {
        self.inner.check_poisoned()?;
        self.inner
            .check_aligned(offset, data.len(), data.as_ptr())?;
        let result = self.run_one(Op::Write {
            ptr: data.as_ptr(),
            len: data.len(),
            offset,
        })?;
        self.finish_write(result, data, offset)
    }

    fn sync_data(&self, _class: IoClass) -> Result<(), IoError> {
        self.inner.check_poisoned()?;
        match self.run_one(Op::Sync)? {
            r if r < 0 => {
                self.inner.poison();
                Err(self
                    .inner
                    .os_error("fdatasync", 0, 0, std::io::Error::from_raw_os_error(-r)))
            }
            _ => Ok(()),
        }
    }

    fn size(&self) -> Result<u64, IoError> {
        self.inner.size()
    }

    fn set_size(&self, size: u64) -> Result<(), IoError> {
        self.inner.set_size(size)
    }

    fn logical_block_size(&self) -> usize {
        self.inner.block_size
    }

    fn read_batch(&self, ops: &mut [ReadOp<'_>], _class: IoClass) -> Result<(), IoError> {
        self.inner.check_poisoned()?;
        let mut raw = Vec::with_capacity(ops.len());
        for op in ops.iter_mut() {
            self.inner
                .check_aligned(op.offset, op.buf.len(), op.buf.as_ptr())?;
            raw.push(Op::Read {
                ptr: op.buf.as_mut_ptr(),
                len: op.buf.len(),
                offset: op.offset,
            });
        }
        let results = self.run(&raw)?;
        let mut first_error = None;
        for (op, result) in ops.iter_mut().zip(results) {
            if let Err(e) = self.finish_read(result, op.buf, op.offset) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn write_batch(&self, ops: &[WriteOp<'_>], _class: IoClass) -> Result<(), IoError> {
        self.inner.check_poisoned()?;
        let mut raw = Vec::with_capacity(ops.len());
        for op in ops {
            self.inner
                .check_aligned(op.offset, op.data.len(), op.data.as_ptr())?;
            raw.push(Op::Write {
                ptr: op.data.as_ptr(),
                len: op.data.len(),
                offset: op.offset,
            });
        }
        let results = self.run(&raw)?;
        let mut first_error = None;
        for (op, result) in ops.iter().zip(results) {
            if let Err(e) = self.finish_write(result, op.data, op.offset) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn native_write_queue(
        &self,
        depth: usize,
        _class: IoClass,
    ) -> Option<Result<Box<dyn WriteQueue>, IoError>> {
        Some(UringWriteQueue::new(self.inner.clone(), depth).map(|q| Box::new(q) as _))
    }
}

/// The write-back queue of an io_uring file: one ring of its own, every write submitted to it
/// at once (one `io_uring_enter` per write, or per reap that also submits), completions reaped
/// by the caller in the order the device finishes them. A short write is finished with
/// pwrite before it is reported; a failed one poisons the file, as `write_at` does.
#[derive(Debug)]
pub struct UringWriteQueue {
    file: Arc<StdFile>,
    ring: Ring,
    depth: usize,
    /// The writes in the kernel's hands, by ring user data (a slot index).
    slots: Vec<Option<WriteRequest>>,
    in_flight: usize,
    /// Writes refused before they reached the kernel, reported by the next reap.
    refused: Vec<WriteCompletion>,
}

impl UringWriteQueue {
    fn new(file: Arc<StdFile>, depth: usize) -> Result<UringWriteQueue, IoError> {
        let depth = depth.max(1);
        let entries = (depth.next_power_of_two() as u32).max(2);
        let ring = Ring::shared(file.raw_fd(), entries)?;
        Ok(UringWriteQueue {
            file,
            ring,
            depth,
            slots: (0..depth).map(|_| None).collect(),
            in_flight: 0,
            refused: Vec::new(),
        })
    }

    fn refuse(&mut self, request: WriteRequest, error: IoError) {
        self.refused.push(WriteCompletion {
            tag: request.tag,
            buf: request.buf,
            len: request.len,
            result: Err(error),
        });
    }

    fn finish(&self, request: &WriteRequest, result: i32) -> Result<(), IoError> {
        let data = request.buf.get(..request.len).unwrap_or(&[]);
        if result < 0 {
            self.file.poison();
            return Err(self.file.os_error(
                "write",
                request.offset,
                data.len(),
                std::io::Error::from_raw_os_error(-result),
            ));
        }
        let done = result as usize;
        if done < data.len() {
            use std::os::unix::fs::FileExt;
            let rest = data.get(done..).unwrap_or(&[]);
            self.file
                .file
                .write_all_at(rest, request.offset + done as u64)
                .map_err(|e| {
                    self.file.poison();
                    self.file.os_error("write", request.offset, data.len(), e)
                })?;
        }
        Ok(())
    }

    fn collect(&mut self, out: &mut Vec<WriteCompletion>) {
        let ready: Vec<(u64, i32)> = self
            .ring
            .ring
            .completion()
            .map(|cqe| (cqe.user_data(), cqe.result()))
            .collect();
        for (slot, result) in ready {
            let Some(request) = self.slots.get_mut(slot as usize).and_then(Option::take) else {
                continue;
            };
            self.in_flight -= 1;
            let result = self.finish(&request, result);
            out.push(WriteCompletion {
                tag: request.tag,
                buf: request.buf,
                len: request.len,
                result,
            });
        }
    }
}

impl WriteQueue for UringWriteQueue {
    fn depth(&self) -> usize {
        self.depth
    }
    fn in_flight(&self) -> usize {
        self.in_flight + self.refused.len()
    }
    fn submit(&mut self, request: WriteRequest) {
        if let Err(error) = self.file.check_poisoned().and_then(|()| {
            let data = request.buf.get(..request.len).unwrap_or(&[]);
            self.file
                .check_aligned(request.offset, data.len(), data.as_ptr())
        }) {
            self.refuse(request, error);
            return;
        }
        let Some(slot) = self.slots.iter().position(Option::is_none) else {
            let error = path_error(
                "queue",
                &self.file.path,
                std::io::Error::other("more writes than the queue's depth"),
            );
            self.refuse(request, error);
            return;
        };
        let ptr = request.buf.as_ptr();
        let len = request.len.min(request.buf.len()) as u32;
        let fd = self.file.raw_fd();
        let at = request.offset;
        // A buffer in registered memory goes by its index: the kernel pins nothing for it.
        let entry = match (
            self.ring.fixed_buffer(ptr, len as usize),
            self.ring.fixed_file,
        ) {
            (Some(index), true) => opcode::WriteFixed::new(types::Fixed(0), ptr, len, index)
                .offset(at)
                .build(),
            (Some(index), false) => opcode::WriteFixed::new(types::Fd(fd), ptr, len, index)
                .offset(at)
                .build(),
            (None, true) => opcode::Write::new(types::Fixed(0), ptr, len)
                .offset(at)
                .build(),
            (None, false) => opcode::Write::new(types::Fd(fd), ptr, len)
                .offset(at)
                .build(),
        }
        .user_data(slot as u64);
        // SAFETY: the buffer is owned by `slots[slot]` until the completion of this entry is
        // reaped (`collect`), and `Drop` reaps every entry before the buffers are freed.
        let mut pushed = unsafe { self.ring.ring.submission().push(&entry) }.is_ok();
        if !pushed && self.ring.ring.submit().is_ok() {
            // SAFETY: as above.
            pushed = unsafe { self.ring.ring.submission().push(&entry) }.is_ok();
        }
        if !pushed {
            let error = path_error(
                "queue",
                &self.file.path,
                std::io::Error::other("io_uring submission queue full"),
            );
            self.refuse(request, error);
            return;
        }
        if let Some(entry) = self.slots.get_mut(slot) {
            *entry = Some(request);
        }
        self.in_flight += 1;
        // Into the kernel now: the write must not wait for the next reap to start. An entry
        // not taken stays queued and goes with the next enter (the reap's wait); a ring that
        // cannot enter at all shows there.
        let _ = self.ring.submit_and_wait(0);
    }
    fn reap(&mut self, wait: bool, out: &mut Vec<WriteCompletion>) {
        let first = out.len();
        out.append(&mut self.refused);
        self.collect(out);
        if !wait || out.len() > first || self.in_flight == 0 {
            return;
        }
        if let Err(error) = self.ring.submit_and_wait(1) {
            // The ring is broken: every write still in it is reported failed. Their buffers
            // may still be in the kernel's hands, so they are leaked, never freed under it.
            self.file.poison();
            for slot in self.slots.iter_mut() {
                if let Some(request) = slot.take() {
                    out.push(WriteCompletion {
                        tag: request.tag,
                        buf: AlignedBuf::zeroed(0),
                        len: request.len,
                        result: Err(self.file.os_error(
                            "io_uring wait",
                            request.offset,
                            request.len,
                            std::io::Error::new(error.kind(), error.to_string()),
                        )),
                    });
                    std::mem::forget(request.buf);
                }
            }
            self.in_flight = 0;
            return;
        }
        self.collect(out);
    }
}

impl Drop for UringWriteQueue {
    fn drop(&mut self) {
        // Module invariant: no buffer is freed while the kernel may still read it.
        let mut sink = Vec::new();
        while self.in_flight > 0 {
            if self.ring.submit_and_wait(1).is_err() {
                for slot in self.slots.iter_mut() {
                    if let Some(request) = slot.take() {
                        std::mem::forget(request.buf);
                    }
                }
                return;
            }
            sink.clear();
            self.collect(&mut sink);
        }
    }
}

/// One completion of a [`UringQueue`]: which slot, and bytes moved or the error.
#[derive(Debug)]
pub struct Completion {
    pub slot: usize,
    pub result: Result<usize, std::io::Error>,
}

/// A fixed set of buffers kept in flight against one file; see the module header. Use it from
/// the thread that made it (its ring may be a single-issuer ring).
pub struct UringQueue {
    ring: Ring,
    buffers: Vec<AlignedBuf>,
    busy: Vec<bool>,
    in_flight: usize,
    registered_buffers: bool,
    file: Arc<UringFile>,
}

impl std::fmt::Debug for UringQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringQueue")
            .field("depth", &self.buffers.len())
            .field("in_flight", &self.in_flight)
            .field("registered_buffers", &self.registered_buffers)
            .field("fixed_file", &self.ring.fixed_file)
            .finish()
    }
}

impl UringQueue {
    pub fn depth(&self) -> usize {
        self.buffers.len()
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Did the kernel accept the buffers as registered (fixed) buffers?
    pub fn registered_buffers(&self) -> bool {
        self.registered_buffers
    }

    /// The buffer of an idle slot, to fill before a write or read after a completion.
    /// `None` while the slot is in flight.
    pub fn buffer_mut(&mut self, slot: usize) -> Option<&mut [u8]> {
        if self.busy.get(slot).copied().unwrap_or(true) {
            return None;
        }
        self.buffers.get_mut(slot).map(|b| &mut b[..])
    }

    /// Queues slot `slot` for a read (or write) of its whole buffer at `offset`. Takes effect at
    /// the next [`UringQueue::submit_and_wait`].
    pub fn push(&mut self, slot: usize, offset: u64, write: bool) -> Result<(), IoError> {
        let file = &self.file.inner;
        file.check_poisoned()?;
        let Some(buffer) = self.buffers.get(slot) else {
            return Err(path_error(
                "queue",
                &file.path,
                std::io::Error::other(format!("no slot {slot}")),
            ));
        };
        if self.busy[slot] {
            return Err(path_error(
                "queue",
                &file.path,
                std::io::Error::other(format!("slot {slot} is in flight")),
            ));
        }
        file.check_aligned(offset, buffer.len(), buffer.as_ptr())?;
        let ptr = buffer.as_ptr() as *mut u8;
        let len = buffer.len() as u32;
        let fd = file.raw_fd();
        let index = slot as u16;
        macro_rules! build {
            ($plain:ident, $fixed:ident) => {
                match (self.ring.fixed_file, self.registered_buffers) {
                    (true, true) => opcode::$fixed::new(types::Fixed(0), ptr, len, index)
                        .offset(offset)
                        .build(),
                    (false, true) => opcode::$fixed::new(types::Fd(fd), ptr, len, index)
                        .offset(offset)
                        .build(),
                    (true, false) => opcode::$plain::new(types::Fixed(0), ptr, len)
                        .offset(offset)
                        .build(),
                    (false, false) => opcode::$plain::new(types::Fd(fd), ptr, len)
                        .offset(offset)
                        .build(),
                }
            };
        }
        let entry = if write {
            build!(Write, WriteFixed)
        } else {
            build!(Read, ReadFixed)
        }
        .user_data(slot as u64);
        // SAFETY: the buffer belongs to this queue and is not freed before its completion is
        // reaped (Drop drains); the slot is marked busy so it is not handed out meanwhile.
        if unsafe { self.ring.ring.submission().push(&entry) }.is_err() {
            // The ring has an entry per slot, so it cannot be full; submit and retry once.
            self.ring
                .ring
                .submit()
                .map_err(|e| file.os_error("io_uring submit", offset, len as usize, e))?;
            // SAFETY: as above.
            unsafe { self.ring.ring.submission().push(&entry) }
                .map_err(|_| path_error("queue", &file.path, std::io::Error::other("ring full")))?;
        }
        self.busy[slot] = true;
        self.in_flight += 1;
        Ok(())
    }

    /// Submits what was pushed and waits until at least `want` completions are ready.
    pub fn submit_and_wait(&mut self, want: usize) -> Result<(), IoError> {
        let want = want.min(self.in_flight);
        self.ring
            .submit_and_wait(want)
            .map_err(|e| self.file.inner.os_error("io_uring submit", 0, 0, e))
    }

    /// Moves the ready completions into `out` and frees their slots.
    pub fn reap(&mut self, out: &mut Vec<Completion>) {
        for cqe in self.ring.ring.completion() {
            let slot = cqe.user_data() as usize;
            if let Some(busy) = self.busy.get_mut(slot) {
                *busy = false;
                self.in_flight -= 1;
            }
            let r = cqe.result();
            let result = if r < 0 {
                Err(std::io::Error::from_raw_os_error(-r))
            } else {
                Ok(r as usize)
            };
            out.push(Completion { slot, result });
        }
    }
}

impl Drop for UringQueue {
    fn drop(&mut self) {
        // Module invariant: no buffer is freed while the kernel may still write into it.
        let mut sink = Vec::new();
        while self.in_flight > 0 {
            if self.ring.submit_and_wait(1).is_err() {
                // The ring is unusable; leaking the buffers is the only safe choice left.
                std::mem::forget(std::mem::take(&mut self.buffers));
                return;
            }
            sink.clear();
            self.reap(&mut sink);
        }
    }
}
