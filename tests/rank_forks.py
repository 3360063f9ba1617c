"""Start the ranks of a DDP test as forks of one interpreter (used by the Lightning and Transformers DDP tests).

A rank started as a process of its own imports torch and the framework again: 4-5 s of CPU each
for Lightning or Transformers, more than the training. :func:`fork_ranks` is called by a script
that imported them once; each fork gets the environment ``torchrun --nproc-per-node N`` gives its
workers (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``...), so the
framework finds its ranks created externally, as under torchrun, and starts no process itself.
The script must not have started a thread before it forks (nothing here does).
"""

from __future__ import annotations

import os
import socket
import sys
import traceback
from collections.abc import Callable


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fork_ranks(world: int, rank_main: Callable[[], None]) -> int:
    """Run ``rank_main`` in ``world`` forked ranks; 0 when every rank ended without an exception, else 1."""
    shared = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "WORLD_SIZE": str(world),
              "LOCAL_WORLD_SIZE": str(world), "NODE_RANK": "0", "GROUP_RANK": "0"}
    pids = []
    for rank in range(world):
        pid = os.fork()
        if pid == 0:
            os.environ.update(shared, RANK=str(rank), LOCAL_RANK=str(rank))
            status = 0
            try:
                rank_main()
            except BaseException:  # noqa: BLE001  # any end of a rank is reported by its exit status
                traceback.print_exc()
                status = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(status)
        pids.append(pid)
    statuses = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    return 0 if statuses == [0] * world else 1
