use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::Parser;
use jitterwatch::cli::{Cli, Command};
use jitterwatch::{events_cmd, lifecycle, monitor};

fn main() -> ExitCode {
    lifecycle::mark_main_start();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand) => e.exit(),
        Err(e) => {
            // One line, like every other error, not clap's three.
            let msg = e.to_string();
            let first = msg.lines().next().unwrap_or_default();
            eprintln!("jitterwatch: {} (see --help)", first.trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    lifecycle::install_panic_hook();
    if let Err(e) = lifecycle::install_signal_handlers() {
        eprintln!("jitterwatch: cannot install signal handlers: {e}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        None => monitor::run(cli.watch),
        Some(Command::Events { cpus, duration }) => events_cmd::run(cpus.as_deref(), duration),
        Some(Command::Doctor { .. }) => Err(anyhow::anyhow!("doctor: not wired yet")),
    };
    match result {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            eprintln!("jitterwatch: {e:#}");
            ExitCode::FAILURE
        }
    }
}
