/* modelprof HTML report: renders the embedded JSON (the JSON writer's
 * output, unchanged) with plain JavaScript. No network, no libraries. */
(function () {
'use strict';
var T0 = performance.now();
var errors = [];
window.addEventListener('error', function (e) { errors.push(String(e.message)); showErrors(); });
function showErrors() {
    var p = document.getElementById('mp-errors');
    p.hidden = !errors.length;
    p.textContent = errors.join('\n');
}

/* ---- helpers ---- */
function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) {
        if (k === 'text') e.textContent = attrs[k];
        else if (k === 'cls') e.className = attrs[k];
        else if (k === 'style') e.style.cssText = attrs[k];
        else if (k.slice(0, 2) === 'on') e.addEventListener(k.slice(2), attrs[k]);
        else e.setAttribute(k, attrs[k]);
    }
    if (kids) kids.forEach(function (c) { if (c != null) e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c); });
    return e;
}
function isnum(v) { return typeof v === 'number' && isFinite(v); }
/* Display only: decimal prefixes as the text report (the JSON holds the exact figures). */
var PFX = ['', ' K', ' M', ' G', ' T', ' P', ' E'];
function si(v, unit) {
    if (!isnum(v)) return '?';
    var i = 0, a = Math.abs(v);
    while (a >= 999.995 && i < PFX.length - 1) { a /= 1000; v /= 1000; i++; }
    var s = (Math.round(v * 100) / 100).toString();
    var u = PFX[i] + (unit || '');
    return s + (u && u[0] !== ' ' ? ' ' : '') + u;
}
function secs(s) {
    if (!isnum(s)) return '?';
    if (s === 0) return '0 s';
    var a = Math.abs(s);
    var r = a >= 1 ? [s, ' s'] : a >= 1e-3 ? [s * 1e3, ' ms'] : a >= 1e-6 ? [s * 1e6, ' us'] : [s * 1e9, ' ns'];
    return (Math.round(r[0] * 100) / 100) + r[1];
}
function pct(f) { return isnum(f) ? (Math.round(f * 10000) / 100) + '%' : '?'; }
/* A time in seconds ("wall" -> wall_s) and a rate in FLOP/s ("achieved"
 * -> achieved_flops_per_s): docs/JSON.md's convention. */
function sec(o, base) { return o && isnum(o[base + '_s']) ? o[base + '_s'] : null; }
function rate(o, base) { return o && isnum(o[base + '_flops_per_s']) ? o[base + '_flops_per_s'] : null; }
function card(k, v, title, key) {
    var a = { cls: 'card' };
    if (title) a.title = title;
    if (key) a['data-key'] = key;
    return el('div', a, [el('div', { cls: 'k', text: k }), el('div', { cls: 'v', text: v })]);
}
/* Cost figures that are null when unknown (docs/JSON.md, "Unknown
 * figures"): shown as "?", the reason on hover. */
var COST = { macs: 1, flops: 1, bytes_read: 1, bytes_written: 1, act_bytes: 1, activation_peak_bytes: 1,
    bwd_flops_estimate: 1 };
function unknownWhy(o) {
    var n = o && o.unknown_nodes, u = o && (o.uncounted_nodes != null ? o.uncounted_nodes : o.uncounted);
    var dims = (D && D.unresolved_dims || []).join(', ');
    if (n) return 'unknown: ' + n + ' node' + (n === 1 ? '' : 's') + ' here need' + (n === 1 ? 's' : '') +
        ' dims without a value' + (dims ? ' (' + dims + '; give them with --dim NAME=VALUE)' : '');
    if (u) return 'unknown: no node here has a cost rule';
    return 'unknown';
}
function cellTitle(row, key, v) { return v == null ? (COST[key] ? unknownWhy(row) : '') : String(v); }
/* Sections go into `box`: the page, or a rank's <details> in a job. */
var box = null;
function section(title, id) {
    var s = el('section', { id: id }, [el('h2', { text: title })]);
    (box || main).appendChild(s);
    return s;
}
function fmtOf(c) {
    return c.fmt === 'si' ? function (v) { return si(v, c.unit); } :
        c.fmt === 'bytes' ? function (v) { return si(v, 'B'); } :
        c.fmt === 'sec' ? secs : c.fmt === 'pct' ? pct : c.fmt === 'rate' ? function (v) { return si(v, 'FLOP/s'); } :
        function (v) { return v == null ? '' : String(v); };
}
function cmpBy(key, dir, get) {
    return function (a, b) {
        var x = get(a, key), y = get(b, key);
        var nx = x == null || x === '', ny = y == null || y === '';
        if (nx || ny) return nx === ny ? 0 : nx ? 1 : -1;   /* blanks last */
        if (typeof x === 'number' && typeof y === 'number') return dir * (x - y);
        return dir * String(x).localeCompare(String(y));
    };
}
function header(cols, state, resort) {
    return el('tr', null, cols.map(function (c, i) {
        var th = el('th', { cls: c.num ? 'num' : '', text: c.label, 'data-col': c.key });
        if (state.key === c.key) th.className += state.dir > 0 ? ' sorted-asc' : ' sorted-desc';
        th.addEventListener('click', function () {
            state.dir = state.key === c.key ? -state.dir : (c.num ? -1 : 1);
            state.key = c.key;
            resort();
        });
        return th;
    }));
}
/* A flat sortable table; get(row, key) reads a cell. */
function sortable(parent, cols, rows, get, initial, limit) {
    get = get || function (r, k) { return r[k]; };
    var state = { key: initial || null, dir: -1 };
    var box = el('div', { cls: 'scroll' });
    var tbl = el('table', { cls: 'sortable' });
    box.appendChild(tbl);
    parent.appendChild(box);
    var shown = limit || 1000;
    function render() {
        tbl.textContent = '';
        var th = el('thead', null, [header(cols, state, render)]);
        var list = rows.slice();
        if (state.key) list.sort(cmpBy(state.key, state.dir, get));
        var tb = el('tbody');
        var fm = cols.map(fmtOf);
        list.slice(0, shown).forEach(function (r) {
            tb.appendChild(el('tr', null, cols.map(function (c, i) {
                var v = get(r, c.key);
                /* c.wrap: long text wraps in its cell instead of being cut; c.tip: the
                 * hover text's key (a full path behind a short name); an unknown
                 * figure's hover gives the reason (cellTitle) */
                return el('td', { cls: (c.num ? 'num' : 'name') + (c.wrap ? ' wrap' : ''), text: fm[i](v),
                    title: c.tip ? String(get(r, c.tip)) : cellTitle(r, c.key, v) });
            })));
        });
        tbl.appendChild(th);
        tbl.appendChild(tb);
        if (list.length > shown) {
            tb.appendChild(el('tr', null, [el('td', { colspan: cols.length, cls: 'muted' }, [
                (list.length - shown) + ' more rows ',
                el('a', { href: '#', text: 'show all', onclick: function (e) { e.preventDefault(); shown = list.length; render(); } })])]));
        }
    }
    render();
    return tbl;
}

/* ---- the module tree: collapsible, sortable, searchable, lazy ---- */
function moduleTree(parent, mods, cols) {
    var kids = mods.map(function () { return []; });
    var roots = [];
    mods.forEach(function (m, i) {
        if (m.parent >= 0 && m.parent < mods.length) kids[m.parent].push(i); else roots.push(i);
    });
    var open = {};
    var opsOpen = {};   /* modules whose split by operator type is shown */
    roots.forEach(function (r) { open[r] = true; });
    var state = { key: null, dir: -1 };
    var query = '';
    var tools = el('div', { cls: 'tools' });
    var search = el('input', { type: 'search', placeholder: 'search modules (path, name, class)', id: 'mp-tree-search' });
    tools.appendChild(search);
    var btnAll = el('button', { text: 'expand all', type: 'button' });
    var btnNone = el('button', { text: 'collapse', type: 'button' });
    tools.appendChild(btnAll);
    tools.appendChild(btnNone);
    parent.appendChild(tools);
    var box = el('div', { cls: 'scroll' });
    var tbl = el('table', { id: 'mp-tree' });
    box.appendChild(tbl);
    parent.appendChild(box);
    var fm = cols.map(fmtOf);
    function get(i, k) { return k === 'name' ? label(i) : mods[i][k]; }
    function label(i) { var m = mods[i]; return m.name || m.path || '(root)'; }
    function order(list) {
        list = list.slice();
        if (state.key) list.sort(cmpBy(state.key, state.dir, get));
        return list;
    }
    function row(i, depth) {
        var m = mods[i];
        var tr = el('tr', { 'data-id': i, 'data-depth': depth });
        var has = kids[i].length > 0;
        var tog = el('span', { cls: 'tog', text: has ? (open[i] ? '\u25BE' : '\u25B8') : '' });
        if (has) tog.addEventListener('click', function () { toggle(i, tr); });
        var opsTog = m.ops && m.ops.length ? el('span', { cls: 'opstog', text: opsOpen[i] ? 'ops \u25BE' : 'ops \u25B8',
            title: 'split by operator type' }) : null;
        if (opsTog) opsTog.addEventListener('click', function () { toggleOps(i, tr); });
        var name = el('td', { cls: 'name', title: m.path || '' }, [
            el('span', { style: 'display:inline-block;width:' + (depth * 14) + 'px' }), tog, label(i),
            m['class'] ? el('span', { cls: 'cls', text: m['class'] }) : null, opsTog]);
        tr.appendChild(name);
        cols.forEach(function (c, j) {
            if (j === 0) return;
            var v = m[c.key];
            tr.appendChild(el('td', { cls: 'num', text: fm[j](v), title: cellTitle(m, c.key, v) }));
        });
        return tr;
    }
    /* a module's split by operator type (modules[].ops): one row per op
     * type under the module's row, the same columns */
    function opRows(i, depth) {
        return (mods[i].ops || []).map(function (r) {
            var tr = el('tr', { cls: 'oprow', 'data-op-of': i, 'data-depth': depth });
            var op = (r.domain ? r.domain + '.' : '') + r.op;
            tr.appendChild(el('td', { cls: 'name', title: op + ' in ' + (mods[i].path || '(root)') }, [
                el('span', { style: 'display:inline-block;width:' + (depth * 14 + 16) + 'px' }),
                el('span', { cls: 'opname', text: op }),
                el('span', { cls: 'cls', text: '\u00d7' + r.count + (r.fused ? ' (' + r.fused + ' fused)' : '') })]));
            cols.forEach(function (c, j) {
                if (j === 0) return;
                var v = r[c.key];
                tr.appendChild(el('td', { cls: 'num', text: v == null && !COST[c.key] ? '' : fm[j](v),
                    title: cellTitle(r, c.key, v) }));
            });
            return tr;
        });
    }
    function emit(i, depth, out) {
        out.push(row(i, depth));
        if (opsOpen[i]) opRows(i, depth + 1).forEach(function (r) { out.push(r); });
        if (open[i]) addRows(i, depth + 1, null, out);
        return out;
    }
    function addRows(i, depth, after, out) {   /* children of open i, lazily */
        order(kids[i]).forEach(function (c) { emit(c, depth, out); });
        return out;
    }
    function afterOps(i, tr) {   /* the last of i's op rows, else its own row */
        var a = tr;
        while (a.nextSibling && a.nextSibling.getAttribute('data-op-of') === String(i)) a = a.nextSibling;
        return a;
    }
    function toggle(i, tr) {
        var depth = +tr.getAttribute('data-depth');
        var a = afterOps(i, tr);
        if (open[i]) {
            open[i] = false;
            var n = a.nextSibling;
            while (n && +n.getAttribute('data-depth') > depth) { var x = n.nextSibling; n.remove(); n = x; }
        } else {
            open[i] = true;
            var frag = document.createDocumentFragment();
            addRows(i, depth + 1, null, []).forEach(function (r) { frag.appendChild(r); });
            tr.parentNode.insertBefore(frag, a.nextSibling);
        }
        tr.querySelector('.tog').textContent = open[i] ? '\u25BE' : '\u25B8';
    }
    function toggleOps(i, tr) {
        var depth = +tr.getAttribute('data-depth');
        if (opsOpen[i]) {
            opsOpen[i] = false;
            var n = tr.nextSibling;
            while (n && n.getAttribute('data-op-of') === String(i)) { var x = n.nextSibling; n.remove(); n = x; }
        } else {
            opsOpen[i] = true;
            var frag = document.createDocumentFragment();
            opRows(i, depth + 1).forEach(function (r) { frag.appendChild(r); });
            tr.parentNode.insertBefore(frag, tr.nextSibling);
        }
        tr.querySelector('.opstog').textContent = opsOpen[i] ? 'ops \u25BE' : 'ops \u25B8';
    }
    function render() {
        tbl.textContent = '';
        var th = el('thead', null, [header(cols, state, render)]);
        var tb = el('tbody');
        var frag = document.createDocumentFragment();
        if (query) {   /* matches as a flat list, at most 2000 */
            var q = query.toLowerCase(), hits = [];
            for (var i = 0; i < mods.length && hits.length < 2000; i++) {
                var m = mods[i];
                if ((m.path || '').toLowerCase().indexOf(q) >= 0 || (m.name || '').toLowerCase().indexOf(q) >= 0 ||
                    (m['class'] || '').toLowerCase().indexOf(q) >= 0) hits.push(i);
            }
            order(hits).forEach(function (i) {
                var r = row(i, 0);
                r.firstChild.title = mods[i].path;
                frag.appendChild(r);
                if (opsOpen[i]) opRows(i, 1).forEach(function (x) { frag.appendChild(x); });
            });
        } else {
            order(roots).forEach(function (r) {
                emit(r, 0, []).forEach(function (x) { frag.appendChild(x); });
            });
        }
        tb.appendChild(frag);
        tbl.appendChild(th);
        tbl.appendChild(tb);
    }
    search.addEventListener('input', function () { query = search.value.trim(); render(); });
    btnAll.addEventListener('click', function () {
        if (mods.length > 20000) return;   /* a huge tree stays lazy */
        mods.forEach(function (m, i) { open[i] = true; });
        render();
    });
    btnNone.addEventListener('click', function () { open = {}; roots.forEach(function (r) { open[r] = true; }); render(); });
    render();
    return { kids: kids, roots: roots };
}

/* ---- icicle of the module tree: width by the chosen metric ---- */
function icicle(parent, mods, tree, metrics) {
    var tools = el('div', { cls: 'tools' }, ['size by ']);
    var sel = el('select', { id: 'mp-icicle-metric' });
    metrics.forEach(function (m) { sel.appendChild(el('option', { value: m.key, text: m.label })); });
    tools.appendChild(sel);
    parent.appendChild(tools);
    var box = el('div', { cls: 'icicle', id: 'mp-icicle' });
    parent.appendChild(box);
    var colors = ['#2f6fdb', '#2f9e5b', '#c2702e', '#8a4fc7', '#c23b5b', '#1f8f9e', '#7b8a2e'];
    function draw() {
        box.textContent = '';
        var key = sel.value, W = box.clientWidth || 1000, H = 22, maxd = 0, cells = 0;
        var fmt = metrics.filter(function (m) { return m.key === key; })[0].fmt;
        function val(i) { var v = mods[i][key]; return isnum(v) && v > 0 ? v : 0; }
        function place(i, x, w, d) {
            if (w < 1 || cells > 4000) return;
            cells++;
            if (d > maxd) maxd = d;
            var m = mods[i];
            var c = el('div', { style: 'left:' + x + 'px;top:' + d * H + 'px;width:' + w + 'px;background:' +
                colors[d % colors.length], title: (m.path || m.name || '(root)') + ': ' + fmt(mods[i][key]),
                text: w > 30 ? (m.name || m.path || '(root)') : '' });
            box.appendChild(c);
            var tot = val(i), cx = x;
            if (!tot) return;
            tree.kids[i].slice().sort(function (a, b) { return val(b) - val(a); }).forEach(function (k) {
                var cw = w * val(k) / tot;
                place(k, cx, cw, d + 1);
                cx += cw;
            });
        }
        var rsum = 0;
        tree.roots.forEach(function (r) { rsum += val(r); });
        var x = 0;
        tree.roots.forEach(function (r) { var w = rsum ? W * val(r) / rsum : 0; place(r, x, w, 0); x += w; });
        box.style.height = ((maxd + 1) * H + 2) + 'px';
    }
    sel.addEventListener('change', draw);
    draw();
}

/* ---- formulas (--formula; docs/JSON.md "formulas") ---- */
var SUP = ['', '', '\u00b2', '\u00b3', '\u2074'];
/* A POLY as the text report writes it: "85 M\u00b7batch\u00b7seq + 1.18 K\u00b7batch\u00b7seq\u00b2". */
function polyText(poly) {
    if (!poly) return '?';
    if (!poly.length) return '0';
    return poly.map(function (t, j) {
        var c = t.fraction ? t.fraction[0] : t.coef, mag = Math.abs(c);
        var dims = Object.keys(t.dims || {}).map(function (d) {
            var e = t.dims[d];
            return d + (e > 1 ? (SUP[e] || '^' + e) : '');
        });
        var coef = (!dims.length || mag !== 1 || t.fraction) ?
            si(mag) + (t.fraction ? '/' + t.fraction[1] : '') : '';
        var term = coef + (coef && dims.length ? '\u00b7' : '') + dims.join('\u00b7');
        return (c < 0 ? (j ? ' - ' : '-') : (j ? ' + ' : '')) + term;
    }).join('');
}
/* A set's formula of one figure: "?" when it has none; when a node left
 * out adds to it, "? (at least ...)": the other nodes' polynomial. */
function formulaText(fs, key) {
    var lo = fs && fs.at_least && fs.at_least[key];
    return polyText(fs ? fs[key] : null) + (fs && fs[key] == null && lo && lo.length ? ' (at least ' + polyText(lo) + ')' : '');
}
function formulas(sec, D) {
    var F = D.formulas;
    var rows = [['params', 'params'], ['fwd MACs', 'macs'], ['fwd FLOPs', 'flops'],
        ['bytes read', 'bytes_read'], ['bytes written', 'bytes_written'], ['activation bytes', 'act_bytes']];
    var tb = el('tbody');
    rows.forEach(function (r) {
        var why = F[r[1]] == null && F.left_out_nodes ? 'nodes left out (below) add to it: no formula' : '';
        tb.appendChild(el('tr', null, [el('td', { text: r[0] }), el('td', { text: formulaText(F, r[1]), title: why })]));
    });
    var peak = F.activation_peak_pieces || [];
    var pk = peak.length === 1 ? [polyText(peak[0].poly)] : peak.length ?
        ['the largest of:'].concat(peak.map(function (p) { return polyText(p.poly) + ' (after ' + p.node + ')'; })) :
        ['no formula: ' + (F.activation_peak_note || '?')];
    tb.appendChild(el('tr', null, [el('td', { text: 'activation peak' }),
        el('td', null, pk.map(function (x) { return el('div', { text: x }); }))]));
    sec.appendChild(el('table', { id: 'mp-formulas-table' }, [tb]));
    var notes = [];
    (F.left_out || []).forEach(function (n) { if (n.origin) notes.push('left out: ' + n.node + ' (' + n.op + '): ' + n.reason); });
    if (F.left_out && F.left_out.length) notes.push(F.left_out.length + ' nodes left out in all: a figure they add to has no formula ("?"; "at least": the other nodes\' polynomial)');
    Object.keys(F.ranges || {}).forEach(function (d) {
        var r = F.ranges[d];
        notes.push(d + ' checked from ' + r.min + ' to ' + r.max + (r.above_max ? '; above: ' + r.above_max : '') +
            (r.below_min ? '; below: ' + r.below_min : ''));
    });
    var nd = (F.dims || []).length;
    if (!nd) notes.push('no free dim: the formulas are the figures of the static profile');
    else notes.push('built from ' + F.profiles + ' static profile' + (F.profiles === 1 ? '' : 's') + ', equal to the profile at ' +
        F.checks + ' further point' + (F.checks === 1 ? '' : 's'));
    sec.appendChild(el('ul', { cls: 'findings' }, notes.map(function (n) { return el('li', { text: n }); })));
}

/* ---- by module and operator type (--by-module-op): fvcore's
 * flop_count_table, as the text report (docs/REPORTS.md): module rows in
 * tree order to --depth, #params, #FLOPs, then FLOPs of the --op-top op
 * types with the most FLOPs in the model, the rest in "other" ---- */
function moduleOps(parent, D, opTop, depth) {
    var ops = D.ops || [], run = !!D.run;
    var n = opTop < 0 || opTop > ops.length ? ops.length : opTop, other = n < ops.length;
    var key = function (o) { return (o.domain || '') + '\u001f' + o.op; };
    var index = {};
    ops.forEach(function (o, i) { index[key(o)] = i; });
    var head = ['module', '#params', '#FLOPs'];
    ops.slice(0, n).forEach(function (o) { head.push((o.domain ? o.domain + '.' : '') + o.op); });
    if (other) head.push('other');
    if (run) head.push('latency');
    var tb = el('tbody');
    (D.modules || []).forEach(function (m) {
        if (depth >= 0 && m.depth > depth) return;
        var cells = [el('td', { cls: 'name', title: m.path || m.name || '',
            text: '\u00a0'.repeat(Math.max(0, m.depth)) + (m.parent < 0 ? m.name || '(root)' : m.path) })];
        cells.push(el('td', { cls: 'num', text: si(m.params), title: String(m.params) }));
        cells.push(el('td', { cls: 'num', text: si(m.flops), title: cellTitle(m, 'flops', m.flops) }));
        var col = [], oth = 0, othUnk = null, othAny = false;
        (m.ops || []).forEach(function (r) {
            var i = index[key(r)];
            if (i == null) return;   /* parameters no node reads */
            if (i < n) col[i] = r;
            else { othAny = true; if (r.flops == null) othUnk = r; else oth += r.flops; }
        });
        for (var i = 0; i < n; i++) {
            var r = col[i];
            cells.push(el('td', { cls: 'num', text: r ? si(r.flops) : '', title: r ? cellTitle(r, 'flops', r.flops) : '' }));
        }
        if (other) cells.push(el('td', { cls: 'num', text: !othAny ? '' : othUnk ? '?' : si(oth),
            title: !othAny ? '' : othUnk ? unknownWhy(othUnk) : String(oth) }));
        if (run) cells.push(el('td', { cls: 'num', text: isnum(m.latency_s) ? secs(m.latency_s) : '-' }));
        tb.appendChild(el('tr', null, cells));
    });
    var th = el('thead', null, [el('tr', null, head.map(function (h, i) { return el('th', { cls: i ? 'num' : '', text: h }); }))]);
    parent.appendChild(el('p', { cls: 'muted', text: 'FLOPs of each module (its submodules included) by operator type, as ' +
        'fvcore\'s flop_count_table; ' + (other ? 'the ' + n + ' op types with the most FLOPs, the others summed in "other"' :
        'every op type') + '. An empty cell: no node of that type.' }));
    var box = el('div', { cls: 'scroll' }, [el('table', { id: 'mp-module-ops' }, [th, tb])]);
    parent.appendChild(box);
}

/* ---- the profile (static or measured) ---- */
function profile(D) {
    var t = D.total || {}, run = D.run || null, model = D.model || {};
    document.getElementById('mp-title').textContent = 'modelprof: ' + (model.name || 'model') +
        (model.path ? ' (' + model.path + ')' : '');
    var ortp = run && run.source === 'onnxruntime' ? run.onnxruntime || {} : null;
    document.getElementById('mp-sub').textContent = (ortp ? 'ONNX Runtime profile ' + (ortp.profile || '') :
        run ? 'measured run on the CPU' : 'static profile') +
        (model.producer ? ' \u00b7 ' + model.producer + ' ' + (model.producer_version || '') : '') +
        (model.graph ? ' \u00b7 graph ' + model.graph : '');
    var s = section('Summary', 'mp-summary');
    var cards = el('div', { cls: 'cards', id: 'mp-totals' });
    /* a cost card: "?" when the figure is unknown, what was counted after
     * "at least", the reason on hover */
    function cost(label, key, unit) {
        if (isnum(t[key])) return card(label, si(t[key], unit), String(t[key]), key);
        var lo = (t.at_least || {})[key];
        return card(label, '?' + (lo ? ' (at least ' + si(lo, unit) + ')' : ''),
            unknownWhy(t) + (lo ? '; at least ' + si(lo, unit) + ' (' + lo + ') counted' : ''), key);
    }
    cards.appendChild(card('params', si(t.params)));
    cards.appendChild(cost('MACs', 'macs', 'MACs'));
    cards.appendChild(cost('FLOPs', 'flops', 'FLOPs'));
    cards.appendChild(cost('activation peak', 'activation_peak_bytes', 'B'));
    cards.appendChild(card('param bytes', si(t.param_bytes, 'B')));
    cards.appendChild(card('nodes', String(t.nodes)));
    if (run) {
        var med = (run.latency || {}).median_s;
        cards.appendChild(card('latency (median)', secs(med)));
        cards.appendChild(card('achieved', si(run.achieved_flops_per_s, 'FLOP/s')));
        cards.appendChild(card('of peak', pct(run.fraction_of_peak)));
        if (ortp) {
            cards.appendChild(card('node time / run', secs(ortp.node_time_s)));
            cards.appendChild(card('unmatched', secs(run.unmatched_s)));
        } else {
            cards.appendChild(card('peak memory', si(run.peak_memory_bytes, 'B')));
        }
    }
    s.appendChild(cards);
    var notes = [];
    if (t.unknown_nodes) notes.push(t.unknown_nodes + ' nodes depend on unresolved dims' +
        ((D.unresolved_dims || []).length ? ' (' + D.unresolved_dims.join(', ') + ')' : '') +
        ': the MACs, FLOPs and bytes they add to are unknown ("?"; set the dims with --dim NAME=VALUE)');
    if (t.uncounted_nodes) notes.push(t.uncounted_nodes + ' nodes have no cost rule');
    var pc = D.param_counting; /* parameters counted by judgement (docs/COUNTING.md) */
    if (pc) {
        if (pc.upper_bound) notes.push('params is an upper bound (see below)');
        if (pc.possible_copy_elements) notes.push(si(pc.possible_copy_elements) + ' of the params may be copies (see below)');
        (pc.notes || []).forEach(function (n) {
            if (n.kind !== 'derived' || n.counted !== n.elements) notes.push(n.text);
        });
        if (pc.batchnorm_folded_text) notes.push(pc.batchnorm_folded_text);
    }
    if (ortp) {
        notes.push('Times from ONNX Runtime\'s profile ' + ortp.profile + ': ' + run.iters + ' runs averaged (' +
            run.warmup + ' left out as warm-up); ' + ortp.events + ' node events per run: ' + ortp.exact + ' by name, ' +
            ortp.renamed + ' by a fused node\'s name, ' + ortp.by_order + ' by their place, ' + ortp.unmatched +
            ' unmatched; ' + run.fused_nodes + ' nodes fused by ONNX Runtime share their event\'s time by FLOPs.');
        (run.unmatched || []).forEach(function (u) { notes.push('unmatched: ' + u.name + ' (' + u.op + ', ' + secs(u.latency_s) + ' per run)'); });
    }
    (D.warnings || []).forEach(function (w) { notes.push(w); });
    if (D.findings) D.findings.forEach(function (f) { notes.push(f.text); });
    if (notes.length) {
        s.appendChild(el('h2', { text: 'Findings' }));
        s.appendChild(el('ol', { cls: 'findings', id: 'mp-findings' }, notes.map(function (n) { return el('li', { text: n }); })));
    }
    if (D.formulas) formulas(section('Formulas in ' + (D.formulas.dims.join(', ') || 'no free dim'), 'mp-formulas'), D);
    var mods = D.modules || [];
    var cols = [{ key: 'name', label: 'module' },
        { key: 'params', label: 'params', num: 1, fmt: 'si' },
        { key: 'macs', label: 'MACs', num: 1, fmt: 'si' },
        { key: 'flops', label: 'FLOPs', num: 1, fmt: 'si' },
        { key: 'act_bytes', label: 'activations', num: 1, fmt: 'bytes' },
        { key: 'param_bytes', label: 'param bytes', num: 1, fmt: 'bytes' }];
    if (run) cols.push({ key: 'latency_s', label: 'latency', num: 1, fmt: 'sec' },
        { key: 'achieved_flops_per_s', label: 'FLOP/s', num: 1, fmt: 'rate' },
        { key: 'fraction_of_peak', label: 'of peak', num: 1, fmt: 'pct' });
    if (D.formulas) {
        mods = mods.map(function (m) {
            return Object.assign({ macs_formula: formulaText(m.formulas, 'macs') }, m);
        });
        cols.push({ key: 'macs_formula', label: 'MACs formula' });
    }
    if (mods.length) {
        var tree = moduleTree(section('Module tree (' + mods.length + ' modules)', 'mp-modules'), mods, cols);
        var metrics = [];
        if (run) metrics.push({ key: 'latency_s', label: 'latency (measured)', fmt: secs });
        var byFlops = { key: 'flops', label: 'FLOPs', fmt: function (v) { return si(v, 'FLOPs'); } },
            byParams = { key: 'params', label: 'params', fmt: si };
        /* FLOPs unknown (null): sized by params first */
        if (isnum(mods[0].flops)) metrics.push(byFlops, byParams); else metrics.push(byParams, byFlops);
        icicle(section('Icicle of the module tree', 'mp-icicle-sec'), mods, tree, metrics);
    }
    if (OPTS.byModuleOp && (D.modules || []).length)
        moduleOps(section('By module and operator type', 'mp-module-ops-sec'), D, OPTS.opTop, OPTS.depth);
    var ocols = [{ key: 'op', label: 'operator' }, { key: 'count', label: 'count', num: 1 },
        { key: 'params', label: 'params', num: 1, fmt: 'si' },
        { key: 'macs', label: 'MACs', num: 1, fmt: 'si' }, { key: 'flops', label: 'FLOPs', num: 1, fmt: 'si' },
        { key: 'bytes_read', label: 'read', num: 1, fmt: 'bytes' },
        { key: 'bytes_written', label: 'written', num: 1, fmt: 'bytes' }];
    if (run) ocols.push({ key: 'fused', label: 'fused', num: 1 }, { key: 'latency_s', label: 'latency', num: 1, fmt: 'sec' },
        { key: 'achieved_flops_per_s', label: 'FLOP/s', num: 1, fmt: 'rate' },
        { key: 'fraction_of_peak', label: 'of peak', num: 1, fmt: 'pct' });
    var ops = (D.ops || []).map(function (o) {
        var r = Object.assign({}, o);
        if (o.domain) r.op = o.domain + '.' + o.op;
        return r;
    });
    sortable(section('By operator type', 'mp-ops'), ocols, ops, null, run ? 'latency_s' : 'flops').id = 'mp-ops-table';
    if (run && run.kernel_groups) {
        sortable(section('Kernels (fused groups)', 'mp-kgroups'), [{ key: 'name', label: 'group' },
            { key: 'kernel', label: 'kernel' }, { key: 'count', label: 'count', num: 1 },
            { key: 'flops', label: 'FLOPs', num: 1, fmt: 'si' }, { key: 'latency_s', label: 'latency', num: 1, fmt: 'sec' },
            { key: 'achieved_flops_per_s', label: 'FLOP/s', num: 1, fmt: 'rate' },
            { key: 'fraction_of_peak', label: 'of peak', num: 1, fmt: 'pct' }], run.kernel_groups, null, 'latency_s');
    }
}

/* ---- the trace analysis ---- */
/* Idle causes: hues far apart (collective wait keeps the timelines'
 * crimson; synchronisation, once a second crimson, is amber) */
var CAUSE_COLORS = { data_loader: '#b35806', collective_wait: '#d6336c', host_range: '#1098ad',
    launch_bound: '#7048e8', synchronization: '#f0b400', other: '#9aa3b2' };
function trace(D) {
    var list = D.ranks || D.traces;   /* several ranks, or traces of separate jobs: each */
    if (list) {
        if (D.ranks && D.job) job(D);
        else {
            document.getElementById('mp-title').textContent = 'modelprof trace: ' + list.length + ' traces of separate jobs';
            document.getElementById('mp-sub').textContent = D.separate_jobs || '';
        }
        /* each rank in its own block, rendered when opened (a job may have
         * a thousand ranks); a small job's first ranks open */
        list.forEach(function (r, i) {
            var name = D.ranks ? 'Rank ' + (r.rank != null ? r.rank : i) : 'Trace ' + (i + 1);
            var st = (r.summary || {}).steps ? sec(r.summary, 'wall') / r.summary.steps : null;
            var d = el('details', { cls: 'rank', id: 'mp-rank-' + i }, [el('summary', null, [
                el('b', { text: name }), ' \u00b7 ' + (r.trace || '') + (st != null ? ' \u00b7 mean step ' + secs(st) : '')])]);
            var done = false;
            d.addEventListener('toggle', function () {
                if (!d.open || done) return;
                done = true;
                box = d;
                traceOne(r, i, !D.ranks);
                box = null;
            });
            main.appendChild(d);
            if (list.length <= 2 || (!D.ranks && list.length <= 4)) d.open = true;
        });
        return;
    }
    traceOne(D, -1);
}

/* A path's file name and its folder ('' when it has none). */
function base(p) { p = String(p || ''); var i = p.lastIndexOf('/'); return i < 0 ? p : p.slice(i + 1); }
function dirOf(p) { p = String(p || ''); var i = p.lastIndexOf('/'); return i < 0 ? '' : p.slice(0, i); }

/* ---- a job: ranks, stragglers, each step's critical rank, what-if, timelines ---- */
function job(D) {
    var J = D.job, R = D.ranks;
    document.getElementById('mp-title').textContent = 'modelprof trace: a job of ' + R.length + ' ranks';
    var dev = R[0] && R[0].device && R[0].device.name;
    document.getElementById('mp-sub').textContent = (dev ? dev + ' \u00b7 ' : '') + (J.steps || []).length +
        ' steps \u00b7 collectives matched by ' + (J.match_by || 'nothing (no collectives)');
    var w = J.what_if || {};
    var s = section('Job', 'mp-job');
    var cards = el('div', { cls: 'cards', id: 'mp-totals' });
    cards.appendChild(card('ranks', String(R.length)));
    cards.appendChild(card('job step', secs(sec(w, 'step'))));
    cards.appendChild(card('if stragglers ran like the median', secs(sec(w, 'ideal_step'))));
    cards.appendChild(card('time lost to stragglers', pct(w.share_lost)));
    cards.appendChild(card('stragglers', String((J.stragglers || []).length)));
    s.appendChild(cards);
    var st = el('div', { id: 'mp-stragglers' });
    st.appendChild(el('h2', { text: 'Stragglers' }));
    if (!(J.stragglers || []).length) st.appendChild(el('p', { cls: 'muted', text: 'none: no rank was late in most steps' }));
    else st.appendChild(el('ul', null, J.stragglers.map(function (x) {
        return el('li', null, [el('b', { text: 'rank ' + x.rank }), ': late in ' + x.late_steps + ' of ' + J.steps.length +
            ' steps, ' + secs(x.mean_delay_s) + ' a step on average; cause: ' + (x.cause || 'not found') +
            '; had it run like the median rank, ' + secs(x.whatif_saved_s) + ' of the job saved']);
    })));
    s.appendChild(st);
    var lost = [];
    (w.ranks || []).forEach(function (x) { lost.push('rank ' + x.rank + ' ' + pct(x.share)); });
    var byCause = (w.causes || []).map(function (x) { return x.cause + ' ' + pct(x.share); });
    s.appendChild(el('p', { id: 'mp-whatif', text: 'What-if (Lin et al., "Understanding Stragglers in Large Model Training ' +
        'Using What-if Analysis"): job time lost, by rank: ' + (lost.join(', ') || 'none') + '; by cause: ' +
        (byCause.join(', ') || 'none') + '.' }));
    var rows = (J.ranks || []).map(function (x, i) {
        var r = R[i] || {}, sm = r.summary || {}, n = sm.steps || 1, cw = 0;
        (r.steps || []).forEach(function (t) { cw += (t.idle_causes_s || {}).collective_wait || 0; });
        return { rank: x.rank, trace: base(x.trace), trace_path: x.trace, mean_step_s: sec(sm, 'wall') / n, utilization: sm.utilization,
            communication_s: sec(sm, 'communication') / n, collective_wait_s: cw / n, wait_s: x.wait_s / n,
            mean_delay_s: x.mean_delay_s, late_steps: x.late_steps, critical_steps: x.critical_steps,
            straggler: x.straggler ? 'yes' : '', share_lost: x.share_lost, cause: x.cause || '' };
    });
    /* the traces by file name (their folder once, above), so the cause stays on screen */
    var rsec = section('Ranks (per step on average)', 'mp-ranks-sec');
    var dirs = {};
    (J.ranks || []).forEach(function (x) { dirs[dirOf(x.trace)] = 1; });
    var dl = Object.keys(dirs);
    if (dl.length === 1 && dl[0]) rsec.appendChild(el('p', { cls: 'muted', id: 'mp-ranks-folder', text: 'traces in ' + dl[0] +
        ' (hover a file name for its path)' }));
    sortable(rsec, [{ key: 'rank', label: 'rank', num: 1 },
        { key: 'trace', label: 'trace', tip: 'trace_path' }, { key: 'mean_step_s', label: 'mean step', num: 1, fmt: 'sec' },
        { key: 'utilization', label: 'util', num: 1, fmt: 'pct' },
        { key: 'communication_s', label: 'comm', num: 1, fmt: 'sec' },
        { key: 'collective_wait_s', label: 'coll wait', num: 1, fmt: 'sec' },
        { key: 'wait_s', label: 'wait', num: 1, fmt: 'sec' }, { key: 'mean_delay_s', label: 'late', num: 1, fmt: 'sec' },
        { key: 'late_steps', label: 'late steps', num: 1 }, { key: 'critical_steps', label: 'critical', num: 1 },
        { key: 'straggler', label: 'straggler' }, { key: 'share_lost', label: 'job lost', num: 1, fmt: 'pct' },
        { key: 'cause', label: 'cause', wrap: 1 }], rows, null, null, 2000).id = 'mp-ranks';
    var srows = (J.steps || []).map(function (x) {
        return { name: x.name, wall_s: x.wall_s, critical_rank: x.critical_rank, critical_delay_s: x.critical_rank != null ? x.critical_delay_s : null,
            whatif_step_s: x.critical_rank != null ? x.whatif_step_s : null, ideal_step_s: x.ideal_step_s, cause: x.cause || '' };
    });
    sortable(section('Steps: the critical rank (the one the others waited for)', 'mp-job-steps-sec'), [
        { key: 'name', label: 'step' }, { key: 'wall_s', label: 'job wall', num: 1, fmt: 'sec' },
        { key: 'critical_rank', label: 'critical rank', num: 1 }, { key: 'critical_delay_s', label: 'delay', num: 1, fmt: 'sec' },
        { key: 'whatif_step_s', label: 'had it run like the median', num: 1, fmt: 'sec' },
        { key: 'ideal_step_s', label: 'no stragglers', num: 1, fmt: 'sec' }, { key: 'cause', label: 'cause', wrap: 1 }],
        srows, null, null, 2000).id = 'mp-job-steps';
    timelines(section('Timelines: compute, collectives, waits', 'mp-timelines'), D);
}

/* One lane per rank on the job's clock: the device's compute (green), each
 * collective from its arrival (the wait for the last rank, red; the rest,
 * blue), step boundaries. Stragglers and critical ranks first, 32 lanes,
 * the rest on demand. */
function timelines(parent, D) {
    var J = D.job, R = D.ranks, NS = 'http://www.w3.org/2000/svg';
    var x0 = Infinity, x1 = -Infinity;
    R.forEach(function (r) {
        (r.timeline || []).forEach(function (p) { x0 = Math.min(x0, p[0]); x1 = Math.max(x1, p[1]); });
        (r.collectives || []).forEach(function (c) { x0 = Math.min(x0, c.arrival_s); x1 = Math.max(x1, c.end_s); });
        (r.steps || []).forEach(function (t) {
            var a = sec(t, 'start') - (r.time_origin_s || 0);
            x0 = Math.min(x0, a); x1 = Math.max(x1, a + (sec(t, 'wall') || 0));
        });
    });
    if (!(x1 > x0)) { parent.appendChild(el('p', { cls: 'muted', text: 'nothing to draw' })); return; }
    var leg = el('div', { cls: 'legend' }, [el('span', null, [el('i', { style: 'background:var(--busy)' }), 'device compute']),
        el('span', null, [el('i', { style: 'background:#d6336c' }), 'waiting in a collective for the last rank']),
        el('span', null, [el('i', { style: 'background:#2f6fdb' }), 'collective after the last arrival'])]);
    parent.appendChild(leg);
    var order = [], seen = {};
    function add(i) { if (i >= 0 && i < R.length && !seen[i]) { seen[i] = true; order.push(i); } }
    var byRank = {};
    R.forEach(function (r, i) { byRank[r.rank] = i; });
    (J.stragglers || []).forEach(function (x) { add(byRank[x.rank]); });
    (J.steps || []).forEach(function (x) { if (x.critical_rank != null) add(byRank[x.critical_rank]); });
    R.forEach(function (r, i) { add(i); });
    var W = 1000, H = 34;
    var box2 = el('div', { id: 'mp-timeline-lanes' });
    parent.appendChild(box2);
    function lane(i) {
        var r = R[i];
        var svg = document.createElementNS(NS, 'svg');
        svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
        svg.setAttribute('width', '100%');
        svg.setAttribute('height', H);
        svg.setAttribute('preserveAspectRatio', 'none');
        svg.setAttribute('class', 'lane');
        svg.setAttribute('data-rank', r.rank);
        function X(t) { return ((t - x0) / (x1 - x0) * W); }
        function rect(a, b, y, h, color, cls, tip) {
            var e = document.createElementNS(NS, 'rect');
            e.setAttribute('x', X(a).toFixed(2));
            e.setAttribute('width', Math.max(0.3, X(b) - X(a)).toFixed(2));
            e.setAttribute('y', y); e.setAttribute('height', h); e.setAttribute('fill', color);
            if (cls) e.setAttribute('class', cls);
            if (tip) { var t = document.createElementNS(NS, 'title'); t.textContent = tip; e.appendChild(t); }
            svg.appendChild(e);
        }
        (r.steps || []).forEach(function (t, k) {
            var a = sec(t, 'start') - (r.time_origin_s || 0);
            rect(a, a + (sec(t, 'wall') || 0), 0, H, k % 2 ? '#f3f4f7' : '#fafbfc', 'step', t.name);
        });
        (r.timeline || []).forEach(function (p) { rect(p[0], p[1], 3, 12, 'var(--busy)', 'busy'); });
        (r.collectives || []).forEach(function (c) {
            var wt = isnum(c.wait_s) ? Math.min(c.wait_s, c.end_s - c.arrival_s) : 0;
            var tip = c.name + (c.elements != null ? ' ' + c.elements + ' elements' : '') + ' (' + (c.step || '') +
                '): arrived ' + secs(c.arrival_s) + ', waited ' + (isnum(c.wait_s) ? secs(c.wait_s) : '?') +
                ', in it ' + secs(c.end_s - c.arrival_s);
            if (wt > 0) rect(c.arrival_s, c.arrival_s + wt, 18, 12, '#d6336c', 'wait', tip);
            rect(c.arrival_s + wt, c.end_s, 18, 12, '#2f6fdb', 'coll', tip);
        });
        var strag = (J.stragglers || []).some(function (x) { return x.rank === r.rank; });
        return el('div', { cls: 'row' }, [el('div', { cls: 'lbl', text: 'rank ' + r.rank + (strag ? ' (straggler)' : '') }),
            el('div', { style: 'flex:1' }, [svg])]);
    }
    var shown = Math.min(order.length, 32);
    order.slice(0, shown).forEach(function (i) { box2.appendChild(lane(i)); });
    if (order.length > shown) {
        var more = el('a', { href: '#', text: 'show all ' + order.length + ' ranks', onclick: function (e) {
            e.preventDefault();
            order.slice(shown).forEach(function (i) { box2.appendChild(lane(i)); });
            more.remove();
        } });
        parent.appendChild(more);
    }
    parent.appendChild(el('div', { cls: 'muted', text: 'time from the job\u2019s first step: 0 to ' + secs(x1 - x0) +
        ' (each rank\u2019s times on the job\u2019s clock: its baseTimeNanoseconds)' }));
}
function traceOne(D, idx, separate) {
    var sfx = idx < 0 ? '' : separate ? ' (trace ' + (idx + 1) + ')' : ' (rank ' + (D.rank != null ? D.rank : idx) + ')';
    var id = function (x) { return idx > 0 ? x + '-' + idx : x; };
    var sm = D.summary || {};
    if (idx < 0) {
        document.getElementById('mp-title').textContent = 'modelprof trace: ' + (D.trace || '');
        document.getElementById('mp-sub').textContent = (D.device && D.device.name ? D.device.name + ' \u00b7 ' : '') +
            (D.events || 0) + ' events';
    }
    var s = section('Summary' + sfx, id('mp-summary'));
    var cards = el('div', { cls: 'cards', id: id('mp-totals') });
    cards.appendChild(card('steps', String(sm.steps)));
    cards.appendChild(card('wall', secs(sec(sm, 'wall'))));
    var nodev = !!D.recorded && D.recorded.device === false;   /* a CPU-only trace: host times */
    if (!nodev) {
        cards.appendChild(card('device busy', secs(sec(sm, 'device_busy'))));
        cards.appendChild(card('utilization', pct(sm.utilization)));
    }
    cards.appendChild(card('FLOPs', si(sm.flops, 'FLOPs')));
    cards.appendChild(card('achieved', si(rate(sm, 'achieved'), 'FLOP/s')));
    cards.appendChild(card('MFU', pct(sm.mfu)));
    if (D.memory) cards.appendChild(card('peak allocated', si(D.memory.peak_allocated_bytes, 'B')));
    s.appendChild(cards);
    var fs = (D.findings || []).slice().sort(function (a, b) { return a.priority - b.priority; });
    if (fs.length) {
        s.appendChild(el('h2', { text: 'Findings' }));
        s.appendChild(el('ol', { cls: 'findings', id: id('mp-findings') }, fs.map(function (f) { return el('li', { text: f.text }); })));
    }
    var steps = D.steps || [];
    if (steps.length) {
        var st = section((nodev ? 'Steps: wall time (no device in this trace)' : 'Steps: device busy and idle by cause') + sfx, id('mp-steps'));
        var maxw = 0;
        steps.forEach(function (x) { maxw = Math.max(maxw, sec(x, 'wall') || 0); });
        var causes = Object.keys(CAUSE_COLORS);
        var leg = el('div', { cls: 'legend' }, [el('span', null, [el('i', { style: 'background:var(--busy)' }), 'busy'])]);
        causes.forEach(function (c) { leg.appendChild(el('span', null, [el('i', { style: 'background:' + CAUSE_COLORS[c] }), c.replace('_', ' ')])); });
        if (!nodev) st.appendChild(leg);
        var bars = el('div', { cls: 'bars' });
        steps.forEach(function (x) {
            var w = sec(x, 'wall') || 0, ic = x.idle_causes_s || {};
            var bar = el('div', { cls: 'bar', style: 'flex:none;width:' + (maxw ? 100 * w / maxw : 0) + '%' });
            function seg(v, color, what) {
                if (!(v > 0) || !w) return;
                bar.appendChild(el('span', { style: 'width:' + (100 * v / w) + '%;background:' + color, title: what + ': ' + secs(v) }));
            }
            if (nodev) seg(w, 'var(--mut)', 'host wall');
            else {
                seg(sec(x, 'device_busy'), 'var(--busy)', 'busy');
                causes.forEach(function (c) { seg(ic[c] || 0, CAUSE_COLORS[c], c); });
            }
            bars.appendChild(el('div', { cls: 'row' }, [el('div', { cls: 'lbl', text: x.name, title: x.name }),
                el('div', { style: 'flex:1' }, [bar]), el('div', { cls: 'muted', text: secs(w) })]));
        });
        st.appendChild(bars);
        if (!nodev) memoryCurve(section('Device memory over the window' + sfx, id('mp-memory')), D, steps);
    }
    var kr = (D.kernels || []).map(function (k) {
        var r = Object.assign({}, k);
        r.total_s = sec(k, 'total'); r.mean_s = sec(k, 'mean');
        r.fraction = isnum(k.fraction) ? k.fraction : null;
        return r;
    });
    if (!nodev) /* a CPU-only trace has no kernels */
        sortable(section('Kernels' + sfx, id('mp-kernels')), [{ key: 'short_name', label: 'kernel' },
            { key: 'category', label: 'category' }, { key: 'count', label: 'count', num: 1 },
            { key: 'total_s', label: 'total', num: 1, fmt: 'sec' }, { key: 'mean_s', label: 'mean', num: 1, fmt: 'sec' },
            { key: 'fraction', label: 'share', num: 1, fmt: 'pct' }, { key: 'operator', label: 'operator' }], kr, null, 'total_s', 500);
    var or = (D.operators || []).map(function (o) {
        var r = Object.assign({}, o);
        ['cpu_total', 'self_cpu', 'device_total', 'self_device'].forEach(function (k) { r[k + '_s'] = sec(o, k); });
        return r;
    });
    var ocols = [{ key: 'name', label: 'operator' },
        { key: 'count', label: 'count', num: 1 }, { key: 'cpu_total_s', label: 'CPU total', num: 1, fmt: 'sec' },
        { key: 'self_cpu_s', label: 'self CPU', num: 1, fmt: 'sec' }];
    if (!nodev) /* a CPU-only trace: key_averages' columns for a CPU run */
        ocols = ocols.concat([{ key: 'device_total_s', label: 'device total', num: 1, fmt: 'sec' },
            { key: 'self_device_s', label: 'self device', num: 1, fmt: 'sec' }]);
    ocols = ocols.concat([{ key: 'flops', label: 'FLOPs', num: 1, fmt: 'si' }]);
    if (!nodev) ocols.push({ key: 'device_alloc_bytes', label: 'allocated', num: 1, fmt: 'bytes' });
    sortable(section('Operators' + sfx, id('mp-ops')), ocols, or, null, nodev ? 'self_cpu_s' : 'self_device_s', 500);
    var mods = (D.modules || []).map(function (m) {
        var r = Object.assign({}, m);
        r.fwd_device_s = sec(m, 'fwd_device'); r.bwd_device_s = sec(m, 'bwd_device');
        r.fwd_flops_per_s = rate(m, 'fwd');
        return r;
    });
    if (mods.length) {
        var cols = [{ key: 'name', label: 'module' }, { key: 'calls', label: 'calls', num: 1 },
            { key: 'fwd_device_s', label: 'forward', num: 1, fmt: 'sec' },
            { key: 'bwd_device_s', label: 'backward', num: 1, fmt: 'sec' },
            { key: 'flops', label: 'FLOPs', num: 1, fmt: 'si' },
            { key: 'fwd_flops_per_s', label: 'fwd FLOP/s', num: 1, fmt: 'rate' }];
        var tree = moduleTree(section('Module tree' + sfx, id('mp-modules')), mods, cols);
        icicle(section('Icicle of the module tree' + sfx, id('mp-icicle-sec')), mods, tree,
            [{ key: 'fwd_device_s', label: 'forward device time', fmt: secs },
             { key: 'flops', label: 'FLOPs', fmt: function (v) { return si(v, 'FLOPs'); } }]);
    }
}
/* The memory curve: the summary's samples when it carries them
 * (memory.curve: [[t_s, allocated_bytes], ...]), else each step's start,
 * peak and end allocation. */
function memoryCurve(parent, D, steps) {
    var pts = [];
    var mc = D.memory && D.memory.curve;
    if (mc && mc.length) pts = mc.map(function (p) { return [p[0], p[1]]; });
    else steps.forEach(function (x) {
        var m = x.memory || {}, t0 = sec(x, 'start') || 0, w = sec(x, 'wall') || 0;
        if (isnum(m.start_allocated_bytes)) pts.push([t0, m.start_allocated_bytes]);
        if (isnum(m.peak_allocated_bytes)) pts.push([t0 + w / 2, m.peak_allocated_bytes]);
        if (isnum(m.end_allocated_bytes)) pts.push([t0 + w, m.end_allocated_bytes]);
    });
    if (pts.length < 2) { parent.appendChild(el('p', { cls: 'muted', text: 'no memory events in the trace' })); return; }
    pts.sort(function (a, b) { return a[0] - b[0]; });
    var x0 = pts[0][0], x1 = pts[pts.length - 1][0], ymax = 0;
    pts.forEach(function (p) { ymax = Math.max(ymax, p[1]); });
    var W = 900, H = 160, NS = 'http://www.w3.org/2000/svg';
    var svg = document.createElementNS(NS, 'svg');
    svg.setAttribute('viewBox', '0 0 ' + W + ' ' + (H + 20));
    svg.setAttribute('width', '100%');
    svg.setAttribute('preserveAspectRatio', 'none');
    svg.setAttribute('height', H + 20);
    svg.setAttribute('id', 'mp-memory-curve');
    var d = pts.map(function (p) {
        return ((p[0] - x0) / ((x1 - x0) || 1) * W).toFixed(1) + ',' + (H - (ymax ? p[1] / ymax * H : 0)).toFixed(1);
    }).join(' ');
    var pl = document.createElementNS(NS, 'polyline');
    pl.setAttribute('points', d);
    pl.setAttribute('fill', 'none');
    pl.setAttribute('stroke', '#2f6fdb');
    pl.setAttribute('stroke-width', '2');
    pl.setAttribute('vector-effect', 'non-scaling-stroke');
    svg.appendChild(pl);
    var tx = document.createElementNS(NS, 'text');
    tx.setAttribute('x', 4); tx.setAttribute('y', H + 16); tx.setAttribute('font-size', '11');
    tx.textContent = 'peak ' + si(ymax, 'B') + ' over ' + secs(x1 - x0);
    svg.appendChild(tx);
    parent.appendChild(svg);
}

/* ---- self-test (tools/html_check.py opens the page with #selftest) ---- */
function selftest() {
    var out = [];
    function check(name, ok) { out.push((ok ? 'PASS ' : 'FAIL ') + name); }
    var tot = document.getElementById('mp-totals');
    check('totals present', !!tot && tot.children.length >= 4 && !/\?$/.test(tot.children[0].lastChild.textContent));
    var tree = document.getElementById('mp-tree');
    if (tree) {
        var before = tree.tBodies[0].rows.length;
        var tog = null, rows = tree.tBodies[0].rows;
        for (var i = 0; i < rows.length && !tog; i++) {
            var t = rows[i].querySelector('.tog');
            if (t && t.textContent === '\u25B8') tog = t;
        }
        if (tog) { tog.click(); check('tree node expands', tree.tBodies[0].rows.length > before); }
        else check('tree node expands (all open)', before > 1 || document.querySelectorAll('#mp-tree tbody tr').length >= 1);
    }
    /* the split by operator type: a module's ops toggle shows one row per
     * op type, and the rows add up to the module's figures */
    var ot = document.querySelector('#mp-tree .opstog');
    if (ot) {
        var tr0 = ot.parentNode.parentNode, mi = +tr0.getAttribute('data-id');
        var n0 = document.querySelectorAll('#mp-tree tr.oprow').length;
        ot.click();
        var shown = document.querySelectorAll('#mp-tree tr.oprow[data-op-of="' + mi + '"]').length;
        check('module ops split expands', shown === (D.modules[mi].ops || []).length && shown > 0);
        ot.click();
        check('module ops split collapses', document.querySelectorAll('#mp-tree tr.oprow').length === n0);
        var sumsOk = true;
        D.modules.forEach(function (m) {
            if (!m.ops) return;
            ['params', 'macs', 'flops'].forEach(function (k) {
                var t = 0, unk = false;
                m.ops.forEach(function (r) { if (r[k] == null) unk = true; else t += r[k]; });
                if (m[k] == null) { if (!unk) sumsOk = false; return; }   /* unknown: some row is */
                if (Math.abs(t - m[k]) > 1e-9 * Math.max(1, m[k])) sumsOk = false;
            });
        });
        check('module ops rows add up to the module', sumsOk);
    } else if (document.getElementById('mp-tree') && D && D.modules && D.modules.some(function (m) { return m.ops && m.ops.length; })) {
        check('module ops split toggle present', false);
    }
    var tbl = document.querySelector('table.sortable');
    if (tbl) {
        var col = function (c) {   /* the data rows' cells of column c */
            var out = [];
            Array.prototype.forEach.call(tbl.tBodies[0].rows, function (r) { if (r.cells.length > 1) out.push(r.cells[c]); });
            return out;
        };
        var ths0 = tbl.tHead.rows[0].cells, c0 = 0;   /* the first text column */
        while (c0 < ths0.length - 1 && ths0[c0].className.indexOf('num') >= 0) c0++;
        var names = function () { return col(c0).map(function (td) { return td.textContent; }); };
        var b = names().join('|');
        tbl.tHead.rows[0].cells[c0].click();
        var a1 = names();
        var asc = a1.every(function (x, i) { return !i || a1[i - 1].localeCompare(x) <= 0; });
        var ths = tbl.tHead.rows[0].cells, nc = 1;
        while (nc < ths.length - 1 && ths[nc].className.indexOf('num') < 0) nc++;
        tbl.tHead.rows[0].cells[nc].click();   /* a number column: largest first */
        var v = col(nc).map(function (td) { return +td.title; });
        var desc = v.every(function (x, i) { return !i || v[i - 1] >= x; });
        check('sort reorders rows', a1.length < 2 || a1.join('|') !== b || v.join('|') !== b);
        check('sort by name is ascending', asc);
        check('sort by number is descending', desc);
    }
    var lanes = document.querySelectorAll('#mp-timeline-lanes svg');
    if (document.getElementById('mp-job')) {   /* a job: its tables, timelines, and a rank opened on demand */
        var ranks = document.getElementById('mp-ranks');
        check('ranks table has every rank', !!ranks && ranks.tBodies[0].rows.length === D.ranks.length);
        var js = document.getElementById('mp-job-steps');
        check('steps table names the critical rank', !!js && js.tBodies[0].rows.length === D.job.steps.length &&
            D.job.steps.every(function (x, k) { return x.critical_rank == null || js.tBodies[0].rows[k].cells[2].textContent === String(x.critical_rank); }));
        check('stragglers listed', !!document.getElementById('mp-stragglers') &&
            document.querySelectorAll('#mp-stragglers li').length === D.job.stragglers.length);
        check('one timeline per rank (up to 32)', lanes.length === Math.min(32, D.ranks.length));
        var waits = D.ranks.some(function (r) { return (r.collectives || []).some(function (c) { return c.wait_s > 0; }); });
        check('collectives and waits drawn', document.querySelectorAll('#mp-timeline-lanes rect.coll').length > 0 &&
            (!waits || document.querySelectorAll('#mp-timeline-lanes rect.wait').length > 0));
        check('page titled by the job', /a job of \d+ ranks/.test(document.getElementById('mp-title').textContent));
        /* issue 31 item 9, at the width html_check.py opens it (1400 px): the
         * ranks table's cause column on screen (no sideways scroll), every
         * cause cell of both tables shown whole, the idle causes' colours
         * far apart (no two within 80 of each other in RGB; the two crimsons were 27) */
        var rbox = ranks && ranks.parentNode;
        check('ranks table fits the page (cause on screen)', !!rbox && rbox.scrollWidth <= rbox.clientWidth + 1);
        var cut = [ranks, js].some(function (t) {
            return !!t && Array.prototype.some.call(t.tBodies[0].rows, function (row) {
                var c = row.cells[row.cells.length - 1];
                return c.scrollWidth > c.clientWidth + 1;
            });
        });
        check('causes shown whole', !cut);
        var rgb = Object.keys(CAUSE_COLORS).map(function (k) {
            var h = CAUSE_COLORS[k];
            return [parseInt(h.slice(1, 3), 16), parseInt(h.slice(3, 5), 16), parseInt(h.slice(5, 7), 16)];
        });
        var near = rgb.some(function (a, i) {
            return rgb.some(function (b, j) {
                return j > i && Math.hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]) < 80;
            });
        });
        check('idle cause colours distinct', !near);
        var last = document.getElementById('mp-rank-' + (D.ranks.length - 1));
        if (last) {
            last.open = true;
            last.dispatchEvent(new Event('toggle'));
            check('a rank renders when opened', last.querySelectorAll('section').length > 2);
        }
    }
    if (D && D.formulas) {   /* --formula: the model's formulas, and one per module in the tree */
        var ft = document.getElementById('mp-formulas-table');
        check('formulas shown', !!ft && ft.rows.length >= 7 && /\u00b7/.test(ft.rows[1].cells[1].textContent) &&
            ft.rows[1].cells[1].textContent === formulaText(D.formulas, 'macs'));
    }
    if (D && D.total && ['macs', 'flops', 'activation_peak_bytes'].some(function (k) { return D.total[k] === null; })) {
        /* unknown costs: every such card "?" with its reason, none reads 0;
         * the tree's cells of unknown figures "?" too */
        var bad = [];
        Array.prototype.forEach.call(document.querySelectorAll('#mp-totals .card'), function (c) {
            var k = c.getAttribute('data-key'), v = c.lastChild.textContent;
            if (/^0(\s|$)/.test(v) && (!k || D.total[k] === null)) bad.push(c.firstChild.textContent + ' reads ' + v);
            if (k && D.total[k] === null && (!/^\?/.test(v) || !c.title)) bad.push(c.firstChild.textContent + ' reads ' + v);
        });
        var root = document.querySelector('#mp-tree tbody tr');
        if (root && D.modules[0].macs === null) {
            var ths = document.querySelectorAll('#mp-tree thead th');
            Array.prototype.forEach.call(ths, function (th, i) {
                if (th.getAttribute('data-col') === 'macs' && !/^\?/.test(root.cells[i].textContent)) bad.push('the root\'s MACs cell reads ' + root.cells[i].textContent);
            });
        }
        check('unknown figures: "?" with the reason on hover, no 0 card' + (bad.length ? ' (' + bad.join('; ') + ')' : ''), !bad.length);
    }
    if (OPTS.byModuleOp && D && D.modules && D.modules.length) {   /* --by-module-op: its table */
        var mo = document.getElementById('mp-module-ops');
        var nops = OPTS.opTop < 0 || OPTS.opTop > D.ops.length ? D.ops.length : OPTS.opTop;
        var want = D.modules.filter(function (m) { return OPTS.depth < 0 || m.depth <= OPTS.depth; }).length;
        var r0 = mo && mo.tBodies[0].rows[0];
        check('by-module-op table: a row per module to --depth, --op-top op columns', !!mo && mo.tBodies[0].rows.length === want &&
            mo.tHead.rows[0].cells.length === 3 + nops + (nops < D.ops.length ? 1 : 0) + (D.run ? 1 : 0) &&
            !!r0 && r0.cells[2].textContent === si(D.modules[0].flops));
    }
    check('no console errors', errors.length === 0);
    var res = el('pre', { id: 'mp-selftest', text: out.join('\n') + '\nrender_ms ' + RENDER_MS.toFixed(1) +
        '\nload_ms ' + LOAD_MS.toFixed(1) });
    document.body.appendChild(res);
}

var main = document.getElementById('mp-main');
var RENDER_MS = 0, LOAD_MS = 0;
var D = null, OPTS = { byModuleOp: false, opTop: 5, depth: -1 };
try {
    var node = document.getElementById('mp-data');
    if (node.hasAttribute('data-by-module-op')) OPTS = { byModuleOp: true,
        opTop: +node.getAttribute('data-op-top'), depth: +node.getAttribute('data-depth') };
    D = JSON.parse(node.textContent);
    node.textContent = '';   /* the parsed copy is enough */
    main.textContent = '';
    if (node.getAttribute('data-kind') === 'trace') trace(D); else profile(D);
    RENDER_MS = performance.now() - T0;
    LOAD_MS = performance.now();   /* since navigation start: parse and render */
    document.body.setAttribute('data-render-ms', RENDER_MS.toFixed(1));
} catch (e) {
    errors.push('render: ' + (e && e.stack || e));
    showErrors();
}
if (location.hash === '#selftest') selftest();
})();
