//! The live view of a workload test (`docs/report.md`, "Live view"): on a terminal, one status
//! line redrawn by indicatif (a spinner through the warm-up, then each sample interval's
//! figures); on a pipe or a file, one plain line per sample interval; `--quiet`, nothing. All on
//! stderr: stdout keeps the final summary.

use std::io::IsTerminal as _;

use indicatif::{ProgressBar, ProgressStyle};
use jetproof_procedures::live::{LiveSample, LiveView};

pub enum Live {
    Quiet,
    Plain,
    Terminal(ProgressBar),
}

impl Live {
    /// The view for this process's stderr.
    pub fn new(quiet: bool, what: &str) -> Live {
        if quiet {
            return Live::Quiet;
        }
        if !std::io::stderr().is_terminal() {
            return Live::Plain;
        }
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {elapsed_precise} {wide_msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_message(format!(
            "{what}: attaching, warm-up (and auto-tune) before the measured window"
        ));
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        Live::Terminal(bar)
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
            Live::Plain => errln!("jetproof: {}", sample.line()),
            Live::Terminal(bar) => bar.set_message(sample.short()),
        }
    }
}
