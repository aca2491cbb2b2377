//! The endpoint on the wire, without BPF: a real listener on loopback
//! serving a view published from synthetic counters, and clients that
//! misbehave beside a scrape (issue #40, items 2 and 11).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use super::*;
use crate::stats::CpuCounters;

/// A listener on a free loopback port, serving a published view.
fn serving() -> SocketAddr {
    let slot = Slot::default();
    let mut e = Exporter::new(&[6], 10, "probe", slot.clone(), 0);
    let mut raw = Counters::new(&[6]);
    raw.cpus = vec![CpuCounters::new(6)];
    e.publish(&raw, 1);
    let ep = Endpoint::bind("127.0.0.1:0").unwrap();
    let addr = ep.addr;
    // No CPUs to pin to: the thread keeps the test's affinity.
    ep.serve(slot, Vec::new()).unwrap();
    addr
}

/// Sends `request` whole and reads the answer to its end (the server
/// closes), giving up at `limit`: (what came back, how long it took).
fn exchange(addr: SocketAddr, request: &[u8], limit: Duration) -> (String, Duration) {
    let t = Instant::now();
    let Ok(mut s) = TcpStream::connect_timeout(&addr, limit) else {
        return (String::new(), t.elapsed());
    };
    s.set_read_timeout(Some(limit)).unwrap();
    let _ = s.write_all(request);
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    (String::from_utf8_lossy(&got).into_owned(), t.elapsed())
}

const SCRAPE: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";

/// A client that sends `SCRAPE` a byte every `every` until told to stop,
/// `give_up` has passed or the server closes; returns how long it was let
/// go on.
fn slow_client(addr: SocketAddr, every: Duration, stop: Arc<AtomicBool>, give_up: Duration) -> thread::JoinHandle<Duration> {
    thread::spawn(move || {
        let t = Instant::now();
        let mut s = TcpStream::connect(addr).unwrap();
        // The request never ends: the head's blank line is never sent.
        for &b in SCRAPE.iter().cycle().filter(|&&b| b != b'\r') {
            if stop.load(Ordering::Relaxed) || t.elapsed() > give_up || s.write_all(&[b]).is_err() {
                break;
            }
            // Writes into a closed connection can succeed once (the
            // reset comes back after): a read that sees the end is sure.
            s.set_read_timeout(Some(every)).unwrap();
            let mut one = [0u8; 512];
            match s.read(&mut one) {
                Ok(_) => break,
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => break,
            }
        }
        t.elapsed()
    })
}

/// One slow client (a byte a second, never finishing) and 500 idle
/// connections do not hold up a scrape. The old server answered one
/// connection at a time with a 2 s timeout per read: the slow client held
/// it indefinitely (up to 8 KiB × 2 s) and the idle ones filled the
/// backlog, so a scrape waited past any client's timeout.
#[test]
fn a_scrape_is_answered_beside_a_slow_client_and_500_idle_connections() {
    let addr = serving();
    let stop = Arc::new(AtomicBool::new(false));
    let slow = slow_client(addr, Duration::from_secs(1), stop.clone(), Duration::from_secs(30));
    thread::sleep(Duration::from_millis(100));
    // Opened from another thread: against a full backlog a connect waits
    // for the kernel's SYN retries (the first after 1 s), which is what the
    // scrape must not do. One retry is allowed: a busy test machine may
    // not run the server between 128 connects.
    let (tx, rx) = mpsc::channel();
    let (done, scraped) = mpsc::channel::<()>();
    let opener = thread::spawn(move || {
        // At most 5 s at it, so that against a server that leaves them in
        // the backlog the test fails instead of hanging.
        let t = Instant::now();
        let idle: Vec<TcpStream> = (0..500)
            .map_while(|_| (t.elapsed() < Duration::from_secs(5)).then_some(()))
            .filter_map(|_| TcpStream::connect_timeout(&addr, Duration::from_millis(1500)).ok())
            .collect();
        let _ = tx.send(idle.len());
        // Kept open until the scrape is done.
        let _ = scraped.recv_timeout(Duration::from_secs(30));
        drop(idle);
    });
    let opened = rx.recv_timeout(Duration::from_secs(30)).unwrap_or(0);
    let (answer, took) = exchange(addr, SCRAPE, Duration::from_secs(10));
    stop.store(true, Ordering::Relaxed);
    let _ = done.send(());
    eprintln!("a scrape beside a slow client and {opened} idle connections: {took:?}");
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{took:?}: {answer:?}");
    assert!(answer.contains("jitterwatch_hiccups_total{cpu=\"6\"} 0"), "{answer}");
    assert!(took < Duration::from_secs(3), "the scrape took {took:?}");
    assert_eq!(opened, 500, "idle connections refused or left waiting in the backlog");
    slow.join().unwrap();
    opener.join().unwrap();
}

/// The deadline is the request's, not each read's: a client sending a
/// byte a second is cut off when its 2 s are up (the old server gave it
/// 2 s per read, so it could go on for hours).
#[test]
fn a_slow_request_gets_two_seconds_in_all() {
    let addr = serving();
    let slow = slow_client(addr, Duration::from_millis(250), Arc::default(), Duration::from_secs(6));
    let lasted = slow.join().unwrap();
    eprintln!("a client sending a byte every 250 ms was cut off after {lasted:?}");
    assert!(lasted >= Duration::from_millis(1900) && lasted < Duration::from_secs(3), "{lasted:?}");
}

/// A request whose lines end in a bare LF (RFC 9112 lets a server take
/// them; `printf 'GET /metrics HTTP/1.0\n\n' | nc` sends them) is answered,
/// not left to time out.
#[test]
fn a_bare_lf_request_is_answered() {
    let addr = serving();
    let (answer, took) = exchange(addr, b"GET /metrics HTTP/1.0\nHost: x\n\n", Duration::from_secs(5));
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{took:?}: {answer:?}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    let (answer, _) = exchange(addr, b"HEAD /metrics HTTP/1.0\r\n\n", Duration::from_secs(5));
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n") && answer.ends_with("\r\n\r\n"), "{answer:?}");
}

/// A method we do not serve is told which we do (RFC 9110: a 405 carries
/// `Allow`).
#[test]
fn a_405_says_what_is_allowed() {
    let addr = serving();
    let (answer, _) = exchange(addr, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", Duration::from_secs(5));
    assert!(answer.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{answer:?}");
    assert!(answer.contains("\r\nAllow: GET, HEAD\r\n"), "{answer:?}");
}

/// The head's end, CRLF or bare LF, found across reads: the search starts
/// two bytes back from the new ones.
#[test]
fn the_head_ends_at_its_blank_line_either_way() {
    use super::http::end_of_head;
    assert_eq!(end_of_head(b"GET / HTTP/1.1\r\n\r\n", 0), Some(18));
    assert_eq!(end_of_head(b"GET / HTTP/1.1\n\n", 0), Some(16));
    assert_eq!(end_of_head(b"GET / HTTP/1.1\r\nHost: x\n\r\nbody", 0), Some(26));
    assert_eq!(end_of_head(b"GET / HTTP/1.1\r\nHost: x\r\n", 0), None);
    // "\n\r" came in one read and "\n" in the next.
    let head = b"GET / HTTP/1.1\r\n\r\n";
    assert_eq!(end_of_head(head, head.len() - 1 - 2), Some(18));
}
