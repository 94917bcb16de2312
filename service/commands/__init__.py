"""The ``loadmgr`` command line (``cli``): one module per sub-command, each with
``register(subparsers)``, plus the simulator's scenario files (``scenario_files``). The top layer:
may import every package of :mod:`service`; nothing imports it.
"""
