//! Against a real Prometheus server (Debian's `prometheus`): it scrapes a dcgm-exporter
//! fixture served on 127.0.0.1 every second; then `tessera snapshot --prometheus URL` must show
//! what the exposition describes, the same as scraping the exporter directly.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::http::{Reply, Server};
use common::{have_with, peak_rss_kib};

struct Prometheus(Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(0)
}

/// Prometheus on 127.0.0.1:`port` with `config`, its data in `dir`; stopped when the guard
/// drops. Returns the guard and its URL.
fn start(dir: &std::path::Path, config: &str, port: u16) -> (Prometheus, String) {
    std::fs::write(dir.join("prometheus.yml"), config).unwrap_or_else(|e| panic!("{e}"));
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start prometheus: {e}"));
    (Prometheus(child), format!("http://127.0.0.1:{port}"))
}

fn snapshot(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["snapshot", "--json"])
        .args(args)
        .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// The comparable part of a card: identity, MIG instances, temperature.
fn cards(v: &Value) -> Vec<Value> {
    let mut out: Vec<Value> = v["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|n| n["cards"].as_array().cloned().unwrap_or_default())
        .map(|c| {
            let inst: Vec<Value> = c["mig"]["instances"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|i| serde_json::json!([i["gi_id"], i["profile"], i["utilization_pct"]]))
                .collect();
            serde_json::json!({"uuid": c["uuid"], "temp": c["temperature_c"], "util": c["utilization_pct"], "mig": inst})
        })
        .collect();
    out.sort_by_key(|c| c["uuid"].to_string());
    out
}

#[test]
fn prometheus_shows_what_the_exporter_describes() {
    if !have_with("prometheus", "--version") {
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let exposition = ["metrics-a100-mig-1g.5gb-exporter-2.4.0rc2.prom", "metrics-t4-nonmig.datadog-fixture.prom"]
        .iter()
        .map(|f| std::fs::read_to_string(root.join("tests/fixtures/dcgm").join(f)).unwrap_or_default())
        .collect::<Vec<_>>();
    let exporter = Server::start(
        HashMap::from([
            ("/a100".into(), Reply::ok(exposition[0].clone())),
            ("/t4".into(), Reply::ok(exposition[1].clone())),
            (
                "/ksm".into(),
                Reply::ok(
                    std::fs::read_to_string(root.join("tests/fixtures/kube-state-metrics/pending-gpu-pods.prom"))
                        .unwrap_or_default(),
                ),
            ),
        ]),
        None,
    );
    let dir = std::env::temp_dir().join(format!("tessera-prom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let port = free_port();
    let config = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: a100\n    metrics_path: /a100\n    static_configs:\n      - targets: ['{0}']\n  - job_name: t4\n    metrics_path: /t4\n    static_configs:\n      - targets: ['localhost:{1}']\n  - job_name: ksm\n    metrics_path: /ksm\n    honor_labels: true\n    static_configs:\n      - targets: ['{0}']\n",
        exporter.addr,
        exporter.addr.rsplit(':').next().unwrap_or("0"),
    );
    let (_guard, url) = start(&dir, &config, port);

    // Wait until both targets' series exist.
    let start = Instant::now();
    let v = loop {
        let v = snapshot(&["--prometheus", &url]);
        if v["sources"][0]["state"] == "live" && cards(&v).len() == 3 {
            break v;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "Prometheus never had the series: {v}");
        std::thread::sleep(Duration::from_millis(500));
    };
    let mut nodes: Vec<&str> = v["nodes"].as_array().into_iter().flatten().filter_map(|n| n["name"].as_str()).collect();
    nodes.sort_unstable();
    // One node per scraped instance; the T4 fixture is several hosts' scrapes behind one
    // target (two T4s the default query reads, with two UUIDs): they stay two cards, named by
    // their Hostnames, and the note says so.
    assert_eq!(nodes, vec!["127.0.0.1", "424773df46e0", "551bdf382151"], "{v}");
    assert!(v["sources"][0]["note"].as_str().is_some_and(|n| n.contains("2 Hostnames behind one target")), "{v}");
    // The history's range queries (cards, MIG instances, memory in MiB) are valid PromQL to a
    // real Prometheus: a failing one would be in the note.
    assert!(v["sources"][0]["note"].as_str().is_some_and(|n| !n.contains("history")), "{v}");
    // Prometheus has a federation endpoint: `auto` read it.
    assert!(v["sources"][0]["note"].as_str().is_some_and(|n| !n.contains("federation")), "{v}");
    let got = cards(&v);
    let a100 =
        got.iter().find(|c| c["uuid"] == "GPU-34319582-d595-d1c7-d1d2-179bcfa61660").cloned().unwrap_or_default();
    assert_eq!(a100["temp"], 61.0);
    assert_eq!(a100["mig"][0][0], 13);
    assert_eq!(a100["mig"][0][1], "1g.5gb");
    assert!(a100["mig"][0][2].as_f64().is_some_and(|u| (u - 99.5687).abs() < 0.01), "{a100}");

    // The queue from kube-state-metrics and Kueue, when asked for.
    let qcfg = dir.join("queue.toml");
    std::fs::write(&qcfg, "[sources]\nprometheus_queue = true\n").unwrap_or_else(|e| panic!("{e}"));
    // kube-state-metrics is its own scrape job: wait for its first scrape too.
    let start = Instant::now();
    let q = loop {
        let q = snapshot(&["--config", &qcfg.to_string_lossy(), "--prometheus", &url]);
        if q["queue"]["pending"].as_u64().is_some_and(|n| n > 0) || start.elapsed() > Duration::from_secs(30) {
            break q;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let pending: Vec<&Value> =
        q["workloads"].as_array().into_iter().flatten().filter(|w| w["state"] == "pending").collect();
    let ids: Vec<&str> = pending.iter().filter_map(|w| w["id"].as_str()).collect();
    assert_eq!(ids, vec!["k8s:ml/train-0", "k8s:web/embed-7"], "{q}");
    assert_eq!(pending[0]["request"]["gpus"], 4);
    assert_eq!(pending[1]["request"]["mig_profile"], "1g.10gb");
    assert_eq!(pending[0]["submitted_at"], "2023-11-14T22:13:20Z");
    assert_eq!(q["queue"]["pending"], 2);
    assert!(q["sources"][0]["note"].as_str().is_some_and(|n| n.contains("kueue: 3 pending")), "{q}");

    // A field's own PromQL replaces that field.
    let fcfg = dir.join("fields.toml");
    std::fs::write(&fcfg, "[sources.promql]\ntemperature = 'DCGM_FI_DEV_GPU_TEMP + 1'\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let f = cards(&snapshot(&["--config", &fcfg.to_string_lossy(), "--prometheus", &url]));
    let a = f.iter().find(|c| c["uuid"] == "GPU-34319582-d595-d1c7-d1d2-179bcfa61660").cloned().unwrap_or_default();
    assert_eq!(a["temp"], 62.0, "{f:?}");

    // The same as scraping the exporters directly. The T4 fixture is three hosts' scrapes (its
    // source mixes real and hand-written lines); the default query reads none of the A10G's
    // series (it has only DRAM_ACTIVE), so compare the cards that report a temperature or a
    // utilisation, without the T4s' UUIDs.
    let direct = cards(&snapshot(&["--scrape", &exporter.url("/a100"), "--scrape", &exporter.url("/t4")]));
    let strip = |c: Vec<Value>| {
        let mut c: Vec<Value> = c.into_iter().filter(|x| !(x["temp"].is_null() && x["util"].is_null())).collect();
        for x in &mut c {
            if x["uuid"] != "GPU-34319582-d595-d1c7-d1d2-179bcfa61660" {
                x["uuid"] = Value::Null;
            }
        }
        c.sort_by_key(|x| x.to_string());
        c
    };
    assert_eq!(strip(direct), strip(got.clone()), "Prometheus and a direct scrape agree");

    // The default read the federation endpoint; instant queries give the same cards.
    let qcfg = dir.join("query.toml");
    std::fs::write(&qcfg, "[sources]\nprometheus_api = \"query\"\n").unwrap_or_else(|e| panic!("{e}"));
    let by_query = snapshot(&["--config", &qcfg.to_string_lossy(), "--prometheus", &url]);
    assert_eq!(strip(cards(&by_query)), strip(got), "federation and instant queries agree");
    // Federation asks in two halves: a family in both would be read twice.
    assert!(v["sources"][0]["note"].as_str().is_some_and(|n| !n.contains("duplicate")), "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `auto` on a server without a federation endpoint (Thanos Query and Mimir answer 404, a proxy
/// may answer a page): instant queries, and the note says so once; `federate` says the error.
#[test]
fn without_a_federation_endpoint_auto_uses_instant_queries() {
    let vector = r#"{"status":"success","data":{"resultType":"vector","result":[
      {"metric":{"__name__":"DCGM_FI_DEV_GPU_TEMP","gpu":"0","UUID":"GPU-a","instance":"10.0.0.7:9400"},"value":[1700000000.1,"64"]}]}}"#;
    for federate in [Reply::status(404, "text/plain", "404 page not found\n"), Reply::ok("<html>login</html>")] {
        let server = Server::start(
            HashMap::from([("/api/v1/query".into(), Reply::ok(vector)), ("/federate".into(), federate)]),
            None,
        );
        let v = snapshot(&["--prometheus", &format!("http://{}", server.addr)]);
        assert_eq!(v["nodes"][0]["cards"][0]["temperature_c"], 64.0, "{v}");
        let note = v["sources"][0]["note"].as_str().unwrap_or_default();
        assert!(note.contains("/federate: no federation endpoint") && note.contains("instant queries"), "{v}");
    }
    let server = Server::start(HashMap::from([("/api/v1/query".into(), Reply::ok(vector))]), None);
    let dir = std::env::temp_dir().join(format!("tessera-prom-fed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let cfg = dir.join("federate.toml");
    std::fs::write(&cfg, "[sources]\nprometheus_api = \"federate\"\n").unwrap_or_else(|e| panic!("{e}"));
    let v = snapshot(&["--config", &cfg.to_string_lossy(), "--prometheus", &format!("http://{}", server.addr)]);
    let e = v["sources"][0]["error"].as_str().unwrap_or_default();
    assert!(e.contains("/federate: no federation endpoint (HTTP 404)"), "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The default selector goes to the federation endpoint in two halves asked at once: a card
/// gets its values from both, and a half that fails fails the refresh (never a fleet with
/// half its values missing and nothing said).
#[test]
fn the_federation_halves_each_count() {
    use tessera::sources::prometheus::{DEFAULT_FEDERATION, federate};
    let [fleet, other] = DEFAULT_FEDERATION.map(|q| federate::url("", q));
    let util = "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\",instance=\"10.0.0.7:9400\"} 87\n";
    let temp = "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-a\",instance=\"10.0.0.7:9400\"} 64\n";
    let server =
        Server::start(HashMap::from([(fleet.clone(), Reply::ok(util)), (other.clone(), Reply::ok(temp))]), None);
    let v = snapshot(&["--prometheus", &format!("http://{}", server.addr)]);
    let card = &v["nodes"][0]["cards"][0];
    assert_eq!((card["utilization_pct"].as_f64(), card["temperature_c"].as_f64()), (Some(87.0), Some(64.0)), "{v}");
    assert!(!v["sources"][0]["note"].as_str().unwrap_or_default().contains("federation"), "{v}");
    server.set(&other, Reply::status(500, "text/plain", "overloaded\n"));
    let v = snapshot(&["--prometheus", &format!("http://{}", server.addr)]);
    let e = v["sources"][0]["error"].as_str().unwrap_or_default();
    assert!(e.contains("/federate: HTTP 500: overloaded"), "{v}");
    assert!(v["nodes"].as_array().is_none_or(Vec::is_empty), "{v}");
    // One half not served (a proxy that knows one selector's URL only): instant queries, said.
    let vector = r#"{"status":"success","data":{"resultType":"vector","result":[
      {"metric":{"__name__":"DCGM_FI_DEV_GPU_TEMP","gpu":"0","UUID":"GPU-a","instance":"10.0.0.7:9400"},"value":[1700000000.1,"61"]}]}}"#;
    server.set(&other, Reply::status(404, "text/plain", "404 page not found\n"));
    server.set("/api/v1/query", Reply::ok(vector));
    let v = snapshot(&["--prometheus", &format!("http://{}", server.addr)]);
    assert_eq!(v["nodes"][0]["cards"][0]["temperature_c"], 61.0, "{v}");
    let note = v["sources"][0]["note"].as_str().unwrap_or_default();
    assert!(note.contains("no federation endpoint (HTTP 404): instant queries from now on"), "{v}");
}

/// The same fixtures through VictoriaMetrics (Debian's `victoria-metrics`), a
/// Prometheus-compatible server large sites run: it scrapes them itself, and tessera reads it
/// through its federation endpoint and through instant queries, with the same cards as a
/// direct scrape.
#[test]
fn victoriametrics_answers_like_prometheus() {
    if !have_with("victoria-metrics", "-version") {
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let a100 = std::fs::read_to_string(root.join("tests/fixtures/dcgm/metrics-a100-mig-1g.5gb-exporter-2.4.0rc2.prom"))
        .unwrap_or_default();
    let exporter = Server::start(HashMap::from([("/a100".into(), Reply::ok(a100))]), None);
    let dir = std::env::temp_dir().join(format!("tessera-vm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let scrape = dir.join("scrape.yml");
    let config = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: a100\n    metrics_path: /a100\n    static_configs:\n      - targets: ['{}']\n",
        exporter.addr
    );
    std::fs::write(&scrape, config).unwrap_or_else(|e| panic!("{e}"));
    let port = free_port();
    let child = Command::new("victoria-metrics")
        .arg(format!("-storageDataPath={}", dir.join("data").display()))
        .arg(format!("-httpListenAddr=127.0.0.1:{port}"))
        .arg(format!("-promscrape.config={}", scrape.display()))
        // Instant queries see samples at once (VictoriaMetrics hides the last 30 s by default).
        .arg("-search.latencyOffset=0s")
        .arg("-loggerLevel=ERROR")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start victoria-metrics: {e}"));
    let _guard = Prometheus(child);
    let url = format!("http://127.0.0.1:{port}");
    let qcfg = dir.join("query.toml");
    std::fs::write(&qcfg, "[sources]\nprometheus_api = \"query\"\n").unwrap_or_else(|e| panic!("{e}"));
    let direct = cards(&snapshot(&["--scrape", &exporter.url("/a100")]));
    let start = Instant::now();
    let (by_federation, by_query) = loop {
        let f = snapshot(&["--prometheus", &url]);
        let q = snapshot(&["--config", &qcfg.to_string_lossy(), "--prometheus", &url]);
        if cards(&f) == direct && cards(&q) == direct {
            break (f, q);
        }
        assert!(start.elapsed() < Duration::from_secs(60), "VictoriaMetrics never agreed: {f}\n{q}");
        std::thread::sleep(Duration::from_millis(500));
    };
    for v in [&by_federation, &by_query] {
        assert_eq!(v["sources"][0]["state"], "live", "{v}");
        let note = v["sources"][0]["note"].as_str().unwrap_or_default();
        assert!(!note.contains("federation") && !note.contains("history"), "{v}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Time travel: the fixture's temperature changes while the real Prometheus scrapes it;
/// `snapshot --prometheus URL --at T` shows the value at T, not now, and a rebuilt span (what
/// `replay --prometheus URL --from .. --to ..` plays) has both, each at its moment.
#[test]
fn prometheus_history_rebuilds_past_moments() {
    if !have_with("prometheus", "--version") {
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let before =
        std::fs::read_to_string(root.join("tests/fixtures/dcgm/metrics-a100-mig-1g.5gb-exporter-2.4.0rc2.prom"))
            .unwrap_or_default();
    let temp_line = "Hostname=\"ub20-a100-k8s\"} 61";
    assert!(before.contains(temp_line), "the fixture's temperature line moved");
    let exporter = Server::start(HashMap::from([("/a100".into(), Reply::ok(before.clone()))]), None);
    let dir = std::env::temp_dir().join(format!("tessera-prom-at-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let port = free_port();
    let config = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: a100\n    metrics_path: /a100\n    static_configs:\n      - targets: ['{}']\n",
        exporter.addr
    );
    let (_guard, url) = start(&dir, &config, port);
    let temp = |v: &Value| cards(v).first().map(|c| c["temp"].clone()).unwrap_or(Value::Null);
    let start = Instant::now();
    while temp(&snapshot(&["--prometheus", &url])) != 61.0 {
        assert!(start.elapsed() < Duration::from_secs(60), "Prometheus never had the series");
        std::thread::sleep(Duration::from_millis(500));
    }
    // A few scrapes at 61, then 75 from now on.
    std::thread::sleep(Duration::from_secs(3));
    let then = chrono::Utc::now() - chrono::Duration::seconds(1);
    exporter.set("/a100", Reply::ok(before.replace(temp_line, "Hostname=\"ub20-a100-k8s\"} 75")));
    let start = Instant::now();
    while temp(&snapshot(&["--prometheus", &url])) != 75.0 {
        assert!(start.elapsed() < Duration::from_secs(30), "Prometheus never scraped the change");
        std::thread::sleep(Duration::from_millis(500));
    }
    let at = then.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let past = snapshot(&["--prometheus", &url, "--at", &at]);
    assert_eq!(temp(&past), 61.0, "{past}");
    assert_eq!(past["taken_at"], at.as_str(), "{past}");
    assert_eq!(past["recorded"]["from"], "prometheus");
    // Long before Prometheus started: nothing, said as such (not an empty cluster).
    let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["snapshot", "--json", "--prometheus", &url, "--at", "2020-01-01T00:00:00Z"])
        .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("Prometheus had nothing"), "{err}");

    // The span replay plays: rebuilt moments a second apart, the change between them.
    let cfg = tessera::config::Config::default();
    let settings = tessera::engine::prometheus_settings(&cfg, &url);
    let client = tessera::sources::http::Client::new(&cfg.sources.http).unwrap_or_else(|e| panic!("{e}"));
    // Two more scrapes at 75, then moments a whole number of seconds apart that end now
    // (the last one is now itself, after the change for sure).
    std::thread::sleep(Duration::from_secs(2));
    let now = chrono::Utc::now();
    let from = now - chrono::Duration::seconds((now - then).num_seconds() + 2);
    let moments =
        tessera::record::prometheus::moments(from, now, Duration::from_secs(1)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(moments.last(), Some(&now));
    let path = dir.join("history.tsrec");
    let rt = tessera::engine::runtime().unwrap_or_else(|e| panic!("{e}"));
    let summary = rt
        .block_on(tessera::record::prometheus::rebuild(
            &settings,
            &client,
            &moments,
            Duration::from_secs(1),
            &path,
            |_, _| {},
        ))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(summary.frames, moments.len() as u64);
    let rec = tessera::record::reader::Recording::open(std::slice::from_ref(&path)).unwrap_or_else(|e| panic!("{e}"));
    let mut player = tessera::record::reader::Player::new(rec);
    let first = player.frame(0).unwrap_or_else(|e| panic!("{e}")).fleet.nodes[0].cards[0].temperature_c;
    let last = player.frame(moments.len() - 1).unwrap_or_else(|e| panic!("{e}")).fleet.nodes[0].cards[0].temperature_c;
    assert_eq!((first, last), (Some(61.0), Some(75.0)));
    let _ = std::fs::remove_dir_all(&dir);
}

#[path = "prometheus/measure.rs"]
mod measure;
