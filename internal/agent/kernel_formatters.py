"""Display formatters Hutch adds to every python kernel it starts.

They give what a cell displays two more MIME types, the ones E2B's code
interpreter clients read:

  e2b/chart  a matplotlib Figure described as data: its type (line,
             scatter, bar, pie, box_and_whisker, superchart or unknown),
             its title, axis labels and units, and its elements.
  e2b/data   a pandas DataFrame, as DataFrame.to_dict(orient="list").

The formatters know the types they format by module and name, so this
file imports neither matplotlib nor pandas: a kernel that never uses them
pays nothing, and one where they are not installed works as before. A
formatter that fails adds nothing to the output (it says why on the
kernel's own stderr), never an error to the cell.

The agent writes this file beside the kernel's connection file and runs it
at the kernel's start (kernel_jupyter.go), with runpy under the name
"hutch_formatters", so that nothing of it lands in the user's namespace.
"""

import datetime
import math
import numbers
import re
import sys

CHART_MIME = "e2b/chart"
DATA_MIME = "e2b/data"


def register(shell):
    """Adds the formatters to shell's display formatter."""
    from IPython.core.formatters import BaseFormatter
    from traitlets import ObjectName

    class ObjectFormatter(BaseFormatter):
        """Formats the types it is made for, named by module and name, as a
        JSON object.

        They are not among the formatter's printers (for_type_by_name):
        matplotlib's inline backend, once it starts, takes the printers for
        Figure out of every formatter. Printers a user adds still work.
        """

        print_method = ObjectName("_repr_hutch_unused_")  # no method of the objects' own
        _return_type = (dict,)

        def __init__(self, by_name, **kwargs):
            super().__init__(**kwargs)
            self.by_name = by_name

        def __call__(self, obj):
            if self.enabled:
                for cls in type(obj).__mro__:
                    fn = self.by_name.get((cls.__module__, cls.__name__))
                    if fn is not None:
                        return fn(obj)
            return super().__call__(obj)

    formatters = shell.display_formatter.formatters
    for mime, module, name, fn in (
        (CHART_MIME, "matplotlib.figure", "Figure", figure_chart),
        (DATA_MIME, "pandas.core.frame", "DataFrame", frame_data),
    ):
        formatters[mime] = ObjectFormatter(
            {(module, name): _quietly(mime, fn)}, parent=shell.display_formatter, format_type=mime
        )


def _quietly(mime, fn):
    """fn, giving None instead of raising: IPython would show the
    exception as the cell's error."""

    def quiet(obj):
        try:
            return fn(obj)
        except Exception as e:  # noqa: BLE001 -- any failure only drops the format
            print(f"hutch: no {mime} for a {type(obj).__name__}: {e!r}", file=sys.__stderr__)
            return None

    return quiet


# --- e2b/data ---------------------------------------------------------------


def frame_data(frame):
    """A DataFrame's columns, by name, as lists of JSON values."""
    return {str(name): [plain(v) for v in values] for name, values in frame.to_dict(orient="list").items()}


def plain(v):
    """v as a value JSON can carry: NaN and missing values are None,
    times are ISO 8601 text, numpy scalars Python's, anything else its
    text."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, str):
        return str(v)  # not numpy's str_
    pd = sys.modules.get("pandas")
    if pd is not None and (v is pd.NaT or v is pd.NA):
        return None
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        f = float(v)
        return f if math.isfinite(f) else None
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return v.isoformat()
    np = sys.modules.get("numpy")
    if np is not None:
        if isinstance(v, np.datetime64):
            return None if np.isnat(v) else str(np.datetime_as_string(v))
        if isinstance(v, np.generic) and not isinstance(v, np.timedelta64):
            return plain(v.item())
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return str(v)


# --- e2b/chart --------------------------------------------------------------


def figure_chart(fig):
    """A figure as a chart: {} when it has no Axes, the chart of its Axes
    when it has one, else a superchart of the charts of each."""
    axes = [ax for ax in fig.get_axes() if ax.get_visible()]
    if not axes:
        return {}
    if len(axes) == 1:
        return axes_chart(axes[0])
    title = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else ""
    return {"type": "superchart", "title": title, "elements": [axes_chart(ax) for ax in axes]}


def chart_type(ax):
    """The kind of chart an Axes draws, told by the artists on it."""
    from matplotlib.collections import PathCollection
    from matplotlib.patches import PathPatch, Rectangle, Wedge

    lines, collections, patches = list(ax.lines), list(ax.collections), list(ax.patches)

    def all_are(artists, cls):
        return bool(artists) and all(isinstance(a, cls) for a in artists)

    if lines and not collections and not patches:
        return "line"
    if all_are(patches, PathPatch) and lines and not collections:
        return "box_and_whisker"  # boxplot(patch_artist=True)
    if all_are(collections, PathCollection) and not patches:
        return "scatter"  # with lines too, as a fitted one
    if all_are(patches, Rectangle) and not collections and not lines:
        return "bar"
    if all_are(patches, Wedge) and not collections and not lines:
        return "pie"
    return "unknown"


def axes_chart(ax):
    """The chart one Axes draws."""
    kind = chart_type(ax)
    title = ax.get_title()
    if kind == "pie":
        return {"type": kind, "title": title, "elements": _pie_elements(ax)}
    if kind == "unknown":
        return {"type": kind, "title": title, "elements": []}
    chart = {"type": kind, "title": title}
    for name, label in (("x", ax.get_xlabel()), ("y", ax.get_ylabel())):
        chart[name + "_label"] = label
        chart[name + "_unit"] = _unit(label)
    if kind == "bar":
        chart["elements"] = _bar_elements(ax)
    elif kind == "box_and_whisker":
        chart["elements"] = _box_elements(ax)
    else:
        x, y = _Axis(ax.xaxis), _Axis(ax.yaxis)
        for name, axis in (("x", x), ("y", y)):
            chart[name + "_ticks"] = [axis.value(t) for t in axis.ticks]
            chart[name + "_tick_labels"] = axis.tick_labels
            chart[name + "_scale"] = axis.scale
        chart["elements"] = _point_elements(ax, kind, x, y)
    return chart


_UNIT = re.compile(r"[(\[]([^()\[\]]+)[)\]]")


def _unit(label):
    """The unit a label gives in parentheses or brackets: "s" of
    "time (s)"; None when it gives none."""
    found = _UNIT.findall(label or "")
    return found[-1].strip() if found else None


class _Axis:
    """One axis of an Axes: its scale, its ticks as drawn, and how a
    coordinate on it reads."""

    def __init__(self, axis):
        converter = axis.get_converter() if hasattr(axis, "get_converter") else axis.converter
        module, name = type(converter).__module__, type(converter).__name__
        self.categories = None
        if converter is None:
            self.scale = axis.get_scale()
        elif module.startswith("matplotlib.dates") or "Date" in name or "Period" in name:
            self.scale = "datetime"
        elif module.startswith("matplotlib.category"):
            self.scale = "categorical"
            units = axis.get_units()
            self.categories = {v: k for k, v in getattr(units, "_mapping", {}).items()}
        else:
            self.scale = axis.get_scale()
        # The ticks inside the view, with their labels as drawing makes
        # them (before a draw, the tick labels' texts are empty).
        locs = list(axis.get_majorticklocs())
        labels = axis.get_major_formatter().format_ticks(locs)
        lo, hi = sorted(axis.get_view_interval())
        slack = (hi - lo) * 1e-9
        kept = [(t, s) for t, s in zip(locs, labels) if lo - slack <= t <= hi + slack]
        self.ticks = [float(t) for t, _ in kept]
        self.tick_labels = [str(s) for _, s in kept]  # boxplot's are its positions

    def value(self, v):
        """A coordinate as a chart tells it: a date as ISO 8601 text, a
        category by its name, a number as a float."""
        v = plain(v)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if self.scale == "datetime":
                from matplotlib.dates import num2date

                d = num2date(v)  # in UTC, as matplotlib takes naive times to be
                return (d.replace(tzinfo=None) if d.utcoffset() == datetime.timedelta(0) else d).isoformat()
            if self.categories is not None and float(v).is_integer():
                return self.categories.get(int(v), v)
        return v

    def label_at(self, pos):
        """What the axis reads at pos: a category's name, the label of a
        tick there, else the number."""
        if self.categories is not None and float(pos).is_integer() and int(pos) in self.categories:
            return self.categories[int(pos)]
        for t, s in zip(self.ticks, self.tick_labels):
            if math.isclose(t, pos, rel_tol=1e-9, abs_tol=1e-9) and s:
                return s
        v = self.value(pos)
        return v if isinstance(v, str) else f"{v:g}"


def _label(artist):
    """An artist's label; "" for the ones matplotlib makes up ("_child0"),
    which it keeps out of legends too."""
    label = artist.get_label()
    return "" if label is None or str(label).startswith("_") else str(label)


def _point_elements(ax, kind, x, y):
    """Line charts: each line's points. Scatter charts: each collection's."""
    if kind == "line":
        series = [(_label(line), zip(line.get_xdata(), line.get_ydata())) for line in ax.lines]
    else:
        series = [(_label(c), c.get_offsets()) for c in ax.collections]
    return [{"label": label, "points": [[x.value(px), y.value(py)] for px, py in points]} for label, points in series]


def _bar_elements(ax):
    """Each bar: its label (where it stands on the other axis), its value
    and its group (the label of the bars it was drawn with)."""
    from matplotlib.container import BarContainer

    containers = [c for c in ax.containers if isinstance(c, BarContainer)]
    groups = [(_label(c), getattr(c, "orientation", None), list(c.patches)) for c in containers]
    grouped = {id(p) for _, _, patches in groups for p in patches}
    rest = [p for p in ax.patches if id(p) not in grouped]
    if rest:
        groups.append(("", None, rest))
    x, y = _Axis(ax.xaxis), _Axis(ax.yaxis)
    elements = []
    for group, orientation, patches in groups:
        for p in patches:
            if orientation == "horizontal":
                label, value = y.label_at(p.get_y() + p.get_height() / 2), p.get_width()
            else:
                label, value = x.label_at(p.get_x() + p.get_width() / 2), p.get_height()
            elements.append({"label": label, "value": plain(value), "group": group})
    return elements


def _pie_elements(ax):
    """Each wedge: its label, its angle in degrees and its radius."""
    return [
        {"label": _label(w), "angle": plain(abs(w.theta2 - w.theta1)), "radius": plain(w.r)}
        for w in ax.patches
    ]


def _box_elements(ax):
    """Each box of a boxplot drawn with patch_artist=True: the quartiles
    are the box's edges, the median the line across it, min and max the
    ends of its whiskers, the outliers the markers on its axis."""
    from matplotlib.patches import PathPatch

    x, y = _Axis(ax.xaxis), _Axis(ax.yaxis)
    elements = []
    for box in (p for p in ax.patches if isinstance(p, PathPatch)):
        verts = box.get_path().vertices
        stats = _box_stats(verts[:, 0], verts[:, 1], ax.lines, vertical=True)
        axis = x
        if stats is None:
            stats = _box_stats(verts[:, 1], verts[:, 0], ax.lines, vertical=False)
            axis = y
        if stats is None:
            continue
        center, stats = stats
        elements.append({"label": axis.label_at(center), **stats})
    return elements


def _box_stats(pos, val, lines, vertical):
    """The statistics of the box whose outline is at pos (across the
    axis of values) and val (along it), or None when no line across it
    is its median, as when the boxes are not drawn this way up."""
    lo, hi = float(min(pos)), float(max(pos))
    q1, q3 = float(min(val)), float(max(val))
    center = (lo + hi) / 2
    slack = max(hi - lo, q3 - q1, 1.0) * 1e-9

    def close(a, b):
        return abs(a - b) <= slack

    median, whiskers, outliers = None, [], []
    for line in lines:
        try:
            xs, ys = [float(v) for v in line.get_xdata()], [float(v) for v in line.get_ydata()]
        except (TypeError, ValueError):
            continue
        lp, lv = (xs, ys) if vertical else (ys, xs)
        if not lp:
            continue
        on_axis = all(close(p, center) for p in lp)
        in_box = lo - slack <= min(lp) <= max(lp) <= hi + slack and q1 - slack <= min(lv) <= max(lv) <= q3 + slack
        if on_axis and str(line.get_linestyle()).lower() in ("none", "", " "):
            outliers.extend(lv)
        elif len(lp) == 2 and close(lv[0], lv[1]) and in_box:
            median = lv[0]  # across the box
        elif on_axis and len(lp) == 2:
            whiskers.extend(lv)
    if median is None:
        return None
    return center, {
        "min": min(whiskers, default=q1),
        "first_quartile": q1,
        "median": median,
        "third_quartile": q3,
        "max": max(whiskers, default=q3),
        "outliers": outliers,
    }


if __name__ == "hutch_formatters":
    from IPython import get_ipython

    if get_ipython() is not None:
        register(get_ipython())
