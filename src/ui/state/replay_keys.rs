//! What replay keys do to the console's state: play and pause, step, speed, go to a time.

use super::{Effect, Input, UiState};
use crate::ui::keymap::Intent;

/// A replay key: what it does to the state.
pub fn apply(st: &mut UiState, intent: Intent) -> Effect {
    let Some(r) = st.replay.as_mut() else { return Effect::None };
    match intent {
        Intent::ReplayPause => {
            if r.paused && r.pos >= r.end() {
                // At the end: play again from the start.
                r.go(r.start());
            }
            r.paused = !r.paused;
        }
        Intent::ReplayBack => r.step(-1),
        Intent::ReplayForward => r.step(1),
        Intent::ReplaySlower => r.faster(false),
        Intent::ReplayFaster => r.faster(true),
        Intent::ReplayGoto => st.input = Input::Goto(String::new()),
        _ => return Effect::None,
    }
    Effect::Redraw
}

/// The time typed after `g`: go there, or say why not.
pub fn goto(st: &mut UiState, text: &str) {
    let Some(r) = st.replay.as_mut() else { return };
    match crate::config::moment::parse(text, r.end(), Some((r.start(), r.end()))) {
        Ok(t) if t < r.start() || t > r.end() => {
            st.footer.message = Some(format!(
                "{} is outside the recording ({} to {})",
                t.format("%Y-%m-%d %H:%M:%S"),
                r.start().format("%Y-%m-%d %H:%M:%S"),
                r.end().format("%Y-%m-%d %H:%M:%S UTC")
            ));
        }
        Ok(t) => {
            r.go(t);
            // The frame shown is the last at or before the time asked for.
            let shown = r.shown_at();
            let asked = t.format("%Y-%m-%d %H:%M:%S UTC");
            st.footer.message = Some(if shown == t {
                format!("at {asked}")
            } else {
                format!("at {asked}: the frame of {}", shown.format("%H:%M:%S"))
            });
        }
        Err(e) => st.footer.message = Some(e.to_string()),
    }
}
