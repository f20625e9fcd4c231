// strainline's timeline: hover reads a second's values, a drag zooms on time, a
// double-click shows the whole run again. Reads only the page's own embedded data.
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  function fmt(v) {
    if (v === null || v === undefined) return "–";
    if (Math.abs(v) >= 100) return v.toFixed(0);
    if (Math.abs(v) >= 10) return v.toFixed(1);
    return v.toFixed(2);
  }
  function niceStep(span) {
    var steps = [0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600];
    for (var i = 0; i < steps.length; i++) if (span / steps[i] <= 12) return steps[i];
    return Math.ceil(span / 12 / 3600) * 3600;
  }
  function el(name, attrs, text) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function setUp(box) {
    var svg = box.querySelector("svg");
    var data = JSON.parse(box.querySelector("script.timeline-data").textContent);
    var left = +svg.dataset.left, right = +svg.dataset.right;
    var width = svg.viewBox.baseVal.width, height = svg.viewBox.baseVal.height;
    var domain = [0, data.end];
    var axis = svg.querySelector("g.x-axis"), axisAt = +axis.dataset.at;
    function x(t) { return left + (t - domain[0]) / (domain[1] - domain[0]) * (width - left - right); }
    function tOf(px) { return domain[0] + (px - left) / (width - left - right) * (domain[1] - domain[0]); }
    function pointsOf(key) {
      var src = (key === "cpu" || key === "rss_mib" || key === "threads") ? data.target : data.seconds;
      return src.filter(function (p) { return p[key] !== null && p[key] !== undefined; })
        .map(function (p) { return [p.t, p[key]]; });
    }
    function draw() {
      data.scales.forEach(function (sc) {
        sc.keys.forEach(function (key) {
          var line = svg.querySelector('polyline[data-key="' + key + '"]');
          if (!line) return;
          var max = sc.max;
          sc.own.forEach(function (o) { if (o[0] === key) max = o[1]; });
          var pts = pointsOf(key).filter(function (p) { return p[0] >= domain[0] - 1 && p[0] <= domain[1] + 1; })
            .map(function (p) {
              var px = Math.min(Math.max(x(p[0]), left), width - right);
              return px.toFixed(1) + "," + (sc.top + sc.height - p[1] / max * sc.height).toFixed(1);
            });
          line.setAttribute("points", pts.join(" "));
        });
      });
      axis.querySelectorAll("text.tick").forEach(function (t) { t.remove(); });
      var step = niceStep(domain[1] - domain[0]);
      for (var t = Math.ceil(domain[0] / step) * step; t <= domain[1] + 1e-9; t += step) {
        axis.appendChild(el("text", { "class": "tick", x: x(t).toFixed(1), y: axisAt + 14, "text-anchor": "middle" },
          String(+t.toFixed(1))));
      }
      function clamp(px) { return Math.min(Math.max(px, left), width - right); }
      svg.querySelectorAll("rect.phase").forEach(function (r) {
        var a = clamp(x(+r.dataset.a)), b = clamp(x(+r.dataset.b));
        r.setAttribute("x", a); r.setAttribute("width", Math.max(0, b - a));
      });
      svg.querySelectorAll("text.phase-name").forEach(function (n) {
        var a = x(+n.dataset.a);
        n.setAttribute("x", a + 4);
        n.setAttribute("visibility", a >= left && a < width - right - 40 ? "visible" : "hidden");
      });
    }
    var cursor = el("line", { y1: 0, y2: axisAt, stroke: "#333", "stroke-dasharray": "3 3", visibility: "hidden" });
    var brush = el("rect", { y: 0, height: axisAt, fill: "rgba(31,119,180,0.15)", visibility: "hidden" });
    svg.appendChild(brush);
    svg.appendChild(cursor);
    var tip = document.createElement("div");
    tip.className = "timeline-tip";
    tip.hidden = true;
    box.appendChild(tip);
    function svgX(ev) {
      var r = svg.getBoundingClientRect();
      return (ev.clientX - r.left) / r.width * width;
    }
    function nearest(t) {
      var best = null;
      data.seconds.forEach(function (p) { if (!best || Math.abs(p.t - t) < Math.abs(best.t - t)) best = p; });
      return best;
    }
    function nearestTarget(t) {
      var best = null;
      data.target.forEach(function (p) { if (!best || Math.abs(p.t - t) < Math.abs(best.t - t)) best = p; });
      return best;
    }
    var from = null;
    svg.addEventListener("mousemove", function (ev) {
      var px = svgX(ev);
      if (px < left || px > width - right) { cursor.setAttribute("visibility", "hidden"); tip.hidden = true; return; }
      var p = nearest(tOf(px));
      if (!p) return;
      cursor.setAttribute("x1", x(p.t)); cursor.setAttribute("x2", x(p.t));
      cursor.setAttribute("visibility", "visible");
      var lines = ["second ending " + fmt(p.t) + " s"];
      if (p.users !== null && p.users !== undefined) lines.push("users " + fmt(p.users));
      lines.push("sent " + fmt(p.sent) + " · responses " + fmt(p.responses) + " · errors " + fmt(p.errors) + " req/s");
      lines.push("ms: min " + fmt(p.min) + " · p50 " + fmt(p.p50) + " · p75 " + fmt(p.p75) + " · p90 " + fmt(p.p90));
      lines.push("ms: p95 " + fmt(p.p95) + " · p99 " + fmt(p.p99) + " · max " + fmt(p.max));
      data.causes.forEach(function (c) {
        c[1].forEach(function (q) { if (Math.abs(q[0] - p.t) < 1e-6) lines.push(c[0] + " " + fmt(q[1]) + "/s"); });
      });
      var s = nearestTarget(p.t);
      if (s) lines.push("target: CPU " + fmt(s.cpu) + " cores · " + fmt(s.rss_mib) + " MiB · " + s.threads + " threads");
      tip.textContent = lines.join("\n");
      tip.hidden = false;
      var r = box.getBoundingClientRect(), sr = svg.getBoundingClientRect();
      var left_px = ev.clientX - r.left + 14;
      if (left_px + 320 > r.width) left_px = Math.max(0, ev.clientX - r.left - 330);
      tip.style.left = left_px + "px";
      tip.style.top = (ev.clientY - sr.top + 10) + "px";
      if (from !== null) {
        var a = Math.min(from, px), b = Math.max(from, px);
        brush.setAttribute("x", a); brush.setAttribute("width", b - a);
        brush.setAttribute("visibility", "visible");
      }
    });
    svg.addEventListener("mouseleave", function () {
      cursor.setAttribute("visibility", "hidden"); tip.hidden = true;
      from = null; brush.setAttribute("visibility", "hidden");
    });
    svg.addEventListener("mousedown", function (ev) { from = svgX(ev); ev.preventDefault(); });
    svg.addEventListener("mouseup", function (ev) {
      if (from === null) return;
      var a = tOf(Math.min(from, svgX(ev))), b = tOf(Math.max(from, svgX(ev)));
      from = null; brush.setAttribute("visibility", "hidden");
      if (b - a < (domain[1] - domain[0]) / 100) return;
      domain = [Math.max(0, a), Math.min(data.end, b)];
      draw();
    });
    svg.addEventListener("dblclick", function () { domain = [0, data.end]; draw(); });
  }
  document.querySelectorAll("div.timeline").forEach(setUp);
})();
