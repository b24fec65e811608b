"""``odradek demo produce``: a scenario's demo records, written to a topic at a steady rate."""

from __future__ import annotations

import enum
import itertools
import random
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Annotated, Optional, TypeVar

import typer

from odradek.cli.arguments import DEFAULT_BOOTSTRAP_SERVERS, BootstrapServers, ClientProperties
from odradek.cli.client import Kafka
from odradek.cli.produce import DeliveryReport, finish, queue
from odradek.pipelines.generators import SCENARIOS

T = TypeVar("T")

app = typer.Typer(help="Demo data for the pipelines.", no_args_is_help=True)

ScenarioName = enum.Enum("ScenarioName", {name: name for name in SCENARIOS}, type=str)


def paced(items: Iterable[T], rate: float, clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], object] = time.sleep) -> Iterator[T]:
    """Yields the n-th item (from 0) no earlier than n / ``rate`` seconds after the first.

    The schedule is from the start rather than from the previous item, so time spent by the
    caller between items does not lower the rate. ``sleep`` may return early (a producer's
    ``poll`` does, to serve a delivery report); it is called again until the item is due.
    """
    start = clock()
    for number, item in enumerate(items):
        due = start + number / rate
        while (wait := due - clock()) > 0:
            sleep(wait)
        yield item


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@app.command()
def produce(
    scenario: Annotated[ScenarioName, typer.Argument(metavar="SCENARIO", help="What to generate.")],
    rate: Annotated[float, typer.Option(min=0.01, help="Records per second.")] = 10.0,
    count: Annotated[Optional[int], typer.Option(
        min=1, show_default="until Ctrl-C", help="Stop after this many records.")] = None,
    topic: Annotated[Optional[str], typer.Option(
        show_default="the scenario's: page-views, payments or events",
        help="The topic to write to.")] = None,
    seed: Annotated[Optional[int], typer.Option(
        show_default="random", help="Seed of the random choices, to repeat a run's data.")]
    = None,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Write SCENARIO's records to its topic at --rate records per second, until --count
    records or Ctrl-C.

    website-activity: JSON page views keyed by user id.
    payments: JSON payments keyed by account id, each with a fraudProbability.
    events: numbered JSON events.
    """
    chosen = SCENARIOS[scenario.value]
    topic = topic or chosen.topic
    records = chosen.records(random.Random(seed), _now_ms)
    report = DeliveryReport()
    with Kafka(bootstrap_server, command_config) as kafka:
        producer = kafka.producer()
        kafka.partitions(producer, topic)
        try:
            for record in paced(itertools.islice(records, count), rate, sleep=producer.poll):
                queue(producer, topic, key=record.key, value=record.value, on_delivery=report)
        except KeyboardInterrupt:
            pass  # Ctrl-C: deliver what is queued, then report
        finish(kafka, producer, topic, report)
