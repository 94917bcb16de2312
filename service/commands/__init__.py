"""Sub-commands of ``loadmgr``: one module each, each with ``register(subparsers)``."""
