//! The timeline on the simulated cluster and the mig-parted export against NVIDIA's own config.

use super::*;
use chrono::TimeZone;

fn cfg(text: &str) -> crate::config::Config {
    crate::config::parse(text, "t.toml").unwrap_or_else(|e| panic!("{e}"))
}

const TWO_WINDOWS: &str = include_str!("../tests/fixtures/schedules/h100-day-night.toml");

#[test]
fn tomorrows_changes_on_the_simulated_cluster() {
    let at = Utc.with_ymd_and_hms(2026, 3, 2, 14, 30, 0).single().unwrap_or_default();
    let fleet = crate::engine::simulated_store(42, at).fleet().clone();
    let c = cfg(TWO_WINDOWS);
    let t = timelines(&c.schedules, &fleet, at, std::time::Duration::from_secs(1800), 24);
    let t = &t[0];
    // One H100 node: the other is DynamicMIG since issue 49, laid out per claim, no schedule's.
    assert_eq!(t.cards.len(), 8, "the static H100 node");
    for card in &t.cards {
        assert_eq!(card.window_now.as_deref(), Some("day"));
        let at: Vec<String> = card.steps.iter().map(|s| s.at.format("%H:%M").to_string()).collect();
        // Cards without the day layout are overdue: their change is due now.
        let overdue = card.layout_now != ["1g.10gb"; 7].join(",");
        let want: &[&str] = if overdue { &["14:30", "20:00", "08:00"] } else { &["20:00", "08:00"] };
        assert_eq!(at, want, "{}", card.card);
        let first = &card.steps[0];
        assert_eq!(first.drain_at, first.at - chrono::Duration::minutes(15));
    }
    // An idle whole card: due now (ready), whole again at 20:00, the day layout at 08:00.
    let idle = t.cards.iter().find(|c| c.card == CardRef::new("gpu-h100-01", 6)).unwrap_or_else(|| panic!("card"));
    let seen: Vec<(&str, bool, &str)> =
        idle.steps.iter().map(|s| (s.window.as_str(), s.no_op, s.readiness.as_str())).collect();
    assert_eq!(
        seen,
        [("day", false, "ready: idle now"), ("night", false, "ready: idle now"), ("day", false, "ready: idle now")]
    );
    // With min_hold 8 h the day window, due now, ends in 5.5 h: changing to it would hold the
    // card past 20:00, so it is skipped and the night's change comes on time (whole: nothing
    // to do), then the day's at 08:00. (The day's change was made and the night's skipped.)
    let held = cfg(&TWO_WINDOWS.replace("min_hold = \"4h\"", "min_hold = \"8h\""));
    let t8 = timelines(&held.schedules, &fleet, at, std::time::Duration::from_secs(1800), 24);
    let idle = t8[0].cards.iter().find(|c| c.card == CardRef::new("gpu-h100-01", 6)).unwrap_or_else(|| panic!("card"));
    let seen: Vec<(bool, bool)> = idle.steps.iter().map(|s| (s.skipped.is_some(), s.no_op)).collect();
    assert_eq!(seen, [(true, false), (false, true), (false, false)], "{idle:#?}");
    assert!(idle.steps[0].requires.is_empty() && idle.steps[0].readiness == "skipped");
    let why = idle.steps[0].skipped.clone().unwrap_or_default();
    assert!(why.starts_with("window night changes the card at 20:00 UTC, within min_hold (8h)"), "{why}");
    // A window that only starts again with its own layout holds nothing: a whole-day window
    // with min_hold 2d is changed to now (it was skipped for ever), and so is a lone night
    // window with nothing after it.
    for text in [
        "[[schedule]]\nname = \"a\"\nnodes = [\"gpu-h100-*\"]\nmodel = \"H100-80GB\"\nmin_hold = \"2d\"\n[[schedule.window]]\nname = \"always\"\nhours = \"00:00-24:00\"\nmig_config = \"all-1g.10gb\"\n",
        "[[schedule]]\nname = \"n\"\nnodes = [\"gpu-h100-*\"]\nmodel = \"H100-80GB\"\nmin_hold = \"8h\"\n[[schedule.window]]\nname = \"late\"\nhours = \"14:00-22:00\"\nmig_config = \"all-1g.10gb\"\n",
    ] {
        let c = cfg(text);
        let t = timelines(&c.schedules, &fleet, at, std::time::Duration::from_secs(1800), 24);
        let idle =
            t[0].cards.iter().find(|c| c.card == CardRef::new("gpu-h100-01", 6)).unwrap_or_else(|| panic!("card"));
        assert!(idle.steps[0].due && idle.steps[0].skipped.is_none(), "{text}: {:#?}", idle.steps[0]);
    }
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
    assert!(
        text.contains(
            "kubectl label node NODE nvidia.com/mig.config=all-1g.10gb nvidia.com/mig.config.state- --overwrite"
        ),
        "{text}"
    );
    assert!(text.contains(r"nvidia\.com/mig\.config\.state}'=success"), "{text}");
    // Day in MIG, night whole: the export says what the switch of MIG mode takes.
    assert!(text.contains("MIG mode switches between these windows: H100-80GB switches without a GPU reset"), "{text}");
    let a100 = TWO_WINDOWS.replace("model = \"H100-80GB\"", "model = \"A100-80GB\"");
    let t = export::mig_parted(&cfg(&a100).schedules, None).unwrap_or_else(|e| panic!("{e}"));
    assert!(t.contains("on A100-80GB (Ampere) that needs a GPU reset"), "{t}");
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

#[test]
fn one_config_name_for_two_layouts_is_an_error() {
    // all-1g.10gb is 7 instances on an A100-80GB and 4 on an A100-40GB: one name, two layouts.
    let two = format!(
        "{}\n{}",
        TWO_WINDOWS,
        TWO_WINDOWS.replace("name = \"h100\"", "name = \"a100-40\"").replace("H100-80GB", "A100-SXM4-40GB")
    );
    let e = export::mig_parted(&cfg(&two).schedules, None).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("all-1g.10gb means different layouts"), "{e}");
}
