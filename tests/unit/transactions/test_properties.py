"""Properties of the coordinator's decisions under any sequence of requests.

A model drives one transactional id with two producer instances (a live one and a
zombie that keeps its old epoch), delayed replays of earlier requests, coordinator
timeouts, appends that fail or stay pending, and marker completion.  Whatever the
sequence, a transaction's outcome is decided once and never changes (nothing takes a
transaction from an abort to being read as committed), and once a transaction ended,
no request carrying that transaction's producer id and epoch changes anything (KIP-890).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from headwater.transactions import decisions as d
from headwater.transactions.metadata import MAX_USABLE_EPOCH, TransactionMetadata
from headwater.transactions.results import Decision, Reply, Transition
from headwater.transactions.state import TransactionResult, TransactionState
from headwater.values import TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.transactions.helpers import CONFIG, TID, ProducerIds

S = TransactionState
PARTITIONS = [TopicPartition("t", p) for p in range(3)]

ops = st.lists(
    st.one_of(
        st.tuples(st.just("init"), st.integers(0, 1)),
        st.tuples(st.just("add"), st.integers(0, 1), st.integers(0, 2)),
        st.tuples(st.just("end"), st.integers(0, 1), st.sampled_from(list(TransactionResult))),
        st.tuples(st.just("replay"), st.integers(0, 50)),
        st.tuples(st.just("markers")),
        st.tuples(st.just("tick"), st.integers(0, 20_000)),
        st.tuples(st.just("append"), st.sampled_from(["ok", "fail", "hold"])),
        st.tuples(st.just("resolve"), st.booleans()),
    ),
    max_size=60,
)


@dataclass
class Model:
    ids: ProducerIds = field(default_factory=ProducerIds)
    current: TransactionMetadata | None = None
    held: Transition | None = None
    now_ms: int = 0
    next_append: str = "ok"
    producers: list[tuple[int, int]] = field(default_factory=lambda: [(-1, -1), (-1, -1)])
    sent: list[tuple[str, int, int, object]] = field(default_factory=list)
    episode: int = 0
    decided: dict[int, TransactionResult] = field(default_factory=dict)
    ended_identities: set[tuple[int, int]] = field(default_factory=set)
    episode_identity: tuple[int, int] | None = None

    def run(self, decision: Decision, *, identity: tuple[int, int] | None) -> Decision:
        if identity in self.ended_identities:
            assert not isinstance(decision, Transition), (identity, decision)
        if isinstance(decision, Transition):
            self.check_transition(decision)
            mode, self.next_append = self.next_append, "ok"
            if mode == "hold":
                self.current, self.held = decision.before, decision
            elif mode == "fail":
                self.current = d.abandon(decision.before, decision)
            else:
                self.land(decision)
        return decision

    def land(self, t: Transition) -> None:
        after = d.complete(t.before, t)
        assert after is not None
        if after.state is S.ONGOING and t.before.state is not S.ONGOING:
            self.episode += 1
            self.episode_identity = (after.producer_id, after.producer_epoch)
        if t.markers is not None and t.before.state is S.ONGOING:
            assert self.episode not in self.decided, "a transaction was decided twice"
            self.decided[self.episode] = t.markers
            assert self.episode_identity is not None
            self.ended_identities.add(self.episode_identity)
        if after.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and t.before.state is S.ONGOING:
            raise AssertionError("completed without markers")
        if after.state is S.COMPLETE_COMMIT and t.before.partitions:
            assert self.decided.get(self.episode) is TransactionResult.COMMIT
        if after.state is S.COMPLETE_ABORT and t.before.partitions:
            assert self.decided.get(self.episode) is TransactionResult.ABORT
        self.current = after
        self.check_invariants()

    def check_transition(self, t: Transition) -> None:
        if t.markers is not None:
            # KIP-890: the markers carry an epoch above the ended transaction's.
            assert t.after.producer_epoch == t.before.producer_epoch + 1
            if t.markers is TransactionResult.COMMIT:
                assert t.before.state is S.ONGOING

    def check_invariants(self) -> None:
        m = self.current
        assert m is not None
        if m.state not in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT):
            assert not m.partitions
        assert m.producer_epoch <= MAX_USABLE_EPOCH

    def adopt(self, who: int, decision: Decision) -> None:
        reply = decision.reply if isinstance(decision, Transition) else decision
        if isinstance(reply, Reply):
            self.producers[who] = (reply.producer_id, reply.producer_epoch)

    def step(self, op: tuple[object, ...]) -> None:
        kind = op[0]
        if kind == "append":
            self.next_append = str(op[1])
            return
        if kind == "resolve":
            if self.held is not None:
                held, self.held = self.held, None
                if op[1]:
                    self.land(held)
                else:
                    self.current = d.abandon(held.before, held)
            return
        if kind == "tick":
            self.now_ms += int(str(op[1]))
            m = self.current
            if m is not None and d.timed_out([m], now_ms=self.now_ms):
                t = d.abort_timed_out(m, now_ms=self.now_ms, allocate_producer_id=self.ids)
                assert t is not None
                self.run(t, identity=None)
            return
        if kind == "markers":
            m = self.current
            if m is not None and m.state.is_completing and not m.pending_transition_in_progress:
                self.run(d.complete_transaction(m, now_ms=self.now_ms), identity=None)
            return
        if kind == "init":
            who = int(str(op[1]))
            decision = d.init_producer_id(
                self.current,
                transactional_id=TID,
                transaction_timeout_ms=10_000,
                now_ms=self.now_ms,
                config=CONFIG,
                allocate_producer_id=self.ids,
            )
            self.adopt(who, self.run(decision, identity=None))
            return
        if kind == "replay":
            if not self.sent:
                return
            what, pid, epoch, arg = self.sent[int(str(op[1])) % len(self.sent)]
            self.request(what, pid, epoch, arg, who=None)
            return
        who = int(str(op[1]))
        pid, epoch = self.producers[who]
        self.request(str(kind), pid, epoch, op[2], who=who)

    def request(self, what: str, pid: int, epoch: int, arg: object, who: int | None) -> None:
        self.sent.append((what, pid, epoch, arg))
        decision: Decision
        if what == "add":
            assert isinstance(arg, int)
            decision = d.add_partitions(
                self.current,
                transactional_id=TID,
                producer_id=pid,
                producer_epoch=epoch,
                partitions=frozenset({PARTITIONS[arg]}),
                now_ms=self.now_ms,
            )
        else:
            assert isinstance(arg, TransactionResult)
            decision = d.end_transaction(
                self.current,
                transactional_id=TID,
                producer_id=pid,
                producer_epoch=epoch,
                result=arg,
                now_ms=self.now_ms,
                allocate_producer_id=self.ids,
            )
        self.run(decision, identity=(pid, epoch))
        if who is not None:
            self.adopt(who, decision)


@settings(deadline=None, max_examples=300)
@given(ops)
def test_no_sequence_of_requests_changes_a_decided_transaction(
    sequence: list[tuple[object, ...]],
) -> None:
    model = Model()
    for op in sequence:
        model.step(op)
