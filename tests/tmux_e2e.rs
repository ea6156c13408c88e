//! End to end: the real binary in a detached tmux session, driven by keys like a person.
//! Needs tmux; without it the test prints SKIPPED and passes, unless
//! TESSERA_REQUIRE_SERVICES=1 (CI), where it fails.

use std::process::Command;

mod common;
use common::{Tmux, have};

#[test]
fn tmux_console_end_to_end() {
    if !have("tmux") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("tessera-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let conf = dir.join("tmux.conf");
    std::fs::write(&conf, "set -g remain-on-exit on\nset -g default-terminal tmux-256color\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let t = Tmux { socket: format!("tessera-e2e-{}", std::process::id()) };
    // The shell records the exit status: tmux 3.3 does not report it for dead panes.
    let status = dir.join("status");
    let cmd = format!(
        "env XDG_CONFIG_HOME={} {} --demo --refresh 200ms; echo $? > {}",
        dir.display(),
        env!("CARGO_BIN_EXE_tessera"),
        status.display()
    );
    let conf = conf.to_string_lossy().into_owned();
    let out = t.run(&["-f", &conf, "new-session", "-d", "-s", "e2e", "-x", "120", "-y", "40", &cmd]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let first =
        t.wait("the first frame", |s| s.contains("SIMULATED") && s.contains("gpu-a100-01") && s.contains("MIG LAYOUT"));
    assert!(first.contains("MIG LAYOUT"), "{first}");
    assert_eq!(t.display("#{alternate_on}"), "1", "the console uses the alternate screen");

    t.keys(&["2"]);
    t.wait("the queue view", |s| s.contains("demand against free capacity"));
    t.keys(&["3"]);
    t.wait("the workloads view", |s| s.contains("PREEMPT"));
    // The Advice view: the findings, and the simulated next 24 hours beside them.
    t.keys(&["5"]);
    t.wait("the advice view's projection", |s| s.contains("SEV ") && s.contains("simulated 24h: p90 wait"));
    t.keys(&["1"]);
    t.wait("the fleet view", |s| s.contains("MIG LAYOUT"));
    t.keys(&["Enter"]);
    t.wait("the card view", |s| s.contains("recent events") && s.contains("card gpu-a100-01/0"));
    t.keys(&["Escape"]);
    t.wait("back to the fleet", |s| s.contains("MIG LAYOUT"));
    t.keys(&["?"]);
    t.wait("help", |s| s.contains("Esc or ? closes this help"));
    t.keys(&["Escape"]);
    t.wait("help closed", |s| !s.contains("Esc or ? closes this help"));
    t.keys(&["/", "h", "2", "0", "0", "Enter"]);
    let filtered = t.wait("the filter", |s| s.contains("filter: h200"));
    assert!(!filtered.contains("gpu-a100-01"), "{filtered}");
    t.keys(&["Escape"]);
    t.wait("the filter cleared", |s| s.contains("gpu-a100-01"));

    t.run(&["resize-window", "-t", "e2e", "-x", "80", "-y", "24"]);
    let small = t.wait("the 80x24 layout", |s| {
        let lines: Vec<&str> = s.lines().collect();
        lines.len() == 24 && lines.iter().any(|l| l.contains("MIG LAYOUT")) && s.contains("? help")
    });
    assert!(small.lines().all(|l| l.chars().count() <= 80), "{small}");

    t.keys(&["q"]);
    t.wait("the process to end", |_| t.display("#{pane_dead}") == "1");
    let code = std::fs::read_to_string(&status).unwrap_or_default();
    assert_eq!(code.trim(), "0", "exit status");
    assert_eq!(t.display("#{alternate_on}"), "0", "the alternate screen was left");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn signals_restore_the_terminal() {
    if !have("tmux") {
        return;
    }
    // SIGQUIT used to end it with the alternate screen still on.
    for (i, signal) in ["TERM", "HUP", "QUIT"].iter().enumerate() {
        let dir = std::env::temp_dir().join(format!("tessera-sig-{}-{i}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let conf = dir.join("tmux.conf");
        std::fs::write(&conf, "set -g remain-on-exit on\n").unwrap_or_else(|e| panic!("{e}"));
        let t = Tmux { socket: format!("tessera-sig-{}-{i}", std::process::id()) };
        let cmd = format!("exec env XDG_CONFIG_HOME={} {} --demo", dir.display(), env!("CARGO_BIN_EXE_tessera"));
        let conf = conf.to_string_lossy().into_owned();
        t.run(&["-f", &conf, "new-session", "-d", "-s", "e2e", "-x", "100", "-y", "30", &cmd]);
        t.wait("the first frame", |s| s.contains("SIMULATED"));
        let pid = t.display("#{pane_pid}");
        let killed = Command::new("kill").args([&format!("-{signal}"), &pid]).status();
        assert!(killed.is_ok_and(|s| s.success()), "kill -{signal} {pid}");
        t.wait("the process to end", |_| t.display("#{pane_dead}") == "1");
        assert_eq!(t.display("#{alternate_on}"), "0", "SIG{signal} left the alternate screen");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Ctrl-Z (and SIGTSTP) give the terminal back and stop the process, like htop; `fg` takes
/// the terminal again and redraws. (They used to leave the alternate screen half-restored.)
/// Under an interactive shell, as a person runs it: tmux itself continues a stopped pane
/// process, so tessera is the shell's job here.
#[test]
fn ctrl_z_suspends_and_fg_redraws() {
    if !have("tmux") || !common::have_with("bash", "--version") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("tessera-tstp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let t = Tmux { socket: format!("tessera-tstp-{}", std::process::id()) };
    let shell = "env -i PATH=/usr/bin:/bin TERM=tmux-256color PS1='$ ' bash --norc --noprofile -i";
    t.run(&["-f", "/dev/null", "new-session", "-d", "-s", "e2e", "-x", "100", "-y", "30", shell]);
    t.wait("the shell", |s| s.starts_with("$"));
    let pidfile = dir.join("pid");
    let cmd = format!(
        "XDG_CONFIG_HOME={} {} --demo & echo $! > {}; fg",
        dir.display(),
        env!("CARGO_BIN_EXE_tessera"),
        pidfile.display()
    );
    t.keys(&[&cmd, "Enter"]);
    t.wait("the first frame", |s| s.contains("SIMULATED") && s.contains("MIG LAYOUT"));
    let pid = std::fs::read_to_string(&pidfile).unwrap_or_default().trim().to_string();
    let state = || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.rsplit(") ").next().and_then(|s| s.chars().next())
    };
    for how in ["key", "signal"] {
        if how == "key" {
            t.keys(&["C-z"]);
        } else {
            let sent = Command::new("kill").args(["-TSTP", &pid]).status();
            assert!(sent.is_ok_and(|s| s.success()));
        }
        t.wait("the process stopped", |_| state() == Some('T'));
        t.wait("the shell's prompt", |s| s.contains("Stopped"));
        assert_eq!(t.display("#{alternate_on}"), "0", "{how}: the main screen is back while stopped");
        assert_eq!(t.display("#{cursor_flag}"), "1", "{how}: the cursor is shown while stopped (it stayed hidden)");
        t.keys(&["clear; fg", "Enter"]);
        t.wait("the console again", |s| s.contains("SIMULATED") && s.contains("MIG LAYOUT"));
        assert_eq!(t.display("#{alternate_on}"), "1", "{how}: the alternate screen again");
        assert_ne!(state(), Some('T'));
    }
    t.keys(&["q"]);
    t.wait("the shell again", |_| state().is_none() || state() == Some('Z'));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tessera --nvml=<fake>` shows the scenario's cards and MIG layout exactly.
#[test]
fn console_over_fake_nvml_shows_the_layout() {
    if !have("tmux") {
        return;
    }
    let lib = common::fake_lib();
    let dir = std::env::temp_dir().join(format!("tessera-nvml-tmux-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let t = Tmux { socket: format!("tessera-nvml-{}", std::process::id()) };
    let cmd = format!(
        "exec env XDG_CONFIG_HOME={} FAKE_NVML_SCENARIO={} {} --nvml={}",
        dir.display(),
        common::scenario("h200-7x1g.json").display(),
        env!("CARGO_BIN_EXE_tessera"),
        lib.display()
    );
    t.run(&["-f", "/dev/null", "new-session", "-d", "-s", "e2e", "-x", "160", "-y", "30", &cmd]);
    let bar = |s: &str| s.lines().any(|l| l.contains("H200-141GB") && l.matches("▏1g").count() == 7);
    let screen = t.wait("the NVML card", |s| s.contains("nvml: live") && bar(s));
    assert!(!screen.contains("SIMULATED"), "{screen}");
    let row = screen.lines().find(|l| l.contains("H200-141GB") && l.contains("▏")).unwrap_or_default().to_string();
    assert_eq!(row.matches("▏1g").count(), 7, "seven 1g.18gb instances: {row}");
    assert!(row.contains('╳'), "slice 7 is stranded: {row}");
    assert!(row.contains("N/A") || row.contains('%'), "{row}");
    t.keys(&["Enter"]);
    // Wait for the whole card view: a capture can land while the frame is still being written.
    let rows = |s: &str| (0..7).all(|start| s.contains(&format!("1g.18gb    @{start} ")));
    let card = t.wait("the card view with all seven instances", rows);
    assert!(card.contains("PROFILE") && card.contains("PLACE"), "{card}");
    t.keys(&["q"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A night in short: `tessera record` the simulated cluster at 600× while a drain runs from
/// the CLI (audited, so recorded); then `tessera replay` it like a person at 3 a.m. would:
/// the REPLAY header, the timeline's action, pause, a jump, every view, quit.
#[test]
fn record_then_replay_end_to_end() {
    if !have("tmux") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("tessera-replay-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let file = dir.join("night.tsrec");
    let bin = env!("CARGO_BIN_EXE_tessera");
    let env = |c: &mut Command| {
        c.env("XDG_CONFIG_HOME", &dir).env("XDG_STATE_HOME", &dir);
    };
    let mut rec = Command::new(bin);
    rec.args(["--demo", "--speed", "600", "--refresh", "200ms", "record", "--for", "5s", "--out"]).arg(&file);
    env(&mut rec);
    let rec = rec.stderr(std::process::Stdio::piped()).spawn().unwrap_or_else(|e| panic!("{e}"));
    std::thread::sleep(std::time::Duration::from_secs(2));
    let mut drain = Command::new(bin);
    drain.args(["--demo", "drain", "gpu-a100-01/6", "--yes"]);
    env(&mut drain);
    let d = drain.output().unwrap_or_else(|e| panic!("{e}"));
    assert!(d.status.success(), "{}", String::from_utf8_lossy(&d.stderr));
    let out = rec.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.contains("recorded") && said.contains("2 actions"), "{said}");

    let conf = dir.join("tmux.conf");
    std::fs::write(&conf, "set -g remain-on-exit on\nset -g default-terminal tmux-256color\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let t = Tmux { socket: format!("tessera-replay-{}", std::process::id()) };
    let status = dir.join("status");
    let cmd = format!(
        "env XDG_CONFIG_HOME={} {bin} replay {} --speed 0.25; echo $? > {}",
        dir.display(),
        file.display(),
        status.display()
    );
    let conf = conf.to_string_lossy().into_owned();
    let out = t.run(&["-f", &conf, "new-session", "-d", "-s", "e2e", "-x", "160", "-y", "40", &cmd]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let first = t.wait("the replay", |s| s.contains("REPLAY") && s.contains("MIG LAYOUT"));
    assert!(first.contains("▶ 0.25×") && first.contains("SIMULATED"), "{first}");
    // The drain is on the timeline; no action key exists.
    assert!(first.lines().nth(2).is_some_and(|l| l.contains('A')), "{first}");
    assert!(!first.contains("d drain"), "{first}");
    t.keys(&["Space"]);
    t.wait("paused", |s| s.contains("⏸"));
    t.keys(&["]", "]"]);
    t.wait("faster", |s| s.contains("⏸ 1×"));
    // To the end: the last action is the drain's outcome.
    t.keys(&["g", "-", "0", "s", "Enter"]);
    let end = t.wait("the end", |s| s.contains("last action") && s.contains("outcome drain gpu-a100-01/6"));
    assert!(end.contains("at 20") || end.contains("last action"), "{end}");
    for (key, what) in [("2", "demand against free capacity"), ("3", "PREEMPT"), ("4", "LAST OK"), ("5", "advice")] {
        t.keys(&[key]);
        t.wait(what, |s| s.contains(what));
    }
    t.keys(&["1", "Left"]);
    t.wait("a step back", |s| s.contains("MIG LAYOUT") && s.contains("⏸"));
    t.keys(&["d"]);
    t.wait("read-only said", |s| s.contains("read-only"));
    t.keys(&["q"]);
    t.wait("the process to end", |_| t.display("#{pane_dead}") == "1");
    assert_eq!(std::fs::read_to_string(&status).unwrap_or_default().trim(), "0");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 49: the demo's DynamicMIG node in the console: its cards say DRA, the card view says
/// who allocates it and what its counters can still place, the queue explains the waiting
/// claim, and a repartition there is refused.
#[test]
fn the_dra_node_in_the_console() {
    if !have("tmux") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("tessera-e2e-dra-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let conf = dir.join("tmux.conf");
    std::fs::write(&conf, "set -g remain-on-exit on\nset -g default-terminal tmux-256color\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let t = Tmux { socket: format!("tessera-e2e-dra-{}", std::process::id()) };
    let cmd = format!("env XDG_CONFIG_HOME={} {} --demo --refresh 200ms", dir.display(), env!("CARGO_BIN_EXE_tessera"));
    let conf = conf.to_string_lossy().into_owned();
    let out = t.run(&["-f", &conf, "new-session", "-d", "-s", "e2e", "-x", "160", "-y", "48", &cmd]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    t.wait("the first frame", |s| s.contains("SIMULATED") && s.contains("MIG LAYOUT"));
    let fleet = t.wait("the DRA node", |s| s.contains("gpu-h100-dra-01"));
    assert!(fleet.contains("gpu-h100-dra-01"), "{fleet}");
    t.keys(&[":", "n", "o", "d", "e", " ", "g", "p", "u", "-", "h", "1", "0", "0", "-", "d", "r", "a", "Enter"]);
    t.keys(&["Enter"]);
    let card = t.wait("the DRA card view", |s| s.contains("card gpu-h100-dra-01/") && s.contains("allocated by DRA"));
    assert!(card.contains("DynamicMIG, counter set gpu-"), "{card}");
    assert!(card.contains("can still place"), "{card}");
    t.keys(&["Escape"]);
    t.keys(&["2"]);
    let queue = t.wait("the waiting claim", |s| s.contains("pretrain-8gpu-0"));
    assert!(queue.contains("wants 8 whole H100 on one node"), "{queue}");
    t.keys(&["q"]);
    t.wait("the process to end", |_| t.display("#{pane_dead}") == "1");
    let _ = std::fs::remove_dir_all(&dir);
}
