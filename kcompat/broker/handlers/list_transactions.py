"""ListTransactions (key 66), versions 0-1: transactional ids with their producer and state,
filtered by state, producer id and (v1) minimum duration (KIP-664, KIP-994)."""

from kcompat.protocol.messages.list_transactions import ListTransactionsResponse as R

API_KEY = 66
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx, req):
    return ctx.broker.txn.list_transactions(ctx, req)


def error_response(req, version, code):
    return R(error_code=code, unknown_state_filters=[], transaction_states=[])
