// A real OpenID Connect provider (the `oidc-provider` package) for the single sign-on tests,
// listening on loopback only. Its one argument is JSON:
//
//   {"port": 8123, "client_id": "...", "client_secret": "...",
//    "redirect_uris": ["http://127.0.0.1/sign-in/oidc/callback"],
//    "accounts": {"alice": {"email": "alice@example.com", "email_verified": true, ...}}}
//
// The client is a "native" application, so a loopback redirect URI matches on any port
// (RFC 8252 7.3): every test server, whatever its port, is the same client (its path must still
// match: a server under a prefix registers its own, /tp/sign-in/oidc/callback). The login form is
// oidc-provider's own development form (any password, the login names the account); consent
// is granted at once, as a site's own provider would for its own application. Prints
// "ready <issuer>" once it listens.

import Provider, { interactionPolicy } from "oidc-provider";

const config = JSON.parse(process.argv[2]);
const host = "127.0.0.1";

function accountClaims(id) {
  const claims = config.accounts[id];
  return claims === undefined ? undefined : { sub: claims.sub ?? id, ...claims };
}

// Native clients are asked for consent every time (another application could claim their
// loopback redirect); ours is this machine's test server, so the login form is the only step.
const policy = interactionPolicy.base();
policy.get("consent").checks.remove("native_client_prompt");

function start(port) {
  const issuer = `http://${host}:${port}`;
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: config.client_id,
        client_secret: config.client_secret,
        application_type: "native",
        redirect_uris: config.redirect_uris,
        grant_types: ["authorization_code"],
        response_types: ["code"],
      },
    ],
    claims: {
      openid: ["sub"],
      email: ["email", "email_verified"],
      profile: ["name", "preferred_username", "groups", "orgs"],
    },
    cookies: { keys: ["tuneplane-test-provider-cookie-key"] },
    findAccount: async (_ctx, id) => {
      const claims = accountClaims(id);
      return claims === undefined ? undefined : { accountId: id, claims: async () => claims };
    },
    // Consent needs no second form: the grant covers whatever was asked.
    loadExistingGrant: async (ctx) => {
      const grant = new ctx.oidc.provider.Grant({
        clientId: ctx.oidc.client.clientId,
        accountId: ctx.oidc.session.accountId,
      });
      grant.addOIDCScope(ctx.oidc.params.scope);
      await grant.save();
      return grant;
    },
    features: { devInteractions: { enabled: true } },
    interactions: { policy },
    pkce: { required: () => true },
  });
  const server = provider.listen(port, host, () => {
    process.stdout.write(`ready ${issuer}\n`);
  });
  return server;
}

start(config.port);

for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => process.exit(0));
}
