"""The chart of a run (bench/results.svg): server cost per call, each command next to its
Lua twin, with the min–max of the runs as a whisker and the ratio written at the right.

Rows whose calls cost many times more than the others (several keys and windows, a
hundred keys) get a panel of their own with its own scale, so that the single-key
commands are not slivers next to them. The floor module and the plain commands come
last, for reference, with the single-key floor drawn as a dashed line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

from bench.common import MODES


def esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


COLORS = {"native": "#1f6fb4", "function": "#e8822e", "twin": "#f2b27a", "script": "#b39b2f", "plain": "#7a7a7a"}


@dataclass
class Bar:
    kind: str  # a key of COLORS
    label: str
    value: float
    low: float
    high: float


@dataclass
class Group:
    title: str
    bars: List[Bar]
    ratio: Optional[Tuple[float, float, float]] = None  # function (or script) ÷ native, per run
    ratio_of: str = ""  # what the ratio is over ("native" or a command)
    reference: bool = False
    row: str = ""

    @property
    def top(self) -> float:
        return max(b.high for b in self.bars)


def groups_of(r) -> List[Group]:
    p = r.headline
    out: List[Group] = []
    for row in r.rows_in_order():
        for mode in MODES:
            bars = []
            for kind in r.kinds(row):
                s = r.sp(row.name, kind, mode, p, "usec")
                if s is None:
                    continue
                label = {"native": row.name, "function": "Lua function", "twin": "Lua script (twin)",
                         "script": "Lua script"}[kind]
                bars.append(Bar("plain" if row.floor or row.reference else kind, label, *s))
            if not bars:
                continue
            title = row.name if mode == "allowed" else f"{row.name}, denied"
            vs, over = r.vs(row, mode, p)
            out.append(Group(title, bars, vs, over or "", row.floor or row.reference, row.name))
    return out


def split(groups: List[Group]) -> List[List[Group]]:
    """The compared rows in one panel, or in two when the costliest are far above the
    rest: rows (both modes together) whose largest figure is under a third of the
    largest of all go first, on their own scale, when they are most of the rows; the
    reference rows last, in the first panel when they fit its scale."""
    main = [g for g in groups if not g.reference]
    ref = [g for g in groups if g.reference]
    row_top: dict = {}
    for g in main:
        row_top[g.row] = max(row_top.get(g.row, 0.0), g.top)
    panels = [main]
    if row_top:
        cut = max(row_top.values()) / 3
        low = [g for g in main if row_top[g.row] <= cut]
        if len({g.row for g in low}) * 2 >= len(row_top) and len(low) < len(main):
            panels = [low, [g for g in main if row_top[g.row] > cut]]
    if ref:
        if panels[0] and max(g.top for g in ref) <= max(g.top for g in panels[0]):
            panels[0] = panels[0] + ref
        else:
            panels.append(ref)
    return [pl for pl in panels if pl]


def nice_step(raw: float) -> float:
    if raw <= 0:
        return 1.0
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def fmt(v: float) -> str:
    return f"{v:.2f}" if v < 10 else f"{v:.1f}"


def fmt_x(v: float) -> str:
    return f"{v:.2f}" if v < 2 else f"{v:.1f}"


def chart(r) -> str:
    groups = groups_of(r)
    if not groups:
        return ""
    panels = split(groups)
    longest = max(len(g.title) for g in groups)
    left = max(210, int(7.4 * longest) + 20)
    plot_w, ratio_w, value_w = 480, 150, 110
    width = left + plot_w + value_w + ratio_w
    bar_h, gap, group_gap, panel_gap = 16, 3, 12, 54
    head = 118
    height = head + sum(sum(len(g.bars) * (bar_h + gap) + group_gap for g in pl) + panel_gap for pl in panels) + 20
    ratio_x = left + plot_w + value_w + 10
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="20" y="26" font-size="17" font-weight="bold">Server cost per call (µs): native command '
        f'against its Lua twin, lower is better</text>',
        f'<text x="20" y="46" fill="#555">INFO commandstats at pipeline {r.headline}; bar: median of '
        f'{r.o.repeat} runs, whisker: min–max; {esc(r.info["cpu"])}, {r.info["cores"]} cores, '
        f'{esc(r.info["server"].split(" (")[0])}</text>',
    ]
    lx, ly = 20, 70
    for kind, label in (("native", "RL.* command (native)"), ("function", "its Lua function"),
                        ("twin", "its Lua script"),
                        ("script", "other Lua script"), ("plain", "floor module, plain command")):
        out.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{COLORS[kind]}"/>')
        out.append(f'<text x="{lx + 17}" y="{ly}" fill="#333">{label}</text>')
        lx += 40 + 6.3 * len(label)
    out.append(f'<text x="{ratio_x}" y="{ly}" fill="#333" font-weight="bold">Lua ÷ native cost</text>')
    y = head
    floor_row = r.floor.row if r.floor else None
    floor = r.get(floor_row.name, "native", "allowed", r.headline, "usec") if floor_row else None
    for n, panel in enumerate(panels):
        top = max(g.top for g in panel)
        step = nice_step(top / 5)
        top = step * math.ceil(top / step)
        scale = plot_w / top
        y0 = y
        y_end = y + sum(len(g.bars) * (bar_h + gap) + group_gap for g in panel)
        if len(panels) > 1:
            what = ("for reference" if all(g.reference for g in panel) else
                    f"calls up to {fmt(max(g.top for g in panel))} µs" if n == 0 else "costlier calls")
            out.append(f'<text x="20" y="{y - 20}" font-weight="bold" font-size="13" fill="#333">{esc(what)} '
                       f'<tspan font-weight="normal" fill="#666">(scale 0 to {top:g} µs)</tspan></text>')
        x = 0.0
        while x <= top + 1e-9:
            gx = left + x * scale
            out.append(f'<line x1="{gx:.1f}" y1="{y0 - 4}" x2="{gx:.1f}" y2="{y_end}" stroke="#e6e6e6"/>')
            out.append(f'<text x="{gx:.1f}" y="{y_end + 13}" text-anchor="middle" fill="#666" '
                       f'font-size="11">{x:g}</text>')
            x += step
        if n == 0 and floor and floor <= top:
            fx = left + floor * scale
            out.append(f'<line x1="{fx:.1f}" y1="{y0 - 4}" x2="{fx:.1f}" y2="{y_end}" stroke="#444" '
                       f'stroke-dasharray="4 3"><title>{esc(floor_row.name)}: {floor:.2f} µs</title></line>')
            out.append(f'<text x="{fx + 3:.1f}" y="{y0 - 6}" fill="#444" font-size="10">'
                       f'{esc(floor_row.name)}</text>')
        for g in panel:
            for i, b in enumerate(g.bars):
                w = b.value * scale
                ty = y + bar_h - 4
                if i == 0:
                    out.append(f'<text x="{left - 10}" y="{ty}" text-anchor="end" font-weight="bold">'
                               f'{esc(g.title)}</text>')
                else:
                    out.append(f'<text x="{left - 10}" y="{ty}" text-anchor="end" fill="#555">{esc(b.label)}</text>')
                out.append(f'<rect x="{left}" y="{y}" width="{max(w, 1):.1f}" height="{bar_h}" '
                           f'fill="{COLORS[b.kind]}"><title>{esc(g.title)}, {esc(b.label)}: {b.value:.2f} µs '
                           f'(runs {b.low:.2f}–{b.high:.2f})</title></rect>')
                if b.high > b.low:
                    x1, x2, my = left + b.low * scale, left + b.high * scale, y + bar_h / 2
                    out.append(f'<path d="M{x1:.1f},{my} H{x2:.1f} M{x1:.1f},{my - 4} V{my + 4} '
                               f'M{x2:.1f},{my - 4} V{my + 4}" stroke="#222" stroke-width="1.2" fill="none"/>')
                out.append(f'<text x="{left + b.high * scale + 6:.1f}" y="{ty}">{fmt(b.value)} µs</text>')
                if i == len(g.bars) - 1 and g.ratio and len(g.bars) > 1:
                    med, lo, hi = g.ratio
                    out.append(f'<text x="{ratio_x}" y="{ty}" font-weight="bold" font-size="14" '
                               f'fill="{COLORS[b.kind]}">{fmt_x(med)}×<tspan dx="5" font-weight="normal" '
                               f'font-size="11" fill="#555">({fmt_x(lo)}–{fmt_x(hi)})</tspan></text>')
                elif i == len(g.bars) - 1 and g.ratio:
                    med, lo, hi = g.ratio
                    out.append(f'<text x="{ratio_x}" y="{ty}" fill="#555" font-size="11">'
                               f'{fmt_x(med)}× {esc(g.ratio_of)}</text>')
                y += bar_h + gap
            y += group_gap
        y += panel_gap
    out.append("</svg>")
    return "\n".join(out) + "\n"
