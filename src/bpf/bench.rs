//! The benchmark's settings, read from the environment and nowhere else:
//! where every program stops (figure 3b's stages), and leaving the
//! programs unattached for its loops to link (3b and 8b). A user never
//! sets them; a value that is not one of them is refused in one line.

use super::skel::JitterwatchSkel;
use super::types::jw_stop;
use super::TracerError;

/// The environment setting that stops every program at a stage, for the
/// benchmark only (figure 3b: where our programs' time goes).
const FLOOR: &str = "JITTERWATCH_BPF_FLOOR";

/// The environment setting that loads every program and attaches none,
/// for the benchmark only (figure 3b): its loop opens the programs' only
/// links itself, and closes them for a window of no hook at all, so what
/// the hooks alone cost is read within one run. A second link beside ours
/// would not say it: a tracepoint with one probe calls it directly (a
/// static call), with two through an iterator's indirect calls. The value
/// is a file, where the loop's arguments for the programs that would have
/// been attached are written (links.h: `ID`, or `ID:TRACEPOINT` for a
/// raw_tp program), one a line.
const UNATTACHED: &str = "JITTERWATCH_BPF_UNATTACHED";

/// The stage JITTERWATCH_BPF_FLOOR asks for (unset: none).
pub(super) fn stop() -> Result<jw_stop, TracerError> {
    parse_stop(std::env::var_os(FLOOR).as_deref())
}

/// With JITTERWATCH_BPF_UNATTACHED set: writes the loop's link arguments
/// for `skel`'s programs to its file and returns true (attach nothing).
/// `switch`: the context-switch program, which the tracer links itself.
pub(super) fn left_unattached(skel: &JitterwatchSkel<'_>, switch: &str) -> Result<bool, TracerError> {
    let Some(path) = std::env::var_os(UNATTACHED) else { return Ok(false) };
    std::fs::write(&path, links(skel, switch))
        .map_err(|e| TracerError::Unattached(std::path::PathBuf::from(path).display().to_string(), e))?;
    Ok(true)
}

/// The loop's arguments for the loaded programs that attaching would link
/// (those libbpf attaches, and the context-switch program `switch`), one a
/// line: `ID` for a tp_btf program, `ID:TRACEPOINT` for a raw_tp one.
fn links(skel: &JitterwatchSkel<'_>, switch: &str) -> String {
    use libbpf_rs::skel::Skel as _;
    use libbpf_rs::AsRawLibbpf as _;
    let mut out = String::new();
    for prog in skel.object().progs() {
        let ptr = prog.as_libbpf_object().as_ptr();
        // SAFETY: the program belongs to the loaded object `skel` holds.
        let (fd, auto) = unsafe { (libbpf_rs::libbpf_sys::bpf_program__fd(ptr), libbpf_rs::libbpf_sys::bpf_program__autoattach(ptr)) };
        if fd < 0 || !(auto || prog.name() == switch) {
            continue;
        }
        let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
        let mut len = std::mem::size_of_val(&info) as u32;
        // SAFETY: `info` is as large as `len` says, `fd` a loaded program's.
        if unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) } != 0 {
            continue;
        }
        let section = prog.section().to_string_lossy();
        match section.trim_start_matches('?').strip_prefix("raw_tp/") {
            Some(tp) => out.push_str(&format!("{}:{tp}\n", info.id)),
            None => out.push_str(&format!("{}\n", info.id)),
        }
    }
    out
}

/// Where JITTERWATCH_BPF_FLOOR's value stops our programs (enum jw_stop):
/// unset, the whole of them; `1` or `hook` right after the watched-CPU
/// test (the kernel's hooks alone); `clock` after the per-interruption
/// programs' clock read; `append` once their item joins the batch, which
/// is never written.
fn parse_stop(value: Option<&std::ffi::OsStr>) -> Result<jw_stop, TracerError> {
    let Some(v) = value else { return Ok(jw_stop::JW_STOP_NONE) };
    match v.to_str() {
        Some("1" | "hook") => Ok(jw_stop::JW_STOP_HOOK),
        Some("clock") => Ok(jw_stop::JW_STOP_CLOCK),
        Some("append") => Ok(jw_stop::JW_STOP_APPEND),
        _ => Err(TracerError::BenchStop(v.to_string_lossy().into_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_benchmarks_stages_are_named_and_nothing_else_is_taken() {
        use std::ffi::OsStr;
        assert_eq!(parse_stop(None).unwrap(), jw_stop::JW_STOP_NONE);
        assert_eq!(parse_stop(Some(OsStr::new("1"))).unwrap(), jw_stop::JW_STOP_HOOK);
        assert_eq!(parse_stop(Some(OsStr::new("hook"))).unwrap(), jw_stop::JW_STOP_HOOK);
        assert_eq!(parse_stop(Some(OsStr::new("clock"))).unwrap(), jw_stop::JW_STOP_CLOCK);
        assert_eq!(parse_stop(Some(OsStr::new("append"))).unwrap(), jw_stop::JW_STOP_APPEND);
        for bad in ["", "0", "yes", "Clock"] {
            let e = parse_stop(Some(OsStr::new(bad))).unwrap_err().to_string();
            assert!(e.contains("JITTERWATCH_BPF_FLOOR") && e.contains("clock or append"), "{bad}: {e}");
        }
    }
}
