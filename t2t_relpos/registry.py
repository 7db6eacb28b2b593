"""Names -> problems, models and hparams sets, in the manner of tensor2tensor's registry.

Register with decorators, with or without an explicit name (the default is the snake_case of the class or
function name):

    from t2t_relpos import registry

    @registry.register_problem
    class MyCopyTask(problem.Problem): ...          # registered as "my_copy_task"

    @registry.register_hparams("transformer_wide_rel")
    def my_hparams():
        hp = registry.hparams("transformer_base_rel")
        hp.hidden_size = 1024
        return hp

Look names up with `problem(name)`, `model(name)` and `hparams(name)`; an unknown name raises
`UnknownNameError` listing the closest registered names. Hparams sets can also be `.gin` files
(`register_hparams_file`); the package's own sets are the `.gin` files in `hparams/`. `help_string()` lists
them all, grouped, each with its description (wrapped); it imports neither Keras nor TensorFlow (the package's
models are registered by name and imported when first looked up).
"""

import ast
import importlib
import importlib.util
import inspect
import os
import re
import sys
import textwrap
import threading
import traceback

from t2t_relpos import errors

_FIRST_CAP = re.compile(r"(.)([A-Z][a-z]+)")
_ALL_CAP = re.compile(r"([a-z0-9])([A-Z])")


def default_name(obj_or_name):
    """snake_case of a class or function name: `TransformerRel` -> `transformer_rel`."""
    name = obj_or_name if isinstance(obj_or_name, str) else obj_or_name.__name__
    return _ALL_CAP.sub(r"\1_\2", _FIRST_CAP.sub(r"\1_\2", name)).lower()


class _Lazy:
    """A registration by module and attribute name, imported when first looked up: the package's models, so
    that listing names (`--registry_help`) does not import Keras and TensorFlow. Importing the module registers
    the object itself (its decorator), in place of this."""

    def __init__(self, module, attribute):
        self.module = module
        self.attribute = attribute

    def load(self):
        return getattr(importlib.import_module(self.module), self.attribute)

    def names(self, obj):
        """Whether `obj` is the object this names."""
        return getattr(obj, "__module__", None) == self.module and getattr(obj, "__qualname__", None) == self.attribute

    def docstring(self):
        """The class's or function's docstring, read from the module's source without importing it."""
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), *self.module.split(".")[1:]) + ".py"
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
        except (OSError, SyntaxError):
            return ""
        for node in tree.body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == self.attribute:
                return ast.get_docstring(node) or ""
        return ""

    def __repr__(self):
        return f"{self.module}.{self.attribute}"


class Registry:
    """A mapping from names to objects of one kind, with helpful errors."""

    def __init__(self, kind):
        self.kind = kind
        self._entries = {}

    def register(self, name_or_obj=None, *, override=False):
        """Decorator: `@reg.register`, `@reg.register()` or `@reg.register("name")`."""

        def decorate(obj, name=None):
            self.add(name or default_name(obj), obj, override=override)
            return obj

        if name_or_obj is None or isinstance(name_or_obj, str):
            return lambda obj: decorate(obj, name_or_obj)
        return decorate(name_or_obj)

    def add(self, name, obj, *, override=False):
        if not re.fullmatch(r"[a-z0-9_]+", name):
            raise errors.T2TRelposError(f"{self.kind} names are snake_case ([a-z0-9_]+), got {name!r}")
        earlier = self._entries.get(name)
        if isinstance(earlier, _Lazy) and earlier.names(obj):
            earlier = obj  # The package's own object, imported: it takes the place of its name.
        if name in self._entries and not override and earlier != obj:
            raise errors.DuplicateNameError(
                f"{self.kind} {name!r} is already registered (by {_describe(self._entries[name])}); "
                "choose another name")
        self._entries[name] = obj

    def remove(self, name):
        self._entries.pop(name, None)

    def get(self, name):
        _load_builtins()
        try:
            entry = self._entries[name]
        except KeyError:
            raise errors.UnknownNameError(
                errors.unknown_name_message(self.kind, name, self._entries)) from None
        if isinstance(entry, _Lazy):
            entry = self._entries[name] = entry.load()
        return entry

    def names(self):
        _load_builtins()
        return sorted(self._entries)

    def __contains__(self, name):
        _load_builtins()
        return name in self._entries


def _describe(obj):
    if isinstance(obj, (str, _Lazy)):
        return str(obj)
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


PROBLEMS = Registry("problem")
MODELS = Registry("model")
HPARAMS = Registry("hparams set")

register_problem = PROBLEMS.register
register_model = MODELS.register
register_hparams = HPARAMS.register


def register_hparams_file(path, name=None, *, override=False):
    """Registers a `.gin` file as an hparams set named after the file (`transformer_big_rel.gin`)."""
    path = os.path.abspath(path)
    name = name or os.path.splitext(os.path.basename(path))[0]
    HPARAMS.add(name, path, override=override)
    return name


def problem(name):
    """Returns a new instance of the registered problem `name`."""
    return PROBLEMS.get(name)()


def model(name):
    """Returns the registered model class `name`."""
    return MODELS.get(name)


def hparams(name):
    """Returns a fresh `HParams` for the registered set `name` (a function or a `.gin` file)."""
    from t2t_relpos.hparams import hparams_lib  # pylint: disable=import-outside-toplevel

    entry = HPARAMS.get(name)
    if isinstance(entry, str):
        hp = hparams_lib.from_gin_files([entry])
    else:
        hp = entry()
        if not isinstance(hp, hparams_lib.HParams):
            raise errors.T2TRelposError(
                f"hparams set {name!r} ({_describe(entry)}) returned {type(hp).__name__}, not HParams")
    hp.hparams_set = name
    return hp


def list_problems():
    return PROBLEMS.names()


def list_models():
    return MODELS.names()


def list_hparams():
    return HPARAMS.names()


# --registry_help: problems by where they come from, translation first; hparams sets by their model family.
_PROBLEM_GROUPS = (("t2t_relpos.problems.translate", "Translation (datagen prepares them; your own text: "
                                                     "translate_local)"),
                   ("t2t_relpos.problems.algorithmic", "Algorithmic (generated on the fly, nothing to prepare)"),
                   ("t2t_relpos.problems.learning_to_execute", "Learning to Execute (generated programs and digit "
                                                               "strings, nothing to prepare)"),
                   ("t2t_relpos.problems.languagemodel", "Language models (no inputs; datagen prepares them; your "
                                                         "own text: languagemodel_local)"),
                   ("t2t_relpos.problems.lambada", "The UT paper's language-model tasks (their published files "
                                                   "in --data_dir)"),
                   ("t2t_relpos.problems.agreement", "The UT paper's language-model tasks (their published files "
                                                     "in --data_dir)"),
                   ("t2t_relpos.problems.babi", "bAbI question answering"))
_HPARAMS_GROUPS = (("adaptive_universal_transformer", "Adaptive Universal Transformer (ACT)"),
                   ("universal_transformer", "Universal Transformer (fixed number of steps)"),
                   ("transformer", "Transformer"))
_BABI_NAME = re.compile(r"babi_qa_(?P<layout>[a-z]+)_(?P<tasks>all_tasks|task\d+|single_task\d+)_(?P<subset>\w+)")
_LINE_WIDTH = 120


def description(entry):
    """One line about a registered object: its docstring's first sentence (a `.gin` set: its opening comment's),
    or ""."""
    if isinstance(entry, _Lazy):
        text = entry.docstring()
    elif isinstance(entry, str):
        text = _gin_comment(entry)
    else:
        text = inspect.getdoc(entry) or ""
    paragraph = " ".join(text.strip().split("\n\n")[0].split())
    paragraph = re.sub(r"\s*\(see [^)]*\)", "", paragraph)  # Pointers to more text: not in one line.
    match = re.match(r"(.+?[.!?])(\s+[A-Z]|$)", paragraph)  # Not at "et al. 2017".
    return match.group(1) if match else paragraph


def _gin_comment(path):
    lines = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.startswith("#"):
                    break
                lines.append(line.lstrip("#").strip())
    except OSError:
        pass
    return " ".join(lines)


def _rows(names, entries, indent="    "):
    """A row per name: the name, then its whole description, wrapped at words to fit `_LINE_WIDTH` and continued
    under itself (cut to one line, the sets' descriptions ended where they differ: "relative positions (k =...")."""
    width = max(len(name) for name in names) + 2
    column = len(indent) + width
    rows = []
    for name in names:
        lines = textwrap.wrap(description(entries[name]), _LINE_WIDTH - column, break_on_hyphens=False) or [""]
        rows.append(f"{indent}{name:<{width}}{lines[0]}".rstrip())
        rows.extend(" " * column + line for line in lines[1:])
    return rows


def _grouped(names, group_of, groups):
    """[(title, names)] in the order of `groups`, then what belongs to none ("Others")."""
    found = {title: [] for _, title in groups}
    others = []
    for name in names:
        title = group_of(name)
        (found[title] if title else others).append(name)
    result = [(title, members) for title, members in found.items() if members]
    return result + ([("Others (e.g. from --usr_dir)", others)] if others else [])


def _problem_group(name):
    module = getattr(PROBLEMS._entries[name], "__module__", "")  # pylint: disable=protected-access
    return next((title for prefix, title in _PROBLEM_GROUPS if module.startswith(prefix)), None)


def _hparams_group(name):
    entry = HPARAMS._entries[name]  # pylint: disable=protected-access
    if not isinstance(entry, str) or os.path.dirname(entry) != _builtin_hparams_dir():
        return None
    return next((title for prefix, title in _HPARAMS_GROUPS if name.startswith(prefix + "_")), None)


def _builtin_hparams_dir():
    return os.path.dirname(importlib.import_module("t2t_relpos.hparams").__file__)


def _babi_rows(names, entries):
    """The bAbI family in a few lines: how many, the pattern of their names, and an example of each kind."""
    parts = {"layout": set(), "tasks": set(), "subset": set()}
    kinds = {}  # all_tasks, task, single_task: an example of each (the last name: facts layout, 1k).
    listed = []
    for name in names:
        match = _BABI_NAME.fullmatch(name)
        if not match:
            listed.append(name)
            continue
        for part, value in match.groupdict().items():
            parts[part].add(re.sub(r"\d+$", "<N>", value) if part == "tasks" else value)
        kinds[re.sub(r"\d+$", "", match["tasks"])] = name
    numbers = sorted({int(n) for n in re.findall(r"task(\d+)_", " ".join(names))})
    order = {"all_tasks": 0, "task<N>": 1, "single_task<N>": 2}
    rows = [f"    {len(names) - len(listed)} problems named babi_qa_<layout>_<tasks>_<subset>:",
            f"      layout {' or '.join(sorted(parts['layout']))}; tasks "
            f"{', '.join(sorted(parts['tasks'], key=lambda t: order.get(t, 3)))}"
            + (f" (N = {numbers[0]}..{numbers[-1]})" if numbers else "")
            + f"; subset {' or '.join(sorted(parts['subset'], key=len))}. For example:"]
    examples = [kinds[kind] for kind in sorted(kinds, key=lambda k: order.get(k + "<N>", order.get(k, 3)))]
    return rows + _rows(examples + listed, entries, indent="      ")


def help_string():
    """Everything registered, as `--registry_help` prints it: problems (translation first; the bAbI family in a
    few lines), models and hparams sets, grouped, each with its description."""
    _load_builtins()
    # pylint: disable=protected-access
    lines = [f"Problems ({len(PROBLEMS._entries)}), for --problem:"]
    for title, names in _grouped(list_problems(), _problem_group, _PROBLEM_GROUPS):
        lines.append(f"  {title}:")
        if title == _PROBLEM_GROUPS[-1][1]:
            lines.extend(_babi_rows(names, PROBLEMS._entries))
        else:
            lines.extend(_rows(names, PROBLEMS._entries))
    lines += ["", f"Models ({len(MODELS._entries)}), for --model (default: the hparams set's):"]
    lines.extend(_rows(list_models(), MODELS._entries, indent="  "))
    lines += ["", f"Hparams sets ({len(HPARAMS._entries)}), for --hparams_set; in the names, *_rel: relative "
                  "positions; tiny, cpu: small, for a CPU;", "base, big: the papers' sizes; babi: encoder-only, for "
                  "the bAbI problems:"]
    for title, names in _grouped(list_hparams(), _hparams_group, _HPARAMS_GROUPS):
        lines.append(f"  {title}:")
        lines.extend(_rows(names, HPARAMS._entries))
    return "\n".join(lines) + "\n"


_BUILTINS_STARTED = False  # Set before the imports, so that a lookup made while they run returns at once.
_BUILTINS_READY = False
# Held while the builtins load: a lookup from another thread waits for all of them (without it, the second of two
# threads looking up a problem at once found the flag set and the registry still empty).
_BUILTINS_LOCK = threading.RLock()
# The package's models, registered by name until imported (t2t_relpos.models registers the same names).
_BUILTIN_MODELS = {
    "transformer": ("t2t_relpos.models.transformer", "Transformer"),
    "transformer_encoder": ("t2t_relpos.models.encoder_classifier", "TransformerEncoderClassifier"),
    "universal_transformer": ("t2t_relpos.models.universal_transformer", "UniversalTransformer"),
    "universal_transformer_encoder": ("t2t_relpos.models.encoder_classifier",
                                      "UniversalTransformerEncoderClassifier"),
}


def _load_builtins():
    """Registers the package's own problems, hparams sets and models once (lazily, to keep `--help` fast; the
    models by name, so that Keras and TensorFlow are imported only when one is looked up). Thread-safe."""
    global _BUILTINS_STARTED, _BUILTINS_READY
    if _BUILTINS_READY:
        return
    with _BUILTINS_LOCK:
        if _BUILTINS_STARTED:  # Loaded by another thread meanwhile, or being loaded by this one (a lookup at import).
            return
        _BUILTINS_STARTED = True
        for module in ("t2t_relpos.hparams", "t2t_relpos.problems"):
            importlib.import_module(module)
        for name, (module, attribute) in _BUILTIN_MODELS.items():
            MODELS._entries.setdefault(name, _Lazy(module, attribute))  # pylint: disable=protected-access
        _BUILTINS_READY = True


_USR_DIRS = []


def usr_dirs():
    """The `--usr_dir` paths imported so far (absolute), which a run records as needed to read it back."""
    return list(_USR_DIRS)


def import_usr_dir(path):
    """Imports a user's registrations: a `.py` or `.gin` file, a package, or a directory of modules.

    `.gin` files found in a directory (or beside the file) are registered as hparams sets too, and the
    directory is added to gin's include search path so they can `include` each other.
    """
    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.exists(path):
        raise errors.T2TRelposError(f"--usr_dir {path} does not exist")
    if path not in _USR_DIRS:
        _USR_DIRS.append(path)
    _load_builtins()
    directory = path if os.path.isdir(path) else os.path.dirname(path)
    if path.endswith(".gin") and os.path.isfile(path):
        pass  # A lone hparams set: registered with the directory's other .gin files below.
    elif path.endswith(".py") and os.path.isfile(path):
        _run_user_code(path, _import_file, path)
    elif os.path.isfile(os.path.join(path, "__init__.py")):
        parent, package = os.path.split(path)
        if parent not in sys.path:
            sys.path.insert(0, parent)
        _run_user_code(path, importlib.import_module, package)
    elif os.path.isdir(path):
        for entry in sorted(os.listdir(path)):
            if entry.endswith(".py"):
                _run_user_code(path, _import_file, os.path.join(path, entry))
    else:
        raise errors.T2TRelposError(f"--usr_dir must be a .py file or a directory, got {path}")

    from t2t_relpos.hparams import hparams_lib  # pylint: disable=import-outside-toplevel

    hparams_lib.add_gin_search_path(directory)
    for entry in sorted(os.listdir(directory)):
        if entry.endswith(".gin"):
            register_hparams_file(os.path.join(directory, entry))


def _run_user_code(usr_dir, load, *args):
    """`load(*args)`, importing the user's code of `usr_dir`; what it raises (a syntax error, an import that fails,
    any exception at import) becomes one line naming the user's file and line, not a traceback."""
    try:
        return load(*args)
    except errors.T2TRelposError:  # Already one line of the package's (e.g. a name registered twice).
        raise
    except Exception as e:  # pylint: disable=broad-except
        raise errors.T2TRelposError(f"cannot import --usr_dir={usr_dir}: {_user_code_error(usr_dir, e)}") from None


def _user_code_error(usr_dir, error):
    """`<file>, line <n>: <Type>: <message>` for `error`, raised by importing the user's code in `usr_dir`: where
    a syntax error is, else the last line of the user's own files on its way (their call of what failed)."""
    message = "; ".join(line.strip() for line in str(error).splitlines() if line.strip())
    if isinstance(error, SyntaxError):
        where = f"{error.filename}, line {error.lineno}" if error.filename else None
        message = error.msg
    else:
        root = usr_dir if os.path.isdir(usr_dir) else os.path.dirname(usr_dir)
        own = [frame for frame in traceback.extract_tb(error.__traceback__)
               if os.path.abspath(frame.filename).startswith(os.path.join(root, ""))]
        where = f"{own[-1].filename}, line {own[-1].lineno}" if own else None
    what = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return f"{where}: {what}" if where else what


def _import_file(path):
    name = "t2t_relpos_usr." + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        del sys.modules[name]
        raise
    return module
