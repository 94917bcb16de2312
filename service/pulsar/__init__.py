"""Code that talks to Apache Pulsar's own brokers (Pulsar mode, ``docs/pulsar-mode.md``).

* :mod:`service.pulsar.admin` — Pulsar's admin REST API: the executor that unloads and splits
  through it, and the reads the broker-settings check and the tests use;
* :mod:`service.pulsar.broker_settings` — whether the brokers' own load manager would fight
  loadmgr (their shedding or auto-split on), read from every broker and ``/admin/configuration``;
* :mod:`service.pulsar.broker_kind` — what differs between Modular and Extensible brokers (where
  their load and ownership are read), with :mod:`service.pulsar.extensible` reading Extensible's
  service-unit state channel, load-data topic and topic stats;
* :mod:`service.pulsar.runtime` and :mod:`service.pulsar.cluster` — a real Pulsar cluster on
  loopback (``loadmgr pulsar-cluster``): the pinned release's jars, a bookie and N brokers.

Layering: above ``zookeeper`` (it reads Pulsar's nodes through the store), below ``leader``.
"""
