//! Machine-readable figures for `benches/report/report.py`. When `LAZY_DEADLINE_RECORD`
//! names a file, each call appends one line to it: the fields separated by tabs, the
//! first naming what the line holds. Without the variable a call does nothing, so the
//! suites and examples print exactly what they printed before.
//!
//! Shared by the criterion suites (`benches/common`) and the examples that
//! the report runs (`#[path]`-included there), so every figure it renders comes
//! from the program that measured it, never from parsing a human-readable line.

use std::fmt::Display;
use std::io::Write;

/// Appends `fields`, tab-separated, as one line of the record file (if one is set).
/// A field holding a tab or a newline would break the line apart, so those are
/// replaced by spaces.
pub fn record(fields: &[&dyn Display]) {
    let Some(path) = std::env::var_os("LAZY_DEADLINE_RECORD") else {
        return;
    };
    let line: Vec<String> = fields
        .iter()
        .map(|f| f.to_string().replace(['\t', '\n'], " "))
        .collect();
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path);
    // A measurement that cannot be recorded must not pass silently: the report would
    // then render a table with a hole, so stop here with the reason.
    let mut file = file.unwrap_or_else(|e| panic!("LAZY_DEADLINE_RECORD {path:?}: {e}"));
    writeln!(file, "{}", line.join("\t"))
        .unwrap_or_else(|e| panic!("LAZY_DEADLINE_RECORD {path:?}: {e}"));
}

/// Records one named figure: a `value` line, which the report reads as a number.
pub fn record_value(key: &str, value: impl Display) {
    record(&[&"value", &key, &value]);
}
