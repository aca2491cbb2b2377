//! The screen's styles, with or without colour.

use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::{Block, BorderType};

use crate::cause::Kind;

/// Styles, with or without colour (NO_COLOR): without, only bold and
/// reverse video remain, and the text carries the meaning.
#[derive(Clone, Copy)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    pub fn fg(self, c: Color) -> Style {
        if self.color {
            Style::new().fg(c)
        } else {
            Style::new()
        }
    }

    pub fn warn(self) -> Style {
        let s = Style::new().add_modifier(Modifier::BOLD);
        if self.color {
            s.fg(Color::White).bg(Color::Red)
        } else {
            s.add_modifier(Modifier::REVERSED)
        }
    }

    pub fn dim(self) -> Style {
        self.fg(Color::DarkGray)
    }

    pub fn head(self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }

    pub fn key(self) -> Style {
        if self.color {
            Style::new().fg(Color::Black).bg(Color::Cyan)
        } else {
            Style::new().add_modifier(Modifier::REVERSED)
        }
    }

    pub fn kind(self, k: Kind) -> Style {
        self.fg(k.colour())
    }

    /// A pane's frame; the focused one is drawn thick and marked ▶.
    /// A bordered pane `width` columns wide: its title cut with `…` where it
    /// does not fit between the corners (a cut title says so).
    pub fn block(self, title: String, focused: bool, width: u16) -> Block<'static> {
        let title = if focused { format!("▶{title}") } else { title };
        let b = Block::bordered().title(super::table::cut(ratatui::text::Line::raw(title), width.saturating_sub(2) as usize));
        if focused {
            b.border_type(BorderType::Thick).border_style(self.fg(Color::Cyan)).title_style(Style::new().add_modifier(Modifier::BOLD))
        } else {
            b.border_style(self.dim())
        }
    }
}
