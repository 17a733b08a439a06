"""The default JWT issuer: a Cognito user pool, its app client for the service and, for the
console, its hosted UI and a browser app client."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_cognito as cognito
from constructs import Construct

__all__ = ["UserDirectory", "TENANT_ATTRIBUTE", "ADMIN_GROUP", "BROWSER_SCOPES"]

TENANT_ATTRIBUTE = "tenant_id"  # arrives as the `custom:tenant_id` claim (memsvc.api.identity)
ADMIN_GROUP = "admin"  # arrives in `cognito:groups`, read as a role
BROWSER_SCOPES = (cognito.OAuthScope.OPENID, cognito.OAuthScope.EMAIL, cognito.OAuthScope.PROFILE)


class UserDirectory(Construct):
    """Users are created by an administrator (no self sign-up) with an immutable
    `custom:tenant_id`, which the app client can read but never write, so no user can move
    themselves to another tenant. TOTP MFA is required, passwords are strong, threat protection
    (Plus plan) is on. Tokens: the ID token carries the tenant and groups and its `aud` is the
    client id, which the HTTP API's JWT authorizer checks.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        pool_name: str,
        threat_protection: str,
        removal_policy: RemovalPolicy,
        deletion_protection: bool,
    ) -> None:
        super().__init__(scope, id)
        self.user_pool = cognito.UserPool(
            self, "Pool",
            user_pool_name=pool_name,
            self_sign_up_enabled=False,
            sign_in_aliases=cognito.SignInAliases(username=True, email=True),
            sign_in_case_sensitive=False,
            custom_attributes={
                TENANT_ATTRIBUTE: cognito.StringAttribute(min_len=1, max_len=128, mutable=False),
            },
            mfa=cognito.Mfa.REQUIRED,
            mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
            password_policy=cognito.PasswordPolicy(
                min_length=14, require_lowercase=True, require_uppercase=True, require_digits=True,
                require_symbols=True, temp_password_validity=Duration.days(3)),
            account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
            feature_plan=cognito.FeaturePlan.PLUS,
            standard_threat_protection_mode=cognito.StandardThreatProtectionMode[threat_protection],
            deletion_protection=deletion_protection,
            removal_policy=removal_policy,
        )
        self.client = self.user_pool.add_client(
            "ServiceClient",
            user_pool_client_name=f"{pool_name}-service",
            auth_flows=cognito.AuthFlow(user_srp=True, user_password=True),
            # Its sign-in is the API's flows only: with the hosted UI up, CDK's default OAuth
            # settings (implicit grant, https://example.com callback) would be live for it.
            disable_o_auth=True,
            refresh_token_validity=Duration.days(30),
            **_client_basics(),
        )
        self.admin_group = cognito.CfnUserPoolGroup(
            self, "AdminGroup", user_pool_id=self.user_pool.user_pool_id, group_name=ADMIN_GROUP,
            description="memsvc administrators of their tenant (policies, settings, force-delete)")

    @property
    def issuer(self) -> str:
        return self.user_pool.user_pool_provider_url

    @property
    def audience(self) -> list[str]:
        return [self.client.user_pool_client_id]

    def add_hosted_ui(self, *, domain_prefix: str) -> cognito.UserPoolDomain:
        """Cognito's hosted sign-in pages at `https://<domain_prefix>.auth.<region>.amazoncognito.com`
        (the prefix is unique per region across all accounts)."""
        return self.user_pool.add_domain(
            "HostedUi", cognito_domain=cognito.CognitoDomainOptions(domain_prefix=domain_prefix))

    def add_browser_client(self, id: str, *, client_name: str, redirect_url: str) -> cognito.UserPoolClient:
        """An app client for a single-page app: no secret (a browser cannot keep one), the
        authorization-code grant only (the page sends a PKCE S256 challenge; Cognito has no switch
        to demand one, and the implicit grant, which would put tokens in the URL, is off), and no
        password, SRP or custom API flows. The page sends the ID token: it carries
        `custom:tenant_id` and `cognito:groups`, and its `aud` is this client's id, which the JWT
        authorizer must list. Tokens live an hour; the page does not refresh them."""
        client = self.user_pool.add_client(
            id,
            user_pool_client_name=client_name,
            o_auth=cognito.OAuthSettings(
                flows=cognito.OAuthFlows(authorization_code_grant=True, implicit_code_grant=False,
                                         client_credentials=False),
                scopes=list(BROWSER_SCOPES),
                callback_urls=[redirect_url],
                logout_urls=[redirect_url],
            ),
            supported_identity_providers=[cognito.UserPoolClientIdentityProvider.COGNITO],
            refresh_token_validity=Duration.hours(1),
            **_client_basics(),
        )
        resource = client.node.default_child
        assert isinstance(resource, cognito.CfnUserPoolClient)
        # Only refreshing: signing in happens on the hosted UI, never through this client's API.
        resource.explicit_auth_flows = ["ALLOW_REFRESH_TOKEN_AUTH"]
        return client


def _client_basics() -> dict[str, Any]:
    """What each of the pool's app clients has: no secret (neither a browser nor an agent's
    config can keep one), no user-existence errors, revocable tokens, one-hour ID and access
    tokens, and the tenant readable but never writable."""
    return dict(
        generate_secret=False,
        prevent_user_existence_errors=True,
        enable_token_revocation=True,
        id_token_validity=Duration.hours(1),
        access_token_validity=Duration.hours(1),
        read_attributes=cognito.ClientAttributes()
        .with_standard_attributes(email=True, email_verified=True)
        .with_custom_attributes(TENANT_ATTRIBUTE),
        write_attributes=cognito.ClientAttributes().with_standard_attributes(fullname=True),
    )
