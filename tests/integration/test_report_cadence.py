"""The live leader samples bundle time averages once per broker report version (#17 item 4, #14).

Pulsar's leader samples when a broker's report changes (``handleDataNotification`` -> ``updateAll``);
ours folds the reports whose node changed since its last refresh (``LoadView.refresh``). On a real
ZooKeeper: a report seen by many refreshes is sampled once, each new version once more, a refresh
with nothing changed changes no time average, and neither a forced full re-read nor a session
expiry (whose resync re-reads every report) samples an unchanged report again.
"""

from __future__ import annotations

import time

import pytest

from balancer.config import LoadBalancerConfig
from balancer.models import LoadData
from service.demo.synthetic import SyntheticCluster
from service.leader.load_view import LoadView
from service.leader.service import make_strategies
from service.longterm.merge import merge_long_term
from service.zookeeper.metadata.store import ZkStore
from tests.integration.conftest import wait_for
from tests.integration.test_watch_view import _expire

pytestmark = pytest.mark.integration

CONFIG = LoadBalancerConfig.from_dict({"loadBalancerBundleUnloadMinThroughputThreshold": 0.0})


def _samples(load: LoadData) -> dict[str, int]:
    return {b: d.long_term_data.num_samples for b, d in load.bundle_data.items()}


def test_one_sample_per_report_version_across_refreshes_and_resyncs(zk_chroot_hosts: str) -> None:
    cluster = SyntheticCluster(zk_chroot_hosts, 6, 120, 4, brokers_per_session=3)
    leader = ZkStore(zk_chroot_hosts, session_timeout_s=4.0)
    leader.start()
    try:
        cluster.populate()
        view = LoadView()
        strategies = make_strategies(CONFIG)

        def refresh() -> list[str]:
            return view.refresh(leader, int(time.time() * 1000), strategies).folded

        assert refresh() == sorted(cluster.group_of)  # a new term folds every report once
        first = _samples(view.load)
        owned = {b for d in view.load.broker_data.values() for b in d.local_data.last_stats}
        assert first and set(first) == owned
        assert all(n == 11 for n in first.values())  # the stored 10 samples plus this report's

        # Nothing changed: no report folded, no time average touched, however often.
        before = view.load.model_copy(deep=True)
        for _ in range(3):
            assert refresh() == []
        assert view.load == before

        hot = sorted(b for b, d in view.load.broker_data.items() if d.local_data.last_stats)
        who = hot[0]
        mine = set(view.load.broker_data[who].local_data.last_stats)
        for version in (1, 2):  # two new versions of one report: two samples of its bundles
            cluster.write_reports([who])
            wait_for(lambda: refresh() == [who], 10, what=f"report version {version} folded")
            assert refresh() == []  # the same version again: no sample
            now = _samples(view.load)
            assert {b for b in now if now[b] != first[b]} == mine
            assert all(now[b] == first[b] + version for b in mine)
        after = view.load.model_copy(deep=True)

        # A full re-read (new session watches, or a connection gap) sees the same versions: no sample.
        assert view.cache is not None
        view.cache.watch.request_resync()
        assert refresh() == [] and view.cache.last_stats["brokers"].full
        resyncs = view.cache.watch.resyncs
        _expire(leader, zk_chroot_hosts)
        wait_for(
            lambda: refresh() == [] and view.cache is not None and view.cache.watch.resyncs > resyncs, 20
        )
        assert view.load == after

        # Long-term data merged by another writer is still adopted, from the cache's journal.
        bundle = sorted(mine)[0]
        window = after.bundle_data[bundle].long_term_data.model_copy(update={"msg_rate_in": 4321.0})
        assert merge_long_term(cluster.admin.client, {bundle: window}, {bundle}).updated
        wait_for(lambda: refresh() == [] and view.adopted_long_term_total == 1, 10, what="adoption")
        assert view.load.bundle_data[bundle].long_term_data.msg_rate_in == 4321.0
        total = sum(view.load.bundle_data[b].long_term_data.msg_rate_in for b in mine)
        assert total > 4321.0  # and the broker's totals count it now, not at its next report
        assert view.load.broker_data[who].time_average_data.long_term_msg_rate_in == pytest.approx(total)
        assert _samples(view.load) == _samples(after)  # adopting is not sampling
    finally:
        leader.stop()
        cluster.close()
