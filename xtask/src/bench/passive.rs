//! Figure 4c: the collector at a real app's mix, in passive mode. A TCP
//! ping-pong over loopback on the watched CPU (assets::TCPPP: softirqs in
//! its own system calls, wake-ups, preemptions: the mix redis showed) is
//! watched with `--pid`; the consumer's CPU time per event drained is the
//! figure (issue 33: ≤ 150 ns at a real app's rate).

use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Result;

use super::measure::Ctx;
use super::util::{self, num, Bg, Spread};

pub struct PassiveMix {
    pub secs: f64,
    pub events_per_sec: Spread,
    pub ns_per_event: Spread,
    pub consumer_cpu_pct: Spread,
    /// Share of the watched thread's hiccups that were its own system
    /// calls' softirqs: that the mix is the app's.
    pub in_syscall_share: Spread,
}

pub fn passive_mix(cx: &Ctx) -> Result<PassiveMix> {
    let secs = if cx.quick { 1.5 } else { 3.0 };
    let (mut rate, mut ns, mut cpu, mut own) = (vec![], vec![], vec![], vec![]);
    for _ in 0..cx.reps(3) {
        let app = Bg::spawn(
            Command::new("taskset")
                .args(["-c", &cx.watched.to_string()])
                .arg(&cx.tcppp)
                .arg((secs + 10.0).to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        )?;
        std::thread::sleep(Duration::from_millis(300));
        let pid = app.0.id().to_string();
        // taskset execs the app: its pid is the app's.
        let v = util::jw_run(&cx.bin, cx.watched, secs, &["--pid", &pid], None)?.json;
        drop(app);
        rate.push(num(&v, "/events_per_sec"));
        ns.push(num(&v, "/overhead/consumer_ns_per_event"));
        cpu.push(100.0 * num(&v, "/overhead/consumer_cpu_ns") / num(&v, "/duration_ns").max(1.0));
        let threads = v["threads"].as_array().cloned().unwrap_or_default();
        let sum = |k: &str| threads.iter().map(|t| t[k].as_f64().unwrap_or(0.0)).sum::<f64>();
        let all = sum("hiccups") + sum("in_syscall");
        own.push(if all > 0.0 { sum("in_syscall") / all } else { f64::NAN });
    }
    let m = PassiveMix {
        secs,
        events_per_sec: Spread::of(&rate),
        ns_per_event: Spread::of(&ns),
        consumer_cpu_pct: Spread::of(&cpu),
        in_syscall_share: Spread::of(&own),
    };
    println!(
        "bench:   passive mode on a TCP ping-pong: {:.0} events/s, consumer {:.0} ns/event ({:.1}% of a CPU)",
        m.events_per_sec.median, m.ns_per_event.median, m.consumer_cpu_pct.median
    );
    Ok(m)
}

/// Its section of BENCHMARKS.md.
pub fn markdown(m: &PassiveMix, watched: usize) -> String {
    format!(
        "\n### 4c. The collector at a real app's mix (passive mode)\n\n\
         Two threads of one process ping-pong 64-byte messages over loopback TCP, pinned to CPU {watched} (every \
         write() runs the peer's NET_RX softirq inside the system call, wakes the peer and is preempted by it: the mix \
         redis-server showed under redis-benchmark, at its own rate); `jitterwatch --pid APP --cpus {watched} --duration \
         {}s --json`, {} runs. The consumer's CPU time per event drained (ring read to every sink), and its share of a \
         CPU. Target (issue 33): ≤ {} ns per event.\n\n\
         | events/s | consumer ns/event | consumer % of a CPU | hiccups that were the app's own syscalls' softirqs |\n\
         |---|---|---|---|\n| {} | {} | {} | {} |\n",
        m.secs,
        m.events_per_sec.n,
        super::targets::COLLECTOR_NS_PER_EVENT,
        m.events_per_sec.show(0),
        m.ns_per_event.show(0),
        m.consumer_cpu_pct.show(1),
        m.in_syscall_share.show(2)
    )
}
