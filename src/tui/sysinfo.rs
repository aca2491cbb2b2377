//! What the header says about the machine: host, kernel, and how each
//! watched CPU is isolated. Read once when the UI starts.

use std::path::Path;

use crate::cpulist;
use crate::sanitize;

/// How the kernel treats a watched CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Isolation {
    pub isolcpus: bool,
    pub nohz_full: bool,
}

impl Isolation {
    /// In words, each fact by its name: `isolated: no · nohz_full: no ·
    /// tick: on`. On a nohz_full CPU the tick stops while one task runs
    /// there alone (the kernel's "adaptive ticks").
    pub fn words(self) -> String {
        let yes = |b: bool| if b { "yes" } else { "no" };
        let tick = if self.nohz_full { "off with one task" } else { "on" };
        format!("isolated: {} · nohz_full: {} · tick: {tick}", yes(self.isolcpus), yes(self.nohz_full))
    }
}

#[derive(Debug, Clone)]
pub struct SysInfo {
    pub host: String,
    pub kernel: String,
    /// (cpu, isolation), in the order the CPUs are watched.
    pub cpus: Vec<(usize, Isolation)>,
    /// Where they sit: NUMA node(s) and SMT siblings (`node 0 · SMT 6+14`),
    /// and whether a sibling is neither watched nor isolated (it can run
    /// work that slows the watched CPU).
    pub topology: String,
    pub sibling_open: bool,
}

impl SysInfo {
    /// Reads under `root` (normally "/"); anything missing reads as unknown
    /// or "not isolated" (a kernel without NO_HZ_FULL has no nohz_full file,
    /// one with it but unset says "(null)").
    pub fn read(root: &Path, cpus: &[usize]) -> Self {
        let text = |p: &str| std::fs::read_to_string(root.join(p)).map(|s| s.trim().to_string());
        let list = |p: &str| text(p).ok().and_then(|s| cpulist::parse(&s).ok()).unwrap_or_default();
        let isolated = list("sys/devices/system/cpu/isolated");
        let nohz = list("sys/devices/system/cpu/nohz_full");
        let (topology, sibling_open) = topology(root, cpus, &isolated);
        Self {
            topology,
            sibling_open,
            host: sanitize::visible(&text("proc/sys/kernel/hostname").unwrap_or_else(|_| "?".into())).into_owned(),
            kernel: sanitize::visible(&text("proc/sys/kernel/osrelease").unwrap_or_else(|_| "?".into())).into_owned(),
            cpus: cpus.iter().map(|&c| (c, Isolation { isolcpus: isolated.contains(&c), nohz_full: nohz.contains(&c) })).collect(),
        }
    }

    /// The watched CPUs grouped by isolation state, each group in words:
    /// `CPU 6-7 isolated: yes · nohz_full: yes · tick: off with one task`.
    pub fn cpus_in_words(&self) -> Vec<String> {
        let mut groups: Vec<(Isolation, Vec<usize>)> = Vec::new();
        for &(c, iso) in &self.cpus {
            match groups.iter_mut().find(|g| g.0 == iso) {
                Some(g) => g.1.push(c),
                None => groups.push((iso, vec![c])),
            }
        }
        groups.iter().map(|(iso, cs)| format!("CPU {} {}", cpulist::Display(cs), iso.words())).collect()
    }
}

/// `node 0 · no SMT`, `nodes 0,1 · SMT 6+14 7+15`; true when a sibling is
/// neither watched nor isolated.
fn topology(root: &Path, cpus: &[usize], isolated: &[usize]) -> (String, bool) {
    let mut nodes: Vec<usize> = Vec::new();
    let mut pairs: Vec<String> = Vec::new();
    let mut open = false;
    for &c in cpus {
        let base = root.join(format!("sys/devices/system/cpu/cpu{c}"));
        if let Ok(rd) = std::fs::read_dir(&base) {
            let node = rd.filter_map(|e| e.ok()?.file_name().to_str()?.strip_prefix("node")?.parse::<usize>().ok()).next();
            nodes.extend(node);
        }
        let sib = std::fs::read_to_string(base.join("topology/thread_siblings_list")).ok().and_then(|s| cpulist::parse(s.trim()).ok());
        let others: Vec<usize> = sib.unwrap_or_default().into_iter().filter(|&s| s != c).collect();
        if !others.is_empty() {
            open |= others.iter().any(|s| !cpus.contains(s) && !isolated.contains(s));
            pairs.push(format!("{c}+{}", cpulist::Display(&others)));
        }
    }
    nodes.sort_unstable();
    nodes.dedup();
    let node = match nodes.len() {
        0 => "node ?".to_string(),
        1 => format!("node {}", nodes[0]),
        _ => format!("nodes {}", cpulist::Display(&nodes)),
    };
    let smt = if pairs.is_empty() { "no SMT".to_string() } else { format!("SMT {}", pairs.join(" ")) };
    (format!("{node} · {smt}"), open)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_isolation_from_sysfs() {
        let d = tempfile::tempdir().unwrap();
        let w = |p: &str, s: &str| {
            let p = d.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, s).unwrap();
        };
        w("sys/devices/system/cpu/isolated", "6-7\n");
        w("sys/devices/system/cpu/nohz_full", "7\n");
        w("proc/sys/kernel/hostname", "box\x1b]0;x\n");
        let i = SysInfo::read(d.path(), &[6, 7, 8]);
        assert_eq!(
            i.cpus_in_words(),
            [
                "CPU 6 isolated: yes · nohz_full: no · tick: on",
                "CPU 7 isolated: yes · nohz_full: yes · tick: off with one task",
                "CPU 8 isolated: no · nohz_full: no · tick: on"
            ]
        );
        assert_eq!((i.host.as_str(), i.kernel.as_str()), ("box\\x1b]0;x", "?"));
        w("sys/devices/system/cpu/nohz_full", "(null)\n");
        assert_eq!(SysInfo::read(d.path(), &[8, 9]).cpus_in_words(), ["CPU 8-9 isolated: no · nohz_full: no · tick: on"]);
    }

    /// Siblings named, and flagged when one is open to other work.
    #[test]
    fn reads_smt_siblings_and_nodes() {
        let d = tempfile::tempdir().unwrap();
        let w = |p: &str, s: &str| {
            let p = d.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, s).unwrap();
        };
        assert_eq!(SysInfo::read(d.path(), &[6]).topology, "node ? · no SMT");
        w("sys/devices/system/cpu/isolated", "6-7,15\n");
        for (c, sib) in [(6, "6,14"), (7, "7,15")] {
            w(&format!("sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list"), &format!("{sib}\n"));
            w(&format!("sys/devices/system/cpu/cpu{c}/node0/cpulist"), "0-15\n");
        }
        let i = SysInfo::read(d.path(), &[6, 7]);
        assert_eq!((i.topology.as_str(), i.sibling_open), ("node 0 · SMT 6+14 7+15", true), "14 is neither watched nor isolated");
        let i = SysInfo::read(d.path(), &[7]);
        assert_eq!((i.topology.as_str(), i.sibling_open), ("node 0 · SMT 7+15", false));
    }
}
