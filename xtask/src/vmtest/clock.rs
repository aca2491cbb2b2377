//! Figure 1's arm64 part (BENCHMARKS.md): what the spin probe's clock was
//! in each arm64 VM, from the guest's `clock` check — the counter it read,
//! its loop floor, and the counter's distance from CLOCK_MONOTONIC when it
//! stopped. Under TCG these timings mean nothing: the part shows that the
//! loop reads CNTVCT_EL0 and converts it, kernel by kernel.

use std::fmt::Write;

use super::check::Check;

/// One VM's row: its kernel, `uname -r`, mode and clock check.
pub struct Row<'a> {
    pub kernel: &'a str,
    pub release: &'a str,
    pub mode: &'a str,
    pub check: Option<&'a Check>,
}

/// `key=value` from a check's detail (the guest writes them space-separated).
fn field<'a>(detail: &'a str, key: &str) -> Option<&'a str> {
    detail.split_whitespace().find_map(|w| w.strip_prefix(key)?.strip_prefix('=')).filter(|v| !v.is_empty())
}

/// The part, headed as bench's report expects (`heading`), or None when no
/// VM made a clock check.
pub fn markdown(rows: &[Row<'_>], heading: &str, date: &str, commit: &str) -> Option<String> {
    if rows.iter().all(|r| r.check.is_none()) {
        return None;
    }
    let mut o = String::new();
    let _ = writeln!(o, "{heading}arm64's virtual counter, under emulation (function only)\n");
    let _ = writeln!(
        o,
        "`cargo xtask vmtest --arch arm64` on {date}, `{commit}`: in each VM (`qemu-system-aarch64 -M virt -cpu max`, TCG: \
         one host thread emulates the guest, so these timings mean nothing), the spin probe's run (`jitterwatch --cpus 1`, \
         `--clock auto`) reports the clock its loop read, its floor, and the counter's distance from CLOCK_MONOTONIC when it \
         stopped (the summary's `clock`, `loop_floor_ns` and `tsc_drift_ns`). The `clock` check passes on `cntvct` within 1 ms. \
         qemu 7.2's counter runs at 62.5 MHz (16 ns steps).\n"
    );
    let _ = writeln!(o, "| kernel | mode | check | clock | loop floor, ns | counter − CLOCK_MONOTONIC at the end, ns |");
    let _ = writeln!(o, "|---|---|---|---|---|---|");
    for r in rows {
        let (verdict, clock, floor, drift) = match r.check {
            None => ("not run", "", "", ""),
            Some(c) => (
                if c.pass { "pass" } else { "**fail**" },
                field(&c.detail, "clock").unwrap_or("?"),
                field(&c.detail, "floor_ns").unwrap_or("?"),
                field(&c.detail, "drift_ns").unwrap_or("?"),
            ),
        };
        let _ = writeln!(o, "| {} ({}) | {} | {verdict} | {clock} | {floor} | {drift} |", r.kernel, r.release, r.mode);
    }
    Some(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_per_vm_from_its_clock_check() {
        let ok = Check {
            name: "clock".into(),
            pass: true,
            detail: "clock=cntvct drift_ns=-17 floor_ns=42 clocksource=arch_sys_counter no SMI counter: SMIs are x86's".into(),
        };
        let bad = Check { name: "clock".into(), pass: false, detail: "clock=vdso drift_ns=none floor_ns= clocksource=x".into() };
        let rows = [
            Row { kernel: "debian12", release: "6.1.0-50-arm64", mode: "untuned", check: Some(&ok) },
            Row { kernel: "sid", release: "7.2.13+deb14-arm64", mode: "tuned", check: Some(&bad) },
            Row { kernel: "debian13", release: "?", mode: "tuned", check: None },
        ];
        let md = markdown(&rows, "### 1c. ", "2026-11-26 20:00 UTC", "abc1234").unwrap();
        assert!(md.starts_with("### 1c. arm64's virtual counter"), "{md}");
        assert!(md.contains("| debian12 (6.1.0-50-arm64) | untuned | pass | cntvct | 42 | -17 |"), "{md}");
        assert!(md.contains("| sid (7.2.13+deb14-arm64) | tuned | **fail** | vdso | ? | none |"), "{md}");
        assert!(md.contains("| debian13 (?) | tuned | not run |  |  |  |"), "{md}");
        assert!(md.contains("`abc1234`"));
        assert_eq!(markdown(&rows[2..], "### 1c. ", "d", "c"), None, "no clock check, no part");
    }
}
