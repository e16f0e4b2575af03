"""A function's row is keyed by (project, id): what an insert or upsert makes of an id the
project already holds (pure: no I/O).

Each project has function_data to itself: another project's row with the same id is no
conflict (the key includes the project), so it neither swallows a write nor tells that it
exists. Within the project an insert whose id is taken is PostgREST's duplicate key, 23505,
as supabase-js code expects, unless the row is this very call's: a call repeated after a
crash (its answer not yet recorded) has the same seed, so the same key, and finds its rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tasks.functions.tables import QueryProblem

# The column tagging each answered row with the place of the request's row that made or
# updated it: a place with no row is an id the project already held.
PART = "__sy_part"


def call_key(seed: str, n: int) -> uuid.UUID:
    """The key of row `n` of the call `seed`: the row's id when it gives none, and its
    `made_by` either way (the same call repeated makes the same key)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"switchyard:function_data:{seed}:{n}")


class DuplicateKey(QueryProblem):
    """An id the project already holds, in another call's row (or twice in one request):
    PostgREST's answer, and the whole write is rolled back."""

    code = "23505"

    def __init__(self, table: str, row_id: uuid.UUID) -> None:
        super().__init__(f'duplicate key value violates unique constraint "{table}_pkey"')
        self.details = f"Key (id)=({row_id}) already exists."

    def answer(self) -> dict[str, Any]:
        """supabase-js's error object, as PostgREST sends it."""
        return {"code": self.code, "details": self.details, "hint": None,
                "message": str(self)}


@dataclass(frozen=True)
class NewRows:
    """The ids of an insert's or upsert's rows, in the request's order, under the name the
    function used for the table: each must come back in the answer (tagged PART), or its id
    was taken (ON CONFLICT DO NOTHING skipped it)."""

    table: str
    ids: list[uuid.UUID]

    def check(self, rows: Iterable[Mapping[str, Any]]) -> None:
        came = {row[PART] for row in rows}
        for n, row_id in enumerate(self.ids):
            if n not in came:
                raise DuplicateKey(self.table, row_id)
