"""``odradek consume``: print a topic's records, one per line.

The consumer is assigned partitions directly (assign()): it joins no group and commits no
offsets, so reading a topic leaves no trace on the broker.
"""

from __future__ import annotations

import base64
import enum
import json
import os
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Annotated, Optional

import typer
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from odradek.cli import output
from odradek.cli.arguments import DEFAULT_BOOTSTRAP_SERVERS, BootstrapServers, ClientProperties
from odradek.cli.client import REQUEST_TIMEOUT_SECONDS, Kafka
from odradek.cli.errors import fail

# With --max-messages and no --timeout: give up after this long without a record.
DEFAULT_IDLE_TIMEOUT_SECONDS = 10.0
# How long one poll waits; bounds how late an idle timeout is noticed.
POLL_SECONDS = 0.5
# Records taken per poll; output is flushed once per batch, not once per record.
BATCH_SIZE = 500
# librdkafka's Python client insists on a group.id even for assign()-only consumers; with
# commits off and no subscribe() it never joins the group or writes an offset.
UNUSED_GROUP_ID = "odradek-cli"

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}


class Format(str, enum.Enum):
    text = "text"
    json = "json"
    kcat_like = "kcat-like"


class Binary(str, enum.Enum):
    replace = "replace"
    base64 = "base64"


def consume(
    topic: str,
    from_beginning: Annotated[bool, typer.Option(
        "--from-beginning", help="Start at each partition's first record.")] = False,
    offset: Annotated[Optional[int], typer.Option(min=0, help="Start at this offset.")] = None,
    partition: Annotated[Optional[int], typer.Option(
        min=0, show_default="all", help="Read only this partition.")] = None,
    from_timestamp: Annotated[Optional[str], typer.Option(
        metavar="MS|ISO8601", help="Start at the first record at or after this time: ms since "
        "the epoch, or an ISO 8601 date-time (local time unless it has an offset).")] = None,
    max_messages: Annotated[Optional[int], typer.Option(
        min=1, help="Stop after this many records.")] = None,
    timeout: Annotated[Optional[float], typer.Option(
        min=0, show_default="10 with --max-messages, otherwise run until Ctrl-C",
        help="Stop after this many seconds without a record.")] = None,
    output_format: Annotated[Format, typer.Option("--format", help="Output format.")]
    = Format.text,
    binary: Annotated[Binary, typer.Option(
        help="How keys, values and headers are shown: UTF-8 with invalid bytes replaced, or "
             "base64.")] = Binary.replace,
    print_key: Annotated[bool, typer.Option(
        "--print-key", help="text: print the key before the value.")] = False,
    print_headers: Annotated[bool, typer.Option(
        "--print-headers", help="text, kcat-like: print the headers.")] = False,
    print_offset: Annotated[bool, typer.Option(
        "--print-offset", help="text: print partition and offset.")] = False,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Print records from TOPIC to stdout, one per line."""
    if sum([from_beginning, offset is not None, from_timestamp is not None]) > 1:
        fail("give at most one of --from-beginning, --offset and --from-timestamp")
    timestamp_ms = _timestamp_ms(from_timestamp) if from_timestamp is not None else None
    if timeout is None and max_messages is not None:
        timeout = DEFAULT_IDLE_TIMEOUT_SECONDS
    render = _RENDERERS[output_format](_DECODERS[binary], print_key, print_headers, print_offset)

    with Kafka(bootstrap_server, command_config) as kafka:
        def start_at(partitions: list[int]) -> list[TopicPartition]:
            if offset is not None:
                return [TopicPartition(topic, p, offset) for p in partitions]
            if timestamp_ms is not None:
                return _offsets_for_time(consumer, topic, partitions, timestamp_ms)
            return [TopicPartition(topic, p, OFFSET_BEGINNING if from_beginning else OFFSET_END)
                    for p in partitions]

        consumer = kafka.consumer(**{"group.id": UNUSED_GROUP_ID, "enable.auto.commit": False,
                                     "enable.auto.offset.store": False})
        consumer.assign(start_at(kafka.partitions(consumer, topic, partition)))
        consumed = _print_records(consumer, render, max_messages, timeout)
    output.note(f"{output.records(consumed)} consumed from {topic}")


def _print_records(consumer: Consumer, render: Callable[[Message], str],
                   max_messages: int | None, idle_timeout: float | None) -> int:
    consumed = 0
    last_record = time.monotonic()
    try:
        while max_messages is None or consumed < max_messages:
            wanted = BATCH_SIZE if max_messages is None else min(BATCH_SIZE,
                                                                 max_messages - consumed)
            messages = consumer.consume(wanted, POLL_SECONDS)
            for message in messages:
                if message.error() is not None:
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(message.error())
                sys.stdout.write(render(message) + "\n")
                consumed += 1
            if messages:
                sys.stdout.flush()
                last_record = time.monotonic()
            elif idle_timeout is not None and time.monotonic() - last_record >= idle_timeout:
                break
    except KeyboardInterrupt:  # the way to end a consume without a limit
        pass
    except BrokenPipeError:  # the reader has gone (`| head`): stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return consumed


def _offsets_for_time(consumer: Consumer, topic: str, partitions: list[int],
                      timestamp_ms: int) -> list[TopicPartition]:
    """ListOffsets by timestamp; a partition with no record that late starts at its end."""
    found = consumer.offsets_for_times([TopicPartition(topic, p, timestamp_ms) for p in partitions],
                                       timeout=REQUEST_TIMEOUT_SECONDS)
    for tp in found:
        if tp.error is not None:
            raise KafkaException(tp.error)
    return [TopicPartition(topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_END)
            for tp in found]


def _timestamp_ms(text: str) -> int:
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        fail(f"--from-timestamp takes ms since the epoch or an ISO 8601 date-time, got {text!r}")
    # astimezone(): a naive date-time is local time. Integer arithmetic: no float rounding.
    return (moment.astimezone() - _EPOCH) // timedelta(milliseconds=1)


# --- output formats ---------------------------------------------------------------------

Decoder = Callable[[Optional[bytes]], Optional[str]]

_DECODERS: dict[Binary, Decoder] = {
    Binary.replace: lambda data: None if data is None else data.decode("utf-8", "replace"),
    Binary.base64: lambda data: None if data is None else base64.b64encode(data).decode("ascii"),
}


def _headers(message: Message, decode: Decoder) -> list[tuple[str, str | None]]:
    return [(key, decode(value)) for key, value in message.headers() or []]


def _text(decode: Decoder, print_key: bool, print_headers: bool,
          print_offset: bool) -> Callable[[Message], str]:
    """Kafka's console consumer layout: the chosen fields, tab-separated, null as "null"."""
    def render(message: Message) -> str:
        fields = []
        if print_offset:
            fields += [f"Partition:{message.partition()}", f"Offset:{message.offset()}"]
        if print_headers:
            headers = _headers(message, decode)
            fields.append(",".join(f"{k}:{_or_null(v)}" for k, v in headers) or "NO_HEADERS")
        if print_key:
            fields.append(_or_null(decode(message.key())))
        fields.append(_or_null(decode(message.value())))
        return "\t".join(fields)
    return render


def _json(decode: Decoder, *_flags: bool) -> Callable[[Message], str]:
    """One object per record; headers as [key, value] pairs, since a key may repeat."""
    def render(message: Message) -> str:
        timestamp_type, timestamp = message.timestamp()
        return json.dumps({
            "topic": message.topic(),
            "partition": message.partition(),
            "offset": message.offset(),
            "timestamp": timestamp if timestamp_type in _TIMESTAMP_TYPES else None,
            "timestamp_type": _TIMESTAMP_TYPES.get(timestamp_type, "NoTimestampType"),
            "key": decode(message.key()),
            "value": decode(message.value()),
            "headers": _headers(message, decode),
        }, ensure_ascii=False)
    return render


def _kcat_like(decode: Decoder, _print_key: bool, print_headers: bool,
               _print_offset: bool) -> Callable[[Message], str]:
    """kcat's -f 'Topic %t [%p] at offset %o: key %k: %s' (and 'headers %h: ')."""
    def render(message: Message) -> str:
        headers = ""
        if print_headers:
            headers = "headers " + ",".join(
                f"{k}={_or_null(v)}" for k, v in _headers(message, decode)) + ": "
        return (f"Topic {message.topic()} [{message.partition()}] at offset {message.offset()}: "
                f"key {_or_null(decode(message.key()))}: {headers}"
                f"{_or_null(decode(message.value()))}")
    return render


_RENDERERS = {Format.text: _text, Format.json: _json, Format.kcat_like: _kcat_like}


def _or_null(text: str | None) -> str:
    return "null" if text is None else text
