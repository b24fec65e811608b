"""The pipelines ``odradek pipeline run`` knows, by name."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from odradek.pipelines import fraud_filter, reservoir_sample, website_activity
from odradek.pipelines.generators import SCENARIOS

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery


@dataclass(frozen=True)
class Pipeline:
    """One pipeline: the demo scenario that feeds it (its topic is the default input topic),
    the default output topic, and ``start``.

    ``start(spark, settings, **options)`` starts the query; ``options`` names the keyword
    arguments it takes besides the session and the
    :class:`~odradek.pipelines.streams.StreamSettings`. The output topic is created with
    ``output_topic_configs`` when it does not exist.
    """

    name: str
    summary: str
    scenario: str
    output_topic: str
    start: Callable[..., StreamingQuery]
    options: tuple[str, ...] = ()
    output_topic_configs: Mapping[str, str] = field(default_factory=dict)

    @property
    def input_topic(self) -> str:
        return SCENARIOS[self.scenario].topic


PIPELINES = MappingProxyType({pipeline.name: pipeline for pipeline in (
    Pipeline("website-activity", "views and distinct users per page and time window",
             "website-activity", "page-view-counts", website_activity.start,
             ("window", "watermark", "output_mode")),
    Pipeline("fraud-filter", "payments whose fraudProbability is above a threshold",
             "payments", "fraudulent_payments", fraud_filter.start,
             ("threshold",)),
    Pipeline("reservoir-sample", "a uniform sample of the stream, one record per slot",
             "events", "events-sample", reservoir_sample.start, ("size", "seed"),
             # The topic's latest value per slot is the sample; compaction keeps only that.
             MappingProxyType({"cleanup.policy": "compact"})),
)})
