"""Routes of the authz area (not built yet)."""

INDEXES = {}


def register(ctx, routes):
    pass
