"""kcompat's HTTP listener (``http.listeners``): Prometheus metrics, consumer lag, the web console
and its JSON API, and the Confluent REST Proxy subset -- aiohttp in the broker's event loop."""
