"""Routes of the dashboard area (not built yet)."""

INDEXES = {}


def register(ctx, routes):
    pass
