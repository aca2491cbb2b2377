//! Kernel addresses to function names through /proc/kallsyms: loaded once,
//! text symbols only, sorted, binary search. Names live in one arena so the
//! table stays a few MiB for ~150k symbols.

use std::fs;
use std::io;
use std::path::Path;

pub struct Kallsyms {
    /// (address, offset of the name in `names`, name length), by address.
    syms: Vec<(u64, u32, u32)>,
    names: String,
}

/// How far past a symbol's start an address may be and still be named
/// after it; beyond that it is more likely data or a gap than code.
const MAX_OFFSET: u64 = 1 << 20;

impl Kallsyms {
    pub fn load(path: &Path) -> io::Result<Self> {
        Ok(Self::parse(&fs::read_to_string(path)?))
    }

    /// An empty table: every address shows as hex.
    pub fn empty() -> Self {
        Self { syms: Vec::new(), names: String::new() }
    }

    pub fn parse(text: &str) -> Self {
        let mut syms = Vec::new();
        let mut names = String::new();
        for line in text.lines() {
            let mut it = line.split_ascii_whitespace();
            let (Some(addr), Some(kind), Some(name)) = (it.next(), it.next(), it.next()) else { continue };
            if !matches!(kind, "t" | "T" | "w" | "W") {
                continue;
            }
            let Ok(addr) = u64::from_str_radix(addr, 16) else { continue };
            // Without privilege every address reads as zero: useless.
            if addr == 0 || names.len() > u32::MAX as usize - name.len() {
                continue;
            }
            syms.push((addr, names.len() as u32, name.len() as u32));
            names.push_str(name);
        }
        syms.sort_unstable_by_key(|s| s.0);
        Self { syms, names }
    }

    pub fn len(&self) -> usize {
        self.syms.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// The symbol containing `addr` and the offset into it.
    pub fn resolve(&self, addr: u64) -> Option<(&str, u64)> {
        let i = self.syms.partition_point(|s| s.0 <= addr).checked_sub(1)?;
        let (start, off, len) = self.syms[i];
        let delta = addr - start;
        (delta < MAX_OFFSET).then(|| (&self.names[off as usize..(off + len) as usize], delta))
    }

    /// `name`, `name+0x1c`, or the address in hex when unresolvable.
    pub fn name(&self, addr: u64) -> String {
        match self.resolve(addr) {
            Some((name, 0)) => name.to_string(),
            Some((name, off)) => format!("{name}+{off:#x}"),
            None => format!("{addr:#x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = "\
ffffffff81000000 T _stext
ffffffff81001000 t vmstat_update
ffffffff81000800 T refresh_vm_stats
ffffffff81002000 D some_data
ffffffff81003000 t tick_nohz_handler\t[kernel]
ffffffffc0001000 t e1000_watchdog\t[e1000]
0000000000000000 T hidden_without_root
garbage line
";

    #[test]
    fn resolves_exact_and_offset_addresses() {
        let k = Kallsyms::parse(FIXTURE);
        assert_eq!(k.len(), 5);
        assert_eq!(k.name(0xffffffff81001000), "vmstat_update");
        assert_eq!(k.name(0xffffffff81000810), "refresh_vm_stats+0x10");
        assert_eq!(k.name(0xffffffff81003000), "tick_nohz_handler");
        assert_eq!(k.name(0xffffffffc0001004), "e1000_watchdog+0x4");
    }

    #[test]
    fn unresolvable_is_hex() {
        let k = Kallsyms::parse(FIXTURE);
        assert_eq!(k.name(0x1000), "0x1000");
        assert_eq!(k.name(0xffffffffc0001000 + MAX_OFFSET + 1), "0xffffffffc0101001");
        assert_eq!(Kallsyms::empty().name(0xffffffff81001000), "0xffffffff81001000");
        assert!(Kallsyms::parse("0000000000000000 T a\n").is_empty());
    }
}
