"""Reads idemkv through the DataStax Python driver (cassandra-driver) for
compat/pydriver_test.go.

Reads a JSON request on stdin:
  {"host": "127.0.0.1", "port": 9042,
   "queries": [{"name": "...", "q": "SELECT ...", "fetch_size": 333,
                "manual_pages": 2}]}
and writes a JSON answer on stdout:
  {"driver": "3.30.1",
   "results": {"<name>": {"rows": [[...], ...],        # every row, paging automatically
                          "pages": [333, 333, ..., 10],  # the rows of each page
                          "manual": [[[...], ...], ...], # the first manual_pages pages by paging_state
                          "replayed": [[...], ...]}}}    # the second page again, from its state
A value is JSON: a map is a list of [key, value] pairs in the order the
server sent them, a set, list or tuple a list, a blob hex, null null.
"""

import json
import sys

import cassandra
from cassandra import ConsistencyLevel
from cassandra.cluster import Cluster
from cassandra.policies import RoundRobinPolicy
from cassandra.query import SimpleStatement


def conv(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if hasattr(v, "items"):
        return [[conv(k), conv(x)] for k, x in v.items()]
    if isinstance(v, (list, tuple, set, frozenset)) or hasattr(v, "__iter__"):
        return [conv(x) for x in v]
    return str(v)


def rows_of(page):
    return [[conv(x) for x in r] for r in page]


def main():
    req = json.load(sys.stdin)
    cluster = Cluster([req["host"]], port=req["port"], protocol_version=4,
                      load_balancing_policy=RoundRobinPolicy(),
                      connect_timeout=30, control_connection_timeout=30)
    session = cluster.connect()
    session.default_timeout = 60
    out = {"driver": cassandra.__version__, "results": {}}
    try:
        for q in req["queries"]:
            stmt = SimpleStatement(q["q"], fetch_size=q.get("fetch_size"),
                                   consistency_level=ConsistencyLevel.QUORUM)
            res = {"rows": [], "pages": []}
            rs = session.execute(stmt)
            while True:
                page = rows_of(rs.current_rows)
                res["rows"].extend(page)
                res["pages"].append(len(page))
                if not rs.has_more_pages:
                    break
                rs.fetch_next_page()
            manual, state, states = [], None, []
            for _ in range(q.get("manual_pages", 0)):
                rs = session.execute(stmt, paging_state=state)
                manual.append(rows_of(rs.current_rows))
                states.append(state)
                state = rs.paging_state
                if state is None:
                    break
            res["manual"] = manual
            if len(states) >= 2:
                res["replayed"] = rows_of(session.execute(stmt, paging_state=states[1]).current_rows)
            out["results"][q["name"]] = res
    finally:
        cluster.shutdown()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
