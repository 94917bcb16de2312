"""The pure core of loadmgr: Pulsar's load data, config, bundles and every balancing decision.

Nothing in this package performs I/O, starts threads or reads a clock: time is passed in as
epoch milliseconds, and every decision returns data plus an explanation of the numbers behind it.
"""
