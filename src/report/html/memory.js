/* modelprof memory report: tables from the JSON report, and per device a
 * timeline of live memory (canvas), stacked by allocation, coloured by
 * category or by site, the stack on hover. Level of detail: the C side
 * gives at most 1,200 columns (each the state with the most bytes live
 * in its slice of the trace), the 400 largest allocations one by one and
 * the rest per category, so a column always adds up to the bytes live. */
'use strict';
var T0 = performance.now();
var ERRORS = [];
window.addEventListener('error', function (e) { ERRORS.push(String(e.message)); showErrors(); });
function showErrors() {
  var p = document.getElementById('mp-errors');
  p.textContent = ERRORS.join('\n');
  p.hidden = !ERRORS.length;
}
var REP = JSON.parse(document.getElementById('mp-report').textContent).memory;
var TL = JSON.parse(document.getElementById('mp-timeline').textContent);
var CAT_COLORS = { parameter: '#4e79a7', gradient: '#f28e2b', optimizer_state: '#e15759', activation: '#76b7b2',
  temporary: '#59a14f', input: '#edc948', other: '#b07aa1', unknown: '#9c9c9c' };
var CATS = ['parameter', 'gradient', 'optimizer_state', 'activation', 'temporary', 'input', 'other', 'unknown'];

function el(tag, attrs, kids) {
  var e = document.createElement(tag);
  if (attrs) for (var k in attrs) {
    if (k === 'text') e.textContent = attrs[k]; else if (k === 'cls') e.className = attrs[k]; else e.setAttribute(k, attrs[k]);
  }
  (kids || []).forEach(function (c) { if (c) e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c); });
  return e;
}
function bytes(v) {
  if (v === null || v === undefined) return '?';
  var a = Math.abs(v), u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0;
  while (a >= 1024 && i < 4) { a /= 1024; i++; }
  return (v < 0 ? '-' : '') + (i ? a.toFixed(2) : String(a)) + ' ' + u[i];
}
function frame(f) { return f ? f.file + ':' + f.line + ' (' + f['function'] + ')' : '(no user frame)'; }
function table(head, rows, num) {
  var t = el('table');
  t.appendChild(el('tr', null, head.map(function (h, i) { return el('th', { text: h, cls: num[i] ? 'n' : '' }); })));
  rows.forEach(function (r) {
    t.appendChild(el('tr', null, r.map(function (c, i) { return el('td', { text: String(c), cls: num[i] ? 'n' : '' }); })));
  });
  return t;
}
function hue(i) { return 'hsl(' + ((i * 137.508) % 360).toFixed(0) + ',55%,58%)'; }

var VIEWS = [];
function timeline(dev, tl, box) {
  var mode = { by: 'category' };
  var head = el('div', { cls: 'mh-note' });
  var sel = el('select', null, [el('option', { value: 'category', text: 'colour by category' }),
                                 el('option', { value: 'site', text: 'colour by site' })]);
  sel.addEventListener('change', function () { mode.by = sel.value; draw(); });
  var cv = el('canvas', { cls: 'mh-canvas' });
  var legend = el('div', { cls: 'mh-legend' });
  CATS.forEach(function (c) { legend.appendChild(el('span', null, [el('i', { style: 'background:' + CAT_COLORS[c] }), c])); });
  head.textContent = tl.events + ' events in ' + tl.columns + ' columns (each the state with the most bytes live in its ' +
    'slice); the ' + tl.bands.length + ' largest of ' + tl.allocations + ' allocations (>= ' + bytes(tl.band_min_bytes) +
    ') drawn one by one, stacked in the order made; every other allocation is in its category\'s band above them. ';
  box.appendChild(head); head.appendChild(sel);
  box.appendChild(cv); box.appendChild(legend);
  var cols = tl.columns, ncat = CATS.length;
  var ymax = 1;
  for (var c = 0; c < cols; c++) if (tl.total[c] > ymax) ymax = tl.total[c];
  /* per column, the bands live in its state (bands are in the order made) */
  function liveBands(c) {
    var r = tl.col_event[c], out = [];
    for (var b = 0; b < tl.bands.length; b++) {
      var B = tl.bands[b];
      if (B[0] <= r && (B[1] < 0 || B[1] > r)) out.push(b);
    }
    return out;
  }
  var LIVE = [];
  for (var c2 = 0; c2 < cols; c2++) LIVE.push(liveBands(c2));
  /* the column's pieces bottom-up: [kind, index, bytes] */
  function pieces(c) {
    var p = [];
    LIVE[c].forEach(function (b) { p.push(['band', b, tl.bands[b][2]]); });
    for (var k = 0; k < ncat; k++) { var v = tl.rest[c * ncat + k]; if (v > 0) p.push(['rest', k, v]); }
    return p;
  }
  var W = 0, H = 0;
  function draw() {
    var dpr = window.devicePixelRatio || 1;
    W = cv.clientWidth; H = cv.clientHeight;
    cv.width = Math.max(1, Math.round(W * dpr)); cv.height = Math.max(1, Math.round(H * dpr));
    var g = cv.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, W, H);
    var cw = W / cols, sy = (H - 16) / ymax;
    for (var c = 0; c < cols; c++) {
      var y = H, p = pieces(c), x = c * cw;
      for (var i = 0; i < p.length; i++) {
        var h = p[i][2] * sy, col;
        if (p[i][0] === 'band') {
          var B = tl.bands[p[i][1]];
          col = mode.by === 'site' ? hue(B[4]) : CAT_COLORS[CATS[B[3]]];
        } else {
          col = CAT_COLORS[CATS[p[i][1]]];
        }
        g.fillStyle = col;
        g.fillRect(x, y - h, Math.max(cw, 1), h);
        if (p[i][0] === 'band' && h > 3) { g.fillStyle = 'rgba(255,255,255,0.5)'; g.fillRect(x, y - h, Math.max(cw, 1), 0.6); }
        y -= h;
      }
    }
    g.fillStyle = '#000'; g.font = '11px sans-serif';
    g.fillText('peak ' + bytes(ymax), 4, 11);
  }
  var tip = document.getElementById('mh-tip');
  function hit(ev) {
    var r = cv.getBoundingClientRect(), x = ev.clientX - r.left, yy = ev.clientY - r.top;
    var c = Math.min(cols - 1, Math.max(0, Math.floor(x / (W / cols))));
    var sy = (H - 16) / ymax, y = H, p = pieces(c);
    for (var i = 0; i < p.length; i++) {
      var h = p[i][2] * sy;
      if (yy <= y && yy >= y - Math.max(h, 1)) return { c: c, p: p[i] };
      y -= h;
    }
    return { c: c, p: null };
  }
  function describe(hh) {
    var c = hh.c, t = tl.col_time_s[c];
    var s = 'column ' + c + ': after event ' + tl.col_event[c] + (t !== null ? ' (+' + t.toFixed(6) + ' s)' : '') +
      ', ' + bytes(tl.total[c]) + ' live\n';
    if (!hh.p) return s;
    if (hh.p[0] === 'band') {
      var B = tl.bands[hh.p[1]], st = tl.stacks[B[4]];
      s += bytes(B[2]) + ' ' + CATS[B[3]] + ', allocated ' + (B[0] < 0 ? 'before recording' : 'at event ' + B[0]) +
        ', freed ' + (B[1] < 0 ? 'never' : 'at event ' + B[1]) + '\n' + st.site + '\n\n' + st.frames.join('\n');
    } else {
      s += bytes(hh.p[2]) + ' of ' + CATS[hh.p[1]] + ' in allocations smaller than ' + bytes(tl.band_min_bytes);
    }
    return s;
  }
  cv.addEventListener('mousemove', function (ev) {
    tip.textContent = describe(hit(ev));
    tip.hidden = false;
    tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - 500) + 'px';
    tip.style.top = (ev.clientY + 14) + 'px';
  });
  cv.addEventListener('mouseleave', function () { tip.hidden = true; });
  window.addEventListener('resize', draw);
  draw();
  var view = { dev: dev, tl: tl, canvas: cv, pieces: pieces, describe: describe, draw: draw };
  VIEWS.push(view);
  return view;
}

function render() {
  document.getElementById('mh-file').textContent = REP.file + ' (' + (REP.gzip ? 'gzip, ' : '') + bytes(REP.pickle_bytes) +
    ' pickle; ' + REP.layout + (REP.block_history ? '; per-block history (PyTorch 2.0)' : '') + ')';
  var main = document.getElementById('mh-main');
  REP.devices.forEach(function (d, i) {
    var sec = el('section', { id: 'device-' + d.device });
    sec.appendChild(el('h2', { text: 'Device ' + d.device }));
    var ev = Object.keys(d.events).map(function (k) { return k + ' ' + d.events[k]; }).join(', ');
    sec.appendChild(table(['', 'start', 'peak', 'end'], [
      ['allocated (requested)', bytes(d.start_requested_bytes), bytes(d.peak_requested_bytes) + (d.peak_event >= 0 ? ' after event ' + d.peak_event : ' (the start)'), bytes(d.end_requested_bytes)],
      ['reserved', bytes(d.start_reserved_bytes), bytes(d.peak_reserved_bytes), bytes(d.end_reserved_bytes)],
      ['allocated (rounded blocks)', '', '', bytes(d.end_allocated_bytes)]], [0, 1, 1, 1]));
    sec.appendChild(el('div', { cls: 'mh-note', text: 'events: ' + d.event_count + (ev ? ' (' + ev + ')' : '') +
      (d.span_s !== null ? '; ' + d.span_s.toFixed(3) + ' s recorded' : '') + '; OOM events: ' + d.oom_events }));
    var tl = TL.filter(function (t) { return t.device === d.device; })[0];
    if (tl) { sec.appendChild(el('h3', { text: 'Live memory over the trace' })); var box = el('div'); sec.appendChild(box); main.appendChild(sec); timeline(d.device, tl, box); }
    else main.appendChild(sec);
    sec.appendChild(el('h3', { text: 'Bytes by category at the peak' }));
    sec.appendChild(table(['category', 'bytes', 'share'], CATS.filter(function (c) { return d.categories_at_peak[c]; }).map(function (c) {
      return [c, bytes(d.categories_at_peak[c]), (100 * d.categories_at_peak[c] / Math.max(1, d.peak_requested_bytes)).toFixed(1) + '%'];
    }), [0, 1, 1]));
    sec.appendChild(el('h3', { text: 'Largest allocations live at the peak' }));
    sec.appendChild(table(['size', 'age (s)', 'category', 'first user frame'], d.top_at_peak.map(function (h) {
      return [bytes(h.size_bytes), h.age_s === null ? (h.alloc_event < 0 ? 'before' : '?') : h.age_s.toFixed(3), h.category, frame(h.site)];
    }), [1, 1, 0, 0]));
    sec.appendChild(el('h3', { text: 'Bytes by source line at the peak' }));
    sec.appendChild(table(['bytes', 'allocations', 'site'], d.sites_at_peak.map(function (s) {
      return [bytes(s.bytes), s.allocations, frame(s.site)];
    }), [1, 1, 0]));
    if (d.steps.length) {
      sec.appendChild(el('h3', { text: 'Steps (' + d.steps_from + ')' }));
      sec.appendChild(table(['step', 'events', 'start', 'peak', 'end'], d.steps.map(function (s, j) {
        return [j + 1, s.last_event - s.first_event + 1, bytes(s.start_bytes), bytes(s.peak_bytes), bytes(s.end_bytes)];
      }), [1, 1, 1, 1, 1]));
    }
    if (d.findings.length) {
      sec.appendChild(el('h3', { text: 'Findings' }));
      d.findings.forEach(function (f) { sec.appendChild(el('div', { cls: 'mh-finding', text: '- ' + f.text })); });
    }
  });
}

/* ---- self-test (tools/html_check.py opens the page with #selftest) ---- */
function selftest() {
  var out = [];
  function ok(c, what) { out.push((c ? 'PASS ' : 'FAIL ') + what); }
  ok(REP.devices.length > 0 && document.querySelectorAll('section').length === REP.devices.length, 'a section per device');
  VIEWS.forEach(function (v) {
    var d = REP.devices.filter(function (x) { return x.device === v.dev; })[0], tl = v.tl;
    var exact = true, max = 0, maxc = 0;
    for (var c = 0; c < tl.columns; c++) {
      var sum = v.pieces(c).reduce(function (a, p) { return a + p[2]; }, 0);
      if (sum !== tl.total[c]) exact = false;
      if (tl.total[c] > max) { max = tl.total[c]; maxc = c; }
    }
    ok(exact, 'device ' + v.dev + ': every column adds up to the bytes live');
    ok(max === d.peak_requested_bytes, 'device ' + v.dev + ': the tallest column is the peak (' + max + ')');
    var g = v.canvas.getContext('2d'), px = g.getImageData(0, 0, v.canvas.width, v.canvas.height).data, ink = 0;
    for (var i = 3; i < px.length; i += 4 * 97) if (px[i]) ink++;
    ok(ink > 0 || max === 0, 'device ' + v.dev + ': the timeline is drawn');
    var hh = { c: maxc, p: v.pieces(maxc)[0] || null };
    ok(!hh.p || v.describe(hh).indexOf('live') >= 0, 'device ' + v.dev + ': hover names what is under the pointer');
  });
  ok(ERRORS.length === 0, 'no script errors');
  var res = el('pre', { id: 'mp-selftest', text: out.join('\n') + '\nload_ms ' + (performance.now() - T0).toFixed(1) });
  document.body.appendChild(res);
}

try { render(); } catch (e) { ERRORS.push(String(e && e.stack || e)); showErrors(); }
if (location.hash === '#selftest') selftest();
