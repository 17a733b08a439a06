/** Who am I: the caller as the service sees them (GET /v1/identity), with every claim of the token. */
import { facts, h, preview, table } from "../dom.js";
export const identityView = {
    path: "identity",
    title: "Who am I",
    inMenu: true,
    async render(root, ctx) {
        // Asked again rather than taken from the shell, so the page shows what the service says now.
        const identity = await ctx.api.get("/v1/identity");
        const claims = Object.entries(identity.claims).sort(([a], [b]) => a.localeCompare(b));
        root.append(facts([
            ["Tenant", h("code", { "data-testid": "identity-tenant" }, identity.tenant_id)],
            ["User", h("code", { "data-testid": "identity-user" }, identity.user_id)],
            ["Roles", h("span", { "data-testid": "identity-roles" }, identity.roles.length ? identity.roles.join(", ") : "none")],
            ["Signed in with", identity.auth === "jwt" ? "a bearer token (JWT)" : "AWS IAM (SigV4)"],
            ["Admin views", ctx.isAdmin ? "yes" : "no (they need the admin or service role)"],
        ]), h("h2", {}, "Claims"), claims.length
            ? table("Token claims", ["Claim", "Value"], claims.map(([name, value]) => [h("code", {}, name), h("code", {}, preview(value, 400))]))
            : h("p", { class: "muted" }, "The token carries no claims the service passes on."));
    },
};
