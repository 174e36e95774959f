#!/usr/bin/python3
"""Renders the results of an A/B run (bench/ab.py) as one self-contained HTML page: a table of
medians and ratios per scenario and topology, bar charts of throughput and p99 latency with
the two sides beside each other, the idle-cluster CPU, the machine's physical references and
both sides' configuration files. No scripts, fonts or images from elsewhere: it opens from a
file with no network.

usage: report.py RESULTS.json OUT.html
"""
import html
import json
import statistics
import sys

COLORS = {"apus": "#2b6cb0", "swift": "#c05621"}


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def side_medians(runs):
    """Medians over the rounds of one side of one scenario."""
    def pick(fn):
        out = []
        for r in runs:
            try:
                if not r["bench"]["totals"]["ops"]:
                    raise KeyError("no operation measured")  # not a speed of zero
                out.append(fn(r))
            except (KeyError, TypeError, ZeroDivisionError):
                out.append(None)
        return median(out)
    return {
        "ops_per_s": pick(lambda r: r["bench"]["totals"]["ops_per_s"]),
        "mib_per_s": pick(lambda r: r["bench"]["totals"]["mib_per_s"]),
        "p50": pick(lambda r: r["bench"]["totals"]["latency_ms"]["p50"]),
        "p99": pick(lambda r: r["bench"]["totals"]["latency_ms"]["p99"]),
        "errors": sum(r["bench"]["totals"]["errors"] for r in runs if r.get("bench")),
        "cpu_ms_per_op": pick(lambda r: r["server_cpu_s"] / r["bench"]["totals"]["ops"] * 1e3),
        # HAProxy's, apart from the servers' (runs through it only; older results have none).
        "haproxy_ms_per_op": pick(
            lambda r: r["haproxy_cpu_s"] / r["bench"]["totals"]["ops"] * 1e3),
        "rounds": len(runs),
    }


def haproxy_cpu(scenario, med):
    """HAProxy's CPU per operation of both sides, where the runs went through it."""
    if scenario.get("topology") != "ha":
        return ""
    return " / ".join(fmt(m["haproxy_ms_per_op"], 3) for m in med.values())


def fmt(v, digits=1):
    if v is None:
        return "-"
    if abs(v) >= 100:
        return "{:,.0f}".format(v)
    return ("{:,.%df}" % digits).format(v)


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def bar_chart(title, unit, rows, sides):
    """Horizontal bars: one group per row (label, {side: value}), one bar per side, each group
    on its own scale (its larger bar spans the width), so small and large scenarios both read."""
    bar_h, gap, label_w, width = 14, 10, 230, 760
    height = 30 + len(rows) * (len(sides) * bar_h + gap) + 20
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img" '
           'aria-label="%s">' % (width, height, html.escape(title))]
    out.append('<text x="0" y="16" font-size="14" font-weight="bold">%s (%s)</text>'
               % (html.escape(title), html.escape(unit)))
    y = 30
    for label, vals in rows:
        top = max([v for v in vals.values() if v] or [1])
        out.append('<text x="0" y="%d" font-size="12">%s</text>'
                   % (y + bar_h, html.escape(label)))
        for side in sides:
            v = vals.get(side)
            w = 0 if not v else max(1, (width - label_w - 90) * v / top)
            out.append('<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>'
                       % (label_w, y, w, bar_h - 2, COLORS.get(side, "#666")))
            out.append('<text x="%.1f" y="%d" font-size="11">%s %s</text>'
                       % (label_w + w + 4, y + bar_h - 3, html.escape(side), fmt(v)))
            y += bar_h
        y += gap
    out.append("</svg>")
    return "\n".join(out)


def render(results):
    sides = results.get("sides", ["apus", "swift"])
    a, b = sides[0], sides[1]
    rows = []
    for sc in results["scenarios"]:
        med = {s: side_medians(sc["runs"].get(s, [])) for s in sides}
        rows.append((sc, med))
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'>",
             "<title>Apus A/B: %s against %s</title>" % (html.escape(a), html.escape(b)),
             "<style>body{font-family:sans-serif;margin:24px;color:#222}"
             "table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #ccc;"
             "padding:3px 8px;text-align:right}th{background:#f0f0f0}td.l{text-align:left}"
             ".good{color:#276749;font-weight:bold}.bad{color:#9b2c2c;font-weight:bold}"
             "pre{background:#f7f7f7;padding:8px;overflow:auto;font-size:11px}"
             ".key span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px}</style>",
             "</head><body>"]
    parts.append("<h1>%s against %s</h1>" % (html.escape(a), html.escape(b)))
    m = results.get("machine", {})
    parts.append("<p>%s. Medians of %s rounds, the sides alternating; ratio = %s / %s "
                 "(throughput: higher is better for %s).</p>"
                 % (html.escape(m.get("description", "machine not described")),
                    html.escape(str(results.get("rounds", "?"))), html.escape(a),
                    html.escape(b), html.escape(a)))
    parts.append('<p class="key">' + "".join(
        '<span style="background:%s"></span>%s' % (COLORS.get(s, "#666"), html.escape(s))
        for s in sides) + "</p>")
    headers = ["scenario", "topology", "%s ops/s" % a, "%s ops/s" % b, "ratio",
               "%s MiB/s" % a, "%s MiB/s" % b, "%s p50 ms" % a, "%s p50 ms" % b,
               "%s p99 ms" % a, "%s p99 ms" % b, "%s CPU ms/op" % a, "%s CPU ms/op" % b,
               "HAProxy CPU ms/op (%s / %s)" % (a, b), "errors"]
    parts.append("<table><tr>" + "".join("<th>%s</th>" % html.escape(h) for h in headers) +
                 "</tr>")
    for sc, med in rows:
        r = ratio(med[a]["ops_per_s"], med[b]["ops_per_s"])
        cls = "" if r is None else ("good" if r >= 1 else "bad")
        errors = med[a]["errors"] + med[b]["errors"]
        parts.append(
            "<tr><td class='l'>%s</td><td class='l'>%s</td><td>%s</td><td>%s</td>"
            "<td class='%s'>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
            "<td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class='%s'>%d</td></tr>"
            % (html.escape(sc["name"]), html.escape(sc.get("topology", "")),
               fmt(med[a]["ops_per_s"]), fmt(med[b]["ops_per_s"]), cls,
               "-" if r is None else "%.2fx" % r, fmt(med[a]["mib_per_s"]),
               fmt(med[b]["mib_per_s"]), fmt(med[a]["p50"], 2), fmt(med[b]["p50"], 2),
               fmt(med[a]["p99"], 2), fmt(med[b]["p99"], 2), fmt(med[a]["cpu_ms_per_op"], 2),
               fmt(med[b]["cpu_ms_per_op"], 2), haproxy_cpu(sc, med), "bad" if errors else "",
               errors))
    parts.append("</table>")
    label = lambda sc: "%s (%s)" % (sc["name"], sc.get("topology", ""))
    parts.append(bar_chart("Throughput by scenario", "operations per second",
                           [(label(sc), {s: med[s]["ops_per_s"] for s in sides})
                            for sc, med in rows], sides))
    parts.append("<br>")
    parts.append(bar_chart("Latency p99 by scenario", "milliseconds, lower is better",
                           [(label(sc), {s: med[s]["p99"] for s in sides})
                            for sc, med in rows], sides))
    idle = results.get("idle")
    if idle:
        parts.append("<h2>Idle cluster</h2><p>CPU seconds all processes used in %s s doing "
                     "nothing: %s.</p>" % (html.escape(str(idle.get("seconds"))), ", ".join(
                         "%s %s" % (html.escape(s), fmt(median(idle.get(s, [])), 3))
                         for s in sides)))
    refs = m.get("references")
    if refs:
        parts.append("<h2>Physical references</h2><table>")
        for k, v in refs.items():
            parts.append("<tr><td class='l'>%s</td><td>%s</td></tr>"
                         % (html.escape(k), html.escape(str(v))))
        parts.append("</table>")
    for s in sides:
        conf = results.get("configs", {}).get(s)
        if not conf:
            continue
        parts.append("<h2>Configuration: %s</h2>" % html.escape(s))
        for name, text in conf.items():
            parts.append("<h3>%s</h3><pre>%s</pre>" % (html.escape(name), html.escape(text)))
    parts.append("</body></html>")
    return "\n".join(parts)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        results = json.load(f)
    with open(sys.argv[2], "w") as f:
        f.write(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
