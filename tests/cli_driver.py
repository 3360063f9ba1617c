"""Run several ``tuidiag`` commands in one interpreter, each as the console script would run it.

``python -m tests.cli_driver COMMANDS_JSON [AS_LIMIT_BYTES]``: each command's argv goes to
``tuidiag.cli.main.main`` with the process's real stdout and stderr (their encoding is the
environment's: ``PYTHONIOENCODING``, ``LC_ALL``), so a matrix of commands costs one
interpreter start instead of one each. An uncaught exception counts as exit status 1, as
it would from the entry point. Between commands an ASCII marker line goes to both stdout
and stderr: ``@@@ <index> rc=<status>``. With ``AS_LIMIT_BYTES`` the address space is capped
first (``RLIMIT_AS``), so an allocation sized from a forged number fails loudly.
"""

from __future__ import annotations

import json
import resource
import sys
import traceback

MARKER = "@@@"


def run(commands: list[list[str]]) -> None:
    """Run each command and write its marker (imports tuidiag only here, after any limit)."""
    from tuidiag.cli.main import main

    for index, argv in enumerate(commands):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001 - what the entry point would let escape
            traceback.print_exc()
            rc = 1
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
            stream.buffer.write(f"\n{MARKER} {index} rc={rc}\n".encode("ascii"))
            stream.buffer.flush()


def results(stdout: bytes, count: int) -> list[tuple[int, bytes]]:
    """(exit status, stdout bytes) of each of ``count`` commands, parsed from the driver's stdout."""
    parts = stdout.split(f"\n{MARKER} ".encode("ascii"))
    out, chunks = [], [parts[0]]
    for part in parts[1:]:
        head, _, rest = part.partition(b"\n")
        index, rc = head.decode("ascii").split(" rc=")
        out.append((int(rc), chunks[-1]))
        chunks.append(rest)
        assert int(index) == len(out) - 1
    assert len(out) == count, f"{len(out)} of {count} commands reported"
    return out


if __name__ == "__main__":
    if len(sys.argv) > 2:
        limit = int(sys.argv[2])
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    run(json.loads(sys.argv[1]))
