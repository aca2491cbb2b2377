//! Durations as users type them: `500ns`, `2us`, `2µs`, `1.5ms`, `10s`, `1m`.

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DurationError {
    #[error("malformed duration {0:?}: write a number and a unit, e.g. 500ns, 2us, 1ms, 10s, 1m")]
    Malformed(String),
    #[error("{0:?} is too long: at most about 292 years")]
    TooLong(String),
}

/// Nanoseconds in `s`.
pub fn parse_ns(s: &str) -> Result<u64, DurationError> {
    let err = || DurationError::Malformed(s.to_string());
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(err)?;
    let (num, unit) = t.split_at(split);
    let scale: f64 = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" | "μs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        _ => return Err(err()),
    };
    if num.is_empty() || num.matches('.').count() > 1 {
        return Err(err());
    }
    let v: f64 = num.parse().map_err(|_| err())?;
    let ns = (v * scale).round();
    if !ns.is_finite() || ns > u64::MAX as f64 / 2.0 {
        return Err(DurationError::TooLong(s.to_string()));
    }
    Ok(ns as u64)
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PositiveError {
    #[error(transparent)]
    Malformed(#[from] DurationError),
    #[error("{0:?} is zero: give a length above 0")]
    Zero(String),
}

/// A length that must not be 0 (`--threshold 0` reports every loop,
/// `--duration 0s` would stop before starting).
pub fn positive_ns(s: &str) -> Result<u64, PositiveError> {
    match parse_ns(s)? {
        0 => Err(PositiveError::Zero(s.to_string())),
        n => Ok(n),
    }
}

/// The wake-up probe's period: under 10 µs the probe would measure its own
/// sleep and wake-up; over 10 s it would hardly sample.
pub fn period_ns(s: &str) -> Result<u64, String> {
    const MIN: u64 = 10_000;
    const MAX: u64 = 10_000_000_000;
    match positive_ns(s).map_err(|e| e.to_string())? {
        n if n < MIN => Err(format!("{s:?} is under 10us: the probe would measure its own sleep; give 10us to 10s")),
        n if n > MAX => Err(format!("{s:?} is over 10s: give 10us to 10s")),
        n => Ok(n),
    }
}

/// A watch run's `--duration`: at least [`RUN_MIN_NS`]. Shorter could not
/// be kept: loading, attaching and the probe's first measure of its loop
/// take tens of ms (`--duration 1ns` ran 79 ms, silently).
pub fn run_length(s: &str) -> Result<std::time::Duration, String> {
    match positive_ns(s).map_err(|e| e.to_string())? {
        n if n < RUN_MIN_NS => Err(format!(
            "{s:?} is under 100ms: a run's start (loading, attaching, the probe's first measure) takes tens of ms; give 100ms or more"
        )),
        n => Ok(std::time::Duration::from_nanos(n)),
    }
}

/// The shortest watch run.
pub const RUN_MIN_NS: u64 = 100_000_000;

pub fn positive(s: &str) -> Result<std::time::Duration, PositiveError> {
    positive_ns(s).map(std::time::Duration::from_nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_lasts_100ms_at_least() {
        assert!(run_length("1ns").unwrap_err().starts_with("\"1ns\" is under 100ms"));
        assert!(run_length("99ms").is_err());
        assert_eq!(run_length("100ms"), Ok(std::time::Duration::from_millis(100)));
        assert!(run_length("0s").unwrap_err().contains("is zero"));
    }

    #[test]
    fn units() {
        assert_eq!(parse_ns("500ns"), Ok(500));
        assert_eq!(parse_ns("2us"), Ok(2000));
        assert_eq!(parse_ns("2µs"), Ok(2000));
        assert_eq!(parse_ns("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_ns("10s"), Ok(10_000_000_000));
        assert_eq!(parse_ns("1m"), Ok(60_000_000_000));
    }

    #[test]
    fn zero_is_refused_where_it_makes_no_sense() {
        assert_eq!(positive_ns("0"), Err(PositiveError::Malformed(DurationError::Malformed("0".into()))));
        assert_eq!(parse_ns("99999999999999h"), Err(DurationError::TooLong("99999999999999h".into())));
        assert_eq!(positive_ns("0ns"), Err(PositiveError::Zero("0ns".into())));
        assert_eq!(positive("0.0s"), Err(PositiveError::Zero("0.0s".into())));
        assert_eq!(positive_ns("1ns"), Ok(1));
    }

    #[test]
    fn periods_between_10us_and_10s() {
        assert_eq!(period_ns("1ms"), Ok(1_000_000));
        assert_eq!(period_ns("10us"), Ok(10_000));
        assert!(period_ns("9us").unwrap_err().contains("under 10us"));
        assert!(period_ns("11s").unwrap_err().contains("over 10s"));
        assert!(period_ns("0s").unwrap_err().contains("is zero"));
    }

    #[test]
    fn garbage() {
        for bad in ["", "10", "ms", "1.2.3s", "-1s", "1 parsec", "1e9ns", "99999999999999999h"] {
            assert!(parse_ns(bad).is_err(), "{bad}");
        }
    }
}
