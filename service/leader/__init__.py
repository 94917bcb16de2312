"""What runs in every ``loadmgr serve`` instance and does work only while it leads: the election through
the ``/loadbalance/leader`` ephemeral node (``election``), the view of the cluster read from ZooKeeper
(``load_view``, ``cluster_view``), the leader's jobs — shedding, placement, split, bundle data,
reconcile — and their schedule (``jobs``, ``split_jobs``, ``schedule``, ``clock``), the executors that
carry out moves (``executors``), and the service object the API and commands drive (``service``, with
its readiness in ``readiness`` and the operator's unload, split and lookup in ``operations``).
Decisions are made by :mod:`balancer` over a snapshot of the view.
May import :mod:`service.zookeeper` and the foundation; never the broker side, the API or commands.
"""
