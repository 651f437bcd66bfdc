"""Routes of passkeys (WebAuthn) for end users (docs/passkeys.md)."""
from controlplane.passkeys import resources

V1 = "/api/v1/applications/{applicationId}/auth/passkeys"


def add_routes(routes, services):
    tag, passkeys, trusted_proxies = "passkeys", services.passkeys, services.config.trusted_proxies
    routes.add(f"{V1}/registration/options", resources.RegistrationOptions(passkeys), tag)
    routes.add(f"{V1}/registration/verify", resources.RegistrationVerify(passkeys), tag)
    routes.add(V1, resources.Passkeys(passkeys), tag)
    routes.add(f"{V1}/{{passkeyId}}", resources.PasskeyItem(passkeys), tag)
    sign_in = {"login": services.users.login, "trusted_proxies": trusted_proxies}
    routes.add(f"{V1}/authentication/options", resources.AuthenticationOptions(passkeys, **sign_in), tag)
    routes.add(f"{V1}/authentication/verify", resources.AuthenticationVerify(passkeys, **sign_in), tag)
