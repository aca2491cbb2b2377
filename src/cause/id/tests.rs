//! Ids against the causes they stand for: every sort round-trips, sorts
//! as its cause and keeps its kind.

use super::*;
use crate::cause::comm;

fn every_sort() -> Vec<Cause> {
    let sym = |s: &str| Symbol::from(s);
    let mut v = vec![
        Cause::Task { comm: comm(b"kworker/6:1"), pid: Some(412) },
        Cause::Task { comm: comm(b"kworker/6:1"), pid: None },
        Cause::Task { comm: comm(b"ev\x1bil"), pid: Some(u32::MAX) },
        Cause::Work(sym("vmstat_update")),
        Cause::Irq { irq: 24, name: Arc::from(&b"virtio0-input.0"[..]) },
        Cause::Irq { irq: -1, name: Arc::from(&b""[..]) },
        Cause::Softirq(9),
        Cause::Timer(sym("tick_nohz_handler")),
        Cause::Csd(sym("flush_tlb_func")),
        Cause::Nmi(sym("0x10")),
        Cause::Idle(sym("C6")),
        Cause::Slack,
        Cause::Host,
        Cause::Smi,
        Cause::Own,
        Cause::Stopped,
        Cause::Unexplained,
        Cause::Lost,
    ];
    v.extend(VECTORS.map(Cause::Vector));
    v.extend(Kind::ALL.map(Cause::Others));
    v
}

#[test]
fn every_cause_comes_back_whole() {
    for c in every_sort() {
        let id = CauseId::of(&c);
        assert_eq!(id.cause(), c);
        assert_eq!(id.kind(), c.kind(), "{c:?}");
        assert_eq!(id.is_unexplained(), c.is_unexplained());
        assert_eq!(CauseId::of(&c), id, "interned once");
    }
    for (i, v) in VECTORS.iter().enumerate() {
        assert_eq!(*v as usize, i, "{v:?}");
    }
}

#[test]
fn ids_sort_as_their_causes() {
    let causes = every_sort();
    let mut by_cause = causes.clone();
    by_cause.sort();
    let mut by_id: Vec<CauseId> = causes.iter().map(CauseId::of).collect();
    by_id.sort();
    assert_eq!(by_id.into_iter().map(CauseId::cause).collect::<Vec<_>>(), by_cause);
}

#[test]
fn folding_keeps_the_program_and_the_kind() {
    let t = CauseId::of(&Cause::Task { comm: comm(b"sh"), pid: Some(9) });
    assert_eq!(t.folded().map(CauseId::cause), Some(Cause::Task { comm: comm(b"sh"), pid: None }));
    assert_eq!(t.folded().unwrap().folded(), None);
    assert_eq!(CauseId::softirq(1).folded(), Some(CauseId::others(Kind::Softirq)));
    assert_eq!(CauseId::vector(Vector::LocalTimer).folded(), Some(CauseId::others(Kind::Irq)));
    for c in [CauseId::UNEXPLAINED, CauseId::LOST, CauseId::HOST, CauseId::OWN, CauseId::others(Kind::Work)] {
        assert_eq!(c.folded(), None, "{c:?}");
    }
}

#[test]
fn pids_share_their_program_name() {
    let a = CauseId::of(&Cause::Task { comm: comm(b"cc1"), pid: Some(1) });
    let b = CauseId::of(&Cause::Task { comm: comm(b"cc1"), pid: Some(2) });
    assert_ne!(a, b);
    assert_eq!(a.program(), b.program());
    assert_eq!((a.task_pid(), b.task_pid()), (Some(1), Some(2)));
    assert_eq!(a.name_no(), b.name_no(), "one comm interned");
}
