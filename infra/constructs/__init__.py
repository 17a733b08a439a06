"""One construct per concern. Each takes keyword-only typed arguments, exposes its resources as
attributes, and builds its own least-privilege roles; none reads the environment or the config
module (the stack passes what each needs)."""

from infra.constructs.api import ServiceHttpApi
from infra.constructs.events import LifecycleEvents
from infra.constructs.functions import ApiFunction, IndexerFunction, LambdaPackage, ServiceFunction, TimelineFunction
from infra.constructs.keys import EncryptionKeys
from infra.constructs.monitoring import Operations
from infra.constructs.table import ItemTable, KeywordTable
from infra.constructs.users import UserDirectory
from infra.constructs.vectors import VectorStore

__all__ = [
    "EncryptionKeys",
    "ItemTable",
    "KeywordTable",
    "VectorStore",
    "LifecycleEvents",
    "LambdaPackage",
    "ServiceFunction",
    "ApiFunction",
    "IndexerFunction",
    "TimelineFunction",
    "UserDirectory",
    "ServiceHttpApi",
    "Operations",
]
