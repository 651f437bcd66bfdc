"""Routes of the users area (not built yet)."""

INDEXES = {}


def register(ctx, routes):
    pass
