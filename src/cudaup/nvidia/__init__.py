"""Parsers for NVIDIA's download-server formats, one module per format.

All pure: each takes the bytes or text of one document and returns typed
values, raising :class:`~cudaup.errors.SourceFormatError` when the document is
not what it should be.  Where a detail of NVIDIA's format has not been seen in
real data (separators in md5sum.txt, quotes in the listing, where the archive
page keeps its payload), the parsers accept every plausible variant, and the
fake NVIDIA server in ``tests/fakenvidia/`` serves each one.
"""
