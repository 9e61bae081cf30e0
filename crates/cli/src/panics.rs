//! A panic anywhere stops everything (issue 34). A panic is a bug; before this hook a panic of
//! the main thread left the session threads writing (a database grew from 16 MiB to 1.5 GiB
//! while the first SIGTERM was ignored).
//!
//! The hook, installed first thing by `main`, runs on the thread that panicked, before any
//! unwinding: it says the panic's message and place once on stderr, lets the running command
//! write what it can ([`on_panic`]: a test writes `result.json` with verdict fail and the
//! message), and ends the process with [`EXIT_PANIC`]. No thread outlives it: every session,
//! flusher and log writer stops where it is, as in a crash, and the databases are left as a
//! crash leaves them (dirty, recovered by `jetproof recover`). A second panic on another thread
//! while the first is handled waits for the process to end.
//!
//! Tests inject a panic through `jetproof_procedures::test_hooks` (debug builds only).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The exit code of a process stopped by a panic (README's exit codes).
pub const EXIT_PANIC: i32 = 4;

type Writer = Box<dyn Fn(&str) + Send>;

static WRITER: Mutex<Option<Writer>> = Mutex::new(None);
static PANICKING: AtomicBool = AtomicBool::new(false);

/// Installs the hook. Called once, by `main`, before any command runs.
pub fn install() {
    std::panic::set_hook(Box::new(|info| {
        if PANICKING.swap(true, Ordering::SeqCst) {
            // Another thread is already writing what it can and will end the process.
            loop {
                std::thread::park();
            }
        }
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".to_string());
        let place = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let thread = std::thread::current();
        let thread = thread.name().unwrap_or("a worker");
        let text = format!("panicked on thread `{thread}`{place}: {message}");
        errln!(
            "jetproof: internal error (a bug), stopping every thread now: {text}; please report it"
        );
        // A writer that waits for a lock held by the panicking thread would hang: take it only
        // when it is free.
        if let Ok(guard) = WRITER.try_lock()
            && let Some(write) = guard.as_ref()
        {
            write(&text);
        }
        errln!("jetproof: databases that were open were not closed and need `jetproof recover`");
        std::process::exit(EXIT_PANIC);
    }));
}

/// What the running command writes when a thread panics: `write` gets the panic's message
/// and place. A later call replaces it (a `run` that initialises first, then tests).
pub fn on_panic(write: impl Fn(&str) + Send + 'static) {
    if let Ok(mut slot) = WRITER.lock() {
        *slot = Some(Box::new(write));
    }
}

/// The writer of a test run: `result.json` in `out` with verdict fail, marked interrupted, the
/// panic's message its reason; the job's parameters, no figures (what was measured is lost
/// with the threads).
pub fn write_failed_result(
    out: &jetproof_results::OutDir,
    test: jetproof_results::TestKind,
    job: &jetproof_job::Job,
) {
    let out = out.clone();
    let job = job.clone();
    let started_at = jetproof_results::now_rfc3339();
    let started = std::time::Instant::now();
    on_panic(move |message| {
        let mut result = jetproof_results::TestResult::new(
            test,
            started_at.clone(),
            started.elapsed().as_secs_f64(),
            jetproof_results::Parameters::of_job(&job),
        );
        result.interrupted = true;
        result.set_reasons(vec![format!(
            "jetproof stopped on an internal error (a bug): {message}"
        )]);
        match out.write_result(&result) {
            Ok(path) => errln!("jetproof: wrote {} (verdict fail)", path.display()),
            Err(e) => errln!("jetproof: could not write result.json: {e}"),
        }
    });
}
