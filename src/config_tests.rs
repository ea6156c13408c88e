//! Tests for config parsing and the committed example.

use super::*;

#[test]
fn the_committed_example_is_the_generated_one_and_means_the_defaults() {
    let committed = include_str!("../config.example.toml");
    assert_eq!(committed, example(), "run `cargo run -- check-config --example > config.example.toml`");
    assert_eq!(parse(committed, "config.example.toml"), Ok(Config::default()));
}

#[test]
fn a_full_config_parses() {
    let cfg = parse(
        r#"
        read_only = true
        refresh = "2s"
        theme = "light"
        [sources]
        nvml = "/opt/nvidia/libnvidia-ml.so.1"
        prometheus = "http://127.0.0.1:9090"
        scrape = ["http://127.0.0.1:9400/metrics"]
        slurm = true
        kubernetes = true
        [demo]
        seed = 7
        speed = 60
        size = "16x8"
        [policy]
        min_runtime = "1h"
        scale_in_utilization_pct = 40
        queue_wait_threshold = "5m"
        "#,
        "t.toml",
    );
    let Ok(cfg) = cfg else { panic!("{cfg:?}") };
    assert!(cfg.read_only);
    assert_eq!(cfg.refresh, Duration::from_secs(2));
    assert_eq!(cfg.sources.nvml, Some(Some("/opt/nvidia/libnvidia-ml.so.1".into())));
    assert_eq!(cfg.sources.kubernetes, Some(None));
    assert_eq!(cfg.demo.size, Some((16, 8)));
    assert_eq!(cfg.demo.speed, 60.0);
    assert_eq!(cfg.policy.min_runtime, Duration::from_secs(3600));
    assert!(cfg.sources.any_real());
}

#[test]
fn errors_name_the_file_the_key_and_the_value() {
    let cases = [
        (
            "[policy]\nmin_runtime = \"30x\"",
            "t.toml: policy.min_runtime = \"30x\": unknown unit \"x\" in \"30x\": use ms, s, m, h or d",
        ),
        (
            "[policy]\nscale_in_utilization_pct = 140",
            "t.toml: policy.scale_in_utilization_pct = 140: expected a percentage from 0 to 100",
        ),
        (
            "[sources]\nprometheus = \"prom:9090\"",
            "t.toml: sources.prometheus = \"prom:9090\": expected an http:// or https:// URL (the scheme is prom)",
        ),
        ("read_only = \"yes\"", "t.toml: read_only = \"yes\": expected true or false"),
        (
            "[sources]\nprometheus_api = \"grpc\"",
            "t.toml: sources.prometheus_api = \"grpc\": expected \"auto\", \"query\" or \"federate\"",
        ),
        (
            "[sources]\nslurmm = true",
            "t.toml: sources.slurmm: unknown key; known keys here: demo, nvml, prometheus, prometheus_query, prometheus_queue, prometheus_api, scrape, scrape_node, slurm, kubernetes, http, auth, memory_budget, promql",
        ),
        ("[demo]\nsize = \"8by8\"", "t.toml: demo.size = \"8by8\": expected NODESxGPUS such as 512x8, got \"8by8\""),
        ("refresh = \"10ms\"", "t.toml: refresh = \"10ms\": must be at least 100ms"),
        (
            "refresh = \"10000000000000000000s\"",
            "t.toml: refresh = \"10000000000000000000s\": \"10000000000000000000s\" is too long: at most 3650d",
        ),
        // A duration that would saturate is refused, not clamped (the workloads view and the
        // guard would disagree about it).
        (
            "[policy]\nmin_runtime = \"99999999999d\"",
            "t.toml: policy.min_runtime = \"99999999999d\": \"99999999999d\" is too long: at most 3650d",
        ),
        (
            "[sources.http]\ntimeout = \"0s\"",
            "t.toml: sources.http.timeout = \"0s\": expected a timeout between 1ms and 1h",
        ),
        ("[slurm]\ntimeout = \"3650d\"", "t.toml: slurm.timeout = \"3650d\": expected a timeout between 1ms and 1h"),
        (
            "[sources]\nscrape = [\"http://\"]",
            "t.toml: sources.scrape = \"http://\": expected an http:// or https:// URL (not a URL: empty host)",
        ),
        (
            "[sources]\nprometheus = \"http://[::1\"",
            "t.toml: sources.prometheus = \"http://[::1\": expected an http:// or https:// URL (not a URL: invalid IPv6 address)",
        ),
        ("[sources]\nmemory_budget = \"1KiB\"", "t.toml: sources.memory_budget = \"1KiB\": expected at least 1MiB"),
        (
            "[sources]\nmemory_budget = \"1000TiB\"",
            "t.toml: sources.memory_budget = \"1000TiB\": expected at most 64GiB (the sources' reads together; the default is 192MiB)",
        ),
        (
            "[[schedule]]\nname = \"s\"\nnodes = [\"*\"]\nlead = \"3650d\"",
            "t.toml: schedule[0].lead = \"3650d\": expected at most 24h (cards drain this long before a change)",
        ),
        (
            "[[sources.auth]]\nbearer_token_env = \"T\"",
            "t.toml: sources.auth[0].url: the origin these credentials are for, e.g. https://gpu-1:9400",
        ),
        (
            "[[sources.auth]]\nurl = \"https://a:1\"",
            "t.toml: sources.auth[0]: no credential: set bearer_token_file, bearer_token_env or basic_user",
        ),
        (
            "[[sources.auth]]\nurl = \"https://a:1\"\nbearer_token_env = \"T\"\nbasic_user = \"u\"",
            "t.toml: sources.auth[0]: set either a bearer token or basic auth, not both",
        ),
        (
            "[sources.http]\nbearer_token_env = \"T\"\nbasic_user = \"u\"",
            "t.toml: sources.http: set either a bearer token or basic auth, not both",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(parse(text, "t.toml").map_err(|e| e.to_string()), Err(want.to_string()), "{text}");
    }
    // Where, as an editor counts (it said "byte 7").
    let syntax = parse("read_only = true\n[policy\n", "t.toml").map_err(|e| e.to_string());
    assert!(
        syntax.as_ref().is_err_and(|e| e.starts_with("t.toml: line 2, column ") && e.contains("not valid TOML")),
        "{syntax:?}"
    );
    // 10,000 schedules: refused by count, not evaluated every second.
    let many: String = (0..10_000)
        .map(|i| format!("[[schedule]]\nname = \"s{i}\"\nnodes = [\"*\"]\n[[schedule.window]]\nname = \"w\"\nhours = \"00:00-24:00\"\nlayout = \"whole\"\n"))
        .collect();
    let err = parse(&many, "t.toml").map_err(|e| e.to_string());
    assert_eq!(err, Err("t.toml: schedule = 10000: at most 64 schedules (this file has 10000)".to_string()));
}

#[test]
fn sizes_parse() {
    assert_eq!(parse_size("512x8"), Ok((512, 8)));
    assert!(parse_size("0x8").is_err());
    assert!(parse_size("8").is_err());
    assert!(parse_size("8x99").is_err());
}

#[test]
fn per_field_promql() {
    let cfg = parse("[sources.promql]\ntemperature = 'max_over_time(DCGM_FI_DEV_GPU_TEMP[1m])'\n", "t.toml");
    assert_eq!(
        cfg.map(|c| c.sources.promql),
        Ok(vec![("temperature".to_string(), "max_over_time(DCGM_FI_DEV_GPU_TEMP[1m])".to_string())])
    );
    let err = parse("[sources.promql]\ntemp = 'x'\n", "t.toml").map_err(|e| e.to_string());
    assert!(err.is_err_and(|e| e.starts_with("t.toml: sources.promql.temp: unknown key; known keys here: gpu_util")));
}

#[test]
fn a_huge_bad_value_is_quoted_short() {
    let text = format!("[policy]\nmin_runtime = \"{}\"", "x".repeat(100_000));
    let e = parse(&text, "t.toml").map_err(|e| e.to_string()).err().unwrap_or_default();
    assert!(e.len() < 600, "{} bytes", e.len());
    assert!(e.contains("… (100002 characters)"), "{e}");
}

#[test]
fn credentials_per_origin_and_the_budget_parse() {
    let cfg = parse(
        "[sources]\nmemory_budget = \"64MiB\"\n[[sources.auth]]\nurl = \"https://gpu-1:9400\"\nbearer_token_file = \"/t\"\n\
         [[sources.auth]]\nurl = \"http://gpu-2:9400\"\nbasic_user = \"u\"\nallow_plain_http = true\n",
        "t.toml",
    );
    let Ok(cfg) = cfg else { panic!("{cfg:?}") };
    assert_eq!(cfg.sources.memory_budget, Some(64 << 20));
    assert_eq!(cfg.sources.auth.len(), 2);
    assert!(cfg.sources.auth[1].credentials.allow_plain_http);
    let twice = "[[sources.auth]]\nurl = \"https://a\"\nbasic_user = \"u\"\n[[sources.auth]]\nurl = \"https://a:443/x\"\nbasic_user = \"v\"\n";
    let e = parse(twice, "t.toml").map_err(|e| e.to_string());
    assert_eq!(e, Err("t.toml: sources.auth[1]: a second [[sources.auth]] for the same origin".to_string()));
}

#[test]
fn urls_in_bad_values_are_quoted_without_their_credentials() {
    for text in
        ["[sources]\nscrape = \"http://u:SECRET@h/m?t=SECRET\"", "[sources]\nscrape = [\"http://u:SECRET@h/m\", 3]"]
    {
        let e = parse(text, "t.toml").map_err(|e| e.to_string()).err().unwrap_or_default();
        assert!(!e.contains("SECRET") && e.contains("http://h/m"), "{e}");
    }
}
