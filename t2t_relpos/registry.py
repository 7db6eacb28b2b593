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
(`register_hparams_file`); the package's own sets are the `.gin` files in `hparams/`.
"""

import importlib
import importlib.util
import os
import re
import sys

from t2t_relpos import errors

_FIRST_CAP = re.compile(r"(.)([A-Z][a-z]+)")
_ALL_CAP = re.compile(r"([a-z0-9])([A-Z])")


def default_name(obj_or_name):
    """snake_case of a class or function name: `TransformerRel` -> `transformer_rel`."""
    name = obj_or_name if isinstance(obj_or_name, str) else obj_or_name.__name__
    return _ALL_CAP.sub(r"\1_\2", _FIRST_CAP.sub(r"\1_\2", name)).lower()


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
        if name in self._entries and not override and self._entries[name] != obj:
            raise errors.DuplicateNameError(
                f"{self.kind} {name!r} is already registered (by {_describe(self._entries[name])}); "
                "choose another name")
        self._entries[name] = obj

    def remove(self, name):
        self._entries.pop(name, None)

    def get(self, name):
        _load_builtins()
        try:
            return self._entries[name]
        except KeyError:
            raise errors.UnknownNameError(
                errors.unknown_name_message(self.kind, name, self._entries)) from None

    def names(self):
        _load_builtins()
        return sorted(self._entries)

    def __contains__(self, name):
        _load_builtins()
        return name in self._entries


def _describe(obj):
    if isinstance(obj, str):
        return obj
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


def help_string():
    """Everything registered, grouped by kind, as `--registry_help` prints it."""
    lines = []
    for title, names in (("Problems", list_problems()), ("Models", list_models()),
                         ("Hparams sets", list_hparams())):
        lines.append(f"{title} ({len(names)}):")
        lines.extend(f"  {n}" for n in names)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


_BUILTINS_LOADED = False


def _load_builtins():
    """Imports the package's own registrations once (lazily, to keep `--help` fast)."""
    global _BUILTINS_LOADED
    if _BUILTINS_LOADED:
        return
    _BUILTINS_LOADED = True
    for module in ("t2t_relpos.hparams", "t2t_relpos.models", "t2t_relpos.problems"):
        importlib.import_module(module)


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
        _import_file(path)
    elif os.path.isfile(os.path.join(path, "__init__.py")):
        parent, package = os.path.split(path)
        if parent not in sys.path:
            sys.path.insert(0, parent)
        importlib.import_module(package)
    elif os.path.isdir(path):
        for entry in sorted(os.listdir(path)):
            if entry.endswith(".py"):
                _import_file(os.path.join(path, entry))
    else:
        raise errors.T2TRelposError(f"--usr_dir must be a .py file or a directory, got {path}")

    from t2t_relpos.hparams import hparams_lib  # pylint: disable=import-outside-toplevel

    hparams_lib.add_gin_search_path(directory)
    for entry in sorted(os.listdir(directory)):
        if entry.endswith(".gin"):
            register_hparams_file(os.path.join(directory, entry))


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
