"""The benchmark scripts as modules, for the tests that check them (benchmarks/ is a folder, not a package)."""

import importlib.util
import os

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def load(name):
    """benchmarks/NAME.py, loaded as the module `benchmark_NAME`."""
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", os.path.join(BENCHMARKS, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
