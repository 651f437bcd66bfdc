"""Fixtures of the users area, shared by every test directory."""
