//! Draws the README's pictures into the directory given (docs/img when run
//! by `cargo xtask screenshots`), from scripted runs: see src/screenshots.rs.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: screenshots DIR");
        return ExitCode::from(2);
    };
    match jitterwatch::screenshots::write(&dir) {
        Ok(paths) => {
            for p in paths {
                println!("{}", p.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("screenshots: {e:#}");
            ExitCode::FAILURE
        }
    }
}
