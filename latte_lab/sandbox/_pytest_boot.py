"""Start pytest in a sandboxed run as ``python -m pytest`` does, reporting failures at a fraction of the cost.

Usage: ``python .../latte_lab/sandbox/_pytest_boot.py <pytest arguments>`` (by path, like
:mod:`latte_lab.sandbox._child`; inside bubblewrap it is bound read-only into the sandbox). It puts the
working directory first on ``sys.path`` where ``python -m`` puts it, applies
:func:`share_statement_trees`, and runs pytest's ``__main__`` through ``runpy`` exactly as ``-m`` does, so
``sys.argv``, ``__main__`` and the exit status are those of ``python -m pytest``. The fork server
(``_zygote_server.py``) loads this file for the same function and never runs :func:`main`.

Only the standard library and pytest are imported; nothing from latte_lab.
"""

import os
import sys


def share_statement_trees() -> None:
    """Parse a module's source once per run for all of its traceback entries.

    To print a failure pytest finds the statement around each traceback line by parsing the *whole*
    file and walking its syntax tree, and it keeps that tree for one failure only: a run with 30 failing
    tests parsed the test file and the module under test 30 times each (about half of such a run's CPU).
    Here the tree is kept per source text for the life of the process, so the report is the same text,
    made with one parse per file. Where pytest's internals differ (another version) nothing is changed.
    """
    import ast
    import warnings

    try:
        from _pytest._code import code as code_module
        from _pytest._code import source as source_module
    except ImportError:
        return
    original = getattr(source_module, "getstatementrange_ast", None)
    if original is None or getattr(code_module, "getstatementrange_ast", None) is not original:
        return
    trees: dict = {}

    def getstatementrange_ast(lineno, source, assertion=False, astnode=None):
        if astnode is None:
            content = str(source)
            astnode = trees.get(content)
            if astnode is None:
                with warnings.catch_warnings():  # as pytest: no duplicate warnings from compiling
                    warnings.simplefilter("ignore")
                    astnode = ast.parse(content, "source", "exec")
                trees[content] = astnode
        return original(lineno, source, assertion, astnode)

    source_module.getstatementrange_ast = getstatementrange_ast
    code_module.getstatementrange_ast = getstatementrange_ast


def main() -> None:
    sys.path[0] = os.getcwd()  # where ``python -m`` puts the working directory (not this file's directory)
    import runpy

    share_statement_trees()
    runpy.run_module("pytest", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
