"""The request context: who sent a request and through which listener, the services a
handler declares, and the throttle time the client quotas put in every response."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import inspect

import pytest
from kafka_requests import SERVED_VERSIONS, api_versions_request, encode_request

from odradek.protocol.api import ApiKey, request_class, response_class
from odradek.protocol.framing import Request
from odradek.protocol.messages import _plan, build, has_field
from odradek.security.principal import ANONYMOUS
from odradek.server.config import BrokerConfig, SecurityProtocol
from odradek.server.connection import Connection
from odradek.server.dispatcher import Dispatcher
from odradek.server.handlers import bind
from odradek.server.listener_security import ListenerSecurity
from odradek.server.quotas import ClientQuotas
from odradek.server.request_context import ConnectionContext, RequestContext
from odradek.server.services import Services
from odradek.testing import EmbeddedBroker

THROTTLE_MS = 250
CLIENT = ConnectionContext("INTERNAL", SecurityProtocol.PLAINTEXT, ANONYMOUS, ("10.0.0.7", 51234))
_MINIMAL = {"bool": False, "bytes": b"", "error_code": 0, "int8": 0, "int16": 0, "int32": 0,
            "int64": 0, "string": "", "timedelta_i32": 0, "timedelta_i64": 0}


def minimal(cls: type, **overrides) -> object:
    """The smallest message of a kio class: zeros, empty strings and lists, nulls where
    allowed."""
    description = {}
    for plan in _plan(cls):
        if plan.is_sequence:
            description[plan.name] = ()
        elif plan.nullable:
            description[plan.name] = None
        elif plan.nested is not None:
            description[plan.name] = minimal(plan.nested)
        else:
            description[plan.name] = _MINIMAL[plan.kafka_type]
    return build(cls, **description | overrides)


class RecordingQuotas(ClientQuotas):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[RequestContext, object]] = []

    def throttle(self, ctx: RequestContext, response: object) -> tuple[int, object]:
        self.calls.append((ctx, response))
        return THROTTLE_MS, response


def context(api_key: ApiKey, version: int, quotas: ClientQuotas) -> RequestContext:
    request = Request(api_key, version, 1, "my-client", minimal(request_class(api_key, version)))
    return RequestContext(request, CLIENT, quotas, size_in_bytes=64)


def response_description(api_key: ApiKey, version: int) -> dict:
    response = minimal(response_class(api_key, version))
    return {f.name: getattr(response, f.name) for f in dataclasses.fields(response)
            if f.name != "throttle_time"}


# -- the context ---------------------------------------------------------------------------


def test_the_context_carries_the_listener_principal_client_and_request():
    ctx = context(ApiKey.METADATA, 12, ClientQuotas())
    assert (ctx.listener_name, ctx.security_protocol) == ("INTERNAL", "PLAINTEXT")
    assert str(ctx.principal) == "User:ANONYMOUS"
    assert (ctx.client_id, ctx.client_address) == ("my-client", ("10.0.0.7", 51234))
    assert (ctx.api_key, ctx.api_version, ctx.size_in_bytes) == (ApiKey.METADATA, 12, 64)


def test_a_connection_gives_every_request_its_listener_principal_and_address():
    seen: list[ConnectionContext] = []

    class Transport:
        def get_extra_info(self, name):
            return ("10.0.0.7", 51234, 0, 0) if name == "peername" else None

        def is_closing(self):
            return False

        def set_write_buffer_limits(self, high=None, low=None):
            pass

    async def connect_and_send() -> None:
        connection = Connection(lambda frame, client: seen.append(client), 1024,
                                ListenerSecurity(BrokerConfig(), "INTERNAL",
                                                 SecurityProtocol.PLAINTEXT,
                                                 lambda user, mechanism: None),
                                on_open=lambda c: None, on_close=lambda c: None)
        connection.connection_made(Transport())
        frame = api_versions_request(3)
        connection.data_received(len(frame).to_bytes(4, "big") + frame)

    asyncio.run(connect_and_send())
    assert seen == [CLIENT]


def test_the_dispatcher_builds_the_context_of_each_request():
    quotas = RecordingQuotas()
    dispatcher = Dispatcher(Services(BrokerConfig(), *[None] * 7), quotas)
    body = minimal(request_class(ApiKey.API_VERSIONS, 3))
    frame = encode_request(ApiKey.API_VERSIONS, 3, 7, body, client_id="my-client")
    dispatcher(frame, CLIENT)
    [(ctx, _)] = quotas.calls
    assert (ctx.connection, ctx.client_id, ctx.size_in_bytes) == (CLIENT, "my-client", len(frame))


# -- services --------------------------------------------------------------------------------


def test_a_handler_receives_the_services_it_declares():
    services = Services(BrokerConfig(), "the metadata store", *[None] * 6)

    def handler(ctx, request, metadata, config):
        return metadata, config

    assert bind(handler, services)(None, None) == ("the metadata store", services.config)


def test_a_handler_declaring_an_unknown_service_is_refused():
    def handler(ctx, request, broker):
        return broker

    with pytest.raises(TypeError, match="unknown services"):
        bind(handler, Services(BrokerConfig(), *[None] * 7))


# -- throttle_time ---------------------------------------------------------------------------


@pytest.mark.parametrize(("api_key", "version"), SERVED_VERSIONS)
def test_every_response_takes_its_throttle_time_from_the_client_quotas(api_key, version):
    quotas = RecordingQuotas()
    ctx = context(api_key, version, quotas)
    response = ctx.respond(**response_description(api_key, version))
    if has_field(response_class(api_key, version), "throttle_time"):
        assert response.throttle_time == datetime.timedelta(milliseconds=THROTTLE_MS)
        [(called_with, unthrottled)] = quotas.calls
        assert called_with is ctx
        assert unthrottled.throttle_time == datetime.timedelta(0)
    else:
        assert quotas.calls == []


def test_unthrottled_responses_say_zero():
    ctx = context(ApiKey.HEARTBEAT, 4, ClientQuotas())
    assert ctx.respond(error_code=0).throttle_time == datetime.timedelta(0)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("odradek"),
                        offsets_topic_num_partitions=1) as embedded:
        yield embedded


@pytest.mark.parametrize(("api_key", "version"), SERVED_VERSIONS)
def test_every_handler_answers_with_the_throttle_time_of_the_client_quotas(
        broker, api_key, version):
    """No handler builds its response around ``RequestContext.respond``."""
    dispatcher = Dispatcher(broker.broker.services(), RecordingQuotas())
    # acks=0 would be answered with nothing at all.
    overrides = {"acks": -1} if api_key == ApiKey.PRODUCE else {}
    request = Request(api_key, version, 1, "my-client",
                      minimal(request_class(api_key, version), **overrides))

    async def handle():
        outcome = dispatcher.handle(request, CLIENT, 64)
        return await outcome if inspect.isawaitable(outcome) else outcome

    response = broker.call(handle())
    if has_field(response_class(api_key, version), "throttle_time"):
        assert response.throttle_time == datetime.timedelta(milliseconds=THROTTLE_MS)
