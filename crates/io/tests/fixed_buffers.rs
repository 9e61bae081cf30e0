//! io_uring's registered buffers (`jetproof_io::fixed`): memory registered once is read and
//! written by index, every byte lands where it would have without it, and memory released and
//! allocated again is never reached through a stale registration.

use std::path::PathBuf;

use jetproof_io::uring::{UringBackend, thread_fixed_ios};
use jetproof_io::{AlignedBuf, AlignedSlab, IoBackend, IoClass, OpenOptions, WriteRequest};

fn disk_dir() -> tempfile::TempDir {
    let base = std::env::var_os("JETPROOF_TEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
    tempfile::tempdir_in(base).expect("temp dir on disk")
}

/// Whether this kernel can share a registered table between rings (Linux 6.12).
fn kernel_clones_buffers() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release.trim().split(['.', '-']);
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (major, minor) >= (6, 12)
}

fn pattern(len: usize, seed: u8) -> AlignedBuf {
    let mut buf = AlignedBuf::zeroed(len);
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(31).wrapping_add(seed);
    }
    buf
}

#[test]
fn registered_memory_is_read_and_written_by_index_and_never_through_a_stale_slot() {
    let backend = match UringBackend::new() {
        Ok(backend) => backend,
        Err(error) => {
            eprintln!("io_uring unavailable here ({error}): registered buffers not tested");
            return;
        }
    };
    let expect_fixed = jetproof_io::fixed::enabled() && kernel_clones_buffers();
    let tmp = disk_dir();
    let path = tmp.path().join("fixed.dat");
    let file = backend
        .open(&path, &OpenOptions::create())
        .expect("create (direct I/O)");
    let block = 32 * 1024;

    // A registered buffer written, read back into a registered one and into a plain one.
    let mut written = pattern(block * 4, 1);
    written.register_fixed();
    assert_eq!(written.is_registered(), jetproof_io::fixed::enabled());
    let before = thread_fixed_ios();
    file.write_at(&written, 0, IoClass::DbWrite).expect("write");
    let mut registered = AlignedBuf::zeroed(block * 4);
    registered.register_fixed();
    file.read_at(&mut registered, 0, IoClass::DbRead)
        .expect("read");
    assert_eq!(&registered[..], &written[..]);
    // Part of a registered buffer, at an offset inside it, is still inside its region.
    file.read_at(
        &mut registered[block..block * 2],
        block as u64,
        IoClass::DbRead,
    )
    .expect("read a part");
    assert_eq!(&registered[block..block * 2], &written[block..block * 2]);
    let mut plain = AlignedBuf::zeroed(block * 4);
    file.read_at(&mut plain, 0, IoClass::DbRead).expect("read");
    assert_eq!(&plain[..], &written[..]);
    let fixed = thread_fixed_ios() - before;
    if expect_fixed {
        assert_eq!(
            fixed, 3,
            "the write and both reads into registered memory go by index"
        );
    } else {
        assert_eq!(fixed, 0);
    }

    // Released and allocated again, many times (the allocator hands the same addresses back):
    // each new buffer must receive the file's bytes, not an old registration's pages.
    for round in 0..20u8 {
        drop(registered);
        registered = AlignedBuf::zeroed(block * 4);
        registered.register_fixed();
        let fresh = pattern(block, round);
        file.write_at(&fresh, (round as u64 % 4) * block as u64, IoClass::DbWrite)
            .expect("write");
        file.read_at(&mut registered, 0, IoClass::DbRead)
            .expect("read");
        let at = (round as usize % 4) * block;
        assert_eq!(
            &registered[at..at + block],
            &fresh[..],
            "round {round}: the read did not land in the new buffer"
        );
    }

    // A slab's chunks are registered as they are allocated; its slots are read by index.
    let slab = AlignedSlab::try_new(block, 64, 16).expect("slab");
    // SAFETY: each slot index is handed out once, and the slots are dropped before the slab.
    let mut slots: Vec<_> = (0..64)
        .map(|i| unsafe { slab.slot(i) }.expect("slot"))
        .collect();
    let before = thread_fixed_ios();
    for (i, slot) in slots.iter_mut().enumerate().take(8) {
        file.read_at(slot, ((i % 4) * block) as u64, IoClass::DbRead)
            .expect("read into a slot");
    }
    if expect_fixed {
        assert_eq!(thread_fixed_ios() - before, 8);
    }
    drop(slots);
    drop(slab);

    // The write-back queue writes registered buffers by index too, and they land.
    let mut queue = file
        .native_write_queue(4, IoClass::DbWrite)
        .expect("io_uring has a queue of its own")
        .expect("queue");
    for i in 0..4u64 {
        let mut buf = pattern(block, 100 + i as u8);
        buf.register_fixed();
        queue.submit(WriteRequest {
            tag: i,
            offset: i * block as u64,
            len: block,
            buf,
        });
    }
    let mut done = Vec::new();
    while done.len() < 4 {
        queue.reap(true, &mut done);
    }
    for completion in &done {
        completion.result.as_ref().expect("queued write");
    }
    drop(done);
    let mut back = AlignedBuf::zeroed(block * 4);
    file.read_at(&mut back, 0, IoClass::DbRead).expect("read");
    for i in 0..4 {
        assert_eq!(
            &back[i * block..(i + 1) * block],
            &pattern(block, 100 + i as u8)[..],
            "queued write {i}"
        );
    }
}
