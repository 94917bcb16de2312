"""What runs beside each broker (``loadmgr agent``): the agent that registers the broker, publishes its
``LocalBrokerData`` report and takes or releases bundles as assignments say (``agent``), and its load
sources: the host's CPU, memory and NICs (``host_usage``), a Pulsar broker's admin stats
(``pulsar_source``) and the simulated workload the demo and tests drive (``workload``).
May import :mod:`service.zookeeper` and the foundation (:mod:`balancer`, :mod:`service.errors`,
:mod:`service.settings`); never the leader.
"""
