"""``tuidiag watch [PATH]`` and ``tuidiag replay RUN``: the monitor."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tuidiag.cli.run_argument import RunNotReadable, fail, load_run


def add_watch_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``watch`` arguments."""
    parser.add_argument("path", nargs="?", default="runs", help="a directory of runs, or one run (default: ./runs)")
    parser.add_argument("--poll", action="store_true", help="poll every second instead of watching file events (network filesystems)")
    parser.add_argument("--web", action="store_true", help="serve the monitor to a browser (textual-serve) instead of the "
                        "terminal; only to whoever opens the URL it prints, with its secret token")
    parser.add_argument("--host", default="localhost", help="with --web: address to listen on (default: localhost only)")
    parser.add_argument("--port", type=int, default=8000, help="with --web: port (default 8000)")


def add_replay_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``replay`` arguments."""
    parser.add_argument("run", help="a run directory")


def watch(args: argparse.Namespace) -> int:
    """Run the monitor on PATH; exit 2 when PATH is a file, or without a terminal (:func:`terminal_problem`)."""
    root = Path(args.path)
    if root.exists() and not root.is_dir():
        return fail("watch", f"{root} is a file; give a directory of runs or a run directory")
    if not root.exists():
        print(f"tuidiag watch: {root} does not exist yet; waiting for runs to appear (Ctrl-C to stop)", file=sys.stderr)
    if args.web:
        return _serve(args)
    if (problem := terminal_problem()) is not None:
        return fail("watch", problem)
    from tuidiag.app.app import TuidiagApp

    TuidiagApp(root, poll=args.poll).run()
    return 0


def terminal_problem() -> str | None:
    """Why the monitor cannot run here (None: it can). Without a terminal on its input it read end-of-file in a loop,
    a core busy for as long as it ran, and without one on its output it wrote escape codes into a file or pipe.
    Under ``--web`` (textual-serve names Textual's web driver in ``TEXTUAL_DRIVER``) pipes are its terminal."""
    if os.environ.get("TEXTUAL_DRIVER"):
        return None
    for name, stream in (("input", sys.stdin), ("output", sys.stdout)):
        if stream is None or not stream.isatty():
            return (f"the monitor needs a terminal, and its {name} is not one: run it in a terminal or a tmux pane, "
                    "serve it to a browser with `tuidiag watch --web`, or print text with `tuidiag ls PATH` and "
                    "`tuidiag diagnose RUN`")
    return None


def replay(args: argparse.Namespace) -> int:
    """Replay a run with a time cursor; exit 2 when it cannot be read."""
    try:
        load_run(args.run)
    except RunNotReadable as exc:
        return fail("replay", str(exc))
    if (problem := terminal_problem()) is not None:
        return fail("replay", problem)
    from tuidiag.app.app import TuidiagApp

    TuidiagApp(Path(args.run), replay=True).run()
    return 0


def _serve(args: argparse.Namespace) -> int:
    """Serve the monitor to a browser: only to whoever holds the printed token (:mod:`tuidiag.cli.web_serve`)."""
    from tuidiag import self_command
    from tuidiag.cli import web_serve

    command = self_command.shell_command("watch", args.path, *(["--poll"] if args.poll else []))
    web_serve.serve(command, args.host, args.port, web_serve.new_token())
    return 0
