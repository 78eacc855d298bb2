//! Offline verification of a bundle: the same check runs in `cubicle audit
//! verify` and behind the replay page's badge.
//!
//! For every record, in the order of `events.jsonl`:
//! 1. its hash must be `SHA-256(prev ‖ bytes)` of its own bytes and the
//!    `prev` it names (else it was *altered*);
//! 2. its `seq` must be the one after the record before (else records were
//!    *removed* or *reordered*);
//! 3. its `prev` must be the hash of the record before (else the chain was
//!    spliced).
//!
//! Then every checkpoint's signature must hold under the key, and the
//! chain must have the signed hash at the signed seq: a chain re-hashed
//! without the key fails here, and so does one cut short before a signed
//! head. The last record must be covered by a valid checkpoint: every
//! export signs its head first, so an unsigned tail is what a forger who
//! re-hashed the chain and dropped the checkpoints leaves behind (without
//! this rule such a bundle verified, with only a note). A chain read live,
//! between two checkpoints, may pass [`Tail::MayBeUnsigned`]. Last, every
//! segment a record names must be in the bundle with the recorded SHA-256,
//! and the bundle's `traffic.har`, if it has one, must hold exactly the
//! entries the verified `egress.request` records make.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use ed25519_dalek::VerifyingKey;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::audit_chain::{self, EXPIRE_KIND, Hash, Record, SEGMENT_KIND};
use crate::bundle::Bundle;
use crate::checkpoint::{Checkpoint, parse_public_key};

/// One thing found wrong, naming where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The record it is about (its sequence number in the chain), if any.
    pub seq: Option<u64>,
    /// Line in `events.jsonl` or `checkpoints.jsonl`, 1-based, if any.
    pub line: Option<usize>,
    /// What is wrong, for a person.
    pub message: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// What a verification found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub chain: String,
    /// The public key the checkpoints were checked with (hex).
    pub key: String,
    /// Whether that key was given by the caller rather than read from the
    /// bundle (only then does a good signature say who signed).
    pub key_pinned: bool,
    pub records: u64,
    pub checkpoints: u64,
    pub segments: u64,
    /// The entries of the bundle's `traffic.har` that match the records
    /// (none without one).
    pub har_entries: u64,
    /// The last record's seq, and the last seq a valid checkpoint covers.
    pub last_seq: u64,
    pub checkpointed_seq: u64,
    /// Everything wrong, the first bad record first.
    pub failures: Vec<Finding>,
    /// What verification cannot vouch for (records after the last
    /// checkpoint).
    pub warnings: Vec<String>,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.failures.is_empty()
    }

    /// The first failure: the first bad record.
    pub fn first_failure(&self) -> Option<&Finding> {
        self.failures.first()
    }
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow)]
    hash: Cow<'a, str>,
    #[serde(borrow)]
    record: &'a RawValue,
}

/// Reads one line of `events.jsonl`: its hash, the record's bytes as they
/// are, and the record. A line in the shape the daemon exports
/// ([`audit_chain::export_line`]) is cut apart where that shape says, and
/// only its record is parsed (reading the line as JSON first scans every
/// record twice); any other line goes through the JSON parser, whose error
/// is the one reported.
fn read_line(raw: &str) -> Result<(Cow<'_, str>, &str, View<'_>), String> {
    let exported = raw
        .strip_prefix("{\"hash\":\"")
        .and_then(|rest| rest.split_at_checked(64))
        .filter(|(hash, _)| hash.bytes().all(|b| b.is_ascii_hexdigit()))
        .and_then(|(hash, rest)| {
            let bytes = rest.strip_prefix("\",\"record\":")?.strip_suffix('}')?;
            Some((hash, bytes))
        });
    if let Some((hash, bytes)) = exported
        && let Ok(view) = serde_json::from_str::<View>(bytes)
    {
        return Ok((Cow::Borrowed(hash), bytes, view));
    }
    let line: Line = serde_json::from_str(raw).map_err(|e| e.to_string())?;
    let bytes = line.record.get();
    let view = serde_json::from_str(bytes).map_err(|e| e.to_string())?;
    Ok((line.hash, bytes, view))
}

/// A record as `events.jsonl` holds it, read in place: every field of a
/// [`Record`], each checked for its type as reading a `Record` checks it,
/// but nothing copied and the detail only checked to be JSON. A bundle
/// holds one per event; reading each into a `Record` (its detail a tree of
/// `Value`s) was four fifths of verifying one. The later checks read the
/// detail only of the few kinds they need ([`Seen::detail`], [`Seen::record`]).
#[derive(Deserialize)]
// The fields no check reads are still read, for their types.
#[allow(dead_code)]
struct View<'a> {
    v: u32,
    #[serde(borrow)]
    chain: Cow<'a, str>,
    seq: u64,
    #[serde(borrow)]
    prev: Cow<'a, str>,
    at: i64,
    #[serde(borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    workspace: Option<Cow<'a, str>>,
    #[serde(borrow)]
    actor: Option<ActorView<'a>>,
    #[serde(borrow)]
    detail: &'a RawValue,
    #[serde(borrow)]
    request_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    client: Option<Cow<'a, str>>,
    #[serde(borrow)]
    outcome: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct ActorView<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow)]
    role: Cow<'a, str>,
}

/// A record that passed its own checks, for the later ones.
struct Seen<'a> {
    hash: Hash,
    line: usize,
    kind: Cow<'a, str>,
    /// The record's bytes as the bundle holds them.
    bytes: &'a str,
    detail: &'a RawValue,
}

impl Seen<'_> {
    /// Its detail (already read once as JSON, so it reads again).
    fn detail(&self) -> serde_json::Value {
        serde_json::from_str(self.detail.get()).unwrap_or_default()
    }

    /// The whole record (read once already as one, so it reads again).
    fn record(&self) -> Option<Record> {
        serde_json::from_str(self.bytes).ok()
    }
}

/// Whether records after the last valid checkpoint fail verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// They fail: the last record must be signed (every export is).
    Signed,
    /// They are noted, not failed: a live chain between two checkpoints
    /// (`cubicle audit verify --allow-unsigned-tail`).
    MayBeUnsigned,
}

/// Verifies `bundle`; `pinned` is the public key the auditor trusts (hex),
/// else the bundle's own key is used (and the report says so).
pub fn verify(bundle: &Bundle, pinned: Option<&str>, tail: Tail) -> Report {
    let chain = bundle.manifest.chain.clone();
    let mut report = Report {
        chain: chain.clone(),
        ..Report::default()
    };
    let key = match resolve_key(bundle, pinned, &mut report) {
        Some(key) => key,
        None => return report,
    };
    let mut failures = Vec::new();
    let events = String::from_utf8_lossy(&bundle.events);
    let by_seq = walk_records(&events, &chain, &mut report, &mut failures);
    check_checkpoints(bundle, &key, &by_seq, &mut report, &mut failures);
    check_segments(bundle, &by_seq, &mut report, &mut failures);
    // The first bad record first; findings about the bundle as a whole last
    // (its HAR, made from the records, after what is wrong with them).
    failures.sort_by_key(|f| f.seq.unwrap_or(u64::MAX));
    report.failures.extend(failures);
    check_tail(tail, &mut report);
    let mut whole = Vec::new();
    check_har(bundle, &by_seq, &mut report, &mut whole);
    report.failures.extend(whole);
    report
}

/// The last record must be under a valid checkpoint (or, for a live chain,
/// the unsigned records are named in a note).
fn check_tail(tail: Tail, report: &mut Report) {
    if report.records == 0 && report.checkpoints == 0 {
        report.failures.push(Finding {
            seq: None,
            line: None,
            message: "the bundle holds no record and no checkpoint: nothing in it is signed, \
                      so there is nothing to verify (an export always holds the chain's records \
                      and a checkpoint over its head)"
                .into(),
        });
        return;
    }
    if report.last_seq <= report.checkpointed_seq || !report.ok() {
        return;
    }
    let (first, last) = (report.checkpointed_seq + 1, report.last_seq);
    match tail {
        Tail::MayBeUnsigned => report.warnings.push(format!(
            "records {first}..={last} are after the last checkpoint: their content is chained, \
             but had they been cut off the bundle would look the same"
        )),
        Tail::Signed => report.failures.push(Finding {
            seq: Some(first),
            line: None,
            message: format!(
                "records {first}..={last} are not covered by any valid checkpoint: every export \
                 signs its last record, so these were added, or re-hashed with the checkpoints \
                 removed, by someone without the key (for a chain read live between two \
                 checkpoints, pass --allow-unsigned-tail)"
            ),
        }),
    }
}

fn resolve_key(bundle: &Bundle, pinned: Option<&str>, report: &mut Report) -> Option<VerifyingKey> {
    let fail = |report: &mut Report, message: String| {
        report.failures.push(Finding {
            seq: None,
            line: None,
            message,
        });
    };
    let own = match parse_public_key(&bundle.public_key) {
        Ok(key) => key,
        Err(err) => {
            fail(report, format!("the bundle's audit-key.pub: {err}"));
            return None;
        }
    };
    let key = match pinned {
        Some(text) => match parse_public_key(text) {
            Ok(key) => {
                report.key_pinned = true;
                if key != own {
                    fail(
                        report,
                        format!(
                            "the bundle names key {} but --key is {}: it was not signed by the key you trust",
                            bundle.public_key,
                            hex::encode(key.as_bytes())
                        ),
                    );
                }
                key
            }
            Err(err) => {
                fail(report, format!("--key: {err}"));
                return None;
            }
        },
        None => own,
    };
    report.key = hex::encode(key.as_bytes());
    Some(key)
}

/// Walks `events.jsonl`; returns the records that passed, by seq.
fn walk_records<'a>(
    events: &'a str,
    chain: &str,
    report: &mut Report,
    failures: &mut Vec<Finding>,
) -> BTreeMap<u64, Seen<'a>> {
    let mut by_seq = BTreeMap::new();
    let mut prev_hash = audit_chain::genesis(chain);
    let mut expected = 1u64;
    let mut broken = false;
    for (index, raw_line) in events.lines().enumerate() {
        let line = index + 1;
        if raw_line.trim().is_empty() {
            continue;
        }
        report.records += 1;
        let mut fail = |seq: u64, message: String| {
            failures.push(Finding {
                seq: Some(seq),
                line: Some(line),
                message,
            });
        };
        let (hash, bytes, record) = match read_line(raw_line) {
            Ok(parsed) => parsed,
            Err(err) => {
                fail(
                    expected,
                    format!(
                        "record seq {expected} (line {line}) is unreadable, so it was altered: {err}"
                    ),
                );
                expected += 1;
                broken = true;
                continue;
            }
        };
        let seq = record.seq;
        let own_prev = audit_chain::parse_hash("prev", &record.prev);
        let stored = audit_chain::parse_hash("hash", &hash);
        let self_consistent = match (&own_prev, &stored) {
            (Ok(p), Ok(h)) => audit_chain::link(p, bytes.as_bytes()) == *h,
            _ => false,
        };
        if !self_consistent {
            // Named by position: the flipped byte may be in its seq.
            fail(
                expected,
                format!(
                    "record seq {expected} (line {line}) was altered: its content does not match its hash"
                ),
            );
        } else if record.chain != chain {
            fail(
                seq,
                format!(
                    "record seq {seq} (line {line}) belongs to chain {:?}, not {chain:?}: it was moved here",
                    record.chain
                ),
            );
        } else if seq > expected {
            fail(
                expected,
                format!(
                    "record seq {expected} is missing or out of order: line {line} holds seq {seq} \
                     where seq {expected} belongs"
                ),
            );
        } else if seq < expected {
            fail(
                seq,
                format!(
                    "record seq {seq} (line {line}) is out of order or repeated: seq {expected} \
                     belongs there"
                ),
            );
        } else if !broken && own_prev.as_ref().ok() != Some(&prev_hash) {
            fail(
                seq,
                format!(
                    "record seq {seq} (line {line}) does not link to the record before it: \
                     the chain was spliced here"
                ),
            );
        }
        let ok = failures.last().is_none_or(|f| f.line != Some(line));
        broken = !ok;
        if let Ok(hash) = stored {
            prev_hash = hash;
        }
        expected = seq.max(expected) + 1;
        report.last_seq = report.last_seq.max(seq);
        if ok {
            by_seq.insert(
                seq,
                Seen {
                    hash: prev_hash,
                    line,
                    kind: record.kind,
                    bytes,
                    detail: record.detail,
                },
            );
        }
    }
    by_seq
}

/// The bundle's HAR, if any, against the one its verified records make.
/// Only the entries are compared: the creator's version is the exporting
/// daemon's, not a claim about the traffic.
fn check_har(
    bundle: &Bundle,
    by_seq: &BTreeMap<u64, Seen>,
    report: &mut Report,
    failures: &mut Vec<Finding>,
) {
    let Some(bytes) = &bundle.har else { return };
    let fail = |failures: &mut Vec<Finding>, message: String| {
        failures.push(Finding {
            seq: None,
            line: None,
            message,
        });
    };
    let found: serde_json::Value = match serde_json::from_slice(bytes) {
        Ok(found) => found,
        Err(err) => {
            return fail(
                failures,
                format!(
                    "{} is not valid JSON, so it was altered: {err}",
                    crate::bundle::HAR
                ),
            );
        }
    };
    let requests: Vec<Record> = by_seq
        .values()
        .filter(|seen| seen.kind == crate::har::REQUEST_KIND)
        .filter_map(Seen::record)
        .collect();
    let made = crate::har::of_records(&bundle.manifest.chain, &requests);
    let (found, made) = (&found["log"]["entries"], &made["log"]["entries"]);
    if found == made {
        report.har_entries = made.as_array().map_or(0, |e| e.len() as u64);
        return;
    }
    let (found_list, made_list) = (
        found.as_array().cloned().unwrap_or_default(),
        made.as_array().cloned().unwrap_or_default(),
    );
    let first = found_list
        .iter()
        .zip(&made_list)
        .position(|(a, b)| a != b)
        .unwrap_or(found_list.len().min(made_list.len()));
    fail(
        failures,
        format!(
            "{} does not match the traffic the verified records hold: it has {} entries where they make {}, differing from entry {} on; it was altered",
            crate::bundle::HAR,
            found_list.len(),
            made_list.len(),
            first + 1
        ),
    );
}

fn check_checkpoints(
    bundle: &Bundle,
    key: &VerifyingKey,
    by_seq: &BTreeMap<u64, Seen>,
    report: &mut Report,
    failures: &mut Vec<Finding>,
) {
    let text = String::from_utf8_lossy(&bundle.checkpoints);
    let mut covered_from = 1u64;
    for (index, raw_line) in text.lines().enumerate() {
        let line = index + 1;
        if raw_line.trim().is_empty() {
            continue;
        }
        report.checkpoints += 1;
        let mut fail = |seq: Option<u64>, message: String| {
            failures.push(Finding {
                seq,
                line: None,
                message: format!("checkpoint on line {line}: {message}"),
            });
        };
        let checkpoint: Checkpoint = match serde_json::from_str(raw_line) {
            Ok(c) => c,
            Err(err) => {
                fail(None, format!("unreadable ({err})"));
                continue;
            }
        };
        let seq = checkpoint.seq;
        if let Err(err) = checkpoint.verify(key) {
            fail(Some(seq), format!("for seq {seq}: {err}"));
            continue;
        }
        if checkpoint.chain != bundle.manifest.chain {
            fail(
                Some(seq),
                format!("is for chain {:?}, not this one", checkpoint.chain),
            );
            continue;
        }
        match by_seq.get(&seq) {
            Some(seen) if hex::encode(seen.hash) == checkpoint.hash => {
                report.checkpointed_seq = report.checkpointed_seq.max(seq);
            }
            Some(seen) => fail(
                Some(covered_from),
                format!(
                    "the signed hash of seq {seq} differs from the chain's (line {} of events.jsonl): \
                     a record in seq {covered_from}..={seq} was altered and the chain re-hashed without the key",
                    seen.line
                ),
            ),
            None if seq > report.last_seq => fail(
                Some(report.last_seq + 1),
                format!(
                    "it signs seq {seq} but the chain ends at seq {}: records {}..={seq} were cut off",
                    report.last_seq,
                    report.last_seq + 1
                ),
            ),
            // That record already failed its own checks.
            None => {}
        }
        covered_from = covered_from.max(seq + 1);
    }
}

fn check_segments(
    bundle: &Bundle,
    by_seq: &BTreeMap<u64, Seen>,
    report: &mut Report,
    failures: &mut Vec<Finding>,
) {
    let mut named = BTreeSet::new();
    // Files the chain itself says retention removed.
    let expired: BTreeSet<String> = by_seq
        .values()
        .filter(|seen| seen.kind == EXPIRE_KIND)
        .filter_map(|seen| seen.detail()["file"].as_str().map(str::to_owned))
        .collect();
    for (seq, seen) in by_seq {
        if seen.kind != SEGMENT_KIND {
            continue;
        }
        report.segments += 1;
        let detail = seen.detail();
        let file = detail["file"].as_str().unwrap_or_default();
        let sha = detail["sha256"].as_str().unwrap_or_default();
        named.insert(file.to_owned());
        let mut fail = |message: String| {
            failures.push(Finding {
                seq: Some(*seq),
                line: Some(seen.line),
                message,
            });
        };
        match bundle.segments.get(file) {
            None if expired.contains(file) => report.warnings.push(format!(
                "segment {file:?} (record seq {seq}) was removed by the retention setting, as the chain records: its video cannot be checked"
            )),
            None => fail(format!(
                "segment {file:?} (record seq {seq}) is missing from the bundle"
            )),
            Some(digest) if hex::encode(digest.sha256) != sha => fail(format!(
                "segment {file:?} does not match the SHA-256 sealed in record seq {seq}: the video was altered"
            )),
            Some(_) => {}
        }
    }
    for file in bundle.segments.keys().filter(|f| !named.contains(*f)) {
        failures.push(Finding {
            seq: None,
            line: None,
            message: format!("segment {file:?} is in the bundle but no record seals it"),
        });
    }
}
