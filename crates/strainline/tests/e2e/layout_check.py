"""Checks the layout of strainline's pages in Debian's Chromium, through Playwright.

Usage: layout_check.py [--known TEXT ...] OUT_DIR NAME=URL [NAME=URL ...]

Each page is loaded at viewport widths 1400 and 800 px. A page fails when two texts
overlap (their boxes share more than 1 px in both axes; a text and its own ancestor
excepted, hidden or empty texts ignored), when an SVG <text> reaches beyond its own
<svg>'s box (a cut label or legend), or when the document scrolls horizontally. A
full-page screenshot of each page at each width is saved as OUT_DIR/NAME-WIDTH.png and
its path printed ("screenshot: PATH"). Every problem is printed on a line of its own
("NAME@WIDTH: ..."); the exit code is 1 when there is any, 0 otherwise. A problem
whose line holds the text of a `--known` is a known one, yet to be fixed where it is
made: printed ("known: ...") but not counted.
"""

import os
import sys

from playwright.sync_api import sync_playwright

WIDTHS = [1400, 800]

# Runs in the page: every text's boxes and the page's problems, as a list of strings.
CHECK = r"""
() => {
  const SKIP = new Set(['SCRIPT', 'STYLE', 'TITLE', 'NOSCRIPT', 'TEMPLATE', 'SELECT',
                        'OPTION', 'OPTGROUP', 'DATALIST', 'TEXTAREA']);
  const shown = (el) => {
    for (let e = el; e; e = e.parentElement) {
      if (SKIP.has(e.tagName.toUpperCase())) return false;
    }
    const st = getComputedStyle(el);
    return st.visibility === 'visible' && st.display !== 'none' && st.opacity !== '0';
  };
  const boxes = [];  // {owner: Node, text, r: DOMRect}
  const add = (owner, text, r) => {
    if (r.width > 0 && r.height > 0) boxes.push({owner, text, r});
  };
  // HTML text nodes, one box per line they take.
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const p = n.parentElement;
    if (!p || !n.textContent.trim() || p.closest('svg') || !shown(p)) continue;
    const range = document.createRange();
    range.selectNodeContents(n);
    for (const r of range.getClientRects()) add(n, n.textContent.trim(), r);
  }
  // SVG texts and their tspans.
  const svgTexts = [...document.querySelectorAll('svg text, svg tspan')]
    .filter((t) => t.textContent.trim() && shown(t));
  for (const t of svgTexts) add(t, t.textContent.trim(), t.getBoundingClientRect());

  const problems = [];
  const short = (s) => (s.length > 80 ? s.slice(0, 77) + '...' : s);
  // Overlaps: sweep over the boxes by their left edge.
  boxes.sort((a, b) => a.r.left - b.r.left);
  const seen = new Set();
  for (let i = 0; i < boxes.length; i++) {
    const a = boxes[i];
    for (let j = i + 1; j < boxes.length && boxes[j].r.left < a.r.right - 1; j++) {
      const b = boxes[j];
      if (a.owner === b.owner || a.owner.contains(b.owner) || b.owner.contains(a.owner)) continue;
      const ox = Math.min(a.r.right, b.r.right) - Math.max(a.r.left, b.r.left);
      const oy = Math.min(a.r.bottom, b.r.bottom) - Math.max(a.r.top, b.r.top);
      if (ox > 1 && oy > 1) {
        const key = short(a.text) + '\u0000' + short(b.text);
        if (seen.has(key)) continue;
        seen.add(key);
        problems.push(`overlap (${ox.toFixed(1)} x ${oy.toFixed(1)} px): "${short(a.text)}" and "${short(b.text)}"`);
      }
    }
  }
  // SVG texts beyond their own svg.
  for (const t of svgTexts) {
    if (t.tagName.toLowerCase() !== 'text') continue;
    const svg = t.closest('svg');
    const r = t.getBoundingClientRect();
    const s = svg.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    const out = [s.left - r.left, r.right - s.right, s.top - r.top, r.bottom - s.bottom];
    const worst = Math.max(...out);
    if (worst > 1) {
      const title = svg.getAttribute('aria-label') || '';
      problems.push(`cut by its chart ("${short(title)}") by ${worst.toFixed(1)} px: "${short(t.textContent.trim())}"`);
    }
  }
  // Horizontal scroll.
  const d = document.documentElement;
  if (d.scrollWidth > d.clientWidth + 1) {
    problems.push(`scrolls horizontally: ${d.scrollWidth} px of content in ${d.clientWidth} px`);
  }
  return {problems, texts: boxes.length};
}
"""


def main():
    args = sys.argv[1:]
    known = []
    while args[:1] == ["--known"] and len(args) > 1:
        known.append(args[1])
        args = args[2:]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = args[0]
    pages = [a.split("=", 1) for a in args[1:]]
    os.makedirs(out_dir, exist_ok=True)
    failed = 0
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--no-sandbox", "--disable-gpu", "--hide-scrollbars"],
        )
        try:
            for width in WIDTHS:
                context = browser.new_context(viewport={"width": width, "height": 900})
                page = context.new_page()
                for name, url in pages:
                    page.goto(url, wait_until="load")
                    found = page.evaluate(CHECK)
                    shot = os.path.join(out_dir, f"{name}-{width}.png")
                    page.screenshot(path=shot, full_page=True)
                    print(f"screenshot: {shot} ({found['texts']} text boxes)")
                    for problem in found["problems"]:
                        line = f"{name}@{width}: {problem}"
                        if any(k in line for k in known):
                            print(f"known: {line}")
                        else:
                            print(line)
                            failed += 1
                context.close()
        finally:
            browser.close()
    print(f"{failed} problem(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
