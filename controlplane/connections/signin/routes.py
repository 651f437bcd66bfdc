"""Routes of signing in through a connection from an application's own UI (beside the
password login and the passkey sign-in under V1/auth) and of a user's linked identities
(docs/connections.md, "Sign-in" and "Upstream tokens")."""
from controlplane.connections.signin import resources

AUTH = "/api/v1/applications/{applicationId}/auth/connections"
USERS = "/api/v1/applications/{applicationId}/users/{userId}/identities"


def add_routes(routes, services):
    tag, sign_in = "connections: sign-in", services.connection_sign_in
    users = services.users
    common = {"login": users.login, "sessions": users.sessions, "trusted_proxies": services.config.trusted_proxies}
    routes.add(f"{AUTH}/{{connectionId}}/start", resources.Start(sign_in.flow, **common), tag)
    routes.add(f"{AUTH}/callback", resources.Callback(sign_in.flow, **common), tag)
    routes.add(f"{AUTH}/link/code", resources.LinkCode(sign_in.flow, **common), tag)
    routes.add(f"{AUTH}/link/passkey", resources.LinkPasskey(sign_in.flow, **common), tag)
    routes.add(f"{AUTH}/link", resources.LinkComplete(sign_in.flow, **common), tag)
    routes.add(USERS, resources.Identities(sign_in.identities), tag)
    routes.add(f"{USERS}/{{identityId}}", resources.IdentityItem(sign_in.identities), tag)
    routes.add(f"{USERS}/{{identityId}}/token", resources.IdentityToken(sign_in.identities, sign_in.tokens), tag)
