"""AddOffsetsToTxn (key 25), versions 0-4: add a group's ``__consumer_offsets`` partition to the
transaction, before TxnOffsetCommit (``send_offsets_to_transaction``).

With an authorizer WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and READ on the group
(GROUP_AUTHORIZATION_FAILED) are required.
"""

from kcompat.broker.authz import GROUP, Op, TRANSACTIONAL_ID
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnResponse as R

API_KEY = 25
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx, req):
    if not ctx.authorize(Op.WRITE, TRANSACTIONAL_ID, req.transactional_id):
        return error_response(req, ctx.api_version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.authorize(Op.READ, GROUP, req.group_id):
        return error_response(req, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return ctx.services.txn.add_offsets_to_txn(ctx, req)


def error_response(req, version, code):
    return R(error_code=code)
