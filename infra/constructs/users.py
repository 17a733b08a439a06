"""The default JWT issuer: a Cognito user pool and one app client for the service."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_cognito as cognito
from constructs import Construct

__all__ = ["UserDirectory", "TENANT_ATTRIBUTE", "ADMIN_GROUP"]

TENANT_ATTRIBUTE = "tenant_id"  # arrives as the `custom:tenant_id` claim (memsvc.api.identity)
ADMIN_GROUP = "admin"  # arrives in `cognito:groups`, read as a role


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
            generate_secret=False,
            auth_flows=cognito.AuthFlow(user_srp=True, user_password=True),
            prevent_user_existence_errors=True,
            enable_token_revocation=True,
            id_token_validity=Duration.hours(1),
            access_token_validity=Duration.hours(1),
            refresh_token_validity=Duration.days(30),
            read_attributes=cognito.ClientAttributes()
            .with_standard_attributes(email=True, email_verified=True)
            .with_custom_attributes(TENANT_ATTRIBUTE),
            write_attributes=cognito.ClientAttributes().with_standard_attributes(fullname=True),
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
