"""Building version-specific kio messages from one version-independent description.

kio generates one frozen dataclass per API, version and nesting level from Kafka's JSON
message specs. Handlers should not care that Fetch v4 lacks ``log_start_offset`` or that
Metadata v10 added ``topic_id``: they describe a response once, as keyword arguments with
nested dicts and lists, and :func:`build` turns that into the class of the version the
client asked for.

Rules of the conversion:

* a field the target version does not have is dropped (it was added in a later version or
  removed in a newer one);
* a field the target version has but the description omits takes the field's default;
  omitting a required field is a programming error (``TypeError``);
* plain Python values are coerced to kio's wire types: ``int`` -> ``ErrorCode`` for
  ``error_code`` fields, milliseconds -> ``timedelta`` for ``timedelta_*`` fields, epoch
  milliseconds -> aware ``datetime`` (``-1`` -> ``None`` where nullable) for ``datetime_i64``.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.protocol.codegen import FunctionSource

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


@dataclasses.dataclass(frozen=True, slots=True)
class _FieldPlan:
    """How to turn a described value into what one dataclass field holds."""

    name: str
    nested: type | None  # the entity class for nested fields, else None
    is_sequence: bool
    kafka_type: str | None
    nullable: bool


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """Strips ``X | None`` and returns (X, nullable)."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0], True
    return annotation, False


@cache
def _plan(cls: type) -> tuple[_FieldPlan, ...]:
    plans = []
    for f in dataclasses.fields(cls):
        annotation, nullable = _unwrap(f.type)
        is_sequence = typing.get_origin(annotation) is tuple
        inner = typing.get_args(annotation)[0] if is_sequence else annotation
        nested = inner if dataclasses.is_dataclass(inner) else None
        plans.append(
            _FieldPlan(f.name, nested, is_sequence, f.metadata.get("kafka_type"), nullable)
        )
    return tuple(plans)


def _coercion(plan: _FieldPlan, value: str, source: FunctionSource) -> str | None:
    """The expression converting one field's non-null described ``value``, or None to keep
    it as is."""
    nested, kafka_type = plan.nested, plan.kafka_type
    if nested is not None:
        entity = source.name("entity", _entity_builder(nested))
        if plan.is_sequence:
            return f"tuple([{entity}(item) for item in {value}])"
        return f"{entity}({value})"
    if plan.is_sequence:
        return f"tuple({value})"
    if kafka_type == "error_code":
        return f"{value} if isinstance({value}, _ErrorCode) else _ErrorCode({value})"
    if kafka_type is not None and kafka_type.startswith("timedelta"):
        return f"_timedelta(milliseconds={value}) if isinstance({value}, int) else {value}"
    if kafka_type == "datetime_i64":
        instant = f"_EPOCH + _timedelta(milliseconds={value})"
        if plan.nullable:
            instant = f"None if {value} < 0 else {instant}"
        return f"{value} if not isinstance({value}, int) else {instant}"
    return None


@cache
def _builder(cls: type) -> Callable[[dict[str, Any]], Any]:
    """The compiled :func:`build` of ``cls``: one test and at most one conversion per field
    of the class, since responses are built on every request's path.

    kio's entities are frozen dataclasses with slots, whose ``__init__`` sets each field
    through ``object.__setattr__``; the builder instead creates the instance bare and fills
    each slot through its descriptor, which costs half as much. It sets every field, with
    the field's default where the description has none, as ``__init__`` would."""
    source = FunctionSource("build", "description", {
        "_cls": cls, "_new": object.__new__, "_ErrorCode": ErrorCode,
        "_timedelta": datetime.timedelta, "_EPOCH": _EPOCH, "_missing": _missing_field})
    source.line("entity = _new(_cls)")
    for field, plan in zip(dataclasses.fields(cls), _plan(cls), strict=True):
        name = plan.name
        slot = getattr(cls, name, None)  # the slot's descriptor, wherever in the MRO
        if not isinstance(slot, types.MemberDescriptorType):
            raise TypeError(f"{cls.__qualname__} is not a dataclass with slots, as kio's are")
        setter = source.name("set", slot.__set__)
        coercion = _coercion(plan, "value", source)
        source.line(f"if {name!r} in description:")
        if coercion is None:
            source.line(f"{setter}(entity, description[{name!r}])", 2)
        else:
            source.line(f"value = description[{name!r}]", 2)
            source.line(f"{setter}(entity, None if value is None else {coercion})", 2)
        source.line("else:")
        if field.default is not dataclasses.MISSING:
            source.line(f"{setter}(entity, {source.name('default', field.default)})", 2)
        elif field.default_factory is not dataclasses.MISSING:
            source.line(f"{setter}(entity, {source.name('factory', field.default_factory)}())", 2)
        else:
            source.line(f"_missing(_cls, {name!r})", 2)
    source.line("return entity")
    return source.compile(f"<builder {cls.__module__}.{cls.__qualname__}>")


def _missing_field(cls: type, name: str) -> None:
    raise TypeError(f"{cls.__qualname__} needs {name!r}, a field without a default")


@cache
def _entity_builder(cls: type) -> Callable[[Any], Any]:
    """Builds a nested entity from its description; an instance is taken as it is."""
    build_from = _builder(cls)

    def build_entity(value: Any) -> Any:
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            return build_from(value)
        raise TypeError(f"{cls.__qualname__} needs a dict, got {type(value).__name__}")

    return build_entity


def build(cls: type, **description: Any) -> Any:
    """Instantiates ``cls`` (a kio entity) from a version-independent description."""
    return _builder(cls)(description)


@cache
def has_field(cls: type, name: str) -> bool:
    """True when this version of the message carries the field ``name``."""
    return any(p.name == name for p in _plan(cls))


def millis(value: datetime.timedelta | datetime.datetime | int | None) -> int:
    """The inverse coercion: kio's time types as Kafka's milliseconds (``None`` -> -1)."""
    if value is None:
        return -1
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    return int(value)


@cache
def lenient_timestamps(cls: type) -> type:
    """``cls`` (a kio response class) with each non-nullable ``datetime_i64`` field, at any
    depth, read as plain epoch milliseconds instead: Kafka sends -1 in some of them (the
    start time of a transactional id that has no transaction, DescribeTransactions), which
    kio refuses to read as a datetime. Classes without such a field are returned as
    they are."""
    changed = False
    fields = []
    for f in dataclasses.fields(cls):
        annotation, metadata = f.type, dict(f.metadata)
        if metadata.get("kafka_type") == "datetime_i64" and annotation is not None \
                and type(None) not in typing.get_args(annotation):
            annotation, metadata["kafka_type"] = int, "int64"
            changed = True
        else:
            inner_args = typing.get_args(annotation)
            inner = inner_args[0] if inner_args else annotation
            if dataclasses.is_dataclass(inner) and lenient_timestamps(inner) is not inner:
                annotation = tuple[lenient_timestamps(inner), ...] if inner_args else \
                    lenient_timestamps(inner)
                changed = True
        default = f.default if f.default is not dataclasses.MISSING else dataclasses.MISSING
        fields.append((f.name, annotation, dataclasses.field(default=default,
                                                             metadata=metadata)))
    if not changed:
        return cls
    lenient = dataclasses.make_dataclass(cls.__name__, fields, frozen=True, slots=True)
    for name in ("__type__", "__version__", "__flexible__", "__api_key__",
                 "__header_schema__"):
        if hasattr(cls, name):
            setattr(lenient, name, getattr(cls, name))
    return lenient
