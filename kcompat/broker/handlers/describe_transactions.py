"""DescribeTransactions (key 65), version 0: state, timeout, producer and partitions of
transactional ids (KIP-664, ``kafka-transactions describe``)."""

from kcompat.protocol.messages.describe_transactions import DescribeTransactionsResponse as R

API_KEY = 65
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, req):
    return ctx.broker.txn.describe_transactions(ctx, req)


def error_response(req, version, code):
    return R(transaction_states=[R.TransactionState(error_code=code, transactional_id=t, transaction_state="",
                                                    transaction_timeout_ms=0, transaction_start_time_ms=-1,
                                                    producer_id=-1, producer_epoch=-1, topics=[])
                                 for t in req.transactional_ids])
