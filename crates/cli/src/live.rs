//! The live view of a command (`docs/report.md`, "Live view"): on a terminal, one status line
//! redrawn by indicatif (each phase's status: warm-up, auto-tune steps, the measured window's
//! sample intervals, a checksum pass, a backup, log generation and replay, init); on a pipe or a
//! file, one plain line per sample interval (and every step's result); `--quiet`, nothing. All
//! on stderr: stdout keeps the final summary.

use std::io::IsTerminal as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use jetproof_procedures::live::{LiveSample, LiveView, PhaseStatus};

pub enum Live {
    Quiet,
    /// One line per `every` (a phase's status), plus every milestone and every sample.
    Plain {
        every: Duration,
        last: Mutex<Option<(Instant, String)>>,
    },
    Terminal(ProgressBar),
}

impl Live {
    /// The view for this process's stderr; a pipe gets a status line at most every `every`
    /// (the job's sample interval).
    pub fn new(quiet: bool, what: &str, every: Duration) -> Live {
        if quiet {
            return Live::Quiet;
        }
        if !std::io::stderr().is_terminal() {
            return Live::Plain {
                every,
                last: Mutex::new(None),
            };
        }
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {elapsed_precise} {wide_msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_message(format!("{what}: starting"));
        bar.enable_steady_tick(Duration::from_millis(200));
        Live::Terminal(bar)
    }

    /// The plain lines on a pipe or a file, and nothing on a terminal: for the commands that
    /// draw their own progress bars there (init, checksum, backup).
    pub fn for_pipe(quiet: bool, every: Duration) -> Live {
        if quiet || std::io::stderr().is_terminal() {
            return Live::Quiet;
        }
        Live::Plain {
            every,
            last: Mutex::new(None),
        }
    }

    pub fn is_quiet(&self) -> bool {
        matches!(self, Live::Quiet)
    }

    pub fn finish(&self) {
        if let Live::Terminal(bar) = self {
            bar.finish_and_clear();
        }
    }
}

impl LiveView for Live {
    fn sample(&self, sample: &LiveSample) {
        match self {
            Live::Quiet => {}
            Live::Plain { last, .. } => {
                errln!("jetproof: {}", sample.line());
                if let Ok(mut last) = last.lock() {
                    *last = Some((Instant::now(), sample.phase.to_string()));
                }
            }
            Live::Terminal(bar) => bar.set_message(sample.short()),
        }
    }

    fn status(&self, status: &PhaseStatus) {
        match self {
            Live::Quiet => {}
            Live::Plain { every, last } => {
                let Ok(mut last) = last.lock() else {
                    return;
                };
                // A new phase is told at once, then once per interval.
                let due = match &*last {
                    None => true,
                    Some((at, phase)) => *phase != status.phase || at.elapsed() >= *every,
                };
                if status.milestone || due {
                    errln!("jetproof: {}", status.line());
                    *last = Some((Instant::now(), status.phase.clone()));
                }
            }
            Live::Terminal(bar) => bar.set_message(status.line()),
        }
    }
}
