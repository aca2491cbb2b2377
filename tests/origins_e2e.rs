//! Root, end to end: the origins of what ran on the watched CPU, sent from
//! a housekeeping CPU: TLB-shootdown IPIs from an mprotect loop, the
//! refresh_vm_stats work a shell queues, a task woken by another.

mod common;
use common::*;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// Rows whose `kind:name` cause contains `name`, and of them those whose
/// origin for it contains `sender`.
fn share(rows: &[Row], kind: &str, name: &str, sender: &str) -> (usize, usize) {
    let with: Vec<&Row> = rows.iter().filter(|r| r.causes.iter().any(|c| c.0 == kind && c.1.contains(name))).collect();
    let named = with.iter().filter(|r| r.origins.iter().any(|o| o.0 == kind && o.1.contains(name) && o.2.contains(sender))).count();
    (with.len(), named)
}

#[test]
fn ipis_work_and_wakeups_name_who_sent_them() {
    if !require_root_btf("ipis_work_and_wakeups_name_who_sent_them") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    let hk = online_cpus().into_iter().find(|&c| c != cpu).expect("a housekeeping CPU");
    let c = cpu.to_string();
    let (child, _dir, csv) = watch_csv(&["--cpus", &c, "--no-tui", "--duration", "5s", "--wake-origins"], &[]);
    thread::sleep(Duration::from_millis(800));
    let stop = Arc::new(AtomicBool::new(false));
    let until = Instant::now() + Duration::from_secs(3);

    // A thread of this process on the watched CPU keeps our mm there; a
    // thread on the housekeeping CPU dirties a page and makes it read-only
    // again: each such mprotect shoots down the TLB entry of every CPU
    // running our mm, the watched one included, by IPI.
    let page = {
        // SAFETY: an anonymous private mapping of one page.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        assert_ne!(p, libc::MAP_FAILED);
        p as usize
    };
    let s = stop.clone();
    let toucher = thread::spawn(move || {
        pin_self(cpu);
        set_thread_name("jwtoucher");
        while !s.load(Relaxed) {
            // SAFETY: reading the mapped page (readable in both protections).
            unsafe { std::ptr::read_volatile(page as *const u8) };
            burn(200_000);
            thread::sleep(Duration::from_micros(100));
        }
    });
    let flipper = thread::spawn(move || {
        pin_self(hk);
        set_thread_name("jwmprotect");
        let mut n = 0u64;
        while Instant::now() < until {
            // SAFETY: the page mapped above, never unmapped while this runs;
            // written only while writable (a written PTE is what the
            // downgrade must shoot down; the zero page a read maps is not).
            unsafe {
                libc::mprotect(page as *mut libc::c_void, 4096, libc::PROT_READ | libc::PROT_WRITE);
                std::ptr::write_volatile(page as *mut u8, n as u8);
                libc::mprotect(page as *mut libc::c_void, 4096, libc::PROT_READ);
            }
            n += 1;
            thread::sleep(Duration::from_micros(500));
        }
        n
    });

    // A thread on the housekeeping CPU wakes one on the watched CPU.
    let word = Arc::new(AtomicU32::new(0));
    let w = word.clone();
    let s = stop.clone();
    let sleeper = thread::spawn(move || {
        pin_self(cpu);
        set_thread_name("jwsleeper");
        while !s.load(Relaxed) {
            futex(&w, libc::FUTEX_WAIT, 0);
            w.store(0, Relaxed);
            burn(30_000);
        }
    });
    let w = word.clone();
    let waker = thread::spawn(move || {
        pin_self(hk);
        set_thread_name("jwwaker");
        while Instant::now() < until {
            w.store(1, Relaxed);
            futex(&w, libc::FUTEX_WAKE, 1);
            thread::sleep(Duration::from_millis(2));
        }
    });

    // A shell on the housekeeping CPU queues refresh_vm_stats on every CPU.
    for _ in 0..5 {
        let st = Command::new("taskset").args(["-c", &hk.to_string(), "sh", "-c", "echo 1 > /proc/sys/vm/stat_refresh"]).status().unwrap();
        assert!(st.success());
        thread::sleep(Duration::from_millis(300));
    }
    let flips = flipper.join().unwrap();
    waker.join().unwrap();
    stop.store(true, Relaxed);
    word.store(1, Relaxed);
    futex(&word, libc::FUTEX_WAKE, 1);
    sleeper.join().unwrap();
    toucher.join().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows = read_csv(&csv);

    let (ipi, ipi_named) = share(&rows, "ipi", "flush_tlb_func", "jwmprotect[");
    let (work, work_named) = share(&rows, "work", "refresh_vm_stats", "sh[");
    let (woke, woke_named) = share(&rows, "task", "jwsleeper", "jwwaker[");
    let any_origin = rows.iter().filter(|r| !r.origins.is_empty()).count();
    eprintln!(
        "{flips} mprotects; rows with flush_tlb_func {ipi} (origin jwmprotect: {ipi_named}); refresh_vm_stats {work} (origin sh: {work_named}); jwsleeper {woke} (origin jwwaker: {woke_named}); {any_origin} of {} rows have an origin",
        rows.len()
    );
    assert!(ipi >= 10, "too few TLB-shootdown IPIs reached CPU {cpu} to test: {ipi}");
    assert!(ipi_named * 10 >= ipi * 9, "{ipi_named} of {ipi} IPI rows name jwmprotect");
    assert!(work >= 1 && work_named * 10 >= work * 9, "{work_named} of {work} refresh_vm_stats rows name the shell");
    assert!(woke >= 10 && woke_named * 10 >= woke * 9, "{woke_named} of {woke} jwsleeper rows name jwwaker");
}
