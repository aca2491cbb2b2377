//! Repeated measurements: their median and range, and the interval of
//! their mean.

/// Median and range of repeated measurements.
#[derive(Clone, Copy, Debug, Default)]
pub struct Spread {
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(xs: &[f64]) -> Spread {
        let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return Spread { n: 0, median: f64::NAN, min: f64::NAN, max: f64::NAN };
        }
        v.sort_by(f64::total_cmp);
        let m = v.len() / 2;
        let median = if v.len() % 2 == 1 { v[m] } else { (v[m - 1] + v[m]) / 2.0 };
        Spread { n: v.len(), median, min: v[0], max: v[v.len() - 1] }
    }

    /// The median, where there was a sample.
    pub fn value(&self) -> Option<f64> {
        (self.n > 0).then_some(self.median)
    }

    /// "median [min–max]" with `prec` decimals.
    pub fn show(&self, prec: usize) -> String {
        if self.n == 0 {
            return "n/a".into();
        }
        format!("{:.p$} [{:.p$}–{:.p$}]", self.median, self.min, self.max, p = prec)
    }
}

/// Half-width of the 95% confidence interval of the mean of `xs`
/// (Student's t, n − 1 degrees of freedom); NaN under two samples.
pub fn ci95_half(xs: &[f64]) -> f64 {
    // t(0.975, df) for df = 1..=30; beyond, the normal's 1.96 is close.
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101,
        2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    let v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    let n = v.len();
    if n < 2 {
        return f64::NAN;
    }
    let mean = v.iter().sum::<f64>() / n as f64;
    let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
    T.get(n - 2).copied().unwrap_or(1.96) * sd / (n as f64).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_95_percent_interval_narrows_with_samples() {
        // sd √(2/3) over 4 samples: t(3) = 3.182, over √4.
        let four = [1.0, 2.0, 3.0, 2.0];
        let sd = (2.0f64 / 3.0).sqrt();
        assert!((ci95_half(&four) - 3.182 * sd / 2.0).abs() < 1e-9, "{}", ci95_half(&four));
        assert!(ci95_half(&[1.0]).is_nan());
        assert_eq!(ci95_half(&[2.0; 40]), 0.0);
        let wide: Vec<f64> = (0..40).map(|i| (i % 2) as f64).collect();
        assert!((ci95_half(&wide) - 1.96 * (40.0f64 / 39.0 / 4.0).sqrt() / 40f64.sqrt()).abs() < 1e-9);
    }
}
