//! Short, right-alignable figures for table cells.

pub use crate::units::ns as dur;

/// A count in at most five characters: 999, 12.3k, 123k, 1.2M, 4.5G.
pub fn count(n: u64) -> String {
    let f = n as f64;
    match n {
        0..=9_999 => n.to_string(),
        10_000..=99_999 => format!("{:.1}k", f / 1e3),
        100_000..=999_999 => format!("{:.0}k", f / 1e3),
        1_000_000..=999_999_999 => format!("{:.1}M", f / 1e6),
        _ => format!("{:.1}G", f / 1e9),
    }
}

/// Events per second.
pub fn rate(r: f64) -> String {
    if r <= 0.0 {
        "0".into()
    } else if r < 10.0 {
        format!("{r:.2}")
    } else if r < 1000.0 {
        format!("{r:.1}")
    } else {
        count(r.round() as u64)
    }
}

/// A percentage with the precision its size deserves.
pub fn pct(p: f64) -> String {
    if p <= 0.0 {
        "0%".into()
    } else if p < 0.001 {
        "<0.001%".into()
    } else if p < 1.0 {
        format!("{p:.3}%")
    } else if p < 10.0 {
        format!("{p:.2}%")
    } else {
        format!("{p:.1}%")
    }
}

/// How long ago, from ns: `now`, `850ms`, `12s`, `5m`, `2h`.
pub fn age(ns: u64) -> String {
    match ns {
        0..=999_999 => "now".into(),
        1_000_000..=999_999_999 => format!("{}ms", ns / 1_000_000),
        _ if ns < 120_000_000_000 => format!("{}s", ns / 1_000_000_000),
        _ if ns < 7_200_000_000_000 => format!("{}m", ns / 60_000_000_000),
        _ => format!("{}h", ns / 3_600_000_000_000),
    }
}

/// Elapsed time as a clock: 0:07, 12:05, 1:23:45.
pub fn clock(ns: u64) -> String {
    let s = ns / 1_000_000_000;
    let (h, m, s) = (s / 3600, s / 60 % 60, s % 60);
    if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_short() {
        assert_eq!(
            [count(42), count(12_345), count(123_456), count(1_234_567), count(5_000_000_000)],
            ["42", "12.3k", "123k", "1.2M", "5.0G"]
        );
        assert_eq!([rate(0.0), rate(1.234), rate(12.34), rate(12_345.0)], ["0", "1.23", "12.3", "12.3k"]);
        assert_eq!([pct(0.0), pct(0.0001), pct(0.1234), pct(5.0), pct(50.0)], ["0%", "<0.001%", "0.123%", "5.00%", "50.0%"]);
        assert_eq!([age(5), age(850_000_000), age(12_000_000_000), age(300_000_000_000)], ["now", "850ms", "12s", "5m"]);
        assert_eq!([clock(7_000_000_000), clock(725_000_000_000), clock(5_025_000_000_000)], ["0:07", "12:05", "1:23:45"]);
    }
}
