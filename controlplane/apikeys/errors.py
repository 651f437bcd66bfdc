"""Errors of application API keys."""
from shared.errors import NotFound


class ApiKeyNotFound(NotFound):
    """No live API key with this id in the application."""

    message = "API key not found."
    detail_names = ("key_id",)
