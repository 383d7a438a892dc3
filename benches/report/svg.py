"""The two plots of BENCHMARKS.md and the README, as plain SVG (no dependency).

Both draw from the figures `render.py` hands over; nothing here measures or rounds
beyond what a label needs."""
import math

WIDTH, HEIGHT = 720, 420
LEFT, RIGHT, TOP, BOTTOM = 78, 210, 44, 58
COLOURS = ["#c0392b", "#e67e22", "#7f8c8d", "#2471a3", "#1e8449", "#8e44ad"]
FONT = 'font-family="Helvetica, Arial, DejaVu Sans, sans-serif"'


def _esc(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _text(x, y, s, size=12, anchor="start", weight="normal", fill="#222"):
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'font-weight="{weight}" fill="{fill}" {FONT}>{_esc(s)}</text>')


def _svg(body, title):
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        _text(LEFT, 24, title, 15, weight="bold"),
        *body,
        "</svg>",
        "",
    ])


def _ns_label(v):
    return f"{v:g} ns" if v < 1000 else f"{v / 1000:g} µs"


def loglog(title, x_label, y_label, xs, x_names, series, footnote):
    """Cost against size on log-log axes. `series` is [(name, [y per x], dashed)]."""
    ys = [y for _, values, _ in series for y in values]
    lo = 10 ** math.floor(math.log10(min(ys)))
    hi = 10 ** math.ceil(math.log10(max(ys)))
    x0, x1 = math.log10(xs[0]), math.log10(xs[-1])
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x):
        return LEFT + (math.log10(x) - x0) / (x1 - x0) * plot_w

    def py(y):
        return TOP + plot_h - (math.log10(y) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * plot_h

    body = [f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>']
    decade = lo
    while decade <= hi * 1.0001:
        for step in (1, 2, 5):
            y = decade * step
            if y > hi * 1.0001:
                break
            major = step == 1
            body.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{py(y):.1f}" y2="{py(y):.1f}" '
                        f'stroke="{"#ccc" if major else "#eee"}"/>')
            if major or (hi / lo) <= 100:
                body.append(_text(LEFT - 6, py(y) + 4, _ns_label(y), 11, "end"))
        decade *= 10
    for x, name in zip(xs, x_names):
        body.append(f'<line x1="{px(x):.1f}" x2="{px(x):.1f}" y1="{TOP}" y2="{TOP + plot_h}" stroke="#eee"/>')
        body.append(_text(px(x), TOP + plot_h + 18, name, 11, "middle"))
    body.append(_text(LEFT + plot_w / 2, HEIGHT - 22, x_label, 12, "middle"))
    body.append(f'<g transform="translate(18 {TOP + plot_h / 2}) rotate(-90)">'
                f'{_text(0, 0, y_label, 12, "middle")}</g>')
    for i, (name, values, dashed) in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        points = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, values))
        dash = ' stroke-dasharray="5 4"' if dashed else ""
        body.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2.2"{dash}/>')
        for x, y in zip(xs, values):
            body.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{colour}"/>')
        ly = TOP + 14 + i * 38
        body.append(f'<line x1="{WIDTH - RIGHT + 14}" x2="{WIDTH - RIGHT + 34}" y1="{ly}" y2="{ly}" '
                    f'stroke="{colour}" stroke-width="2.2"{dash}/>')
        for j, part in enumerate(_wrap(name, 24)):
            body.append(_text(WIDTH - RIGHT + 40, ly + 4 + j * 14, part, 11))
    body.append(_text(LEFT, HEIGHT - 6, footnote, 10, fill="#666"))
    return _svg(body, title)


def pairs(title, rows, footnote):
    """Horizontal bars, two per workload: [(workload, peer name, peer ns, ours name, ours ns)]."""
    left = 250
    bar, gap = 13, 16
    plot_w = WIDTH - left - 90
    top = TOP + 16
    height = top + len(rows) * (2 * bar + gap) + 34
    peak = max(max(r[2], r[4]) for r in rows)
    body = [_text(left, TOP + 4, "ns per operation, lower is better (criterion medians)", 11, fill="#555")]
    for i, (workload, peer, peer_ns, ours, ours_ns) in enumerate(rows):
        y = top + i * (2 * bar + gap)
        body.append(_text(left - 8, y + bar + 3, workload, 12, "end", "bold"))
        for j, (who, ns, colour) in enumerate([(peer, peer_ns, COLOURS[0]), (ours, ours_ns, COLOURS[3])]):
            w = max(1.0, ns / peak * plot_w)
            yy = y + j * bar
            body.append(f'<rect x="{left}" y="{yy}" width="{w:.1f}" height="{bar - 2}" fill="{colour}"/>')
            label = f"{ns:.1f} ns" if ns < 100 else f"{ns:.0f} ns"
            if w > plot_w * 0.55:  # no room to the right: inside the bar
                body.append(_text(left + w - 4, yy + bar - 3, f"{who}  {label}", 10, "end", fill="white"))
            else:
                body.append(_text(left + w + 4, yy + bar - 3, f"{label}  {who}", 10))
        body.append(_text(left - 8, y + 2 * bar + 9, f"{peer_ns / ours_ns:.1f}x", 11, "end", fill="#1e8449"))
    body.append(_text(LEFT - 60, height - 10, footnote, 10, fill="#666"))
    svg = _svg(body, title)
    return svg.replace(f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}"',
                       f'height="{height}" viewBox="0 0 {WIDTH} {height}"', 1).replace(
        f'<rect width="{WIDTH}" height="{HEIGHT}"', f'<rect width="{WIDTH}" height="{height}"', 1)


def _wrap(text, width):
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return lines + [line]
