"""Docker helpers for the container tests: the base image built from Debian's packages, the kcompat
image built from this checkout's Dockerfile, and containers waited on through their health check.

No image registry is reachable here, so the base image is ``debootstrap --variant=minbase`` of
Debian bookworm (python3, python3-venv, ca-certificates) imported as ``kcompat-test-base``. Package
downloads during ``docker build`` use the host's network (``--network host``) and must trust the CA
bundle pip on the host is configured with (``pip config list``): the tests put that bundle into the
base image and point ``PIP_CERT`` at it there, so the Dockerfile stays what a user anywhere builds.
(A build secret would need BuildKit, and this machine's docker CLI has no buildx: it builds with the
classic builder, which neither takes ``--secret`` nor mounts files into ``RUN``.)
Both images are kept between runs (a new base only when none exists; the kcompat image rebuilt on
every run, its dependency layer reused from Docker's cache). Builds hold a lock file so that two
test runs on one machine do not build at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kcompat.testing.ports import machine_lock

ROOT = Path(__file__).resolve().parents[2]
BASE_IMAGE = "kcompat-test-base"
# the image a user builds with `docker build -t kcompat .`; the README's testcontainers snippet uses it
USER_IMAGE = "kcompat:latest"


def docker(*args: str, timeout: float = 300, check: bool = True, **kw) -> subprocess.CompletedProcess:
    """Run the docker CLI; raises AssertionError with its output when ``check`` and it fails."""
    result = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, **kw)
    if check and result.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def pip_ca_bundle() -> Path:
    """The CA bundle pip on this machine uses: its configured ``cert`` (``pip config list``), else
    the ``PIP_CERT``/``SSL_CERT_FILE`` environment, else OpenSSL's default file."""
    out = subprocess.run(["python3", "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if key.endswith(".cert") and value.strip("'\" "):
            return Path(value.strip("'\" "))
    for var in ("PIP_CERT", "SSL_CERT_FILE"):
        if os.environ.get(var):
            return Path(os.environ[var])
    return Path(ssl.get_default_verify_paths().openssl_cafile)


def ensure_base_image() -> str:
    """``kcompat-test-base``: Debian bookworm minbase with python3 and venv, built once per machine."""
    with machine_lock("docker-base"):
        if docker("image", "inspect", BASE_IMAGE, check=False).returncode == 0:
            return BASE_IMAGE
        with tempfile.TemporaryDirectory(prefix="kcompat-rootfs-") as tmp:
            rootfs = Path(tmp) / "rootfs"
            subprocess.run(["debootstrap", "--variant=minbase", "--include=python3,python3-venv,ca-certificates",
                            "bookworm", str(rootfs), "http://deb.debian.org/debian"],
                           check=True, capture_output=True, timeout=900)
            shutil.copyfile(pip_ca_bundle(), rootfs / "etc/ssl/certs/ca-certificates.crt")
            tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
            docker("import", "--change", "ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt", "-", BASE_IMAGE,
                   stdin=tar.stdout)
            tar.stdout.close()
            assert tar.wait() == 0
            subprocess.run(["rm", "-rf", str(rootfs)], check=False)
        return BASE_IMAGE


def build_image() -> str:
    """The kcompat image of this checkout on the test base image; returns its tag (one per
    checkout, so that checkouts side by side on one machine test their own code)."""
    base = ensure_base_image()
    tag = f"kcompat-test:{hashlib.sha1(str(ROOT).encode()).hexdigest()[:10]}"
    with machine_lock("docker-build"):
        docker("build", "--network", "host", "--build-arg", f"BASE={base}", "-t", tag, str(ROOT), timeout=900)
    return tag


@contextmanager
def as_user_image(tag: str) -> Iterator[str]:
    """``kcompat:latest``, the name the README's ``docker build -t kcompat .`` gives, is ``tag``
    for the block. Every checkout on the machine names its image so when it runs the README as
    written, so the block holds the build lock: no other run re-tags it in between."""
    with machine_lock("docker-build"):
        docker("tag", tag, USER_IMAGE)
        yield USER_IMAGE


def health(container: str) -> str:
    """The container's health status (``starting``, ``healthy``, ``unhealthy``), or "" without one."""
    return docker("inspect", "--format", "{{if .State.Health}}{{.State.Health.Status}}{{end}}", container,
                  check=False).stdout.strip()


def wait_healthy(*containers: str, timeout: float = 120) -> None:
    """Until every container's health check passes; AssertionError with the logs if one exits or
    the deadline passes."""
    deadline = time.monotonic() + timeout
    pending = list(containers)
    while pending:
        for c in list(pending):
            if health(c) == "healthy":
                pending.remove(c)
            elif docker("inspect", "--format", "{{.State.Running}}", c, check=False).stdout.strip() != "true":
                raise AssertionError(f"container {c} is not running:\n{logs(c)}")
        if pending and time.monotonic() > deadline:
            raise AssertionError(f"containers {pending} not healthy after {timeout} s:\n" +
                                 "\n".join(logs(c) for c in pending))
        if pending:
            time.sleep(0.25)


def logs(container: str) -> str:
    """The container's output, stdout then stderr."""
    r = docker("logs", container, check=False)
    return r.stdout + r.stderr


def volume_digest(volume: str, image: str) -> dict[str, str]:
    """sha256 of every file in a volume (read by a throwaway container of ``image``)."""
    script = ("import hashlib, json, os\n"
              "out = {}\n"
              "for d, _, files in os.walk('/v'):\n"
              "    for f in files:\n"
              "        p = os.path.join(d, f)\n"
              "        out[p] = hashlib.sha256(open(p, 'rb').read()).hexdigest()\n"
              "print(json.dumps(out))\n")
    r = docker("run", "--rm", "--user", "root", "-v", f"{volume}:/v", "--entrypoint", "python3", image, "-c", script)
    return json.loads(r.stdout)
