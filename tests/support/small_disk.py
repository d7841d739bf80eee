"""A small disk for storage-fault tests: a tmpfs of a few MB mounted by the test, filled until
writes fail with ENOSPC, and freed again.

Two ways to get one, chosen automatically:

- as root (here and in CI): ``mount -t tmpfs -o size=N tmpfs <dir>``; the test and the brokers
  use ``<dir>`` directly;
- otherwise (or with ``KCOMPAT_SMALL_DISK=userns``): a holder process started with
  ``unshare --user --map-root-user --mount`` mounts the tmpfs in a private mount namespace, where
  an unprivileged user may mount a tmpfs. Brokers run in that namespace (``nsenter``, see
  :attr:`SmallDisk.command_prefix` and :class:`SmallDiskBroker`) and the test reaches the files
  through ``/proc/<holder pid>/root<dir>`` (:attr:`SmallDisk.path`).

Either way :attr:`SmallDisk.mountpoint` is the path a broker is given (``log.dirs``) and
:attr:`SmallDisk.path` the same directory as this process sees it.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
from pathlib import Path

from tests.support.broker_process import ROOT, BrokerProcess

FILLER = ".filler"


class SmallDisk:
    """A tmpfs of ``size`` bytes mounted at ``base/mnt`` (``base`` must exist and must not be on
    the tmpfs). Use as a context manager; :meth:`close` unmounts (stop the brokers first)."""

    def __init__(self, base: Path, size: int, *, mode: str | None = None) -> None:
        self.base = Path(base)
        self.size = size
        self.mountpoint = self.base / "mnt"
        self.mode = mode or os.environ.get("KCOMPAT_SMALL_DISK") or ("mount" if os.geteuid() == 0 else "userns")
        self._holder: subprocess.Popen | None = None
        self.mounted = False

    # -- mounting -----------------------------------------------------------------------------------
    def __enter__(self) -> "SmallDisk":
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        opts = f"size={self.size},mode=0755"
        if self.mode == "mount":
            subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(self.mountpoint)], check=True,
                           capture_output=True, timeout=30)
        elif self.mode == "userns":
            script = f'mount -t tmpfs -o {opts} tmpfs "$1" && echo mounted && exec sleep 100000'
            self._holder = subprocess.Popen(
                ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, "sh",
                 str(self.mountpoint)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            line = self._holder.stdout.readline() if self._holder.stdout else ""
            if line.strip() != "mounted":
                err = self._holder.stderr.read() if self._holder.stderr else ""
                self._holder.kill()
                raise RuntimeError(f"could not mount a tmpfs in a user namespace: {err}")
        else:
            raise ValueError(f"unknown small disk mode {self.mode!r}")
        self.mounted = True
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if not self.mounted:
            return
        self.mounted = False
        if self._holder is not None:
            self._holder.send_signal(signal.SIGKILL)
            self._holder.wait()
            return
        if subprocess.run(["umount", str(self.mountpoint)], capture_output=True).returncode != 0:
            # still busy (files this process keeps open): detach it now, the memory goes with the
            # last open file
            subprocess.run(["umount", "-l", str(self.mountpoint)], capture_output=True, check=True)

    # -- paths --------------------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        """The mount point as this process sees it."""
        if self._holder is not None:
            return Path(f"/proc/{self._holder.pid}/root") / str(self.mountpoint).lstrip("/")
        return self.mountpoint

    @property
    def command_prefix(self) -> list[str]:
        """What to put before a command so that it runs where the tmpfs is mounted."""
        if self._holder is None:
            return []
        return ["nsenter", f"--target={self._holder.pid}", "--user", "--mount", "--preserve-credentials", "--"]

    # -- space --------------------------------------------------------------------------------------
    def free_bytes(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def fill(self, leave: int = 0) -> int:
        """Write a filler file until the tmpfs is full (ENOSPC), then give back ``leave`` bytes
        (rounded up to whole pages). Returns the filler's size. Files that other processes keep
        growing may still fill the rest of their last page."""
        path = self.path / FILLER
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for chunk in (1 << 20, 1 << 12, 1):
                block = b"\0" * chunk
                while True:
                    try:
                        os.write(fd, block)
                    except OSError as e:
                        if e.errno != errno.ENOSPC:
                            raise
                        break
            size = os.fstat(fd).st_size
            if leave:
                page = os.sysconf("SC_PAGE_SIZE")
                size = max(0, size - (leave + page - 1) // page * page)
                os.ftruncate(fd, size)
            return size
        finally:
            os.close(fd)

    def free(self) -> None:
        """Remove the filler: the space it took is free again."""
        try:
            os.unlink(self.path / FILLER)
        except FileNotFoundError:
            pass

    def copy_out(self, src: str, dst: Path) -> None:
        """Copy ``<mount>/<src>`` (a directory) to ``dst`` outside the tmpfs."""
        shutil.copytree(self.path / src, dst)


class SmallDiskBroker(BrokerProcess):
    """A :class:`BrokerProcess` started where ``disk`` is mounted, with ``log.dirs`` (and its
    own log file, outside the tmpfs) set from ``disk``."""

    def __init__(self, disk: SmallDisk, overrides: dict[str, str] | None = None, *,
                 subdir: str = "data", log_path: Path | None = None) -> None:
        super().__init__(disk.mountpoint / subdir, overrides,
                         log_path=log_path or disk.base / f"{subdir}-broker.log")
        self.disk = disk

    def args(self) -> list[str]:
        return self.disk.command_prefix + super().args()

    def run_to_exit(self, timeout: float = 60.0) -> tuple[int, str]:
        """Start the broker when it is expected not to come up; returns its exit status and
        everything it logged."""
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        proc = subprocess.run(self.args(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env=env, cwd=str(ROOT), timeout=timeout)
        with open(self.log_path, "a") as f:
            f.write(proc.stderr)
        return proc.returncode, proc.stderr

    def wait_exit(self, timeout: float = 30.0) -> int:
        """Wait for the process to exit by itself (a halt); returns its exit status."""
        assert self.proc is not None
        rc = self.proc.wait(timeout)
        try:   # anything the broker left in its session (it starts one of its own)
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc = None
        return rc
