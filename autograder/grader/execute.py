"""nbgrader's Execute step for a class: a time budget per notebook, and no free points.

Stock nbgrader gives full marks to a test cell that has no error output, so a test cell that
never ran (kernel dead, notebook stopped) would pass. :class:`GradingExecute` instead:

- gives every notebook a wall-clock budget; cell timeouts shrink to what is left of it;
- when the kernel dies, or does not stop after an interrupt (a loop that catches
  ``KeyboardInterrupt``), kills it and marks every remaining cell "not run: <why>", so the notebook
  still gets a definite grade: points for the tests that ran, 0 with a reason for the others;
- caps each cell's output and the notebook's in all, every output type included; an error or a
  result past a cap is kept shortened (its ``ename``, the start of its value, the end of its
  traceback), so nbgrader still sees the failure, and a note in the cell says what was cut;
- drops ``execute_result`` outputs a test cell did not produce itself: nbgrader reads the first
  one as partial credit, and learner code can publish one before the test fails;
- after each test cell that passed, verifies it (:mod:`autograder.grader.verify.cells`): the
  cell's checks run in this, the grader's process, and every call of learner code is sent to the
  kernel as a request the kernel answers with a record this process recomputes. No cell is added
  to the notebook, and nothing a submitted cell carries can pose as the grader's request.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import socket
import threading
import time
from collections import defaultdict
from pathlib import Path

import nbformat
from jupyter_core.utils import run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbgrader.preprocessors import Execute
from traitlets import Bool, Instance, Integer

from autograder import nbcell
from autograder.grader.hangs import Hangs
from autograder.grader.kernels import SandboxKernelManager
from autograder.grader.sockets import let_kernel_connect

ACCEPT_TIMEOUT_S = 20  # for the kernel to connect to the grader's socket
INTERRUPT_GRACE_S = 10  # for a kernel to stop after an interrupt
# Of a notebook's budget, what nbgrader's steps after the run (grades, feedback) may take: the
# kernel is stopped this much before the budget ends, so the budget bounds the whole grading.
FINISH_RESERVE_S = 10

SIGNALS = {
    -9: "it was killed (SIGKILL: memory, CPU time limit, or its own code)",
    -24: "it used up its CPU time limit",
    -11: "it crashed (segmentation fault)",
    -6: "it aborted",
    -7: "it crashed (bus error)",
}


KEPT_PAST_CAP = ("error", "execute_result")  # nbgrader grades on these: shortened, never dropped
KEPT_CHARS = 1000  # about this much of each, while the notebook is under its cap; a tenth after


def not_run(reason: str):
    return nbformat.v4.new_output(
        "error", ename="NotRun", evalue=f"not run: {reason}", traceback=[f"NotRun: {reason}"]
    )


def _has_error(cell) -> bool:
    return any(o.output_type == "error" for o in cell.get("outputs", []))


def output_size(content: dict) -> int:
    """Characters of an output message's content: text, data, and an error's parts."""
    size = len(content.get("text", "")) + sum(len(str(v)) for v in content.get("data", {}).values())
    size += len(str(content.get("ename", ""))) + len(str(content.get("evalue", "")))
    return size + sum(len(str(line)) for line in content.get("traceback", []))


def _head(text: str, chars: int) -> str:
    return text if len(text) <= chars else f"{text[:chars]}… [{len(text) - chars} characters cut]"


def _tail(text: str, chars: int) -> str:
    return text if len(text) <= chars else f"[{len(text) - chars} characters cut] …{text[-chars:]}"


def shorten(content: dict, chars: int) -> None:
    """An error or a result cut to about ``chars`` characters, in place: an error keeps its
    ``ename``, the start of its value and the end of its traceback; a result its plain text."""
    if "ename" in content:
        content["ename"] = _head(str(content["ename"]), 100)
        content["evalue"] = _head(str(content.get("evalue", "")), chars // 2)
        traceback = "\n".join(str(line) for line in content.get("traceback", []))
        content["traceback"] = [_tail(traceback, chars // 2)] if traceback else []
    else:
        content["data"] = {
            "text/plain": _head(str(content.get("data", {}).get("text/plain", "")), chars)
        }
        content["metadata"] = {}


class RunRecords(dict):
    """notebook id -> what happened when it ran, filled by :class:`GradingExecute`.

    :class:`~autograder.grader.pipeline.GradingRun` owns one, hands it over in the config
    (``c.GradingExecute.records``) and returns each autograde's records; nothing else reads it.
    traitlets deep-copies config values; this one stays its owner's object.
    """

    def __deepcopy__(self, memo):
        return self


class GradingExecute(Execute):
    """Execute with a notebook budget, definite grades when the kernel fails, and verification."""

    notebook_budget = Integer(300, help="Seconds for the whole notebook.").tag(config=True)
    output_limit = Integer(1024**2, help="Output bytes kept per cell.").tag(config=True)
    notebook_output_limit = Integer(16 * 1024**2, help="Output bytes kept per notebook.").tag(
        config=True
    )
    verify = Bool(True, help="Verify passed test cells in the grader's process.").tag(config=True)

    records = Instance(RunRecords, allow_none=True, help="Where each run is recorded.").tag(
        config=True
    )

    def __init__(self, **kwargs):
        kwargs.setdefault("kernel_manager_class", SandboxKernelManager)
        super().__init__(**kwargs)

    def preprocess(self, nb, resources, km=None):
        notebook_id = resources.get("nbgrader", {}).get("notebook", "")
        self._start = time.monotonic()
        reserve = min(FINISH_RESERVE_S, self.notebook_budget // 10)
        self._deadline = self._start + self.notebook_budget - reserve
        self._stop: str | None = None
        self._out_of_time = threading.Event()
        self._hangs = Hangs()
        self._counts: dict[int, int] = {}  # execution count -> cell index
        self._timed_out = False
        self._ran: set[int] = set()
        self._bytes: dict[int, int] = defaultdict(int)
        self._kept_bytes = 0  # what the notebook keeps, for its cap
        self._past_cap: dict[tuple[int, str], object] = {}  # the one shortened output of a kind
        self._truncated: set[int] = set()
        self._timing: dict = {"slowest_cell": (0.0, None), "verification": 0.0, "requests": 0}
        self._verdicts: dict[str, list] = {}
        self._km = None  # this notebook's kernel manager, still read once nbclient dropped it
        started = True
        watchdog = threading.Timer(self._deadline - time.monotonic(), self._stop_at_budget)
        watchdog.daemon = True
        watchdog.start()
        try:
            nb, resources = super().preprocess(nb, resources, km)
        except Exception as err:  # the kernel did not start, or died between cells
            started = bool(self._ran)
            self._halt(
                self._budget_reason()
                or f"the kernel could not run this notebook ({type(err).__name__}: {err})"
            )
        finally:
            watchdog.cancel()
        for index, cell in enumerate(nb.cells):
            if index not in self._ran and cell.cell_type == "code" and cell.source.strip():
                cell.outputs = [not_run(self._stop or "the notebook stopped early")]
        self._timing["verification"] = round(self._timing["verification"], 2)
        record = {
            "verdicts": self._verdicts,
            "stopped": self._stop,
            "kernel_failed_to_start": not started,
            "truncated": len(self._truncated),
            "sockets_full": bool(self._km and getattr(self._km, "sockets_full", False)),
            "seconds": round(time.monotonic() - self._start, 2),
            "timing": self._timing,
        }
        if self.records is not None:
            self.records[notebook_id] = record
        return nb, resources

    async def async_start_new_kernel(self, **kwargs):
        started = time.monotonic()
        await super().async_start_new_kernel(**kwargs)
        self._km = self.km
        self._timing["kernel_start"] = round(time.monotonic() - started, 2)

    async def async_start_new_kernel_client(self):
        started = time.monotonic()
        client = await super().async_start_new_kernel_client()
        self._timing["kernel_ready"] = round(time.monotonic() - started, 2)
        return client

    start_new_kernel = run_sync(async_start_new_kernel)  # nbclient's sync path binds these
    start_new_kernel_client = run_sync(async_start_new_kernel_client)

    def _stop_at_budget(self) -> None:
        """The watchdog: at the deadline, kill the kernel's whole process group (the sandbox
        and all it started), whatever it is doing; every wait on it then ends."""
        self._out_of_time.set()
        pgid = getattr(getattr(self.km, "provisioner", None), "pgid", None)
        if pgid:
            with contextlib.suppress(OSError):
                os.killpg(pgid, signal.SIGKILL)

    def _budget_reason(self, index: int | None = None) -> str | None:
        """Why the run stopped, if the watchdog stopped it."""
        if time.monotonic() >= self._deadline:
            self._out_of_time.set()
        if not self._out_of_time.is_set():
            return None
        where = f" in {self._cell(index)}" if index is not None else ""
        return (
            f"the notebook used up its time budget of {self.notebook_budget} s{where}, "
            "so its kernel was stopped"
        )

    async def _async_handle_timeout(self, timeout, cell=None):
        self._timed_out = True
        return await super()._async_handle_timeout(timeout, cell)

    def _halt(self, reason: str) -> None:
        if self._stop is None:
            self._stop = reason
        try:
            if self.km is not None:
                run_sync(self.km.shutdown_kernel)(now=True)
        except Exception:  # already dead
            pass

    def _get_timeout(self, cell):
        left = self._deadline - time.monotonic()
        timeout = super()._get_timeout(cell)
        return max(1, math.ceil(min(timeout or left, left)))

    def preprocess_cell(self, cell, resources, index):
        if self._stop is not None:
            if cell.cell_type == "code" and cell.source.strip():
                cell.outputs = [not_run(self._stop)]
                self._ran.add(index)
            return cell, resources
        if time.monotonic() >= self._deadline:
            self._out_of_time.set()
            self._halt(self._budget_reason())
            return self.preprocess_cell(cell, resources, index)
        self._ran.add(index)
        if nbcell.is_test(cell):
            blocked = self._hangs.blocking(cell.source, self._learner_sources())
            if blocked:
                cell.outputs = [not_run(blocked)]
                return cell, resources
        began = time.monotonic()
        self._timed_out = False
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except CellTimeoutError:
            reason = self._budget_reason(index) or (
                f"the kernel did not stop when {self._cell(index)} was interrupted after "
                "its time limit (a loop that catches KeyboardInterrupt?), so it was shut down"
            )
            cell.outputs.append(not_run(reason))
            self._halt(reason)
        except DeadKernelError:
            reason = (
                self._budget_reason(index)
                or f"the kernel died in {self._cell(index)}: {self._death_cause()}"
            )
            cell.outputs.append(not_run(reason))
            self._halt(reason)
        if cell.get("execution_count"):
            self._counts[cell.execution_count] = index
        if self._timed_out and self._stop is None:
            self._record_hang(cell, index)
        took = round(time.monotonic() - began, 2)
        if took > self._timing["slowest_cell"][0]:
            self._timing["slowest_cell"] = (took, self._number(index))
        if nbcell.is_test(cell):
            self._keep_own_result(cell)
            if self.verify and self._stop is None and not _has_error(cell):
                self._verify(cell, index)
        return cell, resources

    def _learner_sources(self) -> list[str]:
        """The code cells that ran so far other than test cells: what defines the learner's
        functions."""
        return [
            c.source
            for i, c in enumerate(self.nb.cells)
            if i in self._ran and c.cell_type == "code" and not nbcell.is_test(c)
        ]

    def _record_hang(self, cell, index: int) -> None:
        """A cell interrupted at its time limit: remember the learner function it was in."""
        learner = {
            count for count, i in self._counts.items() if not nbcell.is_test(self.nb.cells[i])
        }
        for out in cell.get("outputs", []):
            if out.output_type == "error":
                self._hangs.record(out.get("traceback", []), learner, self._cell(index))

    def _verify(self, cell, index: int) -> None:
        """Run the passed test cell's checks here, the learner's code in the kernel.

        The kernel serves the checks' requests from one cell over a Unix socket in its runtime
        folder (``autograder.kernel.server.serve``). A call that outlasts the cell's time is
        interrupted, as a cell would be, and the cell refuted; a kernel that dies, or ignores the
        interrupt, ends the notebook.
        """
        from autograder.grader.verify.cells import verify_cell  # torch: only where it verifies

        began = time.monotonic()
        self._late = False
        runtime = Path(self.km.connection_file).parent  # the grader's alone (sockets.py)
        path = runtime / f"verify-{index}.sock"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(str(path))
            let_kernel_connect(path)  # the kernel runs as an unprivileged uid of its own
            listener.listen(1)
            code = f"__import__('autograder.kernel.server').kernel.server.serve({str(path)!r})"
            msg_id = self.kc.execute(code, store_history=False, allow_stdin=False)
            listener.settimeout(min(self._get_timeout(cell), ACCEPT_TIMEOUT_S))
            try:
                conn, _ = listener.accept()
            except OSError:  # the kernel could not start its server
                conn, self._late = None, True
            with conn or contextlib.nullcontext():
                verdict = verify_cell(cell.source, lambda request: self._ask(conn, request, index))
            path.unlink(missing_ok=True)
        if self._stop is None:
            self._finish_serving(msg_id, index)
        self._verdicts[nbcell.grade_id(cell)] = [verdict.status, verdict.message]
        self._timing["verification"] += time.monotonic() - began

    def _ask(self, conn, request: bytes, index: int) -> str | None:
        """One request to the kernel's server; its reply, or None (too late, or the kernel died)."""
        from autograder.grader.verify.remote import MAX_REPLY_BYTES
        from autograder.kernel import server

        if conn is None or self._stop is not None or self._late:
            return None
        self._timing["requests"] += 1
        deadline = time.monotonic() + self._get_timeout(self.nb.cells[index])
        conn.settimeout(self._get_timeout(self.nb.cells[index]))
        try:
            server.send(conn, request)
            data = server.receive(conn, MAX_REPLY_BYTES, deadline)
        except (OSError, ValueError):
            data = b""
        if data:
            return data.decode(errors="replace")
        if not run_sync(self.km.is_alive)():
            self._halt(
                self._budget_reason(index)
                or f"the kernel died while the checks of {self._cell(index)} ran"
            )
        self._late = True
        return None

    def _finish_serving(self, msg_id: str, index: int) -> None:
        """Wait for the serving cell to end (interrupting it if a call ran late), so the next
        cell runs on a free kernel; a kernel that does not stop is shut down."""
        if self._late:
            with contextlib.suppress(Exception):
                run_sync(self.km.interrupt_kernel)()
        deadline = min(self._deadline, time.monotonic() + (INTERRUPT_GRACE_S if self._late else 60))
        while time.monotonic() < deadline:
            try:
                msg = run_sync(self.kc.get_shell_msg)(timeout=max(0.1, deadline - time.monotonic()))
            except Exception:  # queue.Empty: no reply in time
                break
            if msg.get("parent_header", {}).get("msg_id") == msg_id:
                return
        self._halt(
            self._budget_reason(index)
            or f"the kernel did not stop when the checks of {self._cell(index)} were interrupted "
            "after the time limit (a loop that catches KeyboardInterrupt?), so it was shut down"
        )

    def _number(self, index: int) -> int:
        """The cell's number as the learner counts them."""
        return index + 1

    def _cell(self, index: int) -> str:
        """``cell 7 (`softmax`)``, or ``cell 8 (after `test_softmax`)`` for a learner's own cell."""
        named = [
            (i, nbcell.grade_id(c))
            for i, c in enumerate(self.nb.cells[: index + 1])
            if nbcell.grade_id(c)
        ]
        where = ""
        if named and named[-1][0] == index:
            where = f" (`{named[-1][1]}`)"
        elif named:
            where = f" (after `{named[-1][1]}`)"
        return f"cell {self._number(index)}{where}"

    def _death_cause(self) -> str:
        code = None
        provisioner = getattr(self.km, "provisioner", None)
        process = getattr(provisioner, "process", None)
        if process is not None:
            code = process.poll()
        if code is not None and code > 128:  # bwrap reports a signal as 128 + its number
            code = 128 - code
        if code in SIGNALS:
            return SIGNALS[code]
        if code is not None and code >= 0:
            return f"it exited with status {code} (os._exit or sys.exit in a thread?)"
        return "memory, CPU time or process limit, or a crash"

    @staticmethod
    def _keep_own_result(cell) -> None:
        results = [o for o in cell.outputs if o.output_type == "execute_result"]
        if not results:
            return
        keep = [] if _has_error(cell) else results[-1:]
        cell.outputs = [o for o in cell.outputs if o.output_type != "execute_result" or o in keep]

    def output(self, outs, msg, display_id, cell_index):
        content = msg.get("content", {})
        size = output_size(content)
        self._bytes[cell_index] += size
        cell_over = self._bytes[cell_index] > self.output_limit
        notebook_over = self._kept_bytes + size > self.notebook_output_limit
        if not (cell_over or notebook_over):
            self._kept_bytes += size
            return super().output(outs, msg, display_id, cell_index)
        if cell_index not in self._truncated:
            self._truncated.add(cell_index)
            what = f"this cell's output passed {self.output_limit} bytes"
            if not cell_over:
                what = f"the notebook's output passed {self.notebook_output_limit} bytes in all"
            note = f"\n[output cut: {what}; the rest is dropped, errors and results shortened]\n"
            outs.append(nbformat.v4.new_output("stream", name="stdout", text=note))
        if msg["msg_type"] not in KEPT_PAST_CAP:
            return None
        return self._keep_shortened(outs, msg, cell_index)

    def _keep_shortened(self, outs, msg, cell_index):
        """An error or result past a cap, shortened; a cell keeps one of each, the latest."""
        under = self._kept_bytes < self.notebook_output_limit
        shorten(msg["content"], KEPT_CHARS if under else KEPT_CHARS // 10)
        out = super().output(outs, msg, None, cell_index)  # no display id: it may be moved
        if out is None:
            return None
        self._kept_bytes += output_size(out)
        previous = self._past_cap.get((cell_index, out.output_type))
        places = [i for i, o in enumerate(outs) if o is previous]
        if places and outs[-1] is out:
            outs[places[0]] = outs.pop()
            self._kept_bytes -= output_size(previous)
        self._past_cap[(cell_index, out.output_type)] = out
        return out

    def _update_display_id(self, display_id, msg):
        """A display updated in place counts like a new output (or it would bypass the caps)."""
        content = msg.get("content", {})
        size = output_size(content)
        if display_id in self._display_id_map:  # else there is nothing to update
            if size > self.output_limit or self._kept_bytes + size > self.notebook_output_limit:
                content["data"] = {"text/plain": f"[display update cut: {size} bytes]"}
                content["metadata"] = {}
            else:
                self._kept_bytes += size
        return super()._update_display_id(display_id, msg)
