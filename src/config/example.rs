//! The commented example config that `tessera check-config --example` prints.

use super::{Config, scheduler};
use crate::units::duration;

/// The commented example config, built from the defaults so it cannot drift from them: one
/// section after another, a blank line between.
pub fn example() -> String {
    let d = Config::default();
    format!(
        "{top}\n{sources}\n{http}\n{demo}\n{policy}{scheduler}\n{actions}{advisor}{schedule}",
        top = top(&d),
        sources = SOURCES,
        http = sources_http(&d),
        demo = demo(&d),
        policy = policy(&d),
        scheduler = scheduler::example(),
        actions = super::actions::example(),
        advisor = super::advisor::example(),
        schedule = super::schedule::example(),
    )
}

/// The file's opening comment and the top-level keys.
fn top(d: &Config) -> String {
    format!(
        r#"# tessera configuration: $XDG_CONFIG_HOME/tessera/config.toml (else ~/.config/tessera/config.toml).
# Check a file with `tessera check-config [PATH]`. Every key is optional; the values shown are
# the defaults. Command-line flags override the file.

# Refuse every action and hide the action keys (SSH dashboards).
read_only = {read_only}
# How often sources are polled and the screen may redraw.
refresh = "{refresh}"
# A theme name (default, light, high-contrast, colorblind, mono) or a path to a theme file.
# theme = "default"
"#,
        read_only = d.read_only,
        refresh = duration::format(d.refresh),
    )
}

/// `[sources]`: which sources run and how their cards are named.
const SOURCES: &str = r#"[sources]
# With no source configured (and no GPU found) tessera runs the simulated cluster.
# Set demo = true to run it alongside (or instead of) real sources.
demo = false
# Local GPUs through NVML: true for the system library, or a path to libnvidia-ml.so.1.
# nvml = true
# A Prometheus server that scrapes dcgm-exporter.
# prometheus = "http://prometheus.example:9090"
# The instant query whose series are mapped like dcgm-exporter's (the default selects the DCGM
# families tessera reads); use it to add label filters, e.g. {__name__=~"DCGM_FI_.*",cluster="a"}.
# prometheus_query = '{__name__=~"DCGM_FI_.*",cluster="a"}'
# Also read the queue from Prometheus: pending pods that request GPUs (kube-state-metrics)
# and Kueue's pending count.
prometheus_queue = false
# Where the cards come from: "auto" reads the federation endpoint (/federate, exposition text,
# the fastest) where the server has one and prometheus_query is not set, else instant queries;
# "query" always uses instant queries, "federate" always the federation endpoint.
prometheus_api = "auto"
# dcgm-exporter endpoints to scrape directly.
# scrape = ["http://gpu-node-1.example:9400/metrics"]
# Slurm queue and nodes from squeue/sinfo JSON on this host (see [slurm]).
# slurm = true
# Kubernetes: true for the current kubeconfig context, or a context name.
# kubernetes = "prod-gpu"
# Node names of scraped cards: "target" (the scrape URL's host; tunnels sharing localhost are
# named by their label, else host:port) or "label" (dcgm-exporter's Hostname label, often the
# exporter pod's name unless NODE_NAME is set; all-smi's instance).
scrape_node = "target"
# The memory that responses and command output take while they are read, for all sources
# together: past it a read fails (and says so) instead of taking more. Each response is also
# capped at 256MiB. A Prometheus answer takes about 5KB a GPU: past some 35,000 GPUs, raise it.
# memory_budget = "192MiB"
"#;

/// `[sources.http]`, `[[sources.auth]]` and `[sources.promql]`: how the HTTP sources connect.
fn sources_http(d: &Config) -> String {
    format!(
        r#"[sources.http]
# Transport for every HTTP source (Prometheus, the exporters, slurmrestd).
connect_timeout = "{connect}"
timeout = "{timeout}"
# A private CA (PEM) that signed the servers' certificates, or a server's own self-signed
# certificate if it is not marked CA:TRUE (docs/sources.md, TLS).
# ca_file = "/etc/ssl/certs/internal-ca.pem"
insecure_skip_verify = false
# The Prometheus server's credentials, sent to it only (never to the exporters). Credentials
# never appear on screen or in logs, and are refused over plain http unless allow_plain_http.
# bearer_token_file = "/var/run/secrets/prometheus/token"
# bearer_token_env = "PROMETHEUS_TOKEN"
# basic_user = "tessera"
# basic_password_file = "/etc/tessera/prometheus-password"
# allow_plain_http = false

# Credentials for one origin (scheme://host:port) each: a scrape target, slurmrestd behind a
# proxy. Sent to that origin only; the same keys as above.
# [[sources.auth]]
# url = "https://gpu-node-1.example:9400"
# bearer_token_file = "/etc/tessera/gpu-node-1.token"

# Per-field PromQL for the Prometheus source: any of gpu_util, gr_engine_active, fb_used,
# fb_free, temperature, power, power_limit, sm_clock, mem_clock, xid, ecc_dbe. Each replaces
# that field's series from prometheus_query; keep the labels gpu, UUID and instance (or
# Hostname) in the answer.
# [sources.promql]
# temperature = 'max_over_time(DCGM_FI_DEV_GPU_TEMP[1m])'
"#,
        connect = duration::format(d.sources.http.connect_timeout),
        timeout = duration::format(d.sources.http.timeout),
    )
}

/// `[demo]`: the simulated cluster.
fn demo(d: &Config) -> String {
    format!(
        r#"[demo]
# The simulated cluster: the same seed gives the same cluster.
seed = {seed}
# Simulated seconds per real second.
speed = {speed:?}
# NODESxGPUS to scale it up, for load and render testing.
# size = "512x8"
"#,
        seed = d.demo.seed,
        speed = d.demo.speed,
    )
}

/// `[policy]`: when preemption, scale-in and scale-out are suggested.
fn policy(d: &Config) -> String {
    format!(
        r#"[policy]
# Training may be preempted only after running this long (checkpoints are costly).
min_runtime = "{min_runtime}"
# Suggest scale-in when utilisation stays under this percentage.
scale_in_utilization_pct = {scale_in:?}
# Suggest scale-out when a workload has waited longer than this.
queue_wait_threshold = "{wait}"
"#,
        min_runtime = duration::format(d.policy.min_runtime),
        scale_in = d.policy.scale_in_utilization_pct,
        wait = duration::format(d.policy.queue_wait_threshold),
    )
}
