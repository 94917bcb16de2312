"""What an operator types where a bundle is expected, read strictly and, when it is not one, answered
with what it is instead: a namespace without ``--bundle``, a topic, a range without Pulsar's ``0x``.

Pulsar names a bundle ``tenant/namespace/0xLOWER_0xUPPER`` with eight hex digits on each side; the REST
API looks bundles up by that exact text, so anything else is refused here as a format error naming the
field, rather than reaching the server as a 404 for a bundle that merely looks different.
"""

from __future__ import annotations

import argparse
import re

from balancer.errors import InvalidInput

RANGE = re.compile(r"0x[0-9a-fA-F]{8}_0x[0-9a-fA-F]{8}")
BARE_RANGE = re.compile(r"([0-9a-fA-F]{8})_([0-9a-fA-F]{8})")
TOPIC_SCHEMES = ("persistent://", "non-persistent://")


def _topic_hint(topic: str, namespace: str | None) -> str:
    full = topic if topic.startswith(TOPIC_SCHEMES) else f"persistent://{namespace or 'TENANT/NS'}/{topic}"
    return f"it looks like a topic; `loadmgr topics lookup {full}` names the bundle it hashes to"


def check_range(rng: str, field: str, namespace: str | None) -> str:
    """``rng`` if it is ``0xLOWER_0xUPPER``; InvalidInput saying what it is otherwise."""
    if RANGE.fullmatch(rng):
        return rng.lower()
    bare = BARE_RANGE.fullmatch(rng)
    if bare:
        fixed = f"0x{bare.group(1)}_0x{bare.group(2)}".lower()
        raise InvalidInput(field, rng, f"a bundle range is written with 0x on both sides: {fixed}")
    if "_" in rng and all(p.lower().startswith("0x") for p in rng.split("_")):
        raise InvalidInput(field, rng, "expected 0xLOWER_0xUPPER with eight hex digits each (0x00000000)")
    return _refuse_topic(rng, field, namespace)


def _refuse_topic(text: str, field: str, namespace: str | None) -> str:
    raise InvalidInput(field, text, f"not a bundle range (0xLOWER_0xUPPER); {_topic_hint(text, namespace)}")


def bundle_of(args: argparse.Namespace) -> str:
    """``tenant/ns/0x.._0x..`` from ``BUNDLE`` or ``NAMESPACE --bundle RANGE``."""
    name = str(args.bundle).strip()
    rng = str(args.bundle_range).strip() if getattr(args, "bundle_range", None) else None
    if name.startswith(TOPIC_SCHEMES):
        raise InvalidInput("bundle", name, f"is a topic, not a bundle; {_topic_hint(name, None)}")
    parts = name.strip("/").split("/")
    if not all(parts) or len(parts) < 2:
        raise InvalidInput("bundle", name, "expected tenant/namespace/0xLOWER_0xUPPER")
    if rng is not None:
        namespace = "/".join(parts)
        return f"{namespace}/{check_range(rng, '--bundle', namespace)}"
    if len(parts) == 2:
        namespace = "/".join(parts)
        raise InvalidInput(
            "--bundle",
            None,
            f"{namespace} is a namespace: name one of its bundles with --bundle 0xLOWER_0xUPPER "
            f"(`loadmgr namespaces bundles {namespace}` lists them)",
        )
    namespace = "/".join(parts[:-1])
    return f"{namespace}/{check_range(parts[-1], 'bundle', namespace)}"


def check_split_args(args: argparse.Namespace) -> None:
    """specified_positions_divide without positions has nothing to split at: say which flag is missing."""
    if args.algorithm == "specified_positions_divide" and not args.positions:
        raise InvalidInput(
            "--positions",
            None,
            "specified_positions_divide splits at the positions given: add --positions "
            "(or --split-boundaries) 0x40000000[,0x80000000...]",
        )
