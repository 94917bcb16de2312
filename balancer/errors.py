"""The small exception hierarchy of the core; adapters translate theirs into these at the boundary."""

from __future__ import annotations


class LoadMgrError(Exception):
    """Base of every error loadmgr raises on purpose."""


class InvalidInput(LoadMgrError, ValueError):
    """Input that cannot be used: names the field and the offending value."""

    def __init__(self, field: str, value: object, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"{field}={value!r}: {reason}")


class ConfigError(InvalidInput):
    """A configuration key that is unknown or has a value of the wrong type."""


class PreconditionFailed(InvalidInput):
    """Input Pulsar refuses with HTTP 412 (e.g. a split algorithm not in the supported list)."""


class AlreadyExists(InvalidInput):
    """A create of something that exists (Pulsar's admin answers 409 Conflict)."""


class Conflict(InvalidInput):
    """A request the current state refuses (answered 409 Conflict): a second drain while one runs,
    cordoning the last broker that could take bundles. Names the field and value, like any input."""


class UnknownNamespace(LoadMgrError, KeyError):
    """A namespace that has no policies node."""

    def __str__(self) -> str:
        return f"namespace {self.args[0]} does not exist" if self.args else "unknown namespace"


class UnknownBundle(LoadMgrError, KeyError):
    """A bundle name that no namespace layout contains."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown bundle"


class UnknownBroker(LoadMgrError, KeyError):
    """A broker id that is not among the live brokers."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown broker"
