//! The kernel command line as the kernel splits it, and the values of its
//! isolation parameters as the kernel reads them: CPU lists where `N` is
//! the last CPU, isolcpus='s flags before its list. boot/mod.rs judges
//! them (nohz_full and rcu_nocbs in boot/nohz_rcu.rs).

use crate::cpulist;
use crate::sanitize::visible;

/// Kernel command line, split as the kernel does (double quotes group),
/// stopping at `--` (the rest belongs to init).
pub(crate) struct Cmdline {
    params: Vec<(String, Option<String>)>,
}

impl Cmdline {
    pub fn parse(raw: &str) -> Self {
        let mut params = Vec::new();
        let mut cur = String::new();
        let mut quoted = false;
        let mut words = Vec::new();
        for c in raw.chars() {
            match c {
                '"' => quoted = !quoted,
                c if c.is_whitespace() && !quoted => {
                    if !cur.is_empty() {
                        words.push(std::mem::take(&mut cur));
                    }
                }
                c => cur.push(c),
            }
        }
        if !cur.is_empty() {
            words.push(cur);
        }
        for w in words {
            if w == "--" {
                break;
            }
            match w.split_once('=') {
                Some((k, v)) => params.push((k.to_string(), Some(v.to_string()))),
                None => params.push((w, None)),
            }
        }
        Cmdline { params }
    }

    /// The value of the last `key=value` (the kernel's usual rule).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.params.iter().rev().find(|(k, v)| k == key && v.is_some()).and_then(|(_, v)| v.as_deref())
    }

    /// True when `key` appears at all, with or without a value.
    pub fn has(&self, key: &str) -> bool {
        self.params.iter().any(|(k, _)| k == key)
    }

    /// The CPU list of `key=` (nohz_full=, rcu_nocbs=) as the kernel reads
    /// it; empty when the parameter is absent or not a CPU list.
    pub fn cpus(&self, key: &str, last_cpu: usize) -> Vec<usize> {
        self.get(key).and_then(|v| cpu_list(v, last_cpu)).unwrap_or_default()
    }

    /// `key=value` as written, for evidence lines.
    pub fn show(&self, key: &str) -> Option<String> {
        match self.get(key) {
            Some(v) => Some(format!("{key}={}", visible(v))),
            None if self.has(key) => Some(key.to_string()),
            None => None,
        }
    }
}

/// `isolcpus=[flag,...,]cpulist` as the kernel reads it. No flag means `domain`.
pub(crate) struct Isolcpus {
    pub flags: Vec<String>,
    pub cpus: Vec<usize>,
}

pub(crate) fn parse_isolcpus(v: &str, last_cpu: usize) -> Option<Isolcpus> {
    let mut flags = Vec::new();
    let mut rest = v;
    while let Some((head, tail)) = rest.split_once(',') {
        if head.chars().all(|c| c.is_ascii_alphabetic() || c == '_') && !head.is_empty() && head != "N" {
            flags.push(head.to_string());
            rest = tail;
        } else {
            break;
        }
    }
    let cpus = cpu_list(rest, last_cpu)?;
    if flags.is_empty() {
        flags.push("domain".into());
    }
    Some(Isolcpus { flags, cpus })
}

/// A boot parameter's CPU list: the kernel accepts `N` for the last CPU.
fn cpu_list(v: &str, last_cpu: usize) -> Option<Vec<usize>> {
    cpulist::parse(&v.replace('N', &last_cpu.to_string())).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmdline_parsing() {
        let c = Cmdline::parse("BOOT_IMAGE=/vmlinuz isolcpus=domain,1 quiet foo=\"a b\" nohz_full=1 -- isolcpus=9 init");
        assert_eq!(c.get("isolcpus"), Some("domain,1"));
        assert!(c.has("quiet"));
        assert_eq!(c.get("foo"), Some("a b"));
        assert_eq!(c.show("quiet").as_deref(), Some("quiet"));
        assert!(!c.has("init"));
    }

    #[test]
    fn isolcpus_flags_and_lists() {
        let i = parse_isolcpus("domain,managed_irq,2-3,5", 7).unwrap();
        assert_eq!(i.flags, ["domain", "managed_irq"]);
        assert_eq!(i.cpus, [2, 3, 5]);
        let i = parse_isolcpus("1", 7).unwrap();
        assert_eq!(i.flags, ["domain"]);
        assert_eq!(parse_isolcpus("nohz,4-N", 7).unwrap().cpus, [4, 5, 6, 7]);
        assert!(parse_isolcpus("domain,x", 7).is_none());
    }
}
