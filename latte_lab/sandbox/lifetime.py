"""What sandboxed runs keep alive between them, owned by one object: :class:`Sandbox`.

A workspace's runs may leave a kept sandbox behind for the next (bubblewrap's warm sandboxes,
:mod:`latte_lab.sandbox.warm`), and a process keeps fork servers (:mod:`latte_lab.sandbox.zygote`, among them
the trusted evaluation server of hidden evaluations, or on bubblewrap its kept sandbox) and staging
directories (:mod:`latte_lab.sandbox.stage`). Trials and sweeps release them through this class
alone, so how a run is made fast can change without them knowing.

>>> import tempfile
>>> with Sandbox(tempfile.mkdtemp()) as sandbox:
...     pass           # the workspace's runs happen here; leaving stops what they kept
>>> Sandbox.close_all()  # every server and staging directory of this process (a sweep worker, at its end)
"""

from __future__ import annotations

from pathlib import Path


class Sandbox:
    """The lifetime of what the runs in the workspace ``root`` keep between them; ``close()`` (or leaving
    the ``with`` block) stops it. Closing twice is harmless."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop the kept sandboxes of this workspace that no run is using (the next run starts a new one)."""
        from latte_lab.sandbox.warm import release

        release(self.root)

    @staticmethod
    def close_all() -> None:
        """Stop every fork server (the trusted evaluation server too) and kept sandbox of this process and
        remove its staging directories (a process that skips atexit, as a sweep's worker does, calls this at
        its end)."""
        from latte_lab.sandbox.stage import remove_stage
        from latte_lab.sandbox.warm import shutdown
        from latte_lab.sandbox.zygote import shutdown_zygotes

        shutdown_zygotes()
        shutdown()
        remove_stage()
