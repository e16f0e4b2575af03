"""What a call cost: list prices per million tokens, by model, so budgets can count dollars.

The table holds Anthropic's and OpenAI's published list prices; a model it does not know is
charged the default (a mid-range price, so an unknown model is never free). Set
SWITCHYARD_LLM_PRICE_INPUT_PER_MTOK / _OUTPUT_PER_MTOK to price every model
yourself (a negotiated rate, a proxy, a model newer than this table).
"""

from __future__ import annotations

from dataclasses import dataclass

from tasks.services.llm.types import Usage
from tasks.settings import get_settings


@dataclass(frozen=True)
class Price:
    input_per_mtok: float  # US dollars per million input tokens
    output_per_mtok: float

    def cost(self, usage: Usage) -> float:
        dollars = (usage.input_tokens * self.input_per_mtok
                   + usage.output_tokens * self.output_per_mtok) / 1_000_000
        return round(dollars, 6)  # llm_usage.cost_usd is NUMERIC(12, 6)


# Matched by prefix, longest first, so dated ids ("claude-haiku-4-5-20251001") find their family.
PRICES: dict[str, Price] = {
    "claude-opus-4-5": Price(5.0, 25.0),
    "claude-opus-4-6": Price(5.0, 25.0),
    "claude-opus-4-1": Price(15.0, 75.0),
    "claude-opus-4": Price(15.0, 75.0),
    "claude-sonnet-4": Price(3.0, 15.0),
    "claude-haiku-4-5": Price(1.0, 5.0),
    "claude-3-5-haiku": Price(0.8, 4.0),
    "claude-3-haiku": Price(0.25, 1.25),
    # OpenAI's list prices, for SWITCHYARD_LLM_PROVIDER=openai against api.openai.com; a
    # self-hosted model costs what the operator says (SWITCHYARD_LLM_PRICE_*: 0 for free).
    "gpt-4.1-nano": Price(0.1, 0.4),
    "gpt-4.1-mini": Price(0.4, 1.6),
    "gpt-4.1": Price(2.0, 8.0),
    "gpt-4o-mini": Price(0.15, 0.6),
    "gpt-4o": Price(2.5, 10.0),
}
DEFAULT_PRICE = Price(3.0, 15.0)


def price_for(model: str) -> Price:
    """The price of `model`: the environment's override, else the table, else the default."""
    settings = get_settings()
    listed = next((PRICES[prefix] for prefix in sorted(PRICES, key=len, reverse=True)
                   if model.startswith(prefix)), DEFAULT_PRICE)
    return Price(
        input_per_mtok=(settings.llm_price_input_per_mtok
                        if settings.llm_price_input_per_mtok is not None
                        else listed.input_per_mtok),
        output_per_mtok=(settings.llm_price_output_per_mtok
                         if settings.llm_price_output_per_mtok is not None
                         else listed.output_per_mtok),
    )


def cost_usd(model: str, usage: Usage) -> float:
    return price_for(model).cost(usage)
