//! End to end: actions in the real console on the simulated cluster, driven through tmux:
//! drain after a confirmation, a cancelled repartition, a refused preemption, the audit log;
//! and no action keys at all in read-only mode.

mod common;
use common::{Tmux, have};

fn session(name: &str, args: &str) -> (Tmux, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("tessera-act-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let t = Tmux { socket: format!("tessera-act-{name}-{}", std::process::id()) };
    let cmd = format!(
        "exec env XDG_CONFIG_HOME={d} XDG_STATE_HOME={d}/state {bin} --demo --refresh 200ms {args}",
        d = dir.display(),
        bin = env!("CARGO_BIN_EXE_tessera"),
    );
    t.run(&["-f", "/dev/null", "new-session", "-d", "-s", "e2e", "-x", "140", "-y", "40", &cmd]);
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
    let confirm = t.wait("the drain confirmation", |s| s.contains("y or Enter to confirm"));
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
