//! What /proc says of a thread, parsed once for the doctor's task audit
//! and passive mode's thread discovery.

use crate::cpulist;

/// /proc/PID/stat flags: a kernel thread; one whose affinity is fixed.
pub const PF_KTHREAD: u64 = 0x0020_0000;
pub const PF_NO_SETAFFINITY: u64 = 0x0400_0000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// Raw bytes, as the kernel keeps them (untrusted: escape to show).
    pub comm: Vec<u8>,
    pub flags: u64,
    /// Field 3: `R` running or runnable, `S` sleeping, `D`, `Z`…
    pub state: u8,
    /// The CPU it last ran on (`processor`, field 39).
    pub last_cpu: Option<usize>,
}

/// Parses /proc/PID/stat: comm sits between the first '(' and the last ')'
/// and may hold anything, including parentheses and bytes that are not UTF-8.
pub fn parse_stat(raw: &[u8]) -> Option<Stat> {
    let open = raw.iter().position(|&b| b == b'(')?;
    let close = raw.iter().rposition(|&b| b == b')')?;
    let comm = raw.get(open + 1..close)?.to_vec();
    let rest = std::str::from_utf8(raw.get(close + 1..)?).ok()?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state): field n is f[n - 3].
    let state = *f.first()?.as_bytes().first()?;
    let flags = f.get(6)?.parse().ok()?;
    let last_cpu = f.get(36).and_then(|v| v.parse().ok());
    Some(Stat { comm, flags, state, last_cpu })
}

/// The CPUs a thread may run on, from /proc/…/status.
pub fn allowed_cpus(status: &str) -> Option<Vec<usize>> {
    let v = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
    cpulist::parse(v.trim()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_hostile_comm() {
        let s = b"77 (a) b) (c\xff) S 2 0 0 0 -1 69238880 0 0 0 0 0 0 0 0 20 0 1 0 9 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 1 0 0 0 0 0";
        let st = parse_stat(s).unwrap();
        assert_eq!(st.comm, b"a) b) (c\xff");
        assert_eq!((st.flags, st.state, st.last_cpu), (69238880, b'S', Some(1)));
        assert_eq!(allowed_cpus("Name:\tx\nCpus_allowed_list:\t2-3,5\n"), Some(vec![2, 3, 5]));
    }
}
