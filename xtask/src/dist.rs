//! `cargo xtask dist [--check]`: a jitterwatch to copy to production
//! machines. The binary is built with `--features static` (libbpf, libelf
//! and zlib linked in; glibc stays dynamic) into target/dist, next to its
//! man page and shell completions generated from its clap definitions, and
//! a .deb (cargo-deb) with those, the systemd unit, its defaults file, the
//! Grafana dashboard and the alert rules. `--check` then runs the binary
//! from a directory with no build tree (`--version`, `doctor`, a 2 s watch
//! as root), installs the .deb with dpkg, verifies its unit with
//! systemd-analyze, and removes the package.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::{deps, proc};

/// Where the dist build goes, apart from the everyday target/.
fn dist_dir() -> PathBuf {
    proc::root().join("target/dist")
}

/// Libraries the binary must not need at run time.
const LINKED_IN: &[&str] = &["libbpf", "libelf", "libz"];

pub fn run(check: bool) -> Result<()> {
    deps::ensure(false)?;
    let target = dist_dir();
    // libbpf-sys links libelf.a and libz.a by name: rustc must be told
    // where the system keeps them (libelf-dev and zlib1g-dev).
    let multiarch = output(Command::new("gcc").arg("-print-multiarch"))?;
    proc::check(
        proc::cargo().env("CARGO_TARGET_DIR", &target).env("LIBBPF_SYS_LIBRARY_PATH", format!("/usr/lib/{}", multiarch.trim())).args([
            "build",
            "--release",
            "-p",
            "jitterwatch",
            "--features",
            "static",
        ]),
    )?;
    // The copy to hand out (and to package): without its debug
    // information (40 MB of it).
    let built = target.join("release/jitterwatch");
    let assets_dir = target.join("release/assets");
    std::fs::create_dir_all(&assets_dir)?;
    std::fs::create_dir_all(target.join("out"))?;
    let stripped = assets_dir.join("jitterwatch");
    proc::check(Command::new("strip").arg("--strip-debug").arg(&built).arg("-o").arg(&stripped))?;
    let bin = target.join("out/jitterwatch");
    std::fs::copy(&stripped, &bin)?;
    let ldd = output(Command::new("ldd").arg(&bin))?;
    for lib in LINKED_IN {
        if ldd.lines().any(|l| l.trim_start().starts_with(lib)) {
            bail!("{} still needs {lib} at run time:\n{ldd}", bin.display());
        }
    }
    let glibc = max_glibc(&output(Command::new("objdump").arg("-T").arg(&bin))?);
    // The .deb declares its one dependency (Cargo.toml): keep it true.
    if let Some(v) = &glibc {
        if version(v) > version(DECLARED_GLIBC) {
            bail!("the binary needs glibc {v}, newer than the {DECLARED_GLIBC} the .deb declares: raise it in Cargo.toml and here");
        }
    }
    assets(&built, &assets_dir)?;
    let deb = package(&target)?;
    println!("dist: {}\n{}", bin.display(), ldd.trim_end());
    if let Some(v) = &glibc {
        println!("dist: needs glibc {v} or later (the newest symbol version it uses)");
    }
    println!("dist: {}", deb.display());
    if check {
        self::check(&bin, &deb)?;
    }
    Ok(())
}

fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("running {}", proc::show(cmd)))?;
    if !out.status.success() {
        bail!("{} failed: {}", proc::show(cmd), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The glibc the .deb depends on (`depends` in Cargo.toml's
/// package.metadata.deb).
const DECLARED_GLIBC: &str = "2.34";

fn version(v: &str) -> Vec<u32> {
    v.split('.').filter_map(|p| p.parse().ok()).collect()
}

/// The newest `GLIBC_x.y` symbol version in `objdump -T` output.
fn max_glibc(dump: &str) -> Option<String> {
    let mut best: Option<(Vec<u32>, String)> = None;
    for word in dump.split(|c: char| c.is_whitespace() || c == '(' || c == ')') {
        let Some(v) = word.strip_prefix("GLIBC_") else { continue };
        let Ok(parts) = v.split('.').map(str::parse).collect::<Result<Vec<u32>, _>>() else { continue };
        if best.as_ref().is_none_or(|(b, _)| parts > *b) {
            best = Some((parts, v.to_string()));
        }
    }
    best.map(|(_, v)| v)
}

/// The man page (gzipped, as Debian wants) and completions, from the binary.
fn assets(bin: &Path, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let roff = output(Command::new(bin).arg("manpage"))?;
    let page = dir.join("jitterwatch.1");
    std::fs::write(&page, roff)?;
    proc::check(Command::new("gzip").args(["-9nf"]).arg(&page))?;
    for (shell, file) in [("bash", "jitterwatch.bash"), ("zsh", "_jitterwatch"), ("fish", "jitterwatch.fish")] {
        std::fs::write(dir.join(file), output(Command::new(bin).args(["completions", shell]))?)?;
    }
    Ok(())
}

/// Builds the .deb with cargo-deb (installed with cargo when missing).
fn package(target: &Path) -> Result<PathBuf> {
    let have = proc::cargo().args(["deb", "--version"]).output().is_ok_and(|o| o.status.success());
    if !have {
        println!("dist: installing cargo-deb (cargo install cargo-deb --locked)");
        proc::check(proc::cargo().args(["install", "cargo-deb", "--locked"]))?;
    }
    let mut cmd = proc::cargo();
    cmd.env("CARGO_TARGET_DIR", target).args(["deb", "-p", "jitterwatch", "--no-build"]);
    let out = output(&mut cmd)?;
    let deb = out.lines().rev().map(str::trim).find(|l| l.ends_with(".deb")).context("cargo deb printed no .deb path")?;
    Ok(PathBuf::from(deb))
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
    let verified = output(Command::new("systemd-analyze").args(["verify", "/lib/systemd/system/jitterwatch.service"]));
    let installed = output(Command::new("dpkg").args(["-L", "jitterwatch"]));
    let man = Path::new("/usr/share/man/man1/jitterwatch.1.gz").exists();
    proc::check(Command::new("dpkg").args(["--purge", "jitterwatch"]))?;
    let _ = std::fs::remove_dir_all(&away);
    verified.context("systemd-analyze verify jitterwatch.service")?;
    println!("dist check: the .deb installed ({} paths), its unit verified, removed", installed?.lines().count());
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
    fn newest_glibc_symbol_version() {
        let dump = "0000 DF *UND* 0000 (GLIBC_2.2.5) memcpy\n0000 DF *UND* 0000 (GLIBC_2.34) __libc_start_main\n0000 DF *UND* 0000 GLIBC_2.17 clock_gettime\n";
        assert_eq!(max_glibc(dump).as_deref(), Some("2.34"));
        assert_eq!(max_glibc("nothing"), None);
    }
}
