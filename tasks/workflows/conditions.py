"""A step's condition: a small expression language, parsed by hand and evaluated safely.

    condition  := or
    or         := and ("or" and)*
    and        := not ("and" not)*
    not        := "not" not | comparison
    comparison := primary (("==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not" "in") primary)?
    primary    := number | string | true | false | null | path | "{{" path "}}" | "(" or ")"

Evaluation is strict, so a typo fails loudly instead of skipping a step quietly:
- `and`, `or`, `not` and the whole condition need true or false (null and 0 are not false);
  `and`/`or` short-circuit, so `'k' in steps.a.output and steps.a.output.k > 1` is safe.
- `==`/`!=` compare JSON values: different types are unequal (1 != true, 1 == 1.0).
- `<`, `<=`, `>`, `>=` order two numbers or two strings; any other pair is a ConditionError.
- `x in list` is membership; `s in string` a substring; `k in object` a key.
- A missing path is a ConditionError naming it; a skipped step's output reads as null.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tasks.workflows.condition_tokens import ConditionError, Token, tokenize
from tasks.workflows.templates import Path, TemplateError, kind, resolve

__all__ = ["MAX_DEPTH", "MAX_LENGTH", "ConditionError", "Expr", "evaluate", "parse",
           "references"]

MAX_LENGTH = 1000  # characters in one condition
MAX_DEPTH = 32  # parentheses and `not`s nested in one condition
_MAX_VALUE_DEPTH = 64  # nesting of values compared with ==


@dataclass(frozen=True, slots=True)
class Const:
    value: Any  # a number, a string, True, False or None
    column: int


@dataclass(frozen=True, slots=True)
class Ref:
    path: Path
    column: int


@dataclass(frozen=True, slots=True)
class Not:
    operand: Expr
    column: int


@dataclass(frozen=True, slots=True)
class Logic:
    op: str  # "and" | "or"
    left: Expr
    right: Expr
    column: int


@dataclass(frozen=True, slots=True)
class Compare:
    op: str  # "==" "!=" "<" "<=" ">" ">=" "in" "not in"
    left: Expr
    right: Expr
    column: int


Expr = Const | Ref | Not | Logic | Compare
_CONSTANTS = {"true": True, "false": False, "null": None}


def parse(text: str) -> Expr:
    """The expression tree of `text`; ConditionError says what is wrong and at which column."""
    if not isinstance(text, str):
        raise ConditionError(f"a condition is a string, not {kind(text)}", 1)
    if len(text) > MAX_LENGTH:
        raise ConditionError(f"a condition is at most {MAX_LENGTH} characters", MAX_LENGTH + 1)
    if not text.strip():
        raise ConditionError("the condition is empty", 1)
    return _Parser(tokenize(text)).condition()


class _Parser:
    def __init__(self, tokens: list[Token]):
        self.tokens = tokens
        self.at = 0
        self.depth = 0

    def condition(self) -> Expr:
        expr = self.either()
        token = self.peek()
        if token.kind != "end":
            raise ConditionError(f"unexpected {_describe(token)}: expected and, or, or the end",
                                 token.column)
        return expr

    def either(self) -> Expr:
        expr = self.both()
        while self.is_keyword("or"):
            column = self.take().column
            expr = Logic("or", expr, self.both(), column)
        return expr

    def both(self) -> Expr:
        expr = self.negation()
        while self.is_keyword("and"):
            column = self.take().column
            expr = Logic("and", expr, self.negation(), column)
        return expr

    def negation(self) -> Expr:
        if not self.is_keyword("not"):
            return self.comparison()
        column = self.take().column
        with self.nested(column):
            return Not(self.negation(), column)

    def comparison(self) -> Expr:
        left = self.primary()
        token = self.peek()
        if token.kind == "op" or (token.kind == "keyword" and token.value == "in"):
            op = self.take().value
        elif self.is_keyword("not") and self.peek(1).kind == "keyword" \
                and self.peek(1).value == "in":
            self.take()
            self.take()
            op = "not in"
        else:
            return left
        expr = Compare(op, left, self.primary(), token.column)
        after = self.peek()
        if after.kind == "op" or (after.kind == "keyword" and after.value == "in"):
            raise ConditionError("comparisons do not chain: join them with and", after.column)
        return expr

    def primary(self) -> Expr:
        token = self.take()
        if token.kind in ("number", "string"):
            return Const(token.value, token.column)
        if token.kind == "keyword" and token.value in _CONSTANTS:
            return Const(_CONSTANTS[token.value], token.column)
        if token.kind == "path":
            return Ref(token.value, token.column)
        if token.kind == "(":
            with self.nested(token.column):
                expr = self.either()
            closing = self.take()
            if closing.kind != ")":
                raise ConditionError(f"expected ) to close the ( at column {token.column}, "
                                     f"found {_describe(closing)}", closing.column)
            return expr
        raise ConditionError(f"expected a value, found {_describe(token)}", token.column)

    def nested(self, column: int) -> _Nesting:
        return _Nesting(self, column)

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.at + ahead, len(self.tokens) - 1)]

    def take(self) -> Token:
        token = self.peek()
        self.at = min(self.at + 1, len(self.tokens) - 1)
        return token

    def is_keyword(self, word: str) -> bool:
        token = self.peek()
        return token.kind == "keyword" and token.value == word


class _Nesting:
    """Counts parentheses and `not`s: the parser's recursion stays bounded."""

    def __init__(self, parser: _Parser, column: int):
        self.parser, self.column = parser, column

    def __enter__(self) -> None:
        self.parser.depth += 1
        if self.parser.depth > MAX_DEPTH:
            raise ConditionError(f"nested more than {MAX_DEPTH} deep", self.column)

    def __exit__(self, *exc: object) -> None:
        self.parser.depth -= 1


def _describe(token: Token) -> str:
    if token.kind == "end":
        return "the end of the condition"
    if token.kind == "path":
        return "path " + ".".join(token.value)[:60]
    if token.kind == "string":
        return "a string"
    return repr(str(token.value))


def references(expr: Expr) -> set[Path]:
    """Every path the condition reads."""
    if isinstance(expr, Ref):
        return {expr.path}
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
