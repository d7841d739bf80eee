"""Authentication and authorization (issue 19): principals, TLS and SASL on listeners, ACLs."""
