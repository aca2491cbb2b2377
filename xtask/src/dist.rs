//! `cargo xtask dist [--check]`: a jitterwatch to copy to production
//! machines. The binary is built with `--features static` (libbpf, libelf
//! and zlib linked in) and `-C target-feature=+crt-static` (glibc linked
//! in too: a static-pie with no shared library and no loader) into
//! target/dist, next to its man page and shell completions generated from
//! its clap definitions, and a .deb (cargo-deb) with those, the systemd
//! unit, its defaults file, the Grafana dashboard and the alert rules. The
//! build fails when `file` or `ldd` finds the binary dynamic, when it links
//! a glibc name lookup (NSS: a static binary would dlopen the host's
//! modules for it), or when the .deb declares a dependency. `--check` then
//! runs the binary from a directory with no build tree (`--version`,
//! `doctor`, a 2 s watch as root), installs the .deb with dpkg, verifies its
//! unit with systemd-analyze (and its exposure, `unit`), runs the unit's
//! command without root as the unit would and scrapes /metrics, and
//! removes the package. `--arch arm64` cross-builds the same in a Debian
//! sid root (arm64.rs).

mod arm64;
mod unit;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::cross::Arch;
use crate::{deps, proc};

/// Where the dist build goes, apart from the everyday target/.
fn dist_dir() -> PathBuf {
    proc::root().join("target/dist")
}

/// This machine's target. Named with `--target` so that RUSTFLAGS reach
/// the binary and not the build scripts and proc macros (which cannot be
/// built with crt-static).
const TARGET: &str = "x86_64-unknown-linux-gnu";

/// Links glibc (libc.a, from libc6-dev) into the binary.
const CRT_STATIC: &str = "-Ctarget-feature=+crt-static";

/// glibc functions that go through NSS. In a static binary they dlopen the
/// host's libnss_*.so, which must then match the glibc we linked: none may
/// be in the binary (jitterwatch takes numeric addresses and reads /proc).
const NAME_LOOKUPS: &[&str] = &[
    "getaddrinfo",
    "getnameinfo",
    "gethostbyname",
    "gethostbyname_r",
    "gethostbyname2",
    "gethostbyname2_r",
    "gethostbyaddr",
    "gethostbyaddr_r",
    "getservbyname",
    "getservbyname_r",
    "getservbyport",
    "getpwnam",
    "getpwnam_r",
    "getpwuid",
    "getpwuid_r",
    "getgrnam",
    "getgrnam_r",
    "getgrgid",
    "getgrgid_r",
    "getgrouplist",
    "initgroups",
    "getspnam",
    "iconv_open",
];

/// `cargo xtask dist --arch ARCH`.
pub fn run_for(arch: Arch, check: bool) -> Result<()> {
    match arch {
        Arch::X86_64 => run(check),
        Arch::Arm64 => arm64::run(check),
    }
}

/// The x86_64 dist, built on this machine.
pub fn run(check: bool) -> Result<()> {
    deps::ensure(false)?;
    let target = dist_dir();
    // libbpf-sys links libelf.a and libz.a by name: rustc must be told
    // where the system keeps them (libelf-dev and zlib1g-dev).
    let multiarch = output(Command::new("gcc").arg("-print-multiarch"))?;
    let mut build = proc::cargo();
    build.env("CARGO_TARGET_DIR", &target).env("LIBBPF_SYS_LIBRARY_PATH", format!("/usr/lib/{}", multiarch.trim()));
    // Added to the caller's flags, in the form cargo reads first.
    match std::env::var("CARGO_ENCODED_RUSTFLAGS") {
        Ok(flags) if !flags.is_empty() => build.env("CARGO_ENCODED_RUSTFLAGS", format!("{flags}\x1f{CRT_STATIC}")),
        _ => build.env("RUSTFLAGS", format!("{} {CRT_STATIC}", std::env::var("RUSTFLAGS").unwrap_or_default()).trim()),
    };
    proc::check(build.args(["build", "--release", "-p", "jitterwatch", "--features", "static", "--target", TARGET]))?;
    // The copy to hand out (and to package): without its debug
    // information (40 MB of it).
    let built = target.join(TARGET).join("release/jitterwatch");
    // cargo-deb finds the assets under release/ (Cargo.toml), not under
    // the target's directory.
    let assets_dir = target.join("release/assets");
    std::fs::create_dir_all(&assets_dir)?;
    std::fs::create_dir_all(target.join("out"))?;
    let stripped = assets_dir.join("jitterwatch");
    proc::check(Command::new("strip").arg("--strip-debug").arg(&built).arg("-o").arg(&stripped))?;
    let bin = target.join("out/jitterwatch");
    std::fs::copy(&stripped, &bin)?;
    let linked = static_linking(&bin)?;
    let nm = output(Command::new("nm").arg("--defined-only").arg(&bin))?;
    let deb = package_checked(&bin, &linked, &nm, |args| output(Command::new(&built).args(args)), &assets_dir, &target, &[])?;
    if check {
        self::check(&bin, &deb)?;
    }
    Ok(())
}

/// What `file` says of `bin`'s linking, if `file` and `ldd` agree that it
/// is static; else an error with both outputs.
fn static_linking(bin: &Path) -> Result<String> {
    let file = output(Command::new("file").arg("-b").arg(bin))?;
    // ldd exits 1 on a non-PIE static binary ("not a dynamic executable").
    let ldd = Command::new("ldd").arg(bin).output().context("running ldd")?;
    let ldd = format!("{}{}", String::from_utf8_lossy(&ldd.stdout), String::from_utf8_lossy(&ldd.stderr));
    match file_linking(&file) {
        Some(how) if ldd_static(&ldd) => Ok(format!("{how}, ldd: {}", ldd.trim())),
        _ => bail!("{} is not static:\nfile: {}\nldd: {}", bin.display(), file.trim(), ldd.trim_end()),
    }
}

/// "static-pie linked" or "statically linked" from `file -b`.
fn file_linking(file: &str) -> Option<&'static str> {
    ["static-pie linked", "statically linked"].into_iter().find(|how| file.contains(how))
}

/// glibc's ldd on a static binary: "statically linked" for a static-pie,
/// "not a dynamic executable" for the other kind.
fn ldd_static(ldd: &str) -> bool {
    let l = ldd.trim();
    !l.contains("=>") && (l.ends_with("statically linked") || l.ends_with("not a dynamic executable"))
}

/// The [`NAME_LOOKUPS`] defined in `nm --defined-only` output.
fn name_lookups(nm: &str) -> Vec<&'static str> {
    let defined: HashSet<&str> = nm.lines().filter_map(|l| l.split_whitespace().nth(2)).collect();
    NAME_LOOKUPS.iter().copied().filter(|f| defined.contains(f)).collect()
}

fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("running {}", proc::show(cmd)))?;
    if !out.status.success() {
        bail!("{} failed: {}", proc::show(cmd), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The man page (gzipped, as Debian wants) and completions, from the
/// binary (`run` runs it with these arguments and returns its stdout).
/// What every architecture's dist does once `bin` is built and stripped
/// (`linked`: how, `nm`: its defined symbols by the architecture's nm):
/// refuse glibc name lookups, write the man page and completions by running
/// the binary (`run`), package the .deb (`deb_args`: cargo-deb's), say what
/// was made. Returns the .deb.
fn package_checked(
    bin: &Path,
    linked: &str,
    nm: &str,
    run: impl Fn(&[&str]) -> Result<String>,
    assets_dir: &Path,
    target: &Path,
    deb_args: &[&str],
) -> Result<PathBuf> {
    let lookups = name_lookups(nm);
    if !lookups.is_empty() {
        bail!(
            "{} links glibc name lookups ({}): statically linked, they would dlopen the host's NSS modules; take numbers, not names",
            bin.display(),
            lookups.join(", ")
        );
    }
    assets(run, assets_dir)?;
    let deb = package(target, deb_args)?;
    no_depends(&deb)?;
    let size = std::fs::metadata(bin)?.len();
    println!("dist: {} ({:.1} MB): {linked}", bin.display(), size as f64 / 1e6);
    println!("dist: {}", deb.display());
    Ok(deb)
}

fn assets(run: impl Fn(&[&str]) -> Result<String>, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let roff = run(&["manpage"])?;
    let page = dir.join("jitterwatch.1");
    std::fs::write(&page, roff)?;
    proc::check(Command::new("gzip").args(["-9nf"]).arg(&page))?;
    for (shell, file) in [("bash", "jitterwatch.bash"), ("zsh", "_jitterwatch"), ("fish", "jitterwatch.fish")] {
        std::fs::write(dir.join(file), run(&["completions", shell])?)?;
    }
    Ok(())
}

/// Builds the .deb with cargo-deb (installed with cargo when missing),
/// with `args` added to its command line.
fn package(target: &Path, args: &[&str]) -> Result<PathBuf> {
    let have = proc::cargo().args(["deb", "--version"]).output().is_ok_and(|o| o.status.success());
    if !have {
        println!("dist: installing cargo-deb (cargo install cargo-deb --locked)");
        proc::check(proc::cargo().args(["install", "cargo-deb", "--locked"]))?;
    }
    let mut cmd = proc::cargo();
    cmd.env("CARGO_TARGET_DIR", target).args(["deb", "-p", "jitterwatch", "--no-build"]).args(args);
    let out = output(&mut cmd)?;
    let deb = out.lines().rev().map(str::trim).find(|l| l.ends_with(".deb")).context("cargo deb printed no .deb path")?;
    Ok(PathBuf::from(deb))
}

/// Nothing to depend on: keep Cargo.toml's `depends` empty.
fn no_depends(deb: &Path) -> Result<()> {
    let depends = output(Command::new("dpkg-deb").arg("--field").arg(deb).arg("Depends"))?;
    if !depends.trim().is_empty() {
        bail!("{} depends on {}, but the binary is static: empty `depends` in Cargo.toml", deb.display(), depends.trim());
    }
    Ok(())
}

/// What a production machine would do with them.
fn check(bin: &Path, deb: &Path) -> Result<()> {
    let away = std::env::temp_dir().join(format!("jitterwatch-dist-check-{}", std::process::id()));
    std::fs::create_dir_all(&away)?;
    let copy = away.join("jitterwatch");
    std::fs::copy(bin, &copy)?;
    // No build tree in sight: another directory, a bare environment.
    let bare = |args: &[&str]| -> Result<String> {
        output(Command::new(&copy).args(args).current_dir(&away).env_clear().env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"))
    };
    let version = bare(&["--version"])?;
    println!("dist check: {}", version.trim());
    let last = last_cpu()?;
    let cpu = last.to_string();
    let doctor = Command::new(&copy).args(["doctor", "--cpus", &cpu]).current_dir(&away).output()?;
    // Exit 1 means it warned about the isolation: it ran.
    if !matches!(doctor.status.code(), Some(0 | 1)) || doctor.stdout.is_empty() {
        bail!("doctor from {} failed: {}", copy.display(), String::from_utf8_lossy(&doctor.stderr));
    }
    println!("dist check: doctor ran ({} lines)", String::from_utf8_lossy(&doctor.stdout).lines().count());
    if !proc::is_root() {
        println!("dist check: not root: the 2 s watch and the .deb install were not checked");
        return Ok(());
    }
    let watch = bare(&["--cpus", &cpu, "--duration", "2s", "--no-tui", "--json"])?;
    let hiccups = serde_json::from_str::<serde_json::Value>(&watch).context("the watch's JSON summary")?["cpus"][0]["hiccups"].clone();
    println!("dist check: a 2 s watch of CPU {cpu}: {hiccups} hiccups");
    proc::check(Command::new("dpkg").arg("-i").arg(deb))?;
    let installed_unit = Path::new("/lib/systemd/system/jitterwatch.service");
    let verified = output(Command::new("systemd-analyze").arg("verify").arg(installed_unit));
    let exposure = unit::security(installed_unit);
    let served = unit::serve(installed_unit, last);
    let installed = output(Command::new("dpkg").args(["-L", "jitterwatch"]));
    let man = Path::new("/usr/share/man/man1/jitterwatch.1.gz").exists();
    proc::check(Command::new("dpkg").args(["--purge", "jitterwatch"]))?;
    let _ = std::fs::remove_dir_all(&away);
    verified.context("systemd-analyze verify jitterwatch.service")?;
    println!("dist check: the .deb installed ({} paths), its unit verified, removed", installed?.lines().count());
    println!("dist check: the unit's exposure (systemd-analyze security): {} (at most {})", exposure?, unit::MAX_EXPOSURE);
    let bytes = served.context("the unit's ExecStart without root")?;
    println!(
        "dist check: the unit's ExecStart as uid 65534 with only its capabilities served /metrics ({bytes} bytes) and stopped on SIGTERM"
    );
    if !man {
        bail!("the .deb installed no man page");
    }
    Ok(())
}

fn last_cpu() -> Result<usize> {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online")?;
    online.trim().split([',', '-']).filter_map(|s| s.parse().ok()).max().context("no online CPU")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_as_file_and_ldd_say() {
        let pie = "ELF 64-bit LSB pie executable, x86-64, version 1 (SYSV), static-pie linked, for GNU/Linux 3.2.0, stripped";
        assert_eq!(file_linking(pie), Some("static-pie linked"));
        assert_eq!(file_linking("ELF 64-bit LSB executable, x86-64, statically linked, stripped"), Some("statically linked"));
        let dynamic = "ELF 64-bit LSB pie executable, x86-64, dynamically linked, interpreter /lib64/ld-linux-x86-64.so.2";
        assert_eq!(file_linking(dynamic), None);
        assert!(ldd_static("\tstatically linked\n"));
        assert!(ldd_static("\tnot a dynamic executable\n"));
        assert!(!ldd_static("\tlinux-vdso.so.1 (0x00007ffd)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f34)\n"));
    }

    #[test]
    fn name_lookups_from_nm() {
        let nm = "00000000005c0a30 t __gconv_open\n0000000000668330 W dlopen\n0000000000644960 t _nss_dns_gethostbyaddr2_r\n";
        assert!(name_lookups(nm).is_empty());
        let nm = format!("{nm}0000000000644961 T getaddrinfo\n0000000000644962 W getpwuid_r\n");
        assert_eq!(name_lookups(&nm), ["getaddrinfo", "getpwuid_r"]);
    }
}
