"""The ``broker.conf`` every broker of :class:`service.pulsar.cluster.PulsarCluster` starts from
(``broker_settings`` and ``loadmgr pulsar-cluster --set`` go on top)."""

from __future__ import annotations

# Intervals shortened so a test or a bench sees load within seconds (Pulsar's defaults: stats every
# 60 s, reports at most every 15 min). The host-usage check (CPU, NIC) cannot go below 1 minute.
BROKER_DEFAULTS: dict[str, str] = {
    "managedLedgerDefaultEnsembleSize": "1",
    "managedLedgerDefaultWriteQuorum": "1",
    "managedLedgerDefaultAckQuorum": "1",
    "managedLedgerCacheSizeMB": "32",
    "loadManagerClassName": "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl",
    "loadBalancerSheddingEnabled": "false",
    "loadBalancerAutoBundleSplitEnabled": "false",
    "loadBalancerAutoUnloadSplitBundlesEnabled": "false",
    "statsUpdateFrequencyInSecs": "5",
    "statsUpdateInitialDelayInSecs": "5",
    "loadBalancerReportUpdateMinIntervalMillis": "2000",
    "loadBalancerReportUpdateThresholdPercentage": "5",
    "loadBalancerReportUpdateMaxIntervalMinutes": "1",
    "loadBalancerHostUsageCheckIntervalMinutes": "1",
    # A fixed 1 Gbit/s NIC: on loopback (not counted) it keeps the host-wide bandwidth figure, the same
    # for every broker, finite; with a namespace per broker (own_hosts) it is each broker's veth's
    # limit instead of the veth's nominal 10 Gbit/s, so its traffic weighs as on a 1 Gbit/s host.
    "loadBalancerOverrideBrokerNicSpeedGbps": "1",
    "defaultNumberOfNamespaceBundles": "4",
    "functionsWorkerEnabled": "false",
    "webSocketServiceEnabled": "false",
    "transactionCoordinatorEnabled": "false",
    "brokerDeleteInactiveTopicsEnabled": "false",
    "brokerShutdownTimeoutMs": "3000",
    "numIOThreads": "2",
    "numHttpServerThreads": "8",
    "numExecutorThreadPoolSize": "2",
    "numOrderedExecutorThreads": "2",
    "bookkeeperClientNumIoThreads": "2",
    "managedLedgerNumSchedulerThreads": "2",
}
