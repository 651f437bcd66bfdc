"""Fixtures of the dashboard area, shared by every test directory."""
