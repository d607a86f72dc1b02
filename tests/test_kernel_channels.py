"""The kernel client's channels never sleep on a reply that has arrived
(:mod:`autograder.grader.kernel_channels`).

The lost wake-up itself cannot be made to happen on demand; it was seen under CPU load (a test's
nbclient waited out its 300 s cell limit for a reply the kernel had sent, then went on). These
tests give the channel a socket that misses one wake-up as that one did, and check the waiting.
"""

from __future__ import annotations

import asyncio
from queue import Empty

import pytest
from traitlets.config import Config

from autograder.grader import kernel_channels
from autograder.grader.kernel_channels import SLICE_S, Channel, KernelClient, KernelManager
from autograder.grader.kernels import SandboxKernelManager
from autograder.grader.nbgrader_settings import apply_common


class MissesOneWakeUp:
    """A socket whose reply has arrived, but whose first poll is not woken by it (it returns
    "nothing" when its timeout ends); every later poll sees the reply at once."""

    def __init__(self):
        self.polls: list[int] = []

    async def poll(self, timeout_ms):
        self.polls.append(timeout_ms)
        return 0 if len(self.polls) == 1 else 1


class Silent:
    """A socket no reply ever reaches."""

    def __init__(self):
        self.polls: list[int] = []

    async def poll(self, timeout_ms):
        self.polls.append(timeout_ms)
        return 0


def _channel(socket) -> Channel:
    channel = Channel.__new__(Channel)  # no zmq: only get_msg's waiting is under test
    channel.socket = socket

    async def recv():
        return {"msg_type": "execute_reply"}

    channel._recv = recv
    return channel


@pytest.fixture
def no_sleep(monkeypatch):
    """A clock that moves by each poll's timeout, so the tests do not wait."""
    now = [0.0]
    monkeypatch.setattr(kernel_channels.time, "monotonic", lambda: now[0])
    return now


def test_a_missed_wake_up_costs_one_slice_not_the_cell_limit(no_sleep):
    socket = MissesOneWakeUp()
    reply = asyncio.run(_channel(socket).get_msg(timeout=300))
    assert reply == {"msg_type": "execute_reply"}
    assert len(socket.polls) == 2 and max(socket.polls) <= SLICE_S * 1000, socket.polls


def test_waiting_without_a_limit_still_looks_every_slice(no_sleep):
    socket = MissesOneWakeUp()
    assert asyncio.run(_channel(socket).get_msg(timeout=None))["msg_type"] == "execute_reply"
    assert socket.polls == [SLICE_S * 1000, SLICE_S * 1000], socket.polls


def test_the_limit_still_ends_the_wait_with_empty(no_sleep, monkeypatch):
    socket = Silent()
    original = socket.poll

    async def poll(timeout_ms):  # the clock moves by the time each poll waited
        no_sleep[0] += timeout_ms / 1000
        return await original(timeout_ms)

    socket.poll = poll
    with pytest.raises(Empty):
        asyncio.run(_channel(socket).get_msg(timeout=2.5))
    assert socket.polls == [1000, 1000, 500], socket.polls  # the last slice ends at the limit


def test_every_kernel_the_course_starts_uses_these_channels():
    for name in ("shell", "iopub", "stdin", "control"):
        assert getattr(KernelClient, f"{name}_channel_class").default_value is Channel
    for manager in (KernelManager(), SandboxKernelManager()):
        client = manager.client()  # what nbclient asks the manager for
        assert type(client) is KernelClient, type(client)
        assert client.shell_channel_class is Channel and client.iopub_channel_class is Channel
    c = apply_common(Config())  # Validate: the learner's button, nbgrader validate
    assert c.Execute.kernel_manager_class == "autograder.grader.kernel_channels.KernelManager"
