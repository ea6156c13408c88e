//! Recordings: size per day, the writer's CPU per frame, seeking and opening, and the size of
//! the same frames as NDJSON streamed through zstd (the scheme all-smi's `record` writes).
//!
//! `cargo bench --bench record` (release). Every frame is a new simulator tick stamped one
//! second after the last: the worst case of a cluster whose readings change every second.
//! The default cluster is recorded for 24 hours; 512 GPUs (`--demo-size 64x8`) for one hour,
//! its day extrapolated. Prints one table row per measurement.

use std::io::Write;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};
use tessera::model::SourceKind;
use tessera::record::Frame;
use tessera::record::reader::{Player, Recording};
use tessera::record::writer::{Recorder, Settings};
use tessera::sources::SourceUpdate;
use tessera::sources::sim::{Sim, SimConfig, TICK};
use tessera::store::Store;

struct Run {
    frames: u64,
    bytes: u64,
    encode: Duration,
    collect: Duration,
    ndjson: u64,
    ndjson_zstd: u64,
    path: std::path::PathBuf,
}

fn start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).single().unwrap_or_default()
}

fn record(name: &str, size: Option<(u32, u32)>, frames: u64) -> Run {
    let dir = std::env::temp_dir().join(format!("tessera-bench-record-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("{name}.tsrec"));
    let _ = std::fs::remove_file(&path);
    let mut sim = Sim::new(SimConfig { size, ..SimConfig::new(7, start()) });
    let mut store = Store::new();
    store.register("sim", SourceKind::Simulated, Duration::from_secs(1));
    let settings = Settings {
        path: path.clone(),
        every: Duration::from_secs(1),
        rotate_size: None,
        rotate_every: None,
        keep: None,
        sources: vec!["sim".into()],
    };
    let mut rec = Recorder::create(settings).unwrap_or_else(|e| panic!("{e}"));
    // all-smi writes each frame as one JSON line into a zstd stream (level 3).
    let mut plain = 0u64;
    let mut z = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap_or_else(|e| panic!("{e}"));
    let (mut encode, mut collect) = (Duration::ZERO, Duration::ZERO);
    let first = sim.now();
    for i in 0..frames {
        let t0 = Instant::now();
        sim.advance(TICK);
        let at = first + chrono::Duration::seconds(i as i64);
        store.apply(
            SourceUpdate { source: "sim".into(), kind: SourceKind::Simulated, at, result: Ok(sim.snapshot()) },
            at,
        );
        let mut frame = Frame::from_store(&store, at);
        frame.fleet.taken_at = Some(at);
        collect += t0.elapsed();
        let t1 = Instant::now();
        rec.frame(&frame).unwrap_or_else(|e| panic!("{e}"));
        encode += t1.elapsed();
        let line = tessera::commands::snapshot_json(&(frame.fleet.clone(), true));
        let compact: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        let mut l = serde_json::to_vec(&compact).unwrap_or_default();
        l.push(b'\n');
        plain += l.len() as u64;
        z.write_all(&l).unwrap_or_else(|e| panic!("{e}"));
    }
    let summary = rec.finish().unwrap_or_else(|e| panic!("{e}"));
    let ndjson_zstd = z.finish().map(|v| v.len() as u64).unwrap_or(0);
    Run { frames, bytes: summary.bytes, encode, collect, ndjson: plain, ndjson_zstd, path }
}

fn mib(b: f64) -> String {
    format!("{:.1} MiB", b / 1048576.0)
}

fn seek(path: &std::path::Path, n: usize) -> (Duration, Duration, Duration) {
    let t = Instant::now();
    let rec = Recording::open(std::slice::from_ref(&path.to_path_buf())).unwrap_or_else(|e| panic!("{e}"));
    let open = t.elapsed();
    let frames = rec.frames().len();
    let mut player = Player::new(rec);
    // A fixed pseudo-random walk over the recording: each seek lands in another group.
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let i = (x % frames as u64) as usize;
        let t = Instant::now();
        std::hint::black_box(player.frame(i).unwrap_or_else(|e| panic!("{e}")).fleet.nodes.len());
        times.push(t.elapsed());
    }
    times.sort();
    // Stepping forward from a shown frame: one delta.
    let t = Instant::now();
    for i in 0..200.min(frames) {
        std::hint::black_box(player.frame(i).map(|f| f.fleet.nodes.len()).unwrap_or(0));
    }
    let step = t.elapsed() / 200.min(frames).max(1) as u32;
    (open, times[times.len() / 2], step)
}

fn row(what: &str, r: &Run, day_factor: f64) {
    let per_frame = r.bytes as f64 / r.frames as f64;
    println!(
        "| {what} | {} frames, {} ({:.0} B a frame) | {} a day | {:.2} ms a frame ({:.1} % of a core at 1 s) | NDJSON {} ({:.0}×), NDJSON+zstd {} ({:.1}×) |",
        r.frames,
        mib(r.bytes as f64),
        per_frame,
        mib(r.bytes as f64 * day_factor),
        r.encode.as_secs_f64() * 1000.0 / r.frames as f64,
        r.encode.as_secs_f64() * 100.0 / r.frames as f64,
        mib(r.ndjson as f64 * day_factor),
        r.ndjson as f64 / r.bytes as f64,
        mib(r.ndjson_zstd as f64 * day_factor),
        r.ndjson_zstd as f64 / r.bytes as f64,
    );
    eprintln!("({what}: collecting the frames took {:.1} s)", r.collect.as_secs_f64());
}

fn main() {
    let hours: u64 = std::env::var("TESSERA_BENCH_HOURS").ok().and_then(|h| h.parse().ok()).unwrap_or(24);
    println!("| fleet | recorded | per day at 1 s | writer CPU | the same frames as all-smi's scheme |");
    println!("|---|---|---|---|---|");
    let default = record("default", None, hours * 3600);
    row("default simulated cluster (42 cards)", &default, 24.0 / hours as f64);
    let big = record("gpus512", Some((64, 8)), 3600);
    row("512 GPUs (64 nodes × 8)", &big, 24.0);
    let default_span = format!("default, {hours} h");
    for (what, r) in [(default_span.as_str(), &default), ("512 GPUs, 1 h", &big)] {
        let (open, median, step) = seek(&r.path, 200);
        println!(
            "| seek in {what} | open (index) {:.1} ms | a random moment {:.1} ms (median of 200) | the next frame {:.2} ms | |",
            open.as_secs_f64() * 1000.0,
            median.as_secs_f64() * 1000.0,
            step.as_secs_f64() * 1000.0
        );
    }
    let _ = std::fs::remove_file(&default.path);
    let _ = std::fs::remove_file(&big.path);
}
