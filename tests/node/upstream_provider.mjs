// An upstream OpenID provider for the connection tests: panva's oidc-provider (npm,
// OpenID Certified), started by tests/connections/upstream.py on 127.0.0.1.
//
// Settings, as JSON on argv[2]:
//   port       optional, the loopback port to listen on; the tests leave it out, so the
//              kernel picks one and no other process can take it between the choice and
//              the listen.  Once listening, the provider is built for
//              http://127.0.0.1:<port> and {"ready": issuer} is printed as the first line
//   clients    [{client_id, client_secret, redirect_uris, token_endpoint_auth_method?}]
//   accounts   the path of a JSON file {"<login>": {claims...}}, read at each sign-in so a
//              test can change an account's email between two sign-ins (same sub)
//   github     optional: also serve GET /user and /user/emails as GitHub's user API does,
//              answering for the account whose access token is presented (the github
//              preset is OAuth 2.0 with that API, not OpenID Connect)
//
// The login page is the library's own development interaction (devInteractions): any
// password signs the typed login in, and that login is the account's `sub`.  Consent is
// given once the login is done (loadExistingGrant), as for a first-party client.  PKCE is
// required for every client, and every authorization response carries RFC 9207's `iss`
// (the library always sends it and advertises
// authorization_response_iss_parameter_supported).
import { createHash, generateKeyPairSync } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";

import Provider from "oidc-provider";

const settings = JSON.parse(process.argv[2]);

function account(login) {
  const accounts = JSON.parse(readFileSync(settings.accounts, "utf8"));
  return Object.hasOwn(accounts, login) ? accounts[login] : null;
}

// The provider for `issuer`, served on `port`.
function build(issuer, port) {
  // A fresh signing key per run: the tests pin the JWKS from discovery like any relying party.
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const signingKey = { ...privateKey.export({ format: "jwk" }), kid: `test-${port}`, use: "sig", alg: "RS256" };

  const provider = new Provider(issuer, {
    clients: settings.clients.map((client) => ({
      grant_types: ["authorization_code"], response_types: ["code"], ...client,
    })),
    jwks: { keys: [signingKey] },
    pkce: { required: () => true },
    features: { devInteractions: { enabled: true }, userinfo: { enabled: true } },
    // GitHub's scopes too, for the github preset's requests (unknown scopes would be dropped).
    scopes: ["openid", "offline_access", "email", "profile", "read:user", "user:email"],
    claims: {
      openid: ["sub"],
      // xms_edov: Entra's "email domain owner verified", which the entra preset reads as email_verified.
      email: ["email", "email_verified", "xms_edov"],
      profile: ["name", "picture", "preferred_username", "groups", "department"],
    },
    // Like Google's, the id_token carries the scopes' claims (not only userinfo).
    conformIdTokenClaims: false,
    cookies: { keys: [`upstream-cookie-key-${port}`] },
    async findAccount(_ctx, sub) {
      const claims = account(sub);
      if (claims === null) return undefined;
      return { accountId: sub, async claims() { return { ...claims, sub }; } };
    },
    async loadExistingGrant(ctx) {
      const { session, client, params } = ctx.oidc;
      const grant = new ctx.oidc.provider.Grant({ accountId: session.accountId, clientId: client.clientId });
      grant.addOIDCScope(params.scope);
      await grant.save();
      return grant;
    },
  });

  // The tests run over plain http on loopback; the library needs to know the scheme it is served on.
  provider.proxy = false;

  // GitHub's numeric user id, stable per login.
  function githubId(login) {
    return Number.parseInt(createHash("sha256").update(login).digest("hex").slice(0, 8), 16);
  }

  if (settings.github) {
    // GitHub's user API as the github preset calls it: a bearer token from this provider's token endpoint.
    provider.use(async (ctx, next) => {
      if (ctx.path !== "/user" && ctx.path !== "/user/emails") return next();
      const token = (ctx.get("authorization").match(/^(?:Bearer|token) (.+)$/i) || [])[1];
      const found = token ? await provider.AccessToken.find(token) : undefined;
      const claims = found ? account(found.accountId) : null;
      if (!claims) {
        ctx.status = 401;
        ctx.body = { message: "Bad credentials" };
        return undefined;
      }
      ctx.body = ctx.path === "/user"
        ? { id: githubId(found.accountId), login: found.accountId, name: claims.name ?? null,
            email: claims.email ?? null, avatar_url: claims.picture ?? null }
        : [{ email: claims.email, verified: Boolean(claims.email_verified), primary: true, visibility: "private" }];
      return undefined;
    });
  }
  return provider;
}

const server = createServer();
server.listen(settings.port ?? 0, "127.0.0.1", () => {
  const { port } = server.address();
  const issuer = `http://127.0.0.1:${port}`;
  server.on("request", build(issuer, port).callback());
  console.log(JSON.stringify({ ready: issuer }));
});
