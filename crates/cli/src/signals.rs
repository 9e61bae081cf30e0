//! The one stop flag of the process, raised by SIGINT (Ctrl-C), SIGTERM and SIGHUP alike.
//!
//! Why one flag for the whole process: the signal handler can be installed once only (`ctrlc`
//! refuses a second), and `run` may first initialise missing databases (`init`'s stop path) and
//! then run the test (the run's stop path); both must see the same signals. Each command that has
//! a stop path asks for the flag with the sentence to print when it is raised.
//!
//! What a signal does: the first one raises the flag and prints the command's sentence; the
//! command ends its current phase, closes the databases cleanly and writes what it has
//! (`result.json` marked interrupted). A second signal quits at once with exit code 130,
//! saying that databases left open need `jetproof recover`. A service manager's SIGTERM (systemd,
//! `docker stop`, a CI timeout) and a closed terminal's SIGHUP are handled as Ctrl-C is, so they
//! do not leave a database dirty and a run without its results. Commands without a stop path
//! (`recover`, `plan`, `probe`, `report`...) keep the default action of these signals: `recover`
//! is safe to run again after it is killed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

struct Handler {
    stop: Arc<AtomicBool>,
    /// What the first signal prints: the current command's stop path.
    message: Mutex<&'static str>,
}

static HANDLER: OnceLock<Handler> = OnceLock::new();

/// The process's stop flag; the first call installs the handler of SIGINT, SIGTERM and SIGHUP.
/// `message` is printed (after "jetproof: ") when the first signal arrives; a later call
/// replaces it, so the sentence is the current phase's.
pub fn stop_flag(message: &'static str) -> Arc<AtomicBool> {
    let handler = HANDLER.get_or_init(|| {
        let handler = Handler {
            stop: Arc::new(AtomicBool::new(false)),
            message: Mutex::new(message),
        };
        if let Err(error) = ctrlc::set_handler(on_signal) {
            errln!(
                "jetproof: warning: cannot handle SIGINT, SIGTERM and SIGHUP ({error}); a signal will stop jetproof at once"
            );
        }
        handler
    });
    if let Ok(mut slot) = handler.message.lock() {
        *slot = message;
    }
    handler.stop.clone()
}

fn on_signal() {
    let Some(handler) = HANDLER.get() else {
        return;
    };
    if handler.stop.swap(true, Ordering::Relaxed) {
        errln!(
            "jetproof: interrupted again: quitting now; databases that were open were not closed and need `jetproof recover`"
        );
        std::process::exit(130);
    }
    let message = handler
        .message
        .lock()
        .map(|m| *m)
        .unwrap_or("interrupted: stopping");
    errln!("jetproof: {message}");
}

/// The stop path of a test run (performance, stress, soft recovery, backup).
pub const RUN_STOPPING: &str = "interrupted: stopping cleanly and writing the results (a second Ctrl-C, SIGTERM or SIGHUP quits at once)";
