"""The network edge: the one HTTP client (proxies, netrc, TLS, redirects, retries),
its response cache, the TLS context and the retry policy."""
