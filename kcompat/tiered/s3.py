"""The S3-compatible remote storage backend (KIP-405 ``RemoteStorageManager``) over obstore
(the Rust ``object_store`` crate's Python binding: signing, retries, multipart uploads).

Objects are named as :class:`~kcompat.tiered.storage.SegmentKey` says, under ``prefix`` in
``bucket``. A plain ``http://`` endpoint (a test server, MinIO without TLS) is allowed; path-style
requests are used whenever an endpoint is given. Requests time out after
:data:`REQUEST_TIMEOUT` and are retried :data:`MAX_RETRIES` times within :data:`RETRY_TIMEOUT`: a
store that is down makes the copier back off (its own retry schedule) rather than hang.
"""

from __future__ import annotations

from datetime import timedelta

import obstore
from obstore.store import S3Store

from kcompat.tiered.storage import (
    IndexType, RemoteResourceNotFoundError, RemoteStorageError, RemoteStorageManager, SegmentData, SegmentKey,
)

REQUEST_TIMEOUT = "30s"
CONNECT_TIMEOUT = "5s"
MAX_RETRIES = 2
RETRY_TIMEOUT = timedelta(seconds=20)


class S3Storage(RemoteStorageManager):
    """Remote segments in ``bucket`` (which must exist). ``endpoint_url`` for S3-compatible
    servers (None: AWS), ``region``, static credentials (None: obstore's usual sources, e.g.
    ``AWS_ACCESS_KEY_ID``), ``prefix`` prepended to every object name."""

    def __init__(self, bucket: str, *, endpoint_url: str | None = None, region: str = "us-east-1",
                 access_key_id: str | None = None, secret_access_key: str | None = None, prefix: str = "") -> None:
        kwargs: dict = {"region": region}
        if endpoint_url:
            kwargs["endpoint"] = endpoint_url
            kwargs["virtual_hosted_style_request"] = False
        if access_key_id and secret_access_key:
            kwargs["access_key_id"] = access_key_id
            kwargs["secret_access_key"] = secret_access_key
        client = {"timeout": REQUEST_TIMEOUT, "connect_timeout": CONNECT_TIMEOUT}
        if endpoint_url and endpoint_url.startswith("http://"):
            client["allow_http"] = True
        self.bucket = bucket
        self.prefix = prefix
        self._store = S3Store(bucket, client_options=client, retry_config={
            "max_retries": MAX_RETRIES, "retry_timeout": RETRY_TIMEOUT,
            "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=2),
                        "base": 2}}, **kwargs)

    def _name(self, key: SegmentKey, suffix: str) -> str:
        return self.prefix + key.object_name(suffix)

    async def copy_log_segment_data(self, key: SegmentKey, data: SegmentData) -> None:
        for suffix, src in data.objects():
            await self._call(obstore.put_async(self._store, self._name(key, suffix), src),
                             f"uploading {self._name(key, suffix)}")

    async def fetch_log_segment(self, key: SegmentKey, start_position: int, end_position: int | None = None) -> bytes:
        name = self._name(key, "log")
        if end_position is None:
            result = await self._call(obstore.get_async(self._store, name, options={"range": {"offset": start_position}}),
                                      f"reading {name}")
            return bytes(await self._call(result.bytes_async(), f"reading {name}"))
        if end_position <= start_position:
            return b""
        return bytes(await self._call(obstore.get_range_async(self._store, name, start=start_position, end=end_position),
                                      f"reading {name} [{start_position}, {end_position})"))

    async def fetch_index(self, key: SegmentKey, index_type: IndexType) -> bytes:
        name = self._name(key, index_type.value)
        result = await self._call(obstore.get_async(self._store, name), f"reading {name}")
        return bytes(await self._call(result.bytes_async(), f"reading {name}"))

    async def delete_log_segment_data(self, key: SegmentKey) -> None:
        for suffix in ("log", *(t.value for t in IndexType)):
            try:
                await self._call(obstore.delete_async(self._store, self._name(key, suffix)), "deleting")
            except RemoteResourceNotFoundError:
                pass

    @staticmethod
    async def _call(awaitable, what: str):
        try:
            return await awaitable
        except FileNotFoundError as e:
            raise RemoteResourceNotFoundError(f"{what}: {e}") from e
        except Exception as e:   # obstore's errors (network, HTTP status) and OSError
            raise RemoteStorageError(f"{what}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from e
