//! The stock kernels vmtest boots, fetched with apt from Debian's archive
//! and cached: each suite gets a private apt root (its own sources.list,
//! lists and empty dpkg status, so the host's apt configuration and
//! installed packages are left alone), the suite's metapackage
//! (linux-image-amd64, linux-image-rt-amd64) names the versioned image, and
//! `apt-get download` fetches it (for arm64, the same from the arm64 side
//! of the archive: the apt root is told that architecture). Since 7.x sid
//! splits the image: the
//! versioned linux-image-* is empty and depends on linux-binary-* (vmlinuz)
//! and linux-base-* (config). Only vmlinuz and the config are kept; a
//! kernel already in the cache is never fetched again.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use super::apt::{depends, run_out, AptRoot};
use crate::cross::Arch;

/// A kernel of the matrix: what `--kernel NAME` selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelSpec {
    pub name: &'static str,
    /// The Debian suite whose archive has it.
    pub suite: &'static str,
    /// The metapackage that points at the suite's current image.
    pub meta: &'static str,
    /// Whose kernel it is (the metapackage names it too).
    pub arch: Arch,
}

impl KernelSpec {
    /// PREEMPT_RT: IRQs run in threads (booted with `noirqdebug`).
    pub fn is_rt(&self) -> bool {
        self.meta.contains("-rt-")
    }
}

const fn k(name: &'static str, suite: &'static str, meta: &'static str) -> KernelSpec {
    KernelSpec { name, suite, meta, arch: Arch::X86_64 }
}

const fn a(name: &'static str, suite: &'static str, meta: &'static str) -> KernelSpec {
    KernelSpec { name, suite, meta, arch: Arch::Arm64 }
}

/// Oldest first: Debian 11 (5.10), 12 (6.1, 6.1-rt), 12's backports
/// (6.12), 13 (6.12, 6.12-rt) and sid.
pub const KERNELS: &[KernelSpec] = &[
    k("debian11", "bullseye", "linux-image-amd64"),
    k("debian12", "bookworm", "linux-image-amd64"),
    k("debian12-rt", "bookworm", "linux-image-rt-amd64"),
    k("debian12-bpo", "bookworm-backports", "linux-image-amd64"),
    k("debian13", "trixie", "linux-image-amd64"),
    k("debian13-rt", "trixie", "linux-image-rt-amd64"),
    k("sid", "sid", "linux-image-amd64"),
];

/// arm64's (`--arch arm64`): Debian 12 (6.1, 6.1-rt), 13 (6.12, 6.12-rt)
/// and sid, booted under TCG, where each VM takes minutes; Debian 11 and
/// 12's backports are x86's only, their paths (before 5.11, 6.12) taken
/// there.
pub const ARM64_KERNELS: &[KernelSpec] = &[
    a("debian12", "bookworm", "linux-image-arm64"),
    a("debian12-rt", "bookworm", "linux-image-rt-arm64"),
    a("debian13", "trixie", "linux-image-arm64"),
    a("debian13-rt", "trixie", "linux-image-rt-arm64"),
    a("sid", "sid", "linux-image-arm64"),
];

/// The matrix of an architecture.
pub fn matrix(arch: Arch) -> &'static [KernelSpec] {
    match arch {
        Arch::X86_64 => KERNELS,
        Arch::Arm64 => ARM64_KERNELS,
    }
}

/// The kernels of `arch` named (all of them for an empty list), or an
/// error naming the known ones.
pub fn select(arch: Arch, names: &[String]) -> Result<Vec<KernelSpec>> {
    let all = matrix(arch);
    if names.is_empty() {
        return Ok(all.to_vec());
    }
    names
        .iter()
        .map(|n| {
            all.iter()
                .copied()
                .find(|k| k.name == n)
                .with_context(|| format!("no kernel {n:?}; known: {}", all.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")))
        })
        .collect()
}

/// A fetched kernel: its image and config, and what `uname -r` will say.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub spec: KernelSpec,
    pub vmlinuz: PathBuf,
    pub config: PathBuf,
    pub release: String,
    /// Built with CONFIG_NO_HZ_FULL (Debian 11's is not: nohz_full= does nothing there).
    pub nohz_full: bool,
}

/// The kernel from the cache, fetched first if it is not there.
pub fn fetch(spec: KernelSpec, cache: &Path) -> Result<Kernel> {
    let dir = cache.join("kernels").join(spec.name);
    let (vmlinuz, config, rel) = (dir.join("vmlinuz"), dir.join("config"), dir.join("release"));
    if !(vmlinuz.is_file() && config.is_file() && rel.is_file()) {
        download(spec, cache, &dir).with_context(|| format!("fetching the {} kernel ({} {})", spec.name, spec.suite, spec.meta))?;
    }
    let release = std::fs::read_to_string(&rel)?.trim().to_string();
    let nohz_full = config_has(&std::fs::read_to_string(&config)?, "CONFIG_NO_HZ_FULL");
    Ok(Kernel { spec, vmlinuz, config, release, nohz_full })
}

fn download(spec: KernelSpec, cache: &Path, dir: &Path) -> Result<()> {
    let apt = AptRoot::new(&cache.join("apt").join(spec.suite), spec.suite, spec.arch)?;
    let image = depends(&apt.show(spec.meta)?)
        .into_iter()
        .find(|d| d.starts_with("linux-image-"))
        .with_context(|| format!("{} in {} names no linux-image-* package", spec.meta, spec.suite))?;
    let pkgs = packages_for(&image, &apt.show(&image)?);
    let debs = cache.join("debs");
    std::fs::create_dir_all(&debs)?;
    let tmp = dir.with_extension("part");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    let (mut vmlinuz, mut config) = (None, None);
    for pkg in &pkgs {
        println!("vmtest: fetching {pkg} ({})", spec.suite);
        let deb = apt.download(pkg, &debs)?;
        let listing = run_out(Command::new("dpkg-deb").arg("--fsys-tarfile").arg(&deb).stdout(Stdio::piped()), Some("tar -t"))?;
        let found = kernel_files(&listing);
        for (slot, want) in [(&mut vmlinuz, found.vmlinuz), (&mut config, found.config)] {
            if let Some((path, release)) = want {
                extract(&deb, &path, &tmp)?;
                *slot = Some((tmp.join(path.trim_start_matches("./")), release));
            }
        }
    }
    let (Some((v, release)), Some((c, _))) = (vmlinuz, config) else {
        bail!("{} held no vmlinuz and config", pkgs.join(" and "));
    };
    std::fs::rename(v, tmp.join("vmlinuz"))?;
    std::fs::rename(c, tmp.join("config"))?;
    std::fs::write(tmp.join("release"), format!("{release}\n"))?;
    for unpacked in ["boot", "usr", "lib"] {
        let _ = std::fs::remove_dir_all(tmp.join(unpacked));
    }
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&tmp, dir)?;
    // Keep the unpacked files only: the .debs (60-90 MB each) go.
    for pkg in &pkgs {
        for e in std::fs::read_dir(&debs)?.flatten() {
            if e.file_name().to_string_lossy().starts_with(&format!("{pkg}_")) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    Ok(())
}

/// `dpkg-deb --fsys-tarfile DEB | tar -x PATH` into `into`.
fn extract(deb: &Path, path: &str, into: &Path) -> Result<()> {
    let tar = format!("tar -x -C '{}' '{path}'", into.display());
    run_out(Command::new("dpkg-deb").arg("--fsys-tarfile").arg(deb).stdout(Stdio::piped()), Some(&tar)).map(drop)
}

/// Whether a kernel config sets `option` to y.
pub fn config_has(config: &str, option: &str) -> bool {
    config.lines().any(|l| l.strip_prefix(option).is_some_and(|v| v == "=y"))
}

/// The packages holding the kernel of `image`: the image itself, or, where
/// it is split (sid since 7.x), its linux-binary-* and linux-base-*.
pub fn packages_for(image: &str, show: &str) -> Vec<String> {
    let deps = depends(show);
    let part = |prefix: &str| deps.iter().find(|d| d.starts_with(prefix)).cloned();
    match (part("linux-binary-"), part("linux-base-")) {
        (Some(bin), Some(base)) => vec![bin, base],
        _ => vec![image.to_string()],
    }
}

/// Where a package's tar listing holds the kernel image and its config,
/// each with the kernel release its path names.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct KernelFiles {
    pub vmlinuz: Option<(String, String)>,
    pub config: Option<(String, String)>,
}

pub fn kernel_files(listing: &str) -> KernelFiles {
    let mut found = KernelFiles::default();
    for path in listing.lines().map(str::trim) {
        let bare = path.trim_start_matches("./");
        let hit = |file: &str| -> Option<String> {
            // ./boot/vmlinuz-REL, or ./usr/lib/modules/REL/vmlinuz
            if let Some(rel) = bare.strip_prefix(&format!("boot/{file}-")) {
                return Some(rel.to_string());
            }
            let rest = bare.strip_prefix("usr/lib/modules/").or_else(|| bare.strip_prefix("lib/modules/"))?;
            let (rel, name) = rest.split_once('/')?;
            (name == file).then(|| rel.to_string())
        };
        if let Some(rel) = hit("vmlinuz") {
            found.vmlinuz = Some((path.to_string(), rel));
        } else if let Some(rel) = hit("config") {
            found.config = Some((path.to_string(), rel));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_kernels_by_name() {
        assert_eq!(select(Arch::X86_64, &[]).unwrap().len(), KERNELS.len());
        let one = select(Arch::X86_64, &["debian12".to_string()]).unwrap();
        assert_eq!(one[0].suite, "bookworm");
        assert!(!one[0].is_rt());
        assert!(select(Arch::X86_64, &["debian13-rt".to_string()]).unwrap()[0].is_rt());
        let err = select(Arch::X86_64, &["rhel9".to_string()]).unwrap_err().to_string();
        assert!(err.contains("debian11") && err.contains("sid"), "{err}");
    }

    #[test]
    fn arm64_has_its_own_matrix_of_arm64_images() {
        let all = select(Arch::Arm64, &[]).unwrap();
        assert_eq!(all.iter().map(|k| k.name).collect::<Vec<_>>(), ["debian12", "debian12-rt", "debian13", "debian13-rt", "sid"]);
        assert!(all.iter().all(|k| k.arch == Arch::Arm64 && k.meta.ends_with("-arm64")));
        assert_eq!(all.iter().filter(|k| k.is_rt()).count(), 2);
        assert!(KERNELS.iter().all(|k| k.arch == Arch::X86_64 && k.meta.ends_with("-amd64")));
        let err = select(Arch::Arm64, &["debian11".to_string()]).unwrap_err().to_string();
        assert!(err.contains("known: debian12, debian12-rt") && !err.contains("bpo"), "{err}");
    }

    #[test]
    fn split_sid_images_fetch_binary_and_base() {
        let sid = "Package: linux-image-7.2.13+deb14-amd64\nDepends: dracut | initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool, \
                   linux-base-7.2.13+deb14-amd64 (= 7.2.13-1), linux-binary-7.2.13+deb14-amd64 (= 7.2.13-1), \
                   linux-modules-7.2.13+deb14-amd64 (= 7.2.13-1)\n";
        assert_eq!(
            packages_for("linux-image-7.2.13+deb14-amd64", sid),
            ["linux-binary-7.2.13+deb14-amd64", "linux-base-7.2.13+deb14-amd64"]
        );
        let whole = "Package: linux-image-6.1.0-50-amd64\nDepends: kmod, linux-base (>= 4.3~), initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool\n";
        assert_eq!(packages_for("linux-image-6.1.0-50-amd64", whole), ["linux-image-6.1.0-50-amd64"]);
    }

    #[test]
    fn finds_vmlinuz_and_config_in_either_layout() {
        let old = "./\n./boot/\n./boot/System.map-6.1.0-50-amd64\n./boot/config-6.1.0-50-amd64\n./boot/vmlinuz-6.1.0-50-amd64\n./lib/modules/6.1.0-50-amd64/kernel/x.ko\n";
        let f = kernel_files(old);
        assert_eq!(f.vmlinuz, Some(("./boot/vmlinuz-6.1.0-50-amd64".into(), "6.1.0-50-amd64".into())));
        assert_eq!(f.config, Some(("./boot/config-6.1.0-50-amd64".into(), "6.1.0-50-amd64".into())));
        let bin = kernel_files("./usr/lib/modules/7.2.13+deb14-amd64/\n./usr/lib/modules/7.2.13+deb14-amd64/vmlinuz\n");
        assert_eq!(bin.vmlinuz.unwrap().1, "7.2.13+deb14-amd64");
        assert_eq!(bin.config, None);
        let base = kernel_files("./usr/lib/modules/7.2.13+deb14-amd64/System.map\n./usr/lib/modules/7.2.13+deb14-amd64/config\n");
        assert_eq!(base.config.unwrap().0, "./usr/lib/modules/7.2.13+deb14-amd64/config");
    }

    #[test]
    fn reads_a_config_option() {
        let config = "CONFIG_NO_HZ_IDLE=y\n# CONFIG_NO_HZ_FULL is not set\nCONFIG_HZ=250\n";
        assert!(config_has(config, "CONFIG_NO_HZ_IDLE"));
        assert!(!config_has(config, "CONFIG_NO_HZ_FULL"));
        assert!(!config_has("CONFIG_NO_HZ_FULL_X=y\n", "CONFIG_NO_HZ_FULL"));
    }
}
