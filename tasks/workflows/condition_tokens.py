"""The condition language's tokeniser: text into tokens, each with its 1-based column.

Scanned by hand with ASCII-only character classes, so nothing the user writes is ever
handed to Python's own parser.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from tasks.workflows.errors import WorkflowError
from tasks.workflows.templates import TemplateError, check_path, parse_path

KEYWORDS = frozenset({"and", "or", "not", "in", "true", "false", "null"})
OPERATORS = ("==", "!=", "<=", ">=", "<", ">")  # two-character ones first
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t", "r": "\r"}
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PATH_REST = re.compile(r"(\.[A-Za-z0-9_-]+)*")
_WORD_CHAR = re.compile(r"[A-Za-z0-9_.]")


class ConditionError(WorkflowError):
    """A condition that does not parse or cannot be evaluated.

    `column` counts characters from the start of the text, the first being 1.
    """

    def __init__(self, message: str, column: int):
        super().__init__(f"{message} (column {column})")
        self.message = message
        self.column = column

    def __reduce__(self) -> tuple[type[ConditionError], tuple[str, int]]:
        return ConditionError, (self.message, self.column)  # pickles (args holds one string)


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # "number", "string", "path", "keyword", "op", "end", or one of ( ) [ ] ,
    value: Any  # the number, the string, the path tuple, the keyword or operator text
    column: int


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    at = 0
    while at < len(text):
        char = text[at]
        if char in " \t\r\n":
            at += 1
            continue
        token, at = _token_at(text, at)
        tokens.append(token)
    tokens.append(Token("end", None, len(text) + 1))
    return tokens


# What models write in a condition from JavaScript habit, and what this language says instead
# (longest first: === before ==).
_JAVASCRIPT = {"===": "compare with ==", "!==": "compare with !=", "&&": "write and",
               "||": "write or"}


def _token_at(text: str, at: int) -> tuple[Token, int]:
    char, column = text[at], at + 1
    if char in "()[],":
        return Token(char, char, column), at + 1
    if text.startswith("{{", at):
        return _template(text, at)
    for js, ours in _JAVASCRIPT.items():
        if text.startswith(js, at):
            raise ConditionError(f"{js} is JavaScript: {ours}", column)
    for op in OPERATORS:
        if text.startswith(op, at):
            return Token("op", op, column), at + len(op)
    if char == "=":
        raise ConditionError("a lone = assigns nothing here: compare with ==", column)
    if char == "!":
        raise ConditionError("a lone ! is not an operator: write != or not", column)
    if char in "'\"":
        return _string(text, at)
    if char == "-" or "0" <= char <= "9":
        return _number(text, at)
    if name := _NAME.match(text, at):
        return _word(text, at, name.group())
    raise ConditionError(f"unexpected character {char!r}", column)


def _template(text: str, at: int) -> tuple[Token, int]:
    end = text.find("}}", at + 2)
    if end < 0:
        raise ConditionError("{{ is never closed by }}", at + 1)
    try:
        path = parse_path(text[at + 2:end])
    except TemplateError as exc:
        raise ConditionError(str(exc), at + 1) from None
    return Token("path", path, at + 1), end + 2


def _string(text: str, at: int) -> tuple[Token, int]:
    quote, chars, i = text[at], [], at + 1
    while i < len(text) and text[i] != quote:
        if text[i] == "\\" and i + 1 < len(text):  # a last backslash: the string is never closed
            escaped = text[i + 1]
            if escaped not in _ESCAPES:
                raise ConditionError(f"unknown escape \\{escaped} (known: \\\\ \\' \\\" "
                                     "\\n \\t \\r)", i + 1)
            chars.append(_ESCAPES[escaped])
            i += 2
        else:
            chars.append(text[i])
            i += 1
    if i >= len(text):
        raise ConditionError(f"string opened with {quote} is never closed", at + 1)
    return Token("string", "".join(chars), at + 1), i + 1


def _number(text: str, at: int) -> tuple[Token, int]:
    match = _NUMBER.match(text, at)
    if match is None:
        raise ConditionError("- must start a number (there is no subtraction)", at + 1)
    end = match.end()
    if end < len(text) and _WORD_CHAR.match(text, end):
        raise ConditionError(f"malformed number {text[at:end + 1]!r}", at + 1)
    literal = match.group()
    value: int | float = (float(literal) if match.group(1) or match.group(2)
                          else int(literal))
    if not math.isfinite(value):
        raise ConditionError(f"number {literal} is out of range", at + 1)
    return Token("number", value, at + 1), end


def _word(text: str, at: int, name: str) -> tuple[Token, int]:
    column = at + 1
    if name in KEYWORDS:
        return Token("keyword", name, column), at + len(name)
    if name not in ("inputs", "steps"):
        hint = f"; did you mean {name.lower()}?" if name.lower() in KEYWORDS else (
            "; values come from inputs.<name> or steps.<name>.output…")
        raise ConditionError(f"unknown name {name[:40]!r}{hint}", column)
    rest = _PATH_REST.match(text, at + len(name))
    assert rest is not None  # the pattern matches the empty string
    path = (name, *rest.group()[1:].split(".")) if rest.group() else (name,)
    try:
        check_path(path)
    except TemplateError as exc:
        raise ConditionError(str(exc), column) from None
    return Token("path", path, column), rest.end()
