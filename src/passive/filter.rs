//! Which threads passive mode watches: every thread of some processes
//! (`--pid`, threads they start later included), single threads (`--tid`),
//! or threads by name (`--comm`, matched as bytes: names are untrusted).

use crate::record::{Comm, COMM_LEN};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub tgids: Vec<u32>,
    pub tids: Vec<u32>,
    /// The name as the kernel stores it: at most COMM_LEN - 1 bytes.
    pub comm: Option<Vec<u8>>,
}

impl Filter {
    pub fn matches(&self, tid: u32, tgid: u32, comm: &Comm) -> bool {
        if tid == 0 {
            // The idle task of every CPU is pid 0: never a victim.
            return false;
        }
        self.tgids.contains(&tgid)
            || self.tids.contains(&tid)
            || self.comm.as_deref().is_some_and(|want| {
                let len = comm.iter().position(|&b| b == 0).unwrap_or(COMM_LEN);
                &comm[..len] == want
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cause::comm;

    #[test]
    fn matches_processes_threads_and_names_as_bytes() {
        let f = Filter { tgids: vec![100], tids: vec![7], comm: Some(b"app\xff".to_vec()) };
        assert!(f.matches(101, 100, &comm(b"worker")), "a thread of a watched process, started later");
        assert!(f.matches(7, 3, &comm(b"x")));
        assert!(f.matches(9, 9, &comm(b"app\xff")));
        assert!(!f.matches(9, 9, &comm(b"app")), "a prefix is not the name");
        assert!(!f.matches(9, 9, &comm(b"app\xffx")));
        assert!(!f.matches(0, 100, &comm(b"swapper/1")));
    }
}
