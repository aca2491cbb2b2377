//! Figure 7b: `jitterwatch explain` at a million. A synthetic load's log
//! of 10⁶ operations (10 µs apart, most 5 µs long, one in a hundred 200
//! µs) against a run of 10⁶ stalls (two threads, two causes each, one in
//! a hundred inside a slow operation), both files written here; explain
//! run as a user would, on the housekeeping CPU: its wall time and its
//! peak RSS (the kernel's, from wait4), for the default (the slowest 1%,
//! text) and for every operation (`--above 0 --json`, the JSON thrown
//! away).

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::measure::Ctx;
use super::util::Spread;

/// Operations in the log and stalls in the run.
pub const N: u64 = 1_000_000;

#[derive(Debug, Clone)]
pub struct Scale {
    pub ops: u64,
    pub stalls: u64,
    /// The slowest 1%, text: seconds and peak RSS (MiB).
    pub slowest_s: Spread,
    pub slowest_mib: Spread,
    /// Every operation, JSON.
    pub all_s: Spread,
    pub all_mib: Spread,
}

/// The two files, in `dir`: ops.csv (start,end in ns) and run.csv with
/// its summary.
fn write_inputs(dir: &std::path::Path) -> Result<()> {
    const BASE: u64 = 1_000_000_000;
    let mut ops = std::io::BufWriter::new(std::fs::File::create(dir.join("ops.csv"))?);
    writeln!(ops, "start,end")?;
    for i in 0..N {
        let s = BASE + i * 10_000;
        let lat = if i % 100 == 7 { 200_000 } else { 5_000 };
        writeln!(ops, "{s},{}", s + lat)?;
    }
    ops.flush()?;
    let mut run = std::io::BufWriter::new(std::fs::File::create(dir.join("run.csv"))?);
    writeln!(
        run,
        "time_ns,cpu,gap_ns,explained_ns,unexplained_ns,top_kind,top_name,top_ns,causes,source,victim,parts,freq_khz,origins,stack"
    )?;
    for i in 0..N {
        let (cpu, who) = if i % 2 == 0 { (1, "server[100]") } else { (0, "client[101]") };
        let s = BASE + i * 10_000 + 2_000;
        let gap = if i % 100 == 7 { 150_000 } else { 3_000 };
        let (a, b) = (gap * 2 / 3, gap - gap * 2 / 3);
        writeln!(run, "{s},{cpu},{gap},{gap},0,task,hog[7],{a},task:hog[7]={a};irq:eth0={b},preempted,{who},,,,")?;
    }
    run.flush()?;
    let side = serde_json::json!({
        "schema_version": 3, "mode": "passive", "duration_ns": N * 10_000 + 1_000_000,
        "overhead": { "first_sample_ns": BASE }, "cpus": []
    });
    std::fs::write(dir.join("run.summary.json"), side.to_string())?;
    Ok(())
}

/// One explain: (wall s, peak RSS MiB).
fn once(cx: &Ctx, dir: &std::path::Path, extra: &[&str]) -> Result<(f64, f64)> {
    let t = Instant::now();
    let mut child = Command::new("taskset")
        .args(["-c", &cx.house.to_string()])
        .arg(&cx.bin)
        .arg("explain")
        .arg(dir.join("ops.csv"))
        .arg(dir.join("run.csv"))
        .args(["--start", "start", "--end", "end"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run jitterwatch explain")?;
    let pid = child.id() as i32;
    let mut status = 0;
    // SAFETY: a zeroed rusage for wait4 to fill, our own child's pid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::wait4(pid, &mut status, 0, &mut ru) } != pid {
        bail!("wait4: {}", std::io::Error::last_os_error());
    }
    let secs = t.elapsed().as_secs_f64();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    if std::process::ExitStatus::from_raw(status).code() != Some(0) {
        bail!("jitterwatch explain {extra:?} failed: {}", err.trim());
    }
    // ru_maxrss is in KiB (taskset exec()s it: the same process).
    Ok((secs, ru.ru_maxrss as f64 / 1024.0))
}

pub fn scale(cx: &Ctx) -> Result<Scale> {
    let dir = tempfile_dir()?;
    write_inputs(&dir)?;
    let (mut s1, mut m1, mut s2, mut m2) = (vec![], vec![], vec![], vec![]);
    for _ in 0..cx.reps(3) {
        let (s, m) = once(cx, &dir, &[])?;
        s1.push(s);
        m1.push(m);
        let (s, m) = once(cx, &dir, &["--above", "0ns", "--json"])?;
        s2.push(s);
        m2.push(m);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let r = Scale {
        ops: N,
        stalls: N,
        slowest_s: Spread::of(&s1),
        slowest_mib: Spread::of(&m1),
        all_s: Spread::of(&s2),
        all_mib: Spread::of(&m2),
    };
    println!(
        "bench:   explain 10^6 × 10^6: slowest 1% {} s, {} MiB; all {} s, {} MiB",
        r.slowest_s.show(2),
        r.slowest_mib.show(0),
        r.all_s.show(2),
        r.all_mib.show(0)
    );
    Ok(r)
}

/// A directory of our own under the system's temporary directory.
fn tempfile_dir() -> Result<std::path::PathBuf> {
    let d = std::env::temp_dir().join(format!("jw-bench-explain-{}", std::process::id()));
    std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
    Ok(d)
}

pub fn markdown(s: Option<&Scale>) -> String {
    let mut o = String::from("\n### 7b. explain at a million\n\n");
    let Some(s) = s else {
        o += "Not measured.\n";
        return o;
    };
    o += &format!(
        "`jitterwatch explain` of a synthetic log of {} operations (10 µs apart, 5 µs long, one in a hundred 200 µs) \
         against a run of {} stalls (two threads, two causes each), on the housekeeping CPU: wall time and peak RSS \
         (wait4), {} runs. Target: ≤ {} s and ≤ {} MiB each.\n\n\
         | slow operations | written | seconds | peak RSS MiB |\n|---|---|---|---|\n\
         | the slowest 1% (10,000) | text | {} | {} |\n| every one (`--above 0ns`) | JSON | {} | {} |\n",
        super::util::grouped(s.ops as f64),
        super::util::grouped(s.stalls as f64),
        s.slowest_s.n,
        super::targets::EXPLAIN_SECS,
        super::targets::EXPLAIN_RSS_MIB,
        s.slowest_s.show(2),
        s.slowest_mib.show(0),
        s.all_s.show(2),
        s.all_mib.show(0)
    );
    o
}
