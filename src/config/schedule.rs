//! `[[schedule]]`: MIG schedules, each a group of cards (node globs, a GPU model), a time zone,
//! `lead`, `min_hold`, what to do with running work, and `[[schedule.window]]` entries with
//! hours, days and a layout (a tessera layout or a named mig-parted config). Layouts are
//! checked against the model's MIG rules and windows may not overlap.

use toml::{Table, Value};

use super::{ConfigError, Reader};
use crate::model::schedule::{Running, Schedule, Window, parse_days, parse_hours};

/// A day of drains ahead is the most a change can need.
const MAX_LEAD: std::time::Duration = std::time::Duration::from_secs(24 * 3600);
const MAX_HOLD: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);
/// Schedules and windows a config may hold: more is a generated file gone wrong, and each is
/// evaluated every second by an unattended console (10,000 took 80 % of a core).
const MAX_SCHEDULES: usize = 64;
const MAX_WINDOWS: usize = 48;

pub(super) fn read_schedules(r: &Reader, v: &Value, out: &mut Vec<Schedule>) -> Result<(), ConfigError> {
    let list = v.as_array().ok_or_else(|| r.bad("schedule", v, "expected [[schedule]] entries"))?;
    if list.len() > MAX_SCHEDULES {
        return Err(r.bad(
            "schedule",
            &Value::Integer(i64::try_from(list.len()).unwrap_or(i64::MAX)),
            format!("at most {MAX_SCHEDULES} schedules (this file has {})", list.len()),
        ));
    }
    for (i, item) in list.iter().enumerate() {
        let key = format!("schedule[{i}]");
        let t = item.as_table().ok_or_else(|| r.bad(&key, item, "expected a [[schedule]] table"))?;
        let s = read_one(r, &key, t)?;
        if out.iter().any(|o| o.name == s.name) {
            return Err(r.bad(
                &format!("{key}.name"),
                &Value::String(s.name.clone()),
                "another schedule has this name",
            ));
        }
        out.push(s);
    }
    Ok(())
}

/// A name that is safe as a mig-parted config key and a Kubernetes label value: letters,
/// digits, `.`, `_`, `-`, at most 63, beginning and ending with a letter or digit.
fn name(r: &Reader, key: &str, v: &Value) -> Result<String, ConfigError> {
    let s = r.string(key, v)?;
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if s.is_empty() || s.len() > 63 || !s.chars().all(ok_char) || !ends(s.chars().next()) || !ends(s.chars().last()) {
        return Err(r.bad(
            key,
            v,
            "expected a name of letters, digits, '.', '_' and '-' (at most 63, a letter or digit at each end): it becomes a mig-parted config name and a label value",
        ));
    }
    Ok(s)
}

fn strings(r: &Reader, key: &str, v: &Value) -> Result<Vec<String>, ConfigError> {
    match v {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(a) => a.iter().map(|x| r.string(key, x)).collect(),
        _ => Err(r.bad(key, v, "expected a string or a list of strings")),
    }
}

fn read_one(r: &Reader, key: &str, t: &Table) -> Result<Schedule, ConfigError> {
    let name = match t.get("name") {
        Some(v) => name(r, &format!("{key}.name"), v)?,
        None => return Err(r.missing(&format!("{key}.name"), "every schedule needs a name")),
    };
    let mut s = Schedule {
        name,
        nodes: Vec::new(),
        node_labels: Vec::new(),
        model: None,
        tz_name: "UTC".into(),
        tz: jiff::tz::TimeZone::UTC,
        windows: Vec::new(),
        lead: std::time::Duration::from_secs(15 * 60),
        min_hold: std::time::Duration::from_secs(4 * 3600),
        running: Running::Wait,
        unattended: false,
    };
    let mut windows: Option<&Value> = None;
    for (k, v) in t {
        let kk = format!("{key}.{k}");
        match k.as_str() {
            "name" => {}
            "nodes" => s.nodes = strings(r, &kk, v)?,
            "node_labels" => s.node_labels.extend(node_labels(r, &kk, v)?),
            "model" => s.model = Some(model(r, &kk, v)?),
            "timezone" => {
                let z = r.string(&kk, v)?;
                s.tz = jiff::tz::TimeZone::get(&z)
                    .map_err(|_| r.bad(&kk, v, "not an IANA time zone (like \"Europe/Berlin\" or \"UTC\")"))?;
                s.tz_name = z;
            }
            "lead" => {
                s.lead = r.duration(&kk, v)?;
                if s.lead > MAX_LEAD {
                    return Err(r.bad(&kk, v, "expected at most 24h (cards drain this long before a change)"));
                }
            }
            "min_hold" => {
                s.min_hold = r.duration(&kk, v)?;
                if s.min_hold > MAX_HOLD {
                    return Err(r.bad(&kk, v, "expected at most 7d (a layout is kept at least this long)"));
                }
            }
            "running" => {
                s.running = match r.string(&kk, v)?.as_str() {
                    "wait" => Running::Wait,
                    "preempt" => Running::Preempt,
                    _ => return Err(r.bad(&kk, v, "expected \"wait\" or \"preempt\" (eligible training, confirmed)")),
                }
            }
            "window" => windows = Some(v),
            "unattended" => s.unattended = r.boolean(&kk, v)?,
            _ => {
                return Err(r.unknown(
                    &kk,
                    &[
                        "name",
                        "nodes",
                        "node_labels",
                        "model",
                        "timezone",
                        "lead",
                        "min_hold",
                        "running",
                        "unattended",
                        "window",
                    ],
                ));
            }
        }
    }
    let Some(windows) = windows else {
        return Err(r.missing(&format!("{key}.window"), "a schedule needs [[schedule.window]] entries"));
    };
    s.windows = read_windows(r, key, windows, s.model.as_deref())?;
    Ok(s)
}

/// `node_labels`: each `KEY=VALUE`.
fn node_labels(r: &Reader, key: &str, v: &Value) -> Result<Vec<(String, String)>, ConfigError> {
    let mut out = Vec::new();
    for l in strings(r, key, v)? {
        match l.split_once('=') {
            Some((k, val)) if !k.trim().is_empty() => out.push((k.trim().to_string(), val.trim().to_string())),
            _ => return Err(r.bad(key, v, format!("{l:?}: a label is KEY=VALUE"))),
        }
    }
    Ok(out)
}

/// `model`: a MIG-capable model of the catalog (the nearest names suggested).
fn model(r: &Reader, key: &str, v: &Value) -> Result<String, ConfigError> {
    let m = r.string(key, v)?;
    if crate::model::mig::lookup(&m).is_none() {
        let near = crate::model::mig::suggest(&m);
        let why = if near.is_empty() {
            "not a MIG-capable model tessera knows (tessera layouts MODEL lists them)".to_string()
        } else {
            format!("not a MIG-capable model tessera knows; did you mean {}?", near.join(" or "))
        };
        return Err(r.bad(key, v, &why));
    }
    Ok(m)
}

/// A schedule's `[[schedule.window]]` entries: at most `MAX_WINDOWS`, names unique, none
/// overlapping another.
fn read_windows(r: &Reader, key: &str, windows: &Value, model: Option<&str>) -> Result<Vec<Window>, ConfigError> {
    let mut out: Vec<Window> = Vec::new();

    let list = windows
        .as_array()
        .ok_or_else(|| r.bad(&format!("{key}.window"), windows, "expected [[schedule.window]] entries"))?;
    if list.len() > MAX_WINDOWS {
        let n = Value::Integer(i64::try_from(list.len()).unwrap_or(i64::MAX));
        return Err(r.bad(&format!("{key}.window"), &n, format!("at most {MAX_WINDOWS} windows a schedule")));
    }
    for (j, w) in list.iter().enumerate() {
        let wk = format!("{key}.window[{j}]");
        let wt = w.as_table().ok_or_else(|| r.bad(&wk, w, "expected a [[schedule.window]] table"))?;
        let win = read_window(r, &wk, wt, model)?;
        if out.iter().any(|o| o.name == win.name) {
            return Err(r.bad(&format!("{wk}.name"), &Value::String(win.name.clone()), "another window has this name"));
        }
        out.push(win);
    }
    if let Some((a, b, at)) = overlap(&out) {
        return Err(r.bad(
            &format!("{key}.window"),
            &Value::String(format!("{a}, {b}")),
            format!("windows {a:?} and {b:?} overlap ({at}): a card can have one layout at a time"),
        ));
    }
    Ok(out)
}

fn read_window(r: &Reader, key: &str, t: &Table, model: Option<&str>) -> Result<Window, ConfigError> {
    let mut w = Window {
        name: String::new(),
        start_min: 0,
        end_min: 0,
        days: [true; 7],
        layout: String::new(),
        mig_config: None,
    };
    let mut hours = None;
    for (k, v) in t {
        let kk = format!("{key}.{k}");
        match k.as_str() {
            "name" => w.name = name(r, &kk, v)?,
            "hours" => {
                let (s, e) = parse_hours(&r.string(&kk, v)?).map_err(|why| r.bad(&kk, v, &why))?;
                (w.start_min, w.end_min) = (s, e);
                hours = Some(());
            }
            "days" => w.days = parse_days(&strings(r, &kk, v)?).map_err(|why| r.bad(&kk, v, &why))?,
            "layout" | "mig_config" if !w.layout.is_empty() => {
                return Err(r.bad(&kk, v, "give a window either layout or mig_config, not both"));
            }
            "layout" => {
                let text = r.string(&kk, v)?;
                w.layout = check_layout(model, &text).map_err(|why| r.bad(&kk, v, &why))?;
            }
            "mig_config" => {
                let n = name(r, &kk, v)?;
                w.layout = from_mig_config(model, &n).map_err(|why| r.bad(&kk, v, &why))?;
                w.mig_config = Some(n);
            }
            _ => return Err(r.unknown(&kk, &["name", "hours", "days", "layout", "mig_config"])),
        }
    }
    if w.name.is_empty() {
        return Err(r.missing(&format!("{key}.name"), "every window needs a name"));
    }
    if hours.is_none() {
        return Err(r.missing(&format!("{key}.hours"), "every window needs hours, like \"08:00-20:00\""));
    }
    if w.layout.is_empty() {
        return Err(r.missing(&format!("{key}.layout"), "every window needs a layout or a mig_config"));
    }
    Ok(w)
}

/// A layout text valid for `model` (when named), in the form `repartition` takes.
fn check_layout(model: Option<&str>, text: &str) -> Result<String, String> {
    let whole = text.trim().eq_ignore_ascii_case("whole") || text.trim().eq_ignore_ascii_case("off");
    if whole {
        return Ok("whole".into());
    }
    let Some(m) = model.and_then(crate::model::mig::lookup) else {
        return Err("a MIG layout needs the schedule's model (model = \"...\") to be checked".into());
    };
    crate::model::mig::parse_layout(m, text).map_err(|e| e.to_string())?;
    Ok(text.trim().to_string())
}

/// The layout of a mig-parted config named by NVIDIA's convention: `all-disabled` (whole),
/// `all-<profile>` (as many as the model holds); others need their mig-parted file.
fn from_mig_config(model: Option<&str>, name: &str) -> Result<String, String> {
    if name == "all-disabled" {
        return Ok("whole".into());
    }
    if matches!(name, "all-balanced" | "all-enabled") {
        return Err(format!(
            "{name} differs per GPU model in mig-parted's file; give this window's layout as layout = \"...\""
        ));
    }
    let Some(profile) = name.strip_prefix("all-") else {
        return Err("tessera knows all-disabled and all-<profile> (mig-parted's defaults); give other layouts as layout = \"...\"".into());
    };
    let m = model
        .and_then(crate::model::mig::lookup)
        .ok_or("all-<profile> needs the schedule's model (model = \"...\")")?;
    // mig-parted writes `+me` profiles as `.me` in config names.
    let profile = profile.replace(".me", "+me");
    let p = m.profile(&profile).ok_or_else(|| format!("{} has no {profile} profile", m.name))?;
    let text = vec![profile.as_str(); usize::from(p.max_count)].join(",");
    crate::model::mig::parse_layout(m, &text).map_err(|e| e.to_string())?;
    Ok(text)
}

/// Two windows that hold at the same local minute of the week, and when (local clock).
fn overlap(windows: &[Window]) -> Option<(String, String, String)> {
    let covers = |w: &Window, day: usize, minute: u32| {
        let (s, e) = (u32::from(w.start_min), u32::from(w.end_min));
        if e > s {
            w.days[day] && minute >= s && minute < e
        } else {
            (w.days[day] && minute >= s) || (w.days[(day + 6) % 7] && minute < e)
        }
    };
    const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
    for (day, name) in DAYS.iter().enumerate() {
        for minute in 0..24 * 60 {
            let on: Vec<&Window> = windows.iter().filter(|w| covers(w, day, minute)).collect();
            if let [a, b, ..] = on.as_slice() {
                let at = format!("{name} {:02}:{:02}", minute / 60, minute % 60);
                return Some((a.name.clone(), b.name.clone(), at));
            }
        }
    }
    None
}

/// The `[[schedule]]` part of the example config.
pub(super) fn example() -> String {
    r#"
# MIG schedules (tessera schedule): small instances by day, whole cards at night. Each entry
# names its cards (node globs, a GPU model), a time zone, how long before a change new work
# stops (lead), the least time between two changes of a card (min_hold), and what to do with
# work still running (wait, or preempt eligible training after confirmation; inference never).
# Cards that two schedules cover are reported as conflicts.
# [[schedule]]
# name = "a100-day-night"
# nodes = ["gpu-a100-*"]
# Kubernetes node labels that must all match, besides the globs, as KEY=VALUE
# ("nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB"); none: any node.
# node_labels = []
# model = "A100-80GB"
# timezone = "Europe/Berlin"
# lead = "15m"
# min_hold = "4h"
# running = "wait"
# Let `tessera schedule run` apply its changes headless (idle cards only, never preempting).
# unattended = false
# [[schedule.window]]
# name = "day"
# hours = "08:00-20:00"
# days = ["mon-fri"]
# mig_config = "all-1g.10gb"
# [[schedule.window]]
# name = "night"
# hours = "20:00-08:00"
# days = ["all"]
# layout = "whole"
"#
    .to_string()
}

#[cfg(test)]
mod tests {
    use crate::config::parse;

    /// The example, uncommented.
    fn example_text() -> String {
        let toml_line = |l: &str| l.starts_with('[') || l.contains(" = ");
        super::example()
            .lines()
            .filter_map(|l| l.strip_prefix("# ").filter(|l| toml_line(l)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn the_example_parses() {
        let cfg = parse(&example_text(), "t.toml").unwrap_or_else(|e| panic!("{e}"));
        let s = &cfg.schedules[0];
        assert_eq!((s.name.as_str(), s.tz_name.as_str(), s.windows.len()), ("a100-day-night", "Europe/Berlin", 2));
        assert_eq!(s.windows[0].layout, ["1g.10gb"; 7].join(","), "all-1g.10gb is seven on an A100-80GB");
        assert_eq!(s.windows[0].mig_config.as_deref(), Some("all-1g.10gb"));
        assert_eq!(s.windows[1].layout, "whole");
        let off = parse(&example_text().replace("layout = \"whole\"", "layout = \"off\""), "t.toml");
        assert_eq!(off.map(|c| c.schedules[0].windows[1].layout.clone()), Ok("whole".to_string()), "off is whole");
    }

    #[test]
    fn errors_name_the_key_and_value() {
        let base = example_text();
        let cases = [
            ("Europe/Berlin", "Mars/Olympus", "schedule[0].timezone", "IANA"),
            ("hours = \"20:00-08:00\"", "hours = \"19:00-08:00\"", "schedule[0].window", "overlap (Mon 19:00)"),
            ("mig_config = \"all-1g.10gb\"", "layout = \"7g.80gb,1g.10gb\"", "schedule[0].window[0].layout", ""),
            (
                "mig_config = \"all-1g.10gb\"",
                "mig_config = \"custom-7\"",
                "schedule[0].window[0].mig_config",
                "all-<profile>",
            ),
            ("running = \"wait\"", "running = \"kill\"", "schedule[0].running", "wait"),
            ("node_labels = []", "node_labels = [\"pool\"]", "schedule[0].node_labels", "KEY=VALUE"),
            ("model = \"A100-80GB\"", "model = \"NVIDIA L4\"", "schedule[0].model", "MIG-capable"),
            ("lead = \"15m\"", "lead = \"15m\"\ncolour = 1", "schedule[0].colour", "unknown key"),
            (
                "mig_config = \"all-1g.10gb\"",
                "mig_config = \"all-1g.10gb\"\nlayout = \"whole\"",
                "schedule[0].window[0].mig_config",
                "not both",
            ),
            ("name = \"a100-day-night\"", "name = \"a100 day/night\"", "schedule[0].name", "label value"),
            (
                "mig_config = \"all-1g.10gb\"",
                "mig_config = \"all-balanced\"",
                "schedule[0].window[0].mig_config",
                "differs per GPU model",
            ),
        ];
        for (from, to, key, why) in cases {
            let text = base.replacen(from, to, 1);
            let e = parse(&text, "t.toml").err().unwrap_or_else(|| panic!("{to} parsed"));
            assert_eq!(e.key, key, "{to}: {e}");
            assert!(e.why.contains(why), "{to}: {e}");
        }
        // Without a model a MIG layout cannot be checked; whole can.
        let text = base.replacen("model = \"A100-80GB\"\n", "", 1);
        let e = parse(&text, "t.toml").err().unwrap_or_else(|| panic!("parsed"));
        assert_eq!(e.key, "schedule[0].window[0].mig_config");
    }
}
