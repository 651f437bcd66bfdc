"""The curl examples of docs/audit.md work: each request they send is made here, with the
credential they name, and answers 200."""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from controlplane.audit.schemas import FILTER_QUERY, PAGE_QUERY
from tests.conftest import bearer

DOC = Path(__file__).parents[2] / "docs" / "audit.md"
KNOWN = set(FILTER_QUERY) | set(PAGE_QUERY)


def examples() -> list[tuple[str, str]]:
    """(credential, URL) of every curl in the page's shell blocks."""
    blocks = re.findall(r"```sh\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    commands = " ".join(blocks).replace("\\\n", " ").split("curl ")[1:]
    found = []
    for command in commands:
        credential = "api_key" if "Bearer $API_KEY" in command else "session" if "iamgate_session=" in command else None
        found.append((credential, re.search(r'"\$IAMGATE(/[^"]+)"', command).group(1)))
    return found


def test_the_curl_examples_of_the_audit_page_answer(client, ctx, dashboard_account, dashboard_app, make_api_key):
    app_id = dashboard_app["id"]
    key = bearer(make_api_key(ctx.store["applications"].find_one({"_id": app_id})))
    first = client.simulate_get(f"/api/v1/applications/{app_id}/audit-events", params={"limit": 1}, headers=key)
    values = {"APP": app_id, "ORG": dashboard_account.organization_id, "ACCOUNT_ID": dashboard_account.id,
              "NEXT_CURSOR": first.json["next_cursor"]}
    found = examples()
    assert len(found) >= 4 and {credential for credential, _ in found} == {"api_key", "session"}
    for credential, url in found:
        url = re.sub(r"\$(\w+)", lambda m: values[m.group(1)], url)
        parts = urlsplit(url)
        params = dict(parse_qsl(parts.query))
        if credential == "api_key":
            response = client.simulate_get(parts.path, params=params, headers=key)
        else:
            response = dashboard_account.get(parts.path, params=params)
        assert response.status_code == 200, (url, response.text)
        assert set(params) <= KNOWN, url  # a misspelt filter would be ignored, not refused
