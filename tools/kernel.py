"""A notebook client that cannot sit idle for a whole cell timeout on a message that has arrived.

nbclient waits for a cell's reply with one asyncio poll on the kernel's shell socket, for the cell's
whole timeout. With pyzmq's asyncio sockets that poll can miss the wake-up of a message that is already
there; pyzmq looks at the socket once more when the poll times out, so the cell then finishes cleanly,
but only after the whole timeout (a chapter that runs in 10 s has taken 10 min this way, with nothing
failing). Polling in short slices bounds such a miss to one slice. ``make execute``, the student-version
test and ``make colab-check`` all run notebooks through :func:`notebook_client`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from queue import Empty
from typing import Any

import nbformat
from jupyter_client import KernelClient
from nbclient import NotebookClient
from nbclient.util import ensure_async

# Seconds the client waits on a kernel socket at a time: what a missed wake-up can cost.
POLL_SLICE = 1.0


def in_slices(get_msg: Callable[..., Awaitable[dict]], step: float = POLL_SLICE
              ) -> Callable[..., Awaitable[dict]]:
    """``get_msg`` for a kernel channel, with the same contract (wait up to ``timeout`` seconds, ``None``
    for ever, then raise ``queue.Empty``), that polls at most ``step`` seconds at a time."""

    async def get_msg_in_slices(timeout: float | None = None) -> dict:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = step if deadline is None else deadline - time.monotonic()
            try:
                return await ensure_async(get_msg(timeout=max(0.0, min(step, left))))
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    return get_msg_in_slices


class SlicedNotebookClient(NotebookClient):
    """nbclient's client, its shell and IOPub channels polled in slices of :data:`POLL_SLICE` seconds."""

    async def async_start_new_kernel_client(self) -> KernelClient:
        kc = await super().async_start_new_kernel_client()
        for channel in (kc.shell_channel, kc.iopub_channel):
            channel.get_msg = in_slices(channel.get_msg)
        return kc


def notebook_client(nb: nbformat.NotebookNode, timeout: int, cwd: str, **options: Any) -> NotebookClient:
    """A client that runs ``nb`` in a fresh ``python3`` kernel started in ``cwd``, cells limited to
    ``timeout`` seconds; ``options`` go to nbclient's ``NotebookClient``."""
    return SlicedNotebookClient(nb, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": cwd}}, **options)
