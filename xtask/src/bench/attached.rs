//! The running jitterwatch's BPF objects, found with bpftool: its .bss map
//! and `watched`'s offset in it (how the benchmark's loops turn its
//! watching of their CPU off and on), and its linked programs (the second
//! set those loops link again, links.h).

use std::process::Command;

use anyhow::{Context as _, Result};

use super::util;

/// The running jitterwatch's .bss map (the newest of that name) and the
/// offset of `watched` in it, from bpftool.
pub fn watched_byte() -> Result<(u64, u64)> {
    let maps = util::output(Command::new("bpftool").args(["map", "show", "-j"]))?;
    let (map, btf) = bss_map(&maps).context("no jitterwatch .bss map is loaded")?;
    let dump = util::output(Command::new("bpftool").args(["btf", "dump", "id", &btf.to_string()]))?;
    let offset = var_offset(&dump, "watched").context("no `watched` in the .bss map's BTF")?;
    Ok((map, offset))
}

/// From `bpftool link show -j` and `bpftool prog show -j`: the loop's
/// PROG arguments for every program linked now that uses jitterwatch's
/// .bss map `bss` (its programs), `ID` for a tp_btf program (its link names
/// its own tracepoint), `ID:TRACEPOINT` for a raw_tp one.
pub fn second_set(links: &str, progs: &str, bss: u64) -> Vec<String> {
    let parse = |j: &str| serde_json::from_str::<Vec<serde_json::Value>>(j).unwrap_or_default();
    let progs = parse(progs);
    let mut out: Vec<String> = parse(links)
        .iter()
        .filter_map(|l| {
            let id = l["prog_id"].as_u64()?;
            let p = progs.iter().find(|p| p["id"].as_u64() == Some(id))?;
            if !p["map_ids"].as_array()?.iter().any(|m| m.as_u64() == Some(bss)) {
                return None;
            }
            match p["type"].as_str()? {
                "tracing" => Some(id.to_string()),
                "raw_tracepoint" => Some(format!("{id}:{}", l["tp_name"].as_str()?)),
                _ => None,
            }
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The second set for the jitterwatch whose .bss map is `bss`, read now.
pub fn second_set_now(bss: u64) -> Result<Vec<String>> {
    let read = || -> Result<[String; 2]> {
        Ok([
            util::output(Command::new("bpftool").args(["link", "show", "-j"]))?,
            util::output(Command::new("bpftool").args(["prog", "show", "-j"]))?,
        ])
    };
    let [links, progs] = read().context("listing jitterwatch's linked programs")?;
    Ok(second_set(&links, &progs, bss))
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

    #[test]
    fn the_second_set_is_every_linked_program_of_jitterwatchs_object() {
        let links = r#"[{"id":1,"type":"raw_tracepoint","prog_id":31,"tp_name":"sched_switch"},
            {"id":2,"type":"raw_tracepoint","prog_id":41,"tp_name":"workqueue_execute_end"},
            {"id":3,"type":"raw_tracepoint","prog_id":50,"tp_name":"sched_switch"},
            {"id":4,"type":"perf_event","prog_id":32},
            {"id":5,"type":"raw_tracepoint","prog_id":99,"tp_name":"gone"}]"#;
        let progs = r#"[{"id":31,"type":"tracing","name":"on_sched_switch","map_ids":[7,9]},
            {"id":41,"type":"raw_tracepoint","name":"on_work_end","map_ids":[9]},
            {"id":50,"type":"tracing","name":"another_tool","map_ids":[12]},
            {"id":32,"type":"perf_event","name":"on_switch_event","map_ids":[9]}]"#;
        assert_eq!(second_set(links, progs, 9), ["31", "41:workqueue_execute_end"]);
        assert!(second_set("not json", progs, 9).is_empty());
    }
}
