"""Routes of the OIDC provider: discovery and keys, the protocol endpoints, and client
management under V1."""
from controlplane.oidc.resources import (
    authorize,
    clients,
    discovery,
    hosted,
    introspection,
    logout,
    revocation,
    token,
    upstream,
    userinfo,
)
from controlplane.oidc.upstream import CALLBACK_PATH, LINK_PATH, OWN_CALLBACK_PATH, RETIRED_CALLBACK_PATH

V1 = "/api/v1/applications/{applicationId}"
TAG = "oidc"


def add_routes(routes, services):
    routes.add("/.well-known/openid-configuration", discovery.Discovery(services.config.public_url), TAG)
    routes.add("/.well-known/jwks.json", discovery.Jwks(services.keys), TAG)
    secure, proxies = services.config.cookie_secure, services.config.trusted_proxies
    routes.add("/oidc/authorize", authorize.Authorize(services.oidc.authorize, services.authenticator,
                                                      services.oidc.hosted, services.oidc.upstream, services.pages,
                                                      cookie_secure=secure, trusted_proxies=proxies), TAG)
    for path, page in (("login", hosted.HostedLogin), ("mfa", hosted.HostedMfa), ("consent", hosted.HostedConsent),
                       ("forgot", hosted.HostedForgotPassword), ("register", hosted.HostedRegister),
                       ("passkey-offer", hosted.HostedPasskeyOffer)):
        routes.add(f"/oidc/authorize/{path}",
                   page(services.oidc.hosted, services.oidc.upstream, services.pages, cookie_secure=secure,
                        trusted_proxies=proxies), TAG)
    for path, callback in ((CALLBACK_PATH, upstream.ConnectionCallback),
                           (OWN_CALLBACK_PATH, upstream.ConnectionOwnCallback),
                           (RETIRED_CALLBACK_PATH, upstream.RetiredConnectionCallback)):
        routes.add(path, callback(services.oidc.upstream, services.pages, cookie_secure=secure,
                                  trusted_proxies=proxies), TAG)
    routes.add(LINK_PATH, upstream.HostedLink(services.oidc.hosted, services.oidc.upstream, services.pages,
                                              cookie_secure=secure, trusted_proxies=proxies), TAG)
    routes.add("/oidc/assets/{filename}", hosted.HostedAsset(), TAG)
    routes.add("/oidc/token", token.Token(services.oidc.token), TAG)
    routes.add("/oidc/userinfo", userinfo.UserInfo(services.oidc.userinfo), TAG)
    routes.add("/oidc/revoke", revocation.Revoke(services.oidc.clients, services.oidc.revocation), TAG)
    routes.add("/oidc/introspect", introspection.Introspect(services.oidc.clients, services.oidc.introspection), TAG)
    for path, resource in (("/oidc/logout", logout.Logout), (logout.CONFIRM_PATH, logout.LogoutConfirm)):
        routes.add(path, resource(services.oidc.logout, services.applications, services.oidc.hosted, services.pages),
                   TAG)
    routes.add(f"{V1}/oidc/clients", clients.Clients(services.oidc.clients), TAG)
    routes.add(f"{V1}/oidc/clients/{{clientId}}", clients.ClientItem(services.oidc.clients), TAG)
    routes.add(f"{V1}/oidc/clients/{{clientId}}/rotate-secret", clients.ClientSecret(services.oidc.clients), TAG)
