//! Recording round trips through the simulated cluster, and damaged files.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};

use super::reader::{Player, Recording};
use super::writer::{Recorder, Settings};
use super::{ActionRecord, Frame};
use crate::model::SourceKind;
use crate::sources::SourceUpdate;
use crate::sources::sim::{Sim, SimConfig};
use crate::store::Store;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tessera-rec-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{e}"));
    d
}

fn start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 2, 0, 0).single().unwrap_or_default()
}

/// `n` frames of the default simulated cluster, one a tick (five seconds).
fn frames(n: usize) -> Vec<Frame> {
    let mut sim = Sim::new(SimConfig::new(7, start()));
    let mut store = Store::new();
    store.register("sim", SourceKind::Simulated, Duration::from_secs(1));
    (0..n)
        .map(|_| {
            sim.advance(crate::sources::sim::TICK);
            let at = sim.now();
            store.apply(
                SourceUpdate { source: "sim".into(), kind: SourceKind::Simulated, at, result: Ok(sim.snapshot()) },
                at,
            );
            Frame::from_store(&store, at)
        })
        .collect()
}

fn settings(path: &Path) -> Settings {
    Settings {
        path: path.to_path_buf(),
        every: Duration::from_secs(1),
        rotate_size: None,
        rotate_every: None,
        keep: None,
        sources: vec!["sim".into()],
    }
}

fn write(path: &Path, frames: &[Frame], finish: bool) -> super::writer::Summary {
    let mut r = Recorder::create(settings(path)).unwrap_or_else(|e| panic!("{e}"));
    for f in frames {
        assert!(r.frame(f).unwrap_or_else(|e| panic!("{e}")));
    }
    let s = r.summary().clone();
    if finish { r.finish().unwrap_or_else(|e| panic!("{e}")) } else { s }
}

fn json(f: &Frame) -> String {
    serde_json::to_string(f).unwrap_or_default()
}

fn open(paths: &[PathBuf]) -> Recording {
    Recording::open(paths).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_frame_comes_back_as_it_was_in_any_order() {
    let d = dir("round");
    let path = d.join("r.tsrec");
    let fs = frames(300);
    let s = write(&path, &fs, true);
    assert_eq!(s.frames, 300);
    assert_eq!(s.keyframes, 3, "a keyframe every 120 frames");
    let rec = open(std::slice::from_ref(&path));
    assert!(rec.problems.is_empty(), "{:?}", rec.problems);
    assert_eq!(rec.frames().len(), 300);
    let mut p = Player::new(rec);
    for (i, f) in fs.iter().enumerate() {
        assert_eq!(json(p.frame(i).unwrap_or_else(|e| panic!("{e}"))), json(f), "frame {i}");
    }
    // Backwards and by time, as seeking does.
    for i in [299, 150, 0, 121, 120, 119] {
        assert_eq!(json(p.frame(i).unwrap_or_else(|e| panic!("{e}"))), json(&fs[i]), "frame {i}");
    }
    let at = fs[42].at + chrono::Duration::milliseconds(500);
    assert_eq!(json(p.at(at).unwrap_or_else(|e| panic!("{e}"))), json(&fs[42]));
    // Far smaller than the frames as JSON lines.
    let plain: usize = fs.iter().map(|f| json(f).len() + 1).sum();
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    assert!(size * 20 < plain as u64, "{size} bytes against {plain} as JSON lines");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_torn_tail_is_reported_and_the_frames_before_it_replay() {
    let d = dir("torn");
    let path = d.join("r.tsrec");
    let fs = frames(30);
    write(&path, &fs, false);
    // A crash in the middle of the last record.
    let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap_or_else(|e| panic!("{e}"));
    f.set_len(len - 5).unwrap_or_else(|e| panic!("{e}"));
    let rec = open(std::slice::from_ref(&path));
    assert_eq!(rec.frames().len(), 29);
    assert!(rec.problems.iter().any(|p| p.contains("cut short")), "{:?}", rec.problems);
    let mut p = Player::new(rec);
    assert_eq!(json(p.frame(28).unwrap_or_else(|e| panic!("{e}"))), json(&fs[28]));
    let _ = std::fs::remove_dir_all(&d);
}

/// The byte offsets of the file's records, by scanning it as the reader does.
fn record_offsets(path: &Path) -> Vec<(u64, u32)> {
    let bytes = std::fs::read(path).unwrap_or_default();
    let (_, _, mut at) = super::format::decode_header(&bytes).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    while let Some(h) = bytes.get(at..).and_then(super::format::RecordHeader::decode) {
        out.push((at as u64, h.len));
        at += super::format::RECORD_HEADER + h.len as usize;
    }
    out
}

#[test]
fn a_corrupt_frame_is_reported_and_skipped_and_nothing_built_on_it_is_shown() {
    let d = dir("corrupt");
    let fs = frames(130);
    for closed in [true, false] {
        let path = d.join(format!("r-{closed}.tsrec"));
        write(&path, &fs, closed);
        // Flip a byte in the payload of the fifth frame (a delta).
        let (off, len) = record_offsets(&path)[4];
        let mut bytes = std::fs::read(&path).unwrap_or_default();
        bytes[(off + super::format::RECORD_HEADER as u64 + u64::from(len) / 2) as usize] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap_or_else(|e| panic!("{e}"));
        let rec = open(std::slice::from_ref(&path));
        let mut p = Player::new(rec);
        assert_eq!(json(p.frame(3).unwrap_or_else(|e| panic!("{e}"))), json(&fs[3]));
        if closed {
            // Read through the index: found when decoded.
            assert_eq!(p.rec.frames().len(), 130);
            let e = p.frame(4).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains("fails its checksum"), "{e}");
            assert!(p.frame(10).is_err(), "built on the damaged frame");
        } else {
            // Scanned: reported at once, left out.
            assert!(p.rec.problems.iter().any(|x| x.contains("fails its checksum")), "{:?}", p.rec.problems);
            assert_eq!(p.rec.frames().len(), 129);
            assert!(p.frame(10).is_err(), "built on the damaged frame");
        }
        // The next keyframe (120 frames on) and everything after it are whole.
        let last = p.rec.frames().len() - 1;
        assert_eq!(json(p.frame(last).unwrap_or_else(|e| panic!("{e}"))), json(&fs[129]));
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_recording_of_a_newer_version_is_refused_and_other_files_are_named() {
    let d = dir("newer");
    let path = d.join("r.tsrec");
    write(&path, &frames(2), true);
    let mut bytes = std::fs::read(&path).unwrap_or_default();
    bytes[8] = 2;
    std::fs::write(&path, &bytes).unwrap_or_else(|e| panic!("{e}"));
    let e = Recording::open(std::slice::from_ref(&path)).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.starts_with(&path.display().to_string()) && e.contains("newer tessera"), "{e}");
    let other = d.join("notes.txt");
    std::fs::write(&other, "hello").unwrap_or_else(|e| panic!("{e}"));
    let e = Recording::open(&[other]).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.ends_with("not a tessera recording"), "{e}");
    // Never overwritten.
    let e = Recorder::create(settings(&path)).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("exists"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn rotated_parts_replay_as_one_recording_and_actions_are_kept() {
    let d = dir("rotate");
    let path = d.join("r.tsrec");
    let fs = frames(200);
    let mut r = Recorder::create(Settings { rotate_size: Some(40_000), keep: None, ..settings(&path) })
        .unwrap_or_else(|e| panic!("{e}"));
    for (i, f) in fs.iter().enumerate() {
        r.frame(f).unwrap_or_else(|e| panic!("{e}"));
        if i == 50 {
            let record = serde_json::json!({"record": "outcome", "action": {"action": "drain", "target": "a/0"}, "result": {"reached": "done"}});
            r.action(&ActionRecord { at: f.at, record }).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let s = r.finish().unwrap_or_else(|e| panic!("{e}"));
    assert!(s.parts.len() > 1, "{:?}", s.parts);
    // Given in any order.
    let mut parts = s.parts.clone();
    parts.reverse();
    let rec = open(&parts);
    assert!(rec.problems.is_empty(), "{:?}", rec.problems);
    assert_eq!(rec.actions().len(), 1);
    assert_eq!(rec.actions()[0].summary(), "outcome drain a/0: done");
    let mut p = Player::new(rec);
    for i in [0, 77, 199, 120] {
        assert_eq!(json(p.frame(i).unwrap_or_else(|e| panic!("{e}"))), json(&fs[i]), "frame {i}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_tail_shorter_than_a_record_header_and_an_impossible_time_are_reported() {
    let d = dir("short");
    let path = d.join("r.tsrec");
    let fs = frames(5);
    write(&path, &fs, false);
    // A record whose checksums hold but whose time no date can hold, then half a header.
    let payload = b"x";
    let h = super::format::RecordHeader::new(super::format::Kind::Delta, 0, 9_000_000_000_000_000, payload);
    let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap_or_else(|e| panic!("{e}"));
    use std::io::Write;
    f.write_all(&h.encode()).unwrap_or_else(|e| panic!("{e}"));
    f.write_all(payload).unwrap_or_else(|e| panic!("{e}"));
    f.write_all(&[1, 2, 3, 4, 5, 6, 7]).unwrap_or_else(|e| panic!("{e}"));
    let rec = open(std::slice::from_ref(&path));
    assert_eq!(rec.frames().len(), 5, "{:?}", rec.problems);
    assert!(rec.problems.iter().any(|p| p.contains("skipped")), "{:?}", rec.problems);
    let mut p = Player::new(rec);
    assert_eq!(json(p.frame(4).unwrap_or_else(|e| panic!("{e}"))), json(&fs[4]));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn rotation_by_time_keeps_the_newest_parts_and_each_replays_alone() {
    let d = dir("keep");
    let path = d.join("r.tsrec");
    let fs = frames(60);
    // Five seconds a frame: a part a minute, the last two kept.
    let mut r =
        Recorder::create(Settings { rotate_every: Some(Duration::from_secs(60)), keep: Some(2), ..settings(&path) })
            .unwrap_or_else(|e| panic!("{e}"));
    for f in &fs {
        r.frame(f).unwrap_or_else(|e| panic!("{e}"));
    }
    let s = r.finish().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.parts.len(), 5, "{:?}", s.parts);
    assert_eq!(s.kept().len(), 2);
    assert!(s.removed.iter().all(|p| !p.exists()) && s.kept().iter().all(|p| p.exists()));
    assert_eq!(s.kept()[1], &super::writer::part_path(&path, 5));
    // The last part alone: its own keyframe first.
    let rec = open(&[s.kept()[1].clone()]);
    assert!(rec.problems.is_empty(), "{:?}", rec.problems);
    let n = rec.frames().len();
    let mut p = Player::new(rec);
    assert_eq!(json(p.frame(n - 1).unwrap_or_else(|e| panic!("{e}"))), json(&fs[59]));
    // The first part is gone, but a new recording of the same name would rotate into the
    // kept ones: refused at once, not hours later.
    assert!(!path.exists());
    let e = Recorder::create(settings(&path)).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("a part of an earlier recording"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

/// A recording carries the audit lines (user, host, SSH client): it is created 0600, and a
/// FIFO or a device given as one is refused at once instead of hanging the reader.
#[test]
fn recordings_are_private_and_only_regular_files_are_read() {
    use std::os::unix::fs::PermissionsExt;
    let d = dir("private");
    let path = d.join("r.tsrec");
    write(&path, &frames(2), true);
    let mode = std::fs::metadata(&path).map(|m| m.permissions().mode() & 0o777).unwrap_or(0);
    assert_eq!(mode, 0o600, "a recording was {mode:o}");
    let fifo = d.join("fifo.tsrec");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success()));
    let started = std::time::Instant::now();
    let err = Recording::open(std::slice::from_ref(&fifo)).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.ends_with("a FIFO is not a file tessera reads"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(2), "the open waited for a writer");
    let err = Recording::open(&[PathBuf::from("/dev/zero")]).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("a character device"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// Write a recording by hand: the header of a real one, then these (kind, JSON) records, each
/// on a zstd stream of its group as the writer makes them.
fn crafted(path: &Path, records: &[(super::format::Kind, Vec<u8>)]) {
    use std::io::Write;
    let real = d_tmp_header();
    let mut out = real;
    let mut enc: Option<zstd::stream::raw::Encoder<'static>> = None;
    for (i, (kind, json)) in records.iter().enumerate() {
        use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
        if *kind == super::format::Kind::Key || enc.is_none() {
            enc = Some(zstd::stream::raw::Encoder::new(3).unwrap_or_else(|e| panic!("{e}")));
        }
        let Some(e) = enc.as_mut() else { panic!("encoder") };
        let mut payload = vec![0u8; json.len() + (1 << 16)];
        let mut input = InBuffer::around(json);
        let mut o = OutBuffer::around(&mut payload[..]);
        while input.pos() < json.len() {
            e.run(&mut input, &mut o).unwrap_or_else(|e| panic!("{e}"));
        }
        e.flush(&mut o).unwrap_or_else(|e| panic!("{e}"));
        let n = o.pos();
        payload.truncate(n);
        let at = start().timestamp_millis() + i as i64 * 1000;
        out.extend_from_slice(&super::format::RecordHeader::new(*kind, 0, at, &payload).encode());
        out.extend_from_slice(&payload);
    }
    let mut f = std::fs::File::create(path).unwrap_or_else(|e| panic!("{e}"));
    f.write_all(&out).unwrap_or_else(|e| panic!("{e}"));
}

/// The header bytes of a real recording (everything before its first record).
fn d_tmp_header() -> Vec<u8> {
    let d = dir("header");
    let path = d.join("h.tsrec");
    write(&path, &frames(1), false);
    let bytes = std::fs::read(&path).unwrap_or_default();
    let (_, _, at) = super::format::decode_header(&bytes).unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_dir_all(&d);
    bytes[..at].to_vec()
}

/// Recording bombs: a keyframe that decodes to millions of tiny values, and deltas that each
/// add millions more, are refused by the count of values, before the tree is built (a 12.8 KB
/// file took 2.18 GB; a keyframe and four 16 MiB deltas 1.35 GB).
#[test]
fn recording_bombs_are_refused_by_their_size_in_values() {
    use super::format::Kind;
    let d = dir("bomb");
    // Digits that do not repeat (a list of zeros compresses to nothing and is refused by its
    // cost first, `recording_bombs_are_refused_by_what_they_cost`).
    let zeros = |n: usize| {
        let mut v = Vec::with_capacity(n * 2 + 2);
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        v.push(b'[');
        for i in 0..n {
            if i > 0 {
                v.push(b',');
            }
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            v.push(b'0' + (x >> 60) as u8 % 10);
        }
        v.push(b']');
        v
    };
    let key = d.join("key.tsrec");
    crafted(&key, &[(Kind::Key, zeros(8_000_000))]);
    let mut p = Player::new(open(std::slice::from_ref(&key)));
    let err = p.frame(0).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        err.contains("a record of more than 16000000 values (or over 4000000 of values under 6 bytes each)"),
        "{err}"
    );
    // A small keyframe, then deltas that each add 3.9M values to it: each fits, together
    // they pass the frame's bound.
    let frame = json(&frames(1)[0]);
    let add = |name: &str| {
        let mut p = format!(r#"{{"o":{{"{name}":"#).into_bytes();
        p.extend(zeros(3_900_000));
        p.extend_from_slice(b"}}");
        p
    };
    let deltas = d.join("deltas.tsrec");
    let mut records = vec![(Kind::Key, frame.into_bytes())];
    records.extend(["a", "b", "c", "d", "e"].iter().map(|n| (Kind::Delta, add(n))));
    crafted(&deltas, &records);
    let mut p = Player::new(open(std::slice::from_ref(&deltas)));
    assert!(p.frame(0).is_ok(), "the keyframe itself is fine");
    let err = p.frame(5).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("a frame of more than 16000000 values"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// Keyframes that are few bytes in the file and few values a byte but many maps or strings:
/// one-key objects (`"junk":[{"abcdef":0},…]`: 7.9 million of them, 18 KB on disk, took
/// 5.3 GB) and short strings (20.5 KB took 741 MB) are refused by what their tree would cost,
/// before it is built. A real keyframe costs far less a stored byte than the bound allows.
#[test]
fn recording_bombs_are_refused_by_what_they_cost() {
    use super::format::{self, Kind};
    let d = dir("cost");
    let list = |item: &str, n: usize| {
        let mut v = br#"{"junk":["#.to_vec();
        for i in 0..n {
            if i > 0 {
                v.push(b',');
            }
            v.extend_from_slice(item.as_bytes());
        }
        v.extend_from_slice(b"]}");
        v
    };
    for (name, item, n) in [("objects", r#"{"abcdef":0}"#, 300_000), ("strings", r#""abcdefgh""#, 1_000_000)] {
        let path = d.join(format!("{name}.tsrec"));
        crafted(&path, &[(Kind::Key, list(item, n))]);
        let err = Player::new(open(std::slice::from_ref(&path))).frame(0).err().map(|e| e.to_string());
        assert!(err.as_ref().is_some_and(|e| e.contains("would take more than")), "{name}: {err:?}");
    }
    // The default simulated cluster's keyframe: its cost a stored byte, with room to spare.
    let text = json(&frames(1)[0]);
    let stored = zstd::bulk::compress(text.as_bytes(), format::LEVEL).map_or(0, |z| z.len());
    let mut count = format::ValueCount::default();
    count.feed(text.as_bytes());
    let per_byte = count.cost / stored.max(1);
    assert!(per_byte * 4 < format::COST_PER_STORED_BYTE, "a real keyframe costs {per_byte} a stored byte");
    let tree: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let cost = format::cost_in(&tree);
    assert!(
        count.cost >= cost && count.cost < cost + cost / 10,
        "the text's estimate {} is the tree's {cost}",
        count.cost
    );
    let _ = std::fs::remove_dir_all(&d);
}
