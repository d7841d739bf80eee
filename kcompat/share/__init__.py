"""Share groups (KIP-932): share-partition state on the partition leader and durable share state."""
