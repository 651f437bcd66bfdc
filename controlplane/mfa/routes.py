"""Routes of the mfa area (not built yet)."""

INDEXES = {}


def register(ctx, routes):
    pass
