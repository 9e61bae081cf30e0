//! Progress bars for anything longer than a few seconds: rate and ETA on stderr, hidden when
//! stderr is not a terminal (scripts and CI read the test log instead).

use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};

/// One bar per phase; a new phase finishes the previous bar.
#[derive(Default)]
pub struct Bar {
    current: Mutex<Option<ProgressBar>>,
}

impl Bar {
    fn with(&self, f: impl FnOnce(&mut Option<ProgressBar>)) {
        if let Ok(mut guard) = self.current.lock() {
            f(&mut guard);
        }
    }
}

/// A byte bar's style after `label` (init's, checksum's and backup's bars): the amounts in
/// binary units (the job's), the rate in MB/s of 10^6 bytes, as `result.json` and the reports
/// give it (`mb_per_sec`), so that screen and paper agree.
pub fn bytes_style(label: &str) -> ProgressStyle {
    ProgressStyle::with_template(&format!(
        "{label} [{{bar:30}}] {{binary_bytes}}/{{binary_total_bytes}} {{decimal_bytes_per_sec}} ETA {{eta}}"
    ))
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ")
}

fn style() -> ProgressStyle {
    bytes_style("{msg:28}")
}

impl jetproof_procedures::init::Progress for Bar {
    fn phase(&self, name: &str, total_bytes: u64) {
        self.with(|slot| {
            if let Some(old) = slot.take() {
                old.finish();
            }
            let bar = ProgressBar::new(total_bytes);
            bar.set_style(style());
            bar.set_message(name.to_string());
            *slot = Some(bar);
        });
    }

    fn advance(&self, done_bytes: u64) {
        self.with(|slot| {
            if let Some(bar) = slot {
                bar.set_position(done_bytes);
            }
        });
    }

    fn finish(&self) {
        self.with(|slot| {
            if let Some(bar) = slot.take() {
                bar.finish();
            }
        });
    }
}
