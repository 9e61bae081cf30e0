//! How fast one core seals and verifies pages with jetproof's ECC checksum
//! (`crates/engine/src/checksum.rs`), for every page size, apart from any I/O.
//!
//! Pages are built in memory (256 MiB, deterministic content, so runs are comparable), sealed,
//! then verified several times; the figure is bytes of pages per second per core. A verify of a
//! good page is the fast path (a CRC-32C per 8 KiB block); the cost of the rare correcting path
//! is reported per damaged page.

use std::time::Instant;

use jetproof_engine::checksum::{PageCheck, correct, seal, verify};

const OFFSET_PAGE_NUMBER: usize = 32;
const BODY_START: usize = 80;
const TOTAL_BYTES: usize = 256 << 20;
const VERIFY_ROUNDS: usize = 5;

fn main() {
    println!("| page size | seal GB/s | verify GB/s | verify pages/s | correct one flipped bit, µs/page |");
    println!("| ---: | ---: | ---: | ---: | ---: |");
    for page_size in [4096usize, 8192, 16384, 32768] {
        let pages = TOTAL_BYTES / page_size;
        let mut buf = vec![0u8; pages * page_size];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for (number, page) in buf.chunks_exact_mut(page_size).enumerate() {
            page[OFFSET_PAGE_NUMBER..OFFSET_PAGE_NUMBER + 4]
                .copy_from_slice(&(number as u32).to_le_bytes());
            for word in page[BODY_START..].chunks_exact_mut(8) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                word.copy_from_slice(&state.to_le_bytes());
            }
        }

        let started = Instant::now();
        for page in buf.chunks_exact_mut(page_size) {
            seal(page);
        }
        let seal_seconds = started.elapsed().as_secs_f64();

        let started = Instant::now();
        let mut good = 0usize;
        for _ in 0..VERIFY_ROUNDS {
            for (number, page) in buf.chunks_exact(page_size).enumerate() {
                if verify(page, number as u32) == PageCheck::Good {
                    good += 1;
                }
            }
        }
        let verify_seconds = started.elapsed().as_secs_f64() / VERIFY_ROUNDS as f64;
        assert_eq!(good, pages * VERIFY_ROUNDS, "every sealed page verifies good");

        // The correcting path: one flipped bit per page, on the first 4096 pages.
        let sample = pages.min(4096);
        let started = Instant::now();
        for (number, page) in buf.chunks_exact_mut(page_size).take(sample).enumerate() {
            let bit = (number * 7919) % (page_size * 8);
            page[bit / 8] ^= 1 << (bit % 8);
            let check = correct(page, number as u32);
            assert_eq!(check, PageCheck::Correctable { bit });
        }
        let correct_us = started.elapsed().as_secs_f64() * 1e6 / sample as f64;

        let bytes = buf.len() as f64;
        println!(
            "| {} KiB | {:.2} | {:.2} | {:.0} | {:.1} |",
            page_size / 1024,
            bytes / seal_seconds / 1e9,
            bytes / verify_seconds / 1e9,
            pages as f64 / verify_seconds,
            correct_us
        );
    }
}
