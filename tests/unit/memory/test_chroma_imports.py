"""Chroma is opened without OpenTelemetry's gRPC exporter, which it imports and uses only when its tracing is on."""

from __future__ import annotations

import sys

import pytest

from memory.store.chroma import OTLP_EXPORTER, _defer_otlp_exporter


def test_the_exporter_is_a_stand_in_until_tracing_asks_for_it_and_then_the_real_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, OTLP_EXPORTER, raising=False)
    _defer_otlp_exporter()
    stand_in = sys.modules[OTLP_EXPORTER]
    assert not hasattr(stand_in, "__file__")  # nothing of grpc or protobuf read for it
    exporter = stand_in.OTLPSpanExporter(endpoint="http://127.0.0.1:9")
    assert type(exporter).__module__ == OTLP_EXPORTER and sys.modules[OTLP_EXPORTER] is not stand_in
    exporter.shutdown()
