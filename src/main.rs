use std::process::ExitCode;

use clap::Parser;
use jitterwatch::cli::{Cli, Command};
use jitterwatch::{events_cmd, lifecycle, monitor};

fn main() -> ExitCode {
    let cli = Cli::parse();
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
