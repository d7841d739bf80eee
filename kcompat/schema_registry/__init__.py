"""kcompat's built-in schema registry: the pure part (no sockets, no asyncio).

The Confluent Schema Registry REST API is served by :mod:`kcompat.broker.http.schema_registry`;
this package holds what does not depend on HTTP or Kafka I/O:

- :mod:`.records`: the keys and values of the compacted ``_schemas`` topic, in the JSON format
  Confluent's registry writes (``{"keytype":"SCHEMA","subject":...,"version":N,"magic":1}`` ...).
- :mod:`.state`: :class:`~.state.RegistryState`, rebuilt by replaying those records; write
  operations return ``(records to append, result)`` and change nothing themselves (the state
  changes when the records are read back), as kcompat's coordinators do.
- :mod:`.schemas` with :mod:`.avro_schema`, :mod:`.json_schema`, :mod:`.protobuf_schema`: parsing
  and the compatibility rules of each schema type, and :mod:`.compatibility` for the levels.
- :mod:`.errors`: Confluent's error codes and messages.
"""
