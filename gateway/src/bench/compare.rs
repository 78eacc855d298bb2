//! `cubicle bench --compare OLD.json NEW.json`: two saved runs side by side,
//! row by row, with the change in Cubicle's p50 and in the ratio to the
//! peer. Nothing is measured; rows are matched by measurement and peer.
//!
//! The ratio column is the one to read across machines or loads: both of
//! its numbers come from one run. The p50 change is only meaningful between
//! runs on the same machine under the same load.

use std::path::Path;

use anyhow::Context;
use serde::Deserialize;

use super::Stat;

/// A saved run, as `cubicle bench` writes it (only what is compared).
#[derive(Debug, Deserialize)]
pub(super) struct Saved {
    pub commit: Option<String>,
    pub host: String,
    pub rows: Vec<SavedRow>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct SavedRow {
    pub name: String,
    pub unit: String,
    pub cubicle: Option<Stat>,
    pub peer: String,
    pub ratio: Option<f64>,
}

/// One line of the comparison.
#[derive(Debug, PartialEq)]
pub struct Change {
    pub name: String,
    pub peer: String,
    pub unit: String,
    pub old: Option<f64>,
    pub new: Option<f64>,
    /// (new - old) / old, in percent: below zero is better (every unit the
    /// table has, ms and MiB, is better smaller).
    pub change_pct: Option<f64>,
    pub old_ratio: Option<f64>,
    pub new_ratio: Option<f64>,
}

pub(super) fn load(path: &Path) -> anyhow::Result<Saved> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the bench results {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a `cubicle bench` results file (its --out JSON)",
            path.display()
        )
    })
}

/// Pairs the rows of two runs: every row of the new run in its order, then
/// the old run's rows the new one no longer has.
fn pair(old: &[SavedRow], new: &[SavedRow]) -> Vec<Change> {
    let same = |a: &SavedRow, b: &SavedRow| a.name == b.name && a.peer == b.peer;
    let p50 = |row: Option<&SavedRow>| row.and_then(|r| r.cubicle).map(|s| s.p50);
    let mut changes: Vec<Change> = new
        .iter()
        .map(|row| {
            let before = old.iter().find(|o| same(o, row));
            let (old_p50, new_p50) = (p50(before), p50(Some(row)));
            let change_pct = match (old_p50, new_p50) {
                (Some(o), Some(n)) if o > 0.0 => Some((n - o) / o * 100.0),
                _ => None,
            };
            Change {
                name: row.name.clone(),
                peer: row.peer.clone(),
                unit: row.unit.clone(),
                old: old_p50,
                new: new_p50,
                change_pct,
                old_ratio: before.and_then(|r| r.ratio),
                new_ratio: row.ratio,
            }
        })
        .collect();
    changes.extend(
        old.iter()
            .filter(|o| !new.iter().any(|n| same(o, n)))
            .map(|row| Change {
                name: row.name.clone(),
                peer: row.peer.clone(),
                unit: row.unit.clone(),
                old: p50(Some(row)),
                new: None,
                change_pct: None,
                old_ratio: row.ratio,
                new_ratio: None,
            }),
    );
    changes
}

/// Prints the comparison of the runs saved at `old` and `new`.
pub fn run(old: &Path, new: &Path) -> anyhow::Result<()> {
    let (before, after) = (load(old)?, load(new)?);
    let label = |s: &Saved| {
        let commit = s
            .commit
            .as_deref()
            .map_or("unknown commit", |c| &c[..c.len().min(10)]);
        format!("{commit} on {}", s.host)
    };
    println!("old: {} ({})", old.display(), label(&before));
    println!("new: {} ({})", new.display(), label(&after));
    if before.host != after.host {
        println!("the hosts differ: compare the ratio columns, not the p50s");
    }
    let number = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"));
    let ratio = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}x"));
    println!();
    println!(
        "{:<40} {:<34} {:>5} {:>9} {:>9} {:>8} {:>8} {:>8}",
        "measurement", "peer", "unit", "old p50", "new p50", "change", "old", "new"
    );
    for c in pair(&before.rows, &after.rows) {
        let change = c
            .change_pct
            .map_or_else(|| "-".to_owned(), |p| format!("{p:+.0}%"));
        println!(
            "{:<40} {:<34} {:>5} {:>9} {:>9} {:>8} {:>8} {:>8}",
            c.name,
            c.peer,
            c.unit,
            number(c.old),
            number(c.new),
            change,
            ratio(c.old_ratio),
            ratio(c.new_ratio)
        );
    }
    println!();
    println!("change: of Cubicle's p50, below zero is better; old/new: peer/us, above 1 is better");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, peer: &str, p50: Option<f64>, ratio: Option<f64>) -> SavedRow {
        SavedRow {
            name: name.into(),
            unit: "ms".into(),
            cubicle: p50.map(|p50| Stat {
                p50,
                p95: p50,
                n: 1,
            }),
            peer: peer.into(),
            ratio,
        }
    }

    #[test]
    fn rows_pair_by_name_and_peer_and_missing_ones_show() {
        let old = vec![
            row("action", "GET /v1/me", Some(10.0), Some(0.2)),
            row("action", "xdotool", Some(10.0), Some(0.9)),
            row("gone", "peer", Some(1.0), None),
        ];
        let new = vec![
            row("action", "xdotool", Some(8.0), Some(1.1)),
            row("action", "GET /v1/me", Some(12.0), Some(0.15)),
            row("new row", "peer", Some(3.0), Some(1.0)),
        ];
        let changes = pair(&old, &new);
        assert_eq!(changes.len(), 4);
        assert_eq!(changes[0].peer, "xdotool");
        assert_eq!(changes[0].change_pct, Some(-20.0));
        assert_eq!(
            (changes[0].old_ratio, changes[0].new_ratio),
            (Some(0.9), Some(1.1))
        );
        assert_eq!(changes[1].change_pct, Some(20.0));
        assert_eq!((changes[2].old, changes[2].change_pct), (None, None));
        assert_eq!((changes[3].name.as_str(), changes[3].new), ("gone", None));
    }

    #[test]
    fn a_file_that_is_not_a_run_says_so() {
        let dir = std::env::temp_dir().join(format!("cubicle-compare-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("other.json");
        std::fs::write(&path, "{\"rows\": 3}").unwrap();
        let err = format!("{:#}", load(&path).unwrap_err());
        assert!(
            err.contains("is not a `cubicle bench` results file"),
            "{err}"
        );
        let err = format!("{:#}", load(&dir.join("missing.json")).unwrap_err());
        assert!(err.contains("cannot read the bench results"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
