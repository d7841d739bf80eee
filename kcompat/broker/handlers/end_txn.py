"""EndTxn (key 26), versions 0-5: commit or abort the producer's transaction.

The response follows the durable PrepareCommit/PrepareAbort record; the markers are then written
to every partition of the transaction and the transaction completes (KIP-98). v5 is a
transaction.version 2 client's (KIP-890 part 2): the coordinator bumps the producer epoch (a new
producer id when the epochs run out) and the response carries the producer id and epoch to use;
v0-4 keep the older semantics, also on a TV2 cluster (Kafka decides by the request version).

With an authorizer WRITE on the transactional id is required (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""

from kcompat.broker.authz import Op, TRANSACTIONAL_ID
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.end_txn import EndTxnResponse as R

API_KEY = 26
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx, req):
    if not ctx.authorize(Op.WRITE, TRANSACTIONAL_ID, req.transactional_id):
        return error_response(req, ctx.api_version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    return ctx.services.txn.end_txn(ctx, req)


def error_response(req, version, code):
    return R(error_code=code, producer_id=-1, producer_epoch=-1)
