//! Root, end to end: two real runs on the last CPU, one with a FIFO hog
//! and one quiet, then `jitterwatch compare` on the files they wrote.

mod common;
use common::*;
use std::time::Duration;

#[test]
fn compare_says_the_hog_vanished_and_draws_the_chart() {
    if !require_root_btf("compare_says_the_hog_vanished_and_draws_the_chart") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu().to_string();
    let name = random_name("jwcmp");
    let (child, hog_dir, hog_csv) = watch_csv(&["--cpus", &cpu, "--no-tui", "--duration", "3s"], &[]);
    let hog = fifo_bursts(last_cpu(), name.clone(), Duration::from_millis(1000), 50, 200_000);
    let (_, bursts) = hog.join().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (child, _quiet_dir, quiet_csv) = watch_csv(&["--cpus", &cpu, "--no-tui", "--duration", "2s"], &[]);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // Each run wrote its summary beside its CSV.
    assert!(hog_dir.path().join("out.summary.json").is_file());
    let png = hog_dir.path().join("cmp.png");
    let (status, stdout, err) = run_bin(
        &[
            "compare",
            hog_csv.to_str().unwrap(),
            quiet_csv.to_str().unwrap(),
            "--label",
            "hog",
            "--label",
            "quiet",
            "--png",
            png.to_str().unwrap(),
            "--json",
        ],
        Duration::from_secs(30),
    );
    assert!(status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    let vanished: Vec<&str> = v["changes"][0]["vanished"].as_array().unwrap().iter().map(|c| c["cause"].as_str().unwrap()).collect();
    assert!(vanished.contains(&format!("task:{name}").as_str()), "the hog did not vanish: {vanished:?}\n{stdout}");
    let hog_fig = &v["blocks"][0]["figures"][0];
    assert!(hog_fig["count"].as_u64().unwrap() >= bursts.len() as u64 * 9 / 10, "{hog_fig}");
    assert!(hog_fig["max_ns"].as_u64().unwrap() >= 200_000, "{hog_fig}");
    assert_eq!(v["runs"][1]["label"], "quiet");
    let img = image::open(&png).expect("the PNG decodes").to_rgb8();
    assert!(img.pixels().filter(|p| p.0 != [255, 255, 255]).count() > 10_000, "a blank chart");

    // The text table names both runs and the percentiles.
    let (status, text, err) = run_bin(&["compare", hog_csv.to_str().unwrap(), quiet_csv.to_str().unwrap()], Duration::from_secs(30));
    assert!(status.success(), "{err}");
    assert!(text.contains("99.99%") && text.contains(&format!("vanished: task:{name}")), "{text}");
}
