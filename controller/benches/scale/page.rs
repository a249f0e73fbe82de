//! The device page at scale: headless Chromium opens the controller's page (`GET /`) over the
//! filled cluster of the scale part, three times (the first with an empty cache, the script and
//! stylesheet then cached), and the page's own timing says when its grid was first drawn (the
//! `grid-drawn` mark, from the start of the navigation) and how many bytes each request moved.
//! Skipped with a message without Chromium on `PATH`.

use std::time::Duration;

use testkit::browser::Browser;

use crate::procs::Controller;

/// Loads of the page measured.
const LOADS: usize = 3;

/// What the page's Resource Timing reports of one load, by script.
const TIMING: &str = "(() => {
    const drawn = performance.getEntriesByName('grid-drawn')[0];
    if (!drawn) return null;
    const nav = performance.getEntriesByType('navigation')[0];
    const entries = [[location.pathname, nav.transferSize, nav.decodedBodySize, nav.duration]]
        .concat(performance.getEntriesByType('resource')
            .filter(e => e.startTime <= drawn.startTime)
            .map(e => [new URL(e.name).pathname, e.transferSize, e.decodedBodySize, e.duration]));
    return {drawn: drawn.startTime, cells: document.querySelectorAll('[data-device]').length,
        entries};
})()";

/// Prints the page's load time and size, or why they were not measured.
pub fn print_page_load(controller: &Controller) {
    let Some(chromium) = testkit::browser::find_chromium() else {
        println!();
        println!("chromium is not on PATH (apt-get install chromium): the page load is skipped");
        return;
    };
    let url = format!("http://{}/", controller.addr);
    let mut browser = Browser::launch(&chromium, 1280, 1000);
    println!();
    println!("Device page: {url} in headless Chromium, grid of the first page of nodes");
    println!();
    println!("| load | grid drawn after | cells | requests | bytes transferred | of which page, script, style | largest answer |");
    println!("|---|---:|---:|---:|---:|---:|---|");
    for load in 1..=LOADS {
        browser.open(&url);
        let timing = testkit::eventually_blocking(
            "the page's grid drawn",
            Duration::from_secs(300),
            Duration::from_millis(100),
            || Some(browser.eval(TIMING)).filter(|t| !t.is_null()),
        );
        let entries = timing["entries"].as_array().cloned().unwrap_or_default();
        let bytes = |e: &serde_json::Value| e[1].as_u64().unwrap_or(0);
        let total: u64 = entries.iter().map(bytes).sum();
        let static_bytes: u64 = entries
            .iter()
            .filter(|e| !e[0].as_str().unwrap_or("").starts_with("/v1/"))
            .map(bytes)
            .sum();
        let largest = entries
            .iter()
            .max_by_key(|e| e[2].as_u64().unwrap_or(0))
            .map(|e| {
                format!(
                    "{} {} KiB in {:.0} ms",
                    e[0].as_str().unwrap_or("?"),
                    e[2].as_u64().unwrap_or(0) / 1024,
                    e[3].as_f64().unwrap_or(0.0)
                )
            })
            .unwrap_or_default();
        println!(
            "| {load}{} | {:.0} ms | {} | {} | {} KiB | {} KiB | {largest} |",
            if load == 1 { " (empty cache)" } else { "" },
            timing["drawn"].as_f64().unwrap_or(f64::NAN),
            timing["cells"],
            entries.len(),
            total / 1024,
            static_bytes / 1024,
        );
    }
}
