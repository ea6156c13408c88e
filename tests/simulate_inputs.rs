//! The demand inputs of `tessera simulate` on real and constructed files: the Alibaba trace
//! sample (and the whole trace where the shared reference folder has it), its GPU-seconds
//! against the trace's own sum computed here independently, bad and cut lines named by file,
//! line and field, `skip_bad` counts, a huge line read past, `scripts/sacct-to-demand` on a
//! constructed sacct output read back by the CSV reader, the CSV example of docs/simulate.md,
//! and a recording of the simulated cluster as jobs and a fleet.

use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use tessera::simulate::input::{LineError, Parsed, demand_csv, openb_nodes, openb_pods};
use tessera::simulate::{Class, Job};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(name: &str) -> PathBuf {
    root().join("tests/fixtures").join(name)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The whole trace in the shared reference folder beside the repository, where present.
fn shared(name: &str) -> Option<PathBuf> {
    let p = root().join("../shared/reference/traces").join(name);
    p.is_file().then_some(p)
}

fn pods_of(path: &Path, skip_bad: bool) -> Result<Parsed, LineError> {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    openb_pods(&path.display().to_string(), BufReader::new(f), skip_bad)
}

/// The trace's own demand, written from its README alone (a plain split on commas, columns by
/// position): per GPU pod `num_gpu × (gpu_milli/1000 for one GPU) × (deletion − (scheduled or
/// creation))`, at least one second (the simulator's shortest job: one pod of the whole trace
/// is deleted the second it was created). Returns (pods, GPU pods, GPU-seconds).
fn reference(text: &str) -> (u64, u64, f64) {
    let (mut pods, mut gpu_pods, mut sum) = (0, 0, 0.0);
    for line in text.lines().skip(1).filter(|l| !l.is_empty()) {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 11, "{line}");
        pods += 1;
        let num: f64 = f[3].parse().unwrap_or(f64::NAN);
        if num == 0.0 {
            continue;
        }
        gpu_pods += 1;
        let milli: f64 = f[4].parse().unwrap_or(f64::NAN);
        let share = if num == 1.0 { milli / 1000.0 } else { num };
        let start: f64 =
            if f[10].is_empty() { f[8].parse().unwrap_or(f64::NAN) } else { f[10].parse().unwrap_or(f64::NAN) };
        let end: f64 = f[9].parse().unwrap_or(f64::NAN);
        sum += share * (end - start).max(1.0);
    }
    (pods, gpu_pods, sum)
}

fn gpu_seconds(jobs: &[Job]) -> f64 {
    jobs.iter().map(Job::gpu_seconds).sum()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn the_trace_sample_reads_with_its_counts_and_classes() {
    let p = pods_of(&fixture("traces/openb_pod_list_sample.csv"), false).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((p.rows, p.jobs.len(), p.without_gpu, p.skipped), (300, 281, 19, 0));
    assert_eq!(p.jobs.iter().filter(|j| j.fractional()).count(), 103);
    assert_eq!(p.jobs.iter().filter(|j| j.gpus > 1).count(), 2);
    assert!(p.jobs.iter().all(|j| j.use_milli == 1000 && j.duration >= 1 && j.mem_mib == 0));
    let ls = p.jobs.iter().filter(|j| j.class == Class::Inference).count();
    let be = p.jobs.iter().filter(|j| j.class == Class::Training).count();
    assert!(ls > 100 && be > 100, "{ls} LS, {be} BE");
    let first = &p.jobs[0];
    assert_eq!((&*first.name, first.submit, first.duration), ("openb-pod-0000", 0, 12_537_496));
    assert_eq!((first.cpu_milli, first.host_mem_mib), (12000, 16384));
}

#[test]
fn the_gpu_seconds_of_the_sample_equal_the_traces_own_sum() {
    let path = fixture("traces/openb_pod_list_sample.csv");
    let (pods, gpu_pods, want) = reference(&read(&path));
    let p = pods_of(&path, false).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((p.rows, p.jobs.len() as u64), (pods, gpu_pods));
    let got = gpu_seconds(&p.jobs);
    assert!(close(got, want), "parsed {got} GPU-seconds, the trace sums {want}");
    assert!(close(want, 127_284_357.27), "{want}");
}

#[test]
fn the_node_sample_is_a_fleet_of_the_traces_models() {
    let path = fixture("traces/openb_node_list_sample.csv");
    let f = openb_nodes("nodes.csv", read(&path).as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    let want: u64 = read(&path).lines().skip(1).filter_map(|l| l.split(',').nth(3)?.parse::<u64>().ok()).sum();
    assert_eq!((f.nodes.len(), f.gpus()), (61, want));
    let mut models: Vec<&str> = f.models.iter().map(|m| &*m.name).collect();
    models.sort_unstable();
    assert_eq!(models, vec!["G2", "G3", "P100", "T4", "V100M16"]);
    assert!(f.nodes.iter().all(|n| n.cpu_milli > 0 && n.mem_mib > 0));
}

#[test]
fn the_whole_trace_where_the_shared_reference_folder_has_it() {
    let (Some(pods), Some(nodes)) = (shared("openb_pod_list_default.csv"), shared("openb_node_list_gpu_node.csv"))
    else {
        eprintln!("the whole Alibaba trace is not in ../shared/reference/traces/: skipped");
        return;
    };
    let p = pods_of(&pods, false).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((p.rows, p.jobs.len(), p.without_gpu), (8152, 7064, 1088));
    let by_gpus = |n: u32| p.jobs.iter().filter(|j| j.gpus == n).count();
    assert_eq!((by_gpus(1), by_gpus(2), by_gpus(4), by_gpus(8)), (6989, 16, 15, 44));
    assert_eq!(p.jobs.iter().filter(|j| j.fractional()).count(), 3078);
    let (_, _, want) = reference(&read(&pods));
    assert!(close(gpu_seconds(&p.jobs), want), "{} vs {want}", gpu_seconds(&p.jobs));
    let f = std::fs::File::open(&nodes).map(BufReader::new).unwrap_or_else(|e| panic!("{e}"));
    let fleet = openb_nodes("openb_node_list_gpu_node.csv", f).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((fleet.nodes.len(), fleet.gpus()), (1213, 6212));
}

/// The sample with damage put in: a line cut short, a count that is not one, times running
/// backwards; and a huge line.
fn damaged() -> String {
    let text = read(&fixture("traces/openb_pod_list_sample.csv"));
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    // Line 50 of the file (a GPU pod) cut after its eighth field.
    lines[49] = lines[49].split(',').take(8).collect::<Vec<_>>().join(",");
    // Line 120: num_gpu "one".
    let mut f: Vec<String> = lines[119].split(',').map(str::to_string).collect();
    f[3] = "one".into();
    lines[119] = f.join(",");
    // Line 200: deleted before it was created (never scheduled).
    let mut f: Vec<String> = lines[199].split(',').map(str::to_string).collect();
    f[9] = "0".into();
    f[8] = "5".into();
    f[10] = String::new();
    lines[199] = f.join(",");
    lines.join("\n")
}

#[test]
fn bad_lines_name_the_file_the_line_and_the_field() {
    let text = damaged();
    let e = openb_pods("pods.csv", text.as_bytes(), false).err().map(|e| e.to_string());
    assert_eq!(
        e.as_deref(),
        Some("pods.csv:50: field creation_time: missing: the line has 8 of 11 fields (cut short?)")
    );
    let p = openb_pods("pods.csv", text.as_bytes(), true).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((p.rows, p.skipped), (300, 3));
    assert_eq!(p.jobs.len() as u64 + p.without_gpu, 297);
    let shown: Vec<String> = p.first_errors.iter().map(ToString::to_string).collect();
    assert_eq!(shown[1], "pods.csv:120: field num_gpu: \"one\" is not a count of GPUs");
    assert_eq!(shown[2], "pods.csv:200: field deletion_time: 0 before creation_time 5: times running backwards");
}

#[test]
fn a_huge_line_is_read_past_not_held() {
    let head = "submit,duration,gpus\n0,60,1\n";
    let huge = std::io::repeat(b'9').take(8 << 20);
    let tail = &b"\n60,2h,4\n"[..];
    let r = BufReader::new(head.as_bytes().chain(huge).chain(tail));
    let e = demand_csv("big.csv", BufReader::new(head.as_bytes().chain(std::io::repeat(b'9').take(8 << 20))), false)
        .err()
        .map(|e| e.to_string());
    assert_eq!(e.as_deref(), Some("big.csv:3: a line longer than 64 KiB"));
    let p = demand_csv("big.csv", r, true).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((p.jobs.len(), p.skipped, p.rows), (2, 1, 3));
    assert_eq!((p.jobs[1].submit, p.jobs[1].duration, p.jobs[1].gpus), (60, 7200, 4));
}

#[test]
fn a_trace_without_gpu_pods_says_so_with_its_counts() {
    let text = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
                a,1000,512,0,0,,LS,Running,0,10,0\nb,1000,512,0,0,,BE,Running,5,10,5\n";
    let mut p = openb_pods("cpu.csv", text.as_bytes(), false).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((p.jobs.len(), p.without_gpu), (0, 2));
    let e = tessera::simulate::prepare(&mut p.jobs, p.without_gpu).err().map(|e| e.to_string());
    assert_eq!(e.as_deref(), Some("the demand has no GPU jobs (2 ask for no GPU)"));
}

#[test]
fn sacct_output_becomes_the_demand_csv() {
    let script = root().join("scripts/sacct-to-demand");
    let input = fixture("slurm/sacct--parsable2.CONSTRUCTED.txt");
    let out = std::process::Command::new("sh").arg(&script).arg(&input).output().unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("left out 1 job(s) that never started"), "{stderr}");
    let p = demand_csv("sacct.csv", &out.stdout[..], false).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((p.rows, p.without_gpu, p.skipped), (6, 1, 0), "steps and the job that never started are gone");
    let got: Vec<(&str, i64, i64, u32, Class, i32)> =
        p.jobs.iter().map(|j| (&*j.name, j.submit, j.duration, j.gpus, j.class, j.priority)).collect();
    assert_eq!(
        got,
        vec![
            ("1001", 0, 7200, 2, Class::Training, 4294),
            ("1002", 600, 90000, 1, Class::Inference, 100),
            ("1004_1", 4500, 14400, 4, Class::Inference, 9000),
            ("1006", 9000, 310, 1, Class::Other, 0),
            ("1007", 10800, 1, 8, Class::Training, 77),
        ]
    );
    assert_eq!(p.start.map(|s| s.to_rfc3339()).as_deref(), Some("2026-03-02T08:00:00+00:00"));
}

#[test]
fn the_csv_example_of_the_docs_reads() {
    let doc = read(&root().join("docs/simulate.md"));
    let block = doc.split("```csv\n").nth(1).and_then(|b| b.split("```").next()).unwrap_or_default();
    let p = demand_csv("docs/simulate.md", block.as_bytes(), false).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((p.jobs.len(), p.skipped), (4, 0));
    let by: Vec<(&str, i64, u32, u32, Class)> =
        p.jobs.iter().map(|j| (&*j.name, j.submit, j.gpus, j.milli, j.class)).collect();
    assert_eq!(
        by,
        vec![
            ("llm-serve-1", 0, 1, 428, Class::Inference),
            ("embed-7", 300, 1, 250, Class::Inference),
            ("pretrain-a", 1800, 8, 1000, Class::Training),
            ("notebook-3", 4200, 1, 142, Class::Other),
        ]
    );
    assert_eq!(p.jobs[2].checkpoint_s, Some(1800));
    assert_eq!(p.jobs[3].mem_mib, 20 * 1024);
}

/// A recording of the simulated cluster, made here, read back as a demand and a fleet through
/// the reader the command uses: its workloads become jobs, the last frame's cards the fleet.
#[test]
fn a_recording_becomes_jobs_and_its_fleet() {
    use tessera::record::reader::{Player, Recording};
    use tessera::simulate::input::{jobs_from_recording, recording::fleet_from_recording};
    let dir = std::env::temp_dir().join(format!("tessera-simulate-inputs-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join("demo.tsrec");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["record", "--demo", "--speed", "600", "--every", "1s", "--for", "3s", "--out"])
        .arg(&file)
        .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
        .env("XDG_STATE_HOME", dir.join("state"))
        .output();
    assert!(out.as_ref().is_ok_and(|o| o.status.success()), "{out:?}");
    let rec = Recording::open(std::slice::from_ref(&file)).unwrap_or_else(|e| panic!("{e}"));
    let frames = rec.frames().len() as u64;
    let mut player = Player::new(rec);
    let (jobs, notes) = jobs_from_recording(&mut player);
    assert_eq!((notes.frames, notes.unreadable_frames), (frames, 0), "{notes:?}");
    assert!(!jobs.is_empty(), "{notes:?}");
    assert!(notes.start.is_some());
    assert!(jobs.iter().all(|j| j.duration >= 1 && j.gpus >= 1 && (1..=1000).contains(&j.milli) && j.submit >= 0));
    assert!(notes.cut_at_end > 0, "the demo's jobs still run at the end: {notes:?}");
    let fleet = fleet_from_recording(&mut player).unwrap_or_else(|e| panic!("{e}"));
    assert!(fleet.gpus() > 0 && !fleet.models.is_empty());
    // The command's notes on a recording speak of its frames and workloads, not of lines.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["simulate", "--policy", "exclusive", "--recording"])
        .arg(&file)
        .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
        .env("XDG_STATE_HOME", dir.join("state"))
        .output();
    let text = out.as_ref().map(|o| String::from_utf8_lossy(&o.stdout).to_string()).unwrap_or_default();
    assert!(out.as_ref().is_ok_and(|o| o.status.success()), "{out:?}");
    assert!(text.contains("frame") && text.contains("still running at the end"), "{text}");
    assert!(!text.to_lowercase().contains(" line"), "{text}");
    if text.contains("put in time order") {
        assert!(text.contains("submitted before one seen ahead of them"), "{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The trace's node list and the first nine nodes of one of its models alone: the capacity
/// answer on the whole list is never more GPUs than on that subset (the search scans each
/// node type on its own), on the sample here and on the whole trace's 128-core G3 nodes where
/// the shared reference folder has it.
fn no_more_than_on_nine_nodes_of(model: &str, pods: &Path, nodes: &Path, compress: f64) {
    use tessera::simulate::{Policy, Settings, fewest_gpus};
    let mut jobs = pods_of(pods, false).unwrap_or_else(|e| panic!("{e}")).jobs;
    jobs.sort_by_key(|j| j.submit);
    let t0 = jobs.first().map_or(0, |j| j.submit);
    for j in &mut jobs {
        j.submit = t0 + ((j.submit - t0) as f64 / compress) as i64;
    }
    let f = std::fs::File::open(nodes).unwrap_or_else(|e| panic!("{e}"));
    let fleet = openb_nodes(&nodes.display().to_string(), BufReader::new(f)).unwrap_or_else(|e| panic!("{e}"));
    let nine: Vec<usize> = (0..fleet.nodes.len())
        .filter(|&i| &*fleet.models[fleet.nodes[i].model as usize].name == model)
        .take(9)
        .collect();
    assert!(!nine.is_empty());
    let sub = fleet.subset(&nine);
    let s = Settings::default();
    for policy in [Policy::Exclusive, Policy::Mig, Policy::Share] {
        let whole = fewest_gpus(&jobs, &fleet, policy, &s, 600);
        let part = fewest_gpus(&jobs, &sub, policy, &s, 600);
        eprintln!("{policy:?}: the list {:?} GPUs, its first {model} nodes {:?}", whole.gpus, part.gpus);
        assert_eq!(part.grown, 1, "nine {model} nodes serve the demand");
        if let (Some(w), Some(p)) = (whole.gpus, part.gpus) {
            assert!(w <= p, "{policy:?}: the list {w} GPUs, its first {model} nodes {p}");
        }
        assert!(whole.gpus.is_some(), "{policy:?}: {whole:?}");
        assert!(whole.binding.is_some());
    }
}

#[test]
fn the_capacity_answer_is_no_larger_than_on_nine_nodes_of_one_model() {
    no_more_than_on_nine_nodes_of(
        "G2",
        &fixture("traces/openb_pod_list_sample.csv"),
        &fixture("traces/openb_node_list_sample.csv"),
        1.0,
    );
}
