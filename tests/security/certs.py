"""A throw-away certificate authority for TLS tests, made when a test runs (never a committed key).

The code lives in :mod:`conformance.tls_ca` so that the conformance suite's ``security`` group can
make the same CA for the brokers it starts; see that module for the API (``TestCA``, ``IssuedCert``).
"""

from conformance.tls_ca import IssuedCert, TestCA

__all__ = ["IssuedCert", "TestCA"]
