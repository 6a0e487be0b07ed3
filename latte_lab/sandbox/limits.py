"""Resource limits of one sandboxed run, each default with the reason it is that size."""

from __future__ import annotations

from dataclasses import dataclass

from latte_lab.errors import ConfigError

SCRIPT_TIMEOUT_SECONDS = 60  # an agent's analysis script; the released code had no timeout at all
TEST_TIMEOUT_SECONDS = 300  # a whole pytest run of a task suite (hidden suites run ~50 tests)
SIGTERM_GRACE_SECONDS = 1.0  # time to exit cleanly after SIGTERM before SIGKILL
CPU_LIMIT_SECONDS = 300  # RLIMIT_CPU per process; also capped at the call's timeout + 1 s
CPU_LIMIT_SLACK_SECONDS = 1  # CPU limit = timeout + this, so the wall timeout normally fires first
ADDRESS_SPACE_BYTES = 2 * 2**30  # RLIMIT_AS: numpy+pandas+matplotlib+pytest fit in well under 1 GiB
FILE_SIZE_BYTES = 64 * 2**20  # RLIMIT_FSIZE: no task deliverable is anywhere near this size
MAX_PROCESSES = 128  # room for a multiprocessing pool; a fork bomb beyond this is stopped
OUTPUT_CAPTURE_BYTES = 2**20  # per stream kept in memory (head half + tail half), the rest elided
DISK_BYTES = 256 * 2**20  # a workspace's files; task workspaces hold well under 1 MiB, data dumps a few MiB
TMP_BYTES = 64 * 2**20  # a run's temporary directory (pytest's tmp_path, matplotlib's font cache)
SHM_BYTES = 64 * 2**20  # a run's /dev/shm (multiprocessing's semaphores and shared arrays)


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one sandboxed run. ``None`` leaves a limit unset."""

    cpu_seconds: int | None = CPU_LIMIT_SECONDS
    """RLIMIT_CPU per process; the call additionally caps it at ``ceil(timeout) + 1``."""
    address_space_bytes: int | None = ADDRESS_SPACE_BYTES
    """RLIMIT_AS: allocations beyond it raise MemoryError in the child instead of swapping the host."""
    file_size_bytes: int | None = FILE_SIZE_BYTES
    """RLIMIT_FSIZE: a runaway writer gets EFBIG instead of filling the disk."""
    max_processes: int | None = MAX_PROCESSES
    """Processes (and threads) of one run at once: the ``pids.max`` of a pids cgroup of the run's own where one
    can be made (root, or a delegated cgroup), which holds for root too; elsewhere RLIMIT_NPROC on top of what
    the user already runs. The parent also counts the run's processes and stops the run beyond it."""
    output_bytes: int = OUTPUT_CAPTURE_BYTES
    """Bytes kept per output stream (first half + last half)."""
    sigterm_grace_seconds: float = SIGTERM_GRACE_SECONDS
    """Time between SIGTERM and SIGKILL at a timeout."""
    disk_bytes: int | None = DISK_BYTES
    """Size of the workspace during a run: a hard cap (tmpfs) in the bubblewrap sandbox; on the local
    backend the run is stopped when the workspace grows past it (checked a few times a second)."""
    tmp_bytes: int | None = TMP_BYTES
    """Size of the run's temporary directory, capped the same way."""
    loopback: bool = False
    """Bubblewrap only: keep the sandbox's own loopback interface up, for tasks whose code talks to a
    server it starts itself. The host's network, its loopback included, stays out of reach either way."""

    def __post_init__(self) -> None:
        for name in ("cpu_seconds", "address_space_bytes", "file_size_bytes", "max_processes", "disk_bytes", "tmp_bytes"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ConfigError(f"SandboxLimits.{name} must be a positive int or None, got {value!r}")
        if not isinstance(self.output_bytes, int) or self.output_bytes < 2:
            raise ConfigError(f"SandboxLimits.output_bytes must be an int >= 2, got {self.output_bytes!r}")
        if self.sigterm_grace_seconds < 0:
            raise ConfigError("SandboxLimits.sigterm_grace_seconds must be >= 0")
