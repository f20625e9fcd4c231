// strainline's timeline: hover reads each line's value at a second, a drag zooms on
// time, a double-click shows the whole run again. Reads only the page's own data.
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  function fmt(v) {
    if (v === null || v === undefined || !isFinite(v)) return "none";
    if (Math.abs(v) >= 100) return v.toFixed(0);
    if (Math.abs(v) >= 10) return v.toFixed(1);
    return v.toFixed(2);
  }
  function niceStep(span) {
    var steps = [0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600];
    for (var i = 0; i < steps.length; i++) if (span / steps[i] <= 12) return steps[i];
    return Math.ceil(span / 12 / 3600) * 3600;
  }
  function nearest(points, t) {
    var best = null;
    for (var i = 0; i < points.length; i++) {
      if (!best || Math.abs(points[i][0] - t) < Math.abs(best[0] - t)) best = points[i];
    }
    return best;
  }
  function setUp(box) {
    var svg = box.querySelector("svg");
    var data = JSON.parse(box.querySelector("script.timeline-data").textContent);
    var left = +svg.dataset.left, right = +svg.dataset.right;
    var width = svg.viewBox.baseVal.width;
    var domain = [0, data.end];
    var axis = svg.querySelector("g.x-axis"), axisAt = +axis.dataset.at;
    function x(t) { return left + (t - domain[0]) / (domain[1] - domain[0]) * (width - left - right); }
    function tOf(px) { return domain[0] + (px - left) / (width - left - right) * (domain[1] - domain[0]); }
    function clamp(px) { return Math.min(Math.max(px, left), width - right); }
    var bucket = data.bucket > 1 ? data.bucket : 1;
    function finite(p) { return p && p[1] !== null && isFinite(p[1]); }
    // As draw.rs's `path`: a move at each gap, a point alone drawn across its second.
    function pathOf(points, y) {
      var d = "";
      for (var i = 0; i < points.length; i++) {
        var p = points[i];
        if (!finite(p) || p[0] < domain[0] - bucket || p[0] > domain[1] + bucket) continue;
        var before = i > 0 && finite(points[i - 1]) && points[i - 1][0] >= domain[0] - bucket;
        var after = finite(points[i + 1]) && points[i + 1][0] <= domain[1] + bucket;
        if (!before && !after) d += "M" + clamp(x(Math.max(p[0] - bucket, 0))).toFixed(1) + "," + y(p[1]).toFixed(1) + "L";
        else d += before ? "L" : "M";
        d += clamp(x(p[0])).toFixed(1) + "," + y(p[1]).toFixed(1);
      }
      return d;
    }
    function draw() {
      data.panels.forEach(function (panel, i) {
        panel.lines.forEach(function (line, j) {
          var el = svg.querySelector('path[data-line="' + i + "." + j + '"]');
          if (!el) return;
          el.setAttribute("d", pathOf(line.points, function (v) {
            return panel.top + panel.height - Math.min(Math.max(v, 0), line.max) / line.max * panel.height;
          }));
        });
      });
      axis.querySelectorAll("text.tick").forEach(function (t) { t.remove(); });
      var step = niceStep(domain[1] - domain[0]);
      for (var t = Math.ceil(domain[0] / step) * step; t <= domain[1] + 1e-9; t += step) {
        var label = document.createElementNS(NS, "text");
        label.setAttribute("class", "tick");
        label.setAttribute("x", x(t).toFixed(1));
        label.setAttribute("y", axisAt + 14);
        label.setAttribute("text-anchor", "middle");
        label.textContent = String(+t.toFixed(1));
        axis.appendChild(label);
      }
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
    function svgEl(name, attrs) {
      var e = document.createElementNS(NS, name);
      for (var k in attrs) e.setAttribute(k, attrs[k]);
      return e;
    }
    var cursor = svgEl("line", { y1: 0, y2: axisAt, stroke: "#333", "stroke-dasharray": "3 3", visibility: "hidden" });
    var brush = svgEl("rect", { y: 0, height: axisAt, fill: "rgba(31,119,180,0.15)", visibility: "hidden" });
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
    var from = null;
    svg.addEventListener("mousemove", function (ev) {
      var px = svgX(ev);
      if (px < left || px > width - right) { cursor.setAttribute("visibility", "hidden"); tip.hidden = true; return; }
      var t = tOf(px), at = null;
      // The second the box is about: the nearest of the load's seconds.
      data.panels.forEach(function (panel) {
        panel.lines.forEach(function (line) {
          if (line.sampled) return;
          var p = nearest(line.points, t);
          if (p && (at === null || Math.abs(p[0] - t) < Math.abs(at - t))) at = p[0];
        });
      });
      var lines = [];
      data.panels.forEach(function (panel) {
        var parts = [];
        panel.lines.forEach(function (line) {
          var p = nearest(line.points, at === null ? t : at);
          if (!p) return;
          parts.push(line.label + " " + (finite(p) ? fmt(p[1]) + " " + line.unit : "none"));
        });
        if (parts.length) lines.push(panel.title.replace(/ \(.*\)$/, "") + ": " + parts.join(" · "));
      });
      if (at === null) return;
      (data.causes || []).forEach(function (c) {
        c[1].forEach(function (q) { if (Math.abs(q[0] - at) < 1e-6) lines.push("errors " + c[0] + ": " + fmt(q[1]) + " req/s"); });
      });
      lines.unshift(bucket > 1 ? bucket + " s ending " + fmt(at) + " s" : "second ending " + fmt(at) + " s");
      cursor.setAttribute("x1", x(at)); cursor.setAttribute("x2", x(at));
      cursor.setAttribute("visibility", "visible");
      tip.textContent = lines.join("\n");
      tip.hidden = false;
      var r = box.getBoundingClientRect(), sr = svg.getBoundingClientRect();
      var place = ev.clientX - r.left + 14;
      if (place + tip.offsetWidth > r.width) place = Math.max(0, ev.clientX - r.left - tip.offsetWidth - 14);
      tip.style.left = place + "px";
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
