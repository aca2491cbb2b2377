//! The architectures jitterwatch builds for, and what building for arm64
//! here takes: a private Debian sid root (debootstrap), cached in
//! target/arm64-cache, with Debian's rustc and cargo, the arm64 std
//! (libstd-rust-dev:arm64), the aarch64 cross gcc and the arm64 libelf,
//! zlib and zstd, all from Debian's archive: rustup's downloads are not
//! needed. The
//! root is made once; a later run only enters it. Commands run in it
//! through chroot in a mount namespace of their own (unshare), so the
//! source tree bound into it and its /proc go away with them, even on
//! failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use clap::ValueEnum;

use crate::{deps, proc};

/// What `--arch` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Arch {
    #[value(name = "x86_64")]
    X86_64,
    #[value(name = "arm64")]
    Arm64,
}

impl Arch {
    /// Rust's target triple.
    pub fn triple(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64-unknown-linux-gnu",
            Arch::Arm64 => "aarch64-unknown-linux-gnu",
        }
    }

    /// Debian's name of it (a .deb's Architecture).
    pub fn debian(self) -> &'static str {
        match self {
            Arch::X86_64 => "amd64",
            Arch::Arm64 => "arm64",
        }
    }

    /// Debian's multiarch directory name (lib/TRIPLET/).
    pub fn multiarch(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64-linux-gnu",
            Arch::Arm64 => "aarch64-linux-gnu",
        }
    }

    /// Its vmlinux.h, as build.rs picks it (bpf/x86/ for x86_64: the
    /// kernel's and libbpf's name for it).
    pub fn vmlinux_h(self) -> &'static str {
        match self {
            Arch::X86_64 => "bpf/x86/vmlinux.h",
            Arch::Arm64 => "bpf/arm64/vmlinux.h",
        }
    }
}

/// The archive vmtest's apt roots fetch their kernels from.
const MIRROR: &str = "http://deb.debian.org/debian";

/// The root's packages (arm64 ones with `:arm64`). clang compiles the BPF
/// object (build.rs); make and pkg-config build libbpf-sys's vendored
/// libbpf with the cross gcc; the arm64 libelf.a and libz.a are linked in
/// (LIBBPF_SYS_LIBRARY_PATH), as the x86 dist links the host's, and
/// libzstd.a, which sid's libelf.a needs (dist/arm64.rs). The root's
/// own libelf and zlib are for build.rs: libbpf-cargo links a libbpf too,
/// built for the machine that runs the build script.
pub const PACKAGES: &[&str] = &[
    "rustc",
    "cargo",
    "libstd-rust-dev:arm64",
    "gcc-aarch64-linux-gnu",
    "libc6-dev-arm64-cross",
    "clang",
    "libelf-dev:arm64",
    "zlib1g-dev:arm64",
    "libzstd-dev:arm64",
    "libelf-dev",
    "zlib1g-dev",
    "pkg-config",
    "make",
    "ca-certificates",
];

/// The root's apt configuration. sid's Release file here is often past
/// its Valid-Until (the archive serves what it has): apt would refuse it,
/// and the host's apt.conf says the same for its own sources. The root has
/// no /dev/pts for dpkg's pty, and its downloads go to root-owned
/// directories apt's sandbox user cannot write: both only add warnings.
const APT_CONF: &str = "// Written by cargo xtask (xtask/src/cross.rs).\n\
                        Acquire::Check-Valid-Until \"false\";\n\
                        Dpkg::Use-Pty \"0\";\n\
                        APT::Sandbox::User \"root\";\n";

/// The host's CA bundle (Debian's), and where the root keeps a copy.
const HOST_CAS: &str = "/etc/ssl/certs/ca-certificates.crt";
const HOST_CAS_INSIDE: &str = "/etc/ssl/host-ca-certificates.crt";

/// The Debian sid root that builds for arm64.
pub struct SidRoot {
    dir: PathBuf,
}

impl SidRoot {
    /// The root, made first if it is not there (or its package list
    /// changed). Needs root: debootstrap and chroot.
    pub fn ensure() -> Result<Self> {
        if !proc::is_root() {
            bail!("building for arm64 needs root (debootstrap and chroot of a Debian sid root): run it as root");
        }
        deps::ensure_these(deps::ARM64, false)?;
        let cache = proc::target_dir().join("arm64-cache");
        let dir = cache.join("sid");
        // Written last by each step: a step cut short is redone whole.
        let made = cache.join("sid.debootstrapped");
        let installed = cache.join("sid.packages");
        if !made.exists() {
            let part = cache.join("sid.part");
            let _ = std::fs::remove_dir_all(&part);
            let _ = std::fs::remove_file(&installed);
            std::fs::create_dir_all(&cache)?;
            println!("arm64: debootstrap of Debian sid into {} (once)", dir.display());
            proc::check(Command::new("debootstrap").args(["--variant=minbase", "sid"]).arg(&part).arg(MIRROR).stdout(Stdio::null()))?;
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::rename(&part, &dir)?;
            std::fs::write(&made, "")?;
        }
        let root = Self { dir };
        // Each time, as they may have changed since: the host's resolver,
        // and the CAs it trusts, for cargo's downloads from crates.io (a
        // TLS-inspecting proxy's CA is in the host's bundle, not in the
        // root's).
        std::fs::copy("/etc/resolv.conf", root.dir.join("etc/resolv.conf")).context("copying /etc/resolv.conf into the sid root")?;
        let cas = root.dir.join(HOST_CAS_INSIDE.trim_start_matches('/'));
        // A fresh minbase root has no /etc/ssl yet (ca-certificates makes it).
        std::fs::create_dir_all(cas.parent().context("a CA bundle's path has a directory")?)?;
        std::fs::copy(HOST_CAS, &cas).with_context(|| format!("copying {HOST_CAS} into the sid root"))?;
        std::fs::write(root.dir.join("etc/apt/apt.conf.d/99jitterwatch"), APT_CONF)?;
        let want = PACKAGES.join("\n") + "\n";
        if std::fs::read_to_string(&installed).ok().as_deref() != Some(want.as_str()) {
            println!("arm64: installing the toolchain into the sid root: {}", PACKAGES.join(" "));
            proc::check(&mut root.chroot(&["dpkg", "--add-architecture", "arm64"]))?;
            root.apt_update()?;
            let mut install = root.chroot(&["apt-get", "-q", "-y", "--no-install-recommends", "install"]);
            proc::check(install.args(PACKAGES).stdout(Stdio::null()))?;
            std::fs::write(&installed, want)?;
        }
        Ok(root)
    }

    /// Where the root is on the host.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Refreshes the root's package lists (a package the lists name may
    /// have left the archive since).
    pub fn apt_update(&self) -> Result<()> {
        proc::check(self.chroot(&["apt-get", "-q", "update"]).stdout(Stdio::null()))
    }

    /// `args` run in the root, with a bare environment.
    pub fn chroot(&self, args: &[&str]) -> Command {
        self.chroot_in("/", args)
    }

    /// [`Self::chroot`] in the root's directory `cwd`.
    fn chroot_in(&self, cwd: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new("chroot");
        cmd.arg(&self.dir).args(["env", "-i", "--chdir", cwd, "HOME=/root", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"]);
        cmd.arg("DEBIAN_FRONTEND=noninteractive").args(args);
        cmd
    }

    /// `args` run in the root with the workspace bound at /src (their
    /// directory) and a /proc (cargo and rustc read it), in a mount
    /// namespace of their own. `env` goes into their environment.
    pub fn in_workspace(&self, env: &[(&str, String)], args: &[&str]) -> Command {
        let src = self.dir.join("src");
        let _ = std::fs::create_dir_all(&src);
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(r#"mount --bind "$1" "$2/src" && mount -t proc proc "$2/proc" && shift 2 && exec "$@""#)
            .arg("sh")
            .arg(proc::root())
            .arg(&self.dir);
        let inner = self.chroot_in("/src", &[]);
        cmd.arg(inner.get_program()).args(inner.get_args());
        cmd.arg(format!("CARGO_HTTP_CAINFO={HOST_CAS_INSIDE}")).args(env.iter().map(|(k, v)| format!("{k}={v}"))).args(args);
        cmd
    }
}
