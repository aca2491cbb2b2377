//! Process helpers shared by the commands: the workspace root, root-ness,
//! running children with Ctrl-C delivered to them, not to us.

use std::ffi::OsStr;
use std::fmt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

use anyhow::{bail, Context, Result};

/// The workspace root (the parent of xtask/), whatever the cwd.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in a subdirectory of the workspace")
}

/// The cargo that ran us (`cargo xtask` sets $CARGO), else the one on PATH.
pub fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(root());
    c
}

/// The directory cargo builds into.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => root().join(d),
        None => root().join("target"),
    }
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Find an executable on PATH, then in the sbin directories a non-root
/// user's PATH often lacks (Debian puts bpftool in /usr/sbin).
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from)).map(|d| d.join(name)).find(|p| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata().map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
    })
}

/// `cmd` as a shell-like line, for messages.
pub fn show(cmd: &Command) -> String {
    let quote = |s: &OsStr| {
        let s = s.to_string_lossy();
        if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c)) {
            s.into_owned()
        } else {
            format!("'{}'", s.replace('\'', r"'\''"))
        }
    };
    std::iter::once(cmd.get_program()).chain(cmd.get_args()).map(quote).collect::<Vec<_>>().join(" ")
}

/// Run `cmd` to completion. The child shares our terminal and process
/// group, so Ctrl-C reaches it directly; we ignore SIGINT meanwhile so we
/// outlive it and report its status. The disposition is changed only after
/// the spawn: an ignored signal would stay ignored across the child's exec.
pub fn status(cmd: &mut Command) -> Result<ExitStatus> {
    let mut child = cmd.spawn().with_context(|| format!("cannot run `{}`", show(cmd)))?;
    // SAFETY: installing SIG_IGN/restoring the previous handler is sound;
    // no handler code of ours runs.
    let old = unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
    let st = child.wait();
    // SAFETY: restores the disposition read above.
    unsafe { libc::signal(libc::SIGINT, old) };
    st.with_context(|| format!("waiting for `{}`", show(cmd)))
}

/// Run `cmd`; a non-zero exit is an error naming the command.
pub fn check(cmd: &mut Command) -> Result<()> {
    let st = status(cmd)?;
    if !st.success() {
        bail!("`{}` failed ({})", show(cmd), describe(st));
    }
    Ok(())
}

/// "exit 101" / "killed by signal 2".
pub fn describe(st: ExitStatus) -> String {
    match (st.code(), st.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => st.to_string(),
    }
}

/// Shell-style exit code for a finished child: its code, or 128 + signal.
pub fn exit_code(st: ExitStatus) -> u8 {
    match (st.code(), st.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(s)) => 128u8.wrapping_add(s as u8),
        _ => 1,
    }
}

/// Error carrying a child's exit code, passed through by main without a
/// message (the child already printed its own).
#[derive(Debug)]
pub struct ChildExit(pub u8);

impl fmt::Display for ChildExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "child exited with {}", self.0)
    }
}

impl std::error::Error for ChildExit {}

/// `sudo` for a non-root user, or a clear error when there is none.
pub fn sudo() -> Result<Command> {
    match which("sudo") {
        Some(p) => Ok(Command::new(p)),
        None => bail!("this needs root and `sudo` is not installed: run it as root"),
    }
}
