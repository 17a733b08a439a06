"""The S3 Vectors bucket and the one index the service queries."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3vectors as s3vectors
from constructs import Construct

__all__ = ["VectorStore"]


class VectorStore(Construct):
    """A vector bucket encrypted with `encryption_key` (SSE-KMS) and one float32 cosine index
    of `dimension` dimensions whose `non_filterable_keys` are fixed at creation (S3 Vectors cannot
    change them later, nor the dimension: a new value means a new index and a re-index)."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        bucket_name: str,
        index_name: str,
        dimension: int,
        non_filterable_keys: Sequence[str],
        encryption_key: kms.IKey,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, id)
        if len(non_filterable_keys) > 10:
            raise ValueError("S3 Vectors allows at most 10 non-filterable metadata keys")
        encryption = {"sse_type": "aws:kms", "kms_key_arn": encryption_key.key_arn}
        self.bucket = s3vectors.CfnVectorBucket(
            self, "Bucket",
            vector_bucket_name=bucket_name,
            encryption_configuration=s3vectors.CfnVectorBucket.EncryptionConfigurationProperty(**encryption),
        )
        self.index = s3vectors.CfnIndex(
            self, "Index",
            vector_bucket_arn=self.bucket.attr_vector_bucket_arn,
            index_name=index_name,
            data_type="float32",
            dimension=dimension,
            distance_metric="cosine",
            metadata_configuration=s3vectors.CfnIndex.MetadataConfigurationProperty(
                non_filterable_metadata_keys=list(non_filterable_keys)),
            encryption_configuration=s3vectors.CfnIndex.EncryptionConfigurationProperty(**encryption),
        )
        for resource in (self.bucket, self.index):
            resource.apply_removal_policy(removal_policy)
        # S3 Vectors maintains the index in the background as its own service principal, which
        # needs to decrypt with the bucket's key; only on behalf of this account.
        encryption_key.add_to_resource_policy(iam.PolicyStatement(
            sid="S3VectorsIndexing",
            principals=[iam.ServicePrincipal("indexing.s3vectors.amazonaws.com")],
            actions=["kms:Decrypt"],
            resources=["*"],  # in a key policy, "*" is this key
            conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
        ))
        self.bucket_name = bucket_name
        self.index_name = index_name

    @property
    def index_arn(self) -> str:
        return self.index.attr_index_arn
