"""Issue 24, item 2, in the decision service: it compiles the policies it fetches from the
control plane with the same engine (``shared.abac``), so a tenant at every cap editing one
policy costs its checks only the edited condition there too. Counted, not timed; it fails
on the old engine, which wrote the 400 covering policies out and compile()d them after
every edit.

The decision service's fixtures (a fake control plane over HTTP and the decision app) are
those of tests/decision/conftest.py."""
from __future__ import annotations

from tests.conftest import make_config
from tests.decision.conftest import fake_cp, make_sidecar, monotonic, sidecar, sidecar_client, sidecar_overrides, tenant  # noqa: F401
from tests.decision.fakecp import policy
from tests.security.test_abac_policy_cost import COVERING, condition_at_the_caps, count_compiling

DEFAULTS = make_config()  # the caps' defaults


def test_a_check_after_an_edit_at_every_cap_compiles_only_what_changed(tenant, fake_cp, monkeypatch):  # noqa: F811
    per_pattern = DEFAULTS.max_policies_per_permission
    max_bytes, max_nodes = DEFAULTS.max_condition_bytes, DEFAULTS.max_condition_nodes
    user = tenant.user_with("other:read")
    policies = [policy("deny" if i % 2 else "allow", [pattern], condition_at_the_caps(i, max_bytes, max_nodes),
                       name=f"p{i}")
                for i, pattern in enumerate(pattern for pattern in COVERING for _ in range(per_pattern))]
    built = count_compiling(monkeypatch)
    body = {"user_id": user, "permission": "docs:read", "resource": {"k0": "nothing"}}
    for edit in range(4):
        if edit:
            policies[edit * 7] = policy("allow", [COVERING[0]], condition_at_the_caps(10_000 + edit, max_bytes,
                                                                                        max_nodes), name=f"e{edit}")
        revision = fake_cp.set_policies(tenant.app_id, policies)
        built.clear()
        answer = tenant.post({**body, "min_revision": revision})
        assert answer.status_code == 200, answer.text
        assert answer.json["allowed"] is False and answer.json["policies_checked"] == len(policies)
        if edit:  # the first check compiled the whole set once
            assert len(built) <= max_nodes, len(built)
