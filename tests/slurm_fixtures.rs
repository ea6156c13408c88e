//! The Slurm source on real Slurm JSON (21.08, 23.11 and 25.05, from public test fixtures and
//! a real slurmrestd), through stand-in `squeue`/`sinfo` scripts that print, fail or hang, and
//! through a slurmrestd served on 127.0.0.1.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use tessera::model::KindRules;
use tessera::model::{CardRef, Resource, WorkloadKind, WorkloadState};
use tessera::sources::slurm::{self, Rest, Settings, jobs, nodes};

mod common;
use common::http::{Reply, Server};

fn fixture(name: &str) -> String {
    let p = common::root().join("tests/fixtures/slurm").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn doc(name: &str) -> Value {
    serde_json::from_str(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn slurm_21_08_jobs_and_nodes() {
    let j = jobs::map(&doc("squeue--json.21.08.5.openapi-v0.0.37.json"), &KindRules::default());
    // The one job of this sample asks for no GPU: counted, not shown.
    assert_eq!((j.workloads.len(), j.without_gpu, j.unreadable), (0, 1, 0));
    let (n, bad) = nodes::map(&doc("sinfo--json.21.08.5.openapi-v0.0.37.json"));
    assert_eq!(bad, 0);
    assert!(!n.is_empty());
    assert!(n.iter().all(|x| x.cards.is_empty()), "no GPU GRES in this cluster");
}

#[test]
fn slurm_23_11_typed_gres_jobs_hold_the_right_cards() {
    let j = jobs::map(&doc("slurmrestd-23.11.10-v0.0.40/slurm-job-gpus-multi-types.json"), &KindRules::default());
    let w = &j.workloads[0];
    assert_eq!((w.id.as_str(), w.state), ("slurm:796", WorkloadState::Running));
    assert_eq!(w.cards, vec![CardRef::new("ia2", 0), CardRef::new("ia2", 2)]);
    assert_eq!(w.request.gpus, Some(2));
    assert_eq!(w.kind, WorkloadKind::Training);

    let j = jobs::map(&doc("slurmrestd-23.11.10-v0.0.40/slurm-job-gpus-per-node.json"), &KindRules::default());
    let w = &j.workloads[0];
    assert_eq!(w.cards, vec![CardRef::new("ia1", 0), CardRef::new("ia2", 0)], "one card on each of two nodes");
    assert_eq!(w.request.gpus, Some(2), "gres/gpu:1 per node × 2 nodes");

    let j = jobs::map(&doc("slurmrestd-23.11.10-v0.0.40/slurm-job-gpus-pending.json"), &KindRules::default());
    let w = &j.workloads[0];
    assert_eq!((w.state, w.reason.as_deref(), w.request.gpus), (WorkloadState::Pending, Some("BeginTime"), Some(6)));
    assert!(w.submitted_at.is_some() && w.started_at.is_none());

    let (n, _) = nodes::map(&doc("slurmrestd-23.11.10-v0.0.40/slurm-node-with-gpus-mixed.json"));
    let ia1 = &n[0];
    assert_eq!(ia1.cards.len(), 6);
    assert_eq!(ia1.capacity[0].resource, Resource::WholeCard { model: Some("h100".into()) });
    assert_eq!((ia1.capacity[0].total, ia1.capacity[0].used), (2, 1));

    let (n, _) = nodes::map(&doc("slurmrestd-23.11.10-v0.0.40/slurm-nodes.json"));
    let cn1 = n.iter().find(|x| x.name == "cn1").unwrap_or_else(|| panic!("cn1"));
    assert_eq!(cn1.reason.as_deref(), Some("drain: ECC memory error"));
    let cn4 = n.iter().find(|x| x.name == "cn4").unwrap_or_else(|| panic!("cn4"));
    assert_eq!(cn4.reason.as_deref(), Some("down: CPU dead"));
}

#[test]
fn slurm_25_05_running_and_completing() {
    let j = jobs::map(&doc("slurmrestd-25.05.4-v0.0.43/slurm-job-gpus-running.json"), &KindRules::default());
    let w = &j.workloads[0];
    assert_eq!(w.cards.iter().map(|c| c.index).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    assert_eq!(w.node.as_deref(), Some("gpu1"));
    let (n, _) = nodes::map(&doc("slurmrestd-25.05.4-v0.0.43/slurm-nodes.json"));
    let gpu1 = n.iter().find(|x| x.name == "gpu1").unwrap_or_else(|| panic!("gpu1"));
    assert!(gpu1.schedulable, "IDLE+COMPLETING still schedules");
    assert_eq!(gpu1.cards.len(), 4);
}

#[test]
fn spliced_file_mixing_dialects_never_panics() {
    let j = jobs::map(&doc("squeue--json.SPLICED-21.08-job-plus-23.x-job.json"), &KindRules::default());
    assert_eq!(j.unreadable, 0);
    assert_eq!(j.workloads.len() + j.without_gpu, 2, "both jobs read, whatever their dialect");
}

/// A directory of stand-in Slurm commands (shell scripts).
fn commands(name: &str, squeue: &str, sinfo: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tessera-slurm-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    for (prog, body) in [("squeue", squeue), ("sinfo", sinfo)] {
        let p = dir.join(prog);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap_or_else(|e| panic!("{e}"));
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap_or_else(|e| panic!("{e}"));
    }
    dir
}

fn collect(
    settings: &Settings,
    client: Option<&tessera::sources::http::Client>,
) -> Result<tessera::sources::Partial, String> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(slurm::collect(settings, client, &mut 0)).map_err(|e| e.message)
}

fn settings(dir: Option<&Path>) -> Settings {
    Settings { commands_dir: dir.map(Path::to_path_buf), timeout: Duration::from_secs(2), ..Settings::default() }
}

#[test]
fn commands_that_print_fail_hang_or_are_missing() {
    let fix = common::root().join("tests/fixtures/slurm/slurmrestd-23.11.10-v0.0.40");
    let ok = commands(
        "ok",
        &format!("cat '{}'", fix.join("slurm-job-gpus-multi-types.json").display()),
        &format!("cat '{}'", fix.join("slurm-node-with-gpus-mixed.json").display()),
    );
    let p = collect(&settings(Some(&ok)), None).unwrap_or_else(|e| panic!("{e}"));
    let ia2 = p.nodes.iter().find(|n| n.name == "ia2");
    // ia2 is not in this nodes sample: the job's cards there have no card to hold.
    assert!(ia2.is_none());
    assert_eq!(p.workloads[0].id, "slurm:796");

    let failing = commands("fail", "echo 'slurm_load_jobs error: Unable to contact slurm controller' >&2; exit 1", "");
    let e = collect(&settings(Some(&failing)), None).err().unwrap_or_default();
    assert_eq!(e, "squeue --json exited with code 1: slurm_load_jobs error: Unable to contact slurm controller");

    let hanging = commands("hang", "exec sleep 30", "");
    let t = Instant::now();
    let e = collect(&settings(Some(&hanging)), None).err().unwrap_or_default();
    assert!(e.contains("no answer within 2s"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(5), "the hung command was killed at the timeout");

    let garbage = commands("garbage", "echo '{\"jobs\": ['", "");
    let e = collect(&settings(Some(&garbage)), None).err().unwrap_or_default();
    assert!(e.starts_with("squeue --json: not JSON"), "{e}");

    let unknown = commands(
        "unknown",
        r#"echo '{"meta": {"plugin": {"data_parser": "data_parser/v0.0.99"}}, "jobs": []}'"#,
        r#"echo '{"nodes": [{"name": "n1", "state": ["IDLE"], "gres": "gpu:4"}]}'"#,
    );
    let p = collect(&settings(Some(&unknown)), None).unwrap_or_else(|e| panic!("{e}"));
    let note = p.note.unwrap_or_default();
    assert!(note.contains("unknown Slurm JSON data_parser/v0.0.99"), "{note}");
    assert!(note.contains("without meta"), "{note}");
    assert_eq!(p.nodes[0].cards.len(), 4);

    // 23.11+: sinfo prints partition summaries; the nodes come from scontrol.
    let newer = commands(
        "newer",
        r#"echo '{"jobs": []}'"#,
        r#"echo '{"sinfo": [{"partition": {"name": "gpu"}}], "meta": {}}'"#,
    );
    let nodes = fix.join("slurm-nodes.json");
    std::fs::write(
        newer.join("scontrol"),
        format!("#!/bin/sh\n[ \"$*\" = 'show nodes --json' ] && cat '{}'\n", nodes.display()),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    {
        use std::os::unix::fs::PermissionsExt;
        let p = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(newer.join("scontrol"), p).unwrap_or_else(|e| panic!("{e}"));
    }
    let p = collect(&settings(Some(&newer)), None).unwrap_or_else(|e| panic!("{e}"));
    assert!(p.nodes.iter().any(|n| n.name == "ia1" && n.cards.len() == 6), "{:?}", p.nodes);

    let missing = std::env::temp_dir().join("tessera-no-slurm-here");
    let e = collect(&settings(Some(&missing)), None).err().unwrap_or_default();
    assert!(e.starts_with("squeue: not found"), "{e}");
}

#[test]
fn slurmrestd_finds_its_api_version_and_sends_the_token() {
    let dir = common::root().join("tests/fixtures/slurm/slurmrestd-23.11.10-v0.0.40");
    let read = |f: &str| std::fs::read(dir.join(f)).unwrap_or_else(|e| panic!("{e}"));
    let mut routes = HashMap::new();
    routes.insert("/slurm/v0.0.40/jobs".to_string(), Reply::status(200, "application/json", read("slurm-jobs.json")));
    routes.insert("/slurm/v0.0.40/nodes".to_string(), Reply::status(200, "application/json", read("slurm-nodes.json")));
    let server = Server::start(routes, Some("jwt-secret"));
    let tmp = std::env::temp_dir().join(format!("tessera-slurm-jwt-{}", std::process::id()));
    std::fs::write(&tmp, "jwt-secret\n").unwrap_or_else(|e| panic!("{e}"));
    let rest = Rest { url: format!("http://{}", server.addr), user: Some("root".into()), token_file: None };
    let client =
        tessera::sources::http::Client::new(&tessera::config::Http::default()).unwrap_or_else(|e| panic!("{e}"));

    let mut s = Settings { rest: Some(rest.clone()), ..settings(None) };
    let e = collect(&s, Some(&client)).err().unwrap_or_default();
    assert!(e.contains("HTTP 401"), "no token, refused: {e}");
    assert!(!e.contains("jwt-secret"));

    s.rest = Some(Rest { token_file: Some(tmp.display().to_string()), ..rest });
    let p = collect(&s, Some(&client)).unwrap_or_else(|e| panic!("{e}"));
    assert!(p.nodes.iter().any(|n| n.name == "ia1" && n.cards.len() == 6));
    assert!(p.workloads.is_empty(), "no GPU job runs or waits in this sample");
    let note = p.note.unwrap_or_default();
    assert!(note.contains("jobs without GPUs not shown"), "{note}");
}

#[test]
fn slurmrestd_error_envelope_is_the_message() {
    let dir = common::root().join("tests/fixtures/slurm/slurmrestd-23.11.10-v0.0.40");
    let body = std::fs::read(dir.join("slurm-jwt-invalid-token.json")).unwrap_or_else(|e| panic!("{e}"));
    let mut routes = HashMap::new();
    routes.insert("/slurm/v0.0.43/jobs".to_string(), Reply::status(200, "application/json", body));
    let server = Server::start(routes, None);
    let client =
        tessera::sources::http::Client::new(&tessera::config::Http::default()).unwrap_or_else(|e| panic!("{e}"));
    let rest = Rest { url: format!("http://{}", server.addr), user: None, token_file: None };
    let s = Settings { rest: Some(rest), ..settings(None) };
    let e = collect(&s, Some(&client)).err().unwrap_or_default();
    assert_eq!(
        e,
        "slurmrestd jobs: Unable to connect to database (openapi_get_db_conn() failed to open slurmdb connection)"
    );
}

#[test]
fn slurm_22_05_real_capture() {
    let dir = "22.05.8-tessera-harness";
    let j = jobs::map(&doc(&format!("{dir}/squeue_mixed.json")), &KindRules::default());
    assert_eq!((j.workloads.len(), j.without_gpu), (8, 1), "the cpu-only job is counted, not shown");
    let by = |id: &str| j.workloads.iter().find(|w| w.id == id).unwrap_or_else(|| panic!("{id}"));
    assert_eq!(by("slurm:1").cards, vec![CardRef::new("vm", 0)]);
    assert_eq!(by("slurm:1").kind, WorkloadKind::Training);
    assert_eq!(by("slurm:2").kind, WorkloadKind::Inference, "partition inference");
    assert_eq!(by("slurm:3").request.mig_profile.as_deref(), Some("3g.20gb"));
    assert!(by("slurm:3").cards.is_empty(), "a MIG GRES names no card");
    assert_eq!((by("slurm:6").reason.as_deref(), by("slurm:6").request.gpus), (Some("Resources"), Some(2)));
    assert_eq!(by("slurm:9").request.gpus, Some(1), "--gpus=1 is tres_per_job gres:gpu:1");
    assert_eq!(by("slurm:9").request.model, None);

    let (n, _) = nodes::map(&doc(&format!("{dir}/sinfo.json")));
    assert_eq!(n[0].cards.len(), 2);
    let free: Vec<u64> = n[0].capacity.iter().map(|c| c.free()).collect();
    assert_eq!(free, vec![0, 0]);
    let (n, _) = nodes::map(&doc(&format!("{dir}/sinfo_draining.json")));
    assert!(!n[0].schedulable);
    assert_eq!(n[0].reason.as_deref(), Some("drain: tessera: root: test"));

    let j = jobs::map(&doc(&format!("{dir}/squeue_after_requeue.json")), &KindRules::default());
    assert!(j.workloads.iter().any(|w| w.state == WorkloadState::Pending && w.reason.as_deref() == Some("BeginTime")));
}

#[test]
fn advise_on_the_22_05_capture_is_queue_advice_and_says_activity_is_unknown() {
    let fix = common::root().join("tests/fixtures/slurm/22.05.8-tessera-harness");
    let dir = commands(
        "advise",
        &format!("cat '{}'", fix.join("squeue_mixed.json").display()),
        &format!("cat '{}'", fix.join("sinfo.json").display()),
    );
    let cfg = dir.join("tessera.toml");
    std::fs::write(&cfg, format!("[slurm]\ncommands_dir = \"{}\"\n", dir.display())).unwrap_or_else(|e| panic!("{e}"));
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["advise", "--slurm", "--config", cfg.to_str().unwrap_or_default()])
            .args(args)
            .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (code, text) = run(&["--json"]);
    assert_eq!(code, Some(0), "{text}");
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let findings = v["findings"].as_array().cloned().unwrap_or_default();
    // Slurm reports no activity: nothing is called idle or oversized, and the count says why.
    assert!(findings.iter().all(|f| f["kind"] == "scale_out"), "{text}");
    assert_eq!((v["activity_covered"]["workloads"].as_u64(), v["activity_covered"]["of"].as_u64()), (Some(0), Some(2)));
    // The capture's pending work (the 2-GPU job waiting on Resources, the 3g.20gb job) waited
    // days past the threshold: high.
    let mig = findings.iter().find(|f| f["subject"]["resource"] == "MIG 3g.20gb").unwrap_or_else(|| panic!("{text}"));
    assert_eq!(mig["severity"], "high");
    assert_eq!(run(&["--fail-on", "high"]).0, Some(4));
    // With a patient queue threshold nothing is found: exit 0 for cron.
    std::fs::write(
        &cfg,
        format!("[slurm]\ncommands_dir = \"{}\"\n[policy]\nqueue_wait_threshold = \"30d\"\n", dir.display()),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (code, text) = run(&["--fail-on", "warn"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.starts_with("0 findings"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shards_on_the_real_22_05_capture_count_per_card_from_the_jobs() {
    use tessera::model::capacity::Free;
    use tessera::model::{Fleet, QueueSummary, Resource, ShareUnit, SharingMode};
    let fix = common::root().join("tests/fixtures/slurm/22.05.8-tessera-harness");
    let dir = commands(
        "shards",
        &format!("cat '{}'", fix.join("squeue_shards.json").display()),
        &format!("cat '{}'", fix.join("sinfo_shards.json").display()),
    );
    let p = collect(&settings(Some(&dir)), None).unwrap_or_else(|e| panic!("{e}"));
    let node = &p.nodes[0];
    let cards: Vec<(Option<SharingMode>, String)> =
        node.cards.iter().map(|c| (c.sharing_mode(), c.sharing_text(false))).collect();
    // Jobs: shard:2 and shard:1 on card 0, shard:3 on card 1, gpu:l4:1 on card 2 (no shards
    // while it is held whole), shard:4 on card 3. gres_used says `shard:l4:3`: GPUs, not shards.
    let ts = Some(SharingMode::TimeSliced);
    assert_eq!(
        cards,
        vec![(ts, "TS×4 3/4".into()), (ts, "TS×4 3/4".into()), (ts, "TS×4 4/4".into()), (ts, "TS×4 4/4".into())]
    );
    let shard = Resource::Shared { unit: ShareUnit::Replica, model: Some("l4".into()) };
    let cap = node.capacity.iter().find(|c| c.resource == shard).unwrap_or_else(|| panic!("{:?}", node.capacity));
    assert_eq!((cap.total, cap.used), (16, 14));
    let holders: Vec<usize> = node.cards.iter().map(|c| c.workloads.len()).collect();
    assert_eq!(holders, vec![2, 1, 1, 1]);
    let job = p.workloads.iter().find(|w| w.id == "slurm:6").unwrap_or_else(|| panic!("slurm:6"));
    assert_eq!(job.request.asks(), (Resource::Shared { unit: ShareUnit::Replica, model: None }, 4));
    // Two shards are free, one on each of two cards: the pending shard:4 jobs fit nowhere.
    let mut fleet = Fleet { nodes: p.nodes.clone(), workloads: p.workloads.clone(), ..Fleet::default() };
    fleet.index_workloads();
    let free = Free::compute(&fleet);
    let any = Resource::Shared { unit: ShareUnit::Replica, model: None };
    assert_eq!((free.of(&any), free.largest_block(&any)), (2, 1));
    let now = chrono::Utc::now();
    let q = QueueSummary::compute(&fleet, now);
    let d = q.demand.iter().find(|d| d.resource == any).unwrap_or_else(|| panic!("{:?}", q.demand));
    assert_eq!((d.pending, d.wanted, d.free, d.largest_request, d.largest_block), (2, 8, 2, 4, 1));
    let _ = std::fs::remove_dir_all(&dir);
}
