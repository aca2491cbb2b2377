//! `/metrics` over HTTP/1.1, on a thread of its own on the housekeeping
//! CPUs. A scrape is one short GET; the server reads one request per
//! connection (bounded in size and time, so a slow or hostile peer holds it
//! two seconds at most), answers and closes. Written on std's TcpListener
//! rather than an HTTP crate: it needs no routing, no keep-alive, no TLS
//! (put a proxy in front for those), and no async runtime.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::{encode, Slot};

/// A request head larger than this is refused.
const MAX_HEAD: usize = 8 * 1024;
/// How long a peer may take to send its request or take the answer.
const PEER_TIMEOUT: Duration = Duration::from_secs(2);
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
    /// Binds `addr` (`HOST:PORT`, e.g. `127.0.0.1:9464` or `[::]:9464`):
    /// a malformed address or a port in use is one line, before anything
    /// spins.
    pub fn bind(addr: &str) -> Result<Self> {
        let Ok(sa) = addr.parse::<SocketAddr>() else {
            bail!("--prometheus {}: not an address; give IP:PORT, e.g. 127.0.0.1:9464 or [::]:9464", crate::sanitize::visible(addr));
        };
        let listener = TcpListener::bind(sa).map_err(|e| match e.kind() {
            io::ErrorKind::AddrInUse => anyhow::anyhow!("--prometheus {sa}: the port is in use; pick another (9464 is the usual one)"),
            io::ErrorKind::AddrNotAvailable => anyhow::anyhow!("--prometheus {sa}: no interface of this machine has that address"),
            _ => anyhow::anyhow!("--prometheus {sa}: cannot listen there: {e}"),
        })?;
        let addr = listener.local_addr().context("the endpoint's address")?;
        Ok(Self { listener, addr })
    }

    /// Serves `slot`'s latest view from a thread pinned to `cpus`. The
    /// thread ends with the process.
    pub fn serve(self, slot: Slot, cpus: Vec<usize>) -> Result<()> {
        thread::Builder::new()
            .name("jw-metrics".into())
            .spawn(move || {
                let _ = crate::sys::pin_to(&cpus);
                // A peer that misbehaves costs its own connection only.
                for s in self.listener.incoming().flatten() {
                    let _ = answer(s, &slot);
                }
            })
            .context("cannot start the metrics thread")?;
        Ok(())
    }
}

/// Reads the request head: up to the blank line, within [`MAX_HEAD`].
fn read_head(s: &mut TcpStream) -> io::Result<Option<Vec<u8>>> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_HEAD {
            return Ok(None);
        }
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Ok(None);
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(Some(head))
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
        _ => ("405 Method Not Allowed", "text/plain; charset=utf-8", "only GET\n".into()),
    }
}

fn answer(mut s: TcpStream, slot: &Slot) -> io::Result<()> {
    s.set_read_timeout(Some(PEER_TIMEOUT))?;
    s.set_write_timeout(Some(PEER_TIMEOUT))?;
    let Some(head) = read_head(&mut s)? else {
        return s.write_all(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
    };
    let head = String::from_utf8_lossy(&head);
    let line = head.lines().next().unwrap_or("");
    let openmetrics = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .any(|(k, v)| k.trim().eq_ignore_ascii_case("accept") && v.contains("application/openmetrics-text"));
    let (status, ty, body) = respond(line, openmetrics, slot);
    let head_only = line.starts_with("HEAD ");
    let mut out = format!("HTTP/1.1 {status}\r\nContent-Type: {ty}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    if !head_only {
        out.push_str(&body);
    }
    s.write_all(out.as_bytes())?;
    s.flush()
}
