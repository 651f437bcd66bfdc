"""Reading the change stream: server-sent-events parsing, and the follower's reconnect
rule (resume from the last applied seq after any gap, start over when told to, when the
log went backwards, or when the hello's epoch shows another change log)."""
from __future__ import annotations

import threading

import pytest

from decision.cache import DecisionCache, GrantsEntry, KeyRing, PolicySet
from decision.client import ChangeStream, ControlPlaneClient, ControlPlaneError, Refused
from decision.metrics import DecisionMetrics
from decision.stream import BACKOFF_MIN, ChangeFollower, CredentialRevoked
from shared.abac import CompiledPolicies
from shared.rbac import Assignment, Grants
from tests.decision.conftest import wait_for


class _Raw:
    def __init__(self, chunks):
        self._chunks = list(chunks)

    def read1(self, size):
        return self._chunks.pop(0) if self._chunks else b""


    def close(self):
        pass


def frames(*chunks):
    return list(ChangeStream(_Raw(chunks), _Raw([])))


def test_frames_split_anywhere_are_reassembled():
    assert frames(b"event: hel", b"lo\ndata: {\"seq\"", b": 3}\n", b"\n") == [("hello", {"seq": 3})]


def test_crlf_comments_multiline_data_and_unknown_fields():
    stream = (b": keep-alive\r\n\r\nevent: change\r\nid: 4\r\nretry: 10\r\ndata: {\"seq\": 4,\r\n"
              b"data:  \"type\": \"x\"}\r\n\r\ndata: {\"seq\": 5}\n\n")
    assert frames(stream) == [("change", {"seq": 4, "type": "x"}), ("message", {"seq": 5})]


def test_an_unfinished_frame_is_not_delivered():
    assert frames(b"event: change\ndata: {\"seq\": 1}\n") == []


@pytest.mark.parametrize("data", [b"not json", b"[1, 2]"])
def test_unreadable_data_ends_the_stream(data):
    with pytest.raises(ControlPlaneError):
        frames(b"event: change\ndata: " + data + b"\n\n")


# --- the follower ---------------------------------------------------------------------------


class _Stream:
    def __init__(self, items):
        self._items = items

    def __iter__(self):
        for item in self._items:
            if isinstance(item, Exception):
                raise item
            yield item

    def close(self):
        pass


class ScriptedControlPlane:
    """Each connection plays the next script; ``since`` of every connection is recorded."""

    def __init__(self, *scripts):
        self.scripts = list(scripts)
        self.since = []
        self.done = threading.Event()

    def changes(self, since, *, app_id=None, read_timeout):
        self.since.append(since)
        if not self.scripts:
            self.done.set()
            raise ControlPlaneError("no more scripts")
        script = self.scripts.pop(0)
        if isinstance(script, Exception):
            raise script
        return _Stream(script)


def follow(*scripts):
    cp = ScriptedControlPlane(*scripts)
    cache = DecisionCache(ttl=60, maxsize=100, timer=lambda: 0.0)
    metrics = DecisionMetrics()
    follower = ChangeFollower(cp, cache, metrics, max_staleness=5, read_timeout=1, backoff_max=0.01).start()
    assert cp.done.wait(5)
    follower.stop()
    return cp, cache, metrics, follower


def hello(seq, epoch="epoch-1"):
    return ("hello", {"seq": seq, "epoch": epoch})


def change(seq, user="u1", type_="role.removed", app="a1"):
    return ("change", {"seq": seq, "app_id": app, "type": type_, "user_ids": [user]})


def test_first_connection_starts_live_and_later_ones_resume_from_the_applied_seq():
    cp, cache, metrics, follower = follow(
        [hello(7), change(8), change(9)],
        [hello(9), change(10), ("heartbeat", {"seq": 12})],
    )
    assert cp.since[:3] == [None, 9, 12]
    assert (cache.applied, cache.floor) == (12, 7)
    assert metrics.events.value() == 3
    assert metrics.resets.value() == 0
    assert follower.synced and not follower.connected


def test_a_reset_or_a_rewound_log_drops_everything_and_continues_from_the_new_head():
    cp, cache, metrics, _ = follow(
        [hello(7), change(8)],
        [hello(20), ("reset", {"seq": 20}), change(21)],
        [hello(3), change(4)],  # the log went backwards: a control plane that lost its data
    )
    assert cp.since[:4] == [None, 8, 21, 4]
    assert metrics.resets.value() == 2
    assert (cache.applied, cache.floor) == (4, 3)


def _follower_with_cached_entries(epoch):
    """A follower that applied a hello (with ``epoch``) and changes up to 9, with one
    cached entry of each kind."""
    cache = DecisionCache(ttl=60, maxsize=100, timer=lambda: 0.0)
    metrics = DecisionMetrics()
    follower = ChangeFollower(None, cache, metrics, max_staleness=5, read_timeout=1)
    follower._handle(*hello(7, epoch))
    follower._handle(*change(8, user="u2"))
    follower._handle(*change(9, user="u3"))
    with cache.filling():
        assert cache.store_grants("a1", "u1", GrantsEntry(Grants("u1", "active", [Assignment("r", "role", ("p",))]), 9))
        assert cache.store_policies("a1", PolicySet(9, CompiledPolicies(())))
        assert cache.store_keys("a1", KeyRing(9, {}))
    return follower, cache, metrics


def test_a_hello_of_another_epoch_drops_everything_even_with_a_head_ahead_of_ours():
    # A memory:// control plane restarted and took more writes than we had applied: its
    # head (12) is past our seq (9), but its seqs 1..9 are other events than ours.
    follower, cache, metrics = _follower_with_cached_entries("epoch-1")
    follower._handle(*hello(12, "epoch-2"))
    assert metrics.resets.value() == 1
    assert (cache.grants("a1", "u1"), cache.policies("a1"), cache.keys("a1")) == (None, None, None)
    assert (cache.applied, cache.floor) == (12, 12)
    follower._handle(*change(10))  # the new log's replay after our old seq: already covered
    assert cache.applied == 12
    follower._handle(*hello(12, "epoch-2"))  # reconnecting to the new log: nothing more to drop
    assert metrics.resets.value() == 1


def test_a_hello_of_the_same_log_keeps_the_cache():
    follower, cache, metrics = _follower_with_cached_entries("epoch-1")
    follower._handle(*hello(12, "epoch-1"))
    assert metrics.resets.value() == 0
    assert cache.grants("a1", "u1") is not None and cache.policies("a1") is not None
    assert (cache.applied, cache.floor) == (9, 7)
    follower._handle(*hello(3, "epoch-1"))  # a head below ours still means the log went backwards
    assert metrics.resets.value() == 1 and cache.grants("a1", "u1") is None


@pytest.mark.parametrize("bad_hello", [{"seq": 8, "epoch": 5}, {"seq": 8, "epoch": ""}, {"seq": 8}])
def test_a_hello_without_a_valid_epoch_breaks_the_connection(bad_hello):
    cp, cache, metrics, _ = follow([hello(7, "e1"), change(8), ("hello", bad_hello), change(9)],
                                   [hello(8, "e1"), change(9)])
    assert cp.since[:3] == [None, 8, 9]  # the frame after the bad hello was not applied
    assert cache.applied == 9 and metrics.resets.value() == 0


def test_reconnecting_to_a_replaced_log_follows_it_from_its_head():
    cp, cache, metrics, _ = follow(
        [hello(7, "e1"), change(8), change(9)],
        [hello(15, "e2"), change(10), change(16)],  # replaced; replays from our old seq
    )
    assert cp.since[:3] == [None, 9, 16]
    assert metrics.resets.value() == 1
    assert (cache.applied, cache.floor) == (16, 15)


@pytest.mark.parametrize("bad", [("change", {"seq": "x"}), ("heartbeat", {}), ("change", {"seq": 9, "type": 3}),
                                 ("change", {"seq": 9, "type": "t", "user_ids": "u1"}),
                                 ("change", {"seq": 9, "type": "policy.updated", "policy_ids": "p1"}),
                                 ("change", {"seq": 9, "type": "policy.updated", "policy_ids": [1]})])
def test_a_malformed_frame_breaks_the_connection_and_resumes_from_the_last_good_seq(bad):
    cp, cache, _, _ = follow([hello(7), change(8), bad, change(10)], [hello(8), change(9)])
    assert cp.since[:3] == [None, 8, 9]
    assert cache.applied == 9


def test_frames_of_unknown_types_are_ignored():
    cp, cache, _, _ = follow([hello(7), ("snapshot", {"seq": 99}), change(8)])
    assert cache.applied == 8 and cp.since[:2] == [None, 8]


def test_connection_failures_are_retried_with_the_same_seq():
    cp, cache, _, _ = follow([hello(7), change(8)], ControlPlaneError("refused"), OSError("reset"),
                             [hello(8), change(9)])
    assert cp.since[:4] == [None, 8, 8, 8]
    assert cache.applied == 9


def test_trust_needs_a_recent_frame_and_the_announced_head():
    now = [0.0]
    cache = DecisionCache(ttl=60, maxsize=100, timer=lambda: 0.0)
    follower = ChangeFollower(None, cache, DecisionMetrics(), max_staleness=5, read_timeout=1,
                              monotonic=lambda: now[0])
    assert not follower.trusted()
    follower._handle(*hello(7))
    assert follower.trusted() and follower.healthy()
    follower._handle(*hello(9))  # reconnected; 8 and 9 not yet replayed
    assert not follower.trusted()
    follower._handle("change", {"seq": 8, "app_id": "a", "type": "t", "user_ids": []})
    follower._handle("change", {"seq": 9, "app_id": "a", "type": "t", "user_ids": []})
    assert follower.trusted()
    now[0] = 5.0
    assert follower.trusted()
    now[0] = 5.1
    assert not follower.trusted() and not follower.healthy()
    follower._handle("heartbeat", {"seq": 9})
    assert follower.trusted()


def test_the_real_client_follows_the_fake_control_plane(fake_cp, make_sidecar):
    sidecar = make_sidecar()
    seq = fake_cp.emit(fake_cp.add_app(), "role.assigned", ["u1"])
    assert wait_for(lambda: sidecar.service.cache.applied >= seq)
    assert wait_for(lambda: sidecar.service.cache.lag == 0)


def test_a_503_from_the_control_plane_is_a_gap_retried_with_the_short_back_off(fake_cp, make_sidecar):
    """The control plane answers 503 SERVICE_UNAVAILABLE while its store is down: not a
    refusal (which waits 30 s), so the sidecar reconnects as soon as it comes back."""
    sidecar = make_sidecar()
    fake_cp.stream_status = 503
    fake_cp.restart(wipe=False)  # the open stream ends; reconnections meet the 503
    first = fake_cp.stream_requests
    assert wait_for(lambda: fake_cp.stream_requests >= first + 3)  # back-off of at most 0.1 s here
    assert not sidecar.service.follower.connected
    with pytest.raises(ControlPlaneError) as raised:
        ControlPlaneClient(fake_cp.url, fake_cp.token).changes(None, read_timeout=1)
    assert not isinstance(raised.value, Refused)
    fake_cp.stream_status = None
    assert wait_for(lambda: sidecar.service.follower.connected)


def test_a_revoked_frame_stops_trusting_the_cache_at_once():
    """A revoked credential fails closed now, not when the staleness bound passes."""
    cache = DecisionCache(ttl=60, maxsize=100, timer=lambda: 0.0)
    follower = ChangeFollower(None, cache, DecisionMetrics(), max_staleness=5, read_timeout=1,
                              monotonic=lambda: 0.0)
    follower._handle(*hello(7))
    assert follower.trusted() and follower.healthy()
    with pytest.raises(CredentialRevoked):
        follower._handle("revoked", {"seq": 7})
    assert not follower.trusted() and not follower.healthy()


class _RecordedWaits(threading.Event):
    """The follower's stop event, recording each wait and not sleeping it."""

    def __init__(self):
        super().__init__()
        self.waits = []

    def wait(self, timeout=None):
        self.waits.append(timeout)
        return super().wait(0)


def test_refusals_wait_what_the_server_says_or_the_long_wait_and_gaps_back_off_briefly():
    cp = ScriptedControlPlane(Refused("HTTP 429 STREAM_LIMIT_EXCEEDED", retry_after=12.0),
                              [hello(7), ("revoked", {"seq": 7})],
                              Refused("HTTP 401 AUTH_INVALID_API_KEY"),
                              OSError("reset"))
    follower = ChangeFollower(cp, DecisionCache(ttl=60, maxsize=100, timer=lambda: 0.0), DecisionMetrics(),
                              max_staleness=5, read_timeout=1, backoff_max=0.01, refused_wait=45.0)
    follower._stop = stop = _RecordedWaits()
    follower.start()
    assert cp.done.wait(5)
    follower.stop()
    assert stop.waits[:3] == [12.0, 45.0, 45.0]  # the 429's Retry-After, then the revoked frame, then the 401
    assert stop.waits[3:] and all(wait <= BACKOFF_MIN * 1.5 for wait in stop.waits[3:])  # a gap: short back-off
