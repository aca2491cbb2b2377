//! Diagnostics on stderr that never panic: `eprintln!` panics when stderr
//! is unwritable (`2>/dev/full`, a closed pipe), and a diagnostic must
//! never cost the run or its files.

use std::fmt;
use std::io::Write;

/// One line, `jitterwatch: ...`, or nothing if stderr cannot take it.
pub fn line(args: fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr().lock(), "jitterwatch: {args}");
}

/// `say!("...")`: [`line`] with `format!` arguments.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::say::line(format_args!($($arg)*))
    };
}
pub(crate) use say;
