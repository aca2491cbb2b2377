//! Figure 3b's device interrupt: a UDP datagram to the default gateway's
//! discard port makes the NIC raise one interrupt once it has sent it (its
//! send completion), and the NET_RX softirq reaps it. No answer is needed:
//! a gateway may refuse or rate-limit answers (this VM's stopped answering
//! TCP SYNs after a few thousand). The queue's interrupts are found by
//! counting them over a burst of datagrams, and routed to the watched CPU
//! for the figure, then put back.

use std::net::{Ipv4Addr, UdpSocket};
use std::time::Duration;

use anyhow::{bail, Context as _, Result};

/// Datagrams in the burst that finds the send queue's interrupts; an IRQ
/// that counted at least MATCHED of them is one.
const BURST: u64 = 50;
const MATCHED: u64 = 40;

/// The default route's gateway out of /proc/net/route (its addresses are
/// hex in the host's byte order, little-endian on every machine we run).
pub fn default_gateway(route: &str) -> Option<Ipv4Addr> {
    route.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 3 || f[1] != "00000000" {
            return None;
        }
        let gw = u32::from_str_radix(f[2], 16).ok().filter(|&g| g != 0)?;
        Some(Ipv4Addr::from(gw.swap_bytes()))
    })
}

/// Each numbered IRQ's total count over the CPUs, from /proc/interrupts.
fn counts(text: &str) -> Vec<(u32, u64)> {
    let cpus = text.lines().next().map_or(0, |h| h.split_whitespace().count());
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let (irq, rest) = l.trim_start().split_once(':')?;
            let irq = irq.parse().ok()?;
            let total = rest.split_whitespace().take(cpus).map_while(|c| c.parse::<u64>().ok()).sum();
            Some((irq, total))
        })
        .collect()
}

/// The IRQs that counted at least `at_least` between two reads of
/// /proc/interrupts.
pub fn counted(before: &str, after: &str, at_least: u64) -> Vec<u32> {
    let b = counts(before);
    counts(after)
        .into_iter()
        .filter(|&(irq, n)| n >= b.iter().find(|x| x.0 == irq).map_or(0, |x| x.1) + at_least)
        .map(|(irq, _)| irq)
        .collect()
}

/// The NIC's interrupts routed to one CPU while this lives; each IRQ's
/// affinity put back when dropped (the kernel then picks the CPU it
/// delivers to within it, as it did before).
pub struct Routed {
    pub gateway: Ipv4Addr,
    pub irqs: Vec<u32>,
    saved: Vec<(u32, String)>,
}

fn affinity(irq: u32) -> String {
    format!("/proc/irq/{irq}/smp_affinity_list")
}

/// Where the IRQs' own affinities are kept while they are routed: a bench
/// killed meanwhile (Ctrl-C, SIGKILL: no Drop runs) leaves it behind, and
/// the next bench puts them back from it ([`restore_left`]).
fn left_file() -> std::path::PathBuf {
    crate::proc::target_dir().join("bench-nic-routed")
}

/// "IRQ AFFINITY" lines, one per routed IRQ.
fn saved_lines(saved: &[(u32, String)]) -> String {
    saved.iter().map(|(irq, old)| format!("{irq} {old}\n")).collect()
}

/// The (IRQ, affinity) pairs of [`saved_lines`]; lines that are not one are skipped.
fn parse_saved(text: &str) -> Vec<(u32, String)> {
    text.lines()
        .filter_map(|l| {
            let (irq, old) = l.split_once(' ')?;
            let old = old.trim();
            (!old.is_empty() && old.bytes().all(|b| b.is_ascii_digit() || b == b',' || b == b'-'))
                .then(|| Some((irq.parse().ok()?, old.to_string())))?
        })
        .collect()
}

/// Puts back the affinities a killed bench left routed, and says which.
pub fn restore_left() {
    let path = left_file();
    let Ok(text) = std::fs::read_to_string(&path) else { return };
    for (irq, old) in parse_saved(&text) {
        match std::fs::write(affinity(irq), &old) {
            Ok(()) => println!("bench: IRQ {irq} was left routed by a bench that was stopped: its affinity is {old} again"),
            Err(e) => {
                println!("bench: IRQ {irq} was left routed by a bench that was stopped, and putting back its affinity {old} failed: {e}")
            }
        }
    }
    let _ = std::fs::remove_file(&path);
}

/// Routes the NIC's send-completion interrupts to `cpu`: the default
/// gateway from /proc/net/route, and the IRQs that count a burst of
/// datagrams to it, 2 ms apart (so that the NIC does not batch them).
pub fn route_to(cpu: usize) -> Result<Routed> {
    let gateway = default_gateway(&std::fs::read_to_string("/proc/net/route")?).context("no default gateway in /proc/net/route")?;
    let udp = UdpSocket::bind("0.0.0.0:0")?;
    udp.connect((gateway, 9))?;
    let before = std::fs::read_to_string("/proc/interrupts")?;
    for _ in 0..BURST {
        // A refusal sent back for an earlier datagram fails one send.
        let _ = udp.send(b"x");
        std::thread::sleep(Duration::from_millis(2));
    }
    let irqs = counted(&before, &std::fs::read_to_string("/proc/interrupts")?, MATCHED);
    if irqs.is_empty() {
        bail!("no interrupt counted {MATCHED} of {BURST} datagrams to the gateway {gateway}");
    }
    restore_left();
    let mut r = Routed { gateway, irqs: irqs.clone(), saved: Vec::new() };
    for irq in &irqs {
        let old = std::fs::read_to_string(affinity(*irq)).with_context(|| format!("reading {}", affinity(*irq)))?;
        r.saved.push((*irq, old.trim().to_string()));
    }
    // Kept before any is moved, so that a kill at any point leaves them.
    std::fs::write(left_file(), saved_lines(&r.saved)).with_context(|| format!("writing {}", left_file().display()))?;
    for irq in irqs {
        std::fs::write(affinity(irq), cpu.to_string()).with_context(|| format!("routing IRQ {irq} to CPU {cpu}"))?;
    }
    Ok(r)
}

impl Drop for Routed {
    fn drop(&mut self) {
        for (irq, old) in &self.saved {
            let _ = std::fs::write(affinity(*irq), old);
        }
        let _ = std::fs::remove_file(left_file());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_affinities_left_behind_read_back_as_written() {
        let saved = vec![(39, "0-1".to_string()), (40, "0,2-3".to_string())];
        assert_eq!(parse_saved(&saved_lines(&saved)), saved);
        // Nothing else is written to /proc: a torn or foreign line is skipped.
        assert_eq!(parse_saved("39\nx 1\n41 1;rm\n42 \n43 5\n"), vec![(43, "5".to_string())]);
    }

    #[test]
    fn the_gateway_is_the_default_routes() {
        let route = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                     eth0\t0002000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
                     eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n";
        assert_eq!(default_gateway(route), Some(Ipv4Addr::new(192, 0, 2, 1)));
        assert_eq!(default_gateway("Iface\tDestination\tGateway\neth0\t0002000A\t00000000\n"), None);
    }

    #[test]
    fn the_irqs_that_counted_the_burst_are_found() {
        let before = "           CPU0       CPU1\n 36:   2121760     193750  PCI-MSIX  1-edge  virtio1-req.0\n \
                      38:      45394       6105  PCI-MSIX  1-edge  virtio2-input.0\nLOC:   13466016   13947770   Local timer\n";
        let after = "           CPU0       CPU1\n 36:   2121770     193751  PCI-MSIX  1-edge  virtio1-req.0\n \
                     38:      45394       6155  PCI-MSIX  1-edge  virtio2-input.0\nLOC:   13466116   13947870   Local timer\n";
        assert_eq!(counted(before, after, 40), vec![38], "the receive queue, not the disk nor the named rows");
        assert_eq!(counted(before, before, 40), Vec::<u32>::new());
    }
}
