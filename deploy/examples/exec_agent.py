#!/usr/bin/env python3
"""A caucus agent written outside Rust, speaking the `exec` handler protocol.

Run it as the valuation agent:

    caucus-worker --agent valuation --handler "exec:python3 deploy/examples/exec_agent.py"

Protocol (see README.md next to this file):
  stdin   one TaskDispatch JSON object (item, stage, agent_type, inputs, params, ...)
  stdout  one JSON object: the task output                        -> exit 0
          or {"error": {"class", "error_type", "message", "data_source"}} -> exit non-zero
  stderr  free text, kept by the worker for the failure report
  exit 75 with no JSON error on stdout = transient failure (retry); any other
          non-zero exit without a JSON error = permanent failure.

The model is deliberately simpler than the built-in DCF: a growing perpetuity
of after-tax operating profit. It reads what the built-in `financial` stage
publishes (operating_margin_assumption, latest.{revenue, net_debt,
shares_outstanding, price}) and honours `resolved_assumptions` and `regime`
the same way the built-in valuation does. Standard library only; no clock,
no randomness: the same task always gives the same answer.
"""

import json
import math
import sys

EX_TEMPFAIL = 75  # sysexits.h: "temporary failure, try again"
SCHEMA_VERSION = 1
TAX_RATE = 0.21
TERMINAL_GROWTH = 0.025
DEFAULT_DISCOUNT_RATE = 0.09
SECTOR_BASE_RATES = {
    "communication services": 0.085, "consumer discretionary": 0.085,
    "consumer staples": 0.070, "energy": 0.090, "financials": 0.095,
    "healthcare": 0.080, "industrials": 0.085, "materials": 0.085,
    "real estate": 0.075, "technology": 0.090, "utilities": 0.065,
}
RESERVED_INPUTS = ("resolved_assumptions", "regime")


class AgentError(Exception):
    """A failure reported to the worker as a JSON error object."""

    def __init__(self, error_type, message, transient=False, data_source=None):
        super().__init__(message)
        self.error_type = error_type
        self.message = message
        self.transient = transient
        self.data_source = data_source


def number(value, where):
    """A finite number, or a permanent bad_input error naming the field."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise AgentError("bad_input", f"{where} must be a finite number, got {value!r}")
    return float(value)


def lookup(obj, *path):
    """obj[path[0]][path[1]]... or None when any step is missing."""
    for key in path:
        if not isinstance(obj, dict) or obj.get(key) is None:
            return None
        obj = obj[key]
    return obj


def upstream(inputs):
    """Outputs of every stage before this one (direct inputs win), as the built-ins do."""
    out = {}
    stages = {k: v for k, v in inputs.items() if k not in RESERVED_INPUTS}
    for value in stages.values():
        for key, nested in (lookup(value, "upstream") or {}).items():
            out.setdefault(key, nested)
    for key, value in stages.items():
        out[key] = {k: v for k, v in value.items() if k != "upstream"} if isinstance(value, dict) else value
    return out


def regime_adjustment(regime, sector):
    """Flat + sector-specific discount-rate change from a regime (number or object)."""
    if regime is None:
        return 0.0
    if isinstance(regime, (int, float)) and not isinstance(regime, bool):
        return number(regime, "regime")
    if not isinstance(regime, dict):
        raise AgentError("bad_input", "regime must be a number or an object")
    scope = regime.get("implications") if isinstance(regime.get("implications"), dict) else regime
    flat = regime.get("discount_rate_adjustment", scope.get("discount_rate_adjustment"))
    total = 0.0 if flat is None else number(flat, "regime.discount_rate_adjustment")
    changes = scope.get("discount_rate_changes") or {}
    for name, delta in changes.items():
        if name.lower() == sector.lower():
            total += number(delta, f"regime.discount_rate_changes.{name}")
    return total


def value(task):
    params = task.get("params") or {}
    if not isinstance(params, dict):
        raise AgentError("bad_input", "params must be an object")
    failure = params.get("simulate_error")
    if failure:
        # Lets demos exercise the failure path (e.g. a vendor quota running out).
        raise AgentError(
            failure.get("error_type", "simulated"),
            failure.get("message", "simulated failure requested by params.simulate_error"),
            transient=failure.get("class", "transient") == "transient",
            data_source=failure.get("data_source"),
        )

    inputs = task.get("inputs") or {}
    stages = upstream(inputs)
    financial = stages.get("financial")
    if not isinstance(financial, dict) or not isinstance(financial.get("latest"), dict):
        raise AgentError("missing_input", "needs the financial stage's output (with `latest`) among the inputs")
    latest = financial["latest"]
    revenue = number(latest.get("revenue"), "financial.latest.revenue")
    net_debt = number(latest.get("net_debt"), "financial.latest.net_debt")
    shares = number(latest.get("shares_outstanding"), "financial.latest.shares_outstanding")
    price = number(latest.get("price"), "financial.latest.price")
    if shares <= 0 or price <= 0:
        raise AgentError("bad_input", "shares_outstanding and price must be positive")

    resolved = lookup(inputs, "resolved_assumptions", "operating_margin")
    if resolved is None:
        resolved = lookup(params, "resolved_assumptions", "operating_margin")
    if resolved is not None:
        margin, margin_source = number(resolved, "resolved_assumptions.operating_margin"), "resolved_assumptions"
    else:
        raw = lookup(financial, "operating_margin_assumption", "value")
        if raw is None:
            raise AgentError("missing_input", "financial.operating_margin_assumption.value is missing")
        margin, margin_source = number(raw, "financial.operating_margin_assumption.value"), "financial"

    growth = lookup(stages, "business", "revenue_cagr")
    growth = 0.03 if growth is None else number(growth, "business.revenue_cagr")
    growth = min(max(growth, -0.05), 0.10)  # one year of growth, then the perpetuity

    sector = financial.get("sector") or ""
    base = params.get("discount_rate")
    base = SECTOR_BASE_RATES.get(sector.lower(), DEFAULT_DISCOUNT_RATE) if base is None else number(base, "params.discount_rate")
    regime = inputs.get("regime", params.get("regime"))
    discount_rate = base + regime_adjustment(regime, sector)
    if discount_rate <= TERMINAL_GROWTH:
        raise AgentError("invalid_assumption", f"discount rate {discount_rate} must exceed terminal growth {TERMINAL_GROWTH}")

    nopat_next = revenue * (1 + growth) * margin * (1 - TAX_RATE)
    enterprise_value = nopat_next / (discount_rate - TERMINAL_GROWTH)
    target = round(max((enterprise_value - net_debt) / shares, 0.0), 2)
    upside = target / price - 1
    rating = "BUY" if upside >= 0.15 else "SELL" if upside <= -0.10 else "HOLD"

    stages.pop("valuation", None)
    return {
        "schema_version": SCHEMA_VERSION,
        "agent_type": task.get("agent_type", "valuation"),
        "item": task.get("item"),
        "model": "growing perpetuity of NOPAT (exec_agent.py example)",
        "target_price": target,
        "current_price": price,
        "upside": round(upside, 6),
        "rating": rating,
        "operating_margin_used": round(margin, 6),
        "discount_rate": round(discount_rate, 6),
        "key_figures": [
            {"label": "Rating", "value": rating},
            {"label": "Target price", "value": f"${target:,.2f}"},
            {"label": "Operating margin used", "value": f"{margin * 100:.1f}% ({margin_source})"},
            {"label": "Discount rate", "value": f"{discount_rate * 100:.1f}%"},
            {"label": "Model", "value": "NOPAT perpetuity (external Python agent)"},
        ],
        "findings": [],
        "upstream": stages,
    }


def main():
    try:
        try:
            task = json.load(sys.stdin)
        except json.JSONDecodeError as e:
            raise AgentError("bad_input", f"stdin is not a JSON task: {e}")
        if not isinstance(task, dict):
            raise AgentError("bad_input", "stdin must hold one JSON object")
        result = value(task)
    except AgentError as e:
        error = {"class": "transient" if e.transient else "permanent", "error_type": e.error_type, "message": e.message}
        if e.data_source:
            error["data_source"] = e.data_source
        json.dump({"error": error}, sys.stdout)
        sys.stdout.write("\n")
        print(f"exec_agent: {e.error_type}: {e.message}", file=sys.stderr)
        return EX_TEMPFAIL if e.transient else 1
    json.dump(result, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
