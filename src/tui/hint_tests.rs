//! The hint line at the screen's foot: the audit's fix for the top
//! culprit, whole (wrapped, never cut), and what is cut elsewhere says so.

use super::tests::{app, draw, line_with, text};
use crate::doctor::{Finding, Report, Status};

/// An audit whose one finding (IRQ 24 on CPU 7) has `fix`.
fn irq24_audit(fix: &str) -> Report {
    Report {
        cpus: vec![6, 7],
        findings: vec![Finding {
            check: "irq".into(),
            status: Status::Warn,
            title: "IRQ 24 (virtio0-input.0) is delivered to CPU 7".into(),
            why: String::new(),
            evidence: vec![],
            fix: Some(fix.into()),
            key: "irq:24".into(),
            fact: None,
        }],
        unreadable: vec![],
    }
}

#[test]
fn hint_line_names_the_fix_for_the_top_culprit() {
    let mut a = app();
    assert!(!text(&draw(&a, 80, 24)).contains("hint:"), "no audit, no hint");
    a.audit = Some(irq24_audit("echo 0-5 > /proc/irq/24/smp_affinity_list"));
    a.cpu_filter = Some(7);
    let screen = text(&draw(&a, 160, 48));
    let line = line_with(&screen, "hint:");
    assert!(line.contains("echo 0-5 > /proc/irq/24/smp_affinity_list"), "{line}");
}

/// What users copy from the screen is whole: a hint's command wraps at
/// spaces at 80×24 and 120×40 (it was cut mid-word: `intel_idle.max_csta`),
/// and whatever is cut (a pane's title, a stall's line) ends in `…`.
#[test]
fn hints_wrap_and_cut_text_says_so() {
    let fix = "add idle=poll processor.max_cstate=0 intel_idle.max_cstate=0 rcu_nocbs=6-7 nohz_full=6-7 to GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub and reboot";
    let mut a = app();
    a.audit = Some(irq24_audit(fix));
    a.cpu_filter = Some(7);
    for (w, h) in [(80, 24), (120, 40)] {
        let screen = text(&draw(&a, w, h));
        for word in fix.split(' ') {
            assert!(screen.split_whitespace().any(|x| x == word), "{w}×{h}: {word} not whole:\n{screen}");
        }
        assert!(screen.contains("hint:"), "{w}×{h}:\n{screen}");
    }
    // A pane too narrow for its title, and stall lines too long: `…`.
    let screen = text(&draw(&a, 44, 30));
    let tops: Vec<&str> = screen.lines().filter(|l| l.starts_with('┌') || l.starts_with('┏')).collect();
    assert!(tops.iter().any(|l| l.contains('…')), "{screen}");
    for l in &tops {
        assert!(!l.contains("[1┓") && !l.contains("[1┐"), "{l}");
    }
}
