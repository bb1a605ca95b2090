"""Verified, resumable, parallel downloads; reading a file while it arrives.

``api`` is the entry point (:func:`download`, :func:`download_many`), which hands
each transfer its context as one ``job``; ``remote``
probes the server and reads its answers; ``range_plan`` is the pure byte-range plan
that ``parallel`` fills over connections (as many as ``ramp`` says; ``stream`` when
the server ignores ranges); ``watch`` makes every transfer end (a speed floor per connection, a
stall limit per download); ``target`` is where the bytes live meanwhile, ``digest`` hashes them in order, and
``publish`` the one step that verifies them and gives them their final name;
``arrival`` lets a reader follow a download.
"""

from cudaup.download.api import download, download_many
from cudaup.download.arrival import Arrival
from cudaup.download.publish import is_verified
from cudaup.download.request import DownloadRequest, DownloadResult, Progress, ProgressEvent

__all__ = [
    "Arrival",
    "DownloadRequest",
    "DownloadResult",
    "Progress",
    "ProgressEvent",
    "download",
    "download_many",
    "is_verified",
]
