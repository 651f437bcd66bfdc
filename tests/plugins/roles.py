"""Fixtures of the roles area, shared by every test directory."""
