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

fn style() -> ProgressStyle {
    ProgressStyle::with_template(
        "{msg:28} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ")
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
