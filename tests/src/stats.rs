//! Percentiles for the benchmarks (`benches/`), which print numbers and
//! ratios and assert nothing about time.

use std::time::Duration;

/// The `p`th percentile of `samples` in milliseconds (sorts them).
pub fn percentile_ms(samples: &mut [Duration], p: usize) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    samples.sort();
    let i = (samples.len() * p / 100).min(samples.len() - 1);
    samples[i].as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_known_samples() {
        let mut samples: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
        assert_eq!(percentile_ms(&mut samples, 50), 51.0);
        assert_eq!(percentile_ms(&mut samples, 95), 96.0);
        assert_eq!(percentile_ms(&mut samples, 100), 100.0);
        assert!(percentile_ms(&mut [], 50).is_nan());
    }
}
