"""Routes of the selfservice area (not built yet)."""

INDEXES = {}


def register(ctx, routes):
    pass
