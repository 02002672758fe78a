//! The page around the report's sections: the document with its inline style and script,
//! sections and tables.

use std::fmt::Write;

use super::esc;

/// The page's style: readable on screen and when printed, no web fonts.
const STYLE: &str = r#"
:root{--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--bg:#fff;--pass:#1a7f37;--fail:#cf222e;--warn:#9a6700}
*{box-sizing:border-box}
body{margin:0;background:#f6f8fa;color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1100px;margin:0 auto;padding:16px 20px 40px}
header.verdict{border-radius:8px;padding:14px 18px;color:#fff;margin:8px 0 10px}
header.pass{background:var(--pass)}header.live{background:#0969da}header.fail{background:var(--fail)}header.warn{background:var(--warn)}
header h1{margin:0;font-size:22px;word-break:break-word}
header p{margin:4px 0 0;opacity:.95}
dl.meta{display:grid;grid-template-columns:max-content 1fr max-content 1fr max-content 1fr;gap:2px 12px;margin:0 0 12px;color:var(--muted)}
dl.meta dt{font-weight:600}dl.meta dd{margin:0;color:var(--fg);word-break:break-all}
section{background:var(--bg);border:1px solid var(--line);border-radius:8px;padding:12px 16px;margin:12px 0}
section h2{margin:0 0 2px;font-size:17px}
section h3{margin:14px 0 2px;font-size:14px}
p.why{margin:0 0 8px;color:var(--muted)}
h3+p.why{margin:0 0 2px;font-size:13px}
ul.flat{columns:2;font-size:12px;color:var(--muted)}
table{border-collapse:collapse;margin:8px 0;width:100%}
table.narrow{width:auto;min-width:55%}
td.sub{padding-left:26px;color:var(--muted)}
th,td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
td.FAIL{color:var(--fail);font-weight:700}td.pass{color:var(--pass);font-weight:600}
td.better{color:var(--pass);font-weight:600}td.worse{color:var(--fail);font-weight:700}
td.bar{width:18%}td.bar span{display:block;height:10px;background:#D55E00;border-radius:2px;min-width:2px}
td.ex{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px;word-break:break-all}
ul.notes{margin:4px 0;padding-left:20px}li.finding{font-weight:600}
pre{background:#f6f8fa;border:1px solid var(--line);border-radius:6px;padding:8px 10px;overflow:auto;max-height:480px;font-size:12px}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
svg.chart{display:block;width:100%;height:auto;margin:2px 0 10px;font-size:12px}
svg .grid{stroke:#e6e9ed;stroke-width:1}
svg .mark{fill:#d9480f;fill-opacity:.12;stroke:#d9480f;stroke-opacity:.5}
svg .marktext{fill:#d9480f;font-size:11px}
svg .frame{fill:none;stroke:#afb8c1;stroke-width:1}
svg .tick{fill:var(--muted)}
svg .series{fill:none;stroke-width:1.8;stroke-linejoin:round}
svg .dashed{stroke-dasharray:6 4}
svg .legend text{fill:var(--fg)}
svg .empty{fill:var(--muted);font-size:14px}
svg .ch{stroke:#57606a;stroke-width:1;stroke-dasharray:3 3;pointer-events:none}
svg .chl{fill:#1b1f24;font-size:11px;pointer-events:none}
footer{color:var(--muted);font-size:12px;text-align:center}
@media print{body{background:#fff}section{break-inside:avoid;border:none}}
"#;

/// The cross-hair: moving over any time chart marks the same second on all of them, so a
/// latency spike can be matched with the CPU or the logins at that moment. The charts are
/// complete without it. When set up, it records the number of time charts in the root
/// element's `data-time-charts`. It is `window.msgstormCrosshair`, so that the live page
/// sets it up again on the charts it swapped in.
const SCRIPT: &str = r#"
(window.msgstormCrosshair = function () {
  var NS = "http://www.w3.org/2000/svg";
  var charts = Array.prototype.slice.call(document.querySelectorAll("svg.tc"));
  function mark(svg) {
    var line = svg.querySelector("line.ch"), label = svg.querySelector("text.chl");
    if (!line) {
      line = document.createElementNS(NS, "line");
      line.setAttribute("class", "ch");
      label = document.createElementNS(NS, "text");
      label.setAttribute("class", "chl");
      svg.appendChild(line);
      svg.appendChild(label);
    }
    return [line, label];
  }
  function clock(t, end) {
    t = Math.round(t);
    if (end < 120) return t + " s";
    var m = Math.floor(t / 60), s = t % 60;
    return m + ":" + (s < 10 ? "0" : "") + s;
  }
  function hide() {
    charts.forEach(function (svg) {
      var m = mark(svg);
      m[0].setAttribute("visibility", "hidden");
      m[1].setAttribute("visibility", "hidden");
    });
  }
  charts.forEach(function (svg) {
    svg.addEventListener("mousemove", function (e) {
      var box = svg.getBoundingClientRect(), vb = svg.viewBox.baseVal;
      var x = (e.clientX - box.left) / box.width * vb.width;
      var l = +svg.dataset.l, r = +svg.dataset.r, x0 = +svg.dataset.x0, x1 = +svg.dataset.x1;
      if (x < l || x > r) { hide(); return; }
      var t = x0 + (x - l) / (r - l) * (x1 - x0);
      charts.forEach(function (other) {
        var m = mark(other);
        m[0].setAttribute("x1", x); m[0].setAttribute("x2", x);
        m[0].setAttribute("y1", other.dataset.t); m[0].setAttribute("y2", other.dataset.b);
        m[1].setAttribute("x", x + 4); m[1].setAttribute("y", +other.dataset.t + 12);
        m[1].textContent = clock(t, x1);
        m[0].setAttribute("visibility", "visible");
        m[1].setAttribute("visibility", "visible");
      });
    });
    svg.addEventListener("mouseleave", hide);
  });
  document.documentElement.setAttribute("data-time-charts", String(charts.length));
})();
"#;

/// The live page's refresh: every second it fetches the page again and swaps its `main`
/// in place (the reader keeps their scroll position), until the page it gets is no longer
/// live (`main` without `data-live`): the run's final report, which stays. The root
/// element's `data-refreshes` counts the swaps; when the run cannot be reached the
/// banner says so and it keeps trying. It puts no text into the page as markup: the fetched
/// page is parsed as a document (its text escaped, and shown through
/// [`crate::untrusted`], by the renderer) and its `main` adopted; the title and the
/// banner's own words are set as text (`document.title`, `textContent`).
const LIVE_SCRIPT: &str = r#"
(function () {
  var root = document.documentElement, swaps = 0;
  function again() { setTimeout(tick, 1000); }
  function tick() {
    fetch(location.href, { cache: "no-store" })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
      .then(function (text) {
        var doc = new DOMParser().parseFromString(text, "text/html");
        var next = doc.querySelector("main");
        if (!next) throw new Error("no page");
        document.querySelector("main").replaceWith(document.adoptNode(next));
        document.title = doc.title;
        swaps += 1;
        root.setAttribute("data-refreshes", String(swaps));
        window.msgstormCrosshair();
        if (next.hasAttribute("data-live")) again();
      })
      .catch(function () {
        var h = document.querySelector("header h1");
        if (h) h.textContent = "The run cannot be reached: trying again every second";
        again();
      });
  }
  again();
})();
"#;

/// The whole HTML document. `live` is the phase of a run still going: the page then
/// refreshes itself every second ([`LIVE_SCRIPT`]) and its `main` carries `data-live`.
pub fn document(title: &str, body: &str, live: Option<&str>) -> String {
    let mut out = String::with_capacity(body.len() + STYLE.len() + SCRIPT.len() + 1024);
    let (main, footer, refresh) = match live {
        Some(phase) => (
            format!("<main data-live=\"{}\">", esc(phase)),
            "this page follows the run: it refreshes every second, and shows the final \
             report when the run ends",
            LIVE_SCRIPT,
        ),
        None => (
            "<main>".to_owned(),
            "this page is self-contained: it needs no network",
            "",
        ),
    };
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"generator\" content=\"msgstorm {}\">\
         <title>{}</title><style>{STYLE}</style></head><body>{main}{body}\
         <footer>msgstorm {} · {footer}</footer>\
         </main><script>{SCRIPT}{refresh}</script></body></html>\n",
        env!("CARGO_PKG_VERSION"),
        esc(title),
        env!("CARGO_PKG_VERSION"),
    );
    out
}

/// Appends a section with an id, a heading, a sentence saying what it shows, and `body`.
pub fn section(out: &mut String, id: &str, heading: &str, why: &str, body: &str) {
    let _ = write!(
        out,
        r#"<section id="{}"><h2>{}</h2><p class="why">{}</p>{body}</section>"#,
        esc(id),
        esc(heading),
        esc(why)
    );
}

/// A table of text cells; every column but the first is right-aligned as a number, a
/// first cell starting with two spaces is indented under the row above, and a cell reading
/// `pass`, `FAIL`, `better` or `worse` is coloured. Tables of up to three columns are only
/// as wide as they need.
pub fn table(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::from(if head.len() <= 3 {
        "<table class=\"narrow\"><thead><tr>"
    } else {
        "<table><thead><tr>"
    });
    for (i, h) in head.iter().enumerate() {
        let _ = write!(
            out,
            "<th{}>{}</th>",
            if i > 0 { " class=\"num\"" } else { "" },
            esc(h)
        );
    }
    out.push_str("</tr></thead><tbody>");
    for row in rows {
        out.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            let class = match cell.as_str() {
                "pass" | "FAIL" | "better" | "worse" => cell.as_str(),
                _ if i > 0 => "num",
                c if c.starts_with("  ") => "sub",
                _ => "",
            };
            // A cell spanning the rest of a short row (a "not measured" remark).
            let span = if i + 1 == row.len() && row.len() < head.len() {
                format!(" colspan=\"{}\"", head.len() - i)
            } else {
                String::new()
            };
            let _ = write!(
                out,
                "<td{}{span}>{}</td>",
                if class.is_empty() {
                    String::new()
                } else {
                    format!(" class=\"{class}\"")
                },
                esc(cell.trim_start())
            );
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    out
}
