//! The simulated cluster's example schedule, used where no `[[schedule]]` is configured and
//! the simulator runs, so the timeline, the console's banner and `apply` show on the embedded
//! default.

/// The simulated cluster's example: its H100 nodes in small instances by day, whole at night.
pub const DEMO: &str = r#"
[[schedule]]
name = "demo-h100-day-night"
nodes = ["gpu-h100-*"]
model = "H100-80GB"
timezone = "UTC"
lead = "15m"
min_hold = "4h"
running = "wait"
[[schedule.window]]
name = "day"
hours = "08:00-20:00"
days = ["mon-fri"]
mig_config = "all-1g.10gb"
[[schedule.window]]
name = "night"
hours = "20:00-08:00"
days = ["all"]
layout = "whole"
"#;

/// The configured schedules, or on the simulated cluster with none configured its example
/// (`true`); `None` when there are none to use.
pub fn effective(
    cfg: &crate::config::Config,
    simulated: bool,
) -> Option<(Vec<crate::model::schedule::Schedule>, bool)> {
    if !cfg.schedules.is_empty() {
        return Some((cfg.schedules.clone(), false));
    }
    if !simulated {
        return None;
    }
    crate::config::parse(DEMO, "the built-in demo schedule").ok().map(|c| (c.schedules, true))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_example_parses_and_stands_in_only_on_the_simulated_cluster() {
        let cfg = crate::config::Config::default();
        let (s, demo) = super::effective(&cfg, true).unwrap_or_else(|| panic!("the example parses"));
        assert!(demo && s.len() == 1 && s[0].name == "demo-h100-day-night");
        assert!(super::effective(&cfg, false).is_none());
    }
}
