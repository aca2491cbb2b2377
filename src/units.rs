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

#[cfg(test)]
mod tests {
    #[test]
    fn picks_a_unit() {
        assert_eq!(super::ns(999), "999ns");
        assert_eq!(super::ns(1_500), "1.5µs");
        assert_eq!(super::ns(42_000_000), "42.0ms");
        assert_eq!(super::ns(3_210_000_000), "3.21s");
    }
}
