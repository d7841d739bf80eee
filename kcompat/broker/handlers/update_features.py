"""UpdateFeatures (key 57), versions 0-2: change finalized feature levels (KIP-584, KIP-778,
KIP-1022; ``kafka-features.sh upgrade / downgrade / disable``, ``Admin.updateFeatures``).

Runs on the active controller, forwarded there by other nodes like the other controller-bound
admin requests (Kafka's ``ControllerApis.handleUpdateFeatures`` and ``QuorumController.
updateFeatures``); the rules are :func:`kcompat.kraft.feature_control.update_features`. As in
Kafka 4.3 the request succeeds or fails as a whole: the first failing feature's error
(INVALID_UPDATE_VERSION) is the top-level error, with the message ``The update failed for all
features since the following feature had an error: <reason>`` and no per-feature results; on
success v0-v1 list every feature with NONE (message ``NONE``, Kafka's ``Errors.NONE.message()``),
v2 has no results (KIP-1022). A v0 request's ``AllowDowngrade`` is not read (Kafka's controller
takes the UpgradeType field, UPGRADE before v1). ``ValidateOnly`` (v1+) writes nothing.

ALTER on the cluster is required (CLUSTER_AUTHORIZATION_FAILED, ``Cluster authorization
failed.``); errors of the whole request carry no results, as Kafka's ``getErrorResponse``.
"""

from __future__ import annotations

from kcompat.broker.authz import Op
from kcompat.kraft import feature_control
from kcompat.protocol.errors import ErrorCode, KafkaError, default_message
from kcompat.protocol.messages.update_features import UpdateFeaturesResponse as R

API_KEY = 57
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx, req):
    if not ctx.authorize_cluster(Op.ALTER):
        return error_response(req, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                              default_message(ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    return ctx.services.controller_service.handle(ctx, req, lambda: _local(ctx, req), error_response)


def _local(ctx, req) -> R:
    """On the active controller (inside ControllerService.run)."""
    version = ctx.api_version
    updates = [feature_control.Update(u.feature, u.max_version_level, u.upgrade_type if version >= 1
                                      else feature_control.UPGRADE) for u in req.feature_updates]
    try:
        ctx.services.controller.update_features(updates, validate_only=bool(req.validate_only),
                                                now_ms=ctx.services.now_ms())
    except KafkaError as e:
        return R(throttle_time_ms=0, error_code=e.code, error_message=feature_control.ALL_FAILED + e.message)
    resp = R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None)
    if version <= 1:
        resp.results = [R.UpdatableFeatureResult(feature=u.feature, error_code=ErrorCode.NONE, error_message="NONE")
                        for u in req.feature_updates]
    return resp


def error_response(req, version, code, message: str | None = None) -> R:
    """The whole request failed with ``code`` (Kafka's ``UpdateFeaturesRequest.getErrorResponse``:
    no per-feature results)."""
    return R(throttle_time_ms=0, error_code=code, error_message=message)
