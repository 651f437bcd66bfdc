"""Errors of application API keys."""
from shared.errors import NotFound


class ApiKeyNotFound(NotFound):
    """No live API key with this id in the application."""

    message = "API key not found."

    def __init__(self, key_id: str):
        super().__init__(details={"key_id": key_id})
