//! `cargo xtask <command>`: developer tasks for jitterwatch.
//!
//! Every command is one entry in [`COMMANDS`]: to add one, write a module
//! with `pub fn run(args: &[String]) -> anyhow::Result<()>`, declare it
//! below and add a row to the table.

mod bench;
mod build;
mod deps;
mod proc;
mod run;
mod test_cmd;
mod vmlinux;

use std::process::ExitCode;

/// A command gets the arguments that follow its name.
type Cmd = fn(&[String]) -> anyhow::Result<()>;

/// name, one-line usage, help text, entry point.
const COMMANDS: &[(&str, &str, &str, Cmd)] = &[
    ("deps", "deps", "install missing system packages (clang, libelf-dev, bpftool, perf, ...)", deps::run),
    ("build", "build", "deps, then cargo build --release", build::run),
    ("bench", "bench [--quick]", "measure jitterwatch's own cost (as root, ~5 min) and write BENCHMARKS.md", bench::run),
    ("run", "run [-- ARGS]", "deps, build, then run target/release/jitterwatch ARGS as root (sudo -E if needed)", run::run),
    (
        "test",
        "test [-- TEST_ARGS]",
        "deps, then cargo test --workspace --all-targets as root (TEST_ARGS go to the test binaries)",
        test_cmd::run,
    ),
    ("vmlinux", "vmlinux", "regenerate bpf/vmlinux.h from /sys/kernel/btf/vmlinux", vmlinux::run),
];

fn usage() -> String {
    let width = COMMANDS.iter().map(|c| c.1.len()).max().unwrap_or(0);
    let mut s = String::from("usage: cargo xtask <command> [args]\n\ncommands:\n");
    for (_, synopsis, help, _) in COMMANDS {
        s.push_str(&format!("  {synopsis:<width$}  {help}\n"));
    }
    s.push_str(&format!("  {:<width$}  show this text\n", "help"));
    s
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(name) = args.first().map(String::as_str) else {
        print!("{}", usage());
        return ExitCode::SUCCESS;
    };
    if matches!(name, "help" | "-h" | "--help") {
        print!("{}", usage());
        return ExitCode::SUCCESS;
    }
    let Some(&(_, _, _, cmd)) = COMMANDS.iter().find(|c| c.0 == name) else {
        eprint!("error: unknown command `{name}`\n\n{}", usage());
        return ExitCode::from(2);
    };
    match cmd(&args[1..]) {
        Ok(()) => ExitCode::SUCCESS,
        // A child we ran on the user's behalf (`run`) already said why it
        // failed; pass its status through without a line of our own.
        Err(e) => match e.downcast_ref::<proc::ChildExit>() {
            Some(&proc::ChildExit(code)) => ExitCode::from(code),
            None => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        },
    }
}
