"""DescribeTransactions (key 65), version 0: state, timeout, producer and partitions of
transactional ids (KIP-664, ``kafka-transactions describe``).

With an authorizer DESCRIBE on each transactional id is required (TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
partitions of topics without DESCRIBE are left out.
"""

from kcompat.broker.authz import Op, TOPIC, TRANSACTIONAL_ID, answer_denied, then
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.describe_transactions import DescribeTransactionsResponse as R

API_KEY = 65
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, req):
    denied = [(t, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED) for t in req.transactional_ids
              if not ctx.authorize(Op.DESCRIBE, TRANSACTIONAL_ID, t)]
    return answer_denied(ctx, req, "transactional_ids", denied, error_response, "transaction_states",
                         lambda: then(ctx.services.txn.describe_transactions(ctx, req), lambda r: _topics_described(ctx, r)))


def _topics_described(ctx, resp):
    """A transaction's partitions of topics the principal may not DESCRIBE are left out (Kafka)."""
    for state in resp.transaction_states:
        state.topics = [t for t in state.topics or [] if ctx.authorize(Op.DESCRIBE, TOPIC, t.topic)]
    return resp


def error_response(req, version, code):
    return R(transaction_states=[R.TransactionState(error_code=code, transactional_id=t, transaction_state="",
                                                    transaction_timeout_ms=0, transaction_start_time_ms=-1,
                                                    producer_id=-1, producer_epoch=-1, topics=[])
                                 for t in req.transactional_ids])
