"""AddOffsetsToTxn (key 25), versions 0-4: add a group's ``__consumer_offsets`` partition to the
transaction, before TxnOffsetCommit (``send_offsets_to_transaction``)."""

from kcompat.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnResponse as R

API_KEY = 25
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx, req):
    return ctx.broker.txn.add_offsets_to_txn(ctx, req)


def error_response(req, version, code):
    return R(error_code=code)
