//! The timeline on the simulated cluster and the mig-parted export against NVIDIA's own config.

use super::*;
use chrono::TimeZone;

fn cfg(text: &str) -> crate::config::Config {
    crate::config::parse(text, "t.toml").unwrap_or_else(|e| panic!("{e}"))
}

const TWO_WINDOWS: &str = r#"
[[schedule]]
name = "h100"
nodes = ["gpu-h100-*"]
model = "H100-80GB"
timezone = "UTC"
lead = "15m"
min_hold = "4h"
running = "preempt"
[[schedule.window]]
name = "day"
hours = "08:00-20:00"
mig_config = "all-1g.10gb"
[[schedule.window]]
name = "night"
hours = "20:00-08:00"
layout = "whole"
"#;

#[test]
fn tomorrows_changes_on_the_simulated_cluster() {
    let at = Utc.with_ymd_and_hms(2026, 3, 2, 14, 30, 0).single().unwrap_or_default();
    let fleet = crate::engine::simulated_store(42, at).fleet().clone();
    let c = cfg(TWO_WINDOWS);
    let t = timelines(&c.schedules, &fleet, at, std::time::Duration::from_secs(1800), 24);
    let t = &t[0];
    assert_eq!(t.cards.len(), 16, "both H100 nodes");
    for card in &t.cards {
        assert_eq!(card.window_now.as_deref(), Some("day"));
        let at: Vec<String> = card.steps.iter().map(|s| s.at.format("%H:%M").to_string()).collect();
        assert_eq!(at, ["20:00", "08:00"], "{}", card.card);
        assert_eq!(card.steps[0].drain_at, card.steps[0].at - chrono::Duration::minutes(15));
    }
    // A whole idle card: night is whole already (nothing to do), day makes it 7 × 1g.10gb.
    let idle = t.cards.iter().find(|c| c.card == CardRef::new("gpu-h100-01", 6)).unwrap_or_else(|| panic!("card"));
    assert!(idle.steps[0].no_op && !idle.steps[1].no_op, "{idle:#?}");
    assert_eq!(idle.steps[1].readiness, "ready: idle now");
    // A card held by training: preempt after confirmation (past the minimum runtime), never inference.
    for card in &t.cards {
        for step in &card.steps {
            for n in &step.requires {
                if n.kind == "inference" {
                    assert!(!n.preemptible, "{n:?}");
                    assert!(n.verdict.contains("never preempted"), "{n:?}");
                }
            }
        }
    }
    let busy =
        t.cards.iter().flat_map(|c| &c.steps).find(|s| !s.requires.is_empty()).unwrap_or_else(|| panic!("a held card"));
    assert!(busy.readiness.starts_with("preempts") || busy.readiness.starts_with("waits"), "{busy:?}");
}

#[test]
fn the_export_is_mig_parted_format_with_nvidias_counts() {
    let c = cfg(TWO_WINDOWS);
    let text = export::mig_parted(&c.schedules, None).unwrap_or_else(|e| panic!("{e}"));
    let body: String = text.lines().filter(|l| !l.starts_with('#')).map(|l| format!("{l}\n")).collect();
    assert_eq!(
        body,
        "version: v1\nmig-configs:\n  all-1g.10gb:\n    - devices: all\n      mig-enabled: true\n      mig-devices:\n        \"1g.10gb\": 7\n  h100-night:\n    - devices: all\n      mig-enabled: false\n"
    );
    assert!(text.contains("kubectl label node NODE nvidia.com/mig.config=all-1g.10gb --overwrite"), "{text}");
    assert!(text.contains(r"nvidia\.com/mig\.config\.state}'=success"), "{text}");
    // The count is the one NVIDIA's GPU Operator ships for an H100-80GB's all-1g.10gb.
    let nvidia = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/mig-parted/configmap.default-mig-parted-config.gpu-operator.yaml"),
    )
    .unwrap_or_default();
    let block = nvidia.split("all-1g.10gb:").nth(1).unwrap_or_default();
    let first = block.split("\n\n").next().unwrap_or_default();
    assert!(first.contains("H100-80GB") && first.contains("\"1g.10gb\": 7"), "{first}");
}
