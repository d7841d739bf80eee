"""ListTransactions (key 66), versions 0-2: transactional ids with their producer and state,
filtered by state, producer id, (v1) minimum duration and (v2) a regular expression the
transactional id matches (KIP-664, KIP-994, KIP-1152).

With an authorizer only transactional ids the principal may DESCRIBE are listed.
"""

from kcompat.broker.authz import Op, TRANSACTIONAL_ID, then
from kcompat.protocol.messages.list_transactions import ListTransactionsResponse as R

API_KEY = 66
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx, req):
    return then(ctx.services.txn.list_transactions(ctx, req), lambda resp: _describable(ctx, resp))


def _describable(ctx, resp):
    """Only the transactions whose transactional id the principal may DESCRIBE (Kafka)."""
    resp.transaction_states = [s for s in resp.transaction_states
                               if ctx.authorize(Op.DESCRIBE, TRANSACTIONAL_ID, s.transactional_id)]
    return resp


def error_response(req, version, code):
    return R(error_code=code, unknown_state_filters=[], transaction_states=[])
