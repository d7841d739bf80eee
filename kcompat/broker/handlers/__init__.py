"""One module per Kafka API (see kcompat.broker.apis)."""
