"""OffsetCommit (key 8), versions 0-9: store committed offsets (with metadata and leader epoch)
in ``__consumer_offsets``; the response follows the append."""

from kcompat.protocol.messages.offset_commit import OffsetCommitResponse as R

API_KEY = 8
MIN_VERSION = 0
MAX_VERSION = 9


def handle(ctx, req):
    return ctx.broker.groups.offset_commit(ctx, req)


def error_response(req, version, code):
    return R(topics=[R.OffsetCommitResponseTopic(name=t.name, partitions=[
        R.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code) for p in t.partitions])
        for t in req.topics])
