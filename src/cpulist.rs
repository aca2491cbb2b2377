//! Kernel cpulist syntax (`6,7`, `2-5,8`, as in isolcpus= and sysfs).

use std::collections::BTreeSet;
use std::fmt;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CpuListError {
    #[error("empty CPU list")]
    Empty,
    #[error("malformed CPU list {list:?}: {what:?} is not a CPU number or a range like 2-5")]
    Malformed { list: String, what: String },
    #[error("malformed CPU list {list:?}: range {what:?} is reversed (write {hi}-{lo} as {lo}-{hi})")]
    Reversed { list: String, what: String, lo: usize, hi: usize },
    #[error("CPU {cpu} is out of range (at most {max})")]
    TooLarge { cpu: usize, max: usize },
}

use crate::record::MAX_CPUS;

/// Parses a cpulist into sorted, de-duplicated CPU numbers. Spaces around
/// items are allowed; a stride form (`0-7:2`) is accepted as the kernel does.
pub fn parse(list: &str) -> Result<Vec<usize>, CpuListError> {
    let mut cpus = BTreeSet::new();
    let malformed = |what: &str| CpuListError::Malformed { list: list.to_string(), what: what.to_string() };
    for item in list.split(',') {
        let item = item.trim();
        if item.is_empty() {
            if list.trim().is_empty() {
                return Err(CpuListError::Empty);
            }
            return Err(malformed(item));
        }
        let (range, stride) = match item.split_once(':') {
            Some((r, s)) => (r, s.trim().parse::<usize>().ok().filter(|&s| s > 0).ok_or_else(|| malformed(item))?),
            None => (item, 1),
        };
        let num = |s: &str| -> Result<usize, CpuListError> {
            let s = s.trim();
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(malformed(item));
            }
            let n: usize = s.parse().map_err(|_| malformed(item))?;
            if n >= MAX_CPUS {
                return Err(CpuListError::TooLarge { cpu: n, max: MAX_CPUS - 1 });
            }
            Ok(n)
        };
        let (lo, hi) = match range.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None if stride == 1 => {
                let n = num(range)?;
                (n, n)
            }
            None => return Err(malformed(item)),
        };
        if lo > hi {
            return Err(CpuListError::Reversed { list: list.to_string(), what: item.to_string(), lo: hi, hi: lo });
        }
        cpus.extend((lo..=hi).step_by(stride));
    }
    Ok(cpus.into_iter().collect())
}

/// A cpulist file of sysfs (`online`, `isolated`, `nohz_full`...): empty,
/// or `(null)` as a kernel without the option prints it, means no CPU.
pub fn read_file(path: &std::path::Path) -> anyhow::Result<Vec<usize>> {
    use anyhow::Context;
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse_file(&text).with_context(|| format!("cannot parse {}", path.display()))
}

/// The contents of a cpulist file (see `read_file`).
pub fn parse_file(text: &str) -> Result<Vec<usize>, CpuListError> {
    match text.trim() {
        "" | "(null)" => Ok(Vec::new()),
        t => parse(t),
    }
}

/// Online CPUs that are not watched: where jitterwatch's own threads run,
/// and where the audit sends disturbances.
pub fn housekeeping(online: &[usize], watched: &[usize]) -> Vec<usize> {
    online.iter().copied().filter(|c| !watched.contains(c)).collect()
}

/// Formats CPUs back as a compact cpulist (`2-5,8`).
pub struct Display<'a>(pub &'a [usize]);

impl fmt::Display for Display<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut i = 0;
        let v = self.0;
        while i < v.len() {
            let mut j = i;
            while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
                j += 1;
            }
            if i > 0 {
                f.write_str(",")?;
            }
            if j > i {
                write!(f, "{}-{}", v[i], v[j])?;
            } else {
                write!(f, "{}", v[i])?;
            }
            i = j + 1;
        }
        Ok(())
    }
}

/// A hex cpumask as /proc/irq/*/smp_affinity and sysfs cpumask files take it
/// (32-bit groups separated by commas), covering `cpus`.
pub fn to_mask(cpus: &[usize], nr_cpus: usize) -> String {
    let words = nr_cpus.max(1).div_ceil(32);
    let mut w = vec![0u32; words];
    for &c in cpus.iter().filter(|&&c| c < words * 32) {
        w[c / 32] |= 1 << (c % 32);
    }
    // Drop all-zero high words, then print the top one without padding.
    while w.len() > 1 && *w.last().unwrap() == 0 {
        w.pop();
    }
    let mut groups = w.iter().rev();
    let mut out = format!("{:x}", groups.next().unwrap());
    for g in groups {
        out.push_str(&format!(",{g:08x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_ranges() {
        assert_eq!(parse("6,7").unwrap(), vec![6, 7]);
        assert_eq!(parse("2-5,8").unwrap(), vec![2, 3, 4, 5, 8]);
        assert_eq!(parse(" 1 , 3 - 4 ").unwrap(), vec![1, 3, 4]);
        assert_eq!(parse("3,1,3,2-3").unwrap(), vec![1, 2, 3]);
        assert_eq!(parse("0-7:2").unwrap(), vec![0, 2, 4, 6]);
    }

    #[test]
    fn bad_lists_name_the_problem() {
        assert_eq!(parse(""), Err(CpuListError::Empty));
        assert!(matches!(parse("5-2"), Err(CpuListError::Reversed { lo: 2, hi: 5, .. })));
        for bad in ["a", "1,,2", "1-", "-1", "1-2-3", "1,x", "+1", "1.5", "0-3:0"] {
            assert!(matches!(parse(bad), Err(CpuListError::Malformed { .. })), "{bad} parsed");
        }
        assert!(matches!(parse("5000"), Err(CpuListError::TooLarge { .. })));
        assert!(parse("99999999999999999999999").is_err());
    }

    #[test]
    fn display_round_trips() {
        for s in ["2-5,8", "0", "1,3,5-7"] {
            assert_eq!(Display(&parse(s).unwrap()).to_string(), s);
        }
    }

    #[test]
    fn files_and_housekeeping() {
        assert_eq!(parse_file("(null)\n"), Ok(vec![]));
        assert_eq!(parse_file("\n"), Ok(vec![]));
        assert_eq!(parse_file("0-2\n"), Ok(vec![0, 1, 2]));
        assert_eq!(housekeeping(&[0, 1, 2, 3], &[1, 3]), vec![0, 2]);
    }

    #[test]
    fn masks() {
        assert_eq!(to_mask(&[0], 2), "1");
        assert_eq!(to_mask(&[1], 2), "2");
        assert_eq!(to_mask(&[0, 2, 3], 4), "d");
        assert_eq!(to_mask(&[33], 64), "2,00000000");
    }
}
