"""The node side of the Ray engine: one worker process on the node where Ray placed this host, and the pipe to it.

A host is what a Ray actor runs (ray_engine.py wraps it; nothing here imports Ray): it starts the same worker
(worker.py's worker_main) from a fork server with the same confinement as a local one, passes the campaign's framed
messages to it and its frames back, and says when it died, with its fault file. A dead, hung or oversized worker
is replaced here, in the actor, so the fork server (the converter libraries imported once) stays warm; the campaign
decides, from what the frames say, which it was and records the verdict.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import wait
from pathlib import Path

from fuzzer.campaign.worker import worker_main
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.support.confine import rss_bytes
from fuzzer.support.faults import Fault, describe_exit, fault_file, read_fault, request_stack_dump
from fuzzer.support.scratch import scratch_root, sweep_dead

WARM_START = "fuzzer.campaign.warm_start"


@dataclass(frozen=True)
class Report:
    """What one pump of the host brings back: the worker's frames, and its death (then a fresh worker runs)."""

    frames: tuple[bytes, ...]
    pid: int
    rss: int
    died: str | None = None  # describe_exit of the worker that died, its frames above
    fault: Fault | None = None
    new_pid: int | None = None  # the worker started in its place


def node_log_dir(wanted: str) -> str:
    """The campaign's log folder where this node can write it (the driver's own box, a shared disk); otherwise
    one on this node: fault files are read here and sent back, never read by the driver."""
    try:
        Path(wanted).mkdir(parents=True, exist_ok=True)
        return wanted
    except OSError:
        return tempfile.mkdtemp(prefix="convsmith-ray-logs-")


class WorkerHost:
    """One confined worker process on this node, fed framed messages and replaced when it dies or is killed."""

    def __init__(self, config_json: str, libraries: Sequence[str], sys_path: Sequence[str]) -> None:
        # The driver's import path (a `--registry MODULE:ATTR` outside the package), where it exists here; the fork
        # server is given this process's path.
        sys.path.extend(p for p in sys_path if p not in sys.path and Path(p).is_dir())
        config = WorkerConfig.from_json(json.loads(config_json))
        self.config = replace(config, log_dir=node_log_dir(config.log_dir))
        self.ctx = multiprocessing.get_context("forkserver")
        self.ctx.set_forkserver_preload(["fuzzer.campaign.worker", *libraries, WARM_START])
        self.proc, self.conn = self.spawn()

    def spawn(self) -> tuple[multiprocessing.process.BaseProcess, object]:
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=worker_main, args=(child, json.dumps(self.config.to_json())),
                                daemon=True, name="convsmith-worker")
        proc.start()
        child.close()
        return proc, parent

    def node(self) -> str:
        """This host's machine and worker, for the campaign's log."""
        return f"{socket.gethostname()} (actor pid {os.getpid()})"

    def pump(self, frames: Sequence[bytes], wait_s: float) -> Report:
        """Send `frames`, then wait up to `wait_s` for the worker's frames or its exit, and bring back all there are."""
        for data in frames:
            try:
                self.conn.send_bytes(data)
            except OSError:  # it died: told below
                break
        wait([self.conn, self.proc.sentinel], timeout=wait_s)
        got = self.drain()
        pid = self.proc.pid
        if self.proc.is_alive():
            return Report(tuple(got), pid, rss_bytes(pid))
        self.proc.join(timeout=5)
        died, fault = describe_exit(self.proc.exitcode), read_fault(self.config.log_dir, pid)
        self.restart()
        return Report(tuple(got), pid, 0, died, fault, self.proc.pid)

    def drain(self) -> list[bytes]:
        got: list[bytes] = []
        try:
            while self.conn.poll():
                got.append(self.conn.recv_bytes())
        except (EOFError, OSError):
            pass
        return got

    def replace_worker(self, dump_stack: bool) -> tuple[Fault, int]:
        """Kill the worker (asked for its tracebacks first when `dump_stack`: it hangs) and start a fresh one:
        (what its fault file holds, the new worker's pid)."""
        pid = self.proc.pid
        if dump_stack and self.proc.is_alive():
            request_stack_dump(pid, fault_file(self.config.log_dir, pid))
        self.restart()
        return read_fault(self.config.log_dir, pid), self.proc.pid

    def restart(self) -> None:
        self.stop(wait_s=0)
        self.proc, self.conn = self.spawn()

    def stop(self, wait_s: float = 5.0) -> None:
        """Let the worker finish (it was told to stop), or kill it after `wait_s`."""
        deadline = time.monotonic() + wait_s
        while self.proc.is_alive() and time.monotonic() < deadline:
            self.proc.join(timeout=0.05)
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=10)
        self.conn.close()  # type: ignore[attr-defined]
        sweep_dead(scratch_root(self.config.log_dir))
