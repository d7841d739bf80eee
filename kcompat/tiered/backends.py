"""Pick the remote storage backend from the broker config (KIP-405's
``remote.log.storage.manager.class.name``; its own settings carry the
``remote.log.storage.manager.impl.prefix``, default ``rsm.config.``):

- unset, ``local``, or ``kcompat.tiered.storage.LocalFileSystemStorage``: the local filesystem
  backend in ``rsm.config.dir`` (default: ``<first log dir>-remote-storage``; every broker of a
  cluster must name the same shared directory);
- ``s3`` or ``kcompat.tiered.s3.S3Storage``: an S3-compatible store (:mod:`kcompat.tiered.s3`;
  ``rsm.config.s3.bucket`` required, ``s3.endpoint.url``, ``s3.region``, ``s3.access.key.id``,
  ``s3.secret.access.key``, ``s3.prefix`` optional).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from kcompat.tiered.storage import LocalFileSystemStorage, RemoteStorageManager

LOCAL_NAMES = {None, "", "local", "kcompat.tiered.storage.LocalFileSystemStorage"}
S3_NAMES = {"s3", "kcompat.tiered.s3.S3Storage"}


def storage_from_config(get: Callable[[str], object], log_dirs: list[Path]) -> RemoteStorageManager:
    """The backend ``get`` (the broker config's typed getter) names. Raises ValueError for an
    unknown class name or a missing required setting."""
    name = get("remote.log.storage.manager.class.name")
    prefix = str(get("remote.log.storage.manager.impl.prefix") or "")

    def setting(key: str) -> str | None:
        value = get(prefix + key)
        return None if value is None else str(value)
    if name in LOCAL_NAMES:
        root = setting("dir") or f"{Path(log_dirs[0]).resolve()}-remote-storage"
        return LocalFileSystemStorage(Path(root))
    if name in S3_NAMES:
        from kcompat.tiered.s3 import S3Storage   # aiobotocore is imported only when used
        bucket = setting("s3.bucket")
        if not bucket:
            raise ValueError(f"{prefix}s3.bucket is required with remote.log.storage.manager.class.name={name}")
        return S3Storage(bucket, endpoint_url=setting("s3.endpoint.url"), region=setting("s3.region") or "us-east-1",
                         access_key_id=setting("s3.access.key.id"), secret_access_key=setting("s3.secret.access.key"),
                         prefix=setting("s3.prefix") or "")
    raise ValueError(f"unknown remote.log.storage.manager.class.name {name!r}: kcompat has 'local' and 's3'")
