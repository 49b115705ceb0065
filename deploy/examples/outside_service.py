#!/usr/bin/env python3
"""An outside service talking to caucus agents with plain nats-py and JSON
(docs/PROTOCOL.md section 13, "Messages from outside services").

1. publishes the seed's finding ("Abnormal capex increase", high,
   requires_response) for valuation_agent on caucus.findings.AAPL and waits
   for valuation's confirmation on caucus.msg.financial_analyst;
2. asks valuation to "Re-run DCF with 10% higher capex" for AAPL (a request
   on caucus.msg.valuation) and waits for the answer finding on
   caucus.findings.AAPL and the confirmation.

The finding reaches valuation's next task for AAPL: start one with
`caucus submit AAPL` once it is published. pip install nats-py;
CAUCUS_NATS_URL=nats://127.0.0.1:4222 python3 outside_service.py
NATS credentials come from the variables of a role's env file (CAUCUS_NATS_USER
and CAUCUS_NATS_PASSWORD, or CAUCUS_NATS_TOKEN, or CAUCUS_NATS_CREDENTIALS_FILE).
"""
import asyncio
import json
import os
import uuid
from datetime import datetime, timedelta, timezone

import nats

NATS_URL = os.environ.get("CAUCUS_NATS_URL", "nats://127.0.0.1:4222")
PREFIX = os.environ.get("CAUCUS_SUBJECT_PREFIX", "caucus")
ME = "financial_analyst"  # our from_agent: answers come to caucus.msg.<ME>
ITEM = "AAPL"
WAIT = float(os.environ.get("WAIT_SECONDS", "600"))


def credentials() -> dict:
    """nats.connect's credentials from the environment (none: an open server)."""
    env = os.environ.get
    kw = {"user": env("CAUCUS_NATS_USER"), "password": env("CAUCUS_NATS_PASSWORD"),
          "token": env("CAUCUS_NATS_TOKEN"),
          "user_credentials": env("CAUCUS_NATS_CREDENTIALS_FILE")}
    return {k: v for k, v in kw.items() if v}


def encode_token(raw: str) -> str:
    """Keep [A-Za-z0-9_-]; write every other UTF-8 byte as ~XX (BRK.B -> BRK~2EB)."""
    if not raw:
        return "~"
    keep = lambda b: b < 128 and (chr(b).isalnum() or chr(b) in "_-")  # noqa: E731
    return "".join(chr(b) if keep(b) else f"~{b:02X}" for b in raw.encode())


def show(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def utc(delta: timedelta = timedelta(0)) -> str:
    t = datetime.now(timezone.utc) + delta
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def envelope(message_type: str, to_agent: str, content: dict) -> dict:
    return {"id": str(uuid.uuid4()), "message_type": message_type, "from_agent": ME,
            "to_agent": to_agent, "priority": "high", "requires_response": True,
            "content": content, "timestamp": utc(), "schema_version": 1}


class Seen:
    """Every envelope read on our subscriptions, so none is missed between waits."""

    def __init__(self) -> None:
        self.envelopes: list = []
        self.changed = asyncio.Condition()

    async def add(self, msg) -> None:
        try:
            env = json.loads(msg.data)
        except ValueError:
            return
        async with self.changed:
            self.envelopes.append(env)
            self.changed.notify_all()

    async def first(self, what: str, **fields) -> dict:
        """The first envelope whose fields have these values, within WAIT seconds."""
        def match():
            return next((e for e in self.envelopes
                         if all(e.get(k) == v for k, v in fields.items())), None)
        async with self.changed:
            try:
                return await asyncio.wait_for(self.changed.wait_for(match), WAIT)
            except asyncio.TimeoutError:
                raise SystemExit(f"no {what} within {WAIT:.0f}s")


async def main() -> None:
    nc = await nats.connect(NATS_URL, **credentials())
    js = nc.jetstream()
    seen = Seen()
    # Core subscriptions see what JetStream stores on these subjects too.
    await nc.subscribe(f"{PREFIX}.msg.{encode_token(ME)}", cb=seen.add)
    await nc.subscribe(f"{PREFIX}.findings.{encode_token(ITEM)}", cb=seen.add)

    async def publish(subject: str, env: dict) -> None:
        await js.publish(subject, json.dumps(env).encode(), headers={"Nats-Msg-Id": env["id"]})

    finding = envelope("finding", "valuation_agent", {
        "finding": "Abnormal capex increase", "confidence": 0.85, "evidence": ["10-K p.47"],
        "impact": "Adjust FCF projections", "item": ITEM})
    await publish(f"{PREFIX}.findings.{encode_token(ITEM)}", finding)
    print("finding", finding["id"], "published; waiting for valuation's next AAPL task"
          " (start one: caucus submit AAPL)")
    conf = await seen.first("confirmation of the finding", message_type="confirmation",
                            correlation_id=finding["id"])
    print("confirmation:", show(conf["content"]))

    request = envelope("request", "valuation", {
        "query": "Re-run DCF with 10% higher capex", "item": ITEM,
        "parameters": {"capex_multiplier": 1.1}, "deadline": utc(timedelta(minutes=10)),
        "rationale": "capex finding " + finding["id"]})
    await publish(f"{PREFIX}.msg.{encode_token('valuation')}", request)
    print("request", request["id"], "published")
    answer = await seen.first("answer finding", message_type="finding",
                              correlation_id=request["id"])
    value = show(answer["content"].get("value"))  # the task's whole output
    print("answer:", answer["content"]["finding"], value[:200] + "…" * (len(value) > 200))
    conf = await seen.first("confirmation of the request", message_type="confirmation",
                            correlation_id=request["id"])
    print("confirmation:", show(conf["content"]))
    await nc.drain()


if __name__ == "__main__":
    asyncio.run(main())
