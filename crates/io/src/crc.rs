//! CRC-32C (Castagnoli), the checksum of every page, log frame, checkpoint slot and flush-map
//! block jetproof writes.
//!
//! One function for every crate, with two implementations that give the same values (test below,
//! against a bit-at-a-time reference): `crc-fast`, which folds with carry-less multiplication
//! (VPCLMULQDQ over 512-bit registers where the CPU has AVX-512, 128-bit PCLMULQDQ otherwise),
//! and the `crc32c` crate, which runs the SSE 4.2 / ARMv8 `crc32` instruction on three streams at
//! once. Which is faster depends on the CPU, by a factor of two to four either way: on the Xeon
//! with AVX-512 of 2026-12-01 an 8 KiB page block took 0.24 µs with `crc-fast` against 1.10 µs;
//! on the AMD EPYC without AVX-512 of 2026-12-07, 1.24 µs against 0.62 µs out of the CPU's caches
//! (`docs/journal/2026-12-07-fast-storage-crc.md`). The page checksums of every read and write
//! are ~11% of a run's CPU on RAM-backed storage, so the process times both once, on first use,
//! on 8 KiB blocks (the unit of the page checks) and keeps the faster ([`implementation`] names
//! it; the test log says it).

use crc_fast::{CrcAlgorithm, Digest};
use std::sync::OnceLock;
use std::time::Instant;

/// A CRC-32C implementation: the CRC-32C of the bytes whose CRC-32C is `crc`, followed by `data`.
type Append = fn(u32, &[u8]) -> u32;

/// The implementations, by name, in the order they are tried.
const IMPLEMENTATIONS: [(&str, Append); 2] = [
    ("crc-fast", crc_fast_append),
    ("crc32c", crc32c_crate_append),
];

fn crc_fast_append(crc: u32, data: &[u8]) -> u32 {
    // The digest's state is the register before the final inversion: the inverse of a CRC.
    let mut digest = Digest::new_with_init_state(CrcAlgorithm::Crc32Iscsi, u64::from(!crc));
    digest.update(data);
    digest.finalize() as u32
}

fn crc32c_crate_append(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

static CHOSEN: OnceLock<(&'static str, Append)> = OnceLock::new();

/// The implementation this process uses, timed once: each on every 8 KiB block of a 1 MiB
/// region (more than a core's L1 and L2 hold on the CPUs measured, as pages arriving from the
/// storage are), the two taken in turn, fifteen times; the least time of each counts (a shared
/// machine only ever adds time, and taking them in turn gives both the same conditions), ties go
/// to the first. About 4 ms, once per process.
fn chosen() -> (&'static str, Append) {
    *CHOSEN.get_or_init(|| {
        let region: Vec<u8> = (0..1u32 << 20)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let mut least = [u128::MAX; IMPLEMENTATIONS.len()];
        let mut crc = 0u32;
        for _ in 0..15 {
            for (at, (_, append)) in IMPLEMENTATIONS.iter().enumerate() {
                let started = Instant::now();
                for block in region.chunks_exact(8192) {
                    crc = append(crc, std::hint::black_box(block));
                }
                least[at] = least[at].min(started.elapsed().as_nanos());
            }
        }
        std::hint::black_box(crc);
        let fastest = (0..IMPLEMENTATIONS.len())
            .min_by_key(|&at| least[at])
            .unwrap_or(0);
        IMPLEMENTATIONS[fastest]
    })
}

/// The name of the CRC-32C implementation this process chose (`crc-fast` or `crc32c`): every
/// test log says it beside the I/O engine, since CPU per I/O on fast storage depends on it.
pub fn implementation() -> &'static str {
    chosen().0
}

/// CRC-32C of `data`.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c_append(0, data)
}

/// CRC-32C of the bytes whose CRC-32C is `crc`, followed by `data` (as `crc32c::crc32c_append`).
#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    (chosen().1)(crc, data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Bit-at-a-time CRC-32C (reflected polynomial 0x82F63B78), the definition.
    fn reference(crc: u32, data: &[u8]) -> u32 {
        let mut register = !crc;
        for &byte in data {
            register ^= u32::from(byte);
            for _ in 0..8 {
                let mask = 0u32.wrapping_sub(register & 1);
                register = (register >> 1) ^ (0x82F6_3B78 & mask);
            }
        }
        !register
    }

    #[test]
    fn the_chosen_implementation_is_one_of_the_two() {
        let name = implementation();
        assert!(
            IMPLEMENTATIONS.iter().any(|(known, _)| *known == name),
            "chose {name}"
        );
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn both_implementations_match_the_definition_for_every_length_and_seed() {
        for (name, append) in IMPLEMENTATIONS {
            matches_the_definition(name, append);
        }
    }

    fn matches_the_definition(name: &str, crc32c_append: Append) {
        let crc32c = |data: &[u8]| crc32c_append(0, data);
        // The standard check value of CRC-32C.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283, "{name}");
        let seed = jetproof_test_support::announced_seed("crc32c");
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut data = vec![0u8; 33_000];
        rng.fill(&mut data[..]);
        let lengths = (0..300).chain([1000, 4096, 8184, 8192, 8200, 32_768, 33_000]);
        for length in lengths {
            let start = rng.random_range(0..=data.len() - length);
            let slice = &data[start..start + length];
            let crc: u32 = rng.random();
            assert_eq!(
                crc32c_append(crc, slice),
                reference(crc, slice),
                "{name}, seed {seed}: length {length}, start {start}, crc {crc:#x}"
            );
        }
        // Appending in pieces is the CRC of the whole.
        let whole = crc32c(&data[..10_000]);
        assert_eq!(
            crc32c_append(crc32c(&data[..3_333]), &data[3_333..10_000]),
            whole,
            "{name}"
        );
    }
}
