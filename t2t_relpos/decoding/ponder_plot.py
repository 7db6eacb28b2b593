"""A heatmap of ponder time per input position, like Figure 3 of the Universal Transformer paper.

Needs matplotlib (`pip install 't2t-relpos[plot]'`); it is imported only when a plot is written, through its
object-oriented API (no pyplot, so no global state and no display is touched).
"""

import os

import numpy as np


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
    thought about for more recurrent steps before halting; each cell is labelled with its token and value.

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
    figure = figure_class(figsize=(max(4.0, 0.6 * width + 1.5), max(1.8, 0.6 * len(tokens) + 1.2)), dpi=dpi)
    canvas_class(figure)
    axes = figure.add_subplot(1, 1, 1)
    finite = grid[np.isfinite(grid)]
    image = axes.imshow(np.ma.masked_invalid(grid), cmap="Blues", aspect="auto", vmin=0.0,
                        vmax=max(float(finite.max()), 1.0))
    middle = 0.5 * float(finite.max())
    for r, row in enumerate(tokens):
        for c, token in enumerate(row):
            colour = "white" if grid[r, c] > middle else "black"
            axes.text(c, r, f"{token}\n{grid[r, c]:.2f}", ha="center", va="center", fontsize=7, color=colour)
    axes.set_xticks(range(width))
    axes.set_xticklabels([str(i) for i in range(width)], fontsize=7)
    axes.set_yticks(range(len(tokens)))
    axes.set_yticklabels([str(i) for i in range(len(tokens))], fontsize=7)
    axes.set_xlabel("input position")
    axes.set_ylabel("sequence")
    axes.set_title(title, fontsize=9)
    figure.colorbar(image, ax=axes, label="ponder time (N + R)")
    figure.tight_layout()
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    figure.savefig(path, format="png")
    return path
