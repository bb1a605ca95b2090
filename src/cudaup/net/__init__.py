"""The network edge: the one HTTP client (proxies, netrc, TLS, redirects, retries),
its response cache, the TLS context, the retry policy, and a remote file read by
range requests (:mod:`.ranged_file`, for zipfile)."""
