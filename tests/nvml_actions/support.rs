//! Helpers of the NVML executor tests: scenarios derived from fixtures, child processes,
//! one collection through the store, planning and executing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use chrono::Utc;
use serde_json::Value;
use tessera::actions::execute::execute;
use tessera::actions::plan::plan;
use tessera::actions::{Action, Env, Options, Outcome, Plan};
use tessera::model::{ComputeMode, Fleet, SourceKind};
use tessera::sources::SourceUpdate;
use tessera::sources::nvml::{Collector, hostname};
use tessera::store::Store;

use super::common::{fake_lib, scenario};

/// A fresh directory of this test's own.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tessera-nvml-actions-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

/// A scenario file made from a fixture with `edit` applied.
pub fn derived(dir: &Path, fixture: &str, name: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let text = std::fs::read_to_string(scenario(fixture)).unwrap_or_else(|e| panic!("{fixture}: {e}"));
    let mut v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{fixture}: {e}"));
    edit(&mut v);
    let path = dir.join(name);
    std::fs::write(&path, v.to_string()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path
}

/// Runs the in-process test `name` in a child process whose fake NVML loads `scenario_file`.
pub fn in_child(name: &str, scenario_file: &Path) {
    let out = Command::new(std::env::current_exe().unwrap_or_else(|e| panic!("{e}")))
        .args(["--exact", name, "--nocapture", "--test-threads", "1"])
        .env("FAKE_NVML_SCENARIO", scenario_file)
        .env("FAKE_NVML_LIB", fake_lib())
        .env("TESSERA_NVML_CHILD", "1")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("1 passed"), "{name}:\n{text}");
}

/// The library path in a child; `None` in the parent run (the test then does nothing).
pub fn child_lib() -> Option<String> {
    std::env::var_os("TESSERA_NVML_CHILD")?;
    Some(fake_lib().to_string_lossy().into_owned())
}

/// One collection of the NVML source through the store, as the CLI plans from.
pub fn fleet(nvml: &nvml_wrapper::Nvml) -> Fleet {
    let partial = Collector::new(nvml).collect().unwrap_or_else(|e| panic!("{e:?}"));
    let mut store = Store::new();
    store.register("nvml", SourceKind::Nvml, Duration::from_secs(2));
    let update = SourceUpdate { source: "nvml".into(), kind: SourceKind::Nvml, at: Utc::now(), result: Ok(partial) };
    store.apply(update, Utc::now());
    store.fleet().clone()
}

pub fn layout(f: &Fleet, index: u32) -> Vec<(String, u8, u8, usize)> {
    let card = f.nodes[0].cards.iter().find(|c| c.index == index).unwrap_or_else(|| panic!("no card {index}"));
    card.mig.instances.iter().map(|i| (i.profile.clone(), i.start, i.size, i.compute_instances.len())).collect()
}

pub fn mode(f: &Fleet, index: u32) -> Option<ComputeMode> {
    f.nodes[0].cards.iter().find(|c| c.index == index).and_then(|c| c.compute_mode)
}

pub fn options(previous_mode: Option<ComputeMode>) -> Options {
    let mut o = Options::new(&tessera::config::Config::default(), false, Utc::now());
    o.previous_mode = previous_mode;
    o
}

pub fn make_plan(f: &Fleet, action: Action) -> Plan {
    plan(&action, f, &options(None)).unwrap_or_else(|e| panic!("{e}"))
}

pub fn repartition(index: u32, layout: &str) -> Action {
    Action::Repartition { target: format!("{}/{index}", hostname()), layout: layout.into() }
}

pub fn run(p: &Plan, lib: &str, read_only: bool) -> Outcome {
    let env = Env { read_only, nvml_lib: Some(lib.to_string()), ..Env::default() };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(execute(p, &env, None))
}

pub fn statuses(o: &Outcome) -> Vec<&str> {
    o.steps.iter().map(|s| s.status).collect()
}

pub fn messages(o: &Outcome) -> Vec<String> {
    o.steps.iter().map(|s| s.message.clone().unwrap_or_default()).collect()
}

pub fn tessera(args: &[&str], scenario_file: &Path, state: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .arg(format!("--nvml={}", fake_lib().display()))
        .env("FAKE_NVML_SCENARIO", scenario_file)
        .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
        .env("XDG_STATE_HOME", state)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

pub fn audit_records(state: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(state.join("tessera/audit.jsonl")).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}
