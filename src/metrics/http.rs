//! `/metrics` over HTTP/1.1, on a thread of its own on the housekeeping
//! CPUs. A scrape is one short GET; the server reads one request per
//! connection, answers and closes. One thread polls every connection
//! (nonblocking, `poll(2)`), so no peer waits for another: a client
//! sending a byte a second or hundreds of idle connections cost their own
//! connections only. Each connection has 2 s for its whole request and 2 s
//! to take its answer, whatever it sends meanwhile, and at most
//! [`MAX_CONNS`] are held: past that the oldest still reading is closed
//! for the newest, so a flood cannot fill the backlog in front of a
//! scrape. Written on std's TcpListener rather than an HTTP crate: it needs
//! no routing, no keep-alive, no TLS (put a proxy in front for those), and
//! no async runtime.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};

use super::{encode, Slot};

/// A request head larger than this is refused.
const MAX_HEAD: usize = 8 * 1024;
/// How long a peer has to send its whole request (not each read: a byte
/// a second would otherwise hold a connection for hours).
const REQUEST_TIME: Duration = Duration::from_secs(2);
/// How long a peer has to take the answer once its request is in.
const ANSWER_TIME: Duration = Duration::from_secs(2);
/// Connections held at once. A scrape needs one; the bound keeps a flood
/// to this many descriptors and a few KiB each.
const MAX_CONNS: usize = 128;
/// After `accept` fails for want of descriptors or memory, the listener
/// stays readable: it is left out of the poll this long instead of spun on.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);
/// What we answer besides 405's methods (RFC 9110: a 405 says which are).
const ALLOW: &str = "GET, HEAD";
/// Served to clients that ask for it (Prometheus does): what
/// prometheus-client's text encoder writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// Served to the others: Prometheus's classic text format.
pub const CLASSIC_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A bound listener, before its thread starts.
pub struct Endpoint {
    listener: TcpListener,
    pub addr: SocketAddr,
}

impl Endpoint {
    /// Binds `addr` (`HOST:PORT`: `127.0.0.1:9464`, `[::]:9464` or
    /// `localhost:9464`): a malformed address, another host name or a port
    /// in use is one line, before anything spins. localhost (127.0.0.1,
    /// then ::1) is served on the first that binds, as curl connects to the
    /// first that answers.
    pub fn bind(addr: &str) -> Result<Self> {
        let shown = crate::sanitize::visible(addr);
        let candidates = match addr.parse::<SocketAddr>() {
            Ok(sa) => vec![sa],
            Err(_) => {
                let Some((host, port)) =
                    addr.rsplit_once(':').and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?))).filter(|(h, _)| !h.is_empty())
                else {
                    return Err(anyhow!(
                        "--prometheus {shown}: not an address; give HOST:PORT, e.g. 127.0.0.1:9464, localhost:9464 or [::]:9464"
                    ));
                };
                // Only localhost, by the addresses every system gives it: the
                // static build must not link glibc's resolver (it would load
                // the host's NSS modules at run time).
                if !host.eq_ignore_ascii_case("localhost") {
                    let host_shown = crate::sanitize::visible(host);
                    return Err(anyhow!(
                        "--prometheus {shown}: {host_shown} is not looked up (host names other than localhost are not resolved: the static build carries no resolver); give an IP address, e.g. 127.0.0.1:9464"
                    ));
                }
                let found: Vec<SocketAddr> = [IpAddr::from([127, 0, 0, 1]), IpAddr::from(std::net::Ipv6Addr::LOCALHOST)]
                    .map(|ip| SocketAddr::new(ip, port))
                    .to_vec();
                found
            }
        };
        let mut first_err = None;
        for sa in candidates {
            match TcpListener::bind(sa) {
                Ok(listener) => {
                    let addr = listener.local_addr().context("the endpoint's address")?;
                    return Ok(Self { listener, addr });
                }
                Err(e) => {
                    first_err.get_or_insert((sa, e));
                }
            }
        }
        let (sa, e) = first_err.expect("at least one address was tried");
        Err(match e.kind() {
            io::ErrorKind::AddrInUse => anyhow!("--prometheus {sa}: the port is in use; pick another (9464 is the usual one)"),
            io::ErrorKind::PermissionDenied if sa.port() < 1024 => anyhow!("{}", crate::caps::low_port_denied(&sa.to_string())),
            io::ErrorKind::AddrNotAvailable => anyhow!("--prometheus {sa}: no interface of this machine has that address"),
            _ => anyhow!("--prometheus {sa}: cannot listen there: {e}"),
        })
    }

    /// One line when the endpoint is reachable from beyond this machine:
    /// /metrics names the processes and threads that took the CPUs, which
    /// is for the fleet's Prometheus, not for anyone on the network.
    pub fn exposure(&self) -> Option<String> {
        exposure(self.addr)
    }

    /// Serves `slot`'s latest view from a thread pinned to `cpus`. The
    /// thread ends with the process.
    pub fn serve(self, slot: Slot, cpus: Vec<usize>) -> Result<()> {
        self.listener.set_nonblocking(true).context("the metrics listener")?;
        thread::Builder::new()
            .name("jw-metrics".into())
            .spawn(move || {
                let _ = crate::sys::pin_to(&cpus);
                Server::new(self.listener, slot).run()
            })
            .context("cannot start the metrics thread")?;
        Ok(())
    }
}

/// The warning for an address other than loopback, if it is one.
pub fn exposure(addr: SocketAddr) -> Option<String> {
    // ::ffff:127.0.0.1 is loopback too.
    let ip = match addr.ip() {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    (!ip.is_loopback()).then(|| {
        format!(
            "--prometheus {addr}: /metrics carries process and thread names to anyone who can reach this port; \
             bind 127.0.0.1 (or firewall the port) unless the network may see them"
        )
    })
}

/// One connection: reading its request, then sending its answer.
struct Conn {
    stream: TcpStream,
    /// The request head read so far; then the answer.
    buf: Vec<u8>,
    /// Of the answer, the bytes sent.
    sent: usize,
    answering: bool,
    deadline: Instant,
}

/// Where a connection stands after it was ready.
enum Next {
    Wait,
    Close,
}

impl Conn {
    fn new(stream: TcpStream, now: Instant) -> Self {
        Self { stream, buf: Vec::with_capacity(512), sent: 0, answering: false, deadline: now + REQUEST_TIME }
    }

    /// Reads what has come, answers once the head is whole, sends what
    /// the peer takes.
    fn ready(&mut self, slot: &Slot, now: Instant) -> Next {
        if !self.answering {
            let mut chunk = [0u8; 1024];
            loop {
                match self.stream.read(&mut chunk) {
                    Ok(0) => return Next::Close,
                    Ok(n) => {
                        let from = self.buf.len().saturating_sub(2);
                        self.buf.extend_from_slice(&chunk[..n]);
                        if let Some(end) = end_of_head(&self.buf, from) {
                            let answer = answer(&self.buf[..end], slot);
                            self.start_answer(answer, now);
                            break;
                        }
                        if self.buf.len() > MAX_HEAD {
                            let answer = plain("400 Bad Request", "the request head is over 8 KiB\n", false);
                            self.start_answer(answer, now);
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return Next::Close,
                }
            }
        }
        while self.sent < self.buf.len() {
            match self.stream.write(&self.buf[self.sent..]) {
                Ok(0) => return Next::Close,
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Next::Close,
            }
        }
        Next::Close
    }

    fn start_answer(&mut self, answer: Vec<u8>, now: Instant) {
        self.buf = answer;
        self.sent = 0;
        self.answering = true;
        self.deadline = now + ANSWER_TIME;
    }

    /// Its time is up: a peer that sent part of a request is told so, as
    /// far as its socket takes it at once; then it is closed.
    fn expire(&mut self) {
        if !self.answering && !self.buf.is_empty() {
            let _ = self.stream.write(b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
        }
    }
}

/// Where the head ends (past its blank line), searching from `from`. A
/// line may end in CRLF or a bare LF (RFC 9112 lets a server take it, and
/// `printf '...\n\n' | nc` sends it).
pub(super) fn end_of_head(buf: &[u8], from: usize) -> Option<usize> {
    (from..buf.len()).find_map(|i| match &buf[i..] {
        [b'\n', b'\n', ..] => Some(i + 2),
        [b'\n', b'\r', b'\n', ..] => Some(i + 3),
        _ => None,
    })
}

/// The poll loop: the listener and every connection, each with its own
/// deadline.
struct Server {
    listener: TcpListener,
    slot: Slot,
    /// Oldest first.
    conns: VecDeque<Conn>,
    fds: Vec<libc::pollfd>,
    /// Set while `accept` is paused after running out of descriptors.
    accept_after: Option<Instant>,
}

impl Server {
    fn new(listener: TcpListener, slot: Slot) -> Self {
        Self { listener, slot, conns: VecDeque::with_capacity(MAX_CONNS), fds: Vec::with_capacity(MAX_CONNS + 1), accept_after: None }
    }

    fn run(mut self) {
        loop {
            self.poll();
            let now = Instant::now();
            // The connections first: a request already in is answered
            // before a flood of new ones can push it out.
            let (fds, slot) = (&self.fds, &self.slot);
            let mut i = 0;
            self.conns.retain_mut(|c| {
                i += 1;
                if fds[i].revents != 0 && matches!(c.ready(slot, now), Next::Close) {
                    return false;
                }
                if now >= c.deadline {
                    c.expire();
                    return false;
                }
                true
            });
            if self.fds[0].revents != 0 {
                self.accept(now);
            }
        }
    }

    /// Waits until the listener or a connection is ready, or the nearest
    /// deadline.
    fn poll(&mut self) {
        let now = Instant::now();
        if self.accept_after.is_some_and(|t| now >= t) {
            self.accept_after = None;
        }
        self.fds.clear();
        let listen = if self.accept_after.is_none() { libc::POLLIN } else { 0 };
        self.fds.push(libc::pollfd { fd: self.listener.as_raw_fd(), events: listen, revents: 0 });
        for c in &self.conns {
            let events = if c.answering { libc::POLLOUT } else { libc::POLLIN };
            self.fds.push(libc::pollfd { fd: c.stream.as_raw_fd(), events, revents: 0 });
        }
        let next = self.conns.iter().map(|c| c.deadline).chain(self.accept_after).min();
        // Rounded up: waking a millisecond early would only poll again.
        let timeout = next.map_or(-1, |t| (t.saturating_duration_since(now).as_micros().div_ceil(1000)).min(i32::MAX as u128) as i32);
        // SAFETY: `fds` is a live array of `fds.len()` pollfds, each a
        // descriptor owned by the listener or a connection.
        let n = unsafe { libc::poll(self.fds.as_mut_ptr(), self.fds.len() as libc::nfds_t, timeout) };
        if n < 0 {
            // EINTR (or, never seen, EINVAL/ENOMEM): nothing is ready; the
            // loop goes round with its deadlines.
            self.fds.iter_mut().for_each(|f| f.revents = 0);
            if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                thread::sleep(ACCEPT_PAUSE);
            }
        }
    }

    /// Takes the connections waiting, at most a full set per round so the
    /// ones held are served in between.
    fn accept(&mut self, now: Instant) {
        for _ in 0..MAX_CONNS {
            match self.listener.accept() {
                Ok((s, _)) => {
                    if s.set_nonblocking(true).is_err() {
                        continue;
                    }
                    if self.conns.len() == MAX_CONNS {
                        // The oldest still reading: a scrape being answered
                        // is not cut, and a scrape's request comes at once.
                        let i = self.conns.iter().position(|c| !c.answering).unwrap_or(0);
                        self.conns.remove(i);
                    }
                    self.conns.push_back(Conn::new(s, now));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted || e.raw_os_error() == Some(libc::ECONNABORTED) => {}
                Err(_) => {
                    // EMFILE, ENFILE, ENOBUFS: the peer waits in the
                    // backlog while descriptors free up.
                    self.accept_after = Some(now + ACCEPT_PAUSE);
                    return;
                }
            }
        }
    }
}

/// What a request asks for (its first line, and whether its Accept header
/// names OpenMetrics): (status, content type, body).
pub fn respond(request_line: &str, openmetrics: bool, slot: &Slot) -> (&'static str, &'static str, String) {
    let mut parts = request_line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            // Take the view and let go of the slot before encoding.
            let view = slot.lock().map(|g| g.clone()).unwrap_or(None);
            match view {
                Some(v) if openmetrics => ("200 OK", CONTENT_TYPE, encode(v)),
                Some(v) => ("200 OK", CLASSIC_TYPE, super::classic_text(&encode(v))),
                None => ("503 Service Unavailable", "text/plain; charset=utf-8", "jitterwatch is starting: no figures yet\n".into()),
            }
        }
        ("GET" | "HEAD", "/") => ("200 OK", "text/plain; charset=utf-8", "jitterwatch: metrics at /metrics\n".into()),
        ("GET" | "HEAD", _) => ("404 Not Found", "text/plain; charset=utf-8", "not found: try /metrics\n".into()),
        _ => ("405 Method Not Allowed", "text/plain; charset=utf-8", format!("only {ALLOW}\n")),
    }
}

/// The whole answer to a request head.
fn answer(head: &[u8], slot: &Slot) -> Vec<u8> {
    let head = String::from_utf8_lossy(head);
    // `lines` ends a line at LF and drops a CR before it: both endings.
    let line = head.lines().next().unwrap_or("");
    let openmetrics = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .any(|(k, v)| k.trim().eq_ignore_ascii_case("accept") && v.contains("application/openmetrics-text"));
    let (status, ty, body) = respond(line, openmetrics, slot);
    with_head(status, ty, &body, line.starts_with("HEAD "))
}

fn plain(status: &str, body: &str, head_only: bool) -> Vec<u8> {
    with_head(status, "text/plain; charset=utf-8", body, head_only)
}

fn with_head(status: &str, ty: &str, body: &str, head_only: bool) -> Vec<u8> {
    let allow = if status.starts_with("405") { format!("Allow: {ALLOW}\r\n") } else { String::new() };
    let mut out = format!("HTTP/1.1 {status}\r\nContent-Type: {ty}\r\nContent-Length: {}\r\n{allow}Connection: close\r\n\r\n", body.len());
    if !head_only {
        out.push_str(body);
    }
    out.into_bytes()
}
