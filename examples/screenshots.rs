//! Draws the README's pictures into the directory given (docs/img when run
//! by `cargo xtask screenshots`), from scripted runs, and with a Markdown
//! file given (docs/screen.md) rewrites its text captures of the live
//! screen: see src/screenshots.rs.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1).map(PathBuf::from);
    let (Some(dir), md) = (args.next(), args.next()) else {
        eprintln!("usage: screenshots DIR [SCREEN_MD]");
        return ExitCode::from(2);
    };
    let written = jitterwatch::screenshots::write(&dir).and_then(|paths| {
        for p in paths {
            println!("{}", p.display());
        }
        match &md {
            Some(md) if jitterwatch::screenshots::write_captures(md)? => println!("{}", md.display()),
            _ => {}
        }
        Ok(())
    });
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("screenshots: {e:#}");
            ExitCode::FAILURE
        }
    }
}
