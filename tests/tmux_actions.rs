//! End to end: actions in the real console on the simulated cluster, driven through tmux:
//! drain after a confirmation, a cancelled repartition, a refused preemption, the audit log;
//! a schedule change from its banner, confirmed once for the group; and no action keys at all
//! in read-only mode.

mod common;
use common::{Tmux, have};

fn session(name: &str, args: &str) -> (Tmux, std::path::PathBuf) {
    session_with(name, args, None)
}

/// A console on the simulated cluster with `config` as its config file, if any.
fn session_with(name: &str, args: &str, config: Option<&str>) -> (Tmux, std::path::PathBuf) {
    session_sized(name, args, config, 40)
}

/// `session_with` on a terminal of `rows` lines (140 columns).
fn session_sized(name: &str, args: &str, config: Option<&str>, rows: u16) -> (Tmux, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("tessera-act-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("tessera")).unwrap_or_else(|e| panic!("{e}"));
    if let Some(text) = config {
        std::fs::write(dir.join("tessera/config.toml"), text).unwrap_or_else(|e| panic!("{e}"));
    }
    let t = Tmux { socket: format!("tessera-act-{name}-{}", std::process::id()) };
    let cmd = format!(
        "exec env XDG_CONFIG_HOME={d} XDG_STATE_HOME={d}/state {bin} --demo --refresh 200ms {args}",
        d = dir.display(),
        bin = env!("CARGO_BIN_EXE_tessera"),
    );
    let rows = rows.to_string();
    t.run(&["-f", "/dev/null", "new-session", "-d", "-s", "e2e", "-x", "140", "-y", &rows, &cmd]);
    t.wait("the first frame", |s| s.contains("SIMULATED") && s.contains("gpu-a100-01"));
    (t, dir)
}

#[test]
fn drain_confirm_cancel_and_refuse_in_the_console() {
    if !have("tmux") {
        return;
    }
    let (t, dir) = session("rw", "");
    t.keys(&["d"]);
    let confirm = t.wait("the drain confirmation", |s| s.contains("y to confirm, n or Esc"));
    assert!(confirm.contains("Drain gpu-a100-01/0"), "{confirm}");
    t.keys(&["y"]);
    t.wait("the drain done", |s| s.contains("done: every step done"));
    t.keys(&["Enter"]);
    t.wait("the result in the footer", |s| s.contains("drain gpu-a100-01/0: done"));
    t.wait("the card marked draining", |s| s.lines().any(|l| l.starts_with("0 ") && l.contains("DRAINING")));

    t.keys(&["r"]);
    t.wait("the repartition picker", |s| s.contains("repartition") && s.contains("fits"));
    t.keys(&["Escape"]);
    t.wait("the picker cancelled", |s| s.contains("repartition cancelled: nothing done"));

    t.keys(&["3", "p"]);
    // Wait for the whole dialog: a capture can catch a frame half drawn.
    let refused = t.wait("a refusal", |s| s.contains("refused") && s.contains("Esc closes"));
    assert!(refused.contains("Esc closes"), "{refused}");
    t.keys(&["y", "Enter", "Escape"]);
    t.wait("the refusal closed", |s| s.contains("refused: nothing done"));

    let audit = std::fs::read_to_string(dir.join("state/tessera/audit.jsonl")).unwrap_or_default();
    let kinds: Vec<String> = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["record"].as_str().map(str::to_string))
        .collect();
    assert_eq!(kinds, ["intent", "outcome", "refused"], "{audit}");
    t.keys(&["q"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A dropped SSH session during a preemption (tmux kill-session closes the terminal): the
/// action runs to its end headless (checkpoint, wait, requeue), its outcome is audited, and
/// only then tessera leaves. (It used to exit on the failed draw with the intent alone.)
#[test]
fn a_lost_terminal_lets_the_running_action_finish_and_be_audited() {
    if !have("tmux") {
        return;
    }
    // At 15x the 45 s checkpoint takes 3 s: the terminal goes in the middle of it.
    let (t, dir) = session("lost", "--speed 15");
    t.keys(&["3", "/", "p", "r", "e", "t", "r", "a", "i", "n", "-", "7", "b", "Enter"]);
    t.wait("the filtered workload", |s| s.contains("ads/pretrain-7b-21") && s.contains("filter: pretrain-7b"));
    t.keys(&["p"]);
    t.wait("the typed-name prompt", |s| s.contains("type sim:21 and Enter to confirm"));
    t.keys(&["s", "i", "m", ":", "2", "1", "Enter"]);
    t.wait("the checkpoint under way", |s| s.contains("Wait 45 s for the checkpoint") && s.contains("ok Ask the job"));
    let pid = t.display("#{pane_pid}");
    t.run(&["kill-session", "-t", "e2e"]);
    let audit = dir.join("state/tessera/audit.jsonl");
    let records = || -> Vec<serde_json::Value> {
        std::fs::read_to_string(&audit)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    let alive = || std::process::Command::new("kill").args(["-0", &pid]).status().is_ok_and(|s| s.success());
    let start = std::time::Instant::now();
    while alive() && start.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(!alive(), "tessera leaves once the action ended");
    let kinds: Vec<String> = records().iter().filter_map(|v| v["record"].as_str().map(str::to_string)).collect();
    assert_eq!(kinds, ["intent", "outcome"], "{:?}", records());
    let outcome = &records()[1];
    assert_eq!(outcome["result"]["ok"], true, "{outcome}");
    let steps: Vec<&str> =
        outcome["result"]["steps"].as_array().into_iter().flatten().filter_map(|s| s["status"].as_str()).collect();
    assert_eq!(steps, ["done", "done", "done"], "checkpointed, waited, requeued: {outcome}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn read_only_console_has_no_action_keys() {
    if !have("tmux") {
        return;
    }
    let (t, dir) = session("ro", "--read-only");
    let s = t.screen();
    assert!(!s.contains("d drain"), "{s}");
    t.keys(&["d", "r"]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let s = t.screen();
    assert!(!s.contains("confirm") && !s.contains("fits"), "{s}");
    assert!(!dir.join("state/tessera/audit.jsonl").exists());
    t.keys(&["q"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Leaving at once (a second Ctrl-C) while a preemption checkpoints: the terminal is given
/// back, stderr says which steps ran and which did not, and the exit status is not 0. (It
/// exited 0 to a blank terminal.)
#[test]
fn leaving_during_an_action_says_what_was_left_half_done() {
    if !have("tmux") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("tessera-act-leave-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let (err, status) = (dir.join("stderr"), dir.join("status"));
    let t = Tmux { socket: format!("tessera-act-leave-{}", std::process::id()) };
    let cmd = format!(
        "env XDG_CONFIG_HOME={d} XDG_STATE_HOME={d}/state {bin} --demo --refresh 200ms 2> {e}; echo $? > {s}; sleep 30",
        d = dir.display(),
        bin = env!("CARGO_BIN_EXE_tessera"),
        e = err.display(),
        s = status.display(),
    );
    t.run(&["-f", "/dev/null", "new-session", "-d", "-s", "e2e", "-x", "140", "-y", "40", &cmd]);
    t.wait("the first frame", |s| s.contains("SIMULATED") && s.contains("gpu-a100-01"));
    t.keys(&["3", "/", "p", "r", "e", "t", "r", "a", "i", "n", "-", "7", "b", "Enter"]);
    t.wait("the filtered workload", |s| s.contains("ads/pretrain-7b-21"));
    t.keys(&["p"]);
    t.wait("the typed-name prompt", |s| s.contains("type sim:21 and Enter to confirm"));
    t.keys(&["s", "i", "m", ":", "2", "1", "Enter"]);
    t.wait("the checkpoint under way", |s| s.contains("Wait 45 s for the checkpoint") && s.contains("ok Ask the job"));
    t.keys(&["C-c"]);
    t.wait("the first Ctrl-C waits", |s| s.contains("again to leave now"));
    t.keys(&["C-c"]);
    t.wait("the exit status", |_| std::fs::read_to_string(&status).is_ok_and(|s| !s.trim().is_empty()));
    let code = std::fs::read_to_string(&status).unwrap_or_default();
    let said = std::fs::read_to_string(&err).unwrap_or_default();
    assert_eq!(code.trim(), "1", "{said}");
    assert!(said.contains("left at once while preempting sim:21"), "{said}");
    assert!(said.contains("done: Ask the job") && said.contains("not run: Requeue"), "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The command line asks y/N on a terminal: `n` does nothing (exit 1), `y` runs the plan.
#[test]
fn command_line_asks_on_the_terminal() {
    if !have("tmux") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("tessera-act-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    for (answer, code, said) in [("n", "1", "not confirmed: nothing done"), ("y", "0", "done: every step done")] {
        let t = Tmux { socket: format!("tessera-act-cli-{answer}-{}", std::process::id()) };
        let status = dir.join(format!("status-{answer}"));
        let cmd = format!(
            "env XDG_CONFIG_HOME={d} XDG_STATE_HOME={d}/state {bin} drain gpu-a100-01/0 --demo; echo $? > {s}; sleep 30",
            d = dir.display(),
            bin = env!("CARGO_BIN_EXE_tessera"),
            s = status.display(),
        );
        t.run(&["-f", "/dev/null", "new-session", "-d", "-s", "e2e", "-x", "120", "-y", "30", &cmd]);
        t.wait("the question", |s| s.contains("drain gpu-a100-01/0? [y/N]"));
        t.keys(&[answer, "Enter"]);
        t.wait("the answer's effect", |s| s.contains(said));
        t.wait("the exit status", |_| std::fs::read_to_string(&status).is_ok_and(|s| s.trim() == code));
    }
    let audit = std::fs::read_to_string(dir.join("state/tessera/audit.jsonl")).unwrap_or_default();
    assert_eq!(audit.lines().count(), 2, "only the confirmed drain is audited: {audit}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A schedule whose one window always holds: its change is due whatever the time of day.
const ALWAYS: &str = r#"
[[schedule]]
name = "all-day"
nodes = ["gpu-h100-*"]
model = "H100-80GB"
[[schedule.window]]
name = "always"
hours = "00:00-24:00"
mig_config = "all-1g.10gb"
"#;

/// The banner shows the due change; `m` opens the group plan; typing the schedule's name runs
/// it card by card through the runner; the dialog ends with the summary, the audit log has an
/// intent and an outcome per card, and busy cards are left alone.
#[test]
fn a_schedule_change_from_the_banner_confirmed_once_for_the_group() {
    if !have("tmux") {
        return;
    }
    let (t, dir) = session_with("schedule", "--speed 20", Some(ALWAYS));
    let banner = t.wait("the banner", |s| s.contains("schedule all-day: window always due now on"));
    assert!(banner.contains("m reviews the plan"), "{banner}");
    t.keys(&["m"]);
    let plan = t.wait("the group plan", |s| s.contains("type all-day and Enter"));
    assert!(plan.contains("repartition to 1g.10gb@0,1,2,3,4,5,6"), "{plan}");
    assert!(plan.contains("left for later"), "busy cards are listed, not changed: {plan}");
    // Anything but the name does nothing.
    t.keys(&["y", "Enter"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!dir.join("state/tessera/audit.jsonl").exists(), "nothing runs before the name is typed");
    t.keys(&["BSpace", "all-day", "Enter"]);
    let done = t.wait("the run's end", |s| s.contains("Enter or Esc closes (every action"));
    let line = done.lines().find(|l| l.contains("cards changed")).unwrap_or_else(|| panic!("{done}"));
    let n = line.split(" cards changed").next().and_then(|h| h.split_whitespace().rev().nth(2)).unwrap_or("0");
    let n: usize = n.parse().unwrap_or_else(|_| panic!("{line}"));
    assert!(n > 0 && line.contains(&format!("{n} of {n} cards changed")), "{line}");
    t.keys(&["Enter"]);
    t.wait("the summary in the footer", |s| {
        s.contains(&format!("schedule all-day window always: {n} of {n} cards changed"))
    });
    let audit = std::fs::read_to_string(dir.join("state/tessera/audit.jsonl")).unwrap_or_default();
    let records: Vec<(String, String)> = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| {
            let action = v["plan"]["action"]["action"].as_str().or(v["action"]["action"].as_str()).unwrap_or("");
            (v["record"].as_str().unwrap_or("").to_string(), action.to_string())
        })
        .collect();
    let intents = records.iter().filter(|(r, a)| r == "intent" && a == "repartition").count();
    let outcomes = records.iter().filter(|(r, a)| r == "outcome" && a == "repartition").count();
    assert_eq!((intents, outcomes), (n, n), "{audit}");
    t.keys(&["q"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Under `running = "preempt"`: the plan names the training it would preempt and asks about it
/// on its own; the run drains, preempts, waits for the cards to empty on the simulator's clock
/// (here 600 times the wall clock: a wall-clock deadline would give up at once), changes them
/// and gives them back.
#[test]
fn a_preempting_schedule_change_asks_twice_and_empties_the_cards_first() {
    if !have("tmux") {
        return;
    }
    let config = ALWAYS.replace("model = \"H100-80GB\"", "model = \"H100-80GB\"\nrunning = \"preempt\"");
    // 18 lines: one H100 node is DynamicMIG since issue 49 (no schedule's), so the plan is
    // shorter; on a shorter terminal it is still longer than the dialog.
    let (t, dir) = session_sized("schedule-preempt", "--speed 600", Some(&config), 18);
    t.wait("the banner", |s| s.contains("schedule all-day: window always due now on"));
    t.keys(&["m"]);
    let plan = t.wait("the group plan", |s| s.contains("type all-day and Enter"));
    assert!(plan.contains("drain → preempt sim:"), "{plan}");
    // Longer than the dialog: the name is taken, but Enter does nothing until every line of
    // the plan has been on screen.
    assert!(plan.contains("(read to the end to confirm)"), "{plan}");
    t.keys(&["all-day", "Enter"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(t.screen().contains("Enter to run it on") && !t.screen().contains("listed (training"));
    t.keys(&["PageDown"]);
    t.wait("the end of the plan", |s| s.contains(" · the end") && !s.contains("(read to the end"));
    t.keys(&["Enter"]);
    // "the 1 workload listed": one H100 node to change since issue 49.
    t.wait("the preemption question", |s| s.contains("listed (training past the minimum runtime"));
    // The workloads to preempt are read too, down to the end.
    for _ in 0..10 {
        if !t.screen().contains("(read to the end to confirm)") {
            break;
        }
        t.keys(&["PageDown"]);
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let asked = t.wait("the end of the list", |s| s.contains(" · the end") || !s.contains("below: Down"));
    assert!(asked.contains("  preempt sim:"), "{asked}");
    t.keys(&["y"]);
    let done = t.wait("the run's end", |s| s.contains("Enter or Esc closes (every action"));
    assert!(!done.contains("did not empty in time"), "{done}");
    let line = done.lines().find(|l| l.contains("cards changed")).unwrap_or_else(|| panic!("{done}"));
    assert!(!line.contains("stopped at"), "{line}");
    t.keys(&["Enter"]);
    let audit = std::fs::read_to_string(dir.join("state/tessera/audit.jsonl")).unwrap_or_default();
    let intents: Vec<String> = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["record"] == "intent")
        .filter_map(|v| v["plan"]["action"]["action"].as_str().map(str::to_string))
        .collect();
    for verb in ["drain", "preempt", "repartition", "undrain"] {
        assert!(intents.iter().any(|a| a == verb), "no {verb} in {intents:?}");
    }
    let drains = intents.iter().filter(|a| *a == "drain").count();
    let undrains = intents.iter().filter(|a| *a == "undrain").count();
    assert_eq!(drains, undrains, "every drain given back: {intents:?}");
    t.keys(&["q"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// On the simulated cluster the console applies an unattended schedule itself: at 600 times
/// the wall clock, windows that switch every two hours change idle cards again and again,
/// drained ahead, nothing preempted, every action in the audit log, without a key pressed.
#[test]
fn the_simulated_cluster_obeys_an_unattended_schedule_at_speed_600() {
    if !have("tmux") {
        return;
    }
    let mut config = String::from(
        "[[schedule]]\nname = \"flip\"\nnodes = [\"gpu-h100-*\"]\nmodel = \"H100-80GB\"\nlead = \"10m\"\nmin_hold = \"1h\"\nunattended = true\n",
    );
    for (i, h) in (0..24).step_by(2).enumerate() {
        let layout = if i % 2 == 0 { "mig_config = \"all-1g.10gb\"" } else { "layout = \"whole\"" };
        config.push_str(&format!(
            "[[schedule.window]]\nname = \"w{h:02}\"\nhours = \"{h:02}:00-{:02}:00\"\n{layout}\n",
            (h + 2) % 24
        ));
    }
    let (t, dir) = session_with("unattended", "--speed 600", Some(&config));
    let audit = dir.join("state/tessera/audit.jsonl");
    let start = std::time::Instant::now();
    // Each card's repartitions, in order.
    let changes = |text: &str| {
        let mut per: std::collections::BTreeMap<String, Vec<String>> = std::collections::BTreeMap::new();
        for v in text.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()) {
            if v["record"] == "outcome" && v["action"]["action"] == "repartition" && v["result"]["ok"] == true {
                let card = v["action"]["target"].as_str().unwrap_or_default().to_string();
                per.entry(card).or_default().push(v["action"]["layout"].as_str().unwrap_or_default().to_string());
            }
        }
        per
    };
    let text = loop {
        let text = std::fs::read_to_string(&audit).unwrap_or_default();
        if changes(&text).values().any(|l| l.len() >= 2) {
            break text;
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(60), "no card changed twice:\n{text}\n{}", t.screen());
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let twice = changes(&text).into_iter().find(|(_, l)| l.len() >= 2).unwrap_or_default();
    assert_ne!(twice.1[0], twice.1[1], "a change, then the other window's: {twice:?}");
    let verbs: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["record"] == "intent")
        .filter_map(|v| v["plan"]["action"]["action"].as_str().map(str::to_string))
        .collect();
    assert!(verbs.iter().any(|v| v == "drain"), "drained ahead: {verbs:?}");
    assert!(!verbs.iter().any(|v| v == "preempt"), "unattended never preempts: {verbs:?}");
    let screen = t.screen();
    assert!(screen.contains("unattended"), "{screen}");
    t.keys(&["q"]);
    let _ = std::fs::remove_dir_all(&dir);
}
