//! A progress bar for long loads and runs (`indicatif` on a terminal; a line every 10% when
//! stderr is a file or a pipe, so that logs of long runs still show progress).

use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub(crate) struct Bar {
    bar: Option<ProgressBar>,
    name: String,
    total: u64,
    next_line: u64,
    start: Instant,
}

impl Bar {
    pub(crate) fn new(name: &str, total: u64) -> Bar {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template(
                    "{prefix:>28} [{bar:30}] {percent:>3}% {human_pos}/{human_len} {per_sec} eta {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            b.set_prefix(name.to_string());
            b
        });
        Bar {
            bar,
            name: name.to_string(),
            total,
            next_line: total / 10,
            start: Instant::now(),
        }
    }

    /// `done` of `total` are finished.
    pub(crate) fn set(&mut self, done: u64) {
        match &self.bar {
            Some(b) if done.is_multiple_of(256) || done == self.total => b.set_position(done),
            Some(_) => {}
            None if done >= self.next_line && self.total >= 10 => {
                eprintln!(
                    "[{}] {:>3}% {done}/{}, {:.0}/s",
                    self.name,
                    done * 100 / self.total,
                    self.total,
                    done as f64 / self.start.elapsed().as_secs_f64()
                );
                self.next_line += self.total / 10;
            }
            None => {}
        }
    }

    /// Leave the finished bar on the screen.
    pub(crate) fn done(&self) {
        if let Some(b) = &self.bar {
            b.finish();
        }
    }
}
