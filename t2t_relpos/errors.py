"""Errors a user can cause and fix: the command-line tools report them in one line and exit with status 2."""

import difflib


class T2TRelposError(Exception):
    """An error in the user's request (a name, a flag, a file), not in the package."""


class UnknownNameError(T2TRelposError, LookupError):
    """A problem, model, hparams set or hparams field that is not known."""


class DuplicateNameError(T2TRelposError, ValueError):
    """A name registered twice."""


class HParamsError(T2TRelposError, ValueError):
    """Malformed or mistyped hyperparameter overrides, or a clash with a stored run."""


class DataError(T2TRelposError):
    """Missing or malformed data, with instructions on what to put where."""


def close_matches(name, candidates, n=5):
    """Returns up to `n` of `candidates` that look like `name`, best first."""
    candidates = list(candidates)
    matches = difflib.get_close_matches(name, candidates, n=n, cutoff=0.5)
    # Also offer names that contain the query or are contained in it ("big_rel" -> "transformer_big_rel").
    for candidate in sorted(candidates):
        if len(matches) >= n:
            break
        if candidate not in matches and (name in candidate or candidate in name):
            matches.append(candidate)
    return matches


def unknown_name_message(kind, name, candidates):
    """`unknown <kind> 'name'; did you mean 'a', 'b'?` (or the full list when nothing is close)."""
    matches = close_matches(name, candidates)
    if matches:
        hint = "did you mean " + ", ".join(repr(m) for m in matches) + "?"
    elif candidates:
        hint = "known: " + ", ".join(sorted(candidates))
    else:
        hint = "none are registered"
    return f"unknown {kind} {name!r}; {hint}"
