"""What a SASL SCRAM login costs (issue 18): the client, the broker, and a session check.

Prints, per mechanism and iteration count: the client's side of one exchange (the
PBKDF2 of the password dominates), the broker's side (HMACs only: the broker never
runs PBKDF2, so a flood of logins costs it little), and what the SASL listener's check
of a session token costs per call.  Pure, in-process; figures only, never asserted.

    .venv/bin/python bench/scram.py
"""

from __future__ import annotations

import time
from collections.abc import Callable

from headwater.security.principal import KafkaPrincipal
from headwater.security.scram import ScramClient, ScramCredential, ScramMechanism, ScramServer
from headwater.server.auth.sasl import SaslSessions

ROUNDS = 20


def per_call_us(fn: Callable[[], object], rounds: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(rounds):
        fn()
    return (time.perf_counter() - start) / rounds * 1e6


def main() -> None:
    print(f"{'mechanism':<14} {'iterations':>10} {'client ms':>10} {'broker us':>10}")
    for mechanism in ScramMechanism:
        for iterations in (4096, 8192, 16384):
            credential = ScramCredential.from_password(
                mechanism, "bench-password", salt=b"bench-salt", iterations=iterations
            )
            timings = {"client": 0.0, "server": 0.0}
            for _ in range(ROUNDS):
                client = ScramClient(mechanism, username="bench", password="bench-password")
                server = ScramServer(
                    mechanism,
                    credentials=lambda u, m, c=credential: c,  # type: ignore[misc]
                    fake_salt_secret=b"s",
                )
                t0 = time.perf_counter()
                first = client.first_message()
                t1 = time.perf_counter()
                challenge = server.evaluate_response(first)
                t2 = time.perf_counter()
                final = client.on_server_first(challenge)
                t3 = time.perf_counter()
                verifier = server.evaluate_response(final)
                t4 = time.perf_counter()
                client.on_server_final(verifier)
                t5 = time.perf_counter()
                timings["client"] += (t1 - t0) + (t3 - t2) + (t5 - t4)
                timings["server"] += (t2 - t1) + (t4 - t3)
            print(
                f"{mechanism.value:<14} {iterations:>10} "
                f"{timings['client'] / ROUNDS * 1e3:>10.2f} "
                f"{timings['server'] / ROUNDS * 1e6:>10.1f}"
            )
    sessions = SaslSessions()
    token, _ = sessions.create(KafkaPrincipal.user("bench"), mechanism="SCRAM-SHA-512")
    hex_token = token.hex()
    raw_us = per_call_us(lambda: sessions.principal_for(token), 100000)
    hex_us = per_call_us(lambda: sessions.principal_for(hex_token), 100000)
    print(f"session check per call: raw token {raw_us:.2f} us, hex metadata value {hex_us:.2f} us")


if __name__ == "__main__":
    main()
