//! Keys to actions. The footer and the help overlay list the same keys.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::app::Action;

/// Key, what it does: shown in the footer (the first entries) and in help.
pub const KEYS: &[(&str, &str)] = &[
    ("q", "quit"),
    ("space", "pause"),
    ("Tab", "pane"),
    ("s", "sort"),
    ("c", "cpu"),
    ("r", "reset"),
    ("?", "help"),
    ("o", "by cause/by sender"),
    ("Ctrl-C", "quit"),
    ("↑↓ PgUp PgDn", "scroll pane or popup"),
    ("Home", "back to the top"),
    ("Shift-Tab", "previous pane"),
    ("Enter", "the top stall in full"),
    ("Esc", "close help or stall"),
];

/// How many of `KEYS` the footer shows.
pub const FOOTER_KEYS: usize = 7;

pub fn action(k: KeyEvent, overlay_open: bool) -> Option<Action> {
    if k.kind == KeyEventKind::Release {
        return None;
    }
    if k.modifiers.contains(KeyModifiers::CONTROL) {
        return matches!(k.code, KeyCode::Char('c' | 'C')).then_some(Action::Quit);
    }
    Some(match k.code {
        KeyCode::Char('q' | 'Q') => Action::Quit,
        KeyCode::Char(' ') => Action::Pause,
        KeyCode::Tab => Action::NextPane,
        KeyCode::BackTab => Action::PrevPane,
        KeyCode::Char('s' | 'S') => Action::CycleSort,
        KeyCode::Char('c' | 'C') => Action::CycleCpu,
        KeyCode::Char('o' | 'O') => Action::BySender,
        KeyCode::Char('r' | 'R') => Action::Reset,
        KeyCode::Char('?' | 'h') | KeyCode::F(1) => Action::Help,
        KeyCode::Esc if overlay_open => Action::CloseHelp,
        KeyCode::Enter => Action::Detail,
        KeyCode::Up | KeyCode::Char('k') => Action::Scroll(-1),
        KeyCode::Down | KeyCode::Char('j') => Action::Scroll(1),
        KeyCode::PageUp => Action::Scroll(-10),
        KeyCode::PageDown => Action::Scroll(10),
        KeyCode::Home | KeyCode::Char('g') => Action::Top,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: KeyCode, m: KeyModifiers) -> Option<Action> {
        action(KeyEvent::new(c, m), false)
    }

    #[test]
    fn maps_the_documented_keys() {
        let none = KeyModifiers::NONE;
        assert_eq!(key(KeyCode::Char('q'), none), Some(Action::Quit));
        assert_eq!(key(KeyCode::Char('c'), KeyModifiers::CONTROL), Some(Action::Quit));
        assert_eq!(key(KeyCode::Char('c'), none), Some(Action::CycleCpu));
        assert_eq!(key(KeyCode::Char(' '), none), Some(Action::Pause));
        assert_eq!(key(KeyCode::Tab, none), Some(Action::NextPane));
        assert_eq!(key(KeyCode::Char('s'), none), Some(Action::CycleSort));
        assert_eq!(key(KeyCode::Char('r'), none), Some(Action::Reset));
        assert_eq!(key(KeyCode::Char('o'), none), Some(Action::BySender));
        assert_eq!(key(KeyCode::Char('?'), none), Some(Action::Help));
        assert_eq!(key(KeyCode::Char('x'), KeyModifiers::CONTROL), None);
        assert_eq!(key(KeyCode::Esc, none), None);
        assert_eq!(action(KeyEvent::new(KeyCode::Esc, none), true), Some(Action::CloseHelp));
    }
}
