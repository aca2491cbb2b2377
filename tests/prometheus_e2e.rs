//! Root, end to end: a real Prometheus server scrapes a running
//! jitterwatch; its answers are checked against jitterwatch's own summary,
//! promtool checks the exposition and the shipped rules, and a storm of
//! uniquely named processes keeps the series bounded.

mod common;
use common::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// A port free on loopback now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// GET `path` from 127.0.0.1:`port`: (status line, body).
fn get(port: u16, path: &str) -> std::io::Result<(String, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    Ok((head.lines().next().unwrap_or("").to_string(), body.to_string()))
}

fn promtool(args: &[&str], stdin: Option<&str>) -> (bool, String) {
    let mut c = Command::new("promtool")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus; cargo xtask deps installs it)");
    if let Some(text) = stdin {
        c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    }
    drop(c.stdin.take());
    let out = c.wait_with_output().unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// Prometheus's answer to an instant query: each series' labels and value.
fn query(port: u16, q: &str) -> Vec<(serde_json::Value, f64)> {
    let enc: String = q.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect();
    let (status, body) = get(port, &format!("/api/v1/query?query={enc}")).expect("Prometheus answers");
    assert!(status.contains("200"), "{status}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    v["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["metric"].clone(), r["value"][1].as_str().unwrap().parse().unwrap()))
        .collect()
}

fn wait_until(limit: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if ok() {
            return true;
        }
        thread::sleep(Duration::from_millis(200));
    }
    false
}

#[test]
fn prometheus_scrapes_what_the_summary_says() {
    if !require_root_btf("prometheus_scrapes_what_the_summary_says") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu().to_string();
    let (jw, prom) = (free_port(), free_port());
    let addr = format!("127.0.0.1:{jw}");
    let (child, dir, _csv) =
        watch_csv(&["--cpus", &cpu, "--no-tui", "--json", "--duration", "6s", "--prometheus", &addr, "--prometheus-linger", "6s"], &[]);
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: jitterwatch\n    static_configs:\n      - targets: ['{addr}']\n"),
    )
    .unwrap();
    let mut server = Command::new("prometheus")
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!("--storage.tsdb.path={}", dir.path().join("tsdb").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{prom}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus (Debian package prometheus; cargo xtask deps installs it)");
    // Into the linger: the run is over, its final figures are served.
    thread::sleep(Duration::from_secs(8));
    let (status, text) = get(jw, "/metrics").expect("the endpoint answers while it lingers");
    assert!(status.contains("200"), "{status}");
    let (ok, lint) = promtool(&["check", "metrics"], Some(&text));
    assert!(ok, "promtool check metrics: {lint}\n{text}");
    let t0 = Instant::now();
    let n = 50;
    for _ in 0..n {
        get(jw, "/metrics").unwrap();
    }
    eprintln!("endpoint: {} bytes, {:.2} ms per scrape", text.len(), t0.elapsed().as_secs_f64() * 1e3 / n as f64);
    // Prometheus scraped the final figures during the linger: asked while
    // it lingers, since once the target is gone the next failed scrape
    // marks its series stale and a query finds none.
    let (mut got, mut got_un) = (vec![], vec![]);
    let scraped = wait_until(Duration::from_secs(3), || {
        got = query(prom, "jitterwatch_hiccups_total");
        got_un = query(prom, "jitterwatch_cause_stolen_seconds_total{kind=\"unexplained\"}");
        !got.is_empty() && !got_un.is_empty()
    });
    assert!(scraped, "Prometheus has no series while the endpoint lingers: {got:?} {got_un:?}");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    let c = &summary["cpus"][0];
    let hiccups = c["hiccups"].as_f64().unwrap();
    let unexplained = c["top_causes"].as_array().unwrap().iter().find(|k| k["kind"] == "unexplained").expect("unexplained in the summary");
    let want = unexplained["total_ns"].as_f64().unwrap() / 1e9;
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0["cpu"], cpu.as_str());
    assert_eq!(got[0].0["job"], "jitterwatch");
    eprintln!("PromQL jitterwatch_hiccups_total = {} ; summary hiccups = {hiccups}", got[0].1);
    assert_eq!(got[0].1, hiccups, "Prometheus vs the summary");
    let got = got_un;
    assert_eq!(got.len(), 1, "{got:?}");
    eprintln!("PromQL unexplained = {} s ; summary {want} s", got[0].1);
    assert!((got[0].1 - want).abs() <= want * 1e-9, "{} vs {want}", got[0].1);
}

#[test]
fn the_shipped_rules_and_dashboard_queries_pass_promtool() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (ok, out) = promtool(&["check", "rules", root.join("contrib/prometheus/alerts.yml").to_str().unwrap()], None);
    assert!(ok, "{out}");
    // Each dashboard query, as a recording rule, with Grafana's variables
    // given values.
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("contrib/grafana/jitterwatch.json")).unwrap()).unwrap();
    let mut exprs = Vec::new();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            exprs.push(t["expr"].as_str().unwrap().replace("$__rate_interval", "1m").replace("$__range", "1h").replace('$', ""));
        }
    }
    assert!(exprs.len() >= 8, "{exprs:?}");
    let rules: String = exprs
        .iter()
        .enumerate()
        .map(|(i, e)| format!("      - record: jw_dashboard_{i}\n        expr: {}\n", serde_json::to_string(e).unwrap()))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("dash.yml");
    std::fs::write(&f, format!("groups:\n  - name: dashboard\n    rules:\n{rules}")).unwrap();
    let (ok, out) = promtool(&["check", "rules", f.to_str().unwrap()], None);
    assert!(ok, "{out}");
}

#[test]
fn a_storm_of_unique_names_keeps_the_series_bounded() {
    if !require_root_btf("a_storm_of_unique_names_keeps_the_series_bounded") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    let c = cpu.to_string();
    let jw = free_port();
    let addr = format!("127.0.0.1:{jw}");
    let (mut child, _dir, _csv) =
        watch_csv(&["--cpus", &c, "--no-tui", "--duration", "30s", "--prometheus", &addr, "--prometheus-top", "5"], &[]);
    assert!(wait_until(Duration::from_secs(5), || get(jw, "/metrics").is_ok_and(|(s, _)| s.contains("200"))), "no /metrics");
    // 400 short-lived processes, each named uniquely, on the watched CPU;
    // and a thread with a hostile name.
    let storm = thread::spawn(move || {
        pin_self(cpu);
        for i in 0..400 {
            let _ = Command::new("sh")
                .arg("-c")
                .arg(format!("printf jwstorm{i} > /proc/self/comm; i=0; while [ $i -lt 300 ]; do i=$((i+1)); done"))
                .status();
        }
    });
    let evil = thread::spawn(move || {
        pin_self(cpu);
        set_thread_name("j\"w\\e\x1b]x");
        for _ in 0..20 {
            burn(2_000_000);
            thread::sleep(Duration::from_millis(20));
        }
    });
    storm.join().unwrap();
    evil.join().unwrap();
    thread::sleep(Duration::from_millis(1500));
    let (_, text) = get(jw, "/metrics").unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let (ok, lint) = promtool(&["check", "metrics"], Some(&text));
    assert!(ok, "promtool check metrics: {lint}");
    let causes: Vec<&str> = text.lines().filter(|l| l.starts_with("jitterwatch_cause_stolen_seconds_total{")).collect();
    let storm_named = causes.iter().filter(|l| l.contains("jwstorm")).count();
    eprintln!("{} cause series ({storm_named} of them a storm process's), {} lines in all", causes.len(), text.lines().count());
    // 5 of their own, plus one (others) per kind at most (13 kinds).
    assert!(causes.len() <= 5 + 13, "{causes:#?}");
    assert!(causes.iter().any(|l| l.contains("kind=\"task\",name=\"(others)\"")), "the storm went nowhere: {causes:#?}");
}
