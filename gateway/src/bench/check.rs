//! The regression gate CI runs on the cheap rows: a baseline made from
//! several saved runs of one machine (each row's median ratio to its peer
//! and how far the runs strayed from it), and a check of a new run against
//! it.
//!
//! Only ratios are compared: both numbers of a ratio come from one run, so
//! the machine's load moves them together and mostly cancels out; the noise
//! that is left is what the baseline records, measured, not guessed.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use super::compare::{SavedRow, load};

/// How many times its measured noise a row's ratio may fall before the
/// check fails: the noise is the largest straying of a handful of runs, and
/// a later run may stray a little further by chance.
const NOISE_MARGIN: f64 = 2.0;
/// The least fall, in percent, that fails a row: five runs that happened to
/// agree closely (2% apart, say) are no promise that the sixth will.
const MIN_TOLERANCE_PCT: f64 = 20.0;

/// A row's place in the baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expected {
    pub name: String,
    pub peer: String,
    /// Median of peer/us over the runs.
    pub ratio: f64,
    /// Largest |ratio - median| / median over the runs, in percent.
    pub noise_pct: f64,
}

/// The baseline file.
#[derive(Debug, Serialize, Deserialize)]
pub struct Baseline {
    /// What it was measured on and from (the runs' host and commits).
    pub host: String,
    pub runs: Vec<String>,
    pub rows: Vec<Expected>,
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    }
}

/// Each row every run measured (with a ratio): its median and noise.
pub fn expected(runs: &[Vec<SavedRow>]) -> Vec<Expected> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    first
        .iter()
        .filter_map(|row| {
            let mut ratios: Vec<f64> = runs
                .iter()
                .map(|run| {
                    run.iter()
                        .find(|r| r.name == row.name && r.peer == row.peer)
                        .and_then(|r| r.ratio)
                })
                .collect::<Option<_>>()?;
            let mid = median(&mut ratios);
            let noise = ratios
                .iter()
                .map(|r| (r - mid).abs() / mid * 100.0)
                .fold(0.0, f64::max);
            Some(Expected {
                name: row.name.clone(),
                peer: row.peer.clone(),
                ratio: mid,
                noise_pct: noise,
            })
        })
        .collect()
}

/// `cubicle bench --baseline-from RUN...`: writes the baseline to `out`.
pub fn make(runs: &[PathBuf], out: &Path) -> anyhow::Result<()> {
    if runs.len() < 3 {
        bail!(
            "a baseline needs at least 3 runs to measure the noise (got {})",
            runs.len()
        );
    }
    let saved = runs
        .iter()
        .map(|p| load(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let host = saved[0].host.clone();
    if let Some(other) = saved.iter().find(|s| s.host != host) {
        bail!(
            "the runs are from different hosts ({host} and {}): a baseline is one machine's",
            other.host
        );
    }
    let rows = expected(&saved.iter().map(|s| s.rows.clone()).collect::<Vec<_>>());
    for row in &rows {
        println!(
            "{:<45} {:<45} {:>6.2}x ±{:.1}%",
            row.name, row.peer, row.ratio, row.noise_pct
        );
    }
    let baseline = Baseline {
        host,
        runs: saved
            .iter()
            .map(|s| s.commit.clone().unwrap_or_default())
            .collect(),
        rows,
    };
    std::fs::write(out, serde_json::to_string_pretty(&baseline)? + "\n")
        .with_context(|| format!("cannot write {}", out.display()))?;
    println!("baseline written to {}", out.display());
    Ok(())
}

/// Rows whose ratio fell below the baseline's by more than
/// [`NOISE_MARGIN`] times its noise (at least [`MIN_TOLERANCE_PCT`]) in
/// every one of `runs` (a row is judged by its best ratio), each as a
/// sentence; and baseline rows no run measured.
pub fn regressions(baseline: &[Expected], runs: &[&[SavedRow]]) -> Vec<String> {
    baseline
        .iter()
        .filter_map(|want| {
            let measured: Vec<&SavedRow> = runs
                .iter()
                .filter_map(|rows| {
                    rows.iter()
                        .find(|r| r.name == want.name && r.peer == want.peer)
                })
                .collect();
            if measured.is_empty() {
                return Some(format!(
                    "{} (against {}): not measured in this run",
                    want.name, want.peer
                ));
            }
            let Some(ratio) = measured
                .iter()
                .filter_map(|r| r.ratio)
                .max_by(f64::total_cmp)
            else {
                return Some(format!(
                    "{} (against {}): no ratio in this run",
                    want.name, want.peer
                ));
            };
            let tolerance = (NOISE_MARGIN * want.noise_pct).max(MIN_TOLERANCE_PCT);
            let floor = want.ratio * (1.0 - tolerance / 100.0).max(0.0);
            (ratio < floor).then(|| {
                format!(
                    "{} (against {}): peer/us {ratio:.2}x, more than {tolerance:.0}% below the \
                     baseline's {:.2}x (its noise ±{:.1}%): at least {floor:.2}x expected",
                    want.name, want.peer, want.ratio, want.noise_pct
                )
            })
        })
        .collect()
}

/// A baseline file (`cubicle bench --baseline-from`).
pub fn load_baseline(path: &Path) -> anyhow::Result<Baseline> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the baseline {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a bench baseline (`cubicle bench --baseline-from`)",
            path.display()
        )
    })
}

/// `cubicle bench --check BASELINE`: the rows that fell behind `baseline`
/// in every run saved at `runs` (empty when none did), printed as it goes.
pub fn behind(baseline: &Baseline, runs: &[PathBuf]) -> anyhow::Result<Vec<String>> {
    let saved = runs
        .iter()
        .map(|p| load(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if let Some(other) = saved.iter().find(|s| s.host != baseline.host) {
        println!(
            "note: the baseline is of another machine ({}); this is {}",
            baseline.host, other.host
        );
    }
    let rows: Vec<&[SavedRow]> = saved.iter().map(|s| s.rows.as_slice()).collect();
    let found = regressions(&baseline.rows, &rows);
    if found.is_empty() {
        println!(
            "bench check: all {} rows within their noise of the baseline",
            baseline.rows.len()
        );
    }
    for line in &found {
        println!("bench check: {line}");
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, ratio: Option<f64>) -> SavedRow {
        SavedRow {
            name: name.into(),
            unit: "ms".into(),
            cubicle: None,
            peer: "floor".into(),
            ratio,
        }
    }

    #[test]
    fn the_baseline_is_the_median_and_the_largest_straying() {
        let runs = vec![
            vec![row("exec", Some(0.5)), row("cdp", Some(0.2))],
            vec![row("exec", Some(0.4)), row("cdp", None)],
            vec![row("exec", Some(0.6)), row("cdp", Some(0.2))],
        ];
        let rows = expected(&runs);
        assert_eq!(
            rows.len(),
            1,
            "a row one run lacks has no baseline: {rows:?}"
        );
        assert_eq!(rows[0].name, "exec");
        assert!((rows[0].ratio - 0.5).abs() < 1e-9);
        assert!((rows[0].noise_pct - 20.0).abs() < 1e-9);
    }

    #[test]
    fn a_fall_beyond_the_noise_fails_and_names_the_row_a_fall_within_does_not() {
        let baseline = [Expected {
            name: "exec".into(),
            peer: "floor".into(),
            ratio: 0.5,
            noise_pct: 10.0,
        }];
        assert!(regressions(&baseline, &[&[row("exec", Some(0.41))]]).is_empty());
        assert!(regressions(&baseline, &[&[row("exec", Some(0.9))]]).is_empty());
        let fell = regressions(&baseline, &[&[row("exec", Some(0.39))]]);
        assert_eq!(fell.len(), 1);
        assert!(
            fell[0].contains("exec") && fell[0].contains("0.39x"),
            "{fell:?}"
        );
        let missing = regressions(&baseline, &[&[row("cdp", Some(1.0))]]);
        assert!(missing[0].contains("not measured"), "{missing:?}");
    }

    #[test]
    fn a_row_fails_only_when_it_fell_behind_in_every_run() {
        let baseline = [Expected {
            name: "exec".into(),
            peer: "floor".into(),
            ratio: 0.5,
            noise_pct: 10.0,
        }];
        let noisy = [row("exec", Some(0.3))];
        let fine = [row("exec", Some(0.48))];
        assert!(
            regressions(&baseline, &[&noisy, &fine]).is_empty(),
            "one slow run of two is noise"
        );
        let fell = regressions(&baseline, &[&noisy, &[row("exec", Some(0.35))]]);
        assert_eq!(fell.len(), 1, "behind in both runs is a regression");
        assert!(
            fell[0].contains("0.35x"),
            "the better run is named: {fell:?}"
        );
    }
}
