//! The bomb campaign (scripts/bombs.sh): each kind of hostile input built here, tessera run on
//! it, and its peak memory (`VmHWM` sampled from /proc, as the hostile tests measure it)
//! checked against 256 MB. Ignored by a plain `cargo test`: `scripts/bombs.sh` runs them, at
//! full size or, with `--quick` (`TESSERA_BOMBS=quick`), at sizes that take seconds.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use common::http::{Reply, Server};
use common::k8s::{FakeK8s, PODS};
use common::{Temp, run_peak};

/// The ceiling: 256 MB (KiB).
const CEILING_KIB: u64 = 256_000_000 / 1024;

/// Whether the campaign runs at full size (the default) or quick.
fn full() -> bool {
    std::env::var("TESSERA_BOMBS").as_deref() != Ok("quick")
}

/// `full` at full size, else `quick`.
fn size(full_size: usize, quick: usize) -> usize {
    if full() { full_size } else { quick }
}

/// Run tessera with `args`, print and check its peak; its exit code, stdout and stderr.
fn bomb(name: &str, args: &[&str]) -> (i32, String, String) {
    bomb_env(name, args, &[])
}

/// `bomb` with these variables set.
fn bomb_env(name: &str, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tessera"));
    cmd.args(args).env("XDG_CONFIG_HOME", "/nonexistent-tessera-test").envs(env.iter().copied());
    let started = Instant::now();
    let (peak, out) = run_peak(cmd);
    let took = started.elapsed();
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    let shown = if peak == 0 { "not sampled (ended within 2 ms)".to_string() } else { format!("{} MiB", peak / 1024) };
    println!("bomb {name}: peak RSS {shown} in {:.2} s (exit {:?})", took.as_secs_f64(), out.status.code());
    assert!(peak < CEILING_KIB, "{name}: peak RSS {} MiB, over 256 MB; stderr: {stderr}", peak / 1024);
    (out.status.code().unwrap_or(-1), stdout, stderr)
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    p.to_string_lossy().into_owned()
}

/// `item` `n` times, comma-separated, between `open` and `close`.
fn list(open: &str, item: &str, n: usize, close: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(open.len() + n * (item.len() + 1) + close.len());
    v.extend_from_slice(open.as_bytes());
    for i in 0..n {
        if i > 0 {
            v.push(b',');
        }
        v.extend_from_slice(item.as_bytes());
    }
    v.extend_from_slice(close.as_bytes());
    v
}

/// A DCGM answer of one card, for a Prometheus server.
const VECTOR: &str = r#"{"status":"success","data":{"resultType":"vector","result":[
  {"metric":{"__name__":"DCGM_FI_DEV_GPU_TEMP","gpu":"0","UUID":"GPU-a","instance":"10.0.0.7:9400"},"value":[1700000000.1,"64"]}]}}"#;

/// `snapshot --json` against a Prometheus server whose range queries answer `history`.
fn history_bomb(name: &str, history: String) {
    let server = Server::start(
        HashMap::from([
            ("/api/v1/query".into(), Reply::ok(VECTOR)),
            ("/federate".into(), Reply::status(404, "text/plain", "404 page not found\n")),
            ("/api/v1/query_range".into(), Reply::ok(history)),
        ]),
        None,
    );
    let (code, _, err) = bomb(name, &["snapshot", "--json", "--prometheus", &format!("http://{}", server.addr)]);
    assert_eq!(code, 0, "{name}: {err}");
}

fn matrix(series: impl Fn(usize) -> String, n: usize) -> String {
    let mut body = String::from(r#"{"status":"success","data":{"resultType":"matrix","result":["#);
    for i in 0..n {
        if i > 0 {
            body.push(',');
        }
        body.push_str(&series(i));
    }
    body.push_str("]}}");
    body
}

#[test]
#[ignore = "the bomb campaign: scripts/bombs.sh"]
fn history_of_many_series() {
    let n = size(300_000, 50_000);
    let ghost = |i: usize| format!(r#"{{"metric":{{"instance":"ghost-{i}:9400","gpu":"0"}},"values":[]}}"#);
    history_bomb("history of many series", matrix(ghost, n));
}

#[test]
#[ignore = "the bomb campaign: scripts/bombs.sh"]
fn history_of_one_card_with_many_instances() {
    let n = size(100_000, 20_000);
    let inst =
        |i: usize| format!(r#"{{"metric":{{"instance":"10.0.0.7:9400","gpu":"0","GPU_I_ID":"{i}"}},"values":[]}}"#);
    history_bomb("history of one card with many instances", matrix(inst, n));
}

#[test]
#[ignore = "the bomb campaign: scripts/bombs.sh"]
fn flooding_scrape_targets() {
    let floods: Vec<Server> =
        (0..size(6, 2)).map(|_| Server::start(HashMap::from([("/metrics".into(), Reply::flood())]), None)).collect();
    let mut args = vec!["snapshot".to_string(), "--json".into()];
    for s in &floods {
        args.extend(["--scrape".into(), s.url("/metrics")]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (_, out, _) = bomb("flooding scrape targets", &args);
    assert!(out.contains("memory budget"), "every flood stops at the budget: {out}");
}

#[test]
#[ignore = "the bomb campaign: scripts/bombs.sh"]
fn a_flooding_squeue() {
    use std::os::unix::fs::PermissionsExt;
    let dir = Temp::new("bomb-squeue");
    for (name, body) in
        [("squeue", "yes '{\"jobs\": [\"a line of output that never ends\"]}'"), ("sinfo", "echo '{\"nodes\": []}'")]
    {
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap_or_else(|e| panic!("{e}"));
    }
    let cfg = write(
        &dir,
        "config.toml",
        format!("[sources]\nslurm = true\n[slurm]\ncommands_dir = \"{}\"\ntimeout = \"60s\"\n", dir.display())
            .as_bytes(),
    );
    let (_, out, _) = bomb("a flooding squeue", &["snapshot", "--json", "--config", &cfg]);
    assert!(out.contains("memory budget") || out.contains("output cap"), "{out}");
}

/// A `squeue --json` whose jobs carry lists of one-key objects tessera does not read.
#[test]
#[ignore = "the bomb campaign: scripts/bombs.sh"]
fn a_squeue_of_bulky_jobs() {
    let dir = Temp::new("bomb-squeue-bulk");
    let junk = vec![r#"{"abcdef":0}"#; 2_000].join(",");
    let job = |i: usize| {
        format!(
            r#"{{"job_id":{i},"job_state":"PENDING","partition":"p","tres_per_node":"gres/gpu:1","junk":[{junk}]}}"#
        )
    };
    let jobs: Vec<String> = (0..size(4_000, 400)).map(job).collect();
    let doc = write(&dir, "squeue.json", format!(r#"{{"jobs":[{}]}}"#, jobs.join(",")).as_bytes());
    drop(jobs);
    let cfg = stand_in_slurm(&dir, &format!("cat '{doc}'"), "echo '{\"nodes\": []}'");
    let (code, out, err) = bomb("a squeue of bulky jobs", &["snapshot", "--json", "--config", &cfg]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("slurm:1"), "the jobs are read");
}

/// An `sinfo --json` whose nodes carry lists of one-key objects tessera does not read.
#[test]
#[ignore = "the bomb campaign: scripts/bombs.sh"]
fn an_sinfo_of_bulky_nodes() {
    let dir = Temp::new("bomb-sinfo-bulk");
    let junk = vec![r#"{"abcdef":0}"#; 2_000].join(",");
    let node = |i: usize| format!(r#"{{"name":"gpu{i}","state":"idle","gres":"gpu:h100:8","junk":[{junk}]}}"#);
    let nodes: Vec<String> = (0..size(4_000, 400)).map(node).collect();
    let doc = write(&dir, "sinfo.json", format!(r#"{{"nodes":[{}]}}"#, nodes.join(",")).as_bytes());
    drop(nodes);
    let cfg = stand_in_slurm(&dir, "echo '{\"jobs\": []}'", &format!("cat '{doc}'"));
    let (code, out, err) = bomb("an sinfo of bulky nodes", &["snapshot", "--json", "--config", &cfg]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"gpu1\""), "the nodes are read");
}

#[test]
#[ignore = "the bomb campaign: scripts/bombs.sh"]
fn a_scrape_target_with_many_cards() {
    let n = size(1_000_000, 70_000);
    let mut body = String::with_capacity(n * 70);
    for i in 0..n {
        body.push_str(&format!("DCGM_FI_DEV_GPU_TEMP{{gpu=\"{i}\",UUID=\"GPU-{i}\",Hostname=\"h\"}} 64\n"));
    }
    let server = Server::start(HashMap::from([("/metrics".into(), Reply::ok(body))]), None);
    let (code, out, err) =
        bomb("a scrape target with many cards", &["snapshot", "--json", "--scrape", &server.url("/metrics")]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("cards past 65536 cut"), "the cut is said");
}

/// The device check's inputs: an entity bomb, more GPUs than a host has, a snapshot of tiny
/// cards past the largest fleet, a scenario input of tiny values.
#[test]
#[ignore = "the bomb campaign: scripts/bombs.sh"]
fn device_check_inputs() {
    let dir = Temp::new("bomb-device");
    let snap = write(&dir, "snap.json", br#"{"nodes":[{"name":"n","cards":[{"index":0,"uuid":"GPU-1"}]}]}"#);
    let entity = format!(
        "<?xml version=\"1.0\"?><!DOCTYPE nvidia_smi_log [<!ENTITY a \"{}\">]><nvidia_smi_log><driver_version>{}</driver_version></nvidia_smi_log>",
        "x".repeat(size(100_000, 10_000)),
        "&a;".repeat(60_000)
    );
    let xml = write(&dir, "entity.xml", entity.as_bytes());
    let (code, _, err) = bomb("device check: an entity bomb", &["device-check", "compare", &snap, &xml]);
    assert!(code == 2 && err.contains("entity"), "{err}");
    let gpus = "<gpu id=\"x\"><uuid>GPU-1</uuid></gpu>".repeat(size(100_000, 20_000));
    let xml = write(&dir, "gpus.xml", format!("<nvidia_smi_log>{gpus}</nvidia_smi_log>").as_bytes());
    let (code, _, err) = bomb("device check: many GPUs", &["device-check", "compare", &snap, &xml]);
    assert!(code == 2 && err.contains("GPUs"), "{err}");
    let tiny = list(r#"{"nodes":[{"name":"n","cards":["#, "{}", size(20_000_000, 1_000_000), "]}]}");
    let fleet = write(&dir, "fleet.json", &tiny);
    let real = write(&dir, "smi.xml", b"<nvidia_smi_log><gpu id=\"x\"><uuid>GPU-1</uuid></gpu></nvidia_smi_log>");
    let (code, _, err) = bomb("device check: a snapshot of tiny cards", &["device-check", "compare", &fleet, &real]);
    assert!(code == 2 && err.contains("65536 cards"), "{err}");
    let zeros = list(r#"{"nodes":[],"x":["#, "0", size(30_000_000, 2_000_000), "]}");
    let values = write(&dir, "values.json", &zeros);
    let (code, _, err) = bomb("device check: a scenario of tiny values", &["device-check", "scenario", &values]);
    assert!(code == 2 && err.contains("JSON values"), "{err}");
}

/// A recording of one keyframe (`json`), written as tessera writes one (header, record
/// header, zstd), at `at_ms`.
fn recording(dir: &Path, name: &str, json: &[u8], at_ms: i64) -> PathBuf {
    use tessera::record::format::{Header, Kind, LEVEL, RecordHeader};
    let header = Header {
        format: "tessera-recording".into(),
        tessera: env!("CARGO_PKG_VERSION").into(),
        created_at: chrono::DateTime::from_timestamp_millis(at_ms).unwrap_or_default(),
        every_ms: 1000,
        sources: vec!["sim".into()],
        part: 1,
    };
    let mut out = header.encode();
    let payload = zstd::bulk::compress(json, LEVEL).unwrap_or_else(|e| panic!("{e}"));
    out.extend_from_slice(&RecordHeader::new(Kind::Key, 0, at_ms, &payload).encode());
    out.extend_from_slice(&payload);
    let p = dir.join(name);
    std::fs::write(&p, out).unwrap_or_else(|e| panic!("{e}"));
    p
}

/// Keyframes small on disk and large as a tree, through `snapshot --at` and `simulate
/// --recording`: one-key objects, short strings, tiny values.
#[test]
#[ignore = "the bomb campaign: scripts/bombs.sh"]
fn recording_bombs() {
    let dir = Temp::new("bomb-recording");
    let at_ms = 1_796_000_000_000;
    let at = chrono::DateTime::from_timestamp_millis(at_ms).unwrap_or_default().to_rfc3339();
    for (name, item, n) in [
        ("one-key objects", r#"{"abcdef":0}"#, size(7_900_000, 1_000_000)),
        ("short strings", r#""abcdefgh""#, size(11_000_000, 2_000_000)),
        ("tiny values", "0", size(30_000_000, 4_000_000)),
    ] {
        let json = list(r#"{"junk":["#, item, n, "]}");
        let file = recording(&dir, &format!("{}.tsrec", name.replace(' ', "-")), &json, at_ms);
        let file = file.to_string_lossy().into_owned();
        let refused = |e: &str| e.contains("would take more than") || e.contains("values");
        let (code, _, err) = bomb(&format!("recording of {name}: snapshot --at"), &["snapshot", "--at", &at, &file]);
        assert!(code != 0 && refused(&err), "{name}: {err}");
        let (code, _, err) =
            bomb(&format!("recording of {name}: simulate --recording"), &["simulate", "--recording", &file]);
        assert!(code != 0 && refused(&err), "{name}: {err}");
    }
}

/// A running GPU pod as a list item.
const POD: &str = r#"{"metadata":{"name":"p","namespace":"n","uid":"u"},"spec":{"nodeName":"h","containers":[{"resources":{"requests":{"nvidia.com/gpu":"1"}}}]},"status":{"phase":"Running"}}"#;

/// `snapshot --json --kubernetes` against the fake API server: what the source said.
fn k8s_bomb(name: &str, k: &FakeK8s) -> String {
    let dir = Temp::new("bomb-k8s");
    let cfg = k.kubeconfig(&dir);
    let cfg = cfg.to_string_lossy();
    let (_, out, err) = bomb_env(name, &["snapshot", "--json", "--kubernetes"], &[("KUBECONFIG", &cfg)]);
    format!("{out}{err}")
}

/// An API server whose list of pods never ends: pods with 100 KB labels, so that the cap of
/// an answer's bytes stops it before the count of a page's items does.
#[test]
#[ignore = "the bomb campaign: scripts/bombs.sh"]
fn kubernetes_endless_list() {
    let k = FakeK8s::start();
    let pod = POD.replacen(r#""uid":"u""#, &format!(r#""uid":"u","labels":{{"x":"{}"}}"#, "y".repeat(100_000)), 1);
    k.flood(PODS, &pod);
    let said = k8s_bomb("kubernetes: an endless list", &k);
    assert!(said.contains("sent too much: an answer passed"), "{said}");
}

/// An API server that answers a page of pods with all of them at once.
#[test]
#[ignore = "the bomb campaign: scripts/bombs.sh"]
fn kubernetes_one_page_of_many_pods() {
    let k = FakeK8s::start();
    let items = vec![POD; size(200_000, 50_000)].join(",");
    k.answer_text(
        PODS,
        format!(r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"1"}},"items":[{items}]}}"#),
    );
    drop(items);
    let said = k8s_bomb("kubernetes: one page of many pods", &k);
    assert!(said.contains("sent too much: a page asked for 200 items"), "{said}");
}

/// Stand-in `squeue` and `sinfo` in `dir` running `squeue` and `sinfo` (shell lines), and a
/// config that reads Slurm through them; the config's path.
fn stand_in_slurm(dir: &Temp, squeue: &str, sinfo: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    for (name, body) in [("squeue", squeue), ("sinfo", sinfo)] {
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap_or_else(|e| panic!("{e}"));
    }
    write(
        dir,
        "config.toml",
        format!("[sources]\nslurm = true\n[slurm]\ncommands_dir = \"{}\"\ntimeout = \"60s\"\n", dir.display())
            .as_bytes(),
    )
}
