"""Typed hyperparameters, `--hparams` overrides, and loading sets from gin files.

An `HParams` holds named values whose types are fixed by their defaults. Setting a field checks the type
(an int field refuses "x", a bool field refuses 3); unknown names raise an error listing the closest known
ones. A named set is a `.gin` file binding the `hparams` configurable:

    include 'transformer_base.gin'
    hparams.position_encoding = 'relative'
    hparams.max_relative_position = 16

`from_gin_files` parses such files (following `include`s) on top of `defaults.default_hparams()`.
"""

import contextlib
import copy
import io
import json
import logging
import os
import re
import tokenize

import gin

from t2t_relpos import errors

_TYPE_NAMES = {bool: "a bool", int: "an int", float: "a float", str: "a string", list: "a list"}


class HParams:
    """A typed bag of hyperparameters with attribute access.

    Example:

    >>> hp = HParams(hidden_size=512, dropout=0.1, position_encoding="relative")
    >>> hp.parse("hidden_size=1024,dropout=0.3").hidden_size
    1024
    """

    def __init__(self, choices=None, **values):
        object.__setattr__(self, "_values", {})
        object.__setattr__(self, "_types", {})
        object.__setattr__(self, "_choices", dict(choices or {}))
        object.__setattr__(self, "hparams_set", None)
        for name, value in values.items():
            self.add_hparam(name, value)

    # -- fields ------------------------------------------------------------------------------------------
    def add_hparam(self, name, value, choices=None):
        """Adds a new field; its type is the type of `value`."""
        if name in self._values:
            raise errors.HParamsError(f"hparam {name!r} already exists")
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
            raise errors.HParamsError(f"hparam names are lowercase identifiers, got {name!r}")
        kind = list if isinstance(value, (list, tuple)) else type(value)
        if kind not in _TYPE_NAMES:
            raise errors.HParamsError(
                f"hparam {name!r}: unsupported type {type(value).__name__} (use bool, int, float, str or list)")
        self._types[name] = kind
        if choices is not None:
            self._choices[name] = tuple(choices)
        self._values[name] = list(value) if kind is list else value
        self._check_choice(name, self._values[name])

    def set_hparam(self, name, value):
        """Sets an existing field, converting ints to floats where a float is expected."""
        kind = self._field_type(name)
        self._values[name] = _coerce(name, kind, value)
        self._check_choice(name, self._values[name])

    def __getattr__(self, name):
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        raise AttributeError(errors.unknown_name_message("hparam", name, values))

    def __setattr__(self, name, value):
        if name == "hparams_set":
            object.__setattr__(self, name, value)
        else:
            self.set_hparam(name, value)

    def __contains__(self, name):
        return name in self._values

    def get(self, name, default=None):
        return self._values.get(name, default)

    def values(self):
        """All fields as a plain dict (a copy)."""
        return copy.deepcopy(self._values)

    def copy(self):
        new = HParams(choices=self._choices)
        for name, value in self._values.items():
            new.add_hparam(name, copy.deepcopy(value))
        new.hparams_set = self.hparams_set
        return new

    def override(self, **values):
        for name, value in values.items():
            self.set_hparam(name, value)
        return self

    def diff(self, other):
        """Names whose values differ between `self` and `other` (fields missing on one side count)."""
        names = set(self._values) | set(other.values())
        return sorted(n for n in names if self.get(n, _MISSING) != other.get(n, _MISSING))

    def __eq__(self, other):
        return isinstance(other, HParams) and self._values == other.values()

    def __repr__(self):
        body = ", ".join(f"{k}={v!r}" for k, v in sorted(self._values.items()))
        return f"HParams({body})"

    # -- parsing -----------------------------------------------------------------------------------------
    def parse(self, overrides, flag="--hparams"):
        """Applies a `name=value,name=value` string (the `flag` it came from) and returns self.

        Values are read according to the field's type: `true`/`false` for bools, `[1,2]` for lists, strings
        with or without quotes. A field named twice is an error.
        """
        seen = set()
        for item in _split_items(overrides or ""):
            if "=" not in item:
                raise errors.HParamsError(f"malformed {flag} item {item!r}: expected name=value")
            name, text = (part.strip() for part in item.split("=", 1))
            kind = self._field_type(name)
            if name in seen:  # Keeping the last value silently would hide a typo in a long override list.
                raise errors.HParamsError(f"hparam {name!r} is set twice in {overrides!r}")
            seen.add(name)
            self.set_hparam(name, _parse_value(name, kind, text))
        return self

    def _field_type(self, name):
        if name not in self._types:
            raise errors.UnknownNameError(errors.unknown_name_message("hparam", name, self._types))
        return self._types[name]

    def _check_choice(self, name, value):
        choices = self._choices.get(name)
        if choices is not None and value not in choices:
            raise errors.HParamsError(
                f"hparam {name!r} must be one of {', '.join(map(repr, choices))}; got {value!r}")

    # -- serialisation -----------------------------------------------------------------------------------
    def to_json(self, indent=2):
        return json.dumps(self._values, indent=indent, sort_keys=True)

    def to_gin(self):
        """The values as a self-contained gin config (what `from_gin_files` reads back)."""
        lines = ["# Resolved hyperparameters" + (f" of '{self.hparams_set}'." if self.hparams_set else ".")]
        lines += [f"hparams.{name} = {value!r}" for name, value in sorted(self._values.items())]
        return "\n".join(lines) + "\n"


_MISSING = object()


def _coerce(name, kind, value):
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is list and isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, bool) and kind is not bool:
        ok = False
    else:
        ok = isinstance(value, kind)
    if not ok:
        raise errors.HParamsError(
            f"hparam {name!r} expects {_TYPE_NAMES[kind]}, got {value!r} ({type(value).__name__})")
    return value


def override_names(overrides):
    """The field names an override string `name=value,...` sets (as `HParams.parse` reads it)."""
    return {item.split("=", 1)[0].strip() for item in _split_items(overrides or "") if "=" in item}


def _split_items(text):
    """Splits on commas that are not inside brackets or quotes."""
    items, depth, quote, current = [], 0, None, []
    for char in text:
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth == 0:
            items.append("".join(current))
            current = []
            continue
        current.append(char)
    items.append("".join(current))
    return [item.strip() for item in items if item.strip()]


def _parse_value(name, kind, text):
    def fail():
        return errors.HParamsError(f"hparam {name!r} expects {_TYPE_NAMES[kind]}, got {text!r}")

    if kind is bool:
        lowered = text.lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
        raise fail()
    if kind is int:
        try:
            return int(text)
        except ValueError:
            raise fail() from None
    if kind is float:
        try:
            return float(text)
        except ValueError:
            raise fail() from None
    if kind is str:
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
            return text[1:-1]
        return text
    # Lists: elements are ints, floats or strings.
    if not (text.startswith("[") and text.endswith("]")):
        raise fail()
    return [_parse_scalar(t) for t in _split_items(text[1:-1])]


def _parse_scalar(text):
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text.strip("'\"")


# -- gin ---------------------------------------------------------------------------------------------------
_HERE = os.path.dirname(os.path.abspath(__file__))
_SEARCH_PATHS = []


@gin.configurable("hparams")
def _bound_values(**values):
    """The gin configurable behind the `hparams.<name> = <value>` bindings in `.gin` sets."""
    return values


def add_gin_search_path(path):
    """Lets `include 'name.gin'` find files in `path`."""
    path = os.path.abspath(path)
    if path not in _SEARCH_PATHS:
        _SEARCH_PATHS.append(path)
        gin.add_config_file_search_path(path)


add_gin_search_path(_HERE)


class _QuietIncludeSearch(logging.Filter):
    """Drops gin's "Path not found" error, logged for each search path an `include` is not in."""

    def filter(self, record):
        return not str(record.msg).startswith("Path not found")


@contextlib.contextmanager
def _isolated_gin():
    """Parses in a clean gin config and restores the caller's afterwards (gin's state is global)."""
    # pylint: disable=protected-access
    saved = (dict(gin.config._CONFIG), set(gin.config._IMPORTS), dict(gin.config._OPERATIVE_CONFIG))
    quiet = _QuietIncludeSearch()
    logging.getLogger().addFilter(quiet)
    with gin.unlock_config():
        gin.clear_config()
        try:
            yield
        finally:
            logging.getLogger().removeFilter(quiet)
            gin.clear_config()
            gin.config._CONFIG.update(saved[0])
            gin.config._IMPORTS.update(saved[1])
            gin.config._OPERATIVE_CONFIG.update(saved[2])


def gin_bindings(files=(), bindings=()):
    """The `hparams.*` values bound by gin `files` then `bindings`, as a dict.

    Raises:
        HParamsError: in one line naming the file (and line, where it can be told) of anything gin cannot read:
            a syntax error, a bracket or string never closed, an `import` that fails, an undefined `%MACRO`.
    """
    for path in files:
        if not os.path.isfile(path):  # Not "does not exist" for a directory or a pipe: say what it is.
            from t2t_relpos import files as paths  # pylint: disable=import-outside-toplevel

            raise errors.HParamsError(f"gin file {path} {paths.not_a_file(path)}")
    with _isolated_gin():
        current = None  # The --gin_file being parsed (None: the --gin_param bindings).
        try:
            for current in files:
                gin.parse_config_file(current)
            current = None
            gin.parse_config(list(bindings))
        except tokenize.TokenError as e:  # The file ends inside a bracket or a string: gin names no file.
            raise errors.HParamsError(_unclosed_message(current, e, bindings)) from None
        except Exception as e:  # pylint: disable=broad-except
            # gin's message goes on to name the file and line, and to quote it: one line for all of it. Any
            # exception, as a gin file's `import` runs the module it names, whose errors are the config's too.
            raise errors.HParamsError(f"gin config error: {_one_line(e)}") from None
        try:
            return _bound_values()
        except Exception as e:  # pylint: disable=broad-except
            # Values are computed only now: an undefined %MACRO is a TypeError of gin's `macro` without a file.
            raise errors.HParamsError(_evaluation_message(e, files, bindings)) from None


def _one_line(error):
    text = "; ".join(line.strip() for line in str(error).strip().splitlines() if line.strip())
    # gin's own errors say what they are; others (an import's) need their type to make sense.
    if not isinstance(error, (ValueError, IOError, SyntaxError, NameError, KeyError)):
        text = f"{type(error).__name__}: {text}"
    return text


def _unclosed_message(path, error, bindings):
    """One line for a `tokenize.TokenError` (the end comes inside brackets or a string) while parsing the gin
    file `path` (None: the --gin_param `bindings`), naming the bracket or string left open and its line."""
    if path is None:
        for binding in bindings:
            opened = _left_open(binding)
            if opened:
                return f"--gin_param={binding!r}: {opened[1]} is never closed"
        return f"--gin_param: a bracket or string is never closed ({_one_line(error)})"
    # An error in an included file carries gin's note of each `include` on the way: the last one names it.
    included = re.findall(r"""include ['"]([^'"]+)['"]""", str(error))
    if included:
        candidates = [os.path.join(base, included[-1]) for base in ["", *_SEARCH_PATHS]]
        path = next((c for c in candidates if os.path.isfile(c)), path)
    try:
        with open(path, encoding="utf-8") as f:
            opened = _left_open(f.read())
    except (OSError, UnicodeDecodeError):
        opened = None
    if opened:
        line, what = opened
        return f"gin file {path}, line {line}: {what} is never closed (the file ends inside it)"
    return f"gin file {path}: a bracket or string is never closed ({_one_line(error)})"


def _left_open(text):
    """`(line, description)` of the innermost bracket, or the string, open where `text` (gin, which Python's
    tokenizer reads) ends; None when it closes them all."""
    stack = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.OP and token.string in "([{":
                stack.append(token)
            elif token.type == tokenize.OP and token.string in ")]}" and stack:
                stack.pop()
    except tokenize.TokenError as e:
        if "string" in str(e.args[0]) and len(e.args) > 1:
            return e.args[1][0], "a string"
        if stack:
            return stack[-1].start[0], repr(stack[-1].string)
    except SyntaxError:
        pass
    return None


def _evaluation_message(error, files, bindings):
    """One line for an error raised while gin computes the bound values (after parsing)."""
    macro = re.search(r"configurable 'macro' .*in scope '([^']+)'", str(error).replace("\n", " "))
    if not macro:
        return f"gin config error: {_one_line(error)}"
    name = macro.group(1)
    used = re.compile("%" + re.escape(name) + r"(?![\w./])")
    where = "gin config"
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            line = next((n for n, text in enumerate(f, 1) if used.search(text.split("#", 1)[0])), None)
        if line:
            where = f"gin file {path}, line {line}"
            break
    else:
        binding = next((b for b in bindings if used.search(b)), None)
        if binding:
            where = f"--gin_param={binding!r}"
    return f"{where}: macro %{name} is used but never defined (define it with `{name} = <value>`)"


def from_gin_files(files=(), bindings=(), base=None):
    """Returns `base` (default: the package defaults) overridden by the gin `files` and `bindings`."""
    from t2t_relpos.hparams import defaults  # pylint: disable=import-outside-toplevel

    hp = base.copy() if base is not None else defaults.default_hparams()
    source = ", ".join([os.path.basename(f) for f in files] + list(bindings)) or "gin"
    for name, value in gin_bindings(files, bindings).items():
        if name not in hp:
            raise errors.UnknownNameError(
                f"{source}: " + errors.unknown_name_message("hparam", name, hp.values()))
        try:
            hp.set_hparam(name, value)
        except errors.HParamsError as e:
            raise errors.HParamsError(f"{source}: {e}") from None
    return hp
