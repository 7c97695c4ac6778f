"""The chart of a run (bench/results.svg): server cost per call, each command next to its
twin, with the single-key floor drawn as a line.
"""

from __future__ import annotations

import math
from typing import List, Optional, Tuple

from bench.common import MODES


def esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


COLORS = {"native": "#1f6fb4", "twin": "#e8822e", "script": "#b39b2f", "plain": "#5a5a5a"}


def chart(r) -> str:
    """Horizontal bars of server µs per call: each command (and mode) with its twin."""
    p = r.headline
    groups: List[Tuple[str, Optional[str], List[Tuple[str, str, float]]]] = []
    for row in r.rows_in_order():
        for mode in MODES:
            bars = []
            for kind in r.kinds(row):
                v = r.get(row.name, kind, mode, p, "usec")
                if v is None:
                    continue
                label = {"native": row.name, "twin": "Lua twin", "script": "Lua script"}[kind]
                bars.append(("plain" if row.floor or row.reference else kind, label, v))
            if bars:
                title = row.name if mode == "allowed" else f"{row.name}, denied"
                groups.append((title, row.against, bars))
    values = sorted(v for _, _, bars in groups for _, _, v in bars)
    if not values:
        return ""
    # Linear scale; a bar far longer than all others is cut, with its value written out.
    top = values[-1]
    if len(values) > 1 and values[-1] > 3 * values[-2]:
        top = values[-2] * 1.3
    # The label column fits the longest title (bold 12 px: about 7.2 px a character).
    longest = max(len(title) for title, _, _ in groups)
    left = max(200, int(7.2 * longest) + 16)
    width, right_pad = 660 + left, 210
    bar_h, gap, group_gap, head = 18, 4, 14, 76
    plot_w = width - left - right_pad
    height = head + sum(len(b) * (bar_h + gap) + group_gap for _, _, b in groups) + 40
    scale = plot_w / top
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{left}" y="22" font-size="15" font-weight="bold">Server cost per call (µs), lower is better</text>',
        f'<text x="{left}" y="40" fill="#555">INFO commandstats, pipeline {p}, median of {r.o.repeat} runs; '
        f'{esc(r.info["cpu"])}, {r.info["cores"]} cores</text>',
    ]
    # Grid lines at round values.
    step = nice_step(top / 5)
    x = 0.0
    while x <= top + 1e-9:
        gx = left + x * scale
        out.append(f'<line x1="{gx:.1f}" y1="{head - 8}" x2="{gx:.1f}" y2="{height - 30}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{gx:.1f}" y="{height - 14}" text-anchor="middle" fill="#666">{x:g}</text>')
        x += step
    y = head
    floor_row = r.floor.row if r.floor else None
    floor = r.get(floor_row.name, "native", "allowed", p, "usec") if floor_row else None
    for title, against, bars in groups:
        base = next((v for k, _, v in bars if k == "native"), None)
        base_name = "native"
        if base is None and against:
            base = r.get(against, "native", "denied" if title.endswith("denied") else "allowed", p, "usec")
            base_name = against
        for i, (kind, label, v) in enumerate(bars):
            w = min(v, top) * scale
            if i == 0:
                out.append(f'<text x="{left - 10}" y="{y + bar_h - 5}" text-anchor="end" font-weight="bold">'
                           f'{esc(title)}</text>')
            else:
                out.append(f'<text x="{left - 10}" y="{y + bar_h - 5}" text-anchor="end" fill="#555">'
                           f'{esc(label)}</text>')
            out.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{COLORS[kind]}">'
                       f'<title>{esc(title)}, {esc(label)}: {v:.2f} µs</title></rect>')
            if v > top:  # a cut bar: a white zigzag near its end
                zx, hh = left + w - 14, bar_h / 2 + 1
                out.append(f'<path d="M{zx:.1f},{y - 1} l4,{hh} l-4,{hh} h5 l4,-{hh} l-4,-{hh} z" fill="#ffffff"/>')
            text = f"{v:.2f} µs"
            if kind in ("twin", "script") and base:
                text += f"  ({v / base:.1f}× {base_name})"
            out.append(f'<text x="{left + w + 6:.1f}" y="{y + bar_h - 5}">{esc(text)}</text>')
            y += bar_h + gap
        y += group_gap
    if floor and floor_row:
        fx = left + floor * scale
        out.append(f'<line x1="{fx:.1f}" y1="{head - 8}" x2="{fx:.1f}" y2="{height - 30}" stroke="#5a5a5a" '
                   f'stroke-dasharray="4 3"/>')
        out.append(f'<text x="{fx + 4:.1f}" y="{height - 34}" fill="#5a5a5a" font-size="11">'
                   f'{esc(floor_row.name)}</text>')
    # Legend, top right.
    lx, ly = left, 52
    for kind, label in (("native", "RL.* command"), ("twin", "its Lua twin"), ("script", "other Lua script"),
                        ("plain", "floor module or plain command")):
        out.append(f'<rect x="{lx}" y="{ly - 9}" width="10" height="10" fill="{COLORS[kind]}"/>')
        out.append(f'<text x="{lx + 14}" y="{ly}" fill="#333">{label}</text>')
        lx += 34 + 6.5 * len(label)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def nice_step(raw: float) -> float:
    if raw <= 0:
        return 1.0
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag

