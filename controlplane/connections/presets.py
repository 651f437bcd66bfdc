"""Presets: what is known in advance about a popular provider, so that an administrator
gives only the client id and secret (docs/connections.md, "Presets").

A preset fills the connection's type, issuer, scopes and claim mapping; an OAuth 2.0
provider (GitHub) also has its endpoints fixed here, since it publishes no discovery
document.  What the request gives explicitly (scopes, a claim mapping field) wins over
the preset.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from controlplane.connections.model import ClaimMapping, Endpoints
from shared.errors import ValidationFailed


@dataclass(frozen=True)
class Preset:
    name: str
    type: str                         # "oidc" | "oauth2"
    display_name: str                 # the default button text
    issuer: str                       # may hold "{tenant}" (Entra)
    scopes: tuple[str, ...]
    claim_mapping: ClaimMapping
    endpoints: Endpoints | None = None  # oauth2 only: there is no discovery to pin them from
    # oauth2 only: the user API, and the claim of its answer that is the stable subject
    # (an OIDC provider's is the id_token's ``sub``).
    user_api: tuple[str, ...] = ()
    subject_claim: str = "sub"
    issuer_settable: bool = False     # a self-managed instance has its own issuer (GitLab)
    needs_tenant: bool = False

    def issuer_for(self, *, issuer: str | None, tenant: str | None) -> str:
        """The connection's issuer: the preset's, the tenant's (Entra), or one given
        for a self-managed instance; 400 with the field at fault otherwise."""
        if self.needs_tenant:
            if not tenant:
                raise ValidationFailed({"tenant": f"is required with preset {self.name} (the directory's tenant id)"})
            if not _is_uuid(tenant):
                # "common", "organizations" or a domain name: the issuer of the tokens is then
                # each signing-in user's own tenant, not one issuer that discovery can pin.
                raise ValidationFailed({"tenant": "must be the directory (tenant) id, a UUID; multi-tenant "
                                                  "values such as common or organizations are not supported"})
        elif tenant is not None:
            raise ValidationFailed({"tenant": f"is only for preset entra, not {self.name}"})
        if issuer is not None and issuer != self.issuer:
            if not self.issuer_settable:
                raise ValidationFailed({"issuer": f"is fixed by preset {self.name} ({self.issuer}); leave it out"})
            return issuer
        return self.issuer.format(tenant=tenant) if self.needs_tenant else self.issuer


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return len(value) == 36


PRESETS: dict[str, Preset] = {
    "google": Preset(
        name="google", type="oidc", display_name="Google", issuer="https://accounts.google.com",
        scopes=("openid", "email", "profile"), claim_mapping=ClaimMapping(),
    ),
    "entra": Preset(
        # Entra's ``email`` claim is whatever the tenant's administrator typed, never verified
        # by Microsoft (the "nOAuth" takeover): ``email_verified`` maps to the optional
        # ``xms_edov`` claim (email domain owner verified), which the app registration must add.
        name="entra", type="oidc", display_name="Microsoft",
        issuer="https://login.microsoftonline.com/{tenant}/v2.0", scopes=("openid", "email", "profile"),
        claim_mapping=ClaimMapping(email_verified="xms_edov"), needs_tenant=True,
    ),
    "github": Preset(
        name="github", type="oauth2", display_name="GitHub", issuer="https://github.com",
        scopes=("read:user", "user:email"),
        # The user API answers ``avatar_url``; the email and whether it is verified come from
        # /user/emails (the primary address), under the names below.
        claim_mapping=ClaimMapping(email="email", email_verified="email_verified", name="name",
                                   picture="avatar_url"),
        endpoints=Endpoints(issuer="https://github.com",
                            authorization_endpoint="https://github.com/login/oauth/authorize",
                            token_endpoint="https://github.com/login/oauth/access_token",
                            userinfo_endpoint="https://api.github.com/user", jwks_uri=None,
                            iss_parameter_supported=False, fetched_at=None),
        user_api=("https://api.github.com/user", "https://api.github.com/user/emails"), subject_claim="id",
    ),
    "gitlab": Preset(
        name="gitlab", type="oidc", display_name="GitLab", issuer="https://gitlab.com",
        scopes=("openid", "email", "profile"), claim_mapping=ClaimMapping(), issuer_settable=True,
    ),
}
