//! Unbound workqueues: the global cpumask and each sysfs-visible workqueue's
//! own cpumask.

use super::{finding, parse_mask, Ctx, Status};
use crate::cpulist::Display;
use crate::sanitize::visible;

const CHECK: &str = "workqueue";
const BASE: &str = "sys/devices/virtual/workqueue";

pub(crate) fn check(cx: &mut Ctx) {
    let Some(global_s) = cx.read(&format!("{BASE}/cpumask")) else { return };
    let global = parse_mask(&global_s);
    let hk_mask = cx.hk_mask();
    if let Some(g) = &global {
        let hit = cx.overlap(g);
        let mut f = if hit.is_empty() {
            finding(CHECK, "workqueue:cpumask", Status::Ok, "unbound workqueues kept off the watched CPUs (workqueue cpumask)")
        } else {
            finding(
                CHECK,
                "workqueue:cpumask",
                Status::Warn,
                format!("unbound workqueues may run on {} (workqueue cpumask)", Ctx::cpu_word(&hit)),
            )
            .fix_opt(hk_mask.as_ref().map(|m| format!("echo {m} > /{BASE}/cpumask")))
        };
        f = f
            .why("unbound work items (writeback, async I/O completion, many drivers) run in kworker/u* threads on any CPU of this mask")
            .ev(format!("/{BASE}/cpumask: {} (CPUs {})", visible(global_s.trim()), Display(g)));
        for extra in ["cpumask_requested", "cpumask_isolated"] {
            if let Some(s) = cx.read_opt(&format!("{BASE}/{extra}")) {
                f = f.ev(format!("/{BASE}/{extra}: {}", visible(s.trim())));
            }
        }
        cx.push(f);
    }

    for name in cx.list_dir(BASE) {
        let rel = format!("{BASE}/{name}/cpumask");
        if !cx.exists(&rel) {
            continue;
        }
        let Some(s) = cx.read(&rel) else { continue };
        let Some(own) = parse_mask(&s) else { continue };
        // The workqueue runs on its own mask intersected with the global one.
        let effective: Vec<usize> = match &global {
            Some(g) => own.iter().copied().filter(|c| g.contains(c)).collect(),
            None => own.clone(),
        };
        let hit = cx.overlap(&effective);
        let vname = visible(&name).into_owned();
        let f = if hit.is_empty() {
            let mut f = finding(CHECK, &format!("workqueue:{vname}"), Status::Ok, format!("workqueue {vname} kept off the watched CPUs"));
            if !cx.overlap(&own).is_empty() {
                f = f.ev("its own cpumask includes them, the global workqueue cpumask does not");
            }
            f
        } else {
            finding(CHECK, &format!("workqueue:{vname}"), Status::Warn, format!("workqueue {vname} may run on {}", Ctx::cpu_word(&hit)))
                .fix_opt(hk_mask.as_ref().map(|m| format!("echo {m} > /{BASE}/{vname}/cpumask")))
        };
        cx.push(f.why("an unbound workqueue runs its work items on any CPU of its cpumask").ev(format!("/{rel}: {}", visible(s.trim()))));
    }
}

#[cfg(test)]
mod tests {
    use super::super::{audit, fixture::Fx, test_hints as hints, Status};

    #[test]
    fn workqueues_ok_when_masked() {
        let fx = Fx::tuned();
        let r = audit(fx.path(), &[3]);
        assert_eq!(r.find("workqueue:cpumask").unwrap().status, Status::Ok);
        assert_eq!(r.find("workqueue:writeback").unwrap().status, Status::Ok);
        // Global mask wins over a wider per-workqueue mask.
        fx.write("sys/devices/virtual/workqueue/writeback/cpumask", "f\n");
        let r = audit(fx.path(), &[3]);
        assert_eq!(r.find("workqueue:writeback").unwrap().status, Status::Ok);
    }

    #[test]
    fn workqueues_warn_with_masks() {
        let fx = Fx::untuned();
        let r = audit(fx.path(), &[1]);
        let g = r.find("workqueue:cpumask").unwrap();
        assert_eq!((g.status, g.fix.as_deref()), (Status::Warn, Some("echo 1 > /sys/devices/virtual/workqueue/cpumask")));
        let wb = r.find("workqueue:writeback").unwrap();
        assert_eq!((wb.status, wb.fix.as_deref()), (Status::Warn, Some("echo 1 > /sys/devices/virtual/workqueue/writeback/cpumask")));
        assert_eq!(r.find("workqueue:blkcg_punt_bio").unwrap().status, Status::Warn);
        assert!(r.find("workqueue:power").is_none());

        let h = hints(&r, "work", "wb_workfn");
        assert!(h.iter().any(|l| l.contains("/sys/devices/virtual/workqueue/writeback/cpumask")), "{h:?}");
        let h = hints(&r, "task", "kworker/u8:0[77]");
        assert!(h.iter().any(|l| l.contains("echo 1 > /sys/devices/virtual/workqueue/cpumask")), "{h:?}");
    }

    #[test]
    fn wide_mask_on_many_cpus() {
        let fx = Fx::tuned();
        fx.write("sys/devices/system/cpu/online", "0-39\n");
        fx.write("sys/devices/virtual/workqueue/cpumask", "ff,ffffffff\n");
        let r = audit(fx.path(), &[33]);
        let g = r.find("workqueue:cpumask").unwrap();
        assert_eq!(g.status, Status::Warn);
        assert_eq!(g.fix.as_deref(), Some("echo fd,ffffffff > /sys/devices/virtual/workqueue/cpumask"));
    }
}
