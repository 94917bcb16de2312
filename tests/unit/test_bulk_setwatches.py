"""SetWatches as ZooKeeper's jute layout has it: zxid, data watches, exist watches, child watches."""

from __future__ import annotations

import struct

from service.zookeeper.session.bulk import SetWatches


def _strings(buf: bytes, offset: int) -> tuple[list[str], int]:
    (count,) = struct.unpack_from("!i", buf, offset)
    offset += 4
    out = []
    for _ in range(count):
        (n,) = struct.unpack_from("!i", buf, offset)
        offset += 4
        out.append(buf[offset : offset + n].decode())
        offset += n
    return out, offset


def test_data_and_exist_watches_go_in_their_own_lists() -> None:
    buf = bytes(SetWatches(0x1_0000_0002, ["/a", "/bb"], ["/missing"]).serialize())
    assert struct.unpack_from("!q", buf, 0)[0] == 0x1_0000_0002
    data, offset = _strings(buf, 8)
    exist, offset = _strings(buf, offset)
    child, offset = _strings(buf, offset)
    assert (data, exist, child) == (["/a", "/bb"], ["/missing"], [])
    assert offset == len(buf)


def test_without_absent_paths_only_data_watches_are_set() -> None:
    buf = bytes(SetWatches(7, ["/a"]).serialize())
    data, offset = _strings(buf, 8)
    exist, offset = _strings(buf, offset)
    assert (data, exist) == (["/a"], [])
