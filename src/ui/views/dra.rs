//! The card view's DRA lines: who allocates the card (pool, device, DynamicMIG and its
//! counter set), the MIG profiles its counters can still place, its health where nothing
//! reads it, its device taints (grouped), and the problems of what was published.

use ratatui::text::{Line, Span};

use crate::model::Card;
use crate::model::dra::DeviceTaint;
use crate::ui::theme::Theme;
use crate::ui::widgets::text::fit;

/// Taints alike (key, value, effect, set by a rule or the driver) counted, with the first
/// device and rule.
fn taint_groups(taints: &[DeviceTaint]) -> Vec<String> {
    let mut groups: Vec<(&DeviceTaint, usize)> = Vec::new();
    for t in taints {
        let same = |g: &&mut (&DeviceTaint, usize)| {
            g.0.key == t.key && g.0.value == t.value && g.0.effect == t.effect && g.0.rule.is_some() == t.rule.is_some()
        };
        match groups.iter_mut().find(same) {
            Some(g) => g.1 += 1,
            None => groups.push((t, 1)),
        }
    }
    groups
        .into_iter()
        .map(|(t, n)| {
            let value = t.value.as_deref().map(|v| format!("={v}")).unwrap_or_default();
            let by = match &t.rule {
                Some(r) if n > 1 => format!("{n} DeviceTaintRules, first {r}"),
                Some(r) => format!("DeviceTaintRule {r} on {}", t.device),
                None => format!(
                    "published by the driver on {}{}",
                    t.device,
                    if n > 1 { format!(" and {} more", n - 1) } else { String::new() }
                ),
            };
            format!("taint {}{value}:{} ({by})", t.key, t.effect)
        })
        .collect()
}

/// The lines, empty for a card DRA does not publish.
pub fn lines(card: &Card, w: usize, theme: &Theme, a: bool) -> Vec<Line<'static>> {
    let Some(d) = card.dra.as_deref() else { return Vec::new() };
    let dot = if a { " - " } else { " · " };
    let mut head = format!("allocated by DRA{dot}driver {}{dot}pool {}", d.driver, d.pool);
    if let Some(dev) = &d.device {
        head.push_str(&format!("{dot}device {dev}"));
    }
    head.push_str(&format!("{dot}{} devices published", d.devices));
    if d.dynamic {
        head.push_str(&format!("{dot}DynamicMIG, counter set {}", d.counter_set.as_deref().unwrap_or("?")));
    }
    let mut out = vec![Line::from(Span::styled(fit(&head, w, a), theme.text()))];
    if d.dynamic {
        let free = match &d.placeable {
            None => "can still place: unknown (see the problems below)".to_string(),
            Some(p) if p.is_empty() => "can still place: nothing (the counter set is used up)".to_string(),
            Some(p) => format!("can still place: {}", p.join(", ")),
        };
        out.push(Line::from(Span::styled(fit(&free, w, a), theme.text())));
    }
    if let Some(why) = &card.health.unknown {
        out.push(Line::from(Span::styled(fit(&format!("health unknown: {why}"), w, a), theme.fg(theme.c.warning))));
    }
    for t in taint_groups(&d.taints) {
        out.push(Line::from(Span::styled(fit(&t, w, a), theme.fg(theme.c.warning))));
    }
    for p in &d.problems {
        out.push(Line::from(Span::styled(fit(&format!("problem: {p}"), w, a), theme.fg(theme.c.danger))));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::dra::DraCard;

    #[test]
    fn a_dra_card_says_its_pool_free_profiles_health_taints_and_problems() {
        let taint = |device: &str, rule: &str| DeviceTaint {
            device: device.into(),
            key: "example.com/maintenance".into(),
            value: Some("rma".into()),
            effect: "NoExecute".into(),
            rule: Some(rule.into()),
            tessera: false,
        };
        let mut card = Card { model: "NVIDIA H100 80GB HBM3".into(), ..Card::default() };
        card.health.unknown = Some("no health source".into());
        card.dra = Some(Box::new(DraCard {
            driver: "gpu.nvidia.com".into(),
            pool: "n1".into(),
            device: Some("gpu-7".into()),
            devices: 26,
            device_names: Vec::new(),
            taint_rules: crate::model::dra::TaintRules::Served,
            dynamic: true,
            counter_set: Some("gpu-7-counter-set".into()),
            placeable: Some(vec!["1g.10gb".into(), "3g.40gb".into()]),
            taints: vec![taint("gpu-7", "drain-a"), taint("gpu-7-mig-1g10gb-19-0", "drain-b")],
            problems: vec!["counter set gpu-7-counter-set consumed past its value".into()],
            holders_unknown: false,
        }));
        let text: Vec<String> = lines(&card, 200, &Theme::default_theme(), false)
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect();
        assert_eq!(
            text,
            [
                "allocated by DRA · driver gpu.nvidia.com · pool n1 · device gpu-7 · 26 devices published · DynamicMIG, counter set gpu-7-counter-set",
                "can still place: 1g.10gb, 3g.40gb",
                "health unknown: no health source",
                "taint example.com/maintenance=rma:NoExecute (2 DeviceTaintRules, first drain-a)",
                "problem: counter set gpu-7-counter-set consumed past its value",
            ]
        );
    }
}
