"""Names vulture takes for dead code that are called from outside cudaup's own code.

`.ci/run` runs vulture over src/ (with the tests, benchmarks and scripts as callers) and fails
on what it finds in src/: a name listed here is used by a framework, not by a call vulture sees.
The command handlers' ``add_*`` and the lazy packages' ``__getattr__`` are ignored by name there.
"""

# rich calls these on the progress columns (cli/bars.py).
_._height
_._width
_.get_table_column
_.render
# io.RawIOBase subclasses: the io machinery calls them (download/arrival.py, install/extract/zip.py,
# resolve/pypi.py), and html.parser calls handle_starttag.
_.readable
_.seekable
_.readinto
_.handle_starttag
# urllib3's hooks: the connection class a pool makes, and the pool class per scheme (net/).
ConnectionCls
_.pool_classes_by_scheme
_.is_connected  # what a pool asks a connection it kept (net/deadline.py)
# A Protocol's parameter, named as urllib3 names it (download/remote.py).
decode_content
# http.server and socketserver read these class attributes and call these hooks on the
# index memo's server and handler (plan/index_memo.py).
request_queue_size
protocol_version
disable_nagle_algorithm
_.log_message
_.do_HEAD
_.block_on_close
_.daemon_threads
_.close_connection
