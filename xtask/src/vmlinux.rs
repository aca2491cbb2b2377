//! `cargo xtask vmlinux [--arch x86_64|arm64]`: regenerate the checked-in
//! vmlinux.h build.rs compiles the BPF object against. x86_64's
//! (bpf/x86/vmlinux.h) is the running kernel's BTF. arm64's
//! (bpf/arm64/vmlinux.h) comes from Debian's current arm64 kernel package,
//! fetched with the apt of the arm64 build's sid root (cross.rs): its
//! vmlinuz is an arm64 Image (gzipped in older releases), and the kernel's
//! .BTF section is in it as loaded data, found by its header ([`find_btf`]).
//! Either is dumped with bpftool to a temp file and renamed, so a failed
//! dump never leaves a truncated header behind.

use std::fs::{self, File};
use std::io::Read;
use std::ops::Range;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use crate::cross::{Arch, SidRoot};
use crate::proc;

const BTF: &str = "/sys/kernel/btf/vmlinux";

/// Debian's metapackage for its current arm64 kernel.
const ARM64_META: &str = "linux-image-arm64:arm64";

/// What the BPF object reads that the arm64 dump must have:
/// current_syscall()'s pt_regs field, the task and the runqueue.
const ARM64_NEEDS: &[&str] = &["struct task_struct {", "struct pt_regs {", "\ts32 syscallno;", "struct rq {"];

pub fn run(arch: Arch) -> Result<()> {
    let bpftool = proc::which("bpftool").context("bpftool not found (`cargo xtask deps` installs it)")?;
    match arch {
        Arch::X86_64 => {
            if std::env::consts::ARCH != "x86_64" {
                bail!("the running kernel is not x86_64's: bpf/x86/vmlinux.h comes from an x86_64 machine's {BTF}");
            }
            if !Path::new(BTF).exists() {
                bail!("{BTF} is missing: this kernel has no BTF (CONFIG_DEBUG_INFO_BTF=y is needed)");
            }
            write_header(&bpftool, Path::new(BTF), arch, "", &[], BTF)
        }
        Arch::Arm64 => arm64(&bpftool),
    }
}

fn arm64(bpftool: &Path) -> Result<()> {
    let root = SidRoot::ensure()?;
    root.apt_update()?;
    let show = |pkg: &str| output(root.chroot(&["apt-cache", "show", "--no-all-versions", pkg]).stderr(Stdio::null()));
    let image = depends_on(&show(ARM64_META)?, "linux-image-").with_context(|| format!("{ARM64_META} names no linux-image-* package"))?;
    let image = format!("{image}:arm64");
    // Since 7.x sid splits the image: vmlinuz is in linux-binary-*.
    let pkg = depends_on(&show(&image)?, "linux-binary-").map(|b| format!("{b}:arm64")).unwrap_or(image);
    let version = field(&show(&pkg)?, "Version").with_context(|| format!("apt-cache show {pkg} gave no Version"))?;
    let work = root.dir().join("tmp/jitterwatch-vmlinux");
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work)?;
    let result = (|| {
        println!("vmlinux: fetching {pkg} {version}");
        proc::check(
            root.chroot(&["sh", "-c", r#"cd /tmp/jitterwatch-vmlinux && exec apt-get -q download "$0""#, &pkg]).stdout(Stdio::null()),
        )?;
        let deb = fs::read_dir(&work)?.flatten().map(|e| e.path()).find(|p| p.extension().is_some_and(|e| e == "deb"));
        let deb = deb.with_context(|| format!("apt-get download {pkg} left no .deb"))?;
        let listing = output(Command::new("sh").arg("-c").arg(r#"dpkg-deb --fsys-tarfile "$0" | tar -t"#).arg(&deb))?;
        let path = vmlinuz_path(&listing).with_context(|| format!("{} holds no vmlinuz", deb.display()))?;
        let mut image = Vec::new();
        let tar = format!(r#"dpkg-deb --fsys-tarfile "$0" | tar -xO '{path}'"#);
        let mut child = Command::new("sh").arg("-c").arg(tar).arg(&deb).stdout(Stdio::piped()).spawn()?;
        child.stdout.take().context("no pipe")?.read_to_end(&mut image)?;
        if !child.wait()?.success() {
            bail!("extracting {path} from {} failed", deb.display());
        }
        let image = gunzip_if_gzipped(image)?;
        let btf = find_btf(&image)
            .with_context(|| format!("no BTF in {path} of {pkg} {version} (CONFIG_DEBUG_INFO_BTF off, or an image this does not read)"))?;
        let raw = work.join("btf");
        fs::write(&raw, &image[btf.clone()])?;
        let note = format!(
            "/* arm64: the BTF of Debian's {} {version} ({path}, {} bytes at {}), by `cargo xtask vmlinux --arch arm64`. */\n",
            pkg.trim_end_matches(":arm64"),
            btf.len(),
            btf.start
        );
        write_header(bpftool, &raw, Arch::Arm64, &note, ARM64_NEEDS, &format!("{pkg} {version}"))
    })();
    let _ = fs::remove_dir_all(&work);
    result
}

/// Dumps `btf` as C into `arch`'s vmlinux.h, `note` first, if the dump has
/// each of `needs`.
fn write_header(bpftool: &Path, btf: &Path, arch: Arch, note: &str, needs: &[&str], from: &str) -> Result<()> {
    let rel = arch.vmlinux_h();
    let dest = proc::root().join(rel);
    let dir = dest.parent().context("vmlinux.h has a directory")?;
    fs::create_dir_all(dir)?;
    let tmp = dir.join(".vmlinux.h.tmp");
    let out = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;

    let mut cmd = Command::new(bpftool);
    cmd.args(["btf", "dump", "file"]).arg(btf).args(["format", "c"]).stdout(Stdio::from(out));
    let result = proc::check(&mut cmd).and_then(|()| {
        let dump = fs::read_to_string(&tmp).with_context(|| format!("reading {}", tmp.display()))?;
        if !dump.contains("#ifndef __VMLINUX_H__") {
            bail!("`{}` wrote no vmlinux.h header", proc::show(&cmd));
        }
        if let Some(missing) = needs.iter().find(|n| !dump.contains(*n)) {
            bail!("the dump of {from} has no {:?}: not the kernel BTF the BPF object needs", missing.trim());
        }
        let text = format!("{note}{dump}");
        let lines = text.lines().count();
        // Leave an identical header untouched: a new mtime would make
        // build.rs (rerun-if-changed) rebuild the BPF object for nothing.
        if fs::read_to_string(&dest).is_ok_and(|old| old == text) {
            fs::remove_file(&tmp).with_context(|| format!("removing {}", tmp.display()))?;
            return Ok((lines, false));
        }
        fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
        fs::rename(&tmp, &dest).with_context(|| format!("renaming {} to {}", tmp.display(), dest.display()))?;
        Ok((lines, true))
    });
    match result {
        Ok((lines, changed)) => {
            let what = if changed { "wrote" } else { "unchanged:" };
            println!("vmlinux: {what} {rel} ({lines} lines) from {from}");
            Ok(())
        }
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("running {}", proc::show(cmd)))?;
    if !out.status.success() {
        bail!("{} failed: {}", proc::show(cmd), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The first package of the first stanza's Depends (alternatives and
/// versions dropped) whose name starts with `prefix`.
fn depends_on(show: &str, prefix: &str) -> Option<String> {
    let line = field(show, "Depends")?;
    line.split(',')
        .filter_map(|alt| alt.split('|').next())
        .filter_map(|d| d.split_whitespace().next())
        .find(|d| d.starts_with(prefix))
        .map(str::to_string)
}

/// A field of the first stanza of `apt-cache show` output.
fn field(show: &str, name: &str) -> Option<String> {
    let stanza = show.split("\n\n").next()?;
    stanza.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')).map(|v| v.trim().to_string())
}

/// The kernel image in a package's tar listing: ./boot/vmlinuz-REL, or
/// ./usr/lib/modules/REL/vmlinuz where the image is split (sid since 7.x).
fn vmlinuz_path(listing: &str) -> Option<&str> {
    listing.lines().map(str::trim).find(|p| {
        let name = p.rsplit('/').next().unwrap_or("");
        (p.starts_with("./boot/") && name.starts_with("vmlinuz-")) || (p.contains("/lib/modules/") && name == "vmlinuz")
    })
}

/// Older arm64 packages gzip the Image (vmlinuz is Image.gz); newer ones
/// ship it raw.
fn gunzip_if_gzipped(image: Vec<u8>) -> Result<Vec<u8>> {
    if !image.starts_with(&[0x1f, 0x8b]) {
        return Ok(image);
    }
    let mut child = Command::new("gzip").arg("-dc").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().context("running gzip -dc")?;
    let mut stdin = child.stdin.take().context("no pipe")?;
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &image));
    let mut raw = Vec::new();
    child.stdout.take().context("no pipe")?.read_to_end(&mut raw)?;
    let wrote = writer.join().map_err(|_| anyhow::anyhow!("gzip's writer panicked"))?;
    if !child.wait()?.success() || wrote.is_err() {
        bail!("gzip -dc of the kernel image failed");
    }
    Ok(raw)
}

/// The BTF header: magic 0xeB9F, version 1, then flags and its length (24
/// here), little-endian as arm64's kernels are.
const BTF_MAGIC: [u8; 3] = [0x9f, 0xeb, 0x01];
const BTF_HEADER_LEN: usize = 24;

/// Where the kernel's raw BTF is in `image`: the longest blob whose header
/// (struct btf_header: magic u16, version u8, flags u8, hdr_len u32,
/// type_off u32, type_len u32, str_off u32, str_len u32) is consistent and
/// lies whole in `image`. Its length is hdr_len + str_off + str_len (the
/// strings follow the types).
pub fn find_btf(image: &[u8]) -> Option<Range<usize>> {
    let u32_at = |at: usize| -> Option<usize> { Some(u32::from_le_bytes(image.get(at..at + 4)?.try_into().ok()?) as usize) };
    let mut best: Option<Range<usize>> = None;
    let mut from = 0;
    while let Some(i) = image.get(from..).and_then(|rest| rest.windows(BTF_MAGIC.len()).position(|w| w == BTF_MAGIC)) {
        let at = from + i;
        from = at + 1;
        let found = (|| {
            let (flags, hdr_len) = (*image.get(at + 3)?, u32_at(at + 4)?);
            let (type_off, type_len, str_off, str_len) = (u32_at(at + 8)?, u32_at(at + 12)?, u32_at(at + 16)?, u32_at(at + 20)?);
            let consistent = flags == 0 && hdr_len == BTF_HEADER_LEN && type_off + type_len <= str_off && str_len > 0;
            let strings = at + hdr_len + str_off;
            // The string section starts with the empty string: a NUL.
            (consistent && strings + str_len <= image.len() && image[strings] == 0).then_some(at..strings + str_len)
        })();
        if let Some(r) = found {
            if best.as_ref().is_none_or(|b| r.len() > b.len()) {
                best = Some(r);
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF blob: its header, `types` bytes of types, then its strings.
    fn blob(types: usize, strings: &[u8]) -> Vec<u8> {
        let mut b = vec![0x9f, 0xeb, 0x01, 0x00];
        for v in [24, 0, types as u32, types as u32, strings.len() as u32] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend(std::iter::repeat_n(0xaa, types));
        b.extend_from_slice(strings);
        b
    }

    #[test]
    fn finds_the_blob_and_its_length_among_other_bytes() {
        let strings = b"\0task_struct\0rq\0";
        let mut image = vec![0x11; 1000];
        // A stray magic whose header says nonsense, then one cut short.
        image.extend_from_slice(&[0x9f, 0xeb, 0x01, 0x00, 0xff, 0xff, 0, 0]);
        let short = blob(5000, b"\0x\0");
        image.extend_from_slice(&short[..100]);
        let at = image.len();
        let real = blob(300, strings);
        image.extend_from_slice(&real);
        image.extend_from_slice(&[0x22; 500]);
        assert_eq!(find_btf(&image), Some(at..at + 24 + 300 + strings.len()));
        assert_eq!(&image[find_btf(&image).unwrap()], &real[..]);
    }

    #[test]
    fn the_longest_of_two_blobs_and_none_without_one() {
        let small = blob(10, b"\0a\0");
        let big = blob(400, b"\0b\0");
        let image = [small.clone(), vec![0; 7], big.clone()].concat();
        let found = find_btf(&image).unwrap();
        assert_eq!(found, small.len() + 7..image.len());
        assert_eq!(find_btf(&[0x9f, 0xeb, 0x01]), None);
        assert_eq!(find_btf(&vec![0u8; 4096]), None);
        // Strings that do not start with the empty string: not BTF.
        assert_eq!(find_btf(&blob(8, b"xy\0")), None);
    }

    #[test]
    fn the_kernel_package_and_its_image() {
        let meta = "Package: linux-image-arm64\nVersion: 7.2.13-1\n\
                    Depends: linux-base-arm64 (= 7.2.13-1), linux-image-7.2.13+deb14-arm64 (= 7.2.13-1)\n\n\
                    Package: linux-image-arm64\nDepends: linux-image-old\n";
        assert_eq!(depends_on(meta, "linux-image-").as_deref(), Some("linux-image-7.2.13+deb14-arm64"));
        let split = "Package: linux-image-7.2.13+deb14-arm64\nDepends: dracut | initramfs-tools (>= 0.120+deb8u2), \
                     linux-base-7.2.13+deb14-arm64 (= 7.2.13-1), linux-binary-7.2.13+deb14-arm64 (= 7.2.13-1)\n";
        assert_eq!(depends_on(split, "linux-binary-").as_deref(), Some("linux-binary-7.2.13+deb14-arm64"));
        assert_eq!(depends_on("Package: linux-image-6.1.0-50-arm64\nDepends: kmod, linux-base\n", "linux-binary-"), None);
        assert_eq!(field(meta, "Version").as_deref(), Some("7.2.13-1"));
        let old = "./\n./boot/System.map-6.1.0-50-arm64\n./boot/vmlinuz-6.1.0-50-arm64\n./lib/modules/6.1.0-50-arm64/kernel/a.ko\n";
        assert_eq!(vmlinuz_path(old), Some("./boot/vmlinuz-6.1.0-50-arm64"));
        let new = "./usr/lib/modules/7.2.13+deb14-arm64/\n./usr/lib/modules/7.2.13+deb14-arm64/vmlinuz\n";
        assert_eq!(vmlinuz_path(new), Some("./usr/lib/modules/7.2.13+deb14-arm64/vmlinuz"));
        assert_eq!(vmlinuz_path("./usr/share/doc/x/changelog.gz\n"), None);
    }
}
