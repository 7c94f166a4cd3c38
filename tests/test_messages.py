"""The worker protocol: every message kind crosses the pipe and comes back equal, alone or framed with others."""

from __future__ import annotations

import json

import pytest

from fuzzer.campaign.mailbox import Collected, Outbox
from fuzzer.campaign.messages import (
    CaseSent,
    Demotions,
    Message,
    OwnError,
    PhaseStarted,
    Ready,
    RunUnit,
    Step,
    Stop,
    UnitFailed,
    UnitGraph,
    UnitPrepared,
    decode,
    encode,
)
from fuzzer.campaign.result import TestResult

EVERY_KIND: list[Message] = [
    Ready(7),
    PhaseStarted(3, "torch-onnx-script", Step.CONVERT),
    UnitGraph(3, {"nodes": []}, 2, ("relu>abs",), (("relu", "float32"), ("feature", "dynamic"))),
    UnitPrepared(3, {"generate": 0.5}, "uniform"),
    UnitFailed(3, {"generate": 0.5}),
    OwnError(3, 103, None, Step.GENERATE.value, "ValueError", "boom", "Traceback ..."),
    CaseSent({"type": "case", "case": {"converter": "torch-onnx-script"}, "log": "", "arrays": {}, "data": ""}),
    TestResult(3, 103, "torch-onnx-script", "crash", "node_conversion", "sig", True, ("label",), "E: boom",
               {"opset": 17}, {"convert": 0.1}, 0.2, "case-dir", ("rewrite",)),
    RunUnit(3, 103, ("torch-onnx-script", "onnxsim")),
    Demotions((("roll", "bool", 0.8),)),
    Stop(),
]


@pytest.mark.parametrize("message", EVERY_KIND, ids=lambda m: type(m).__name__)
def test_every_message_kind_comes_back_equal_from_its_frame(message: Message) -> None:
    assert decode(encode(message)) == [message]


def test_a_frame_of_several_messages_keeps_their_order() -> None:
    assert decode(encode(EVERY_KIND)) == EVERY_KIND


def test_a_unit_is_sent_without_its_demotions_which_travel_apart() -> None:
    sent = RunUnit(1, 2, ("c",), demoted=(("roll", "bool", 0.8),))
    assert "demoted" not in json.loads(encode(sent))
    assert decode(encode(sent)) == [RunUnit(1, 2, ("c",))]


def test_an_outbox_frame_reads_back_as_the_messages_a_collected_post_keeps() -> None:
    frames: list[bytes] = []
    outbox, collected = Outbox(frames.append), Collected()
    for post in (outbox, collected):
        post.hold(EVERY_KIND[2])
        post.pass_on(encode(EVERY_KIND[3]))
        post.send(EVERY_KIND[1])
    assert [m for frame in frames for m in decode(frame)] == collected.messages == [EVERY_KIND[i] for i in (2, 3, 1)]
