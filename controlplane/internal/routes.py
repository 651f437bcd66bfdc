"""Routes of the internal area (not built yet)."""

INDEXES = {}


def register(ctx, routes):
    pass
