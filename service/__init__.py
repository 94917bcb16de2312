"""The adapters around the pure core :mod:`balancer`, one subpackage per role.

Layers, top to bottom; a package may import only from the packages below it, never sideways or up
(``tests/unit/test_layers.py`` enforces this):

- :mod:`service.commands` — the ``loadmgr`` command line (one module per sub-command);
- :mod:`service.demo` — the demo cluster: embedded ZooKeeper, a leader, simulated brokers;
- :mod:`service.api` — the REST app and the Prometheus exposition every instance serves;
- :mod:`service.leader` and :mod:`service.broker` — the leader process's work and a broker agent's;
- :mod:`service.pulsar` — Pulsar's own brokers: the admin API client and executor, the check of the
  brokers' load-manager settings, and the real-cluster launcher (``loadmgr pulsar-cluster``);
- :mod:`service.zookeeper` and :mod:`service.longterm` — ZooKeeper sessions, nodes, paths, Pulsar's
  records and the embedded server; the history sink and the Spark long-term job;
- foundation modules :mod:`service.errors` and :mod:`service.settings`, importable by every layer,
  beside :mod:`balancer`, which imports nothing of ``service``.
"""
