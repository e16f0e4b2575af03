"""A packet in a model's answer (tasks.startup.packet.parse_packet)."""

from __future__ import annotations

import json

from tasks.startup.packet import parse_packet


def test_a_title_past_the_limit_is_cut_not_refused() -> None:
    # A project named at the name's limit (200 characters) made "<name>: idea packet": every
    # launch of it failed for good on the packet's schema
    name = "🦄" * 50 + " " + "Ж" * 149
    packet = parse_packet(json.dumps({
        "title": f"{name}: idea packet", "summary": "s",
        "actions": [{"type": "deploy_hook", "title": "x" * 250, "args": {"url": "https://x.io"}}]},
        ensure_ascii=False))
    assert len(packet.title) == 200 and packet.title.startswith(name[:150])
    assert packet.title.endswith("…")
    assert len(packet.actions[0].title) == 200
