// strainline serve: the live page of a run. Polls /api/v1/live/RUN for the seconds the
// run wrote since the last poll, shows the latest figures and draws two charts. Stored
// text is only ever set as textContent, never parsed as HTML.
"use strict";
(function () {
  const root = document.getElementById("live");
  if (!root) return;
  const run = root.dataset.run;
  // Where the server's API is: under the base path it is served at (serve --base-path).
  const api = root.dataset.api || "/api/v1/";
  const seen = [];
  let after = -1;
  const NS = "http://www.w3.org/2000/svg";
  const set = (id, v) => { const e = document.getElementById(id); if (e) e.textContent = v; };
  const fmt = (v, d) => (v === null || v === undefined ? "-" : Number(v).toFixed(d));

  function draw(svgId, series, title) {
    const svg = document.getElementById(svgId);
    if (!svg) return;
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const W = 720, H = 220, L = 60, R = 20, T = 24, B = 30;
    const pts = series.flatMap((s) => s.points);
    const label = document.createElementNS(NS, "text");
    label.setAttribute("x", L); label.setAttribute("y", 16);
    label.setAttribute("class", "chart-title"); label.textContent = title;
    svg.appendChild(label);
    const frame = document.createElementNS(NS, "rect");
    frame.setAttribute("x", L); frame.setAttribute("y", T);
    frame.setAttribute("width", W - L - R); frame.setAttribute("height", H - T - B);
    frame.setAttribute("fill", "none"); frame.setAttribute("stroke", "#888");
    svg.appendChild(frame);
    const xl = document.createElementNS(NS, "text");
    xl.setAttribute("x", W - R); xl.setAttribute("y", H - 6);
    xl.setAttribute("text-anchor", "end"); xl.setAttribute("class", "axis-label");
    xl.textContent = "seconds since the run started";
    svg.appendChild(xl);
    if (pts.length === 0) return;
    const x0 = Math.min(...pts.map((p) => p[0])), x1 = Math.max(...pts.map((p) => p[0]), x0 + 1);
    const y1 = Math.max(...pts.map((p) => p[1]), 1e-9);
    const sx = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
    const sy = (y) => H - B - (y / y1) * (H - T - B);
    for (const [v, y] of [[0, sy(0)], [y1, sy(y1)]]) {
      const t = document.createElementNS(NS, "text");
      t.setAttribute("x", 4); t.setAttribute("y", y); t.setAttribute("class", "tick");
      t.textContent = Number(v.toPrecision(3)).toString();
      svg.appendChild(t);
    }
    series.forEach((s, i) => {
      const line = document.createElementNS(NS, "polyline");
      line.setAttribute("fill", "none");
      line.setAttribute("stroke", s.color);
      line.setAttribute("stroke-width", "2");
      line.setAttribute("points", s.points.map((p) => sx(p[0]).toFixed(1) + "," + sy(p[1]).toFixed(1)).join(" "));
      svg.appendChild(line);
      const key = document.createElementNS(NS, "text");
      key.setAttribute("x", L + 160 * i); key.setAttribute("y", H - 6);
      key.setAttribute("fill", s.color); key.textContent = s.name;
      svg.appendChild(key);
    });
  }

  function render() {
    const load = seen.filter((s) => s.achieved !== null && s.achieved !== undefined);
    const target = seen.filter((s) => s.rss_bytes !== null && s.rss_bytes !== undefined);
    const lastLoad = load[load.length - 1];
    const lastTarget = target[target.length - 1];
    if (lastLoad) {
      set("offered", fmt(lastLoad.offered, 0));
      set("achieved", fmt(lastLoad.achieved, 0));
      set("p99", fmt(lastLoad.p99_us / 1000, 2));
      set("errors", fmt(lastLoad.errors, 0));
    }
    if (lastTarget) {
      set("rss", fmt(lastTarget.rss_bytes / 1048576, 1));
      set("cpu", fmt(lastTarget.cpu_cores, 2));
    }
    const last = seen[seen.length - 1];
    if (last) set("case", last.case);
    set("seen", String(seen.length));
    draw("rate", [
      { name: "offered req/s", color: "#999", points: load.filter((s) => s.offered !== null).map((s) => [s.t, s.offered]) },
      { name: "achieved req/s", color: "#1f77b4", points: load.map((s) => [s.t, s.achieved]) },
    ], "Rate per second");
    draw("memory", [
      { name: "target RSS MiB", color: "#d62728", points: target.map((s) => [s.t, s.rss_bytes / 1048576]) },
    ], "Memory of the target's process tree");
  }

  async function poll() {
    try {
      const r = await fetch(api + "live/" + encodeURIComponent(run) + "?after=" + after, { credentials: "same-origin" });
      if (r.ok) {
        const doc = await r.json();
        for (const s of doc.seconds) { seen.push(s); after = Math.max(after, s.t); }
        set("status", doc.status);
        render();
        if (doc.status !== "running") return;
      }
    } catch (e) {
      set("status", "unreachable");
    }
    setTimeout(poll, 1000);
  }
  poll();
})();
