//! `cargo xtask test [-- TEST_ARGS]`: the lint gates (fmt, clippy, the
//! module layers), then every test of the workspace as root (the
//! end-to-end tests load BPF). A non-root user builds the tests as themself, then only the run goes
//! through `sudo -E`. Tests that could not run (not root, no BTF, outside
//! CI) append their name to a file whose path is in [`SKIP_LOG_VAR`]; the
//! count is the last thing printed, so a skip is never buried in captured
//! output.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Result};

use crate::{deps, dist, hermetic, layers, lint, proc, vmtest};

const CARGO_TEST: &[&str] = &["test", "--workspace", "--all-targets"];

/// Read by `tests/common`: where a skipped test writes its name and why.
const SKIP_LOG_VAR: &str = "JITTERWATCH_SKIP_LOG";

/// `args` go to the test binaries untouched (`--test-threads=1`,
/// `--nocapture`, a name filter, ...). Without them, `cargo xtask dist
/// --check` follows the tests.
pub fn run(test_args: &[String]) -> Result<()> {
    let root = proc::is_root();
    if !root && std::env::var("CI").is_ok_and(|v| v == "true") {
        bail!("CI=true but not running as root: the tests load BPF programs and must run as root in CI");
    }
    let sudo = if root { None } else { Some(proc::sudo()?) };
    let start = Instant::now();
    deps::ensure(false)?;
    lint::run()?;
    layers::run()?;

    let skip_log = proc::target_dir().join("skipped-tests.txt");
    // A stale list from an earlier run would be counted again.
    let _ = std::fs::remove_file(&skip_log);
    let mut cmd = match sudo {
        None => {
            let mut c = proc::cargo();
            c.args(CARGO_TEST);
            c
        }
        Some(mut c) => {
            // Build as the user, so target/ stays theirs and root finds it fresh.
            proc::check(proc::cargo().args(CARGO_TEST).arg("--no-run"))?;
            c.current_dir(proc::root()).args(["-E", "env"]).args(toolchain_env()).arg("cargo").args(CARGO_TEST);
            c
        }
    };
    if !test_args.is_empty() {
        cmd.arg("--").args(test_args);
    }
    cmd.env(SKIP_LOG_VAR, &skip_log);

    let st = proc::status(&mut cmd)?;
    let secs = start.elapsed().as_secs_f64();
    let skipped: Vec<String> = std::fs::read_to_string(&skip_log).unwrap_or_default().lines().map(str::to_owned).collect();
    for s in &skipped {
        println!("test: SKIPPED {s}");
    }
    if !st.success() {
        bail!("tests failed ({}) after {secs:.1}s; {} skipped", proc::describe(st), skipped.len());
    }
    // Only with the whole suite (a filter skips them): the unit tests
    // again on made-up hosts, then the package for production machines,
    // built and checked as a user would install it.
    if test_args.is_empty() {
        hermetic::run()?;
        dist::run(true)?;
        // That binary on a stock kernel it was not built on: Debian 12's
        // 6.1, tuned, in one VM (the whole matrix: `cargo xtask vmtest`).
        vmtest::run(&vmtest::Options::for_test())?;
    }
    let secs = start.elapsed().as_secs_f64();
    match skipped.len() {
        0 => println!("test: all passed in {secs:.1}s, none skipped"),
        n => println!("test: passed in {secs:.1}s, but {n} skipped (listed above): they need root and BTF"),
    }
    Ok(())
}

/// VAR=value words for `env` that make root's cargo the user's: the same
/// PATH, and the same cargo and rustup homes (sudo may reset HOME, and root
/// with another CARGO_HOME would fetch and build everything again).
fn toolchain_env() -> Vec<OsString> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut words = Vec::new();
    let mut set = |name: &str, val: OsString| {
        let mut w = OsString::from(format!("{name}="));
        w.push(val);
        words.push(w);
    };
    set("PATH", std::env::var_os("PATH").unwrap_or_default());
    for (var, default) in [("CARGO_HOME", ".cargo"), ("RUSTUP_HOME", ".rustup")] {
        match std::env::var_os(var) {
            Some(v) => set(var, v),
            None => {
                if let Some(d) = home.as_ref().map(|h| h.join(default)).filter(|d| d.is_dir()) {
                    set(var, d.into_os_string());
                }
            }
        }
    }
    words
}
