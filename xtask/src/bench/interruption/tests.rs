//! Figure 3b's pure parts: finding each kind's gaps, the paired split,
//! our own time per kind.

use super::gaps::{tick_comb, window_at, Window};
use super::*;

/// A run: a tick every 4 ms at phase 1.23 ms (13 µs each, 5 µs more
/// with `extra`), an IPI sent every 2 ms whose gap follows by 20 µs, a datagram
/// 1 ms after each whose device interrupt follows by 100 µs (6 µs) among two
/// short pauses, and stray gaps.
fn run(extra: u64) -> Gaps {
    let mut g = Gaps::default();
    for k in 0..500u64 {
        g.gaps.push((1_230_000 + k * 4_000_000, 13_000 + extra));
    }
    for k in 0..1000u64 {
        let s = 500_000 + k * 2_000_000 + (k % 7) * 1000;
        g.sends[Kind::Ipi as usize].push(s);
        g.gaps.push((s + 20_000, 4_000 + extra));
        g.sends[Kind::Irq as usize].push(s + 1_000_000);
        g.gaps.push((s + 1_100_000, 6_000 + extra));
        // The host's short pauses in the same window.
        g.gaps.push((s + 1_050_000, 1_500));
        g.gaps.push((s + 1_300_000, 1_600));
    }
    for k in 0..300u64 {
        g.gaps.push((777_777 + k * 6_543_210, 30_000));
    }
    g.gaps.sort_unstable();
    g
}

#[test]
fn the_tick_is_found_by_its_period_and_the_ipis_by_their_sends() {
    let g = run(0);
    let rest: Vec<(u64, u64)> = g.gaps.iter().copied().filter(|g| ![4_000, 6_000, 1_500, 1_600].contains(&g.1)).collect();
    assert_eq!(tick_comb(&rest, &|_| false).map(|c| c.0), Some(4_000_000));
    // Datagrams every 2 ms whose gaps come 1 ms after their sends, and
    // periodic: were they in the comb, a 10 ms comb would hold as many.
    assert!((495..=505).contains(&classify(&g)[0].len()), "strays may fall on the comb");
    let [mut t, mut i, mut d, r, w, warm] = classify(&g);
    assert!(r.is_empty() && w.is_empty() && warm.is_empty(), "no sends of theirs, no gaps of theirs");
    assert!(t.len() >= 495 && i.len() >= 990 && d.len() >= 990, "{} ticks, {} ipis, {} irqs", t.len(), i.len(), d.len());
    let medians = [quantile(&mut t, 0.5), quantile(&mut i, 0.5), quantile(&mut d, 0.5)];
    assert_eq!(medians, [Some(13_000.0), Some(4_000.0), Some(6_000.0)]);
    let [mut t5, _, mut d5, ..] = classify(&run(5_000));
    assert_eq!(quantile(&mut t5, 0.5), Some(18_000.0), "what was added shows in the median");
    assert_eq!(quantile(&mut d5, 0.5), Some(11_000.0));
    // Without datagrams, their gaps are nobody's (not an IPI's: too late).
    let mut quiet = run(0);
    quiet.sends[Kind::Irq as usize].clear();
    assert_eq!(classify(&quiet)[2].len(), 0);
    assert!(classify(&quiet)[1].iter().all(|&l| l == 4_000 || l == 30_000));
}

#[test]
fn a_paired_run_splits_its_gaps_by_the_window_at_their_start() {
    let mut g = run(0);
    // Not watched, no hook, watched, in turn, every 50 ms.
    let cycle = [Window::NotWatched, Window::Unattached, Window::Watched];
    g.toggles = (0..60u64).map(|k| (k * 50_000_000, cycle[k as usize % 3])).collect();
    let window = |at: u64| cycle[(at / 50_000_000) as usize % 3];
    // The hooks add 40 ns, watching 150 more; just after a window opens
    // the CPU is busy (25 µs more): left out.
    for gap in &mut g.gaps {
        if gap.1 < 30_000 {
            gap.1 += match window(gap.0) {
                Window::Watched => 190,
                Window::NotWatched => 40,
                Window::Unattached => 0,
            };
            // The window with no hook settles longer (what closing the
            // links left runs later): 25 µs more up to 25 ms into it.
            if gap.0 % 50_000_000 < window(gap.0).settle_ns() {
                gap.1 += 25_000;
            }
        }
    }
    let [[t_on, t_off, t_two], [i_on, i_off, i_two], [d_on, d_off, d_two], ..] = classify_paired(&g);
    for v in [&t_on, &t_off, &t_two] {
        assert!(v.len() > 60, "{}", v.len());
    }
    for v in [&i_on, &i_off, &i_two, &d_on, &d_off, &d_two] {
        assert!(v.len() > 130, "{}", v.len());
    }
    // A stray gap (30 µs) may fall on the tick's comb or after a send.
    let only = |v: &[u64], l: u64| v.iter().all(|&x| x == l || x == 30_000);
    assert!(only(&t_on, 13_190) && only(&t_off, 13_040) && only(&t_two, 13_000), "{t_on:?}");
    assert!(only(&i_on, 4_190) && only(&i_off, 4_040) && only(&i_two, 4_000));
    assert!(only(&d_on, 6_190) && only(&d_off, 6_040) && only(&d_two, 6_000));
    assert_eq!(window_at(&g.toggles, 7), Some((0, Window::NotWatched)));
    assert_eq!(window_at(&[(10, Window::Watched)], 5), None, "before the first toggle: none");
    let text = "T 100 1\nT 200 0\nT 300 3\nT 400 2\nT 500 4\nT 600 5\nG 5 6\n";
    let windows = [(100, Window::Watched), (200, Window::NotWatched), (500, Window::Unattached)];
    assert_eq!(parse(text).toggles, windows);
}

#[test]
fn without_a_period_there_is_no_tick() {
    let g = Gaps { gaps: (0..300u64).map(|k| (k * 6_543_210 + k * k, 30_000)).collect(), ..Gaps::default() };
    assert_eq!(tick_comb(&g.gaps, &|_| false), None);
    assert_eq!(classify(&g)[0].len(), 0);
}

#[test]
fn our_own_time_is_read_from_the_rows_of_each_kind() {
    let csv = "time_ns,cpu,gap_ns,explained_ns,unexplained_ns,top_kind,top_name,top_ns,causes,source\n\
               1,1,9000,9000,0,irq,local_timer,5000,irq:local_timer=5000;timer:tick_nohz_handler=3600;self:jitterwatch=400,interrupted\n\
               2,1,4000,4000,0,ipi,call_function_single,3000,ipi:call_function_single=3000;self:jitterwatch=250;ipi:ipi_mb=750,interrupted\n\
               3,1,5000,5000,0,softirq,TIMER,5000,softirq:TIMER=5000,interrupted\n\
               4,1,7000,7000,0,softirq,NET_RX,4000,irq:virtio2-input.0=2700;softirq:NET_RX=4000;self:jitterwatch=300,interrupted\n\
               5,1,9000,9000,0,irq,local_timer,5000,irq:local_timer=5000;softirq:NET_RX=3000;self:jitterwatch=500,interrupted\n\
               6,1,2000,2000,0,ipi,reschedule,1800,ipi:reschedule=1800;self:jitterwatch=200,interrupted\n\
               7,1,2500,2500,0,ipi,reschedule,1800,ipi:reschedule=1800;softirq:RCU=500;self:jitterwatch=210,interrupted\n\
               8,1,9000,9000,0,task,kworker/1:1,6000,task:kworker/1:1=2000;work:refresh_vm_stats=4000;self:jitterwatch=700,preempted\n";
    let own = own_per_interruption(csv, &[]);
    assert_eq!(own[..3], [vec![400.0, 500.0], vec![250.0], vec![300.0]], "a tick that ran NET_RX is a tick's");
    assert_eq!(own[3..5], [vec![200.0], vec![700.0]], "a reschedule IPI that ran a softirq is not one alone");
    assert!(own[5].is_empty());
    // The IPI at 2 ns began just after a warm pair's second send.
    let own = own_per_interruption(csv, &[1]);
    assert_eq!((own[1].clone(), own[5].clone()), (vec![], vec![250.0]), "the warm IPI's row is not the cold one's");
}

#[test]
fn a_warm_pair_gives_its_second_ipi_and_its_first_is_no_kinds() {
    let mut g = run(0);
    // Ten pairs, each primer on a tick's slot (its gap would pass for the
    // tick's), the warm IPI 30 µs later with its gap 5 µs after its send.
    for k in 0..10u64 {
        let p = 1_230_000 + (50 + 20 * k) * 4_000_000 + 2_000;
        g.primers.push(p);
        g.gaps.push((p + 3_000, 4_000));
        g.sends[Kind::IpiWarm as usize].push(p + 30_000);
        g.gaps.push((p + 35_000, 2_500));
    }
    g.gaps.sort_unstable();
    let by = classify(&g);
    let warm = &by[Kind::IpiWarm as usize];
    // (One window also holds a stray gap, longer: a send's gap is its longest.)
    assert_eq!((warm.len(), warm.iter().filter(|&&l| l == 2_500).count()), (10, 9), "{warm:?}");
    assert!(by[Kind::Tick as usize].iter().all(|&l| l != 4_000), "a primer's gap is not the tick's");
    // Without the primers noted, those gaps would be taken as ticks.
    g.primers.clear();
    assert_eq!(classify(&g)[Kind::Tick as usize].iter().filter(|&&l| l == 4_000).count(), 10);
}

/// The stages are named twice, here and where jitterwatch reads
/// JITTERWATCH_BPF_FLOOR (the two crates meet only through that
/// variable): each name here must be one jitterwatch takes, or 3b's extra
/// runs would fail at start.
#[test]
fn each_stage_is_a_value_jitterwatch_takes() {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../src/bpf/bench.rs")).unwrap();
    let body = &src[src.find("fn parse_stop(").expect("parse_stop() in src/bpf/bench.rs")..];
    let body = &body[..body.find("\n}\n").unwrap()];
    for stage in STAGES {
        assert!(body.contains(&format!("\"{stage}\"")), "src/bpf/bench.rs's parse_stop() does not take {stage:?}:\n{body}");
    }
}

/// Ticks every 4 ms at phase 0, each merged with a host pause in one slot
/// of two, begun 25–45 µs before it: where the gap begins moves, the
/// tick does not.
fn merged_ticks() -> Gaps {
    let mut g = Gaps::default();
    for k in 1..750u64 {
        let early = if k % 2 == 0 { 25_000 + (k % 5) * 5_000 } else { 500 };
        g.gaps.push((k * 4_000_000 - early, early + 13_000));
    }
    // The host's short pauses, every 1 ms between the ticks.
    for k in 1..3000u64 {
        if k % 4 != 0 {
            g.gaps.push((k * 1_000_000 + 300_000, 800));
        }
    }
    g.gaps.sort_unstable();
    g
}

#[test]
fn the_kernels_tick_grid_finds_ticks_merged_with_a_pause() {
    let g = merged_ticks();
    // By the gaps alone, one tick in two begins off its slot: no comb
    // holds a gap in 80% of its slots.
    assert!(classify(&g)[0].len() < 400, "{}", classify(&g)[0].len());
    let known = Gaps { tick: Some((4_000_000, 0)), ..merged_ticks() };
    let ticks = &classify(&known)[0];
    assert_eq!(ticks.len(), 749, "every tick, merged or not");
    assert!(ticks.iter().all(|l| (13_000..60_000).contains(l)), "and no host pause alone");
}
