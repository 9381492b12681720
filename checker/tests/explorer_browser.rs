//! The Explorer in a real browser. Headless Chromium (Debian `chromium`, installed by
//! `tests/install-chromium.sh`, which CI runs) loads `isr-check explore` on a bug preset, at its
//! start page and at the shortest counterexample the command prints, and the rendered page must
//! explain itself: the replica table, the violated property's explanation, no raw `Debug` dumps,
//! and a sequence diagram whose text is light on dark and inside its view box — measured by the
//! browser's own layout, not by the code that drew it.
//!
//! Under `CI=true` a missing chromium fails the test; elsewhere the test is skipped, saying why.

mod common;

use common::Explorer;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// Whether chromium is here; if not, fails under CI and otherwise says why the test is skipped.
fn chromium_present() -> bool {
    let present = Command::new("chromium")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !present {
        let why = "chromium is not installed (run checker/tests/install-chromium.sh)";
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
        eprintln!("SKIPPED: {why}");
    }
    present
}

/// A fresh, empty directory under the test's temporary directory.
fn fresh_dir(what: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "{what}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}

/// Runs headless chromium on `url` with `extra` flags and a fresh profile; its stdout.
fn chromium(extra: &[&str], url: &str) -> String {
    let profile = fresh_dir("chromium-profile");
    let mut child = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1400,1100",
            // Lets the page's scripts fetch and render before the DOM is dumped.
            "--virtual-time-budget=10000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut out);
        out
    });
    let deadline = Instant::now() + Duration::from_secs(90);
    while child.try_wait().expect("chromium runs").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 90 s on {url}");
        }
        sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_dir_all(&profile);
    reader.join().expect("chromium's output")
}

/// The rendered DOM of `url`, once `ready` holds of it (the page fetches states one step at a
/// time, so a slow machine may need another try).
fn rendered(url: &str, ready: impl Fn(&str) -> bool) -> String {
    let mut dom = String::new();
    for _ in 0..5 {
        dom = chromium(&["--dump-dom"], url);
        if ready(&dom) {
            return dom;
        }
    }
    panic!("{url} never rendered as expected; last DOM:\n{dom}");
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", " ")
        .replace("&amp;", "&")
}

/// The text a reader sees: tags, scripts and the diagram removed.
fn visible_text(dom: &str) -> String {
    let mut out = String::new();
    let mut rest = dom;
    while let Some(start) = rest.find('<') {
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        let skip_to = ["<script", "<svg", "<style"]
            .iter()
            .zip(["</script>", "</svg>", "</style>"])
            .find(|(open, _)| rest.starts_with(**open))
            .map(|(_, close)| close);
        let end = match skip_to {
            Some(close) => rest.find(close).map_or(rest.len(), |i| i + close.len()),
            None => rest.find('>').map_or(rest.len(), |i| i + 1),
        };
        out.push(' ');
        rest = &rest[end..];
    }
    out.push_str(rest);
    unescape(&out)
}

/// The first SVG element of a DOM.
fn first_svg(dom: &str) -> &str {
    let start = dom.find("<svg").expect("the page shows a diagram");
    let end = dom[start..].find("</svg>").expect("a whole diagram") + start + "</svg>".len();
    &dom[start..end]
}

/// A colour `r g b` from the browser, as 0..=255 components.
fn rgb(words: &[&str]) -> [f64; 3] {
    let c: Vec<f64> = words.iter().map(|w| w.parse().expect("a number")).collect();
    [c[0], c[1], c[2]]
}

/// WCAG 2 contrast ratio of two colours.
fn contrast(a: [f64; 3], b: [f64; 3]) -> f64 {
    let luminance = |c: [f64; 3]| {
        let lin = |v: f64| {
            let v = v / 255.0;
            if v <= 0.03928 {
                v / 12.92
            } else {
                ((v + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2])
    };
    let (la, lb) = (luminance(a), luminance(b));
    (la.max(lb) + 0.05) / (la.min(lb) + 0.05)
}

/// Measures, in the browser, each text of `svg` (its box, its colour and the colour painted
/// behind it) and each arrow, on a dark panel like the Explorer's.
const MEASURE: &str = r#"
<script>
const svg = document.querySelector('svg');
const vb = svg.viewBox.baseVal;
const rgb = (c) => (c.match(/[\d.]+/g) || []).slice(0, 3).join(' ');
const panel = rgb(getComputedStyle(document.getElementById('panel')).backgroundColor);
const rects = [...svg.querySelectorAll('rect')];
const out = [`V ${vb.x} ${vb.y} ${vb.width} ${vb.height}`];
const behind = (el, box) => {
  const cx = box.x + box.width / 2, cy = box.y + box.height / 2;
  const under = rects.filter((r) => {
    const b = r.getBBox();
    return (r.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING)
      && b.x <= cx && cx <= b.x + b.width && b.y <= cy && cy <= b.y + b.height;
  });
  return under.length ? rgb(getComputedStyle(under[under.length - 1]).fill) : panel;
};
svg.querySelectorAll('text').forEach((t, i) => {
  const b = t.getBBox();
  out.push(`T ${b.x} ${b.y} ${b.x + b.width} ${b.y + b.height} ${rgb(getComputedStyle(t).fill)} ${behind(t, b)} ${i}`);
});
svg.querySelectorAll('line[marker-end]').forEach((l) => {
  out.push(`L ${rgb(getComputedStyle(l).stroke)} ${behind(l, l.getBBox())}`);
});
document.getElementById('out').textContent = out.join('\n');
</script>"#;

/// Checks that every text of `svg` is readable and inside the view box, as the browser lays
/// it out: contrast at least 4.5:1 for text and 3:1 for arrows (WCAG AA).
fn assert_readable(svg: &str) {
    let dir = fresh_dir("svg-measure");
    let page = dir.join("measure.html");
    std::fs::write(
        &page,
        format!(
            "<!DOCTYPE html><html><head><meta charset='utf-8'></head>\
             <body style='background:#2b5672'><div id='panel' \
             style='background:#142b46;padding:5px;display:inline-block'>{svg}</div>\
             <pre id='out'></pre>{MEASURE}</body></html>"
        ),
    )
    .expect("the measuring page");
    let dom = rendered(&format!("file://{}", page.display()), |d| {
        d.contains("<pre id=\"out\">V ")
    });
    let _ = std::fs::remove_dir_all(&dir);
    let out = dom
        .split("<pre id=\"out\">")
        .nth(1)
        .and_then(|s| s.split("</pre>").next())
        .expect("measurements");
    let texts: Vec<&str> = svg.split("<text").skip(1).collect();
    let (mut width, mut height) = (0.0, 0.0);
    let (mut measured_texts, mut measured_arrows) = (0, 0);
    for line in out.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w[0] {
            "V" => {
                width = w[3].parse::<f64>().unwrap();
                height = w[4].parse::<f64>().unwrap();
                assert!(w[1] == "0" && w[2] == "0", "view box at the origin: {line}");
            }
            "T" => {
                measured_texts += 1;
                let b: Vec<f64> = w[1..5].iter().map(|v| v.parse().unwrap()).collect();
                let i: usize = w[11].parse().unwrap();
                let text = unescape(
                    texts[i]
                        .split_once('>')
                        .and_then(|(_, t)| t.split_once("</text>"))
                        .map_or("", |(t, _)| t),
                );
                let inside =
                    b[0] >= -0.5 && b[1] >= -0.5 && b[2] <= width + 0.5 && b[3] <= height + 0.5;
                assert!(
                    inside,
                    "text `{text}` spans x {:.1}..{:.1}, y {:.1}..{:.1}, outside the view box \
                     {width}x{height}",
                    b[0], b[2], b[1], b[3]
                );
                let ratio = contrast(rgb(&w[5..8]), rgb(&w[8..11]));
                assert!(
                    ratio >= 4.5,
                    "text `{text}` in rgb({}) on rgb({}) has contrast {ratio:.2}, below 4.5",
                    w[5..8].join(","),
                    w[8..11].join(",")
                );
            }
            "L" => {
                measured_arrows += 1;
                let ratio = contrast(rgb(&w[1..4]), rgb(&w[4..7]));
                assert!(
                    ratio >= 3.0,
                    "an arrow has contrast {ratio:.2}, below 3: {line}"
                );
            }
            _ => panic!("unexpected measurement {line}"),
        }
    }
    assert_eq!(measured_texts, texts.len(), "every text measured:\n{out}");
    assert!(
        measured_arrows > 0,
        "the counterexample sends messages:\n{out}"
    );
}

#[test]
fn the_explorer_explains_a_counterexample_in_a_browser() {
    if !chromium_present() {
        return;
    }
    let explorer = Explorer::start(&["unclean-election"]);
    let [cex] = &explorer.counterexamples[..] else {
        panic!("one counterexample: {:#?}", explorer.stdout);
    };
    assert!(cex.url.starts_with(&explorer.base));
    assert!(
        cex.violation.contains("lacks the committed record"),
        "{}",
        cex.violation
    );

    // The start page: the initial state as a table, the check already done.
    let start = rendered(&explorer.base, |d| {
        d.contains("cached ISR") && d.contains("Done: ")
    });
    let text = visible_text(&start);
    for shown in [
        "log (offset:epoch:record)",
        "cached ISR",
        "controller: c1: leader b0, e1",
        "committed: -",
        "every property holds here",
        "Counterexample found",
        &cex.violation,
    ] {
        assert!(
            text.contains(shown),
            "the start page lacks `{shown}`:\n{text}"
        );
    }
    assert!(!text.contains("Searching"), "{text}");

    // The counterexample: the table, why the property fails, and a readable diagram.
    let page = rendered(&cex.url, |d| d.contains("Violated here"));
    let text = visible_text(&page);
    for shown in [
        "Violated here:",
        cex.violation.as_str(),
        "log (offset:epoch:record)",
        "cached ISR",
        "committed: 0:1:1",
        "acknowledged: 0:1:1",
        "ControllerElectLeader(b1)",
    ] {
        assert!(
            text.contains(shown),
            "the counterexample lacks `{shown}`:\n{text}"
        );
    }
    let link = &cex.url[explorer.base.len()..];
    assert!(page.contains(&format!("href=\"{link}\"")), "{page}");
    assert!(text.contains(&format!("({} steps)", cex.steps)), "{text}");
    for raw in [
        "BrokerId(",
        "Envelope {",
        "Cluster {",
        "Some(",
        "LeaderEpoch(",
    ] {
        assert!(
            !page.contains(raw),
            "a raw Debug dump (`{raw}`) on the page:\n{text}"
        );
    }
    let svg = first_svg(&page);
    assert!(svg.contains(&cex.violation.replace('>', "&gt;")), "{svg}");
    assert_readable(svg);

    // For people: a screenshot of what was checked.
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("explorer-unclean-election.png");
    let _ = std::fs::remove_file(&shot);
    chromium(&[&format!("--screenshot={}", shot.display())], &cex.url);
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    eprintln!("screenshot: {}", shot.display());
}
