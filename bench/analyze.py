#!/usr/bin/python3
"""Turn the raw results of scripts/bench.sh into figures, tables and charts.

Usage: analyze.py --results DIR --jobs N --rate R --burst B [--docs DOCS_DIR] [--quick]

Reads DIR/manifest.jsonl (one line per run, written by scripts/bench.sh), the
request logs of `stagger serve` it names, DIR/machine.txt, DIR/versions.txt,
DIR/notes.txt and DIR/primitives/*.txt. Writes DIR/results.json,
DIR/BENCHMARKS.md and DIR/bench/*.svg, and with --docs the same Markdown to
DOCS_DIR/BENCHMARKS.md and the charts to DOCS_DIR/bench/. Prints the tables.

Every goodput figure comes from the server's request log (one line per
request: arrival in microseconds since the server started, path, status),
never from what a client says about itself. Standard library only: the
charts are SVG written as text.
"""
import argparse
import json
import math
import os
import re
import statistics
import sys

CLIENTS = {
    "stagger-rate": "stagger batch, rate given",
    "stagger-adaptive": "stagger batch, adaptive",
    "curl": "curl --retry 6 --parallel",
    "python": "Python requests + urllib3 Retry",
    "node": "Node got",
    "go": "Go go-retryablehttp",
    "naive": "naive: fixed 1 s sleep",
}
ORDER = list(CLIENTS)
COLORS = {
    "stagger-rate": "#0072B2",
    "stagger-adaptive": "#56B4E9",
    "curl": "#E69F00",
    "python": "#009E73",
    "node": "#CC79A7",
    "go": "#D55E00",
    "naive": "#555555",
}
VARIANTS = {
    "seconds": "Retry-After: seconds",
    "date": "Retry-After: HTTP-date",
    "none": "no Retry-After",
    "outage": "outage 5 s at t=5 s",
}
VORDER = list(VARIANTS)
REFUSED = (429, 503)
SLOT_US = 100_000  # lockstep slot
WINDOW_S = 10  # seconds shown in 100 ms slots


def read_kv(path):
    out = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if "=" in line:
                    k, v = line.rstrip("\n").split("=", 1)
                    out[k] = v
    return out


def read_manifest(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    print("analyze: bad manifest line: %s" % line, file=sys.stderr)
    return rows


def client_ok(res, r):
    """Jobs the client itself says it finished (ok=N, or stagger's `done N`)."""
    if r.get("ok") is not None:
        return r["ok"]
    p = os.path.join(res, r.get("outfile", ""))
    if not r.get("outfile") or not os.path.exists(p):
        return None
    with open(p, errors="replace") as f:
        text = f.read()
    m = re.search(r"ok=(\d+)", text) or re.search(r"^\s*done\s+(\d+)", text, re.M)
    return int(m.group(1)) if m else None


def pct(values, p):
    """Percentile p (0..100) by linear interpolation; None for no values."""
    if not values:
        return None
    v = sorted(values)
    k = (len(v) - 1) * p / 100.0
    lo, hi = int(math.floor(k)), int(math.ceil(k))
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def outage_seconds(server_args):
    m = re.search(r"--outage\s+(\d+(?:\.\d+)?)(ms|s)?\+(\d+(?:\.\d+)?)(ms|s)?", server_args or "")
    if not m:
        return 0.0
    dur = float(m.group(3))
    return dur / 1000.0 if m.group(4) == "ms" else dur


def analyze_log(path, jobs, rate, burst):
    """Figures of one goodput run from the server's request log."""
    attempts = {}  # key -> [(t_us, status)]
    times = []
    statuses = {}
    with open(path) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            p = r.get("path", "")
            if not p.startswith("/track/"):
                continue
            key = p[len("/track/"):].split("?", 1)[0]
            t = int(r["t_us"])
            st = r["status"]
            attempts.setdefault(key, []).append((t, st))
            times.append(t)
            statuses[st] = statuses.get(st, 0) + 1
    calls = len(times)
    if not calls:
        return {"calls": 0}
    times.sort()
    t0, t1 = times[0], times[-1]
    completed = sum(1 for a in attempts.values() if any(s == 200 for _, s in a))

    # Most requests in any 1 s window (sliding, two pointers).
    peak, j = 0, 0
    for i, t in enumerate(times):
        while times[j] <= t - 1_000_000:
            j += 1
        peak = max(peak, i - j + 1)

    # Gap from a refusal to the same job's next try; retry arrival times.
    gaps, retries = [], []
    for a in attempts.values():
        a.sort()
        for (ta, sa), (tb, _) in zip(a, a[1:]):
            retries.append(tb)
            if sa in REFUSED:
                gaps.append((tb - ta) / 1000.0)
    # Lockstep: a retry whose 100 ms slot holds at least twice the slot's
    # share of the limit (rate * 0.1 s * 2) retries of all jobs.
    per_slot = {}
    for t in retries:
        per_slot[t // SLOT_US] = per_slot.get(t // SLOT_US, 0) + 1
    crowd = max(2, int(math.ceil(2 * rate * SLOT_US / 1e6)))
    in_crowd = sum(n for n in per_slot.values() if n >= crowd)

    # Offered and admitted requests per 1 s since the first request.
    nbins = int((t1 - t0) // 1_000_000) + 1
    offered = [0] * nbins
    admitted = [0] * nbins
    for a in attempts.values():
        for t, s in a:
            b = (t - t0) // 1_000_000
            offered[b] += 1
            if s == 200:
                admitted[b] += 1

    # The first WINDOW_S seconds in 100 ms slots: admitted and refused.
    fine_ok = [0] * int(WINDOW_S * 1e6 // SLOT_US)
    fine_no = [0] * len(fine_ok)
    for a in attempts.values():
        for t, s in a:
            b = (t - t0) // SLOT_US
            if b < len(fine_ok):
                if s == 200:
                    fine_ok[b] += 1
                else:
                    fine_no[b] += 1

    return {
        "calls": calls,
        "ok_100ms": fine_ok,
        "other_100ms": fine_no,
        "status_counts": {str(k): v for k, v in sorted(statuses.items(), key=lambda kv: str(kv[0]))},
        "n429": statuses.get(429, 0),
        "n503": statuses.get(503, 0),
        "share_429": statuses.get(429, 0) / calls,
        "share_503": statuses.get(503, 0) / calls,
        "completed": completed,
        "lost": jobs - completed,
        "first_s": t0 / 1e6,
        "completion_s": (t1 - t0) / 1e6,
        "calls_per_job": calls / jobs,
        "peak_1s": peak,
        "retries": len(retries),
        "gap_ms_median": pct(gaps, 50),
        "gap_ms_p10": pct(gaps, 10),
        "gap_ms_p90": pct(gaps, 90),
        "lockstep_share": (in_crowd / len(retries)) if retries else 0.0,
        "lockstep_crowd": crowd,
        "offered_per_s": offered,
        "admitted_per_s": admitted,
    }


# ------------------------------------------------------------------ SVG ----
def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def nice_ticks(vmax, n=5):
    if vmax <= 0:
        return [0, 1], 1
    raw = vmax / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    top = step * math.ceil(vmax / step - 1e-9)
    ticks, v = [], 0.0
    while v <= top + step / 2:
        ticks.append(round(v, 10))
        v += step
    return ticks, top


def fmt_tick(v):
    return ("%d" % v) if abs(v - round(v)) < 1e-9 else ("%g" % v)


def svg_frame(w, h, title, subtitle=""):
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
           'font-family="DejaVu Sans, Helvetica, Arial, sans-serif">' % (w, h, w, h),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="24" font-size="16" font-weight="bold" text-anchor="middle">%s</text>'
           % (w // 2, esc(title))]
    if subtitle:
        out.append('<text x="%d" y="42" font-size="11" fill="#444" text-anchor="middle">%s</text>'
                   % (w // 2, esc(subtitle)))
    return out


def svg_axes(out, x0, y0, pw, ph, ticks, top, ylabel, xlabel):
    for t in ticks:
        y = y0 + ph - t / top * ph
        out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>' % (x0, y, x0 + pw, y))
        out.append('<text x="%.1f" y="%.1f" font-size="11" text-anchor="end">%s</text>'
                   % (x0 - 6, y + 4, fmt_tick(t)))
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (x0, y0, x0, y0 + ph))
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (x0, y0 + ph, x0 + pw, y0 + ph))
    out.append('<text transform="translate(%d,%d) rotate(-90)" font-size="12" text-anchor="middle">%s</text>'
               % (x0 - 44, y0 + ph // 2, esc(ylabel)))
    if xlabel:
        out.append('<text x="%d" y="%d" font-size="12" text-anchor="middle">%s</text>'
                   % (x0 + pw // 2, y0 + ph + 42, esc(xlabel)))


def svg_legend(out, x, y, items):
    for i, (label, color, dashed) in enumerate(items):
        yy = y + i * 20
        if dashed:
            out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2" '
                       'stroke-dasharray="5,4"/>' % (x, yy + 6, x + 16, yy + 6, color))
        else:
            out.append('<rect x="%d" y="%d" width="16" height="12" fill="%s"/>' % (x, yy, color))
        out.append('<text x="%d" y="%d" font-size="12">%s</text>' % (x + 22, yy + 10, esc(label)))


def grouped_bars(title, subtitle, ylabel, groups, clients, value, ref=None, fmt="%.1f"):
    """groups: [(gid, label)]; value(gid, cid) -> (number or None, note)."""
    w, h = 1080, 460
    x0, y0, pw, ph = 70, 60, 660, 320
    vals = [value(g, c)[0] for g, _ in groups for c in clients]
    vmax = max([v for v in vals if v is not None] + [ref or 0, 1e-9])
    ticks, top = nice_ticks(vmax * 1.08)
    out = svg_frame(w, h, title, subtitle)
    svg_axes(out, x0, y0, pw, ph, ticks, top, ylabel, "")
    gw = pw / max(1, len(groups))
    bw = gw * 0.8 / max(1, len(clients))
    for gi, (g, glabel) in enumerate(groups):
        gx = x0 + gi * gw + gw * 0.1
        out.append('<text x="%.1f" y="%d" font-size="12" text-anchor="middle">%s</text>'
                   % (x0 + gi * gw + gw / 2, y0 + ph + 20, esc(glabel)))
        for ci, c in enumerate(clients):
            v, note = value(g, c)
            bx = gx + ci * bw
            if v is None:
                out.append('<text x="%.1f" y="%d" font-size="9" text-anchor="middle" fill="#888">%s</text>'
                           % (bx + bw / 2, y0 + ph - 4, esc(note or "n/a")))
                continue
            bh = v / top * ph
            out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"%s>'
                       '<title>%s, %s: %s</title></rect>'
                       % (bx + 1, y0 + ph - bh, bw - 2, bh, COLORS[c],
                          ' fill-opacity="0.45" stroke="%s" stroke-dasharray="3,2"' % COLORS[c]
                          if note else "", esc(CLIENTS[c]), esc(glabel), fmt % v))
            lab = (fmt % v) + (" timed out" if note == "timeout" else (" (%s)" % note) if note else "")
            if bh > ph * 0.55:  # tall bar: the label inside, reading down from its top
                out.append('<text transform="translate(%.1f,%.1f) rotate(-90)" font-size="10" '
                           'text-anchor="end" fill="%s">%s</text>'
                           % (bx + bw / 2 + 3.5, y0 + ph - bh + 4, "black" if note else "white", esc(lab)))
            else:
                out.append('<text transform="translate(%.1f,%.1f) rotate(-90)" font-size="10">%s</text>'
                           % (bx + bw / 2 + 3.5, y0 + ph - bh - 4, esc(lab)))
    items = [(CLIENTS[c], COLORS[c], False) for c in clients]
    if ref is not None:
        y = y0 + ph - ref / top * ph
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black" stroke-width="1.5" '
                   'stroke-dasharray="6,4"/>' % (x0, y, x0 + pw, y))
        items.append(("ideal (%s)" % fmt_tick(ref), "black", True))
    svg_legend(out, x0 + pw + 24, y0 + 10, items)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def line_chart(title, subtitle, ylabel, xlabel, series, hline=None, hlabel=""):
    """series: [(cid, [y per second])]."""
    w, h = 1080, 460
    x0, y0, pw, ph = 70, 60, 660, 320
    xmax = max([len(s) for _, s in series] + [1])
    ymax = max([max(s) for _, s in series if s] + [hline or 0, 1])
    clip = None
    if hline and ymax > 3 * hline:  # one stampede would flatten every other line
        clip = 3 * hline
        ymax = clip
    yt, ytop = nice_ticks(ymax * (1.0 if clip else 1.05))
    xt, xtop = nice_ticks(xmax, 8)
    out = svg_frame(w, h, title, subtitle)
    svg_axes(out, x0, y0, pw, ph, yt, ytop, ylabel, xlabel)
    notes = []
    for t in xt:
        x = x0 + t / xtop * pw
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black"/>' % (x, y0 + ph, x, y0 + ph + 4))
        out.append('<text x="%.1f" y="%d" font-size="11" text-anchor="middle">%s</text>'
                   % (x, y0 + ph + 18, fmt_tick(t)))
    items = []
    for cid, ys in series:
        pts = " ".join("%.1f,%.1f" % (x0 + (i + 0.5) / xtop * pw,
                                      y0 + ph - min(y, clip or y) / ytop * ph)
                       for i, y in enumerate(ys))
        out.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="1.8" '
                   'stroke-linejoin="round"/>' % (pts, COLORS[cid]))
        if clip and ys and max(ys) > clip:
            notes.append("%s: off the scale, peak %s/s" % (CLIENTS[cid], fmt_tick(max(ys))))
        items.append((CLIENTS[cid], COLORS[cid], False))
    if hline is not None:
        y = y0 + ph - hline / ytop * ph
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black" stroke-width="1.5" '
                   'stroke-dasharray="6,4"/>' % (x0, y, x0 + pw, y))
        items.append((hlabel, "black", True))
    for i, n in enumerate(notes):
        out.append('<text x="%d" y="%d" font-size="11" text-anchor="end">%s</text>'
                   % (x0 + pw - 6, y0 + 16 + 14 * i, esc(n)))
    svg_legend(out, x0 + pw + 24, y0 + 10, items)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def slot_panels(title, subtitle, panels, rate):
    """panels: [(cid, ok per slot, other per slot)]: one row of bars per client."""
    w, row, x0, pw = 1040, 62, 250, 740
    h = 70 + row * len(panels) + 50
    out = svg_frame(w, h, title, subtitle)
    nslots = max([len(p[1]) for p in panels] + [1])
    ymax = max([a + b for _, oks, nos in panels for a, b in zip(oks, nos)] + [1])
    share = rate * SLOT_US / 1e6
    cap = 8 * share  # one stampede would flatten every other panel
    ytop = nice_ticks(min(ymax, cap))[1]
    bw = pw / nslots
    for i, (cid, oks, nos) in enumerate(panels):
        top = 60 + i * row
        ph = row - 14
        base = top + ph
        out.append('<text x="%d" y="%d" font-size="12" text-anchor="end" fill="%s">%s</text>'
                   % (x0 - 40, top + ph // 2 + 4, COLORS[cid], esc(CLIENTS[cid])))
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (x0, base, x0 + pw, base))
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (x0, top, x0, base))
        out.append('<text x="%d" y="%d" font-size="9" text-anchor="end">%s</text>' % (x0 - 4, top + 8, fmt_tick(ytop)))
        out.append('<text x="%d" y="%d" font-size="9" text-anchor="end">0</text>' % (x0 - 4, base))
        # the limit's share of one slot
        ly = base - rate * SLOT_US / 1e6 / ytop * ph
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black" stroke-width="0.8" '
                   'stroke-dasharray="4,3"/>' % (x0, ly, x0 + pw, ly))
        peak = max([a + b for a, b in zip(oks, nos)] + [0])
        if peak > ytop:
            out.append('<text x="%d" y="%d" font-size="10" text-anchor="end">bars cut at %s; '
                       'peak %d per 100 ms</text>' % (x0 + pw, top + 6, fmt_tick(ytop), peak))
        for j, (a, b) in enumerate(zip(oks, nos)):
            x = x0 + j * bw
            if a + b > ytop:  # scale down to the cap, keeping the split
                a, b = a * ytop / (a + b), b * ytop / (a + b)
            ha, hb = a / ytop * ph, b / ytop * ph
            if a:
                out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>'
                           % (x, base - ha, max(bw - 0.6, 0.5), ha, COLORS[cid]))
            if b:
                out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#d62728" fill-opacity="0.55"/>'
                           % (x, base - ha - hb, max(bw - 0.6, 0.5), hb))
    axis_y = 60 + row * len(panels) - 10
    for t in range(0, int(nslots * SLOT_US / 1e6) + 1):
        x = x0 + t * 1e6 / SLOT_US * bw
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black"/>' % (x, axis_y, x, axis_y + 4))
        out.append('<text x="%.1f" y="%d" font-size="11" text-anchor="middle">%d</text>' % (x, axis_y + 16, t))
    out.append('<text x="%d" y="%d" font-size="12" text-anchor="middle">seconds since the client\'s first '
               'request (bars: requests per 100 ms; client colour = answered 200, red = refused or failed; '
               'dashed: the limit\'s share of 100 ms)</text>' % (x0 + pw // 2 - 100, axis_y + 36))
    out.append("</svg>")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------- tables ----
def f1(v, nd=1):
    return "–" if v is None else ("%.*f" % (nd, v))


def md_table(header, rows):
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" if i == 0 else "--:" for i in range(len(header))) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(str(x) for x in r) + " |")
    return "\n".join(lines)


def goodput_table(runs, variant, ideal):
    header = ["client", "completion s", "÷ ideal", "calls/job", "429 %"]
    if variant == "outage":
        header.append("503 %")
    header += ["peak offered/s", "jobs not completed", "gap after refusal ms: p50 (p10–p90)", "lockstep %"]
    rows = []
    for c in ORDER:
        r = runs.get((variant, c))
        if r is None:
            continue
        if r.get("status") != "ran":
            rows.append(["%s" % CLIENTS[c], "not run: %s" % r.get("why", "missing")] +
                        [""] * (len(header) - 2))
            continue
        m = r["m"]
        if not m.get("calls"):
            rows.append([CLIENTS[c], "no requests (exit %s)" % r.get("exit")] + [""] * (len(header) - 2))
            continue
        to = r.get("timeout")
        comp = f1(m["completion_s"]) + (" (timed out)" if to else "")
        ratio = f1(m["completion_s"] / ideal, 2) + ("+" if to else "")
        row = [CLIENTS[c], comp, ratio, f1(m["calls_per_job"], 2), f1(100 * m["share_429"])]
        if variant == "outage":
            row.append(f1(100 * m["share_503"]))
        gap = "–" if m["gap_ms_median"] is None else "%.0f (%.0f–%.0f)" % (
            m["gap_ms_median"], m["gap_ms_p10"], m["gap_ms_p90"])
        row += [m["peak_1s"], m["lost"], gap, f1(100 * m["lockstep_share"])]
        rows.append(row)
    return md_table(header, rows)


def verdict(runs, variants, ideals):
    """Is stagger first on completion ÷ ideal and on 429 share, no job lost?"""
    lines, all_ok = [], True
    for v in variants:
        ran = {c: runs[(v, c)]["m"] for c in ORDER
               if (v, c) in runs and runs[(v, c)].get("status") == "ran"
               and runs[(v, c)]["m"].get("calls")}
        st = {c: m for c, m in ran.items() if c in ("stagger-rate", "stagger-adaptive")}
        peers = {c: m for c, m in ran.items() if not c.startswith("stagger")}
        if not st:
            lines.append("- %s: stagger batch did not run — **not met**" % VARIANTS[v])
            all_ok = False
            continue

        def comp(c):
            # A run that timed out or left jobs undone did not complete: it
            # ranks after every run that did, stagger's and the peers' alike.
            m = ran[c]
            if runs[(v, c)].get("timeout") or m["lost"]:
                return float("inf")
            return m["completion_s"] / ideals[v]

        def desc(c):
            m = ran[c]
            t = "%s: %s" % (CLIENTS[c], f1(m["completion_s"] / ideals[v], 2))
            if runs[(v, c)].get("timeout"):
                return t + "+ (timed out, %d jobs not completed)" % m["lost"]
            if m["lost"]:
                return t + " (%d jobs not completed)" % m["lost"]
            return t

        best_s = min(st, key=comp)
        best_s429 = min(st, key=lambda c: ran[c]["share_429"])
        ok_time = comp(best_s) < float("inf") and all(comp(best_s) < comp(p) for p in peers)
        ok_429 = all(ran[best_s429]["share_429"] < ran[p]["share_429"] for p in peers)
        ok_lost = all(comp(c) < float("inf") for c in st)
        ok = ok_time and ok_429 and ok_lost
        all_ok &= ok
        bp_t = min(peers, key=comp) if peers else None
        bp_4 = min(peers, key=lambda c: ran[c]["share_429"]) if peers else None
        fastest = min(peers, key=lambda c: ran[c]["completion_s"]) if peers else None
        lines.append(
            "- %s — completion ÷ ideal: best stagger run %s; best peer that completed every job: %s%s → %s. "
            "429 share: stagger %s%% (%s); best peer %s%% (%s) → %s. Every stagger run completed every "
            "job: %s. **%s**" % (
                VARIANTS[v], desc(best_s),
                desc(bp_t) if bp_t and comp(bp_t) < float("inf") else "none",
                "" if not fastest or fastest == bp_t else " (quickest to stop: %s)" % desc(fastest),
                "first" if ok_time else "not first",
                f1(100 * ran[best_s429]["share_429"]), CLIENTS[best_s429],
                f1(100 * ran[bp_4]["share_429"]) if bp_4 else "–", CLIENTS[bp_4] if bp_4 else "none ran",
                "first" if ok_429 else "not first",
                "yes" if ok_lost else "no (%s)" % "; ".join(desc(c) for c in st if comp(c) == float("inf")),
                "met" if ok else "not met"))
    return all_ok, lines


def kv_line(res, name, prefix):
    """The KEY=NUMBER words of the last line of primitives/NAME that starts with
    PREFIX (the scripts' machine-readable summary), as floats (None when a value
    is not a number); None when the file or the line is missing."""
    lines = read_primitive(res, name)
    found = [l for l in lines or () if l.startswith(prefix)]
    return kv_words(found[-1][len(prefix):]) if found else None


def kv_words(text):
    """The KEY=NUMBER words of text as floats (None when a value is not a number)."""
    out = {}
    for w in text.split():
        if "=" not in w:
            continue
        k, v = w.split("=", 1)
        try:
            out[k] = float(v)
        except ValueError:
            out[k] = None
    return out


def read_primitive(res, name):
    path = os.path.join(res, "primitives", name)
    if not os.path.exists(path):
        return None
    with open(path, errors="replace") as f:
        return f.read().splitlines()


def batch_goal1(res):
    """Goal 1 from bench/bench_batch.sh's "goal1_N:" lines (primitives/bench_batch.txt):
    [(N, {client_wall|cpu|done: median, runs: turns})] by size, [] when it did not run.
    Medians of turns taken in the same run: one run of a 0.3 s client moves by ~15%
    on this machine, more than the margin the goal asks about."""
    out = []
    for l in read_primitive(res, "bench_batch.txt") or ():
        m = re.match(r"goal1_(\d+):", l)
        if m:
            out.append((int(m.group(1)), kv_words(l[m.end():])))
    return sorted(out)


def mem_goal2(res):
    """Goal 2's rows from bench/bench_mem.sh's "goal2:" line (primitives/bench_mem.txt),
    or None when it did not run. In flight = accepted, waiting or on the wire
    (docs/ARCHITECTURE.md "Memory"); bytes per request."""
    kv = kv_line(res, "bench_mem.txt", "goal2:")
    if not kv or kv.get("batch_waiting") is None:
        return None
    num = kv.get
    n = "%d" % kv["n"] if kv.get("n") is not None else "?"
    kb = lambda k: "%.1f KB" % (num(k) / 1024.0) if num(k) is not None else "–"
    wait = num("batch_waiting")
    rows = [["2. ≤ 4 KB per request in flight at %s, accepted and waiting for admission" % n,
             "batch -j %s: %s, engine: %s" % (n, kb("batch_waiting"), kb("engine_limiter")),
             "curl --parallel %s (at 300, all on the wire), go-retryablehttp %s, got %s, "
             "requests %s" % (kb("curl_wire"), kb("go_wire"), kb("node_wire"), kb("python_wire")),
             "–", "met" if wait <= 4096 else "not met"]]
    # On the wire each request holds a libcurl easy handle, a connection and
    # libcurl's buffers: the floor is libcurl's, measured alone beside stagger.
    wire = max(num("batch_wire") or 0, num("engine_wire") or 0)
    floor = num("floor_1k_wire")
    if wire:
        why = ""
        if wire > 4096 and floor and floor > 4096:
            why = " (libcurl alone is %s per transfer with its smallest buffer)" % kb("floor_1k_wire")
        rows.append(["2. ≤ 4 KB per request in flight at %s, all on the wire at once" % n,
                     "batch %s, engine %s, of which stagger's own heap %s" % (
                         kb("batch_wire"), kb("engine_wire"), kb("engine_own_heap")),
                     "libcurl alone %s (1 KiB buffer: %s); curl --parallel %s (at 300)" % (
                         kb("floor_wire"), kb("floor_1k_wire"), kb("curl_wire")),
                     "–", ("met" if wire <= 4096 else "not met") + why])
    out, db = num("body_out_mib"), num("body_db_mib")
    if out is not None and db is not None:
        big = (kv.get("big") or 0) / 1e6
        rows.append(["2. 30 × %.0f MB bodies: peak RSS within 64 MB of the small-body run" % big,
                     "--out: %+.1f MiB, database: %+.1f MiB" % (out, db),
                     "30 × %.0f MB bodies, same run" % ((kv.get("small") or 0) / 1e6),
                     "–", "met" if max(out, db) < 61.0 else "not met"])
    return rows


def dialects_section(res):
    """Issue #15: per persona of bench/bench_dialects.sh, stagger batch's completion
    over the ideal its quotas allow (goal <= 1.10), its early retries (goal 0) and
    jobs not completed (goal 0), beside the peers of the same run."""
    lines = read_primitive(res, "bench_dialects.txt")
    if lines is None:
        return []
    table = {}
    for l in lines:
        cells = [c.strip() for c in l.strip().strip("|").split("|")]
        if len(cells) != 9 or cells[0] in ("persona", "") or cells[0].startswith("-"):
            continue
        table.setdefault(cells[0], {})[cells[1]] = cells
    md = ["## Issue #15 goals: every dialect, paced to its quotas", "",
          "From bench/bench_dialects.sh in this run (its whole table is in section 3): per persona of "
          "`stagger serve --dialect NAME`, stagger batch's completion over the ideal the persona's quotas "
          "allow (goal ≤ 1.10×), its early retries (requests before the time the server's last answer "
          "told that client to wait: goal 0) and jobs not completed (goal 0); the peers of the same run beside it.", ""]
    rows, all_ok = [], True
    for persona, by in table.items():
        st = by.get("stagger batch")
        if not st:
            continue
        try:
            ratio, early, lost = float(st[4]), int(st[7]), int(st[8])
        except ValueError:
            continue
        timed = "timed out" in st[2]
        ok = ratio <= 1.10 and early == 0 and lost == 0 and not timed
        all_ok = all_ok and ok
        peers = "; ".join("%s %s× (%s early, %s not completed)" % (c, v[4], v[7], v[8])
                          for c, v in by.items() if c != "stagger batch")
        rows.append([persona, "%.2f× (%s, ideal %s s)" % (ratio, st[2].replace(" (timed out)", " s, timed out")
                                                          if timed else st[2] + " s", st[3]), str(early), str(lost),
                     peers or "–", "met" if ok else "not met"])
    if not rows:
        return []
    md.append(md_table(["persona", "stagger ÷ ideal", "early retries", "jobs not completed",
                        "peers (same run)", "verdict"], rows))
    md.append("")
    md.append("All personas: **%s**." % ("met" if all_ok else "not met"))
    md.append("")
    return md


def ai_section(res):
    """Issue #31's goals from bench/bench_ai.sh's rows in this run: the OpenAI tokens
    persona through the proxy and through two replicas <= 1.10x the ideal, <= 2% of the
    calls refused at the server, 0 errors seen by the program; the Anthropic persona
    with overloads: 0 errors seen. The peers of the same run beside them."""
    lines = read_primitive(res, "bench_ai.txt")
    if lines is None:
        return []
    table = {}
    for l in lines:
        cells = [c.strip() for c in l.strip().strip("|").split("|")]
        if len(cells) != 8 or cells[0] in ("persona", "") or cells[0].startswith("-"):
            continue
        table.setdefault(cells[0], {})[cells[1]] = cells
    md = ["## Issue #31 goals: the LLM APIs as they meter", "",
          "From bench/bench_ai.sh in this run (its whole table is in section 3): an unchanged SDK "
          "program (npm's openai and @anthropic-ai/sdk, maxRetries 0) against `stagger serve`'s "
          "OpenAI tokens-per-minute persona and its overloaded Anthropic persona.", ""]
    rows, all_ok = [], True

    def goal(persona, client, label, tokens):
        nonlocal all_ok
        c = table.get(persona, {}).get(client)
        if not c:
            rows.append([label, "not measured", "–", "–", "not measured"])
            all_ok = False
            return
        try:
            refused, failed = float(c[5]), int(c[6])
            ratio = float(c[4]) if c[4] not in ("–", "") else None
        except ValueError:
            rows.append([label, "unreadable row", "–", "–", "not measured"])
            all_ok = False
            return
        ok = failed == 0 and (not tokens or (ratio is not None and ratio <= 1.10 and refused <= 2.0))
        all_ok = all_ok and ok
        peers = "; ".join("%s: %s× ideal, %s%% refused, %s failed" % (k, v[4], v[5], v[6])
                          for k, v in table.get(persona, {}).items()
                          if not k.startswith("stagger") and not k.startswith("2 stagger"))
        rows.append([label, "%s× ideal, %s%% refused, %d failed" % (c[4], c[5], failed)
                     if tokens else "%d failed, %s%% refused at the server" % (failed, c[5]),
                     peers or "–", "≤ 1.10×, ≤ 2%, 0" if tokens else "0", "met" if ok else "not met"])

    goal("openai", "stagger proxy", "OpenAI tokens persona, one proxy", True)
    goal("openai", "2 stagger proxy replicas (Redis)", "OpenAI tokens persona, two replicas", True)
    goal("anthropic", "stagger proxy", "Anthropic with overloads: errors seen", False)
    goal("anthropic", "stagger proxy, streamed", "Anthropic with overloads, streamed: errors seen", False)
    md.append(md_table(["goal", "stagger", "peers (same run)", "goal", "verdict"], rows))
    md.append("")
    md.append("All: **%s**." % ("met" if all_ok else "not met"))
    md.append("")
    return md


def prio_section(res):
    """Issue #32's rows from bench/bench_prio.sh in this run: across processes through one
    Redis key, an interactive process beside a saturating batch and three tenants 1:1:2,
    each by class/tenant beside first come, first served (today's shared limiter)."""
    lines = read_primitive(res, "bench_prio.txt")
    if lines is None:
        return []
    rows = {}
    for l in lines:
        head, sep, rest = l.partition(":")
        if sep and head.startswith("prio_"):
            rows[head] = kv_words(rest)
    md = ["## Issue #32: classes and tenants across processes", "",
          "From bench/bench_prio.sh in this run (bench/prio_bench.c): forked processes, each with "
          "its own Redis limiter, sharing one key; every process calling the plain acquire "
          "(first come, first served: today's behaviour) beside the same processes calling "
          "acquire_class. The admission wait includes the Redis round trip; the bound's worst "
          "excess is over every window, with twice the longest round trip as slack (<= 0: held).",
          ""]

    def f(name, key, fmt="%.1f"):
        v = rows.get(name, {}).get(key)
        return fmt % v if v is not None else "not measured"

    inter = [["interactive admission wait p50 (ms)", f("prio_inter_fcfs", "p50_ms"),
              f("prio_inter_class", "p50_ms"), "–"],
             ["interactive admission wait p99 (ms)", f("prio_inter_fcfs", "p99_ms"),
              f("prio_inter_class", "p99_ms"), "<= 2 intervals (40 ms) + round trip"],
             ["batch: % of what the interactive left", f("prio_inter_fcfs", "batch_pct"),
              f("prio_inter_class", "batch_pct"), ">= 90"],
             ["bound: worst excess (sends)", f("prio_inter_fcfs", "excess", "%.2f"),
              f("prio_inter_class", "excess", "%.2f"), "<= 0"]]
    md.append("An interactive process at 20% of a 50/s key (burst 5) beside two batch processes "
              "keeping 30 requests reserved:")
    md.append("")
    md.append(md_table(["", "first come, first served", "by class", "goal"], inter))
    md.append("")
    ten = [["tenant %s (weight %s): %% of admissions" % (t, w), f("prio_tenants_fcfs", t + "_pct"),
            f("prio_tenants_class", t + "_pct"), want]
           for t, w, want in (("a", 1, "25 ± 1.25"), ("b", 1, "25 ± 1.25"), ("c", 2, "50 ± 2.5"))]
    ten.append(["bound: worst excess (sends)", f("prio_tenants_fcfs", "excess", "%.2f"),
                f("prio_tenants_class", "excess", "%.2f"), "<= 0"])
    md.append("Three batch tenants 1:1:2, two processes each, on a 100/s key (burst 5):")
    md.append("")
    md.append(md_table(["", "first come, first served", "by tenant", "goal"], ten))
    md.append("")
    return md


def proxy_section(res):
    """Issue #16's benchmark goals from bench/bench_proxy.sh's rows in this run."""
    lines = read_primitive(res, "bench_proxy.txt")
    if lines is None:
        return []
    def row(label):
        for l in lines:
            if l.startswith(label):
                return l[len(label):].split()
        return None
    def num(v):
        m = re.match(r"[+-]?[0-9.]+", v or "")
        return float(m.group(0)) if m else None
    md = ["## Issue #16 goals: stagger proxy", "",
          "From bench/bench_proxy.sh in this run (its whole output is in section 3): bench/peers/naive "
          "(50 workers, fixed 1 s sleep on a 429), unchanged, direct and through the proxy, 2000 jobs "
          "against `stagger serve --rate 100 --burst 20`; then wrk against an unlimited server.", ""]
    rows = []
    direct = row("naive client, direct")
    for label in ("naive client via stagger proxy (adaptive)",
                  "naive client via stagger proxy --rate 100 --burst 20"):
        r = row(label)
        if not r or len(r) < 6:
            continue
        ratio, r429, lost = num(r[2]), num(r[4]), num(r[5])
        base = ("direct: %s× ideal, %s 429s, %s lost" % (direct[2].rstrip("x"), direct[4], direct[5])
                if direct and len(direct) >= 6 else "–")
        ok = ratio is not None and ratio <= 1.10 and r429 is not None and r429 < 2.0 and lost == 0
        rows.append(["goodput, " + label.replace("naive client via ", ""),
                     "%s× ideal, %s 429s at the server, %d lost" % (r[2].rstrip("x"), r[4], lost or 0),
                     base, "≤ 1.10×, < 2%, 0", "met" if ok else "not met"])
    d, p = row("wrk direct"), row("wrk through stagger proxy --rate 0")
    ratio = row("proxy / direct, added p50")
    if d and p and ratio:
        rv = num(ratio[0])
        ngx, ngx_ratio = row("wrk through nginx proxy_pass (peer, 1 worker)"), row("nginx / direct")
        peer = ("; nginx proxy_pass, a peer through the same two cores: %s req/s, %s direct"
                % (ngx[0], ngx_ratio[0]) if ngx and ngx_ratio else "")
        rows.append(["overhead: wrk -t2 -c30 req/s through the proxy ÷ direct",
                     "%s req/s (p50 %s)" % (p[0], p[1]),
                     "direct %s req/s (p50 %s)%s" % (d[0], d[1], peer),
                     "≥ 0.5×", "%.2f×: %s" % (rv, "met" if rv is not None and rv >= 0.5 else "not met")])
    a1 = row("added p50, one connection")
    if a1:
        us = num(a1[0])
        rows.append(["added p50 latency, wrk -c1 (no queueing)", "%+.0f µs" % us,
                     "wrk -c1 direct", "≤ 200 µs", "met" if us is not None and us <= 200 else "not met"])
    for l in lines:
        if l.startswith("memory per open client connection:"):
            rows.append(["memory per open client connection", l.split(":", 1)[1].strip(), "–",
                         "reported", "reported"])
    if not rows:
        return []
    md.append(md_table(["goal", "through the proxy", "baseline (same run)", "goal", "verdict"], rows))
    md.append("")
    return md


def perf_section(res):
    """Issue #35: stagger beside the program people would compare it with, in the same
    run: the proxy beside nginx as a reverse proxy (bench_proxy.sh's goal35_proxy line:
    medians of alternating wrk turns, and each one's CPU per request), the durable
    batch beside curl --parallel (bench_batch.sh's goal1_N lines), and goodput with
    four naive client processes through the adaptive proxy."""
    rows = []
    kv = kv_line(res, "bench_proxy.txt", "goal35_proxy:")
    lines = read_primitive(res, "bench_proxy.txt") or []
    def cpu(k):
        return " (%.1f µs CPU a request)" % kv[k] if kv.get(k) else ""
    if kv:
        turns = "%d" % kv["turns"] if kv.get("turns") else "?"
        for c, sfx in (("30", ""), ("1", "1")):
            s, n = kv.get("stagger%s_rps" % sfx), kv.get("nginx%s_rps" % sfx)
            if not s:
                continue
            ratio = s / n if n else None
            h = kv.get("h2o%s_rps" % sfx)
            peer = "nginx proxy_pass: %.0f req/s%s" % (n, cpu("nginx%s_cpuus" % sfx)) if n else "–"
            if h:
                peer += "; h2o proxy.reverse: %.0f req/s%s, %.2f× nginx" % (
                    h, cpu("h2o%s_cpuus" % sfx), h / n if n else 0)
            rows.append(["1. proxy req/s ≥ 1.0× nginx, wrk -c%s (median of %s turns)" % (c, turns),
                         "%.0f req/s%s" % (s, cpu("stagger%s_cpuus" % sfx)),
                         peer,
                         "%.2f×" % ratio if ratio else "–",
                         "met" if ratio and ratio >= 1.0 else "not met"])
        # The floor: libcurl alone making the upstream half (bench_curl_cpu), plus
        # the other half's least cost, an HTTP server's own CPU answering the same
        # request (the direct server's, libmicrohttpd like the proxy's front).
        for c, sfx in (("30", ""), ("1", "1")):
            fc, dc, nc = (kv.get("curl%s_cpuus" % sfx), kv.get("direct%s_cpuus" % sfx),
                          kv.get("nginx%s_cpuus" % sfx))
            if not fc or not dc or not nc:
                continue
            floor = fc + dc
            rows.append(["1. the floor at -c%s: libcurl alone making the upstream half, plus a "
                         "server's own CPU for the client's half" % c,
                         "%.1f + %.1f = %.1f µs CPU a request" % (fc, dc, floor),
                         "nginx's whole proxied request: %.1f µs" % nc,
                         "CPU ≤ %.2f×" % (nc / floor),
                         "1.0× unreachable with libcurl" if floor > nc else "reachable"])
        d1, s1, n1 = kv.get("direct1_p50us"), kv.get("stagger1_p50us"), kv.get("nginx1_p50us")
        if d1 is not None and s1 is not None:
            added = s1 - d1
            rows.append(["1. added p50 at wrk -c1 ≤ 100 µs", "%+.0f µs" % added,
                         "nginx: %+.0f µs" % (n1 - d1) if n1 is not None else "–", "–",
                         "met" if added <= 100 else "not met"])
    def mem(prefix):
        for l in lines:
            if l.startswith(prefix):
                m = re.match(r"\s*(\d+) bytes", l[len(prefix):])
                return int(m.group(1)) if m else None
        return None
    ms, mn = mem("memory per open client connection:"), mem("memory per open client connection, nginx:")
    mh = mem("memory per open client connection, h2o:")
    if ms is not None:
        peer = "nginx: %.1f KB" % (mn / 1024.0) if mn is not None else "–"
        if mh is not None:
            peer += "; h2o: %.1f KB" % (mh / 1024.0)
        rows.append(["1. memory per idle client connection ≤ 8 KB", "%.1f KB" % (ms / 1024.0),
                     peer, "–",
                     "met" if ms <= 8192 else "not met"])
    for n, kvb in batch_goal1(res):
        cw = kvb.get("curl_wall")
        c1 = kvb.get("curl1_wall")
        # curl's fastest form beside the goal's peer (which writes a file per URL
        # and prints each status, as a batch that keeps its answers must).
        fastest = "; with every answer to one stdout: %.3f s" % c1 if c1 else ""
        for key, label in (("learned", "learned concurrency"), ("j30", "-j 30")):
            w = kvb.get(key + "_wall")
            if not w or not cw:
                continue
            cpu_s = kvb.get(key + "_cpu")
            rows.append(["2. durable batch ≥ 1.0× curl --parallel, %d keys, %s (median of %d turns)"
                         % (n, label, kvb.get("runs") or 0),
                         "%.3f s, CPU %.3f s" % (w, cpu_s or 0),
                         "curl --parallel --parallel-max 30: %.3f s, CPU %.3f s%s"
                         % (cw, kvb.get("curl_cpu") or 0, fastest),
                         "%.2f×" % (cw / w), "met" if cw / w >= 1.0 else "not met"])
        tw, j30 = kvb.get("two_wall"), kvb.get("j30_wall")
        if tw and cw and j30:
            # Not a goal: what a second network loop could give at most.
            rows.append(["2. the ceiling of a second network loop, %d keys: two batch processes, "
                         "half the keys and -j 15 each" % n,
                         "%.3f s, CPU %.3f s (%.2f× one process at -j 30)"
                         % (tw, kvb.get("two_cpu") or 0, j30 / tw),
                         "curl --parallel --parallel-max 30: %.3f s" % cw,
                         "%.2f×" % (cw / tw), "–"])
    g4 = next((l for l in lines if l.startswith("4 naive processes via stagger proxy (adaptive)")), None)
    direct = next((l for l in lines if l.startswith("naive client, direct")), None)
    if g4:
        w = g4[len("4 naive processes via stagger proxy (adaptive)"):].split()
        if len(w) >= 6:
            ratio = float(w[2].rstrip("x"))
            r429 = float(w[4].rstrip("%"))
            lost = int(w[5])
            dw = direct[len("naive client, direct"):].split() if direct else []
            span = (" (server's first to last request: %s ideal)" % w[6]) if len(w) >= 7 else ""
            rows.append(["3. goodput, 4 naive processes through the adaptive proxy ≤ 1.10× ideal, < 1% 429s",
                         "%.2f× ideal, %.1f%% 429s at the server, %d lost%s" % (ratio, r429, lost, span),
                         "one naive process direct: %s ideal, %s 429s" % (dw[2], dw[4]) if len(dw) >= 6 else "–",
                         "%.2f×" % ratio, "met" if ratio <= 1.10 and r429 < 1.0 and lost == 0 else "not met"])
    if not rows:
        return []
    return ["## Issue #35 goals: beside the peer people compare with", "",
            "Proxy: bench/bench_proxy.sh, stagger proxy --rate 0 -j 100 and nginx (proxy_pass, one "
            "worker, keep-alive upstream) in front of the same unlimited `stagger serve`, wrk turns "
            "alternating, medians; the CPU each spent per request beside (on a busy machine the "
            "steadier figure). Beside nginx, h2o (Debian's 2.2.5, proxy.reverse, one thread): "
            "the other peer, a proxy made like stagger's of an HTTP library's server and client "
            "on one event loop. The floor: bench/bench_curl_cpu.c, libcurl alone (no stagger code) "
            "making the same keep-alive GETs to the same server; the proxy's CPU a request "
            "cannot go below it plus the other half's, so when that sum passes nginx's whole "
            "request, neither can its requests/s reach nginx's on the same cores. "
            "Batch: bench/bench_batch.sh's unlimited part. Goodput: 2000 jobs "
            "against `stagger serve --rate 100 --burst 20`, a quarter each by 4 naive.py processes "
            "(50 workers, fixed 1 s sleep on a 429) at once.", "",
            md_table(["goal", "stagger", "peer (same run)", "ratio", "verdict"], rows), ""] + \
        profile_table(res)


# The layers of bench/perf_layers.py, grouped for the table: (label, the
# owners whose own code and libc calls it sums). Kernel time is its own row.
PROFILE_GROUPS = (
    ("libcurl (HTTP client library)", ("libcurl",)),
    ("libmicrohttpd (HTTP server library)", ("libmicrohttpd",)),
    ("SQLite", ("sqlite",)),
    ("stagger's own code", ("stagger",)),
    ("the program's own code (nginx, h2o, curl's tool)", ("nginx", "h2o", "curl")),
)


def profile_table(res):
    """Issue #35's "where the time goes": bench/bench_profile.sh's profile lines, the
    CPU of one request (one job) split by layer, each program beside its peers."""
    progs, keys = {}, "?"
    for l in read_primitive(res, "bench_profile.txt") or []:
        w = l.split()
        if len(w) >= 3 and w[0] == "profile":
            progs[w[1]] = kv_words(" ".join(w[2:]))
        elif len(w) == 2 and w[0] == "profile_keys":
            keys = w[1]
    cols = [(k, label) for k, label in (("stagger_proxy", "stagger proxy"), ("nginx", "nginx"),
                                        ("h2o", "h2o"), ("stagger_batch", "stagger batch"),
                                        ("curl_parallel", "curl --parallel")) if progs.get(k)]
    if not cols:
        return []

    def cell(v):
        return "%.1f" % v if v >= 0.05 else "–"
    rows = [["CPU per request (per job for the batch), µs"] +
            [cell(progs[k].get("cpu_us") or 0) for k, _ in cols]]
    kernel = [sum(v or 0 for n, v in progs[k].items() if n.startswith("kernel_via_")) for k, _ in cols]
    rows.append(["kernel: the system calls (sockets, epoll, the database's writes)"] +
                [cell(v) for v in kernel])
    for owner, via in (("libcurl", "of which libcurl's calls"), ("libmicrohttpd", "of which libmicrohttpd's calls"),
                       ("sqlite", "of which SQLite's calls")):
        if any(progs[k].get("kernel_via_" + owner) for k, _ in cols):
            rows.append(["— " + via] + [cell(progs[k].get("kernel_via_" + owner) or 0) for k, _ in cols])
    shown = list(kernel)  # what the rows below add up to, so far
    for label, owners in PROFILE_GROUPS:
        vals = [sum((progs[k].get(o) or 0) + (progs[k].get("libc_via_" + o) or 0) for o in owners)
                for k, _ in cols]
        shown = [a + b for a, b in zip(shown, vals)]
        if any(v >= 0.05 for v in vals):
            rows.append([label + ", with the libc it calls"] + [cell(v) for v in vals])
    rest = [(progs[k].get("cpu_us") or 0) - shown[i] for i, (k, _) in enumerate(cols)]
    if any(v >= 0.05 for v in rest):
        rows.append(["the rest: libc whose caller perf did not unwind, other libraries"] +
                    [cell(v) for v in rest])
    return ["Where the time goes (bench/bench_profile.sh in this run: perf's call-graph samples "
            "of each program at work, every sample charged to the layer that owns it, scaled to "
            "the CPU a request cost in an unsampled run beside; the proxies under wrk -c30, the "
            "batch and curl over %s keys):" % keys, "",
            md_table(["µs", *[label for _, label in cols]], rows), ""]


def goals_section(res, manifest, runs, ideals):
    """Issue #19: one row per goal, the baseline beside it, from this run."""
    md = ["## Issue #19 goals", "",
          "Each row: this run's figure for stagger and, beside it, the baseline it is measured "
          "against in the same run.", ""]
    rows = []
    over = {r["client"]: r for r in manifest if r.get("kind") == "overhead"}
    def wall_ratio(d, n):
        c, s_ = d.get("curl-parallel"), d.get("stagger-rate")
        if not c or not s_ or not c.get("wall_ms") or not s_.get("wall_ms"):
            return
        ok = client_ok(res, s_)
        r = c["wall_ms"] / float(s_["wall_ms"])
        rows.append(["1. durable batch ≥ 1.0× curl --parallel, %s keys" % n,
                     "stagger batch --rate 0: %.2f s (%s done)" % (s_["wall_ms"] / 1000.0, ok),
                     "curl --parallel --parallel-max 30: %.2f s" % (c["wall_ms"] / 1000.0),
                     "%.2f×" % r, "met" if r >= 1.0 else "not met"])
    turns = batch_goal1(res)
    for n, kv in turns:
        # -j 30 is the goal's "30 at a time"; the learned concurrency beside it
        c, j30, ln = kv.get("curl_wall"), kv.get("j30_wall"), kv.get("learned_wall")
        if not c or not j30:
            continue
        r = c / j30
        learned = " (learned concurrency: %.3f s, %.2f×)" % (ln, c / ln) if ln else ""
        rows.append(["1. durable batch ≥ 1.0× curl --parallel, %d keys (median of %d turns)"
                     % (n, kv.get("runs") or 0),
                     "stagger batch --rate 0 -j 30: %.3f s (%d done)%s" % (
                         j30, kv.get("j30_done") or 0, learned),
                     "curl --parallel --parallel-max 30: %.3f s (%d done)" % (c, kv.get("curl_done") or 0),
                     "%.2f×" % r,
                     "met" if r >= 1.0 and kv.get("j30_done") == n == kv.get("curl_done") else "not met"])
    if not turns:  # bench_batch did not run (BENCH_QUICK): the overhead section's single run
        wall_ratio(over, next((r.get("requests") for r in over.values() if r.get("requests")), "?"))
    rss = [r for r in manifest if r.get("kind") == "rss"]
    by = {}
    for r in rss:
        by.setdefault(r["client"], {})[r["inflight"]] = r
    def per_req(c):
        d = by.get(c, {})
        ns = sorted(d)
        if len(ns) < 2 or not d[ns[0]].get("maxrss_kb") or not d[ns[-1]].get("maxrss_kb"):
            return None, None
        return (d[ns[-1]]["maxrss_kb"] - d[ns[0]]["maxrss_kb"]) / float(ns[-1] - ns[0]), ns[-1]
    kb, n = per_req("stagger")
    g2 = mem_goal2(res)
    if g2:
        rows.extend(g2)
    elif kb is not None:
        peers = ", ".join("%s %.1f KB" % (CLIENTS.get(c, c), per_req(c)[0])
                          for c in ("go", "node", "python") if per_req(c)[0] is not None)
        rows.append(["2. ≤ 4 KB per request in flight (goal at 10 000; measured at %d)" % n,
                     "%.1f KB" % kb, peers or "–", "–",
                     "met at %d" % n if kb <= 4.0 else "not met"])
    v = "outage"
    ad, rg = runs.get((v, "stagger-adaptive")), runs.get((v, "stagger-rate"))
    if ad and ad.get("m") and ad["m"].get("completion_s") and v in ideals:
        r = ad["m"]["completion_s"] / ideals[v]
        base = "rate given: %.2f×" % (rg["m"]["completion_s"] / ideals[v]) if rg and rg.get("m") and rg["m"].get("completion_s") else "–"
        rows.append(["3. adaptive around a 5 s outage ≤ 1.10× ideal",
                     "stagger batch, adaptive: %.2f× ideal" % r,
                     base + " (before this change the adaptive run took 1.29×: a 503 with Retry-After cut the rate)",
                     "%.2f×" % r, "met" if r <= 1.10 else "not met"])
    plans = {}
    for name in ("default", "batch", "onebase"):
        p = os.path.join(res, "goals", "plan-%s.json" % name)
        try:
            with open(p) as f:
                plans[name] = json.load(f)
        except (OSError, ValueError):
            pass
    def first(j, k):
        return j[k][0]["wait_median_ms"] if j.get(k) else None
    if plans.get("default") and plans.get("onebase"):
        d, b = plans["default"], plans["onebase"]
        cells = []
        for name in ("default", "batch"):
            j = plans.get(name)
            if j:
                cells.append("%s: transient %.0f ms, throttle %.0f ms" % (
                    name, first(j, "retries"), first(j, "throttle_retries")))
        ok = first(d, "throttle_retries") > first(d, "retries")
        rows.append(["4. throttle (1 s base) and transient (50 ms base) apart: median first wait",
                     "; ".join(cells),
                     "one base for both (--base 500ms, the old default): %.0f ms / %.0f ms" % (
                         first(b, "retries"), first(b, "throttle_retries")),
                     "%.0f× apart" % (first(d, "throttle_retries") / max(first(d, "retries"), 1e-9)),
                     "met" if ok else "not met"])
    g5 = kv_line(res, "bench_redis.txt", "goal5:")
    if g5 and g5.get("rt_lease") is not None:
        held = g5.get("excess_lease") is not None and g5["excess_lease"] <= 0
        ok = g5["rt_lease"] <= 0.10 and held
        rows.append(["5. shared limit at scale: ≤ 1 Redis round trip per 10 admissions (token leases), "
                     "4 processes × 1000/s through one 2000/s key",
                     "40 ms leases: %.3f round trips per admission, %.0f/s against a bound of %.0f/s "
                     "(worst window %+.0f over burst + rate·t)" % (
                         g5["rt_lease"], g5.get("rate_lease") or 0, g5.get("bound_lease") or 0,
                         g5.get("excess_lease") or 0),
                     "one round trip per request: %.3f per admission, %.0f/s" % (
                         g5.get("rt_per_request") or 0, g5.get("rate_per_request") or 0),
                     "%.3f" % g5["rt_lease"], "met" if ok else "not met"])
    else:
        rows.append(["5. shared limit at scale: ≤ 1 Redis round trip per 10 admissions (token leases)",
                     "bench/bench_redis.sh gave no lease figures in this run", "–", "–", "not measured"])
    md.append(md_table(["goal", "stagger", "baseline (same run)", "ratio", "verdict"], rows))
    md.append("")
    return md


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--jobs", type=int, required=True)
    ap.add_argument("--rate", type=float, required=True)
    ap.add_argument("--burst", type=int, required=True)
    ap.add_argument("--docs")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()

    res = a.results
    manifest = read_manifest(os.path.join(res, "manifest.jsonl"))
    machine = read_kv(os.path.join(res, "machine.txt"))
    versions = read_kv(os.path.join(res, "versions.txt"))
    if versions.get("curl_mode") == "xargs":
        CLIENTS["curl"] = "curl --retry 6 (xargs -P)"
    notes = []
    if os.path.exists(os.path.join(res, "notes.txt")):
        with open(os.path.join(res, "notes.txt")) as f:
            notes = [l.strip() for l in f if l.strip()]

    runs, ideals, variants = {}, {}, []
    for r in manifest:
        if r.get("kind") != "goodput":
            continue
        v, c = r["variant"], r["client"]
        if v not in variants:
            variants.append(v)
        ideals.setdefault(v, (a.jobs - a.burst) / a.rate + outage_seconds(r.get("server_args", "")))
        if r.get("status") == "ran":
            lp = os.path.join(res, r["log"])
            r["m"] = analyze_log(lp, r.get("jobs", a.jobs), a.rate, a.burst) if os.path.exists(lp) else {"calls": 0}
        runs[(v, c)] = r
    variants.sort(key=lambda v: VORDER.index(v) if v in VORDER else 99)

    md = []
    md.append("# Benchmarks")
    md.append("")
    md.append("Generated by `make bench` (`scripts/bench.sh`, `bench/analyze.py`)%s on %s. "
              "Do not edit by hand: every figure below is computed from the server's request log "
              "and the tools' own output of that run." % (
                  " with BENCH_QUICK=1" if a.quick else "", machine.get("date", "?")))
    md.append("")
    md.append("**Machine**: %s CPUs (nproc), %s, %s memory, %s, %s. The whole run took %s s; load "
              "average (1, 5, 15 min) %s at the start and %s at the end (anything else running on the "
              "machine shares its cores with the clients and the server)." % (
        machine.get("nproc", "?"), machine.get("cpu", "?"), machine.get("memory", "?"),
        machine.get("kernel", "?"), machine.get("os", "?"), machine.get("total_s", "?"),
        machine.get("loadavg_start", "?"), machine.get("loadavg_end", "?")))
    md.append("")
    md.append("**Versions**: " + "; ".join("%s: `%s`" % (k, v) for k, v in versions.items()))
    md.append("")
    md.extend(goals_section(res, manifest, runs, ideals))
    md.extend(dialects_section(res))
    md.extend(proxy_section(res))
    md.extend(perf_section(res))
    md.extend(ai_section(res))
    md.extend(prio_section(res))

    md.append("## 1. Goodput under a limit")
    md.append("")
    md.append(
        "%d jobs (`GET /track/KEY`, one key each) against `stagger serve --rate %g --burst %d` on "
        "127.0.0.1, 30 concurrent workers per client (the naive client: 50). The server sets "
        "TCP_NODELAY on every connection, listens with a backlog of 4096 and answers from epoll "
        "threads, so no reply is stalled: a server that stalls replies (Nagle's ~40 ms) spreads "
        "retries out by itself and flatters every client. curl writes each job to a file of its own "
        "(curl 7.88 `--retry` with `-o /dev/null` exits 23 on the first retry). Each client run is "
        "capped by `timeout`; a capped run is marked “timed out” and its time is a lower bound."
        % (a.jobs, a.rate, a.burst))
    md.append("")
    md.append(
        "Figures, all from the server's log: **completion** = first to last request of the run; "
        "**÷ ideal** = completion ÷ ((jobs − burst) ÷ rate, the least time the limit allows, plus the "
        "outage for the outage variant); "
        "**calls/job**; **429 %%** (and 503 %%) of all calls; **peak offered/s** = most requests "
        "arriving in any 1 s window; **jobs not completed** = keys without a 200; **gap after refusal** = "
        "time from a 429/503 to the same job's next try; **lockstep %%** = share of retries that "
        "arrive in a 100 ms slot holding at least %d retries (twice the limit's share of a slot)."
        % max(2, int(math.ceil(2 * a.rate * 0.1))))
    md.append("")
    clients_text = {
        "stagger-rate": "`stagger batch --concurrency 30 --rate %g --burst %d`" % (a.rate, a.burst),
        "stagger-adaptive": "`stagger batch --concurrency 30` (no rate: adaptive)",
        "curl": ("`curl --retry 6 --parallel --parallel-max 30 -K FILE` (one url, output file and "
                 "header per job; --parallel-max bounds the transfers in progress, and a transfer "
                 "waiting for its retry is not one, so curl goes on starting new jobs meanwhile: see "
                 "its peak offered/s. `xargs -P 30 curl` is not used by default because on a machine "
                 "where starting a process is slow it measures process start-up rather than retries; "
                 "CURL_MODE=xargs runs it)" if versions.get("curl_mode", "parallel") != "xargs" else
                 "`xargs -P 30 curl --retry 6 -o FILE` (one process per job)"),
        "python": "requests + urllib3 `Retry(total=6, backoff_factor=0.5, status_forcelist=429/5xx, "
                  "respect_retry_after_header=True)`, 30 threads",
        "node": "got `retry: {limit: 6, statusCodes: [408, 429, 500, 502, 503, 504]}`, 30 at a time",
        "go": "go-retryablehttp `NewClient()` with `RetryMax = 6`, 30 goroutines",
        "naive": "Python threads, fixed 1 s sleep on 429/5xx, no cap on tries, 50 workers",
    }
    md.append("Clients: " + "; ".join("**%s**: %s" % (CLIENTS[c], clients_text[c]) for c in ORDER) + ".")
    md.append("")

    all_ok, vlines = verdict(runs, variants, ideals)
    md.append("### Goal")
    md.append("")
    md.append("Stagger first on completion ÷ ideal and on 429 share in every variant, with no job lost: "
              "**%s**." % ("met" if all_ok else "not met"))
    md.append("")
    md.extend(vlines)
    md.append("")

    tables = {}
    for v in variants:
        t = goodput_table(runs, v, ideals[v])
        tables[v] = t
        md.append("### %s (ideal %.1f s)" % (VARIANTS.get(v, v), ideals[v]))
        md.append("")
        md.append(t)
        md.append("")

    charts = {}
    if variants:
        clients = [c for c in ORDER if any((v, c) in runs for v in variants)]

        def ratio(v, c):
            r = runs.get((v, c))
            if r is None:
                return None, " "
            if r.get("status") != "ran" or not r["m"].get("calls"):
                return None, ("not run" if r.get("status") != "ran" else "no data")
            m = r["m"]
            return m["completion_s"] / ideals[v], ("timeout" if r.get("timeout") else
                                                  "%d not done" % m["lost"] if m["lost"] else "")

        def share(v, c):
            r = runs.get((v, c))
            if r is None:
                return None, " "
            if r.get("status") != "ran" or not r["m"].get("calls"):
                return None, "not run"
            m = r["m"]
            return 100.0 * (m["n429"] + m["n503"]) / m["calls"], ("timeout" if r.get("timeout") else
                                                                  "%d not done" % m["lost"] if m["lost"] else "")

        groups = [(v, VARIANTS.get(v, v)) for v in variants]
        sub = "%d jobs, limit %g/s burst %d, 30 workers per client; lower is better" % (a.jobs, a.rate, a.burst)
        charts["completion.svg"] = grouped_bars(
            "Completion time ÷ ideal", sub, "completion ÷ ideal", groups, clients, ratio, ref=1.0)
        charts["refused.svg"] = grouped_bars(
            "Share of calls refused (429 or 503)", sub, "refused calls, %", groups, clients, share,
            fmt="%.0f")
        head = variants[0]
        series = [(c, runs[(head, c)]["m"]["offered_per_s"]) for c in ORDER
                  if (head, c) in runs and runs[(head, c)].get("status") == "ran"
                  and runs[(head, c)]["m"].get("calls")]
        charts["offered.svg"] = line_chart(
            "Offered requests per second (%s)" % VARIANTS.get(head, head),
            "every request the server saw, per 1 s since the client's first request",
            "requests / s", "seconds since the first request", series, hline=a.rate,
            hlabel="limit %g/s" % a.rate)
        panels = [(c, runs[(head, c)]["m"]["ok_100ms"], runs[(head, c)]["m"]["other_100ms"])
                  for c, _ in series]
        charts["slots.svg"] = slot_panels(
            "Requests per 100 ms, first %d s (%s)" % (WINDOW_S, VARIANTS.get(head, head)),
            "synchronised retries show as tall red spikes once a second", panels, a.rate)
        md.append("![completion ÷ ideal per client and variant](bench/completion.svg)")
        md.append("")
        md.append("![share of refused calls per client and variant](bench/refused.svg)")
        md.append("")
        md.append("![offered requests per second, %s](bench/offered.svg)" % VARIANTS.get(head, head))
        md.append("")
        md.append("![requests per 100 ms, %s](bench/slots.svg)" % VARIANTS.get(head, head))
        md.append("")

    # ---- overhead
    over = [r for r in manifest if r.get("kind") == "overhead"]
    md.append("## 2. Overhead when nothing limits")
    md.append("")
    if over:
        wrk = next((r for r in over if r["client"] == "wrk" and r.get("rps")), None)
        md.append("`stagger serve` without a limit and without a log; each client fetches %s distinct "
                  "keys with 30 at a time (wrk: 30 connections, 2 threads, fixed duration), one fresh "
                  "server per client, all in the same run. req/s = requests ÷ the client's wall time "
                  "(process start to exit, so start-up and, for stagger batch, its SQLite store are "
                  "included)." % (next((r.get("requests") for r in over if r.get("requests")), "?")))
        md.append("")
        names = {"wrk": "wrk (ceiling)", "curl-parallel": "curl --parallel --parallel-max 30",
                 "stagger-adaptive": "stagger batch, adaptive", "stagger-rate": "stagger batch --rate 0 (no client limit)",
                 "python": CLIENTS["python"], "node": CLIENTS["node"], "go": CLIENTS["go"]}
        rows = []
        for r in over:
            rps = r.get("rps")
            if rps is None and r.get("requests") and r.get("wall_ms"):
                rps = r["requests"] / (r["wall_ms"] / 1000.0)
            r["rps_computed"] = rps
            ok = client_ok(res, r)
            rows.append([names.get(r["client"], r["client"]),
                         r.get("requests") or "–", "–" if ok is None else ok,
                         f1(r["wall_ms"] / 1000.0, 2) if r.get("wall_ms") else "–",
                         f1(rps, 0) if rps else "–",
                         f1(rps / wrk["rps"], 3) if rps and wrk else "–",
                         r.get("exit")])
        md.append(md_table(["client", "requests", "ok", "wall s", "req/s", "÷ wrk", "exit"], rows))
        md.append("")
    else:
        md.append("Not run.")
        md.append("")
    rss = [r for r in manifest if r.get("kind") == "rss"]
    if rss:
        md.append("Peak RSS (`/usr/bin/time -f %M`) with 10 and with N requests in flight: the server "
                  "trickles every body over 2 s, so a client holds its whole concurrency open; per 1000 "
                  "in flight = (RSS at N − RSS at 10) × 1000 ÷ (N − 10). Each client fetches 2 × N keys, so a wall "
                  "time near 4 s shows that N requests were really in flight at once.")
        md.append("")
        rows = []
        by = {}
        for r in rss:
            by.setdefault(r["client"], {})[r["inflight"]] = r
        for c, d in by.items():
            ns = sorted(d)
            lo, hi = d[ns[0]], d[ns[-1]]
            per = None
            if lo.get("maxrss_kb") and hi.get("maxrss_kb") and ns[-1] > ns[0]:
                per = (hi["maxrss_kb"] - lo["maxrss_kb"]) * 1000.0 / (ns[-1] - ns[0]) / 1024.0
            rows.append([{"stagger": "stagger batch --rate 0"}.get(c, CLIENTS.get(c, c)), ns[-1],
                         f1(lo["maxrss_kb"] / 1024.0) if lo.get("maxrss_kb") else "–",
                         f1(hi["maxrss_kb"] / 1024.0) if hi.get("maxrss_kb") else "–",
                         f1(per), f1(hi["wall_ms"] / 1000.0, 1) if hi.get("wall_ms") else "–",
                         "%s / %s" % (lo.get("exit"), hi.get("exit")),
                         "–" if client_ok(res, hi) is None else client_ok(res, hi)])
        md.append(md_table(["client", "N in flight", "RSS @10 MiB", "RSS @N MiB", "MiB per 1000 in flight",
                            "wall s @N", "exit @10 / @N", "jobs done @N"], rows))
        md.append("")

    # ---- primitives
    md.append("## 3. Primitive costs and the other parts' benchmarks")
    md.append("")
    for r in manifest:
        if r.get("kind") not in ("primitive", "script"):
            continue
        name = r["name"] if r["kind"] == "primitive" else "bench/%s.sh" % r["name"]
        if r.get("status") == "missing":
            md.append("- `%s`: not present in this tree, skipped." % name)
            md.append("")
            continue
        text = ""
        p = os.path.join(res, r["file"])
        if os.path.exists(p):
            with open(p, errors="replace") as f:
                text = f.read().strip()
        if r.get("exit"):
            pe = p[:-4] + ".err"
            if os.path.exists(pe):
                with open(pe, errors="replace") as f:
                    err = f.read().strip().splitlines()[-8:]
                if err:
                    text = (text + "\n" if text else "") + "stderr (last lines):\n" + "\n".join(err)
        md.append("`%s` (exit %s):" % (name, r.get("exit")))
        md.append("")
        md.append("```")
        md.append(text[:20000] or "(no output)")
        md.append("```")
        md.append("")

    if notes:
        md.append("## Skipped or missing")
        md.append("")
        md.extend("- " + n for n in notes)
        md.append("")

    text = "\n".join(md)
    os.makedirs(os.path.join(res, "bench"), exist_ok=True)
    with open(os.path.join(res, "BENCHMARKS.md"), "w") as f:
        f.write(text)
    for name, svg in charts.items():
        with open(os.path.join(res, "bench", name), "w") as f:
            f.write(svg)
    if a.docs:
        os.makedirs(os.path.join(a.docs, "bench"), exist_ok=True)
        with open(os.path.join(a.docs, "BENCHMARKS.md"), "w") as f:
            f.write(text)
        for name, svg in charts.items():
            with open(os.path.join(a.docs, "bench", name), "w") as f:
                f.write(svg)

    dump = {"machine": machine, "versions": versions, "notes": notes, "goal_met": all_ok,
            "ideal_s": ideals,
            "goodput": [{k: v for k, v in r.items()} for r in runs.values()],
            "overhead": over, "rss": rss}
    with open(os.path.join(res, "results.json"), "w") as f:
        json.dump(dump, f, indent=1)

    for v in variants:
        print("\n%s (ideal %.1f s)\n%s" % (VARIANTS.get(v, v), ideals[v], tables[v]))
    print("\ngoal %s" % ("met" if all_ok else "NOT met"))
    for l in vlines:
        print(l)
    print("\nwritten: %s%s" % (os.path.join(res, "BENCHMARKS.md"),
                               (", " + os.path.join(a.docs, "BENCHMARKS.md")) if a.docs else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
