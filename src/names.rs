//! Fixed kernel names: softirq vectors (include/linux/interrupt.h order).

/// The kernel's softirq names, by vector (include/linux/interrupt.h).
pub const SOFTIRQS: [&str; 10] = ["HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU"];

/// The softirq's name, or its number when the kernel grew a new one.
/// The part of the in-syscall stretches counted under `k`: a softirq
/// (`SOFTIRQS[k]`), or `other` (`SOFTIRQS.len()`: an IRQ inside the
/// stretch took most of it). Every output names the parts so.
pub fn in_syscall_part(k: usize) -> &'static str {
    SOFTIRQS.get(k).copied().unwrap_or("other")
}

pub fn softirq(vec: u16) -> std::borrow::Cow<'static, str> {
    match SOFTIRQS.get(vec as usize) {
        Some(n) => (*n).into(),
        None => format!("softirq{vec}").into(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn softirq_names() {
        assert_eq!(super::softirq(1), "TIMER");
        assert_eq!(super::softirq(9), "RCU");
        assert_eq!(super::softirq(12), "softirq12");
    }
}
