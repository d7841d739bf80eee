"""Security tests (issue 19): TLS listeners, SASL, ACLs."""
