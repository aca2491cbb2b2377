//! `cargo xtask <command>`: developer tasks for jitterwatch. Each command is
//! a module with a `run`; its arguments are parsed here, once, by clap.

mod bench;
mod build;
mod cross;
mod deps;
mod dist;
mod hermetic;
mod layers;
mod lint;
mod proc;
mod run;
mod screenshots;
mod test_cmd;
mod vmlinux;
mod vmtest;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask", about = "Developer tasks for jitterwatch")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Install missing system packages (clang, libelf-dev, bpftool, perf, ...).
    Deps,
    /// Deps, then cargo build --release.
    Build,
    /// Measure jitterwatch's own cost (as root, ~5 min) and write BENCHMARKS.md.
    Bench {
        /// Fewer repetitions: a smoke run, not figures to publish.
        #[arg(long)]
        quick: bool,
        /// Internal: the sudo'd re-run after the user's build.
        #[arg(long, hide = true)]
        built: bool,
        /// Redraw BENCHMARKS.md from bench-history.jsonl without measuring.
        #[arg(long, conflicts_with = "quick")]
        report_only: bool,
        /// Measure this one figure and print its section; BENCHMARKS.md and
        /// the history are left alone (a check while working on it).
        #[arg(long, value_parser = ["3b", "4c", "4d", "7b", "8b"], conflicts_with = "report_only")]
        figure: Option<String>,
    },
    /// Deps, build, then run target/release/jitterwatch ARGS as root (sudo -E if needed).
    Run {
        /// Arguments for jitterwatch (after `--`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Deps, cargo fmt --check, clippy -D warnings, then every test as root.
    Test {
        /// Arguments for the test binaries (after `--`): a filter, --nocapture, ...
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The unit tests again on made-up hosts (another cpuidle driver or none, 256 or 1 CPUs, another uid), as root.
    Hermetic,
    /// cargo fmt --check and cargo clippy --all-targets -D warnings, alone.
    Lint,
    /// Check that modules import only downwards, in no circle, as the layers of docs/ARCHITECTURE.md (src) and docs/development.md (xtask) say.
    Layers,
    /// Regenerate bpf/x86/vmlinux.h from /sys/kernel/btf/vmlinux, or bpf/arm64/vmlinux.h from Debian's arm64 kernel package (as root).
    Vmlinux {
        /// Whose vmlinux.h: x86_64 (the running kernel's) or arm64 (Debian's current arm64 kernel's).
        #[arg(long, value_enum, default_value = "x86_64")]
        arch: cross::Arch,
    },
    /// Redraw the README's pictures (docs/img: the live screen, a compare chart) from scripted runs.
    Screenshots,
    /// A binary for production machines (libbpf, libelf, zlib linked in) and a .deb, in target/dist (arm64: target/dist-arm64).
    Dist {
        /// Then check them: x86_64 runs the binary from outside the tree, installs the .deb, verifies its unit, removes it (as root); arm64 runs the binary through qemu-aarch64-static and reads the .deb's architecture.
        #[arg(long)]
        check: bool,
        /// Build for x86_64 (this machine) or arm64 (cross-built in a Debian sid root, as root; target/arm64-cache).
        #[arg(long, value_enum, default_value = "x86_64")]
        arch: cross::Arch,
    },
    /// Boot the dist binary in qemu on stock Debian kernels (fetched and cached), untuned and tuned, and check it there.
    Vmtest {
        /// x86_64 (KVM or TCG) or arm64 (Debian's arm64 kernels and the arm64 dist binary in qemu-system-aarch64, TCG; minutes a VM).
        #[arg(long, value_enum, default_value = "x86_64")]
        arch: cross::Arch,
        /// Only this kernel (repeatable): debian11, debian12, debian12-rt, debian12-bpo, debian13, debian13-rt, sid (arm64: debian12, debian12-rt, debian13, debian13-rt, sid).
        #[arg(long = "kernel", value_name = "NAME")]
        kernels: Vec<String>,
        /// Only this mode.
        #[arg(long, value_parser = ["tuned", "untuned"])]
        mode: Option<String>,
        /// VMs at a time (default: one per host core).
        #[arg(long)]
        jobs: Option<usize>,
        /// Use target/dist/out/jitterwatch (arm64: target/dist-arm64/out/jitterwatch) as it is, without `cargo xtask dist` first.
        #[arg(long)]
        no_build: bool,
        /// Boot this jitterwatch instead (its shared libraries go with it); no build.
        #[arg(long, value_name = "PATH")]
        bin: Option<std::path::PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Deps => deps::run(),
        Command::Build => build::run(),
        Command::Bench { quick, built, report_only, figure } => bench::run(quick, built, report_only, figure.as_deref()),
        Command::Run { args } => run::run(&args),
        Command::Test { args } => test_cmd::run(&args),
        Command::Lint => lint::run(),
        Command::Layers => layers::run(),
        Command::Hermetic => hermetic::run(),
        Command::Vmlinux { arch } => vmlinux::run(arch),
        Command::Screenshots => screenshots::run(),
        Command::Dist { check, arch } => dist::run_for(arch, check),
        Command::Vmtest { arch, kernels, mode, jobs, no_build, bin } => vmtest::run(&vmtest::Options {
            arch,
            kernels,
            modes: vmtest::modes(mode.as_deref()),
            jobs,
            build: !no_build && bin.is_none(),
            bin,
        }),
    };
    match result {
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
