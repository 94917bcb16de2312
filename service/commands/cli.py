"""The ``loadmgr`` command. Each sub-command lives in a module of :mod:`service.commands` that
defines ``register(subparsers)``; this file only discovers and dispatches them."""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import functools
import importlib
import os
import pkgutil
import signal
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from balancer.errors import LoadMgrError
from service import commands

# A bad command line, file or environment value: the caller's to fix (argparse uses 2 too).
EXIT_USAGE = 2
# Something went wrong while running (ZooKeeper away, a bug): not the caller's input.
EXIT_FAILURE = 1
# stdout closed early (``loadmgr status --json | head``): the shell's 128 + SIGPIPE.
EXIT_BROKEN_PIPE = 141


class Parser(argparse.ArgumentParser):
    """Remembers the deepest (sub-)parser that read the command line, so that arguments left over are
    refused with that verb's usage (``loadmgr namespaces unload ...``), not the top-level one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        trail = kwargs.pop("trail", None)
        self.trail: list[argparse.ArgumentParser] = [] if trail is None else trail
        super().__init__(*args, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self.trail.append(self)
        return super().parse_known_args(args, namespace)

    def add_subparsers(self, **kwargs: Any) -> Any:
        action = super().add_subparsers(**kwargs)
        trail = self.trail
        setattr(action, "_parser_class", functools.partial(Parser, trail=trail))  # noqa: B010 (argparse's own slot)
        return action


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="loadmgr",
        description="Load manager for Apache-Pulsar-style broker clusters.",
    )
    # pulsar-admin's habit: `pulsar-admin --admin-url URL brokers list`; a --url after the verb wins
    parser.add_argument("--url", dest="global_url", metavar="URL", help="REST base URL for any client verb")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def _settings_error(e: ValidationError) -> str:
    """Name the environment variable (``LOADMGR_HTTP_PORT``) and the value a Settings error is about."""
    err = e.errors()[0]
    field = ".".join(str(x) for x in err.get("loc", ())) or "settings"
    name = f"LOADMGR_{field.upper()}" if e.title == "Settings" else field
    return f"{name}={str(err.get('input'))[:80]!r}: {err.get('msg', 'invalid')}"


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """The parsed command line; words left over are refused in the usage of the verb that was given."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        trail = getattr(parser, "trail", None) or [parser]
        trail[-1].error(f"unrecognized arguments: {' '.join(extra)}")
    if getattr(args, "global_url", None) and not getattr(args, "url", None):
        args.url = args.global_url
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run one sub-command. Every way it can fail ends in one line on stderr and an exit code;
    the traceback is printed only with ``LOADMGR_DEBUG=1``, for whoever debugs loadmgr itself."""
    args = parse(build_parser(), argv)
    # `kill -USR1 <pid>` prints every thread's stack to stderr: how a process that will not stop
    # is diagnosed where it runs. Not everywhere possible (no SIGUSR1, stderr without a descriptor).
    with contextlib.suppress(AttributeError, ValueError, OSError, RuntimeError):
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        rc = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away; say nothing more (a second write would raise again at exit).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        return 130
    except LoadMgrError as e:
        print(f"loadmgr: {e}", file=sys.stderr)
        return EXIT_USAGE
    except ValidationError as e:
        print(f"loadmgr: {_settings_error(e)}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, UnicodeError) as e:
        where = f"{e.filename}: " if isinstance(e, OSError) and e.filename else ""
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        print(f"loadmgr: {where}{reason}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as e:  # the last line: never a traceback for an operator
        if os.environ.get("LOADMGR_DEBUG"):
            traceback.print_exc()
        print(f"loadmgr: {args.command} failed: {type(e).__name__}: {str(e)[:300]}", file=sys.stderr)
        return EXIT_FAILURE
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
