//! The tamper suite: a bundle made the way the daemon makes one (records
//! sealed as they are appended, checkpoints signed, segments sealed), then
//! changed the ways an attacker with the files would change it. Each
//! change must fail verification, with the first finding naming the right
//! record; the untouched bundle must pass (the positive control).

use std::path::{Path, PathBuf};

use cubicle_recorder::audit_chain::{self, Hash, Record, SEGMENT_KIND, export_line};
use cubicle_recorder::bundle::{Bundle, BundleWriter, Manifest, digest_reader};
use cubicle_recorder::checkpoint::{AuditKey, Checkpoint};
use cubicle_recorder::verify::{Report, Tail, verify};
use serde_json::{Value, json};

const CHAIN: &str = "ws-0123456789ab";
const RECORDS: u64 = 30;
/// Records that are video segments, and their files.
const SEGMENT_AT: [u64; 2] = [9, 21];
/// Records that are requests the egress proxy saw (the HAR's entries).
const REQUEST_AT: [u64; 2] = [5, 15];
/// Checkpoints after these records (the last one, as at export).
const CHECKPOINT_AT: [u64; 3] = [10, 20, 30];

struct Made {
    dir: tempfile::TempDir,
    key: AuditKey,
    lines: Vec<String>,
}

fn record(seq: u64) -> Record {
    let (kind, detail) = if SEGMENT_AT.contains(&seq) {
        (SEGMENT_KIND, Value::Null)
    } else if REQUEST_AT.contains(&seq) {
        (
            "egress.request",
            json!({ "method": "GET", "url": format!("https://origin.test/{seq}"), "status": 200,
                    "mode": "intercepted", "started_ms": 1_700_000_000_000_i64 + seq as i64,
                    "wait_ms": 3, "request_headers": [["authorization", "[redacted]"]],
                    "response_headers": [["content-type", "text/html"]], "download": null }),
        )
    } else {
        (
            "action",
            json!({ "action": "left_click", "coordinate": [seq, 2 * seq], "wait": 0.1 }),
        )
    };
    Record {
        v: 0,
        chain: CHAIN.into(),
        seq: 0,
        prev: String::new(),
        at: 1_700_000_000_000 + seq as i64 * 1000,
        kind: kind.into(),
        workspace: Some(CHAIN.into()),
        actor: None,
        detail,
        request_id: Some(format!("req-{seq}")),
        client: None,
        outcome: Some("ok".into()),
    }
}

/// Seals `RECORDS` records the way the runtime does; returns the export
/// lines and the checkpoints.
fn seal_chain(key: &AuditKey, segments: &Path) -> (Vec<String>, Vec<Checkpoint>) {
    let mut prev = audit_chain::genesis(CHAIN);
    let mut lines = Vec::new();
    let mut checkpoints = Vec::new();
    for seq in 1..=RECORDS {
        let mut r = record(seq);
        if SEGMENT_AT.contains(&seq) {
            let file = format!("seg-{seq:04}.mp4");
            let path = segments.join(&file);
            std::fs::write(&path, format!("pretend video {seq}").repeat(100)).unwrap();
            let digest = digest_reader(std::fs::File::open(&path).unwrap()).unwrap();
            r.detail = json!({ "file": file, "sha256": hex::encode(digest.sha256), "bytes": digest.bytes });
        }
        let sealed = r.seal(seq, &prev).unwrap();
        prev = sealed.hash;
        lines.push(export_line(&sealed.hash, &sealed.bytes));
        if CHECKPOINT_AT.contains(&seq) {
            checkpoints.push(key.sign(CHAIN, seq, &sealed.hash, 1_700_000_100_000));
        }
    }
    (lines, checkpoints)
}

fn made() -> Made {
    let dir = tempfile::tempdir().unwrap();
    let segments = dir.path().join("source");
    std::fs::create_dir_all(&segments).unwrap();
    let key = AuditKey::ephemeral();
    let (lines, checkpoints) = seal_chain(&key, &segments);
    let manifest = Manifest {
        format: cubicle_recorder::bundle::FORMAT.into(),
        chain: CHAIN.into(),
        workspace: Some(CHAIN.into()),
        exported_at: 1_700_000_200_000,
    };
    let tar = std::fs::File::create(dir.path().join("bundle.tar")).unwrap();
    let mut writer = BundleWriter::new(
        tar,
        &manifest,
        &key.public_hex(),
        lines.concat().as_bytes(),
        &checkpoints,
    )
    .unwrap();
    let records: Vec<Record> = lines
        .iter()
        .map(|line| {
            let parsed: Value = serde_json::from_str(line).unwrap();
            serde_json::from_value(parsed["record"].clone()).unwrap()
        })
        .collect();
    writer
        .har(&cubicle_recorder::har::of_records(CHAIN, &records))
        .unwrap();
    for seq in SEGMENT_AT {
        let file = format!("seg-{seq:04}.mp4");
        writer.segment(&file, &segments.join(&file)).unwrap();
    }
    writer.finish().unwrap();
    // Also unpacked, for the edits.
    let unpacked = dir.path().join("unpacked");
    tar::Archive::new(std::fs::File::open(dir.path().join("bundle.tar")).unwrap())
        .unpack(&unpacked)
        .unwrap();
    Made { dir, key, lines }
}

impl Made {
    fn tar(&self) -> PathBuf {
        self.dir.path().join("bundle.tar")
    }

    fn unpacked(&self) -> PathBuf {
        self.dir.path().join("unpacked")
    }

    fn verify_dir(&self) -> Report {
        verify(
            &Bundle::open(&self.unpacked()).unwrap(),
            Some(&self.key.public_hex()),
            Tail::Signed,
        )
    }

    fn write_events(&self, lines: &[String]) {
        std::fs::write(self.unpacked().join("events.jsonl"), lines.concat()).unwrap();
    }
}

/// The report failed and its first finding names record `seq`.
#[track_caller]
fn fails_at(report: &Report, seq: u64, words: &str) {
    assert!(!report.ok(), "tampering went unnoticed: {report:#?}");
    let first = report.first_failure().unwrap();
    assert_eq!(
        first.seq,
        Some(seq),
        "the first finding names the wrong record: {report:#?}"
    );
    assert!(
        first.message.contains(words),
        "expected {words:?} in {:?}",
        first.message
    );
}

#[test]
fn an_untouched_bundle_verifies_as_tar_and_as_folder() {
    let made = made();
    for bundle in [made.tar(), made.unpacked()] {
        let report = verify(
            &Bundle::open(&bundle).unwrap(),
            Some(&made.key.public_hex()),
            Tail::Signed,
        );
        assert!(report.ok(), "{report:#?}");
        assert_eq!(report.records, RECORDS);
        assert_eq!(report.checkpoints, 3);
        assert_eq!(report.segments, 2);
        assert_eq!(report.checkpointed_seq, RECORDS);
        assert_eq!(report.har_entries, 2);
        assert!(report.warnings.is_empty(), "{report:#?}");
    }
    // Without --key the bundle's own key is used, and the report says so.
    let report = verify(&Bundle::open(&made.tar()).unwrap(), None, Tail::Signed);
    assert!(report.ok() && !report.key_pinned);
}

#[test]
fn a_flipped_byte_in_an_event_names_it() {
    let made = made();
    for (seq, from, to) in [
        (7u64, "left_click", "left_clicK"),
        (12, "req-12", "req-13"),
        (15, "\"seq\":15", "\"seq\":16"),
    ] {
        let mut lines = made.lines.clone();
        let index = seq as usize - 1;
        assert!(lines[index].contains(from));
        lines[index] = lines[index].replacen(from, to, 1);
        made.write_events(&lines);
        fails_at(&made.verify_dir(), seq, "altered");
    }
    // A flipped bit in the stored hash is the same finding.
    let mut lines = made.lines.clone();
    let hash_start = "{\"hash\":\"".len();
    let mut bytes = made.lines[4].clone().into_bytes();
    bytes[hash_start] = if bytes[hash_start] == b'0' {
        b'1'
    } else {
        b'0'
    };
    lines[4] = String::from_utf8(bytes).unwrap();
    made.write_events(&lines);
    fails_at(&made.verify_dir(), 5, "altered");
}

#[test]
fn a_flipped_byte_in_the_tar_is_found() {
    let made = made();
    let mut tar = std::fs::read(made.tar()).unwrap();
    let at = find(&tar, b"req-17").unwrap();
    tar[at + 4] = b'8';
    std::fs::write(made.tar(), &tar).unwrap();
    let report = verify(
        &Bundle::open(&made.tar()).unwrap(),
        Some(&made.key.public_hex()),
        Tail::Signed,
    );
    fails_at(&report, 17, "altered");
}

#[test]
fn a_flipped_byte_in_a_segment_names_its_record() {
    let made = made();
    let path = made.unpacked().join("segments/seg-0021.mp4");
    let mut video = std::fs::read(&path).unwrap();
    video[100] ^= 0x01;
    std::fs::write(&path, video).unwrap();
    fails_at(&made.verify_dir(), 21, "video was altered");
    // A segment removed from the bundle is named too.
    std::fs::remove_file(&path).unwrap();
    fails_at(&made.verify_dir(), 21, "missing");
}

#[test]
fn a_flipped_byte_in_a_signature_names_the_checkpoint() {
    let made = made();
    let path = made.unpacked().join("checkpoints.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(|l| format!("{l}\n")).collect();
    let mut checkpoint: Checkpoint = serde_json::from_str(&lines[1]).unwrap();
    let mut signature = hex::decode(&checkpoint.signature).unwrap();
    signature[10] ^= 0x80;
    checkpoint.signature = hex::encode(signature);
    lines[1] = format!("{}\n", serde_json::to_string(&checkpoint).unwrap());
    std::fs::write(&path, lines.concat()).unwrap();
    fails_at(&made.verify_dir(), 20, "signature does not match");
}

#[test]
fn a_deleted_record_is_named() {
    let made = made();
    let mut lines = made.lines.clone();
    lines.remove(13);
    made.write_events(&lines);
    fails_at(&made.verify_dir(), 14, "missing");
}

#[test]
fn two_swapped_records_are_named() {
    let made = made();
    let mut lines = made.lines.clone();
    lines.swap(4, 5);
    made.write_events(&lines);
    fails_at(&made.verify_dir(), 5, "out of order");
}

#[test]
fn a_truncated_chain_is_found_up_to_the_last_checkpoint() {
    let made = made();
    let mut lines = made.lines.clone();
    lines.truncate(25);
    made.write_events(&lines);
    fails_at(&made.verify_dir(), 26, "cut off");
    // Cut at a checkpoint and with the later checkpoints removed too, the
    // bundle looks whole: the limit the README states.
    lines.truncate(20);
    made.write_events(&lines);
    let path = made.unpacked().join("checkpoints.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let kept: Vec<&str> = text.lines().take(2).collect();
    std::fs::write(&path, kept.join("\n") + "\n").unwrap();
    // (A segment file left behind with no record would be found.)
    assert!(!made.verify_dir().ok());
    std::fs::remove_file(made.unpacked().join("segments/seg-0021.mp4")).unwrap();
    let report = made.verify_dir();
    assert!(report.ok(), "{report:#?}");
    assert_eq!(report.last_seq, 20);
}

#[test]
fn a_chain_re_hashed_without_the_key_is_found() {
    let made = made();
    // The forger changes record 14 and re-seals it and everything after.
    let mut prev: Hash = audit_chain::genesis(CHAIN);
    let mut forged = Vec::new();
    for line in &made.lines {
        let value: Value = serde_json::from_str(line).unwrap();
        let mut record: Record = serde_json::from_value(value["record"].clone()).unwrap();
        if record.seq == 14 {
            record.detail["coordinate"] = json!([999, 999]);
        }
        let seq = record.seq;
        let sealed = record.seal(seq, &prev).unwrap();
        prev = sealed.hash;
        forged.push(export_line(&sealed.hash, &sealed.bytes));
    }
    made.write_events(&forged);
    let report = made.verify_dir();
    // Every record is self-consistent; the checkpoint after it is not: the
    // finding names the span the signature covered, which holds seq 14.
    fails_at(&report, 11, "re-hashed without the key");
    assert!(report.first_failure().unwrap().message.contains("11..=20"));
    // Forging the checkpoints too needs the key: with another key the
    // signatures fail under the pinned one.
    let other = AuditKey::ephemeral();
    let path = made.unpacked().join("checkpoints.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = String::new();
    for line in text.lines() {
        let c: Checkpoint = serde_json::from_str(line).unwrap();
        let hash = value_hash(&forged[c.seq as usize - 1]);
        let resigned = other.sign(CHAIN, c.seq, &hash, c.at);
        lines.push_str(&serde_json::to_string(&resigned).unwrap());
        lines.push('\n');
    }
    std::fs::write(&path, lines).unwrap();
    std::fs::write(made.unpacked().join("audit-key.pub"), other.public_hex()).unwrap();
    let report = made.verify_dir();
    assert!(!report.ok());
    assert!(
        report
            .first_failure()
            .unwrap()
            .message
            .contains("not signed by the key you trust")
    );
}

fn value_hash(line: &str) -> Hash {
    let value: Value = serde_json::from_str(line).unwrap();
    audit_chain::parse_hash("hash", value["hash"].as_str().unwrap()).unwrap()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[test]
fn a_segment_removed_by_retention_is_a_note_only_when_the_chain_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let key = AuditKey::ephemeral();
    let digest = digest_reader(&b"old video"[..]).unwrap();
    let mut prev = audit_chain::genesis(CHAIN);
    let mut lines = String::new();
    let mut checkpoints = Vec::new();
    let details = [
        (
            SEGMENT_KIND,
            json!({"file": "seg-1.mp4", "sha256": hex::encode(digest.sha256)}),
        ),
        (audit_chain::EXPIRE_KIND, json!({"file": "seg-1.mp4"})),
    ];
    for (i, (kind, detail)) in details.into_iter().enumerate() {
        let mut r = record(1);
        r.kind = kind.into();
        r.detail = detail;
        let sealed = r.seal(i as u64 + 1, &prev).unwrap();
        prev = sealed.hash;
        lines.push_str(&export_line(&sealed.hash, &sealed.bytes));
        checkpoints.push(key.sign(CHAIN, i as u64 + 1, &sealed.hash, 0));
    }
    let manifest = Manifest {
        format: cubicle_recorder::bundle::FORMAT.into(),
        chain: CHAIN.into(),
        workspace: None,
        exported_at: 0,
    };
    let path = dir.path().join("b.tar");
    let out = std::fs::File::create(&path).unwrap();
    BundleWriter::new(
        out,
        &manifest,
        &key.public_hex(),
        lines.as_bytes(),
        &checkpoints,
    )
    .unwrap()
    .finish()
    .unwrap();
    let report = verify(
        &Bundle::open(&path).unwrap(),
        Some(&key.public_hex()),
        Tail::Signed,
    );
    assert!(report.ok(), "{report:#?}");
    assert!(report.warnings[0].contains("retention"), "{report:#?}");
    // Without the expire record, the same missing file fails.
    let first_only: String = lines.lines().take(1).map(|l| format!("{l}\n")).collect();
    let out = std::fs::File::create(&path).unwrap();
    BundleWriter::new(
        out,
        &manifest,
        &key.public_hex(),
        first_only.as_bytes(),
        &checkpoints[..1],
    )
    .unwrap()
    .finish()
    .unwrap();
    let report = verify(
        &Bundle::open(&path).unwrap(),
        Some(&key.public_hex()),
        Tail::Signed,
    );
    fails_at(&report, 1, "missing");
}

#[test]
fn records_after_the_last_checkpoint_fail_unless_the_tail_may_be_unsigned() {
    // Every export signs its head, so a bundle whose newest records no
    // checkpoint covers was extended (or re-hashed and stripped) by someone
    // without the key. Here: the last checkpoint (seq 30) is not there.
    let made = made();
    let path = made.unpacked().join("checkpoints.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let kept: Vec<&str> = text.lines().take(2).collect();
    std::fs::write(&path, kept.join("\n") + "\n").unwrap();
    let report = made.verify_dir();
    fails_at(
        &report,
        21,
        "records 21..=30 are not covered by any valid checkpoint",
    );
    assert_eq!(report.checkpointed_seq, 20);
    // A chain read live between two checkpoints: a note, not a failure.
    let report = verify(
        &Bundle::open(&made.unpacked()).unwrap(),
        Some(&made.key.public_hex()),
        Tail::MayBeUnsigned,
    );
    assert!(report.ok(), "{report:#?}");
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("records 21..=30 are after the last checkpoint")),
        "no note about the unsigned records: {report:#?}"
    );
}

/// The outside attack: a record altered, the whole chain re-hashed, every
/// checkpoint removed; it verified (a note, exit 0) with the key pinned.
#[test]
fn a_re_hashed_bundle_with_every_checkpoint_removed_fails() {
    let made = made();
    let mut prev: Hash = audit_chain::genesis(CHAIN);
    let mut forged = Vec::new();
    for line in &made.lines {
        let value: Value = serde_json::from_str(line).unwrap();
        let mut record: Record = serde_json::from_value(value["record"].clone()).unwrap();
        if record.seq == 5 {
            record.detail["coordinate"] = json!([1, 1]);
        }
        let seq = record.seq;
        let sealed = record.seal(seq, &prev).unwrap();
        prev = sealed.hash;
        forged.push(export_line(&sealed.hash, &sealed.bytes));
    }
    made.write_events(&forged);
    std::fs::write(made.unpacked().join("checkpoints.jsonl"), "").unwrap();
    let report = made.verify_dir();
    fails_at(
        &report,
        1,
        "records 1..=30 are not covered by any valid checkpoint",
    );
    // The same with only the first records kept (and the video they do
    // not seal removed): still unsigned.
    for segment in ["segments/seg-0009.mp4", "segments/seg-0021.mp4"] {
        std::fs::remove_file(made.unpacked().join(segment)).unwrap();
    }
    made.write_events(&forged[..3]);
    fails_at(&made.verify_dir(), 1, "not covered by any valid checkpoint");
    // And with no record at all there is nothing signed to vouch for.
    made.write_events(&[]);
    let report = made.verify_dir();
    assert!(!report.ok(), "{report:#?}");
    assert!(
        report
            .first_failure()
            .unwrap()
            .message
            .contains("no record and no checkpoint"),
        "{report:#?}"
    );
}

#[test]
fn an_edited_or_shortened_har_is_found_and_a_bundle_without_one_still_verifies() {
    let made = made();
    let path = made.unpacked().join("traffic.har");
    let original = std::fs::read_to_string(&path).unwrap();
    let har: Value = serde_json::from_str(&original).unwrap();
    assert_eq!(har["log"]["entries"][1]["_cubicle"]["seq"], 15, "{har}");
    // A request's URL changed, one taken out, and one added.
    let mut edited = har.clone();
    edited["log"]["entries"][1]["request"]["url"] = json!("https://elsewhere.test/15");
    let mut shortened = har.clone();
    shortened["log"]["entries"]
        .as_array_mut()
        .unwrap()
        .remove(0);
    let mut added = har.clone();
    let extra = added["log"]["entries"][0].clone();
    added["log"]["entries"].as_array_mut().unwrap().push(extra);
    for (what, forged) in [
        ("edited", edited),
        ("shortened", shortened),
        ("added to", added),
    ] {
        std::fs::write(&path, serde_json::to_vec_pretty(&forged).unwrap()).unwrap();
        let report = made.verify_dir();
        assert!(!report.ok(), "a HAR {what} went unnoticed: {report:#?}");
        let message = &report.first_failure().unwrap().message;
        assert!(
            message.contains("traffic.har does not match"),
            "{what}: {message}"
        );
    }
    std::fs::write(&path, "not json").unwrap();
    assert!(!made.verify_dir().ok());
    // A bundle of before the HAR was added: nothing to check, nothing failed.
    std::fs::remove_file(&path).unwrap();
    let report = made.verify_dir();
    assert!(report.ok(), "{report:#?}");
    assert_eq!(report.har_entries, 0);
    // The untouched file again: it verifies.
    std::fs::write(&path, original).unwrap();
    assert!(made.verify_dir().ok());
}

#[test]
fn a_line_laid_out_otherwise_reads_the_same_and_a_mistyped_field_is_still_unreadable() {
    let made = made();
    // The same hash and record bytes, the line's keys swapped and spaced:
    // not the daemon's shape, so read as JSON; the records are untouched.
    let relaid: Vec<String> = made
        .lines
        .iter()
        .map(|line| {
            let parsed: Value = serde_json::from_str(line).unwrap();
            let record = &line[line.find("\"record\":").unwrap() + 9..line.len() - 2];
            format!("{{ \"record\": {record}, \"hash\": {} }}\n", parsed["hash"])
        })
        .collect();
    made.write_events(&relaid);
    let report = made.verify_dir();
    assert!(report.ok(), "{report:#?}");
    assert_eq!(report.records, RECORDS);
    assert_eq!(report.har_entries, 2);
    assert_eq!(report.segments, 2);
    // A record whose `v` is text: read in place, each field is still read
    // for its type, so it is unreadable however its hash came out.
    let mut lines = made.lines.clone();
    let sealed: Value = serde_json::from_str(&lines[3]).unwrap();
    let mut record = sealed["record"].clone();
    record["v"] = json!("0");
    let bytes = record.to_string();
    let prev = audit_chain::parse_hash("prev", record["prev"].as_str().unwrap()).unwrap();
    lines[3] = export_line(&audit_chain::link(&prev, bytes.as_bytes()), &bytes);
    made.write_events(&lines);
    fails_at(&made.verify_dir(), 4, "unreadable");
}

/// A long chain as a bundle in memory: `records` actions, the last signed.
fn long_bundle(key: &AuditKey, records: u64) -> (Vec<String>, Bundle) {
    let mut prev = audit_chain::genesis(CHAIN);
    let mut lines = Vec::new();
    for seq in 1..=records {
        let mut r = record(seq);
        r.kind = "action".into();
        r.detail = json!({ "action": "left_click", "coordinate": [seq, 2 * seq] });
        let sealed = r.seal(seq, &prev).unwrap();
        prev = sealed.hash;
        lines.push(export_line(&sealed.hash, &sealed.bytes));
    }
    let checkpoint = key.sign(CHAIN, records, &prev, 0);
    let bundle = Bundle {
        manifest: Manifest {
            format: cubicle_recorder::bundle::FORMAT.into(),
            chain: CHAIN.into(),
            workspace: Some(CHAIN.into()),
            exported_at: 0,
        },
        public_key: key.public_hex(),
        events: Vec::new(),
        checkpoints: [serde_json::to_vec(&checkpoint).unwrap(), b"\n".to_vec()].concat(),
        segments: Default::default(),
        har: None,
    };
    (lines, bundle)
}

#[test]
fn a_long_chain_names_the_altered_record_anywhere_in_it() {
    let key = AuditKey::ephemeral();
    let (lines, mut bundle) = long_bundle(&key, 20_000);
    bundle.events = lines.concat().into_bytes();
    let report = verify(&bundle, Some(&key.public_hex()), Tail::Signed);
    assert!(report.ok(), "{report:#?}");
    assert_eq!(report.records, 20_000);
    // One flipped byte near each end and in the middle, and a swap.
    for seq in [2u64, 10_001, 19_999] {
        let mut altered = lines.clone();
        let i = (seq - 1) as usize;
        altered[i] = altered[i].replace("left_click", "left_clicK");
        bundle.events = altered.concat().into_bytes();
        fails_at(
            &verify(&bundle, Some(&key.public_hex()), Tail::Signed),
            seq,
            "was altered",
        );
    }
    let mut swapped = lines.clone();
    swapped.swap(9_999, 10_000);
    bundle.events = swapped.concat().into_bytes();
    fails_at(
        &verify(&bundle, Some(&key.public_hex()), Tail::Signed),
        10_000,
        "missing or out of order",
    );
}
