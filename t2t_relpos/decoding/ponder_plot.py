"""A heatmap of ponder time per input position, like Figure 3 of the Universal Transformer paper.

Needs matplotlib (`pip install 't2t-relpos[plot]'`); it is imported only when a plot is written, through its
object-oriented API (no pyplot, so no global state and no display is touched).
"""

import os

import numpy as np

# Figures stay within this many inches (at the default 120 dpi: 1920 x 1440 pixels) whatever the input length;
# beyond LABELLED_CELLS positions the cells lose their text and the axis its per-position ticks.
MAX_WIDTH_INCHES = 16.0
MAX_HEIGHT_INCHES = 12.0
LABELLED_CELLS = 40


def _matplotlib():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # pylint: disable=import-outside-toplevel
        from matplotlib.figure import Figure  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise ImportError("writing a ponder-time heatmap needs matplotlib: pip install 't2t-relpos[plot]' "
                          "(or pip install matplotlib)") from e
    return Figure, FigureCanvasAgg


def write_ponder_heatmap(tokens, ponder_times, path, title="Ponder time per input position", dpi=120):
    """Writes a PNG: one row per sequence, one cell per token, coloured by its ponder time (N + R).

    Read it as in the paper's Figure 3: darker cells are positions the adaptive Universal Transformer
    thought about for more recurrent steps before halting; each cell is labelled with its token and value
    when the rows have at most `LABELLED_CELLS` positions. The figure never exceeds `MAX_WIDTH_INCHES` x
    `MAX_HEIGHT_INCHES`: long inputs get narrower cells, not a wider picture.

    Args:
        tokens: One sequence of token strings, or a list of them (one per row; rows may differ in length).
        ponder_times: `[L]` or `[rows, L']` (numpy or tensor) with L' >= each row's length; values beyond a
            row's tokens (padding) are ignored.
        path: Output file (`.png`); its directory is created if needed.
        title: Figure title.
        dpi: Resolution.

    Returns:
        `path`.

    Raises:
        ImportError: matplotlib is not installed.
        ValueError: the tokens and ponder times do not match.
    """
    if tokens and isinstance(tokens[0], str):
        tokens = [tokens]
    times = np.asarray(ponder_times, dtype=np.float64)
    if times.ndim == 1:
        times = times[None]
    if times.ndim != 2 or times.shape[0] != len(tokens):
        raise ValueError(f"ponder_times of shape {np.shape(ponder_times)} do not match {len(tokens)} "
                         "token sequence(s)")
    width = max((len(row) for row in tokens), default=0)
    if width == 0:
        raise ValueError("nothing to plot: no tokens")
    if width > times.shape[1]:
        raise ValueError(f"a row has {width} tokens but ponder_times has only {times.shape[1]} positions")
    grid = np.full((len(tokens), width), np.nan)
    for r, row in enumerate(tokens):
        grid[r, :len(row)] = times[r, :len(row)]

    figure_class, canvas_class = _matplotlib()
    size = (min(MAX_WIDTH_INCHES, max(4.0, 0.6 * width + 1.5)),
            min(MAX_HEIGHT_INCHES, max(1.8, 0.6 * len(tokens) + 1.2)))
    figure = figure_class(figsize=size, dpi=dpi)
    canvas_class(figure)
    axes = figure.add_subplot(1, 1, 1)
    finite = grid[np.isfinite(grid)]
    image = axes.imshow(np.ma.masked_invalid(grid), cmap="Blues", aspect="auto", vmin=0.0,
                        vmax=max(float(finite.max()), 1.0))
    if width <= LABELLED_CELLS and len(tokens) <= LABELLED_CELLS:
        middle = 0.5 * float(finite.max())
        for r, row in enumerate(tokens):
            for c, token in enumerate(row):
                colour = "white" if grid[r, c] > middle else "black"
                axes.text(c, r, f"{token}\n{grid[r, c]:.2f}", ha="center", va="center", fontsize=7, color=colour)
    x_ticks = _ticks(width)
    axes.set_xticks(x_ticks)
    axes.set_xticklabels([str(i) for i in x_ticks], fontsize=7)
    y_ticks = _ticks(len(tokens))
    axes.set_yticks(y_ticks)
    axes.set_yticklabels([str(i) for i in y_ticks], fontsize=7)
    axes.set_xlabel("input position")
    axes.set_ylabel("sequence")
    axes.set_title(title, fontsize=9)
    figure.colorbar(image, ax=axes, label="ponder time (N + R)")
    return _save(figure, path)


def write_ponder_bars(labels, ponder_times, path, title="Ponder time per fact", dpi=120):
    """Writes a PNG with one horizontal bar per position, labelled by its text (a bAbI fact or question).

    The paper's Figure 3 view of one story: which facts the adaptive Universal Transformer pondered longest.
    Long labels are shortened and a long story gets thinner bars; the figure stays within the size limits.

    Args:
        labels: The text of each position.
        ponder_times: `[len(labels)]` ponder times (N + R).
        path: Output file (`.png`).
        title: Figure title.
        dpi: Resolution.

    Returns:
        `path`.
    """
    times = np.asarray(ponder_times, dtype=np.float64).reshape(-1)
    if not len(labels) or times.shape[0] != len(labels):
        raise ValueError(f"{times.shape[0]} ponder times for {len(labels)} labels")
    figure_class, canvas_class = _matplotlib()
    height = min(MAX_HEIGHT_INCHES, max(2.0, 0.25 * len(labels) + 1.2))
    figure = figure_class(figsize=(9.0, height), dpi=dpi)
    canvas_class(figure)
    axes = figure.add_subplot(1, 1, 1)
    positions = np.arange(len(labels))
    axes.barh(positions, times, color="tab:blue")
    fontsize = max(3.0, min(8.0, 72.0 * (height - 1.2) / max(len(labels), 1) * 0.8))
    axes.set_yticks(positions)
    axes.set_yticklabels([_shorten(label) for label in labels], fontsize=fontsize)
    axes.invert_yaxis()  # The story reads top to bottom.
    axes.set_xlabel("ponder time (N + R)")
    axes.set_title(title, fontsize=9)
    return _save(figure, path)


def _ticks(count, most=20):
    """At most `most` evenly spaced tick positions in [0, count)."""
    step = max(1, int(np.ceil(count / most)))
    return list(range(0, count, step))


def _shorten(text, limit=48):
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _save(figure, path):
    figure.tight_layout()
    if hasattr(path, "write"):  # A binary file object (the decoder's, renamed into place when whole).
        figure.savefig(path, format="png")
        return path
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    figure.savefig(path, format="png")
    return path
