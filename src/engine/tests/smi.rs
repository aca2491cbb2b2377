//! A gap during which the CPU counted an SMI: its unexplained time is the
//! firmware's; what kernel events name stays theirs.

use super::*;

#[test]
fn an_smi_takes_the_unexplained_time_only() {
    let mut e = engine();
    let evs = [
        switch(50, task(1, "x"), probe()),
        ev(200, Payload::IrqEntry { irq: 9, name: [0; crate::record::IRQ_NAME_LEN] }),
        ev(260, Payload::IrqExit { irq: 9, ret: 1 }),
    ];
    for x in &evs {
        e.on_event(x);
    }
    e.on_interval(Interval { smis: 1, ..gap(100, 400) });
    e.on_interval(gap(1000, 1300));
    let mut got = Vec::new();
    e.attribute_ready(2000, |h| got.push(h.clone()));
    assert_eq!(
        (labels(&got[0]), got[0].unexplained),
        (vec!["smi:system management interrupt (firmware)=240".into(), "irq:9=60".into()], 0)
    );
    assert_eq!((labels(&got[1]), got[1].unexplained), (vec![], 300), "no SMI counted: unexplained");
}
