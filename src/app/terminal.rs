//! The terminal the console owns: raw mode, the alternate screen and the mouse, restored
//! however it ends (panics included) and never with a macro that panics on a gone terminal;
//! its events on a thread; the signals the console answers; Ctrl-Z's suspend and resume; and
//! one frame drawn, after which what a confirmation showed counts as read.

use std::io::Stdout;

use crossterm::event::{DisableMouseCapture, EnableMouseCapture, Event};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::sync::mpsc;

use crate::error::CmdError;
use crate::store::Store;
use crate::ui::input::{merge, on_event};
use crate::ui::state::{Effect, UiState};
use crate::ui::theme::Theme;

/// Restores the terminal however the loop ends.
pub(crate) struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        // Errors ignored: a lost terminal (a dropped SSH session) cannot be restored, and
        // saying so on it would fail again (`ratatui::restore` prints, which panics there).
        let _ = crossterm::execute!(std::io::stdout(), DisableMouseCapture);
        let _ = ratatui::try_restore();
    }
}

/// The terminal in raw mode with the mouse on (restored when the guard drops, panics
/// included), and its events forwarded by a thread (crossterm's read blocks).
pub(crate) fn open_terminal() -> (Terminal<CrosstermBackend<Stdout>>, Restore, mpsc::Receiver<Event>) {
    let terminal = ratatui::init();
    let restore = Restore;
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = crossterm::execute!(std::io::stdout(), DisableMouseCapture);
        previous(info);
    }));
    let _ = crossterm::execute!(std::io::stdout(), EnableMouseCapture);
    let (in_tx, input) = mpsc::channel::<Event>(256);
    std::thread::spawn(move || {
        while let Ok(ev) = crossterm::event::read() {
            if in_tx.blocking_send(ev).is_err() {
                break;
            }
        }
    });
    (terminal, restore, input)
}

/// One terminal event and every one queued behind it (keys typed faster than frames are
/// handled before the next draw), as one effect.
pub(crate) fn keys(
    first: Event,
    input: &mut mpsc::Receiver<Event>,
    st: &mut UiState,
    fleet: &crate::model::Fleet,
) -> Effect {
    let mut effect = on_event(st, fleet, first);
    while effect != Effect::Quit
        && let Ok(ev) = input.try_recv()
    {
        effect = merge(effect, on_event(st, fleet, ev));
    }
    effect
}

type Signal = tokio::signal::unix::Signal;

/// The signals the console answers: SIGTERM, SIGHUP, SIGINT and SIGQUIT end it (the terminal
/// restored); SIGTSTP suspends it like Ctrl-Z.
pub(crate) struct Signals {
    pub term: Signal,
    pub hup: Signal,
    pub int: Signal,
    pub quit: Signal,
    pub tstp: Signal,
}

pub(crate) fn signals() -> Result<Signals, CmdError> {
    use tokio::signal::unix::SignalKind;
    let signal = |k| tokio::signal::unix::signal(k).map_err(|e| CmdError::Failed(format!("cannot watch signals: {e}")));
    Ok(Signals {
        term: signal(SignalKind::terminate())?,
        hup: signal(SignalKind::hangup())?,
        int: signal(SignalKind::interrupt())?,
        quit: signal(SignalKind::quit())?,
        tstp: signal(SignalKind::from_raw(libc::SIGTSTP))?,
    })
}

/// Suspend, unless an action runs (then say so: it is never stopped half-way).
pub(crate) fn try_suspend(terminal: &mut Terminal<CrosstermBackend<Stdout>>, st: &mut UiState) {
    if st.action_running() {
        st.say("an action is running: tessera is not suspended in the middle of one (Ctrl-Z again when it ends)");
        return;
    }
    suspend(terminal);
}

/// Give the terminal back (main screen, cooked mode, no mouse) and stop until continued
/// (`fg`, SIGCONT), as htop does; then take it again and draw everything anew.
pub(crate) fn suspend(terminal: &mut Terminal<CrosstermBackend<Stdout>>) {
    let _ = crossterm::execute!(std::io::stdout(), DisableMouseCapture);
    let _ = ratatui::try_restore();
    // The shell gets its cursor back (ratatui hides it while drawing).
    let _ = crossterm::execute!(std::io::stdout(), crossterm::cursor::Show);
    crate::process::stop_self();
    let _ = crossterm::terminal::enable_raw_mode();
    let _ = crossterm::execute!(
        std::io::stdout(),
        crossterm::terminal::EnterAlternateScreen,
        EnableMouseCapture,
        crossterm::terminal::Clear(crossterm::terminal::ClearType::All)
    );
    // Everything is drawn anew: an empty frame first makes ratatui's last frame blank, as the
    // screen now is. (`Terminal::clear` asks the terminal for the cursor position, and the
    // input thread would take the answer.)
    let _ = terminal.draw(|_| {});
}

pub(crate) fn terminal_area(terminal: &Terminal<CrosstermBackend<Stdout>>) -> ratatui::layout::Rect {
    let size = terminal.size().unwrap_or_default();
    ratatui::layout::Rect::new(0, 0, size.width, size.height)
}

pub(crate) fn draw(
    terminal: &mut Terminal<CrosstermBackend<Stdout>>,
    st: &mut UiState,
    store: &Store,
    theme: &Theme,
) -> Result<(), CmdError> {
    // The viewport goes by the area ratatui draws this frame at (it asks the terminal's size
    // once a frame, resizing on the way), so the size is not asked twice.
    terminal
        .draw(|f| {
            let area = f.area();
            let vp = crate::ui::viewport_for(area, st);
            if vp != st.screen.body {
                st.set_viewport(vp);
            }
            // What the keys go by: the area this frame is drawn at.
            st.set_screen(area);
            crate::ui::draw(f, st, store.fleet(), theme, store.simulated());
        })
        .map_err(|e| CmdError::Failed(format!("cannot draw: {e}")))?;
    // Drawn: a confirmation's rows on screen now count as read.
    st.dialog_drawn();
    Ok(())
}
