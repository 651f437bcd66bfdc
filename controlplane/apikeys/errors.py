"""Errors of application API keys."""
from shared.errors import NotFound


class ApiKeyNotFound(NotFound, message="API key not found.", detail_names=("key_id",)):
    """No live API key with this id in the application."""
