"""A step's condition: a small expression language, parsed by hand and evaluated safely.

    condition  := or
    or         := and ("or" and)*
    and        := not ("and" not)*
    not        := "not" not | comparison
    comparison := primary (("==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not" "in") primary)?
    primary    := number | string | true | false | null | path | "{{" path "}}" | "(" or ")"
                | "[" (primary ("," primary)*)? "]"

Evaluation is strict, so a typo fails loudly instead of skipping a step quietly:
- `and`, `or`, `not` and the whole condition need true or false (null and 0 are not false);
  `and`/`or` short-circuit, so `'k' in steps.a.output and steps.a.output.k > 1` is safe.
- `==`/`!=` compare JSON values: different types are unequal (1 != true, 1 == 1.0).
- `<`, `<=`, `>`, `>=` order two numbers or two strings; any other pair is a ConditionError.
- `x in list` is membership; `s in string` a substring; `k in object` a key.
- A missing path is a ConditionError naming it; a skipped step's output reads as null.
"""

from __future__ import annotations

from typing import Any

from tasks.workflows.condition_parser import (
    MAX_DEPTH,
    Compare,
    Const,
    Expr,
    Items,
    Logic,
    Not,
    Ref,
    parse_tokens,
)
from tasks.workflows.condition_tokens import ConditionError, tokenize
from tasks.workflows.templates import Path, TemplateError, kind, resolve

__all__ = ["MAX_DEPTH", "MAX_LENGTH", "ConditionError", "Expr", "evaluate", "parse",
           "references"]

MAX_LENGTH = 1000  # characters in one condition
_MAX_VALUE_DEPTH = 64  # nesting of values compared with ==


def parse(text: str) -> Expr:
    """The expression tree of `text`; ConditionError says what is wrong and at which column."""
    if not isinstance(text, str):
        raise ConditionError(f"a condition is a string, not {kind(text)}", 1)
    if len(text) > MAX_LENGTH:
        raise ConditionError(f"a condition is at most {MAX_LENGTH} characters", MAX_LENGTH + 1)
    if not text.strip():
        raise ConditionError("the condition is empty", 1)
    return parse_tokens(tokenize(text))


def references(expr: Expr) -> set[Path]:
    """Every path the condition reads."""
    if isinstance(expr, Ref):
        return {expr.path}
    if isinstance(expr, Items):
        return set().union(*(references(item) for item in expr.items))
    if isinstance(expr, Not):
        return references(expr.operand)
    if isinstance(expr, Logic | Compare):
        return references(expr.left) | references(expr.right)
    return set()


def evaluate(expr: Expr, context: dict[str, Any]) -> bool:
    """True or false for `context` (shaped as templates.render's); ConditionError otherwise."""
    return _boolean(_value(expr, context), expr, "the condition")


def _value(expr: Expr, context: Any) -> Any:
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, Ref):
        try:
            return resolve(expr.path, context)
        except TemplateError as exc:
            raise ConditionError(str(exc), expr.column) from None
    if isinstance(expr, Items):
        return [_value(item, context) for item in expr.items]
    if isinstance(expr, Not):
        return not _boolean(_value(expr.operand, context), expr.operand, "not")
    if isinstance(expr, Logic):
        left = _boolean(_value(expr.left, context), expr.left, expr.op)
        if left == (expr.op == "or"):  # true or …, false and …: the right side is not read
            return left
        return _boolean(_value(expr.right, context), expr.right, expr.op)
    return _compare(expr, _value(expr.left, context), _value(expr.right, context))


def _boolean(value: Any, expr: Expr, user: str) -> bool:
    if not isinstance(value, bool):
        raise ConditionError(f"{user} needs true or false, got {kind(value)}", expr.column)
    return value


def _compare(expr: Compare, left: Any, right: Any) -> bool:
    op = expr.op
    if op in ("==", "!="):
        return _equal(left, right, expr, 0) == (op == "==")
    if op in ("in", "not in"):
        return _contains(right, left, expr) == (op == "in")
    if not ((_is_number(left) and _is_number(right))
            or (isinstance(left, str) and isinstance(right, str))):
        raise ConditionError(f"{op} orders two numbers or two strings, not {kind(left)} and "
                             f"{kind(right)}", expr.column)
    if op == "<":
        return bool(left < right)
    if op == "<=":
        return bool(left <= right)
    if op == ">":
        return bool(left > right)
    return bool(left >= right)


def _equal(left: Any, right: Any, expr: Compare, depth: int) -> bool:
    """JSON equality: a boolean equals only a boolean (Python says True == 1)."""
    if depth > _MAX_VALUE_DEPTH:
        raise ConditionError(f"values nested more than {_MAX_VALUE_DEPTH} deep", expr.column)
    if _is_number(left) and _is_number(right):
        return bool(left == right)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(
            _equal(a, b, expr, depth + 1) for a, b in zip(left, right, strict=True))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(
            _equal(left[k], right[k], expr, depth + 1) for k in left)
    if type(left) is not type(right) or isinstance(left, list | dict):
        return False  # a number and a string, or a JSON value and something that is not
    return bool(left == right)


def _contains(container: Any, item: Any, expr: Compare) -> bool:
    if isinstance(container, list):
        return any(_equal(item, member, expr, 1) for member in container)
    if isinstance(container, str | dict):
        if not isinstance(item, str):
            what = "substring" if isinstance(container, str) else "key"
            raise ConditionError(f"in looks for a {what}: a string, not {kind(item)}",
                                 expr.column)
        return item in container
    raise ConditionError(f"in looks into a list, a string or an object, not {kind(container)}",
                         expr.column)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
