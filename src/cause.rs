//! Causes by kind and name, as users read them (`task:kworker/1:0[412]`,
//! `work:vmstat_update`, `irq:24:virtio0-input.0`...). Names are resolved
//! once per cause and cached, so reporting a hiccup costs lookups, not
//! symbol searches.

use std::collections::HashMap;
use std::sync::Arc;

use crate::events::Vector;
use crate::kallsyms::Kallsyms;
use crate::names;
use crate::sanitize;
use crate::timeline::Cause;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Task,
    Work,
    Irq,
    Softirq,
    Timer,
    Ipi,
    Nmi,
    Unexplained,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Task => "task",
            Kind::Work => "work",
            Kind::Irq => "irq",
            Kind::Softirq => "softirq",
            Kind::Timer => "timer",
            Kind::Ipi => "ipi",
            Kind::Nmi => "nmi",
            Kind::Unexplained => "unexplained",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A resolved cause. `name` is raw text from the kernel: escape it for
/// wherever it goes (`sanitize::visible`, the CSV's cause escaping).
pub type Named = (Kind, Arc<str>);

pub struct Namer {
    pub kallsyms: Kallsyms,
    irq_names: HashMap<i32, String>,
    cache: HashMap<Cause, Named>,
    unexplained: Arc<str>,
}

impl Namer {
    pub fn new(kallsyms: Kallsyms) -> Self {
        Self { kallsyms, irq_names: HashMap::new(), cache: HashMap::new(), unexplained: Arc::from("") }
    }

    /// Remembers an IRQ's action name (seen on irq_handler_entry). Allocates
    /// only the first time an IRQ is seen, or when its name changes.
    pub fn note_irq(&mut self, irq: i32, raw_name: &[u8]) {
        let name = sanitize::c_str(raw_name);
        if self.irq_names.get(&irq).is_none_or(|n| *n != name) {
            self.irq_names.insert(irq, name.into_owned());
            self.cache.remove(&Cause::Irq(irq));
        }
    }

    pub fn name(&mut self, cause: Cause) -> Named {
        if cause.is_unexplained() {
            return (Kind::Unexplained, self.unexplained.clone());
        }
        if let Some(n) = self.cache.get(&cause) {
            return n.clone();
        }
        let named: (Kind, String) = match cause {
            Cause::Task { pid, comm } => (Kind::Task, format!("{}[{pid}]", sanitize::c_str(&comm))),
            Cause::Work(f) => (Kind::Work, self.kallsyms.name(f)),
            Cause::Irq(irq) => match self.irq_names.get(&irq) {
                Some(n) if !n.is_empty() => (Kind::Irq, format!("{irq}:{n}")),
                _ => (Kind::Irq, irq.to_string()),
            },
            Cause::Softirq(v) => (Kind::Softirq, names::softirq(v).into_owned()),
            Cause::Timer(f) => (Kind::Timer, self.kallsyms.name(f)),
            // The local timer is an interrupt (LOC in /proc/interrupts); the
            // other vectors are inter-processor interrupts.
            Cause::Vector(Vector::LocalTimer) => (Kind::Irq, "local_timer".into()),
            Cause::Vector(v) => (Kind::Ipi, v.name().into()),
            Cause::Csd(f) => (Kind::Ipi, self.kallsyms.name(f)),
            Cause::Nmi(f) => (Kind::Nmi, self.kallsyms.name(f)),
            Cause::Probe | Cause::Unknown => unreachable!("handled above"),
        };
        let named = (named.0, Arc::from(named.1));
        if self.cache.len() > 100_000 {
            // Pid churn: bound the cache rather than grow without end.
            self.cache.clear();
        }
        self.cache.insert(cause, named.clone());
        named
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comm(s: &str) -> [u8; 16] {
        let mut c = [0u8; 16];
        c[..s.len()].copy_from_slice(s.as_bytes());
        c
    }

    #[test]
    fn names_each_kind() {
        let k = Kallsyms::parse("ffffffff81001000 t vmstat_update\nffffffff81002000 t tick_nohz_handler\n");
        let mut n = Namer::new(k);
        n.note_irq(24, b"virtio0-input.0\0");
        let s = |n: &mut Namer, c| {
            let (k, name) = n.name(c);
            format!("{k}:{name}")
        };
        assert_eq!(s(&mut n, Cause::Task { pid: 412, comm: comm("kworker/6:1") }), "task:kworker/6:1[412]");
        assert_eq!(s(&mut n, Cause::Work(0xffffffff81001000)), "work:vmstat_update");
        assert_eq!(s(&mut n, Cause::Irq(24)), "irq:24:virtio0-input.0");
        assert_eq!(s(&mut n, Cause::Irq(25)), "irq:25");
        assert_eq!(s(&mut n, Cause::Softirq(9)), "softirq:RCU");
        assert_eq!(s(&mut n, Cause::Timer(0xffffffff81002000)), "timer:tick_nohz_handler");
        assert_eq!(s(&mut n, Cause::Vector(Vector::LocalTimer)), "irq:local_timer");
        assert_eq!(s(&mut n, Cause::Vector(Vector::Reschedule)), "ipi:reschedule");
        assert_eq!(s(&mut n, Cause::Nmi(0x10)), "nmi:0x10");
        assert_eq!(s(&mut n, Cause::Probe), "unexplained:");
        n.note_irq(24, b"renamed\0");
        assert_eq!(s(&mut n, Cause::Irq(24)), "irq:24:renamed");
    }
}
