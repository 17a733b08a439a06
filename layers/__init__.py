"""The Lambda dependency layer: `python layers/build.py` (see its docstring)."""
