// A confidential relying party written with panva's openid-client (npm), driven by
// tests/oidc/test_openid_client.py against the real control plane.  Every protocol step
// is the library's own: discovery, the authorization URL (PKCE S256, state, nonce,
// max_age), the code grant and its ID token checks, userinfo, refresh, introspection,
// revocation and the end-session URL.  The authorization itself is the provider's JSON
// mode (the user's access token on /oidc/authorize), what the application's front end
// does.  Reads its settings as JSON on argv[2]; prints one JSON object of what each step
// saw; exits non-zero with the library's error when a step throws.
import * as client from "openid-client";

const settings = JSON.parse(process.argv[2]);
const steps = {};
const insecure = { execute: [client.allowInsecureRequests] };  // the provider is http://127.0.0.1

const config = await client.discovery(new URL(settings.issuer), settings.client_id, undefined,
                                      client.ClientSecretBasic(settings.client_secret), insecure);
steps.discovery = { issuer: config.serverMetadata().issuer,
                    end_session_endpoint: config.serverMetadata().end_session_endpoint };

async function signIn() {
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: settings.redirect_uri, scope: "openid profile email", state, nonce, max_age: "300",
    code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: "S256",
  });
  const answer = await fetch(url, { headers: { Authorization: `Bearer ${settings.user_access_token}` } });
  if (answer.status !== 200) throw new Error(`authorize answered ${answer.status}: ${await answer.text()}`);
  const { code, redirect_uri } = await answer.json();
  const callback = new URL(redirect_uri);
  callback.searchParams.set("code", code);
  callback.searchParams.set("state", state);
  const tokens = await client.authorizationCodeGrant(config, callback, {
    pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce, maxAge: 300, idTokenExpected: true,
  });
  return { tokens, challenge: url.searchParams.get("code_challenge_method"), maxAge: url.searchParams.get("max_age") };
}

async function refused(step) {
  try {
    await step();
    return null;
  } catch (error) {
    return error.error ?? error.code ?? String(error);
  }
}

// The first grant: code + PKCE + max_age, userinfo, refresh, introspection, revocation.
const first = await signIn();
const claims = first.tokens.claims();
steps.code = { code_challenge_method: first.challenge, max_age: first.maxAge, sub: claims.sub, aud: claims.aud,
               auth_time: claims.auth_time, sid: claims.sid, has_refresh_token: Boolean(first.tokens.refresh_token) };
const profile = await client.fetchUserInfo(config, first.tokens.access_token, claims.sub);
steps.userinfo = { sub: profile.sub, email: profile.email };
const refreshed = await client.refreshTokenGrant(config, first.tokens.refresh_token);
steps.refresh = { rotated: refreshed.refresh_token !== first.tokens.refresh_token,
                  sub: refreshed.claims()?.sub, new_access_token: refreshed.access_token !== first.tokens.access_token };
const live = await client.tokenIntrospection(config, refreshed.refresh_token);
steps.introspect = { active: live.active, client_id: live.client_id, sub: live.sub };
await client.tokenRevocation(config, refreshed.refresh_token, { token_type_hint: "refresh_token" });
const dead = await client.tokenIntrospection(config, refreshed.refresh_token);
steps.revoke = { active_after: dead.active,
                 refresh_error: await refused(() => client.refreshTokenGrant(config, refreshed.refresh_token)) };

// The second grant ends with RP-initiated logout.
const second = await signIn();
const endSession = client.buildEndSessionUrl(config, {
  id_token_hint: second.tokens.id_token, post_logout_redirect_uri: settings.post_logout_redirect_uri, state: "bye",
});
const logout = await fetch(endSession, { redirect: "manual" });
steps.end_session = { status: logout.status, location: logout.headers.get("location"),
                      refresh_error: await refused(() => client.refreshTokenGrant(config, second.tokens.refresh_token)) };

console.log(JSON.stringify(steps));
