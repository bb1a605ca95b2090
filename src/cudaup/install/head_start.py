"""An install's head start: wheels unpacked into the cache while their release resolves.

A PyPI install learns which wheels a release takes from ``cuda-toolkit``'s metadata,
read a round trip after its page, and its downloads began only then.  The release table
cudaup ships (``data/release_components.json``) says which component versions each
release pinned: the resolver offers each such wheel once its own page, read beside
``cuda-toolkit``'s, names it (:meth:`HeadStart.offer_release`), with that page's URL,
size and sha256, as for any wheel.  Its download and unpack into the cache start at
once, run exactly as the install's staging would run them
(:func:`cudaup.install.unpack_cache.unpacker`): verified against its sha256, published
into the cache under it.  Staging then takes over (:meth:`HeadStart.take`) the archives
the resolution chose, by sha256, and :meth:`HeadStart.close` stops the rest.

Nothing is trusted from the forecast: a wrong one costs a download, never an answer.
A release is offered nothing that the install would not stage (``may_stage``: a
toolkit already at its destination, a driver that refuses it), and nothing is offered
once the first offer finds the cache unusable or busy (a prune under way): staging then
says why, as it would have.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from cudaup.core.model import Artifact
from cudaup.download import Progress
from cudaup.download.api import MAX_CONNECTIONS_PER_HOST
from cudaup.net.http import HttpClient, log
from cudaup.util.cachedir import using as using_cache
from cudaup.util.faults import Place, cache_place

if TYPE_CHECKING:  # unpack_cache hands its stager to this module and takes from it
    from cudaup.install.cache_entry import CacheEntry
    from cudaup.install.tree import TreeManifest
    from cudaup.install.unpack_cache import _Stager

    Unpacked = tuple[CacheEntry, tuple[TreeManifest, bool] | None]

#: Archives unpacked ahead side by side: each as its page arrives, whatever its size.
AT_ONCE = 8


class HeadStart:
    """The head starts of one install (see the module docstring)."""

    def __init__(
        self,
        cache_root: Path,
        *,
        http: HttpClient,
        verify: bool,
        places: Sequence[Place],
        progress: Progress | None,
        may_stage: Callable[[str], bool],
    ) -> None:
        self.cache_root = cache_root
        self.http, self.verify, self.places, self.progress = http, verify, places, progress
        self.may_stage = may_stage
        #: staging's connections and cancel are these (unpack_cache._Stager)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS_PER_HOST)
        self.cancel = threading.Event()
        self._lock = threading.Lock()
        self._verdicts: dict[str, bool] = {}
        self._stager: _Stager | None = None
        self._closed = False
        self._held = contextlib.ExitStack()  # the cache's shared lock, until close
        self._jobs: dict[str, Future[Unpacked]] = {}
        self._pool: ThreadPoolExecutor | None = None

    def offer_release(self, release: str, artifact: Artifact) -> None:
        """Start unpacking ``artifact``, a wheel ``release`` is forecast to pin, unless the
        install would not stage that release, or it is started already.  Never raises:
        whatever stops a head start, staging meets again and says."""
        with self._lock:
            if release not in self._verdicts:
                try:
                    self._verdicts[release] = self.may_stage(release)
                except Exception:  # staging runs the same checks, and says what failed
                    log.info("head start: none for CUDA %s", release, exc_info=True)
                    self._verdicts[release] = False
            key = artifact.sha256  # checked where it names the entry (_Stager._entry)
            if self._closed or not self._verdicts[release] or key is None or key in self._jobs:
                return
            stager = self._stager or self._open()
            if stager is None:
                return
            if self._pool is None:
                self._pool = ThreadPoolExecutor(AT_ONCE, "cudaup-head-start")
            self._jobs[key] = self._pool.submit(stager.unpack_ahead, artifact, key)

    def _open(self) -> _Stager | None:
        """The stager, holding the cache's lock; None (and no more offers) where the cache
        is busy, not this user's alone, or cannot be prepared."""
        from cudaup.install.unpack_cache import unpacker  # noqa: PLC0415 - it imports this

        stager = None
        try:
            self._held.enter_context(using_cache(self.cache_root, wait=0.0))
            stager = unpacker(
                self.cache_root,
                http=self.http,
                verify=self.verify,
                places=(cache_place(self.cache_root), *self.places),
                progress=self.progress,
                ahead=self,
            )
        except Exception:  # staging prepares the same cache, and says what failed
            log.info("head start: the cache %s is not used", self.cache_root, exc_info=True)
        if stager is None:
            self._held.close()
            self._closed = True
        self._stager = stager
        return stager

    def take(self, key: str) -> Future[Unpacked] | None:
        """The head start of the archive whose sha256 is ``key``, now staging's to wait for."""
        with self._lock:
            return self._jobs.pop(key, None)

    def close(self) -> None:
        """Stop the head starts staging did not take, and wait for every one: nothing of an
        install outlives it."""
        with self._lock:
            self._closed = True
            if self._jobs:
                self.cancel.set()
            self._jobs.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self._held.close()
