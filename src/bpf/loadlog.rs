//! libbpf's messages while the programs load, kept so that a refusal
//! reaches the user as one line: the program and the kernel's reason (the
//! verifier's last word, and the source line it was at), not the bare
//! "Permission denied" of the failed syscall. With JITTERWATCH_DEBUG set,
//! everything libbpf says is also printed, as before.

use std::sync::Mutex;

use libbpf_rs::PrintLevel;

/// The log so far; bounded (a verifier log of a large program is long).
static LOG: Mutex<String> = Mutex::new(String::new());
const CAP: usize = 1 << 20;

fn capture(level: PrintLevel, msg: String) {
    if level != PrintLevel::Debug && debug() {
        eprint!("{msg}");
    }
    let mut log = LOG.lock().unwrap_or_else(|e| e.into_inner());
    if log.len() + msg.len() <= CAP {
        log.push_str(&msg);
    }
}

fn debug() -> bool {
    std::env::var_os("JITTERWATCH_DEBUG").is_some()
}

/// Starts keeping libbpf's warnings (and, with JITTERWATCH_DEBUG, its
/// informational lines, printed as libbpf would).
pub fn start() {
    LOG.lock().unwrap_or_else(|e| e.into_inner()).clear();
    let level = if debug() { PrintLevel::Info } else { PrintLevel::Warn };
    libbpf_rs::set_print(Some((level, capture)));
}

/// Stops keeping it (libbpf is quiet again, but with JITTERWATCH_DEBUG);
/// what was kept.
pub fn stop() -> String {
    if !debug() {
        libbpf_rs::set_print(None);
    }
    std::mem::take(&mut *LOG.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The first program libbpf says failed to load, and why: the verifier's
/// reason (with the source line it was at, when the log has it), else
/// libbpf's own message about that program.
pub fn refusal(log: &str) -> Option<(String, String)> {
    let prog_of = |line: &str| -> Option<(String, String)> {
        let rest = &line[line.find("prog '")? + 6..];
        let (name, msg) = rest.split_once("': ")?;
        Some((name.to_string(), msg.trim().to_string()))
    };
    let lines: Vec<&str> = log.lines().collect();
    let failed = lines.iter().position(|l| prog_of(l).is_some_and(|(_, m)| m.contains("failed") || m.contains("BEGIN PROG LOAD LOG")))?;
    let (prog, first) = prog_of(lines[failed]).expect("matched above");
    let begin = lines[failed..].iter().position(|l| l.ends_with("-- BEGIN PROG LOAD LOG --")).map(|i| failed + i);
    let Some(begin) = begin.filter(|&b| prog_of(lines[b]).is_some_and(|(p, _)| p == prog)) else {
        return Some((prog, first));
    };
    let body: Vec<&str> = lines[begin + 1..].iter().take_while(|l| !l.starts_with("-- END PROG LOAD LOG --")).copied().collect();
    let noise = |l: &&str| {
        let l = l.trim();
        l.is_empty()
            || l.starts_with("processed ")
            || l.starts_with("verification time")
            || l.starts_with("stack depth")
            || l.starts_with(';')
            || l.split_once(':').is_some_and(|(n, _)| n.chars().all(|c| c.is_ascii_digit()))
    };
    let Some(at) = body.iter().rposition(|l| !noise(l)) else { return Some((prog, first)) };
    let mut reason = body[at].trim().to_string();
    if let Some(src) = body[..at].iter().rev().find_map(|l| l.trim().strip_prefix(';')) {
        reason += &format!(" (at `{}`)", src.trim());
    }
    Some((prog, reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    const V61: &str = "libbpf: prog 'on_switch_out': BPF program load failed: Permission denied\n\
        libbpf: prog 'on_switch_out': -- BEGIN PROG LOAD LOG --\n\
        0: R1=ctx(off=0,imm=0) R10=fp0\n\
        ; dropped[me] += 1;\n\
        71: (18) r1 = 0xffffc90000d2e000  ; R1_w=map_value(off=0,ks=4,vs=13672,imm=0)\n\
        72: (61) r2 = *(u32 *)(r1 +0)\n\
        R1 unbounded memory access, make sure to bounds check any such access\n\
        processed 67 insns (limit 1000000) max_states_per_insn 0 total_states 6 peak_states 6 mark_read 5\n\
        -- END PROG LOAD LOG --\n\
        libbpf: prog 'on_switch_out': failed to load: -13\n\
        libbpf: failed to load object 'jitterwatch_bpf'\n";

    #[test]
    fn names_the_program_and_the_verifiers_reason() {
        let (prog, reason) = refusal(V61).unwrap();
        assert_eq!(prog, "on_switch_out");
        assert_eq!(reason, "R1 unbounded memory access, make sure to bounds check any such access (at `dropped[me] += 1;`)");
    }

    #[test]
    fn an_unknown_helper_on_an_old_kernel() {
        let log = "libbpf: prog 'on_switch_out': BPF program load failed: Invalid argument\n\
            libbpf: prog 'on_switch_out': -- BEGIN PROG LOAD LOG --\n\
            ; struct task_struct *prev = bpf_get_current_task_btf();\n\
            0: (85) call unknown#158\n\
            invalid func unknown#158\n\
            processed 1 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0\n\
            -- END PROG LOAD LOG --\n";
        let (prog, reason) = refusal(log).unwrap();
        assert_eq!(prog, "on_switch_out");
        assert_eq!(reason, "invalid func unknown#158 (at `struct task_struct *prev = bpf_get_current_task_btf();`)");
    }

    #[test]
    fn a_failure_without_a_verifier_log_gives_libbpfs_line() {
        let log = "libbpf: prog 'on_nmi': relo #2: failed to resolve\nlibbpf: failed to load object\n";
        assert_eq!(refusal(log), Some(("on_nmi".to_string(), "relo #2: failed to resolve".to_string())));
        assert_eq!(refusal("libbpf: loaded fine\n"), None);
    }
}
