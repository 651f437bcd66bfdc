"""What an application API key looks like, for every service that must tell one apart.

docs/dashboard.md ("API keys"): a key starts with ``sk_test_`` or
``sk_live_`` by its application's ``is_test_mode``. A bearer credential with neither
prefix is a token (an end user's JWT, or the internal service token).
"""
from __future__ import annotations

TEST_API_KEY_PREFIX = "sk_test_"
LIVE_API_KEY_PREFIX = "sk_live_"
API_KEY_PREFIXES = (TEST_API_KEY_PREFIX, LIVE_API_KEY_PREFIX)  # for str.startswith
