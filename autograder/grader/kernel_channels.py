"""A kernel client that looks at its sockets at least once a second, so it never sleeps on a reply.

jupyter_client's asyncio channels wait for a message with one ``poll(timeout)``: a zmq socket
says "readable" by an edge on its file descriptor, and when that wake-up is lost (the socket's
own send consumes the edge; seen here under CPU load in one run of notebook 01 in ten, beside
three busy processes), the reply sits in the socket until the poll times out. pyzmq then
polls once more and finds it, so nothing fails: nbclient just waited out the whole cell limit
(300 s in a test, 60 s in ``check``) for a reply that had arrived in milliseconds, and a
notebook's budget went on waiting instead of grading. Waiting in slices of :data:`SLICE_S`, each
ending in that real poll, bounds the delay of a lost wake-up by a second.

nbclient takes :class:`KernelManager` as ``kernel_manager_class``; the grading kernels' manager
(:class:`autograder.grader.kernels.SandboxKernelManager`) is one.
"""

from __future__ import annotations

import time
from queue import Empty

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel, HBChannel
from jupyter_client.manager import AsyncKernelManager
from traitlets import DottedObjectName, Type

SLICE_S = 1.0  # the longest a message that has arrived can wait unread


class Channel(AsyncZMQSocketChannel):
    """``get_msg`` as jupyter_client's, waiting in slices that each end in a real poll."""

    async def get_msg(self, timeout: float | None = None) -> dict:
        assert self.socket is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = SLICE_S if deadline is None else deadline - time.monotonic()
            if await self.socket.poll(int(max(0.0, min(SLICE_S, left)) * 1000)):
                return await self._recv()
            if deadline is not None and time.monotonic() >= deadline:
                raise Empty


class Heartbeat(HBChannel):
    """jupyter_client's heartbeat, whose ``stop`` gives up on its thread after a few seconds.

    A kernel whose code wrote garbage into its sockets' file descriptors leaves the heartbeat
    thread waiting on a reply that never comes; jupyter_client's ``stop`` joined it forever, and
    the grader hung past every limit. The thread is a daemon: left behind, it ends with the worker.
    """

    def stop(self) -> None:
        self._running = False
        self._exit.set()
        self.join(STOP_S)
        if not self.is_alive():
            self.close()


STOP_S = 3.0  # the most a heartbeat that lost its kernel may hold up the grader


class KernelClient(AsyncKernelClient):
    """An asyncio kernel client whose four channels are :class:`Channel`."""

    shell_channel_class = Type(Channel)
    iopub_channel_class = Type(Channel)
    stdin_channel_class = Type(Channel)
    control_channel_class = Type(Channel)
    hb_channel_class = Type(Heartbeat)


class KernelManager(AsyncKernelManager):
    """jupyter_client's asyncio kernel manager, handing out :class:`KernelClient`."""

    client_class = DottedObjectName("autograder.grader.kernel_channels.KernelClient")
    client_factory = Type(klass=KernelClient)  # what client() makes: its default is not re-read
