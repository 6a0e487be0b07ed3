"""A trial's workspace: confined file access and the write log (:mod:`.files`), AST symbol diffs
(:mod:`.symbols`). Scripts and tests run through :mod:`latte_lab.sandbox`.

>>> import tempfile
>>> ws = Workspace(tempfile.mkdtemp())
>>> ws.write("pkg/mod.py", "def f():\\n    return 1\\n", agent="Dev1", round=1).symbols
('f',)
"""

from latte_lab.workspace.files import STDLIB_SHADOW_NAMES, Workspace, WriteRecord
from latte_lab.workspace.symbols import FILE_SYMBOL, MODULE_SYMBOL, changed_symbols, extract_symbols

__all__ = [
    "FILE_SYMBOL",
    "MODULE_SYMBOL",
    "STDLIB_SHADOW_NAMES",
    "Workspace",
    "WriteRecord",
    "changed_symbols",
    "extract_symbols",
]
