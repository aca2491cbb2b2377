//! The running jitterwatch's BPF objects, found with bpftool: its .bss map
//! and `watched`'s offset in it (how the benchmark's loops turn its
//! watching of their CPU off and on). The programs they link, jitterwatch
//! lists itself (JITTERWATCH_BPF_UNATTACHED).

use std::process::Command;

use anyhow::{Context as _, Result};

use super::util;

/// The setting that has jitterwatch load its programs, attach none, and
/// write the loop's link arguments for them to the file it names.
pub const UNATTACHED: &str = "JITTERWATCH_BPF_UNATTACHED";

/// The link arguments jitterwatch wrote to `path` (UNATTACHED): one a
/// line, at least one.
pub fn links_left(path: &std::path::Path) -> Result<Vec<String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading the programs jitterwatch left to link ({})", path.display()))?;
    let progs: Vec<String> = text.lines().map(str::to_string).collect();
    anyhow::ensure!(!progs.is_empty(), "jitterwatch left no program to link in {}", path.display());
    Ok(progs)
}

/// The running jitterwatch's .bss map (the newest of that name) and the
/// offset of `watched` in it, from bpftool.
pub fn watched_byte() -> Result<(u64, u64)> {
    let maps = util::output(Command::new("bpftool").args(["map", "show", "-j"]))?;
    let (map, btf) = bss_map(&maps).context("no jitterwatch .bss map is loaded")?;
    let dump = util::output(Command::new("bpftool").args(["btf", "dump", "id", &btf.to_string()]))?;
    let offset = var_offset(&dump, "watched").context("no `watched` in the .bss map's BTF")?;
    Ok((map, offset))
}

/// From `bpftool map show -j`: the newest map named jitterwatch's .bss
/// (names are cut to 15 bytes: "jitterwa.bss"), its id and BTF id.
pub fn bss_map(json: &str) -> Option<(u64, u64)> {
    let maps: Vec<serde_json::Value> = serde_json::from_str(json).ok()?;
    maps.iter().filter(|m| m["name"] == "jitterwa.bss").filter_map(|m| Some((m["id"].as_u64()?, m["btf_id"].as_u64()?))).max()
}

/// From `bpftool btf dump id N`: the offset of variable `name` in its
/// DATASEC ("type_id=479 offset=516 size=1024 (VAR 'watched')").
pub fn var_offset(dump: &str, name: &str) -> Option<u64> {
    let tag = format!("(VAR '{name}')");
    let line = dump.lines().find(|l| l.trim_end().ends_with(&tag))?;
    line.split_whitespace().find_map(|w| w.strip_prefix("offset=")).and_then(|o| o.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The setting's name is written twice, here and where jitterwatch
    /// reads it (the two crates meet only through it).
    #[test]
    fn the_unattached_setting_is_the_one_jitterwatch_reads() {
        let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../src/bpf/bench.rs")).unwrap();
        assert!(src.contains(&format!("const UNATTACHED: &str = \"{UNATTACHED}\";")), "src/bpf/bench.rs reads another name");
    }

    #[test]
    fn the_watched_byte_is_found_from_bpftool() {
        let maps = r#"[{"id":7,"name":"jitterwa.bss","btf_id":30},{"id":9,"name":"jitterwa.bss","btf_id":31},
                      {"id":12,"name":"other.bss","btf_id":40}]"#;
        assert_eq!(bss_map(maps), Some((9, 31)), "the newest of jitterwatch's");
        assert_eq!(bss_map("[]"), None);
        let dump = "[479] VAR 'watched' type_id=478, linkage=global\n[576] DATASEC '.bss' size=661312 vlen=15\n\
                    \ttype_id=471 offset=512 size=4 (VAR '_jw_sentinel')\n\ttype_id=479 offset=516 size=1024 (VAR 'watched')\n\
                    \ttype_id=491 offset=103948 size=256 (VAR 'watched_list')\n";
        assert_eq!(var_offset(dump, "watched"), Some(516));
        assert_eq!(var_offset(dump, "watched_list"), Some(103948));
        assert_eq!(var_offset(dump, "nests"), None);
    }
}
