"""Routes of the roles area (not built yet)."""

INDEXES = {}


def register(ctx, routes):
    pass
