"""The package version, read by setup.py and exposed as `t2t_relpos.__version__`."""

__version__ = "0.1.0"
