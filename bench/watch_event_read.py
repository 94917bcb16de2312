"""Micro-bench: CPU of the watching session's kazoo connection thread while 20,000 watched nodes are
rewritten by another session (what a leader's whole-plan write brings back: a watch event per
assignment), reading through ``BufferedSocket`` or through the plain socket, alternately.

    /work/main/.venv/bin/python bench/watch_event_read.py     # from the repository's root
"""

# ruff: noqa
import os, sys, threading, time

sys.path.insert(0, os.getcwd())
from service.zookeeper.server.launcher import EmbeddedZooKeeper
from service.zookeeper.session import poll_handler
from service.zookeeper.session.client import new_client
from service.zookeeper.session.security import ZkSecurity
from kazoo.handlers.threading import SequentialThreadingHandler

N = 20_000


def thread_cpu(native_id):
    with open(f"/proc/self/task/{native_id}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def run(hosts, buffered, rnd):
    if not buffered:
        poll_handler.PollHandler.create_connection = SequentialThreadingHandler.create_connection
    else:
        poll_handler.PollHandler.create_connection = ORIG
    before = {t.native_id for t in threading.enumerate()}
    watcher = new_client(hosts, ZkSecurity(), 30)
    watcher.start()
    conn = [t for t in threading.enumerate() if t.native_id not in before and "zk_loop" in t.name][0]
    writer = new_client(hosts, ZkSecurity(), 30)
    writer.start()
    seen = [0]
    done = threading.Event()

    def w(_):
        seen[0] += 1
        if seen[0] == N:
            done.set()

    for i in range(0, N, 1000):
        rs = [watcher.get_async(f"/wb/n{j}", watch=w) for j in range(i, i + 1000)]
        for r in rs:
            r.get()
    time.sleep(0.5)
    c0 = thread_cpu(conn.native_id)
    t0 = time.perf_counter()
    pending = []
    for i in range(0, N, 1000):
        tx = writer.transaction()
        for j in range(i, i + 1000):
            tx.set_data(f"/wb/n{j}", b"v%d" % rnd)
        pending.append(tx.commit_async())
        if len(pending) >= 2:
            pending.pop(0).get()
    for p in pending:
        p.get()
    done.wait(60)
    wall = time.perf_counter() - t0
    cpu = thread_cpu(conn.native_id) - c0
    print(
        f"buffered={buffered}: {seen[0]} events, wall {wall:.2f} s, watcher connection thread CPU {cpu:.2f} s",
        flush=True,
    )
    watcher.stop()
    watcher.close()
    writer.stop()
    writer.close()
    return cpu


ORIG = poll_handler.PollHandler.create_connection
with EmbeddedZooKeeper(heap_mb=512) as zk:
    c = new_client(zk.hosts, ZkSecurity(), 30)
    c.start()
    c.ensure_path("/wb")
    for i in range(0, N, 1000):
        tx = c.transaction()
        for j in range(i, i + 1000):
            tx.create(f"/wb/n{j}", b"x")
        tx.commit()
    c.stop()
    c.close()
    res = {True: [], False: []}
    for rnd in range(6):
        b = rnd % 2 == 0
        res[b].append(run(zk.hosts, b, rnd))
    for b, v in res.items():
        print(f"buffered={b}: CPU {sorted(v)}")
