"""ISR rejoin after a network partition: how long after the link between a leader and its
follower comes back the follower is in the ISR again (until then acks=all writes with
min.insync.replicas=2 are refused).

Two brokers reach each other only through a ``headwater.testing.netsplit.LinkProxy`` on
each one's INTERNAL listener; clients use CLIENT.  Each trial cuts the leader's link,
waits for the leader to drop the follower from the ISR (replica.lag.time.max.ms=1500),
keeps the link cut ``--cut-s`` longer, heals it and times the follower's return to the
ISR in ZooKeeper.  The brokers keep Kafka's replica.fetch.wait.max.ms (500) and
replica.fetch.backoff.ms (1000) unless given ``--override key=value``.  Prints each
trial and the median and maximum; never asserts.

    .venv/bin/python bench/isr_rejoin.py [--trials 5] [--cut-s 1] [--override k=v ...]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from headwater import Admin
from headwater.testing import Cluster
from headwater.testing.netsplit import LinkProxy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--cut-s", type=float, default=1.0, help="cut kept after the shrink")
    parser.add_argument("--timeout-s", type=float, default=60.0, help="give up on a rejoin")
    parser.add_argument("--override", action="append", default=[], help="broker key=value")
    args = parser.parse_args()
    overrides = {
        "inter.broker.listener.name": "INTERNAL",
        "min.insync.replicas": "2",
        "replica.lag.time.max.ms": "1500",
        "replica.fetch.wait.max.ms": "500",
        "replica.fetch.backoff.ms": "1000",
    }
    overrides.update(kv.split("=", 1) for kv in args.override)  # type: ignore[misc]
    print("broker settings:", overrides)
    with tempfile.TemporaryDirectory(prefix="bench-isr-rejoin-") as tmp:
        cluster = Cluster(
            brokers=2,
            data_dir=Path(tmp),
            listeners={"CLIENT": "PLAINTEXT", "INTERNAL": "PLAINTEXT"},
            overrides=overrides,
        )
        proxies = {
            b: LinkProxy("127.0.0.1", p.ports["INTERNAL"]) for b, p in cluster.brokers.items()
        }
        for b, broker in cluster.brokers.items():
            cluster.broker_overrides[b] = {
                "advertised.listeners": f"CLIENT://{broker.address_of('CLIENT')},"
                f"INTERNAL://{proxies[b].address}"
            }
        try:
            with cluster, Admin(cluster.bootstrap, default_api_timeout_ms=30000) as admin:
                admin.create_topic("bench-isr", 1, 2)
                times: list[float] = []
                for trial in range(args.trials):
                    cluster.wait_for(lambda: len(cluster.isr_for("bench-isr", 0)) == 2, what="ISR")
                    leader = cluster.leader_for("bench-isr", 0)
                    assert leader is not None
                    proxies[leader].cut()
                    cluster.wait_for(
                        lambda: len(cluster.isr_for("bench-isr", 0)) == 1, what="the shrink"
                    )
                    time.sleep(args.cut_s)
                    proxies[leader].heal()
                    healed = time.monotonic()
                    try:
                        cluster.wait_for(
                            lambda: len(cluster.isr_for("bench-isr", 0)) == 2,
                            timeout_s=args.timeout_s,
                            what="the rejoin",
                        )
                    except TimeoutError:
                        print(f"trial {trial}: not back within {args.timeout_s:.0f} s; stopping")
                        break
                    times.append(time.monotonic() - healed)
                    print(f"trial {trial}: back in the ISR {times[-1]:.2f} s after the heal")
                if times:
                    print(
                        f"rejoin after the heal: median {statistics.median(times):.2f} s, "
                        f"max {max(times):.2f} s ({len(times)}/{args.trials} trials)"
                    )
        finally:
            for proxy in proxies.values():
                proxy.close()


if __name__ == "__main__":
    main()
