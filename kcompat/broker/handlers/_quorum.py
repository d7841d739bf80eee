"""Shared by the KRaft RPC handlers of the controller listener: hand the request to this node's
metadata quorum (:class:`kcompat.broker.quorum.QuorumRuntime`) and answer with the Raft core's reply."""

from __future__ import annotations


def to_quorum(ctx, req):
    """The future of the Raft core's response to ``req``."""
    return ctx.services.quorum.handle_request(req)


def top_level_error(response_cls):
    """An ``error_response(req, version, code)`` setting only the top-level error code."""
    def error_response(req, version, code):
        return response_cls(error_code=code)
    return error_response
