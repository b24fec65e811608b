"""``odradek pipeline``: list the Spark pipelines and run one until Ctrl-C.

pyspark is imported only by ``run``, so that the rest of the CLI starts without it.
"""

from __future__ import annotations

import enum
import signal
import threading
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from confluent_kafka import KafkaError
from confluent_kafka.admin import NewTopic

from odradek.cli import output
from odradek.cli.arguments import DEFAULT_BOOTSTRAP_SERVERS, BootstrapServers, ClientProperties
from odradek.cli.client import ADMIN_OPERATION_TIMEOUTS, Kafka
from odradek.cli.errors import fail
from odradek.pipelines.registry import PIPELINES, Pipeline
from odradek.pipelines.streams import DEFAULT_TRIGGER_SECONDS, StreamSettings

app = typer.Typer(help="Run the Spark pipelines over odradek topics.", no_args_is_help=True)

PipelineName = enum.Enum("PipelineName", {name: name for name in PIPELINES}, type=str)

# How often the command checks that the query is still running while it waits for Ctrl-C.
AWAIT_SECONDS = 1


class StartingOffsets(str, enum.Enum):
    earliest = "earliest"
    latest = "latest"


class OutputMode(str, enum.Enum):
    update = "update"
    append = "append"


@app.command("list")
def list_pipelines() -> None:
    """The pipelines, their default topics and the demo scenario that feeds each."""
    output.table(("PIPELINE", "INPUT", "OUTPUT", "DEMO DATA", "WHAT IT COMPUTES"), (
        (p.name, p.input_topic, p.output_topic, f"odradek demo produce {p.scenario}", p.summary)
        for p in PIPELINES.values()))


@app.command()
def run(
    name: Annotated[PipelineName, typer.Argument(metavar="PIPELINE", help="Which pipeline.")],
    checkpoint_dir: Annotated[Optional[Path], typer.Option(
        show_default="checkpoints/PIPELINE",
        help="Where Spark keeps the query's offsets and state; a run with the same directory "
             "continues where the last one stopped.")] = None,
    trigger_seconds: Annotated[float, typer.Option(
        min=0, help="Start a micro-batch this often (0: as soon as the last one ends).")]
    = DEFAULT_TRIGGER_SECONDS,
    input_topic: Annotated[Optional[str], typer.Option(
        show_default="the pipeline's", help="The topic to read.")] = None,
    output_topic: Annotated[Optional[str], typer.Option(
        show_default="the pipeline's", help="The topic to write.")] = None,
    starting_offsets: Annotated[StartingOffsets, typer.Option(
        help="Where a new query starts reading; a checkpointed one continues.")]
    = StartingOffsets.earliest,
    to_console: Annotated[bool, typer.Option(
        "--print", help="Print the output records instead of writing them to a topic.")]
    = False,
    exactly_once: Annotated[bool, typer.Option(
        help="Write each output record once for read_committed readers, through stops, "
             "crashes and restarts, with a transaction per task (sink id "
             "odradek-PIPELINE-OUTPUT_TOPIC).")] = False,
    window: Annotated[Optional[str], typer.Option(
        show_default="1 minute", help="website-activity: the tumbling window, e.g. '30 seconds'.")]
    = None,
    watermark: Annotated[Optional[str], typer.Option(
        show_default="10 seconds",
        help="website-activity: how late a view may arrive and still be counted.")] = None,
    output_mode: Annotated[Optional[OutputMode], typer.Option(
        show_default="update",
        help="website-activity: update (a window's counts each time they change) or append "
             "(once, when the watermark closes the window).")] = None,
    threshold: Annotated[Optional[float], typer.Option(
        show_default="0.8", help="fraud-filter: the fraudProbability a payment must exceed.")]
    = None,
    sample_size: Annotated[Optional[int], typer.Option(
        min=1, show_default="10", help="reservoir-sample: records in the sample.")] = None,
    seed: Annotated[Optional[int], typer.Option(
        show_default="0", help="reservoir-sample: seed of the random choices.")] = None,
    master: Annotated[str, typer.Option(help="Spark master URL.")] = "local[*]",
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Run a pipeline until Ctrl-C."""
    pipeline = PIPELINES[name.value]
    if exactly_once and to_console:
        fail("--exactly-once writes to a topic: it can't be used with --print")
    options = _pipeline_options(pipeline, {
        "window": window, "watermark": watermark,
        "output_mode": output_mode.value if output_mode else None, "threshold": threshold,
        "size": sample_size, "seed": seed,
    })
    output_topic = output_topic or pipeline.output_topic
    settings = StreamSettings(
        bootstrap_servers=bootstrap_server,
        input_topic=input_topic or pipeline.input_topic,
        output_topic=output_topic,
        checkpoint_location=str((checkpoint_dir or Path("checkpoints", pipeline.name)).resolve()),
        trigger={"processingTime": f"{trigger_seconds} seconds"},
        starting_offsets=starting_offsets.value,
        to_console=to_console,
        query_name=pipeline.name.replace("-", "_"),
        sink_id=f"odradek-{pipeline.name}-{output_topic}" if exactly_once else None,
    )
    if not to_console:
        _create_output_topic(pipeline, settings, command_config)
    _run_until_stopped(pipeline, settings, options, master)


# The option each of the pipelines' keyword arguments comes from, for error messages.
_OPTION_NAMES = {"size": "--sample-size"}


def _pipeline_options(pipeline: Pipeline, given: dict[str, Any]) -> dict[str, Any]:
    options = {key: value for key, value in given.items() if value is not None}
    for key in options.keys() - set(pipeline.options):
        option = _OPTION_NAMES.get(key, "--" + key.replace("_", "-"))
        fail(f"{option} is not an option of {pipeline.name}")
    return options


def _create_output_topic(pipeline: Pipeline, settings: StreamSettings,
                         command_config: list[str] | None) -> None:
    """Creates the output topic with the pipeline's topic configs unless it exists; this
    also finds out early, with a one-line error, that no broker can be reached."""
    topic = NewTopic(settings.output_topic, num_partitions=-1, replication_factor=-1,
                     config=dict(pipeline.output_topic_configs))
    with Kafka(settings.bootstrap_servers, command_config) as kafka:
        for created, _ in kafka.settle(
                kafka.admin.create_topics([topic], **ADMIN_OPERATION_TIMEOUTS),
                lambda name: f"topic {name!r}", ignore={KafkaError.TOPIC_ALREADY_EXISTS}):
            output.note(f"Created topic {created}.")


def _run_until_stopped(pipeline: Pipeline, settings: StreamSettings, options: dict[str, Any],
                       master: str) -> None:
    from odradek.spark.session import local_session

    spark = local_session(f"odradek-{pipeline.name}", master)
    stop_requested = _on_stop_signals()
    try:
        query = pipeline.start(spark, settings, **options)
        destination = "the console" if settings.to_console else settings.output_topic
        output.note(f"{pipeline.name}: {settings.input_topic} -> {destination}, checkpoints in "
                    f"{settings.checkpoint_location}; Ctrl-C stops")
        while query.isActive and not stop_requested.wait(AWAIT_SECONDS):
            pass
        if stop_requested.is_set():
            output.note(f"stopping {pipeline.name}")
        query.stop()  # waits for the running micro-batch to be cancelled
        error = query.exception()
        if error is not None:
            fail(f"{pipeline.name} failed: {_first_line(error)}")
        output.note(f"{pipeline.name} stopped")
    finally:
        spark.stop()


def _on_stop_signals() -> threading.Event:
    """An event set by Ctrl-C or SIGTERM.

    PySpark's own SIGINT handler cancels all jobs from inside the handler, which, arriving
    while the main thread is in a call into the JVM, breaks that call's connection; so the
    handler here only records the request, and the main thread stops the query between
    two calls.
    """
    stop_requested = threading.Event()

    def request_stop(signum: int, frame: object) -> None:
        stop_requested.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    return stop_requested


def _first_line(error: Exception) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
