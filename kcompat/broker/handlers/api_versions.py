"""ApiVersions (key 18): the APIs and version ranges this broker supports (KIP-35, KIP-511).

v3+ requests carry the client software name and version; Kafka rejects malformed ones with
INVALID_REQUEST. v3+ responses list the features this node supports and the cluster's finalized
levels with their epoch (KIP-584, KIP-1022; :mod:`kcompat.kraft.feature_control`), as Kafka 4.3's
``ApiVersionsResponse``: finalized features at level 0 are left out, and so are supported features
whose minimum is 0 when the request is v3 (older clients cannot read them, KAFKA-17011).
Unknown (newer) request versions never reach this module: the connection answers them with the
KIP-511 downgrade response.
"""

from __future__ import annotations

import re

from kcompat.kraft import feature_control
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.api_versions import ApiVersionsResponse

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def handle(ctx, req):
    from kcompat.broker import apis  # import here: apis imports this module

    version = ctx.api_version
    if version >= 3 and not (_SOFTWARE.match(req.client_software_name or "")
                             and _SOFTWARE.match(req.client_software_version or "")):
        return error_response(req, version, ErrorCode.INVALID_REQUEST)
    resp = ApiVersionsResponse(
        error_code=ErrorCode.NONE,
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                  for k, lo, hi in apis.advertised(ctx.on_controller_listener)],
        throttle_time_ms=0)
    if version >= 3:
        image = ctx.services.image
        finalized = image.features
        resp.supported_features = [
            ApiVersionsResponse.SupportedFeatureKey(name=name, min_version=lo, max_version=hi)
            for name, (lo, hi) in sorted(feature_control.supported(finalized).items()) if version >= 4 or lo > 0]
        if "metadata.version" in finalized:
            resp.finalized_features_epoch = max(image.offset, 0)
            resp.finalized_features = [
                ApiVersionsResponse.FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
                for name, level in sorted(finalized.items()) if level]
    return resp


def error_response(req, version, code):
    """Kafka's ApiVersionsRequest.getErrorResponse: no API keys, except ApiVersions' own range
    with UNSUPPORTED_VERSION (KIP-511)."""
    keys = [ApiVersionsResponse.ApiVersion(api_key=API_KEY, min_version=MIN_VERSION, max_version=MAX_VERSION)]
    return ApiVersionsResponse(error_code=code, api_keys=keys if code == ErrorCode.UNSUPPORTED_VERSION else [])
