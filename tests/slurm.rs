//! Against a real Slurm (Debian's slurmctld, slurmd and munge, 22.05): a one-node cluster with
//! typed and MIG GPU GRES started by `scripts/slurm-harness.sh` in a temporary directory, jobs
//! submitted with `sbatch`, then `tessera snapshot --slurm --json` and the Slurm executor
//! (drain, undrain, preempt) through the real `scontrol` and `scancel`.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

fn on_path(program: &str) -> bool {
    let dirs = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&dirs).chain(["/usr/sbin".into(), "/sbin".into()]).any(|d| d.join(program).is_file())
}

struct Cluster {
    dir: PathBuf,
    env: HashMap<String, String>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(harness()).arg("stop").arg(&self.dir).output();
    }
}

fn harness() -> PathBuf {
    common::root().join("scripts/slurm-harness.sh")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(0)
}

/// One cluster at a time: two harness clusters on one host would compete for its CPUs.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The Slurm programs a harness cluster needs, and this test's turn to run one: `None` (the
/// test says SKIPPED) where a program is missing, a failure instead under
/// `TESSERA_REQUIRE_SERVICES=1`. Slurm's clients fail even `-V` without a config, so the
/// programs are looked for instead.
fn slurm_here(test: &str) -> Option<std::sync::MutexGuard<'static, ()>> {
    for p in ["slurmctld", "slurmd", "munged", "sbatch", "squeue", "sinfo", "scontrol", "scancel"] {
        if !on_path(p) {
            assert!(std::env::var("TESSERA_REQUIRE_SERVICES").as_deref() != Ok("1"), "{p} is required here");
            println!("SKIPPED: {test} needs {p}");
            return None;
        }
    }
    Some(ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
}

impl Cluster {
    fn start(dir: &Path) -> Self {
        Self::start_with(dir, None)
    }

    /// A cluster whose node has `gres` (`TESSERA_SLURM_GRES`) instead of the default.
    fn start_with(dir: &Path, gres: Option<&str>) -> Self {
        let mut cmd = Command::new("bash");
        if let Some(g) = gres {
            cmd.env("TESSERA_SLURM_GRES", g);
        }
        let out = cmd
            .arg(harness())
            .arg("start")
            .arg(dir)
            .env("TESSERA_SLURMCTLD_PORT", free_port().to_string())
            .env("TESSERA_SLURMD_PORT", free_port().to_string())
            .output()
            .unwrap_or_else(|e| panic!("harness: {e}"));
        assert!(out.status.success(), "harness start: {}", String::from_utf8_lossy(&out.stderr));
        let env = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
            .collect();
        Self { dir: dir.to_path_buf(), env }
    }

    fn var(&self, k: &str) -> String {
        self.env.get(k).cloned().unwrap_or_else(|| panic!("harness printed no {k}"))
    }

    fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", self.var("SLURM_CONF"));
        c
    }

    fn output(&self, program: &str, args: &[&str]) -> String {
        let out = self.cmd(program).args(args).output().unwrap_or_else(|e| panic!("{program}: {e}"));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn sbatch(&self, name: &str, partition: &str, gres: &str, script: &str) -> String {
        let jobs = self.dir.join("jobs");
        let _ = std::fs::create_dir_all(&jobs);
        let out = self.output(
            "sbatch",
            &[
                "--parsable",
                "-J",
                name,
                "-p",
                partition,
                &format!("--gres={gres}"),
                "-c",
                "1",
                "--mem=100",
                "-D",
                &jobs.display().to_string(),
                "-o",
                "/dev/null",
                "--wrap",
                script,
            ],
        );
        let id = out.trim().split(';').next().unwrap_or_default().to_string();
        assert!(id.parse::<u64>().is_ok(), "sbatch {name}: {out:?}");
        id
    }

    fn wait(&self, what: &str, ok: impl Fn(&Self) -> bool) {
        let t = Instant::now();
        while !ok(self) {
            assert!(t.elapsed() < Duration::from_secs(60), "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    fn job_state(&self, id: &str) -> String {
        self.output("squeue", &["-h", "-j", id, "-o", "%T"]).trim().to_string()
    }

    fn tessera(&self, args: &[&str], state: &Path) -> (i32, String, String) {
        let out = self
            .cmd(env!("CARGO_BIN_EXE_tessera"))
            .args(args)
            .env("XDG_STATE_HOME", state)
            .env("XDG_CONFIG_HOME", state.join("no-config"))
            .output()
            .unwrap_or_else(|e| panic!("tessera: {e}"));
        let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code().unwrap_or(-1), s(&out.stdout), s(&out.stderr))
    }
}

/// A harness cluster in `dir` (emptied first), its node, the directory where jobs mark a
/// SIGUSR1, and a job script that marks one and runs ten minutes.
fn trapping(dir: &Path) -> (Cluster, String, PathBuf, String) {
    let _ = std::fs::remove_dir_all(dir);
    let c = Cluster::start(dir);
    let node = c.var("TESSERA_SLURM_NODE");
    let marks = dir.join("jobs");
    let trap =
        format!("trap 'touch {}/usr1-$SLURM_JOB_ID' USR1; for i in $(seq 600); do sleep 1; done", marks.display());
    (c, node, marks, trap)
}

#[test]
fn real_slurm_queue_and_actions() {
    let Some(_one) = slurm_here("real_slurm_queue_and_actions") else { return };
    let dir = std::env::temp_dir().join(format!("tessera-slurm-{}", std::process::id()));
    let (c, node, marks, trap) = trapping(&dir);
    let train = c.sbatch("train-a", "training", "gpu:h100:1", &trap);
    let infer = c.sbatch("serve-b", "inference", "gpu:h100:1", "sleep 600");
    c.wait("two h100 jobs running", |c| c.job_state(&train) == "RUNNING" && c.job_state(&infer) == "RUNNING");
    let mig1 = c.sbatch("mig-1", "training", "gpu:a100_3g.20gb:1", "sleep 600");
    let mig2 = c.sbatch("mig-2", "inference", "gpu:a100_3g.20gb:1", "sleep 600");
    c.wait("two MIG jobs running", |c| c.job_state(&mig1) == "RUNNING" && c.job_state(&mig2) == "RUNNING");
    let wait_h100 = c.sbatch("wait-h100", "training", "gpu:h100:1", "sleep 600");
    let wait_mig = c.sbatch("wait-mig", "training", "gpu:a100_3g.20gb:1", "sleep 600");
    // A new job says "None" until the scheduler has looked at it.
    let why = |c: &Cluster, id: &str| c.output("squeue", &["-h", "-j", id, "-o", "%T %r"]).trim().to_string();
    c.wait("two pending with a reason", |c| {
        [&wait_h100, &wait_mig]
            .iter()
            .all(|id| ["PENDING Resources", "PENDING Priority"].contains(&why(c, id).as_str()))
    });
    let state = dir.join("state-home");

    // The source: running jobs on the right GRES, pending ones with reasons, queue and kinds.
    let (code, out, err) = c.tessera(&["snapshot", "--slurm", "--json"], &state);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["sources"][0]["state"], "live", "{}", v["sources"]);
    let n = v["nodes"].as_array().and_then(|a| a.iter().find(|x| x["name"] == node.as_str())).cloned();
    let n = n.unwrap_or_else(|| panic!("node {node}: {}", v["nodes"]));
    let holders: Vec<String> = n["cards"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["workloads"].as_array().cloned().unwrap_or_default())
        .filter_map(|w| w.as_str().map(str::to_string))
        .collect();
    let mut want = vec![format!("slurm:{train}"), format!("slurm:{infer}")];
    want.sort();
    let mut got = holders.clone();
    got.sort();
    assert_eq!(got, want, "each whole H100 is held by its job");
    let w = |id: &str| -> Value {
        let id = format!("slurm:{id}");
        v["workloads"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["id"] == id.as_str()))
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(w(&infer)["kind"], "inference");
    assert_eq!(w(&train)["kind"], "training");
    assert_eq!(w(&mig2)["request"]["mig_profile"], "3g.20gb");
    for id in [&wait_h100, &wait_mig] {
        assert_eq!(w(id)["state"], "pending");
        let reason = w(id)["reason"].as_str().unwrap_or_default().to_string();
        assert!(["Resources", "Priority"].contains(&reason.as_str()), "{id}: {reason}");
    }
    assert_eq!(v["queue"]["pending"], 2);
    let demand = v["queue"]["demand"].as_array().cloned().unwrap_or_default();
    assert!(
        demand.iter().any(|d| d["resource"]["profile"] == "3g.20gb" && d["pending"] == 1 && d["free"] == 0),
        "{demand:?}"
    );

    // Drain and undrain the node: our reason, then RESUME.
    let (code, out, err) = c.tessera(&["drain", &node, "--slurm", "--yes"], &state);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Slurm drains whole nodes"), "the plan says it is node level: {out}");
    let shown = c.output("scontrol", &["show", "node", &node]);
    assert!(shown.contains("DRAIN"), "{shown}");
    assert!(shown.contains("Reason=tessera: "), "{shown}");
    let (code, _, err) = c.tessera(&["undrain", &node, "--slurm", "--yes"], &state);
    assert_eq!(code, 0, "{err}");
    let shown = c.output("scontrol", &["show", "node", &node]);
    assert!(!shown.contains("DRAIN"), "{shown}");

    // Inference is never preempted; young training needs --force.
    let (code, out, _) = c.tessera(&["preempt", &format!("slurm:{infer}"), "--slurm", "--yes"], &state);
    assert_eq!(code, 3, "{out}");
    let (code, out, _) = c.tessera(&["preempt", &format!("slurm:{train}"), "--slurm", "--yes"], &state);
    assert_eq!(code, 3, "young training is refused under the 30 minute default: {out}");

    // With a short minimum runtime the training job is signalled, then requeued.
    let cfg = dir.join("tessera.toml");
    std::fs::write(&cfg, "[policy]\nmin_runtime = \"1s\"\n[slurm]\npreempt_grace = \"2s\"\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let cfg = cfg.display().to_string();
    let (code, out, err) =
        c.tessera(&["preempt", &format!("slurm:{train}"), "--slurm", "--yes", "--config", &cfg], &state);
    assert_eq!(code, 0, "{out}{err}");
    assert!(marks.join(format!("usr1-{train}")).exists(), "the job got SIGUSR1 before the requeue");
    c.wait("the preempted job back in the queue", |c| c.job_state(&train) == "PENDING");

    let audit = std::fs::read_to_string(state.join("tessera/audit.jsonl")).unwrap_or_default();
    let records: Vec<Value> = audit.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let kinds: Vec<&str> = records.iter().filter_map(|r| r["record"].as_str()).collect();
    assert_eq!(kinds, ["intent", "outcome", "intent", "outcome", "refused", "refused", "intent", "outcome"]);
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The audit log's records under `state`, in order.
fn audit_records(state: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(state.join("tessera/audit.jsonl")).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill").args([&format!("-{sig}"), &pid.to_string()]).status().is_ok_and(|s| s.success());
    assert!(ok, "kill -{sig} {pid}");
}

/// A command-line action is never left half-done by a signal (a preemption was: tessera died
/// in the grace, after the checkpoint signal and before the requeue, with an intent and no
/// outcome). The first SIGHUP (a dropped SSH session) lets it finish; SIGTERM then SIGINT leave
/// at once, audited as interrupted; the node is then refused unattended (exit 3, naming what
/// was left) until a flag says to go on. Meanwhile an operator with another state directory is
/// refused by the one lock of the host (the locks were per state directory).
#[test]
fn real_slurm_signals_never_leave_an_action_half_done() {
    let Some(_one) = slurm_here("real_slurm_signals_never_leave_an_action_half_done") else { return };
    let dir = std::env::temp_dir().join(format!("tessera-slurm-sig-{}", std::process::id()));
    let (c, node, marks, trap) = trapping(&dir);
    let a = c.sbatch("train-a", "training", "gpu:h100:1", &trap);
    let b = c.sbatch("train-b", "training", "gpu:h100:1", &trap);
    c.wait("two training jobs running", |c| c.job_state(&a) == "RUNNING" && c.job_state(&b) == "RUNNING");
    // Past the minimum runtime of 1 s below.
    std::thread::sleep(Duration::from_secs(2));
    let cfg = dir.join("tessera.toml");
    std::fs::write(&cfg, "[policy]\nmin_runtime = \"1s\"\n[slurm]\npreempt_grace = \"4s\"\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let cfg = cfg.display().to_string();
    let (state, other) = (dir.join("state-a"), dir.join("state-b"));
    let preempt = |job: &str| {
        c.cmd(env!("CARGO_BIN_EXE_tessera"))
            .args(["preempt", &format!("slurm:{job}"), "--slurm", "--yes", "--config", &cfg])
            .env("XDG_STATE_HOME", &state)
            .env("XDG_CONFIG_HOME", state.join("no-config"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("tessera: {e}"))
    };
    let signalled = |job: &str, child: &mut std::process::Child| {
        let t = Instant::now();
        while !marks.join(format!("usr1-{job}")).exists() {
            if t.elapsed() > Duration::from_secs(30) || child.try_wait().ok().flatten().is_some() {
                let _ = child.kill();
                let mut said = String::new();
                for mut pipe in [
                    child.stdout.take().map(|p| Box::new(p) as Box<dyn std::io::Read>),
                    child.stderr.take().map(|p| Box::new(p) as Box<dyn std::io::Read>),
                ]
                .into_iter()
                .flatten()
                {
                    let _ = pipe.read_to_string(&mut said);
                }
                panic!("{job} was never asked to checkpoint: {said}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };

    // 1. In the grace: another operator is refused by the host's lock, then SIGHUP finishes it.
    let mut first = preempt(&a);
    signalled(&a, &mut first);
    let (code, out, err) = c.tessera(&["drain", &node, "--slurm", "--yes"], &other);
    assert_eq!(code, 3, "{out}{err}");
    assert!(err.contains(&format!("{node} is being acted on by ")), "{err}");
    let theirs = audit_records(&other);
    assert!(
        theirs.iter().any(|r| r["record"] == "refused" && r["why"].as_str().is_some_and(|w| w.contains("acted on by"))),
        "the lock's refusal is audited: {theirs:?}"
    );
    signal(first.id(), "HUP");
    let out = first.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains(&format!("SIGHUP: finishing preempting slurm:{a} first")), "{err}");
    c.wait("the preempted job requeued", |c| c.job_state(&a) == "PENDING");
    let kinds: Vec<String> =
        audit_records(&state).iter().filter_map(|r| r["record"].as_str().map(str::to_string)).collect();
    assert_eq!(kinds, ["intent", "outcome"]);

    // 2. A second signal leaves at once: the requeue never runs, and the log says so.
    let mut second = preempt(&b);
    signalled(&b, &mut second);
    signal(second.id(), "TERM");
    std::thread::sleep(Duration::from_millis(300));
    signal(second.id(), "INT");
    let out = second.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("left at once while preempting") && err.contains("not run: Requeue the job"), "{err}");
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(c.job_state(&b), "RUNNING", "not requeued after tessera left");
    let records = audit_records(&state);
    let last = records.last().cloned().unwrap_or_default();
    assert_eq!(last["record"], "interrupted", "{records:?}");
    assert_eq!(last["steps"][1]["status"], "running");
    assert_eq!(last["steps"][2]["status"], "not run");

    // 3. The node's next action: said at the start, refused unattended, asked for by a flag.
    let (code, out, err) = c.tessera(&["drain", &node, "--slurm", "--yes"], &state);
    assert_eq!(code, 3, "{out}{err}");
    assert!(err.contains("left half-done, from the audit log:") && err.contains(&format!("slurm:{b}")), "{err}");
    assert!(out.contains("refused: an earlier action on this target was left half-done"), "{out}");
    let (code, out, err) = c.tessera(&["drain", &node, "--slurm", "--yes", "--despite-open-intent"], &state);
    assert_eq!(code, 0, "{out}{err}");
    // The drain's outcome closes what was open: the undrain needs no flag.
    let (code, out, err) = c.tessera(&["undrain", &node, "--slurm", "--yes"], &state);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!err.contains("left half-done"), "{err}");
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn real_slurm_shards_count_per_card_and_for_the_queue() {
    let Some(_one) = slurm_here("real_slurm_shards_count_per_card_and_for_the_queue") else { return };
    let dir = std::env::temp_dir().join(format!("tessera-slurm-shard-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // GresTypes=gpu,shard: four L4s, 16 shards split evenly (4 a card).
    let c = Cluster::start_with(&dir, Some("gpu:l4:4,shard:16"));
    let train = c.sbatch("train-small", "training", "shard:3", "sleep 600");
    // 3 and 2 shards cannot share a card of 4: they take two cards.
    let serve = c.sbatch("serve", "inference", "shard:2", "sleep 600");
    let whole = c.sbatch("whole", "training", "gpu:l4:1", "sleep 600");
    c.wait("three jobs running", |c| [&train, &serve, &whole].iter().all(|id| c.job_state(id) == "RUNNING"));
    // Two want a whole card's shards: one card is left with all four free.
    let bigs = [
        c.sbatch("big-1", "inference", "shard:4", "sleep 600"),
        c.sbatch("big-2", "inference", "shard:4", "sleep 600"),
    ];
    let why = |c: &Cluster, id: &str| c.output("squeue", &["-h", "-j", id, "-o", "%T %r"]).trim().to_string();
    c.wait("the shard:4 jobs placed or waiting with a reason", |c| {
        bigs.iter().all(|id| ["RUNNING None", "PENDING Resources", "PENDING Priority"].contains(&why(c, id).as_str()))
    });
    let state = dir.join("state-home");
    let (code, out, err) = c.tessera(&["snapshot", "--slurm", "--json"], &state);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let cards: Vec<Value> = v["nodes"][0]["cards"].as_array().cloned().unwrap_or_default();
    assert_eq!(cards.len(), 4, "{}", v["nodes"]);
    for card in &cards {
        assert_eq!(card["sharing_mode"], "time_sliced", "{card}");
        assert_eq!(card["sharing"]["replicas"], 4, "{card}");
    }
    // Shards in use per card, from the jobs (gres_used counts GPUs, not shards): the card held
    // whole has none to give, so all four count as used.
    let used: u64 = cards.iter().filter_map(|c| c["sharing"]["replicas_used"].as_u64()).sum();
    let running = bigs.iter().filter(|id| c.job_state(id) == "RUNNING").count() as u64;
    assert_eq!(running, 1, "one card had four shards free");
    assert_eq!(used, 3 + 2 + 4 + 4, "{cards:?}");
    let shard = v["nodes"][0]["capacity"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["resource"]["type"] == "shared").cloned())
        .unwrap_or_else(|| panic!("{}", v["nodes"][0]["capacity"]));
    assert_eq!((shard["total"].as_u64(), shard["used"].as_u64()), (Some(16), Some(used)));
    let w = |id: &str| {
        let id = format!("slurm:{id}");
        v["workloads"].as_array().and_then(|a| a.iter().find(|x| x["id"] == id.as_str()).cloned()).unwrap_or_default()
    };
    assert_eq!(w(&serve)["request"]["shares"]["count"], 2);
    assert_eq!(w(&serve)["request"]["gpus"], Value::Null, "a shard is not a GPU");
    // Pending shard work is counted against free shards, and no card has four free.
    let demand = v["queue"]["demand"].as_array().cloned().unwrap_or_default();
    let d = demand.iter().find(|d| d["resource"]["type"] == "shared").unwrap_or_else(|| panic!("{demand:?}"));
    let pending = 2 - running;
    assert_eq!((d["pending"].as_u64(), d["wanted"].as_u64()), (Some(pending), Some(4 * pending)), "{d}");
    assert_eq!(d["free"].as_u64(), Some(16 - used), "{d}");
    assert!(d["largest_block"].as_u64().is_some_and(|b| b < 4), "{d}");
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn real_slurm_mps_units_per_card() {
    let Some(_one) = slurm_here("real_slurm_mps_units_per_card") else { return };
    let dir = std::env::temp_dir().join(format!("tessera-slurm-mps-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // GresTypes=gpu,mps: two L4s, 200 MPS units split evenly (100 a card).
    let c = Cluster::start_with(&dir, Some("gpu:l4:2,mps:200"));
    let a = c.sbatch("serve-a", "inference", "mps:50", "sleep 600");
    let b = c.sbatch("train-b", "inference", "mps:30", "sleep 600");
    c.wait("both running", |c| c.job_state(&a) == "RUNNING" && c.job_state(&b) == "RUNNING");
    // 22.05 serves MPS from one GPU at a time: 40 units wanted, 20 left there, and it waits
    // though the other GPU has all 100 free.
    let big = c.sbatch("serve-big", "inference", "mps:40", "sleep 600");
    let why = |c: &Cluster, id: &str| c.output("squeue", &["-h", "-j", id, "-o", "%T %r"]).trim().to_string();
    c.wait("the mps:40 job waiting for resources", |c| why(c, &big) == "PENDING Resources");
    let state = dir.join("state-home");
    let (code, out, err) = c.tessera(&["snapshot", "--slurm", "--json"], &state);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let cards: Vec<Value> = v["nodes"][0]["cards"].as_array().cloned().unwrap_or_default();
    assert_eq!(cards.len(), 2, "{}", v["nodes"]);
    for card in &cards {
        assert_eq!((card["sharing_mode"].as_str(), card["sharing"]["unit"].as_str()), (Some("mps"), Some("mps")));
        assert_eq!(card["sharing"]["replicas"], 100, "{card}");
    }
    // Both on one card, as Slurm placed them; the queue counts that card's 20 free, not 120.
    let mut used: Vec<u64> = cards.iter().filter_map(|c| c["sharing"]["replicas_used"].as_u64()).collect();
    used.sort_unstable();
    assert_eq!(used, [0, 80], "{cards:?}");
    let demand = v["queue"]["demand"].as_array().cloned().unwrap_or_default();
    let d = demand.iter().find(|d| d["resource"]["unit"] == "mps").unwrap_or_else(|| panic!("{demand:?}"));
    assert_eq!((d["wanted"].as_u64(), d["free"].as_u64()), (Some(40), Some(20)), "{d}");
    let w = v["workloads"].as_array().and_then(|ws| ws.iter().find(|w| w["id"] == format!("slurm:{a}")).cloned());
    assert_eq!(w.map(|w| w["request"]["shares"].clone()), Some(serde_json::json!({"unit": "mps", "count": 50})));
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}
