//! `dist --check`'s look at the installed unit: its `systemd-analyze
//! security` exposure (at most [`MAX_EXPOSURE`]), and its `ExecStart` run
//! as the unit would run it, as far as that goes without systemd as PID 1:
//! a non-root uid (65534 stands in for the dynamic user) with only the
//! unit's capabilities, no new privileges, in the lock directory its
//! `RuntimeDirectory=` names; /metrics scraped, then SIGTERM.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// The score the issue (#42) holds the unit to: systemd's "OK" band.
pub const MAX_EXPOSURE: f64 = 3.0;

/// The stand-in for the dynamic user: `nobody`, which owns nothing.
const UID: u32 = 65534;

/// `Overall exposure level for jitterwatch.service: 2.2 OK 🙂` → 2.2.
pub fn exposure(analyze: &str) -> Option<f64> {
    let line = analyze.lines().find(|l| l.contains("Overall exposure level for"))?;
    line.rsplit_once(": ")?.1.split_whitespace().next()?.parse().ok()
}

/// The value of `key=` in the unit (the last, as systemd reads it).
fn setting<'a>(unit: &'a str, key: &str) -> Option<&'a str> {
    unit.lines().filter_map(|l| l.trim().strip_prefix(key)?.strip_prefix('=')).next_back()
}

/// `AmbientCapabilities=CAP_BPF CAP_PERFMON` → `["bpf", "perfmon"]`, as
/// setpriv takes them; the bounding set must be the same.
pub fn capabilities(unit: &str) -> Result<Vec<String>> {
    let ambient = setting(unit, "AmbientCapabilities").context("the unit grants no AmbientCapabilities=")?;
    if setting(unit, "CapabilityBoundingSet") != Some(ambient) {
        bail!("the unit's CapabilityBoundingSet= is not its AmbientCapabilities= ({ambient})");
    }
    Ok(ambient.split_whitespace().map(|c| c.trim_start_matches("CAP_").to_ascii_lowercase()).collect())
}

/// The unit's command with `$JITTERWATCH_OPTS` replaced by `opts`.
pub fn exec_start(unit: &str, opts: &[String]) -> Result<Vec<String>> {
    let line = setting(unit, "ExecStart").context("the unit has no ExecStart=")?;
    let mut argv = Vec::new();
    for word in line.split_whitespace() {
        match word {
            "$JITTERWATCH_OPTS" => argv.extend(opts.iter().cloned()),
            w if w.contains('$') => bail!("ExecStart= has {w}, which this check does not expand"),
            w => argv.push(w.to_string()),
        }
    }
    Ok(argv)
}

/// `RuntimeDirectory=jitterwatch/service` → /run/jitterwatch/service.
pub fn runtime_dir(unit: &str) -> Result<PathBuf> {
    let rel = setting(unit, "RuntimeDirectory").context("the unit has no RuntimeDirectory= for its CPU locks")?;
    Ok(Path::new("/run").join(rel))
}

/// The installed unit's exposure, refused over [`MAX_EXPOSURE`].
pub fn security(path: &Path) -> Result<f64> {
    let out = Command::new("systemd-analyze").args(["security", "--offline=true"]).arg(path).output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let score = exposure(&text)
        .with_context(|| format!("systemd-analyze security printed no exposure: {}", String::from_utf8_lossy(&out.stderr)))?;
    if score > MAX_EXPOSURE {
        bail!(
            "{}: exposure {score} (over {MAX_EXPOSURE}): `systemd-analyze security --offline=true {}` says what to harden",
            path.display(),
            path.display()
        );
    }
    Ok(score)
}

/// Runs the unit's ExecStart as described above; the number of bytes of
/// /metrics it served.
pub fn serve(path: &Path, cpu: usize) -> Result<usize> {
    let unit = std::fs::read_to_string(path)?;
    let caps = capabilities(&unit)?;
    let set = std::iter::once("-all".to_string()).chain(caps.iter().map(|c| format!("+{c}"))).collect::<Vec<_>>().join(",");
    // A port free now, for the endpoint.
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let addr = format!("127.0.0.1:{port}");
    let argv = exec_start(&unit, &[format!("--cpus={cpu}"), format!("--prometheus={addr}")])?;
    let dir = runtime_dir(&unit)?;
    let made = !dir.exists();
    if made {
        std::fs::DirBuilder::new().mode(0o755).recursive(true).create(&dir)?;
        std::os::unix::fs::chown(&dir, Some(UID), Some(UID))?;
    }
    // The tests' CPU lock: another worktree's tests may spin on it.
    let lock = std::fs::File::options().create(true).truncate(false).write(true).open("/tmp/jitterwatch-tests.lock")?;
    // SAFETY: flock on a descriptor we own; released when it closes.
    unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) };
    let served = run_and_scrape(&argv, &set, &addr);
    if made {
        let _ = std::fs::remove_dir_all(&dir);
    }
    served
}

fn run_and_scrape(argv: &[String], set: &str, addr: &str) -> Result<usize> {
    let mut child = Command::new("setpriv")
        .args([format!("--reuid={UID}"), format!("--regid={UID}"), "--clear-groups".into()])
        .args([format!("--inh-caps={set}"), format!("--ambient-caps={set}"), format!("--bounding-set={set}"), "--no-new-privs".into()])
        .args(argv)
        .current_dir("/")
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("setpriv (util-linux)")?;
    let deadline = Instant::now() + Duration::from_secs(20);
    let scraped = loop {
        match scrape(addr) {
            Ok(body) if body.contains("jitterwatch_hiccups_total") => break Ok(body.len()),
            _ if Instant::now() > deadline => break Err(anyhow::anyhow!("no /metrics at {addr} within 20 s")),
            _ => {}
        }
        if child.try_wait()?.is_some() {
            break Err(anyhow::anyhow!("it exited before serving /metrics"));
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    // setpriv execs it: the child's pid is jitterwatch's.
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output()?;
    let err = String::from_utf8_lossy(&out.stderr);
    let n = scraped.with_context(|| format!("{}: {}", argv.join(" "), err.trim()))?;
    if !out.status.success() {
        bail!("{} as uid {UID}: SIGTERM ended it with {}: {}", argv.join(" "), out.status, err.trim());
    }
    Ok(n)
}

/// One GET /metrics; the body.
fn scrape(addr: &str) -> Result<String> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    Ok(text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNIT: &str = "[Service]\nEnvironment=JITTERWATCH_OPTS=--prometheus=127.0.0.1:9464\nExecStart=/usr/bin/jitterwatch serve $JITTERWATCH_OPTS\nAmbientCapabilities=CAP_BPF CAP_PERFMON CAP_SYSLOG\nCapabilityBoundingSet=CAP_BPF CAP_PERFMON CAP_SYSLOG\nRuntimeDirectory=jitterwatch/service\n";

    #[test]
    fn the_unit_s_settings() {
        assert_eq!(capabilities(UNIT).unwrap(), ["bpf", "perfmon", "syslog"]);
        let opts = ["--cpus=1".to_string(), "--prometheus=127.0.0.1:1".to_string()];
        assert_eq!(exec_start(UNIT, &opts).unwrap(), ["/usr/bin/jitterwatch", "serve", "--cpus=1", "--prometheus=127.0.0.1:1"]);
        assert_eq!(runtime_dir(UNIT).unwrap(), Path::new("/run/jitterwatch/service"));
        let wider = UNIT.replace(
            "CapabilityBoundingSet=CAP_BPF CAP_PERFMON CAP_SYSLOG",
            "CapabilityBoundingSet=CAP_BPF CAP_PERFMON CAP_SYSLOG CAP_SYS_ADMIN",
        );
        assert!(capabilities(&wider).unwrap_err().to_string().contains("is not its AmbientCapabilities"));
        assert!(exec_start(&UNIT.replace("$JITTERWATCH_OPTS", "$OTHER"), &opts).is_err());
    }

    #[test]
    fn the_exposure_from_systemd_analyze() {
        let out = "✗ UMask=   Files created by service are world-readable by default   0.1\n\n→ Overall exposure level for jitterwatch.service: 2.2 OK 🙂\n";
        assert_eq!(exposure(out), Some(2.2));
        assert_eq!(exposure("→ Overall exposure level for x.service: 9.1 UNSAFE 😨"), Some(9.1));
        assert_eq!(exposure("nothing"), None);
    }

    #[test]
    fn the_shipped_unit_is_read() {
        let unit = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../contrib/systemd/jitterwatch.service")).unwrap();
        assert!(!capabilities(&unit).unwrap().is_empty());
        assert_eq!(exec_start(&unit, &[]).unwrap()[..2], ["/usr/bin/jitterwatch", "serve"]);
        runtime_dir(&unit).unwrap();
    }
}
