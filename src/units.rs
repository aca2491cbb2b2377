//! Durations for reading: ns, µs, ms, s with at most four significant digits.

pub fn ns(v: u64) -> String {
    let f = v as f64;
    if v < 1_000 {
        format!("{v}ns")
    } else if v < 1_000_000 {
        format!("{:.1}µs", f / 1e3)
    } else if v < 1_000_000_000 {
        format!("{:.1}ms", f / 1e6)
    } else {
        format!("{:.2}s", f / 1e9)
    }
}

/// Bytes for reading: B, KiB, MiB, GiB.
pub fn bytes(v: u64) -> String {
    let f = v as f64;
    if v < 1 << 10 {
        format!("{v} B")
    } else if v < 1 << 20 {
        format!("{:.1} KiB", f / 1024.0)
    } else if v < 1 << 30 {
        format!("{:.1} MiB", f / (1024.0 * 1024.0))
    } else {
        format!("{:.2} GiB", f / (1024.0 * 1024.0 * 1024.0))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn picks_a_unit() {
        assert_eq!(super::ns(999), "999ns");
        assert_eq!(super::ns(1_500), "1.5µs");
        assert_eq!(super::ns(42_000_000), "42.0ms");
        assert_eq!(super::ns(3_210_000_000), "3.21s");
        assert_eq!(super::bytes(512), "512 B");
        assert_eq!(super::bytes(3 << 20), "3.0 MiB");
    }
}
