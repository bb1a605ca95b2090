"""One download's context, made once by :func:`~cudaup.download.download` and handed down
to the transfer (as rustup's ``DownloadCfg``): what to fetch, where it goes, the client,
the watchdog, how many connections, who watches, what may stop it."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from cudaup.download.arrival import Arrival
from cudaup.download.request import DownloadRequest, Progress
from cudaup.download.target import DownloadPaths
from cudaup.download.watch import Watchdog
from cudaup.net.http import HttpClient


@dataclass(frozen=True, slots=True)
class DownloadJob:
    request: DownloadRequest
    paths: DownloadPaths
    http: HttpClient
    #: the speed floor and the stall clock of every request of this download
    watchdog: Watchdog
    #: exactly this many connections, or None: adapt (see :mod:`cudaup.download.ramp`)
    connections: int | None = None
    progress: Progress | None = None
    #: the connections every download of a ``download_many`` shares
    slots: threading.Semaphore | None = None
    #: a reader following the bytes as they land
    arrival: Arrival | None = None
    #: set: stop within a tick, the resumable state saved
    cancel: threading.Event | None = None
    #: when the download began (``time.monotonic``), for the result's seconds
    started: float = field(default_factory=time.monotonic)
    #: False: the file is read once and deleted (an install's archive), so nothing of it
    #: is synced (the part file, its resume state, the final name) nor handed to the
    #: disk's writeback; it is verified again before any later use, as every file is
    durable: bool = True
