"""The API of signing in through a connection from an application's own UI, and of a
user's linked identities (resources, routes, schemas)."""
