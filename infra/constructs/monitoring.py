"""Alarms to an SNS topic, and one dashboard for the environment."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Aws, Duration, RemovalPolicy
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import AlarmThresholds
from infra.constructs.functions import METRICS_NAMESPACE, powertools_service

__all__ = ["Operations"]

_FIVE_MINUTES = Duration.minutes(5)
# What to do when a stream consumer parked a batch (its DLQ message names the shard and the
# sequence numbers; the stream keeps records 24 h).
_PARKED_BATCH_REMEDY = {
    "indexer": "fix the cause, then re-run indexing (POST /admin/v1/memories/index/trigger) for the tenants "
               "concerned.",
    "timeline": "fix the cause, then replay the parked range of the stream (the message names the shard and "
                "sequence numbers) to the timeline function within 24 h: it records nothing twice and "
                "publishes again.",
    "remember": "fix the cause, then redrive the remember dead-letter queue to the remember queue (SQS "
                "StartMessageMoveTask): the candidates are sealed, and deciding one twice creates no copy.",
}


class Operations(Construct):
    """What an operator watches. Every alarm notifies `topic` (encrypted; CloudWatch alone may
    publish) when it fires and when it recovers:

    - `<api>-5xx`: the API answered >= N server errors in 5 minutes (a dependency or a bug);
    - `<api>-latency-p99`: p99 latency over the threshold for 2 of 3 five-minute periods;
    - `<fn>-errors`, `<fn>-throttles`: invocations failed or were throttled (concurrency);
    - `<consumer>-iterator-age`: the oldest unprocessed stream record is older than the
      threshold (the consumer is stuck or too slow; the stream keeps 24 h);
    - `<consumer>-dlq`: a batch exhausted its retries and was parked (needs a replay);
    - `api-embedding-failures`: the API function's embedding calls failed (searches are degraded);
    - `api-degraded-searches`: searches answered without the embedding model, summed over tenants
      (`memory.search.degraded`). It also sees what the first misses: a query embedding that timed
      out is abandoned by the search, which degrades, but is no `EmbeddingFailures` of Titan's.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        name: str,
        thresholds: AlarmThresholds,
        apis: Mapping[str, apigw.HttpApi],
        functions: Mapping[str, lambda_.IFunction],
        stream_consumers: Mapping[str, lambda_.IFunction],
        dead_letter_queues: Mapping[str, sqs.IQueue],
        alarm_email: str | None,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, id)
        self._name = name
        self.topic_key = kms.Key(
            self, "TopicKey", alias=f"alias/{name}/alarms",
            description=f"{name}: encrypts the alarm topic", enable_key_rotation=True,
            pending_window=Duration.days(30), removal_policy=removal_policy)
        # CloudWatch publishes to an encrypted topic only if the key lets it (AWS's documented policy).
        self.topic_key.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchAlarmsPublish",
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["kms:Decrypt", "kms:GenerateDataKey*"],
            resources=["*"],  # in a key policy, "*" is this key
        ))
        self.topic = sns.Topic(self, "Topic", topic_name=f"{name}-alarms", display_name=f"{name} alarms",
                               master_key=self.topic_key, enforce_ssl=True)
        self.topic.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchAlarmsOfThisAccount",
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["sns:Publish"],
            resources=[self.topic.topic_arn],
            conditions={"ArnLike": {"aws:SourceArn": f"arn:{Aws.PARTITION}:cloudwatch:{Aws.REGION}:{Aws.ACCOUNT_ID}:alarm:*"}},
        ))
        if alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))

        self.alarms: dict[str, cw.Alarm] = {}
        for api_name, api in apis.items():
            self._alarm(
                f"{api_name}-5xx", api.metric_server_error(period=_FIVE_MINUTES, statistic="Sum"),
                thresholds.api_5xx_per_5min,
                f"{api_name} answered >= {thresholds.api_5xx_per_5min} 5xx in 5 min: check the api "
                "function's logs (a dependency failing, or a bug).")
            self._alarm(
                f"{api_name}-latency-p99", api.metric_latency(period=_FIVE_MINUTES, statistic="p99"),
                thresholds.api_p99_latency_ms,
                f"{api_name} p99 latency >= {thresholds.api_p99_latency_ms} ms in 2 of 3 five-minute periods: "
                "Bedrock, DynamoDB or S3 Vectors is slow or throttling (see the dashboard).",
                evaluation_periods=3, datapoints_to_alarm=2)
        for fn_name, fn in functions.items():
            self._alarm(
                f"{fn_name}-errors", fn.metric_errors(period=_FIVE_MINUTES, statistic="Sum"),
                thresholds.lambda_errors_per_5min,
                f"{fn_name} failed >= {thresholds.lambda_errors_per_5min} invocations in 5 min (unhandled "
                "errors or timeouts; the stream consumers retry).")
            self._alarm(
                f"{fn_name}-throttles", fn.metric_throttles(period=_FIVE_MINUTES, statistic="Sum"),
                thresholds.lambda_throttles_per_5min,
                f"{fn_name} was throttled >= {thresholds.lambda_throttles_per_5min} times in 5 min: reserved "
                "or account concurrency is exhausted.")
        for fn_name, fn in stream_consumers.items():
            self._alarm(
                f"{fn_name}-iterator-age",
                fn.metric("IteratorAge", period=_FIVE_MINUTES, statistic="Maximum"),
                thresholds.stream_iterator_age_seconds * 1000,
                f"{fn_name} is >= {thresholds.stream_iterator_age_seconds} s behind the table's stream: it is "
                "failing (see errors) or too slow; records older than 24 h are lost to it.")
        for fn_name, queue in dead_letter_queues.items():
            self._alarm(
                f"{fn_name}-dlq",
                queue.metric_approximate_number_of_messages_visible(period=_FIVE_MINUTES, statistic="Maximum"),
                thresholds.dlq_visible_messages,
                f"{fn_name} parked a batch after its retries: "
                + _PARKED_BATCH_REMEDY.get(fn_name, "fix the cause, then replay the parked range of the stream."))
        if "indexer" in stream_consumers:
            self._alarm(
                "indexer-quarantined",
                cw.Metric(namespace=METRICS_NAMESPACE, metric_name="Quarantined", statistic="Sum",
                          dimensions_map={"service": powertools_service("indexer")}, period=_FIVE_MINUTES),
                thresholds.quarantined_per_5min,
                f"the indexer quarantined >= {thresholds.quarantined_per_5min} memories in 5 min (poison items, "
                "docs/api.md, \"Poison items\"): GET /admin/v1/memories/index/status lists a tenant's with their "
                "reasons; fix the cause, then POST /admin/v1/memories/index/retry.")
        if "api" in functions:
            # A failing embedding model no longer shows as 5xx: hybrid search and recall answer from
            # the keyword index instead (`memory.search.degraded`).
            self._alarm(
                "api-embedding-failures",
                cw.Metric(namespace=METRICS_NAMESPACE, metric_name="EmbeddingFailures", statistic="Sum",
                          dimensions_map={"service": powertools_service("api")}, period=_FIVE_MINUTES),
                thresholds.embedding_failures_per_5min,
                f"the api function's embedding calls failed >= {thresholds.embedding_failures_per_5min} times in 5 "
                "min (Titan throttling, timing out or refusing): hybrid search and recall answer from the keyword "
                "index alone (metadata.degraded; memory.search.degraded per tenant) and semantic search answers "
                "503. Check Bedrock's health, quotas and model access in the region.")
            # Per tenant in EMF (`emf_metrics.EmfMetrics.count`): a Metrics Insights query sums the
            # tenants' series, which no plain metric of an alarm can.
            self._alarm(
                "api-degraded-searches",
                cw.MathExpression(expression=_degraded_searches_query(), using_metrics={}, period=_FIVE_MINUTES,
                                  label="degraded searches"),
                thresholds.embedding_failures_per_5min,
                f"the api function answered >= {thresholds.embedding_failures_per_5min} searches in 5 min without "
                "the embedding model (memory.search.degraded, all tenants): Titan failed or timed out, so hybrid "
                "search and recall answered from the keyword index alone (metadata.degraded). Check Bedrock's "
                "latency, health, quotas and model access in the region.")

        self.dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=name)
        self.dashboard.add_widgets(cw.TextWidget(
            markdown=f"# {name}\nAPI traffic, functions, the stream consumers and their dead-letter queues.",
            width=24, height=2))
        self.dashboard.add_widgets(
            cw.GraphWidget(title="API requests and errors", width=12, left=[
                m for api_name, api in apis.items() for m in (
                    api.metric_count(period=_FIVE_MINUTES, label=f"{api_name} requests"),
                    api.metric_client_error(period=_FIVE_MINUTES, label=f"{api_name} 4xx"),
                    api.metric_server_error(period=_FIVE_MINUTES, label=f"{api_name} 5xx"))]),
            cw.GraphWidget(title="API latency (ms)", width=12, left=[
                m for api_name, api in apis.items() for m in (
                    api.metric_latency(period=_FIVE_MINUTES, statistic="p50", label=f"{api_name} p50"),
                    api.metric_latency(period=_FIVE_MINUTES, statistic="p99", label=f"{api_name} p99"))]),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(title="Function invocations, errors, throttles", width=12, left=[
                m for fn_name, fn in functions.items() for m in (
                    fn.metric_invocations(period=_FIVE_MINUTES, label=f"{fn_name} invocations"),
                    fn.metric_errors(period=_FIVE_MINUTES, label=f"{fn_name} errors"),
                    fn.metric_throttles(period=_FIVE_MINUTES, label=f"{fn_name} throttles"))]),
            cw.GraphWidget(title="Function duration p99 (ms)", width=12, left=[
                fn.metric_duration(period=_FIVE_MINUTES, statistic="p99", label=fn_name)
                for fn_name, fn in functions.items()]),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(title="Stream iterator age (ms)", width=8, left=[
                fn.metric("IteratorAge", period=_FIVE_MINUTES, statistic="Maximum", label=fn_name)
                for fn_name, fn in stream_consumers.items()]),
            cw.GraphWidget(title="Parked batches (DLQ depth)", width=8, left=[
                q.metric_approximate_number_of_messages_visible(period=_FIVE_MINUTES, statistic="Maximum", label=n)
                for n, q in dead_letter_queues.items()]),
            cw.GraphWidget(title="Indexing (service metrics)", width=8, left=[
                _service_metric("indexer", name) for name in
                ("Changes", "ChangesFailed", "Quarantined", "EmbeddedTexts", "ReusedTexts", "VectorsWritten",
                 "EmbeddingThrottles")]),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(title="Timeline (service metrics)", width=12, left=[
                _service_metric("timeline", name) for name in
                ("Events", "EventsFailed", "EventsPublished", "EventsRejected", "PutEventsErrors")]),
            cw.GraphWidget(title="Timeline events by kind (service metrics)", width=12, left=[
                _service_metric("timeline", name) for name in
                ("AddEvents", "UpdateEvents", "DeleteEvents", "ExpiredEvents", "IndexFailedEvents")]),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(title="API answers (service metrics)", width=12, left=[
                _service_metric("api", name) for name in ("Requests", "ClientErrors", "ServerErrors")]),
            cw.GraphWidget(title="Embedding (service metrics)", width=12, left=[
                _service_metric(service, name) for service in ("api", "indexer")
                for name in ("EmbeddingCalls", "EmbeddingCacheHits", "EmbeddingThrottles", "EmbeddingFailures")]),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(title="Memory operations by operation (seed 001)", width=6, left=[
                _seed_metric_search("memory.operations.total", "operation", "Sum")]),
            cw.GraphWidget(title="Memory operation errors by code (seed 001)", width=6, left=[
                _seed_metric_search("memory.operations.errors", "operation,code", "Sum")]),
            cw.GraphWidget(title="Memory operation latency p99 (ms, seed 001)", width=6, left=[
                _seed_metric_search("memory.operations.latency", "operation", "p99")]),
            cw.GraphWidget(title="Results per search, by layer (seed 001)", width=6, left=[
                _seed_metric_search("memory.search.results", "operation,layer", "Average")]),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(title="Memory operations by tenant (seed 001, top 10)", width=12, left=[
                _seed_metric_search("memory.operations.total", "tenant", "Sum", top=10)]),
            cw.GraphWidget(title="Memory operation errors by tenant (seed 001, top 10)", width=12, left=[
                _seed_metric_search("memory.operations.errors", "tenant,code", "Sum", top=10)]),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(title="Searches answered without the embedding model, by tenant (top 10)", width=12,
                           left=[_seed_metric_search("memory.search.degraded", "tenant", "Sum", top=10)]),
        )
        self.dashboard.add_widgets(cw.AlarmStatusWidget(
            title="Alarms", width=24, alarms=list(self.alarms.values())))

    def _alarm(self, name: str, metric: cw.IMetric, threshold: float, description: str, *,
               evaluation_periods: int = 1, datapoints_to_alarm: int = 1) -> cw.Alarm:
        alarm = cw.Alarm(
            self, f"Alarm-{name}",
            alarm_name=f"{self._name}-{name}",
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=evaluation_periods,
            datapoints_to_alarm=datapoints_to_alarm,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        action = cw_actions.SnsAction(self.topic)
        alarm.add_alarm_action(action)
        alarm.add_ok_action(action)
        self.alarms[name] = alarm
        return alarm


def _service_metric(service: str, name: str) -> cw.Metric:
    return cw.Metric(namespace=METRICS_NAMESPACE, metric_name=name,
                     dimensions_map={"service": powertools_service(service)},
                     statistic="Sum", period=_FIVE_MINUTES, label=f"{service} {name}")


def _degraded_searches_query() -> str:
    """CloudWatch Metrics Insights: the sum of `memory.search.degraded` over every tenant's series."""
    return (f'SELECT SUM("memory.search.degraded") FROM SCHEMA("{METRICS_NAMESPACE}", service, tenant) '
            f"WHERE service = '{powertools_service('api')}'")


def _seed_metric_search(name: str, dimensions: str, statistic: str, *, top: int | None = None) -> cw.MathExpression:
    """Every series of one of seed 001's EMF metrics (memsvc.adapters.aws.emf_metrics) with these
    dimensions, found by a CloudWatch SEARCH: operations, codes, layers and tenants are not known
    when the dashboard is deployed. `top`: only the busiest series, for per-tenant graphs."""
    search = (f"SEARCH('{{{METRICS_NAMESPACE},{dimensions},service}} MetricName=\"{name}\" "
              f"service=\"{powertools_service('api')}\"', '{statistic}', {int(_FIVE_MINUTES.to_seconds())})")
    if top is not None:
        search = f"SLICE(SORT({search}, SUM, DESC), 0, {top})"
    return cw.MathExpression(expression=search, using_metrics={}, label="", period=_FIVE_MINUTES)
