//! Hostile peers on 127.0.0.1, end to end through `tessera snapshot`: credentials go to their
//! own origin only, never over plain http unless allowed, and never come back in what tessera
//! prints, whatever a server echoes; flooding targets together stay within the sources' memory
//! budget; a source that never answers is said to have not answered.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::http::{Reply, Server};
use common::{peak_rss_kib, run_peak, snapshot, source};

fn fixture(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dcgm").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn config(name: &str, text: &str) -> (std::path::PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("tessera-hostile-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let cfg = dir.join("config.toml");
    std::fs::write(&cfg, text).unwrap_or_else(|e| panic!("{e}"));
    let path = cfg.to_string_lossy().into_owned();
    (dir, path)
}

fn metrics() -> HashMap<String, Reply> {
    HashMap::from([("/metrics".into(), Reply::ok(fixture("metrics-t4-nonmig.datadog-fixture.prom")))])
}

/// A token for one target goes to that target only; the Prometheus server's (`[sources.http]`)
/// goes to no scrape target; a refusal that quotes the token back is printed without it.
#[test]
fn credentials_go_to_their_own_origin_only_and_never_come_back() {
    let with = Server::start(metrics(), Some("tok-for-a"));
    let other = Server::start(metrics(), None);
    let (dir, cfg) = config(
        "origin",
        &format!(
            "[sources]\nscrape = [\"{a}\", \"{b}\"]\n[sources.http]\nbearer_token_env = \"PROM_TOKEN\"\nallow_plain_http = true\n\
             [[sources.auth]]\nurl = \"http://{host}\"\nbearer_token_env = \"A_TOKEN\"\nallow_plain_http = true\n",
            a = with.url("/metrics"),
            b = other.url("/metrics"),
            host = with.addr,
        ),
    );
    let env = [("A_TOKEN", "tok-for-a"), ("PROM_TOKEN", "prometheus-secret")];
    let (code, v, err) = snapshot(&["--config", &cfg], &env);
    assert_eq!(code, 0, "{err}");
    assert_eq!(source(&v, &format!("scrape:{}", with.addr))["state"], "live", "{v}");
    assert_eq!(source(&v, &format!("scrape:{}", other.addr))["state"], "live", "{v}");
    let sent = other.auths.lock().map(|a| a.clone()).unwrap_or_default();
    assert!(!sent.is_empty() && sent.iter().all(Option::is_none), "the other target got credentials: {sent:?}");
    assert!(err.contains("[sources.http] credentials are the Prometheus server's"), "{err}");

    // A wrong token: the server's 401 quotes it; tessera's output does not.
    let (_, v, err) = snapshot(&["--config", &cfg], &[("A_TOKEN", "wrong-token-123"), ("PROM_TOKEN", "x")]);
    let e = source(&v, &format!("scrape:{}", with.addr))["error"].as_str().unwrap_or_default().to_string();
    assert!(e.contains("HTTP 401: unauthorized: Bearer <redacted>"), "{e}");
    let all = format!("{v}{err}");
    assert!(!all.contains("wrong-token-123") && !all.contains("tok-for-a"), "credentials leaked: {all}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Credentials for a plain-http origin are refused at start unless the config allows it.
#[test]
fn credentials_over_plain_http_need_an_explicit_yes() {
    let server = Server::start(metrics(), Some("t0ken"));
    let (dir, cfg) = config(
        "plain",
        &format!(
            "[sources]\nscrape = [\"{}\"]\n[[sources.auth]]\nurl = \"{}\"\nbearer_token_env = \"A_TOKEN\"\n",
            server.url("/metrics"),
            server.url("")
        ),
    );
    let (code, _, err) = snapshot(&["--config", &cfg], &[("A_TOKEN", "t0ken")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("sources.auth[0]") && err.contains("plain http") && err.contains("allow_plain_http"), "{err}");
    assert!(!err.contains("t0ken"), "{err}");
    assert_eq!(server.requests.load(std::sync::atomic::Ordering::Relaxed), 0, "nothing was sent");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The URL shapes that leaked a token or named a target wrongly, through the binary: names,
/// errors and JSON carry no query and no user information.
#[test]
fn url_shapes_never_show_their_credentials() {
    let server = Server::start(metrics(), None);
    let port = server.addr.rsplit_once(':').map(|(_, p)| p.to_string()).unwrap_or_default();
    for (url, name) in [
        (format!("http://127.0.0.1:{port}?token=SECRETQ"), format!("scrape:127.0.0.1:{port}")),
        (format!("http://127.0.0.1:{port}/metrics#SECRETF"), format!("scrape:127.0.0.1:{port}")),
    ] {
        let (_, v, err) = snapshot(&["--scrape", &url], &[]);
        assert!(source(&v, &name).is_object(), "{url}: named {:?}", v["sources"]);
        let all = format!("{v}{err}");
        assert!(!all.contains("SECRET"), "{url}: {all}");
    }
    // Credentials in the URL are refused (the client would send them as basic auth, over
    // plain http too), without showing them.
    let (code, _, err) = snapshot(&["--scrape", &format!("http://user:SECRETP@127.0.0.1:{port}/metrics?a=b@c")], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("credentials in the URL") && !err.contains("SECRET"), "{err}");
    // A Prometheus base URL with a query: the API path goes before it, and nothing shows it.
    let prom = Server::start(HashMap::new(), None);
    let (_, v, err) = snapshot(&["--prometheus", &format!("http://{}?token=SECRETQ", prom.addr)], &[]);
    let e = source(&v, "prometheus")["error"].as_str().unwrap_or_default().to_string();
    assert!(e.contains(&format!("http://{}/api/v1/query", prom.addr)), "{e}");
    assert!(!format!("{v}{err}").contains("SECRET"), "{v}{err}");
}

/// Six targets that stream for ever: without a shared budget each could take its 256 MiB
/// (1.5 GiB together). With a 64 MiB budget the process stays near it and the errors say why.
#[test]
fn flooding_targets_together_stay_within_the_memory_budget() {
    let floods: Vec<Server> =
        (0..6).map(|_| Server::start(HashMap::from([("/metrics".into(), Reply::flood())]), None)).collect();
    let good = Server::start(metrics(), None);
    let mut scrape: Vec<String> = floods.iter().map(|s| format!("\"{}\"", s.url("/metrics"))).collect();
    scrape.push(format!("\"{}\"", good.url("/metrics")));
    let (dir, cfg) = config(
        "flood",
        &format!(
            "[sources]\nscrape = [{}]\nmemory_budget = \"64MiB\"\n[sources.http]\ntimeout = \"20s\"\n",
            scrape.join(", ")
        ),
    );
    let started = Instant::now();
    let (peak, v) = snapshot_peak(&cfg);
    eprintln!("six flooding targets, 64 MiB budget: peak RSS {} MiB in {:?}", peak / 1024, started.elapsed());
    assert!(peak < 200 * 1024, "peak RSS {} MiB with a 64 MiB budget", peak / 1024);
    let errors: Vec<String> = floods
        .iter()
        .map(|s| source(&v, &format!("scrape:{}", s.addr))["error"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(errors.iter().any(|e| e.contains("memory budget")), "{errors:?}");
    assert!(errors.iter().all(|e| !e.is_empty()), "every flood fails: {errors:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tessera snapshot --json --config cfg`: its peak RSS (KiB) and its JSON.
fn snapshot_peak(cfg: &str) -> (u64, Value) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tessera"));
    cmd.args(["snapshot", "--json", "--config", cfg]).env("XDG_CONFIG_HOME", "/nonexistent-tessera-test");
    let (peak, out) = run_peak(cmd);
    (peak, serde_json::from_slice(&out.stdout).unwrap_or(Value::Null))
}

/// 256 MB, the most the process may take under any flood with the default budget (KiB).
const FLOOD_CEILING_KIB: u64 = 256_000_000 / 1024;

/// Six flooding targets with the default budget: the memory taken is the budget's, not twice
/// it (buffers grew by doubling and only their length was held: 1.05 GB under 512 MiB).
#[test]
fn flooding_targets_under_the_default_budget_stay_under_256_mb() {
    let floods: Vec<Server> =
        (0..6).map(|_| Server::start(HashMap::from([("/metrics".into(), Reply::flood())]), None)).collect();
    let scrape: Vec<String> = floods.iter().map(|s| format!("\"{}\"", s.url("/metrics"))).collect();
    let (dir, cfg) = config(
        "flood-default",
        &format!("[sources]\nscrape = [{}]\n[sources.http]\ntimeout = \"20s\"\n", scrape.join(", ")),
    );
    let started = Instant::now();
    let (peak, v) = snapshot_peak(&cfg);
    eprintln!("six flooding targets, default budget: peak RSS {} MiB in {:?}", peak / 1024, started.elapsed());
    let errors: Vec<String> = floods
        .iter()
        .map(|s| source(&v, &format!("scrape:{}", s.addr))["error"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(errors.iter().all(|e| e.contains("memory budget")), "every flood stops at the budget: {errors:?}");
    assert!(peak < FLOOD_CEILING_KIB, "peak RSS {} MiB with the default budget", peak / 1024);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stand-in `squeue` printing for ever, with the default budget: stopped at the budget, and
/// the memory taken is that (534 MB before, for the 256 MiB output cap).
#[test]
fn a_flooding_squeue_under_the_default_budget_stays_under_256_mb() {
    // The directory first; the config naming it is written over the empty one below.
    let (dir, _) = config("squeue-flood", "");
    for (name, body) in
        [("squeue", "yes '{\"jobs\": [\"a line of output that never ends\"]}'"), ("sinfo", "echo '{\"nodes\": []}'")]
    {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap_or_else(|e| panic!("{e}"));
    }
    let (_, cfg) = config(
        "squeue-flood",
        &format!("[sources]\nslurm = true\n[slurm]\ncommands_dir = \"{}\"\ntimeout = \"60s\"\n", dir.display()),
    );
    let started = Instant::now();
    let (peak, v) = snapshot_peak(&cfg);
    eprintln!("a flooding squeue, default budget: peak RSS {} MiB in {:?}", peak / 1024, started.elapsed());
    let e = source(&v, "slurm")["error"].as_str().unwrap_or_default().to_string();
    assert!(e.starts_with("squeue --json: ") && e.contains("stopped"), "{v}");
    assert!(peak < FLOOD_CEILING_KIB, "peak RSS {} MiB with the default budget", peak / 1024);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A target that accepts and never answers (its timeout longer than the wait): after
/// `snapshot`'s 20 s it is "no answer within 20s", not "connecting" with no error.
#[test]
fn a_source_that_never_answers_is_said_to_have_not_answered() {
    let mut hang = Reply::ok("never");
    hang.delay = Duration::from_secs(120);
    let server = Server::start(HashMap::from([("/metrics".into(), hang)]), None);
    let (dir, cfg) = config(
        "hang",
        &format!("[sources]\nscrape = [\"{}\"]\n[sources.http]\ntimeout = \"1h\"\n", server.url("/metrics")),
    );
    let started = Instant::now();
    let (_, v, err) = snapshot(&["--config", &cfg], &[]);
    let s = source(&v, &format!("scrape:{}", server.addr));
    assert_eq!(s["state"], "unavailable", "{v} {err}");
    assert_eq!(s["error"], "no answer within 20s", "{s}");
    assert!(started.elapsed() < Duration::from_secs(40), "{:?}", started.elapsed());
    let _ = std::fs::remove_dir_all(&dir);
}

/// By hand: `cargo test --release --test hostile -- --ignored --nocapture measure_key_latency`.
/// The console in tmux with four scrape targets that never answer and two that flood, against
/// the same console with one good target: the time from a key to the screen that answers it
/// (tmux send-keys to capture-pane showing the new view), median and worst of 20.
#[test]
#[ignore]
fn measure_key_latency_with_hung_and_flooding_sources() {
    if !common::have("tmux") {
        return;
    }
    let good = Server::start(metrics(), None);
    let mut hang = Reply::ok("never");
    hang.delay = Duration::from_secs(600);
    let hung: Vec<Server> =
        (0..4).map(|_| Server::start(HashMap::from([("/metrics".into(), hang.clone())]), None)).collect();
    let floods: Vec<Server> =
        (0..2).map(|_| Server::start(HashMap::from([("/metrics".into(), Reply::flood())]), None)).collect();
    let mut bad: Vec<String> = hung.iter().chain(&floods).map(|s| format!("\"{}\"", s.url("/metrics"))).collect();
    bad.push(format!("\"{}\"", good.url("/metrics")));
    for (name, targets) in
        [("one good target", vec![format!("\"{}\"", good.url("/metrics"))]), ("4 hung + 2 flooding + 1 good", bad)]
    {
        let (dir, cfg) = config(
            "latency",
            &format!("[sources]\nscrape = [{}]\n[sources.http]\ntimeout = \"1h\"\n", targets.join(", ")),
        );
        let t = common::Tmux { socket: format!("tessera-latency-{}", std::process::id()) };
        let cmd = format!(
            "exec env XDG_CONFIG_HOME=/nonexistent {} --config {cfg} --refresh 1s",
            env!("CARGO_BIN_EXE_tessera")
        );
        t.run(&["-f", "/dev/null", "new-session", "-d", "-s", "e2e", "-x", "160", "-y", "40", &cmd]);
        t.wait("the first frame", |s| s.contains("Fleet"));
        std::thread::sleep(Duration::from_secs(3));
        let mut took = Vec::new();
        for i in 0..20 {
            let (key, want) = if i % 2 == 0 { ("4", "SOURCE") } else { ("1", "MIG LAYOUT") };
            let start = Instant::now();
            t.keys(&[key]);
            while !t.screen().contains(want) && start.elapsed() < Duration::from_secs(10) {}
            took.push(start.elapsed());
        }
        took.sort();
        eprintln!("{name}: key to screen median {:?}, worst {:?}", took[took.len() / 2], took[took.len() - 1]);
        t.keys(&["q"]);
        drop(t);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Files that are not files: a FIFO or a device given as the config or a token file is refused
/// at once by kind (it used to hang on the FIFO, and grow without bound on /dev/zero).
#[test]
fn a_fifo_or_a_device_as_config_or_token_is_refused_at_once() {
    let dir = std::env::temp_dir().join(format!("tessera-hostile-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let fifo = dir.join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success()));
    let token_cfg = dir.join("token.toml");
    let text = format!(
        "[sources]\nscrape = [\"https://127.0.0.1:9\"]\n[[sources.auth]]\nurl = \"https://127.0.0.1:9\"\nbearer_token_file = {:?}\n",
        fifo.display().to_string()
    );
    std::fs::write(&token_cfg, text).unwrap_or_else(|e| panic!("{e}"));
    let zero_token = dir.join("zero-token.toml");
    let text = "[sources]\nscrape = [\"https://127.0.0.1:9\"]\n[[sources.auth]]\nurl = \"https://127.0.0.1:9\"\nbearer_token_file = \"/dev/zero\"\n";
    std::fs::write(&zero_token, text).unwrap_or_else(|e| panic!("{e}"));
    let cases: [(Vec<String>, &str); 4] = [
        (vec!["check-config".into(), fifo.display().to_string()], "a FIFO is not a file tessera reads"),
        (vec!["check-config".into(), "/dev/zero".into()], "a character device is not a file tessera reads"),
        (
            vec!["snapshot".into(), "--config".into(), token_cfg.display().to_string()],
            "a FIFO is not a file tessera reads",
        ),
        (vec!["snapshot".into(), "--config".into(), zero_token.display().to_string()], "a character device"),
    ];
    for (args, want) in cases {
        let started = Instant::now();
        let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(&args)
            .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let code = loop {
            if let Ok(Some(s)) = child.try_wait() {
                break s.code();
            }
            if started.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                panic!("{args:?} still runs after 10 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap_or_else(|| panic!("stderr")), &mut err);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A secret in a configured URL's query never comes back: not in the Prometheus replay's
/// progress line, not from a server that echoes the request in its refusal (in the source's
/// error, stderr and `snapshot --json`).
#[test]
fn a_token_in_a_url_query_is_never_printed() {
    let echo = HashMap::from([(
        "/metrics?token=QSECRET-1234".to_string(),
        Reply::status(403, "text/plain", "forbidden: GET /metrics?token=QSECRET-1234 from 127.0.0.1\n"),
    )]);
    let server = Server::start(echo, None);
    let url = server.url("/metrics?token=QSECRET-1234");
    let (dir, cfg) =
        config("query-token", &format!("[sources]\nscrape = [\"{url}\"]\n[sources.http]\nallow_plain_http = true\n"));
    let (_, v, err) = snapshot(&["--config", &cfg], &[]);
    let e = source(&v, &format!("scrape:{}", server.addr))["error"].as_str().unwrap_or_default().to_string();
    assert!(e.contains("HTTP 403: forbidden: GET /metrics?token=<redacted>"), "{e}\n{v}");
    let all = format!("{v}{err}");
    assert!(!all.contains("QSECRET-1234"), "the query token leaked: {all}");
    // The replay needs a terminal: `script` gives it one (util-linux).
    if !common::have_with("script", "--version") {
        return;
    }
    let cmd = format!(
        "{} replay --prometheus 'http://127.0.0.1:9/?token=RSECRET-5678' --from -30m",
        env!("CARGO_BIN_EXE_tessera")
    );
    let out = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(printed.contains("rebuilding"), "{printed}");
    assert!(!printed.contains("RSECRET-5678"), "the replay printed the token: {printed}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A history answer of 300,000 series (empty values, 16 MB) for cards the server never said it
/// has: read through without keeping them, the source live with its one card. (Every series
/// became 120 points before any cap: 100,000 took 1.24 GB.)
#[test]
fn a_history_answer_of_many_series_stays_small_and_the_source_stays_live() {
    let vector = r#"{"status":"success","data":{"resultType":"vector","result":[
      {"metric":{"__name__":"DCGM_FI_DEV_GPU_TEMP","gpu":"0","UUID":"GPU-a","instance":"10.0.0.7:9400"},"value":[1700000000.1,"64"]}]}}"#;
    let mut bomb = String::from(r#"{"status":"success","data":{"resultType":"matrix","result":["#);
    for i in 0..300_000 {
        bomb.push_str(&format!(r#"{{"metric":{{"instance":"ghost-{i}:9400","gpu":"0"}},"values":[]}},"#));
    }
    bomb.push_str(r#"{"metric":{"instance":"10.0.0.7:9400","gpu":"0"},"values":[]}]}}"#);
    let server = Server::start(
        HashMap::from([
            ("/api/v1/query".into(), Reply::ok(vector)),
            ("/federate".into(), Reply::status(404, "text/plain", "404 page not found\n")),
            ("/api/v1/query_range".into(), Reply::ok(bomb)),
        ]),
        None,
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["snapshot", "--json", "--prometheus", &format!("http://{}", server.addr)])
        .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    let peak = peak_rss_kib(&mut child);
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    eprintln!("history of 300,000 series: peak RSS {} MiB in {:?}", peak / 1024, started.elapsed());
    assert_eq!(v["sources"][0]["state"], "live", "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(v["nodes"][0]["cards"][0]["temperature_c"], 64.0);
    assert!(peak < 300 * 1024, "peak RSS {} MiB", peak / 1024);
}

/// The history of one known card with 100,000 distinct `GPU_I_ID`s: a card has at most 7 MIG
/// instances, the rest are cut and said (1.2 GB before, decoding on after the wait gave up).
#[test]
fn a_history_of_one_card_with_many_instances_stays_small() {
    let vector = r#"{"status":"success","data":{"resultType":"vector","result":[
      {"metric":{"__name__":"DCGM_FI_DEV_GPU_TEMP","gpu":"0","UUID":"GPU-a","instance":"10.0.0.7:9400"},"value":[1700000000.1,"64"]}]}}"#;
    let mut bomb = String::from(r#"{"status":"success","data":{"resultType":"matrix","result":["#);
    for i in 0..100_000 {
        bomb.push_str(&format!(
            r#"{{"metric":{{"instance":"10.0.0.7:9400","gpu":"0","GPU_I_ID":"{i}"}},"values":[]}},"#
        ));
    }
    bomb.push_str(r#"{"metric":{"instance":"10.0.0.7:9400","gpu":"0"},"values":[]}]}}"#);
    let server = Server::start(
        HashMap::from([
            ("/api/v1/query".into(), Reply::ok(vector)),
            ("/federate".into(), Reply::status(404, "text/plain", "404 page not found\n")),
            ("/api/v1/query_range".into(), Reply::ok(bomb)),
        ]),
        None,
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["snapshot", "--json", "--prometheus", &format!("http://{}", server.addr)])
        .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    let peak = peak_rss_kib(&mut child);
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    eprintln!("history of one card, 100,000 instances: peak RSS {} MiB in {:?}", peak / 1024, started.elapsed());
    assert_eq!(v["sources"][0]["state"], "live", "{}", String::from_utf8_lossy(&out.stderr));
    // The cut is said; a loaded machine's debug build may pass the wait first (the decode
    // then stops): either way the memory stays small.
    let note = v["sources"][0]["note"].as_str().unwrap_or_default();
    assert!(note.contains("instances past 7 per card cut") || note.contains("history: no answer within"), "{v}");
    assert!(peak < 150 * 1024, "peak RSS {} MiB", peak / 1024);
}

/// One target with 100,000 cards (6.7 MB, under the body cap): the cards past the largest
/// supported fleet are cut and said, and `snapshot --json` is written as it is serialised,
/// not built as a tree first (1.35 GB before).
#[test]
fn a_target_with_more_cards_than_the_largest_fleet_stays_small() {
    let mut body = String::new();
    for i in 0..100_000 {
        body.push_str(&format!("DCGM_FI_DEV_GPU_TEMP{{gpu=\"{i}\",UUID=\"GPU-{i}\",Hostname=\"h\"}} 64\n"));
    }
    let server = Server::start(HashMap::from([("/metrics".into(), Reply::ok(body))]), None);
    let (dir, cfg) = config("cards", &format!("[sources]\nscrape = [\"{}\"]\n", server.url("/metrics")));
    let started = Instant::now();
    let (peak, v) = snapshot_peak(&cfg);
    eprintln!("one target, 100,000 cards: peak RSS {} MiB in {:?}", peak / 1024, started.elapsed());
    let s = source(&v, &format!("scrape:{}", server.addr));
    assert!(s["note"].as_str().unwrap_or_default().contains("34464 cards past 65536 cut"), "{s}");
    assert_eq!(v["nodes"][0]["cards"].as_array().map(Vec::len), Some(65_536));
    assert!(peak < FLOOD_CEILING_KIB, "peak RSS {} MiB", peak / 1024);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A 10 MB `squeue --json` whose jobs carry bulk tessera does not read (lists of one-key
/// objects): read a job at a time, each holding only the fields read (836 MB in the probe as a
/// tree of the whole document). The GPU jobs in it are still read.
#[test]
fn a_squeue_of_bulky_jobs_stays_small() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, _) = config("squeue-bulk", "");
    let junk = vec![r#"{"abcdef":0}"#; 2_000].join(",");
    let mut jobs = Vec::new();
    for i in 0..400 {
        jobs.push(format!(
            r#"{{"job_id":{i},"job_state":"PENDING","partition":"p","name":"j","tres_per_node":"gres/gpu:1","junk":[{junk}]}}"#
        ));
    }
    std::fs::write(dir.join("squeue.json"), format!(r#"{{"jobs":[{}]}}"#, jobs.join(",")))
        .unwrap_or_else(|e| panic!("{e}"));
    for (name, body) in
        [("squeue", format!("cat '{}'", dir.join("squeue.json").display())), ("sinfo", "echo '{\"nodes\": []}'".into())]
    {
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap_or_else(|e| panic!("{e}"));
    }
    let (_, cfg) = config(
        "squeue-bulk",
        &format!("[sources]\nslurm = true\n[slurm]\ncommands_dir = \"{}\"\ntimeout = \"60s\"\n", dir.display()),
    );
    let started = Instant::now();
    let (peak, v) = snapshot_peak(&cfg);
    eprintln!("a 10 MB squeue of bulky jobs: peak RSS {} MiB in {:?}", peak / 1024, started.elapsed());
    assert_eq!(source(&v, "slurm")["state"], "live", "{v}");
    assert_eq!(v["workloads"].as_array().map(Vec::len), Some(400), "every GPU job read");
    assert!(peak < 150 * 1024, "peak RSS {} MiB", peak / 1024);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A history (`query_range`) that hangs delays the first answer by at most a few seconds,
/// not the whole HTTP timeout: the answer comes without history, and says so.
#[test]
fn a_hung_history_does_not_hold_the_first_answer() {
    let vector = r#"{"status":"success","data":{"resultType":"vector","result":[
      {"metric":{"__name__":"DCGM_FI_DEV_GPU_TEMP","gpu":"0","UUID":"GPU-a","instance":"10.0.0.7:9400"},"value":[1700000000.1,"64"]}]}}"#;
    let hung = Reply { delay: Duration::from_secs(12), ..Reply::ok("{}") };
    let server = Server::start(
        HashMap::from([
            ("/api/v1/query".into(), Reply::ok(vector)),
            ("/federate".into(), Reply::status(404, "text/plain", "404 page not found\n")),
            ("/api/v1/query_range".into(), hung),
        ]),
        None,
    );
    let started = Instant::now();
    let (code, v, err) = snapshot(&["--prometheus", &format!("http://{}", server.addr)], &[]);
    let took = started.elapsed();
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["nodes"][0]["cards"][0]["temperature_c"], 64.0, "{v}");
    let note = v["sources"][0]["note"].as_str().unwrap_or_default();
    assert!(note.contains("history: no answer within 3s"), "{v}");
    assert!(took < Duration::from_secs(10), "the first answer took {took:?}");
}

/// `replay --prometheus` against a server that accepts and never answers stops at the first
/// moment, saying so: every moment used to cost the whole HTTP timeout (31 moments for
/// `--from -30m`), with no early stop.
#[test]
fn a_replay_against_a_hung_prometheus_stops_at_once() {
    // The replay needs a terminal: `script` gives it one (util-linux).
    if !common::have_with("script", "--version") {
        return;
    }
    let hung = Reply { delay: Duration::from_secs(60), ..Reply::ok("{}") };
    let server =
        Server::start(HashMap::from([("/api/v1/query".into(), hung.clone()), ("/federate".into(), hung)]), None);
    let (dir, cfg) = config("hung-replay", "[sources.http]\ntimeout = \"2s\"\n");
    let cmd = format!(
        "{} replay --config {cfg} --prometheus http://{} --from -30m",
        env!("CARGO_BIN_EXE_tessera"),
        server.addr
    );
    let started = Instant::now();
    let out = Command::new("timeout")
        .args(["-k", "5", "50", "script", "-qec", &cmd, "/dev/null"])
        .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let took = started.elapsed();
    let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        printed.contains("Prometheus did not answer") && printed.contains("stopped at the first moment"),
        "{printed}"
    );
    assert!(took < Duration::from_secs(20), "took {took:?}: {printed}");
    let _ = std::fs::remove_dir_all(&dir);
}
