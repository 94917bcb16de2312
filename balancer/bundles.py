"""Bundle ranges, namespace bundle layouts and topic hashing, as Pulsar names and finds them.

A bundle is ``<namespace>/0x%08x_0x%08x``: a half-open hash range ``[lower, upper)`` except the
last of a namespace, whose upper bound 0xffffffff is inclusive. A topic belongs to the bundle
whose range contains the CRC-32 of its full name's UTF-8 bytes.
"""

from __future__ import annotations

import bisect
import itertools
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from balancer.errors import InvalidInput

FULL_LOWER = 0x00000000
FULL_UPPER = 0xFFFFFFFF

SYSTEM_NAMESPACE = "pulsar/system"


def topic_hash(topic: str) -> int:
    """CRC-32 (IEEE, as Guava's ``Hashing.crc32``) of the topic's full name, unsigned."""
    return zlib.crc32(normalize_topic(topic).encode("utf-8")) & 0xFFFFFFFF


def normalize_topic(topic: str) -> str:
    """``my-topic`` -> ``persistent://public/default/my-topic``; full names are kept as they are."""
    if "://" in topic:
        return topic
    if "/" not in topic:
        return f"persistent://public/default/{topic}"
    parts = topic.split("/")
    if len(parts) in (3, 4):
        return f"persistent://{topic}"
    raise InvalidInput("topic", topic, "expected <domain>://<tenant>/<namespace>/<name> or a short name")


def topic_namespace(topic: str) -> str:
    """``tenant/namespace`` (or V1's ``tenant/cluster/namespace``) of a topic; InvalidInput when that
    is not two or three names: ``.`` and ``..`` are refused, as each becomes a metadata path segment."""
    full = normalize_topic(topic)
    rest = full.split("://", 1)[1]
    namespace = rest.rsplit("/", 1)[0]
    parts = namespace.split("/")
    if not 2 <= len(parts) <= 3 or any(p in ("", ".", "..") for p in parts):
        raise InvalidInput("topic", topic, "expected <domain>://<tenant>/<namespace>/<name>")
    return namespace


def parse_hex(text: str, field: str = "boundary") -> int:
    """Java ``Long.decode`` syntax for a boundary: ``0x``/``#`` hex, leading 0 octal, or decimal."""
    t = text.strip()
    try:
        if t.lower().startswith("0x"):
            v = int(t[2:], 16)
        elif t.startswith("#"):
            v = int(t[1:], 16)
        elif len(t) > 1 and t.startswith("0"):
            v = int(t[1:], 8)
        else:
            v = int(t, 10)
    except ValueError:
        raise InvalidInput(field, text, "not a number") from None
    if not FULL_LOWER <= v <= FULL_UPPER:
        raise InvalidInput(field, text, "outside 0x00000000..0xffffffff")
    return v


@dataclass(frozen=True, order=True)
class BundleRange:
    """A hash range ``[lower, upper)``, or ``[lower, 0xffffffff]`` when it ends the ring."""

    lower: int
    upper: int

    def __post_init__(self) -> None:
        if not FULL_LOWER <= self.lower <= self.upper <= FULL_UPPER:
            raise InvalidInput("range", (self.lower, self.upper), "need 0 <= lower <= upper <= 0xffffffff")

    @property
    def upper_closed(self) -> bool:
        return self.upper == FULL_UPPER

    @property
    def text(self) -> str:
        return f"0x{self.lower:08x}_0x{self.upper:08x}"

    def __str__(self) -> str:
        return self.text

    def includes(self, h: int) -> bool:
        if self.upper_closed:
            return self.lower <= h <= self.upper
        return self.lower <= h < self.upper

    @property
    def width(self) -> int:
        return self.upper - self.lower

    @classmethod
    def parse(cls, text: str) -> BundleRange:
        parts = text.split("_")
        if len(parts) != 2:
            raise InvalidInput("bundle range", text, "expected 0x<lower>_0x<upper>")
        return cls(parse_hex(parts[0], "bundle range"), parse_hex(parts[1], "bundle range"))

    @classmethod
    def full(cls) -> BundleRange:
        return cls(FULL_LOWER, FULL_UPPER)


def bundle_name(namespace: str, rng: BundleRange) -> str:
    return f"{namespace}/{rng.text}"


def split_bundle_name(name: str) -> tuple[str, BundleRange]:
    """``tenant/ns/0x.._0x..`` -> (``tenant/ns``, range)."""
    if "/" not in name:
        raise InvalidInput("bundle", name, "expected <namespace>/0x<lower>_0x<upper>")
    ns, rng = name.rsplit("/", 1)
    return ns, BundleRange.parse(rng)


def namespace_of(bundle: str) -> str:
    """Text before the last ``/``; a name without ``/`` is its own namespace (Pulsar's rule)."""
    return bundle.rsplit("/", 1)[0] if "/" in bundle else bundle


def is_system_namespace(namespace: str) -> bool:
    """``pulsar/system``, heartbeat ``pulsar/<cluster>/<host:port>`` or ``pulsar/<host:port>``,
    and SLA monitor ``sla-monitor/<cluster>/<host:port>`` namespaces are never shed."""
    if namespace == SYSTEM_NAMESPACE:
        return True
    parts = namespace.split("/")
    if parts[0] == "pulsar" and len(parts) in (2, 3) and ":" in parts[-1]:
        return True
    return parts[0] == "sla-monitor" and len(parts) == 3 and ":" in parts[-1]


def heartbeat_broker(namespace: str) -> str | None:
    """The broker a heartbeat (``pulsar/<cluster>/<host:port>``, ``pulsar/<host:port>``) or SLA
    monitor (``sla-monitor/<cluster>/<host:port>``) namespace belongs to; None for any other.

    Pulsar's lookup always places such a namespace on that broker (NamespaceService), whatever the
    placement strategy would say: it exists to probe that very broker."""
    parts = namespace.split("/")
    if parts[0] == "pulsar" and len(parts) in (2, 3) and ":" in parts[-1]:
        return parts[-1]
    if parts[0] == "sla-monitor" and len(parts) == 3 and ":" in parts[-1]:
        return parts[-1]
    return None


def is_system_bundle(bundle: str) -> bool:
    return "/" in bundle and is_system_namespace(namespace_of(bundle))


@dataclass(frozen=True)
class NamespaceBundles:
    """A namespace's layout: sorted boundaries from 0x00000000 to 0xffffffff."""

    namespace: str
    boundaries: tuple[int, ...]

    def __post_init__(self) -> None:
        b = self.boundaries
        if len(b) < 2 or b[0] != FULL_LOWER or b[-1] != FULL_UPPER:
            raise InvalidInput("boundaries", list(b), "must start at 0x00000000 and end at 0xffffffff")
        if any(x >= y for x, y in itertools.pairwise(b)):
            raise InvalidInput("boundaries", list(b), "must be strictly increasing")

    @classmethod
    def initial(cls, namespace: str, num_bundles: int) -> NamespaceBundles:
        """Pulsar's layout for a new namespace: seg = 2^32 / N, the last boundary 0xffffffff."""
        if num_bundles < 1:
            raise InvalidInput("numBundles", num_bundles, "must be >= 1")
        seg = (1 << 32) // num_bundles
        bounds = [seg * i for i in range(num_bundles)] + [FULL_UPPER]
        return cls(namespace, tuple(bounds))

    @classmethod
    def from_texts(cls, namespace: str, boundaries: Sequence[str]) -> NamespaceBundles:
        return cls(namespace, tuple(parse_hex(b) for b in boundaries))

    @property
    def ranges(self) -> list[BundleRange]:
        b = self.boundaries
        return [BundleRange(b[i], b[i + 1]) for i in range(len(b) - 1)]

    @property
    def bundle_names(self) -> list[str]:
        return list(self._names)

    @cached_property
    def _names(self) -> tuple[str, ...]:
        # Built once per layout (immutable): the leader lists every live bundle each reconcile,
        # 100,000 names formatted afresh each time at 100k bundles.
        return tuple(bundle_name(self.namespace, r) for r in self.ranges)

    def find_range(self, h: int) -> BundleRange:
        b = self.boundaries
        # bisect_right puts a hash equal to a boundary into the bundle that starts there;
        # 0xffffffff itself falls in the last, upper-closed bundle.
        i = min(bisect.bisect_right(b, h) - 1, len(b) - 2)
        return BundleRange(b[i], b[i + 1])

    def find_bundle(self, topic: str) -> str:
        ns = topic_namespace(topic)
        if ns != self.namespace:
            raise InvalidInput("topic", topic, f"namespace {ns!r} is not {self.namespace!r}")
        return bundle_name(self.namespace, self.find_range(topic_hash(topic)))

    def contains(self, rng: BundleRange) -> bool:
        i = bisect.bisect_left(self.boundaries, rng.lower)
        return (
            i < len(self.boundaries) - 1
            and self.boundaries[i] == rng.lower
            and self.boundaries[i + 1] == rng.upper
        )

    def split(self, rng: BundleRange, boundaries: Sequence[int]) -> NamespaceBundles:
        """Replace ``rng`` by the children cut at ``boundaries`` (each strictly inside it)."""
        if not self.contains(rng):
            raise InvalidInput("bundle", bundle_name(self.namespace, rng), "not in the namespace's layout")
        cuts = sorted(set(boundaries))
        for c in cuts:
            if not rng.lower < c < rng.upper:
                raise InvalidInput("boundary", f"0x{c:08x}", f"not strictly inside {rng.text}")
        new = sorted(set(self.boundaries) | set(cuts))
        return NamespaceBundles(self.namespace, tuple(new))

    def to_policies(self) -> dict[str, object]:
        """Pulsar's ``BundlesData`` JSON shape."""
        return {"boundaries": [f"0x{b:08x}" for b in self.boundaries], "numBundles": len(self.boundaries) - 1}

    @classmethod
    def from_policies(cls, namespace: str, data: dict[str, object]) -> NamespaceBundles:
        raw = data.get("boundaries")
        if not isinstance(raw, list):
            raise InvalidInput("boundaries", raw, "expected a list of hex strings")
        return cls.from_texts(namespace, [str(x) for x in raw])


def split_in_n(rng: BundleRange, n: int) -> list[int]:
    """Boundaries of an equal n-way split (``NamespaceBundleFactory.splitBundles``): lo + seg*j."""
    if n < 2:
        raise InvalidInput("n", n, "must be >= 2")
    seg = (rng.upper - rng.lower) // n
    return [rng.lower + seg * j for j in range(1, n)]
