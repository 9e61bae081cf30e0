//! A fuzz harness for the code that reads hostile input (issue 34): the job parser and checker,
//! the result reader (`result.json`, `samples.csv`, as `report` reads them), and the log and page
//! decoders. Stable Rust and nothing beyond cargo: a seeded mutation engine, no coverage
//! feedback (cargo-fuzz needs nightly; AFL needs its own tool installed).
//!
//! How it runs: each target has a corpus of valid inputs made by jetproof's own encoders (or its
//! job files and result fixtures). Input `i` of a run with seed `S` is a corpus entry changed by
//! 1 to 8 random mutations drawn from an RNG seeded by `(S, i)` alone, so any one input replays
//! without the ones before it (`JETPROOF_FUZZ_REPLAY=i`). The target's check runs under
//! `catch_unwind`: a panic is a crash, recorded with its seed and index. A watchdog thread aborts
//! the process, naming the seed and index, when one input runs longer than [`HANG_LIMIT`]: a
//! hang is reported, never waited on. Inputs slower than [`SLOW_INPUT`] are counted.
//!
//! The mutations are byte-level (bit flips, bytes and integers of edge values, inserts, deletes,
//! duplicated and spliced ranges, truncation) and, for text, token-level (a number replaced by
//! an edge value such as `1e308`, `nan`, `18446744073709551615`; a line repeated or dropped), so
//! a TOML or JSON input stays parseable often enough to reach the checks behind the parser.

pub mod targets;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One input running longer than this is a hang: the watchdog aborts the process.
pub const HANG_LIMIT: Duration = Duration::from_secs(10);

/// Inputs slower than this are counted (and the slowest kept) in [`Figures`].
pub const SLOW_INPUT: Duration = Duration::from_millis(100);

/// A fuzz target: a name, valid inputs to start from, whether they are text, and the check.
pub struct Target {
    pub name: &'static str,
    pub corpus: Vec<Vec<u8>>,
    /// Text inputs also get token-level mutations.
    pub text: bool,
    /// Runs one input; must return (any result) without panicking, in bounded time. An `Err`
    /// is a failed assertion (a round trip that did not hold), counted as a crash.
    pub check: fn(&[u8]) -> Result<(), String>,
}

/// One crash: the input that caused it and what it said.
#[derive(Debug, Clone)]
pub struct Crash {
    pub index: u64,
    pub message: String,
    pub input: Vec<u8>,
}

/// What a run tried and found.
#[derive(Debug, Clone)]
pub struct Figures {
    pub target: &'static str,
    pub seed: u64,
    pub inputs: u64,
    pub crashes: Vec<Crash>,
    /// Inputs slower than [`SLOW_INPUT`] (a hang aborts the run instead).
    pub slow_inputs: u64,
    pub slowest: Duration,
    pub elapsed: Duration,
}

impl Figures {
    /// One line: target, inputs, crashes, slow inputs, slowest, time, rate.
    pub fn summary(&self) -> String {
        format!(
            "{}: seed {}, {} inputs, {} crashes, {} inputs over {} ms (slowest {:.1} ms), {:.1} s, {:.0} inputs/s",
            self.target,
            self.seed,
            self.inputs,
            self.crashes.len(),
            self.slow_inputs,
            SLOW_INPUT.as_millis(),
            self.slowest.as_secs_f64() * 1e3,
            self.elapsed.as_secs_f64(),
            self.inputs as f64 / self.elapsed.as_secs_f64().max(1e-9)
        )
    }
}

/// The input `index` of a run with `seed`: a function of the two alone.
pub fn input(target: &Target, seed: u64, index: u64) -> Vec<u8> {
    let mut rng = StdRng::seed_from_u64(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let corpus = &target.corpus;
    let mut bytes = corpus
        .get(rng.random_range(0..corpus.len().max(1)))
        .cloned()
        .unwrap_or_default();
    // Every 64th input is the corpus entry itself (the valid path must keep working).
    if index.is_multiple_of(64) {
        return bytes;
    }
    for _ in 0..rng.random_range(1..=8) {
        mutate(&mut bytes, corpus, target.text, &mut rng);
    }
    bytes
}

const EDGE_BYTES: [u8; 8] = [0, 1, 0x7f, 0x80, 0xff, b'"', b'\n', b'['];
const EDGE_INTEGERS: [u64; 10] = [
    0,
    1,
    0x7f,
    0xff,
    0xffff,
    0x7fff_ffff,
    0xffff_ffff,
    0x8000_0000_0000_0000,
    u64::MAX,
    4096,
];
const EDGE_TOKENS: [&str; 24] = [
    "0",
    "-1",
    "1",
    "-0",
    "1e308",
    "-1e308",
    "1e-300",
    "nan",
    "inf",
    "-inf",
    "NaN",
    "Infinity",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "-9223372036854775808",
    "4294967296",
    "0.0000001",
    "\"18446744073709551615s\"",
    "\"1000000000000000EiB\"",
    "\"\"",
    "[]",
    "{}",
    "null",
];

fn mutate(bytes: &mut Vec<u8>, corpus: &[Vec<u8>], text: bool, rng: &mut StdRng) {
    let len = bytes.len();
    let at = |rng: &mut StdRng| rng.random_range(0..len.max(1));
    let choices = if text { 12 } else { 9 };
    match rng.random_range(0..choices) {
        0 if len > 0 => {
            let i = at(rng);
            bytes[i] ^= 1 << rng.random_range(0..8);
        }
        1 if len > 0 => {
            let i = at(rng);
            bytes[i] = if rng.random_bool(0.5) {
                EDGE_BYTES[rng.random_range(0..EDGE_BYTES.len())]
            } else {
                rng.random()
            };
        }
        2 if len >= 8 => {
            let width = [1usize, 2, 4, 8][rng.random_range(0..4)];
            let i = rng.random_range(0..=len - width);
            let value = EDGE_INTEGERS[rng.random_range(0..EDGE_INTEGERS.len())];
            let value = if rng.random_bool(0.5) {
                value
            } else {
                value.wrapping_add(rng.random_range(0..3)).wrapping_sub(1)
            };
            bytes[i..i + width].copy_from_slice(&value.to_le_bytes()[..width]);
        }
        3 => {
            let i = rng.random_range(0..=len);
            let count = rng.random_range(1..=16);
            let new: Vec<u8> = (0..count).map(|_| rng.random()).collect();
            bytes.splice(i..i, new);
        }
        4 if len > 0 => {
            let i = at(rng);
            let end = (i + rng.random_range(1..=64)).min(len);
            bytes.drain(i..end);
        }
        5 if len > 0 => {
            let i = at(rng);
            let end = (i + rng.random_range(1..=256)).min(len);
            let copy = bytes[i..end].to_vec();
            let to = rng.random_range(0..=len);
            bytes.splice(to..to, copy);
        }
        6 if len > 0 => {
            let keep = rng.random_range(0..len);
            bytes.truncate(keep);
        }
        7 if !corpus.is_empty() => {
            let other = &corpus[rng.random_range(0..corpus.len())];
            if !other.is_empty() && len > 0 {
                let from = rng.random_range(0..other.len());
                let end = (from + rng.random_range(1..=512)).min(other.len());
                let i = at(rng);
                let over = (i + (end - from)).min(len);
                bytes.splice(i..over, other[from..end].iter().copied());
            }
        }
        8 if len > 0 => {
            // A run of one byte: long keys, long names, zeroed regions.
            let i = at(rng);
            let count = rng.random_range(1..=1024);
            let byte = EDGE_BYTES[rng.random_range(0..EDGE_BYTES.len())];
            let end = (i + count).min(len);
            bytes[i..end].fill(byte);
        }
        9 => replace_number(bytes, rng),
        10 | 11 => line_edit(bytes, rng),
        _ => {}
    }
}

/// Replaces one number (a run of digits, with its sign, point and exponent) by an edge token.
fn replace_number(bytes: &mut Vec<u8>, rng: &mut StdRng) {
    let starts: Vec<usize> = (0..bytes.len())
        .filter(|&i| bytes[i].is_ascii_digit() && (i == 0 || !bytes[i - 1].is_ascii_alphanumeric()))
        .collect();
    let token = EDGE_TOKENS[rng.random_range(0..EDGE_TOKENS.len())].as_bytes();
    let Some(&start) = starts.get(rng.random_range(0..starts.len().max(1))) else {
        return;
    };
    let mut end = start;
    while end < bytes.len() && matches!(bytes[end], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
    {
        end += 1;
    }
    bytes.splice(start..end, token.iter().copied());
}

/// Repeats or drops one line (a TOML table header repeated, a key dropped).
fn line_edit(bytes: &mut Vec<u8>, rng: &mut StdRng) {
    let mut bounds = vec![0];
    bounds.extend(
        bytes
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .map(|(i, _)| i + 1),
    );
    if bounds.len() < 2 {
        return;
    }
    let line = rng.random_range(0..bounds.len() - 1);
    let (start, end) = (bounds[line], bounds[line + 1]);
    if rng.random_bool(0.5) {
        let copy = bytes[start..end].to_vec();
        let times = rng.random_range(1..=4);
        for _ in 0..times {
            bytes.splice(end..end, copy.iter().copied());
        }
    } else {
        bytes.drain(start..end);
    }
}

thread_local! {
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static LAST_PANIC: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// A panic hook that keeps the message of a panic on a fuzzing thread (printed with the crash,
/// not as a million lines) and leaves other threads' panics to the default hook.
fn install_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if QUIET.with(|q| q.get()) {
                let message = format!("{info}");
                LAST_PANIC.with(|p| *p.borrow_mut() = message);
            } else {
                default(info);
            }
        }));
    });
}

/// Runs `count` inputs of `target` from `seed` (or only input `replay`, when given).
pub fn run(target: &Target, seed: u64, count: u64, replay: Option<u64>) -> Figures {
    install_hook();
    // The watchdog: the index of the input running and when it began (ms since `epoch`, 0 when
    // idle). An input past HANG_LIMIT aborts the process with its seed and index.
    let epoch = Instant::now();
    let running = Arc::new((AtomicU64::new(u64::MAX), AtomicU64::new(0)));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watchdog = {
        let (running, done, name) = (running.clone(), done.clone(), target.name);
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                std::thread::park_timeout(Duration::from_millis(200));
                let began = running.1.load(Ordering::Relaxed);
                let now = epoch.elapsed().as_millis() as u64;
                if began != 0 && now.saturating_sub(began) > HANG_LIMIT.as_millis() as u64 {
                    let index = running.0.load(Ordering::Relaxed);
                    eprintln!(
                        "fuzz {name}: HANG: input {index} of seed {seed} ran over {} s; replay with \
                         JETPROOF_SEED={seed} JETPROOF_FUZZ_REPLAY={index}",
                        HANG_LIMIT.as_secs()
                    );
                    std::process::abort();
                }
            }
        })
    };
    let started = Instant::now();
    let mut figures = Figures {
        target: target.name,
        seed,
        inputs: 0,
        crashes: Vec::new(),
        slow_inputs: 0,
        slowest: Duration::ZERO,
        elapsed: Duration::ZERO,
    };
    let indices: Box<dyn Iterator<Item = u64>> = match replay {
        Some(index) => Box::new(std::iter::once(index)),
        None => Box::new(0..count),
    };
    QUIET.with(|q| q.set(true));
    for index in indices {
        let bytes = input(target, seed, index);
        running.0.store(index, Ordering::Relaxed);
        running
            .1
            .store(epoch.elapsed().as_millis().max(1) as u64, Ordering::Relaxed);
        let began = Instant::now();
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| (target.check)(&bytes)));
        let took = began.elapsed();
        running.1.store(0, Ordering::Relaxed);
        figures.inputs += 1;
        if took > SLOW_INPUT {
            figures.slow_inputs += 1;
        }
        figures.slowest = figures.slowest.max(took);
        let message = match outcome {
            Ok(Ok(())) => None,
            Ok(Err(failed)) => Some(format!("check failed: {failed}")),
            Err(_) => Some(LAST_PANIC.with(|p| p.borrow().clone())),
        };
        if let Some(message) = message {
            figures.crashes.push(Crash {
                index,
                message,
                input: bytes,
            });
        }
    }
    QUIET.with(|q| q.set(false));
    figures.elapsed = started.elapsed();
    done.store(true, Ordering::Relaxed);
    watchdog.thread().unpark();
    let _ = watchdog.join();
    figures
}

/// Inputs per target: `JETPROOF_FUZZ_INPUTS`, else `default`.
pub fn inputs_from_env(default: u64) -> u64 {
    std::env::var("JETPROOF_FUZZ_INPUTS")
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(default)
}

/// The one input to replay: `JETPROOF_FUZZ_REPLAY`.
pub fn replay_from_env() -> Option<u64> {
    std::env::var("JETPROOF_FUZZ_REPLAY").ok()?.parse().ok()
}
