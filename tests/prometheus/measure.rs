//! By hand, with a real Prometheus: `cargo test --release --test prometheus -- --ignored
//! --nocapture`. What a scrape and a refresh through the API cost beside Prometheus doing the
//! same work; the figures go to docs/benchmarks.md.

use super::*;

/// By hand: `cargo test --release --test prometheus -- --ignored --nocapture`. Serves the
/// generated 512×8 exposition, lets the real Prometheus scrape it, and prints Prometheus's
/// own `scrape_duration_seconds` beside tessera's parse + map time on the same text.
#[test]
#[ignore]
fn measure_against_prometheus_scrape() {
    if !have_with("prometheus", "--version") {
        return;
    }
    let text = tessera::sources::dcgm::generate(512, 8, 4);
    let exporter = Server::start(HashMap::from([("/metrics".into(), Reply::ok(text.clone()))]), None);
    let dir = std::env::temp_dir().join(format!("tessera-prom-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let port = free_port();
    let config = format!(
        "global:\n  scrape_interval: 5s\n  scrape_timeout: 4s\nscrape_configs:\n  - job_name: big\n    sample_limit: 0\n    static_configs:\n      - targets: ['{}']\n",
        exporter.addr
    );
    let (_guard, _) = start(&dir, &config, port);
    // Let it scrape several times, then read its own measurements.
    std::thread::sleep(Duration::from_secs(32));
    let q = format!("http://127.0.0.1:{port}/api/v1/query?query=scrape_duration_seconds%7Bjob%3D%22big%22%7D%5B30s%5D");
    let out = Command::new("curl").args(["-s", &q]).output().map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    let v: Value = serde_json::from_str(&out.unwrap_or_default()).unwrap_or(Value::Null);
    let durations: Vec<f64> = v["data"]["result"][0]["values"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p[1].as_str().and_then(|s| s.parse().ok()))
        .collect();
    // Refresh latency through the API for these 4096 GPUs: one `tessera snapshot`, from
    // process start to exit (query, transfer, mapping).
    let url = format!("http://127.0.0.1:{port}");
    // One exporter serves all 512 generated nodes here, so name nodes by their label.
    let cfg = dir.join("label.toml");
    std::fs::write(&cfg, "[sources]\nscrape_node = \"label\"\n").unwrap_or_else(|e| panic!("{e}"));
    let cfg = cfg.to_string_lossy().into_owned();
    for run in 0..3 {
        let t = Instant::now();
        let v = snapshot(&["--config", &cfg, "--prometheus", &url]);
        let cards: usize =
            v["nodes"].as_array().into_iter().flatten().map(|n| n["cards"].as_array().map_or(0, Vec::len)).sum();
        println!("API refresh run {run}: {cards} cards in {:?}", t.elapsed());
    }
    let mut ours = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let m = tessera::sources::scrape::map(&text, &tessera::sources::series::NodeName::Label);
        ours.push(t.elapsed().as_secs_f64());
        assert_eq!(m.nodes.len(), 512);
    }
    ours.sort_by(f64::total_cmp);
    println!("exposition: {:.1} MB", text.len() as f64 / 1e6);
    println!("prometheus scrape_duration_seconds: {durations:?}");
    println!("tessera parse + map seconds (5 runs, sorted): {ours:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// CPU time of the calling thread so far (the scheduler's own count, in nanoseconds).
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

/// `curl` one URL into `out`, gzip asked for or not: (seconds to the last byte, bytes sent).
fn fetch_with(url: &str, out: &std::path::Path, gzip: bool) -> (f64, u64) {
    let o = Command::new("curl")
        .args(if gzip { &["-s", "--compressed", "-o"][..] } else { &["-s", "-o"][..] })
        .arg(out)
        .args(["-w", "%{time_total} %{size_download}", url])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let mut it = o.split_whitespace();
    (it.next().and_then(|t| t.parse().ok()).unwrap_or(f64::NAN), it.next().and_then(|b| b.parse().ok()).unwrap_or(0))
}

/// A `VmRSS`-style line of this process's status, KiB.
fn status_kib(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(key)).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
}

fn fetch(url: &str, out: &std::path::Path) -> (f64, u64) {
    fetch_with(url, out, true)
}

fn spread(mut v: Vec<f64>) -> String {
    v.sort_by(f64::total_cmp);
    match (v.first(), v.last()) {
        (Some(a), Some(b)) => format!("{a:.3}–{b:.3}"),
        _ => "none".into(),
    }
}

/// 4096 GPUs through the API while Prometheus scrapes them every 15 s, as a site would: 512
/// exporters of 8 cards each (one target and `instance` per node). What each endpoint costs
/// Prometheus (to the last byte, with and without gzip), tessera's CPU to decode and map each
/// answer, a whole refresh through the source in each mode, and one `snapshot` process's peak
/// memory (its first collection fetches the history too).
#[test]
#[ignore]
fn measure_4096_gpus_through_the_api() {
    use tessera::config::{Config, PrometheusApi, ScrapeNode};
    use tessera::sources::prometheus;
    if !have_with("prometheus", "--version") {
        return;
    }
    let text = tessera::sources::dcgm::generate(512, 8, 4);
    // Each node's lines on its own path: its exporter.
    let mut per_node: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let host = line.split("Hostname=\"").nth(1).and_then(|r| r.split('"').next()).unwrap_or("none");
        let t = per_node.entry(host.to_string()).or_default();
        t.push_str(line);
        t.push('\n');
    }
    let routes: HashMap<String, Reply> =
        per_node.iter().map(|(h, t)| (format!("/{h}"), Reply::ok(t.clone()))).collect();
    let exporter = Server::start(routes, None);
    let targets: String = per_node
        .keys()
        .map(|h| {
            format!(
                "      - targets: ['{}']\n        labels: {{__metrics_path__: '/{h}', instance: '{h}:9400'}}\n",
                exporter.addr
            )
        })
        .collect();
    let dir = std::env::temp_dir().join(format!("tessera-prom-4096-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let port = free_port();
    let config = format!(
        "global:\n  scrape_interval: 15s\n  scrape_timeout: 14s\nscrape_configs:\n  - job_name: dcgm\n    static_configs:\n{targets}"
    );
    let (_guard, url) = start(&dir, &config, port);
    // MIG cards repeat the temperature per instance: count cards, not series.
    let count = format!("{url}/api/v1/query?query=count(count%20by%20(Hostname,gpu)%20(DCGM_FI_DEV_GPU_TEMP))");
    let t = Instant::now();
    loop {
        let (_, _) = fetch(&count, &dir.join("count.json"));
        let body = std::fs::read_to_string(dir.join("count.json")).unwrap_or_default();
        if body.contains("\"4096\"") {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(120), "Prometheus never had the 4096 cards: {body}");
        std::thread::sleep(Duration::from_millis(500));
    }
    println!(
        "exposition: {:.1} MB, 4096 GPUs on {} exporters; Prometheus scrapes them every 15 s",
        text.len() as f64 / 1e6,
        per_node.len()
    );
    let query = prometheus::query_url(&url, prometheus::DEFAULT_QUERY);
    let federation = prometheus::federate::url(&url, prometheus::DEFAULT_QUERY);
    for (name, u, fed) in [("instant query", &query, false), ("federation", &federation, true)] {
        let (mut secs, mut plain, mut cpu, mut wall) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut sent, mut size) = (0, 0);
        for _ in 0..5 {
            let body_file = dir.join("body");
            let (s, b) = fetch_with(u, &body_file, false);
            plain.push(s);
            size = b;
            let (s, b) = fetch_with(u, &body_file, true);
            secs.push(s);
            sent = b;
            let body = std::fs::read_to_string(&body_file).unwrap_or_default();
            let (c0, w0) = (thread_cpu_ns(), Instant::now());
            let p = if fed {
                prometheus::to_partial_from_federation(&body, &[], ScrapeNode::Target)
            } else {
                prometheus::to_partial_from_api(&body, ScrapeNode::Target)
            };
            cpu.push((thread_cpu_ns() - c0) as f64 / 1e9);
            wall.push(w0.elapsed().as_secs_f64());
            let cards: usize = p.map(|p| p.nodes.iter().map(|n| n.cards.len()).sum()).unwrap_or(0);
            assert_eq!(cards, 4096, "{name}");
        }
        println!(
            "{name}: {:.1} MB ({:.1} MB gzipped); Prometheus to the last byte {} s plain, {} s gzipped; tessera decode + map CPU {} s (wall {} s)",
            size as f64 / 1e6,
            sent as f64 / 1e6,
            spread(plain),
            spread(secs),
            spread(cpu),
            spread(wall)
        );
    }
    // The default selector's two halves asked at once, gzip asked as the source asks:
    // Prometheus answers each on its own thread. Both timed the same way (curl's own time to
    // the last byte; for the halves the later of the two), and the halves' lines must be the
    // whole's (no family lost or read twice).
    let halves: Vec<String> =
        prometheus::DEFAULT_FEDERATION.iter().map(|q| prometheus::federate::url(&url, q)).collect();
    let lines = |f: &std::path::Path| {
        std::fs::read_to_string(f).unwrap_or_default().lines().filter(|l| !l.starts_with('#')).count()
    };
    let (mut whole, mut both) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        whole.push(fetch_with(&federation, &dir.join("whole"), false).0);
        let secs: Vec<f64> = std::thread::scope(|s| {
            let runs: Vec<_> = halves
                .iter()
                .enumerate()
                .map(|(i, u)| {
                    let f = dir.join(format!("half{i}"));
                    s.spawn(move || fetch_with(u, &f, false).0)
                })
                .collect();
            runs.into_iter().map(|r| r.join().unwrap_or(f64::NAN)).collect()
        });
        both.push(secs.into_iter().fold(0.0, f64::max));
        let parts = lines(&dir.join("half0")) + lines(&dir.join("half1"));
        // Prometheus may have scraped between the requests: the same count within a target's.
        assert!(parts.abs_diff(lines(&dir.join("whole"))) < 1000, "halves {parts}");
    }
    println!(
        "federation, the default selector whole: {} s; in two halves asked at once: {} s (Prometheus to the last byte, plain)",
        spread(whole),
        spread(both)
    );
    // Fewer series per refresh: only the fleet view's families, and those aggregated to one
    // series per card or instance on the server (no pod labels: the workloads would need a
    // second, on-demand query). Prometheus's time to the last byte and tessera's decode + map.
    let few =
        r#"{__name__=~"DCGM_FI_DEV_GPU_UTIL|DCGM_FI_DEV_FB_(USED|FREE)|DCGM_FI_DEV_GPU_TEMP|DCGM_FI_DEV_POWER_USAGE"}"#;
    let aggregated =
        format!("max by (__name__, Hostname, instance, gpu, UUID, modelName, GPU_I_ID, GPU_I_PROFILE) ({few})");
    for (name, selector) in
        [("fleet-view families", few.to_string()), ("those, one series per card server-side", aggregated)]
    {
        let u = prometheus::query_url(&url, &selector);
        let (mut secs, mut cpu) = (Vec::new(), Vec::new());
        let (mut size, mut cards) = (0, 0);
        for _ in 0..5 {
            let body_file = dir.join("body");
            let (s, b) = fetch_with(&u, &body_file, false);
            secs.push(s);
            size = b;
            let body = std::fs::read_to_string(&body_file).unwrap_or_default();
            let c0 = thread_cpu_ns();
            let p = prometheus::to_partial_from_api(&body, ScrapeNode::Target);
            cpu.push((thread_cpu_ns() - c0) as f64 / 1e9);
            cards = p.map(|p| p.nodes.iter().map(|n| n.cards.len()).sum()).unwrap_or(0);
        }
        println!(
            "instant query, {name}: {:.1} MB, {cards} cards; Prometheus to the last byte {} s; tessera decode + map CPU {} s",
            size as f64 / 1e6,
            spread(secs),
            spread(cpu)
        );
    }
    // A whole refresh through the source, as the console does it after the first: request,
    // transfer, decode, map. Federation first: memory an earlier refresh freed and the
    // allocator kept would hide a later one's peak.
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap_or_else(|e| panic!("{e}"));
    // `Federate` with the default selector given as a custom one: one request, the whole.
    for (api, whole) in [(PrometheusApi::Auto, false), (PrometheusApi::Federate, true), (PrometheusApi::Query, false)] {
        let mut cfg = Config::default();
        cfg.sources.prometheus_api = api;
        let mut settings = tessera::engine::prometheus_settings(&cfg, &url);
        if whole {
            settings.query = Some(prometheus::DEFAULT_QUERY.to_string());
        }
        let client = tessera::engine::http_client(&cfg.sources, Some(&url)).unwrap_or_else(|e| panic!("{e}"));
        let (mut walls, mut extra) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            // The refresh's own peak: resident memory above what was resident before it (the
            // kernel's high-water mark, reset first).
            let before = status_kib("VmRSS");
            let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
            let t = Instant::now();
            let p = rt.block_on(prometheus::collect(&settings, &client, None, &mut false));
            walls.push(t.elapsed().as_secs_f64());
            // Without the reset the mark is the whole run's, not this refresh's: printed as NaN.
            extra.push(if reset { status_kib("VmHWM").saturating_sub(before) as f64 / 1024.0 } else { f64::NAN });
            assert!(p.is_ok_and(|p| p.nodes.len() == 512 && p.note.is_none()), "{api:?}");
        }
        println!(
            "refresh through the source ({api:?}{}): {} s (5 runs), peak resident above the start {} MiB",
            if whole { ", the whole selector in one request" } else { "" },
            spread(walls),
            spread(extra)
        );
    }
    // One snapshot process each: its first collection fetches the last two hours too.
    for api in ["query", "auto"] {
        let cfg = dir.join(format!("{api}.toml"));
        std::fs::write(&cfg, format!("[sources]\nprometheus_api = \"{api}\"\n")).unwrap_or_else(|e| panic!("{e}"));
        let t = Instant::now();
        let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["snapshot", "--json", "--config"])
            .arg(&cfg)
            .args(["--prometheus", &url])
            .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let peak = peak_rss_kib(&mut child);
        println!(
            "snapshot ({api}), history included: {:.2} s, peak resident {:.1} MiB",
            t.elapsed().as_secs_f64(),
            peak as f64 / 1024.0
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
