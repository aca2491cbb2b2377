//! A stall as a trace shows it: its slice's name and its arguments (size,
//! source, victim, causes as the CSV lists them, origins, stack).

use crate::interval::Hiccup;

use super::model::{Arg, Value};

/// A stall's slice name: its size.
pub fn stall_name(gap: u64) -> String {
    format!("stall {}", crate::units::ns(gap))
}

/// A stall's arguments: its size, source, victim, and each cause (kind,
/// name, ns) as the CSV's `causes` lists them, unexplained time included
/// (named by its kind alone, as there).
pub fn stall_args(h: &Hiccup) -> Vec<Arg> {
    let mut args = vec![Arg::uint("gap_ns", h.gap), Arg::uint("unexplained_ns", h.unexplained), Arg::str("source", h.source.as_str())];
    if let Some(v) = &h.victim {
        args.push(Arg::str("victim", v.name()));
    }
    let causes =
        h.all_causes().map(|(c, ns)| vec![Arg::str("kind", c.kind().as_str()), Arg::str("name", c.name()), Arg::uint("ns", ns)]).collect();
    args.push(Arg { name: "causes", value: Value::List(causes) });
    if !h.origins.is_empty() {
        let origins = h
            .origins
            .iter()
            .map(|(c, o)| {
                let mut s = String::new();
                crate::export::push_origin(o, &mut s);
                vec![Arg::str("cause", c.label()), Arg::str("origin", s)]
            })
            .collect();
        args.push(Arg { name: "origins", value: Value::List(origins) });
    }
    // --stacks-above: whose stack, then its frames innermost first.
    if let Some(st) = &h.stack {
        args.push(Arg::str("stack_of", st.cause.label()));
        let frames = st.frames.iter().map(|f| vec![Arg::str("frame", crate::sanitize::visible(f))]).collect();
        args.push(Arg { name: "stack", value: Value::List(frames) });
    }
    args
}
