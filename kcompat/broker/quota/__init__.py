"""Client quotas and connection limits on the broker: :mod:`.rate`, :mod:`.client_quota`,
:mod:`.throttle`, :mod:`.connections`; replication throttles: :mod:`.replication`."""
