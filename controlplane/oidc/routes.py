"""Routes of the OIDC provider: discovery and keys, the protocol endpoints, and client
management under V1."""
from controlplane.oidc import resources

V1 = "/api/v1/applications/{applicationId}"
TAG = "oidc"


def add_routes(routes, services):
    routes.add("/.well-known/openid-configuration", resources.Discovery(services.config.public_url), TAG)
    routes.add("/.well-known/jwks.json", resources.Jwks(services.keys), TAG)
    secure, proxies = services.config.cookie_secure, services.config.trusted_proxies
    routes.add("/oidc/authorize", resources.Authorize(services.oidc_authorize, services.authenticator,
                                                      services.oidc_hosted, services.pages, cookie_secure=secure), TAG)
    for path, page in (("login", resources.HostedLogin), ("mfa", resources.HostedMfa),
                       ("consent", resources.HostedConsent)):
        routes.add(f"/oidc/authorize/{path}",
                   page(services.oidc_hosted, services.pages, cookie_secure=secure, trusted_proxies=proxies), TAG)
    routes.add("/oidc/token", resources.Token(services.oidc_token), TAG)
    routes.add("/oidc/userinfo", resources.UserInfo(services.oidc_userinfo), TAG)
    routes.add("/oidc/revoke", resources.Revoke(services.oidc_clients, services.oidc_revocation), TAG)
    routes.add("/oidc/introspect", resources.Introspect(services.oidc_clients, services.oidc_introspection), TAG)
    routes.add("/oidc/logout", resources.Logout(services.oidc_logout, services.applications, services.oidc_hosted,
                                                        services.pages), TAG)
    routes.add(f"{V1}/oidc/clients", resources.Clients(services.oidc_clients), TAG)
    routes.add(f"{V1}/oidc/clients/{{clientId}}", resources.ClientItem(services.oidc_clients), TAG)
