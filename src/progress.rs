//! Progress bars of long CLI commands (`write-imagefolder`, `verify`, `compact`, `export`,
//! `gallery`): drawn on stderr when it is a terminal, hidden otherwise (a pipe, a log file, CI),
//! so scripted output stays clean.

use std::sync::Arc;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar of `total` steps counting `unit` (e.g. "images"), hidden when stderr is not a terminal.
pub fn bar(total: u64, unit: &str) -> ProgressBar {
    // indicatif's stderr target draws nothing when stderr is not a terminal.
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    let template = format!("{{bar:30}} {{pos}}/{{len}} {unit}  eta {{eta}}");
    bar.set_style(ProgressStyle::with_template(&template).unwrap_or_else(|_| ProgressStyle::default_bar()));
    bar
}

/// A writer progress callback moving `bar` (never cancels).
pub fn writer_callback(bar: &ProgressBar) -> beton_storage::writer::ProgressFn {
    let bar = bar.clone();
    Arc::new(move |p: beton_storage::Progress| {
        if let Some(total) = p.total {
            bar.set_length(total);
        }
        bar.set_position(p.done);
        true
    })
}
