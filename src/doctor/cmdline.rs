//! The kernel command line as the kernel splits it.

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

    /// `key=value` as written, for evidence lines.
    pub fn show(&self, key: &str) -> Option<String> {
        match self.get(key) {
            Some(v) => Some(format!("{key}={}", visible(v))),
            None if self.has(key) => Some(key.to_string()),
            None => None,
        }
    }
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
}
