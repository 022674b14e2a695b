"""Server-side SVG charts for the dashboards (issue 6 §3): geometry here, markup in ``templates/history/_chart.html``
(the frame) and ``Chart.shapes`` (the grid, bars and labels: one escaped string, built here because a template loop
over a 90-day chart's shapes cost more than the query behind it).

No script, no CDN, and no ``style`` attribute anywhere (the CSP allows neither): shapes carry presentation
attributes (x, y, width, height) and a class; colours live in ``static/css/history.css``. Every bar has a ``<title>``
(its tooltip) and the chart a text table beside it, so the numbers are readable without the picture.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from django.utils.html import format_html_join
from django.utils.safestring import SafeString

WIDTH: Final = 720
HEIGHT: Final = 240
LEFT: Final = 44  # room for the y-axis labels
BOTTOM: Final = 28  # room for the x-axis labels
TOP: Final = 12
RIGHT: Final = 8
MAX_X_LABELS: Final = 10


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    width: float
    height: float
    css: str
    title: str


@dataclass(frozen=True)
class Label:
    x: float
    y: float
    text: str
    anchor: str = "middle"


@dataclass(frozen=True)
class GridLine:
    y: float
    x1: float
    x2: float


@dataclass(frozen=True)
class Chart:
    """An SVG chart: ``width``×``height`` user units; rectangles, axis labels, grid lines, a legend."""

    width: int
    height: int
    rects: list[Rect]
    labels: list[Label]
    grid: list[GridLine]
    legend: list[tuple[str, str]]  # (css class, name)
    title: str
    empty: bool

    @property
    def shapes(self) -> SafeString:
        """The grid lines, bars (each with its ``<title>``) and axis labels as SVG markup, every value escaped."""
        grid = format_html_join(
            "", '<line class="grid" x1="{}" x2="{}" y1="{}" y2="{}"/>', ((g.x1, g.x2, g.y, g.y) for g in self.grid)
        )
        bars = format_html_join(
            "",
            '<rect class="bar {}" x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect>',
            ((r.css, r.x, r.y, r.width, r.height, r.title) for r in self.rects),
        )
        labels = format_html_join(
            "",
            '<text class="axis" x="{}" y="{}" text-anchor="{}">{}</text>',
            ((lb.x, lb.y, lb.anchor, lb.text) for lb in self.labels),
        )
        return SafeString(grid + bars + labels)


@dataclass(frozen=True)
class Series:
    css: str
    name: str
    values: Sequence[float]


def _nice_max(value: float) -> float:
    """The axis maximum: 1, 2 or 5 times a power of ten, at least ``value`` (and at least 1)."""
    if value <= 1:
        return 1.0
    power = 1.0
    while power * 10 <= value:
        power *= 10
    for step in (1, 2, 5, 10):
        if step * power >= value:
            return float(step * power)
    return float(10 * power)  # pragma: no cover - the loop always returns


def _number(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


def stacked_columns(
    *, title: str, categories: Sequence[str], series: Sequence[Series], unit: str = ""
) -> Chart:
    """Vertical columns, one per category, each stacking the series' values (e.g. decisions per day by action)."""
    count = len(categories)
    totals = [sum(float(s.values[i]) for s in series) for i in range(count)]
    top = _nice_max(max(totals, default=0.0))
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    slot = plot_w / max(count, 1)
    bar_w = max(slot * 0.7, 1.0)
    rects: list[Rect] = []
    for i, category in enumerate(categories):
        x = LEFT + i * slot + (slot - bar_w) / 2
        base: float = TOP + plot_h
        for s in series:
            value = float(s.values[i])
            if value <= 0:
                continue
            h = plot_h * value / top
            base -= h
            rects.append(Rect(round(x, 2), round(base, 2), round(bar_w, 2), round(h, 2), s.css,
                              f"{category}: {_number(value)}{unit} {s.name}"))
    labels = _y_labels(top, plot_h)
    every = max(1, -(-count // MAX_X_LABELS))
    for i, category in enumerate(categories):
        if i % every == 0 or i == count - 1:
            labels.append(Label(round(LEFT + i * slot + slot / 2, 2), HEIGHT - 8, category))
    return Chart(WIDTH, HEIGHT, rects, labels, _grid(top, plot_h), [(s.css, s.name) for s in series], title,
                 empty=not any(totals))


def horizontal_bars(*, title: str, rows: Sequence[tuple[str, Sequence[tuple[str, float]]]],
                    legend: Sequence[tuple[str, str]] = (), unit: str = "") -> Chart:
    """Horizontal bars, one per row label, each stacking ``(css class, value)`` segments (backlog by age,
    decisions per reviewer, time to decision)."""
    row_h = 26
    label_w = 160
    height = TOP + max(len(rows), 1) * row_h + BOTTOM
    plot_w = WIDTH - label_w - RIGHT - 40
    totals = [sum(v for _, v in segments) for _, segments in rows]
    top = _nice_max(max(totals, default=0.0))
    rects: list[Rect] = []
    labels: list[Label] = []
    for i, (name, segments) in enumerate(rows):
        y = TOP + i * row_h + 4
        x = float(label_w)
        for css, value in segments:
            if value <= 0:
                continue
            w = plot_w * value / top
            rects.append(Rect(round(x, 2), y, round(w, 2), row_h - 8, css, f"{name}: {_number(value)}{unit}"))
            x += w
        labels.append(Label(label_w - 6, y + row_h / 2, name, "end"))
        labels.append(Label(round(x + 4, 2), y + row_h / 2, f"{_number(totals[i])}{unit}", "start"))
    labels.append(Label(label_w, height - 8, "0", "start"))
    labels.append(Label(label_w + plot_w, height - 8, f"{_number(top)}{unit}", "end"))
    return Chart(WIDTH, height, rects, labels, [], list(legend), title, empty=not any(totals))


def _y_labels(top: float, plot_h: float) -> list[Label]:
    return [Label(LEFT - 6, round(TOP + plot_h * (1 - f) + 4, 2), _number(top * f), "end") for f in (0, 0.5, 1)]


def _grid(top: float, plot_h: float) -> list[GridLine]:
    del top
    return [GridLine(round(TOP + plot_h * (1 - f), 2), LEFT, WIDTH - RIGHT) for f in (0, 0.5, 1)]
