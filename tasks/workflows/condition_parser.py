"""The condition language's parser: tokens into an expression tree, by recursive descent.

Nesting is bounded (MAX_DEPTH), so is the recursion whatever the text; comparisons do not
chain (`a < b < c` is an error, not Python's meaning or C's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tasks.workflows.condition_tokens import ConditionError, Token
from tasks.workflows.templates import Path

MAX_DEPTH = 32  # parentheses, lists and `not`s nested in one condition


@dataclass(frozen=True, slots=True)
class Const:
    value: Any  # a number, a string, True, False or None
    column: int


@dataclass(frozen=True, slots=True)
class Ref:
    path: Path
    column: int


@dataclass(frozen=True, slots=True)
class Items:
    """A list written in the condition, e.g. `['a', 'b']` on the right of `in`."""

    items: tuple[Expr, ...]
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


Expr = Const | Ref | Items | Not | Logic | Compare
_CONSTANTS = {"true": True, "false": False, "null": None}

def parse_tokens(tokens: list[Token]) -> Expr:
    return _Parser(tokens).condition()


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
        if token.kind == "[":
            with self.nested(token.column):
                return Items(self.items(), token.column)
        raise ConditionError(f"expected a value, found {_describe(token)}", token.column)

    def items(self) -> tuple[Expr, ...]:
        found: list[Expr] = []
        if self.peek().kind == "]":
            self.take()
            return ()
        while True:
            found.append(self.primary())
            token = self.take()
            if token.kind == "]":
                return tuple(found)
            if token.kind != ",":
                raise ConditionError(f"expected , or ] in the list, found {_describe(token)}",
                                     token.column)

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
