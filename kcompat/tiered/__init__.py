"""Tiered storage (KIP-405): remote storage backends, remote log segment metadata and its
``__remote_log_metadata`` record format. The asyncio task that copies, expires and reads remote
segments lives in :mod:`kcompat.broker.remote_log`; this package does no Kafka networking.

- :mod:`kcompat.tiered.storage`: the ``RemoteStorageManager``-like interface and the local
  filesystem backend (the embedded default).
- :mod:`kcompat.tiered.s3`: the S3-compatible backend (aiobotocore).
- :mod:`kcompat.tiered.metadata`: ``RemoteLogSegmentMetadata``, the per-partition state built by
  replaying ``__remote_log_metadata`` records, their serde and partitioner.
"""
