"""Parsers for NVIDIA's download-server formats, one module per format.

All pure: each takes the bytes or text of one document and returns typed
values, raising :class:`~cudaup.errors.SourceFormatError` when the document is
not what it should be.  Where NVIDIA's format is not verified (see
``shared/reference/nvidia-formats.md`` §10) the parsers accept every plausible
variant, and the tests serve each one.
"""
