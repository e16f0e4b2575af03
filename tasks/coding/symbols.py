"""What a source file defines and refers to, read by tree-sitter: the repo map's raw material.

Definitions come from one query per language (its `@def` node, `@name`, optional `@body`); the
signature shown to the model is the definition's text up to its body. References are every
identifier-like leaf that is not a definition's own name: a name used, whatever the scope.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import tree_sitter as ts
from tree_sitter_language_pack import get_language

LANGUAGE_BY_SUFFIX: dict[str, str] = {
    ".py": "python", ".pyi": "python",
    ".js": "javascript", ".jsx": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".rb": "ruby",
}

_JS_DEFS = """
(function_declaration name: (identifier) @name) @def
(generator_function_declaration name: (identifier) @name) @def
(class_declaration name: (_) @name) @def
(method_definition name: (_) @name) @def
(lexical_declaration (variable_declarator name: (identifier) @name
  value: [(arrow_function body: (_) @body) (function_expression body: (_) @body)
          (class body: (_) @body)])) @def
(variable_declaration (variable_declarator name: (identifier) @name
  value: [(arrow_function body: (_) @body) (function_expression body: (_) @body)])) @def
(expression_statement (assignment_expression
  left: (member_expression property: (property_identifier) @name)
  right: [(arrow_function body: (_) @body) (function_expression body: (_) @body)])) @def
"""

_TS_DEFS = _JS_DEFS + """
(abstract_class_declaration name: (_) @name) @def
(interface_declaration name: (_) @name) @def
(type_alias_declaration name: (_) @name) @def
(enum_declaration name: (_) @name) @def
(internal_module name: (_) @name) @def
(function_signature name: (_) @name) @def
(method_signature name: (_) @name) @def
(abstract_method_signature name: (_) @name) @def
"""

DEFINITION_QUERIES: dict[str, str] = {
    "python": """
(class_definition name: (identifier) @name) @def
(function_definition name: (identifier) @name) @def
(module (assignment left: (identifier) @name) @def)
""",
    "javascript": _JS_DEFS,
    "typescript": _TS_DEFS,
    "tsx": _TS_DEFS,
    "go": """
(function_declaration name: (identifier) @name) @def
(method_declaration name: (field_identifier) @name) @def
(type_spec name: (type_identifier) @name) @def
(method_elem name: (field_identifier) @name) @def
""",
    "rust": """
(function_item name: (identifier) @name) @def
(function_signature_item name: (identifier) @name) @def
(struct_item name: (type_identifier) @name) @def
(enum_item name: (type_identifier) @name) @def
(union_item name: (type_identifier) @name) @def
(trait_item name: (type_identifier) @name) @def
(type_item name: (type_identifier) @name) @def
(const_item name: (identifier) @name) @def
(static_item name: (identifier) @name) @def
(macro_definition name: (identifier) @name) @def
(mod_item name: (identifier) @name body: (_)) @def
(impl_item type: [(type_identifier) @name
                  (generic_type type: (type_identifier) @name)
                  (scoped_type_identifier name: (type_identifier) @name)]) @def
""",
    "java": """
(class_declaration name: (identifier) @name) @def
(interface_declaration name: (identifier) @name) @def
(enum_declaration name: (identifier) @name) @def
(record_declaration name: (identifier) @name) @def
(annotation_type_declaration name: (identifier) @name) @def
(method_declaration name: (identifier) @name) @def
(constructor_declaration name: (identifier) @name) @def
""",
    "ruby": """
(class name: [(constant) @name (scope_resolution name: (constant) @name)]) @def
(module name: [(constant) @name (scope_resolution name: (constant) @name)]) @def
(method name: (_) @name) @def
(singleton_method name: (_) @name) @def
""",
}

# The leaves that name something; keywords and literals are other node types.
_JS_REFS = ("identifier", "property_identifier", "shorthand_property_identifier")
REFERENCE_NODES: dict[str, tuple[str, ...]] = {
    "python": ("identifier",),
    "javascript": _JS_REFS,
    "typescript": (*_JS_REFS, "type_identifier"),
    "tsx": (*_JS_REFS, "type_identifier"),
    "go": ("identifier", "field_identifier", "type_identifier"),
    "rust": ("identifier", "field_identifier", "type_identifier"),
    "java": ("identifier", "type_identifier"),
    "ruby": ("identifier", "constant"),
}

# Definitions whose members are part of the interface; what a function defines is its own.
CONTAINERS = frozenset({
    "class_definition", "class_declaration", "abstract_class_declaration", "class",
    "interface_declaration", "enum_declaration", "record_declaration", "internal_module",
    "annotation_type_declaration", "type_spec", "struct_item", "enum_item", "trait_item",
    "impl_item", "mod_item", "module",
})
SIGNATURE_MAX_CHARS = 160
# Go's `type_spec` starts after the keyword (which may open a group of several specs).
_PREFIX = {"type_spec": "type "}
_ANNOTATIONS = re.compile(r"^(?:@[\w.]+(?:\([^()]*\))?\s+)+")
_WHITESPACE = re.compile(r"\s+")
# A line comment inside a signature laid out over lines (`x: int,  # why`); a marker right
# after other text (`"#fff"`, `http://`) is taken for part of a value.
_LINE_COMMENT = {marker: re.compile(rf"(?:^|(?<=[\s(,])){marker}[^\n]*", re.MULTILINE)
                 for marker in ("#", "//")}
_OPEN = re.compile(r"([(\[]) ")
_CLOSE = re.compile(r",? ([)\]])")


@dataclass(frozen=True)
class Definition:
    name: str
    signature: str
    line: int  # 0-based, the definition's first line
    depth: int  # how many definitions enclose it (a method in a class: 1)


@dataclass(frozen=True)
class FileSymbols:
    definitions: tuple[Definition, ...]
    references: tuple[str, ...]  # every use, repeats included: counts matter for ranking


def language_for(name: str) -> str | None:
    dot = name.rfind(".")
    return LANGUAGE_BY_SUFFIX.get(name[dot:].lower()) if dot >= 0 else None


@cache
def _queries(language: str) -> tuple[ts.Language, ts.Query, ts.Query]:
    # Compiled once per process: building a query costs far more than running it. Queries are
    # read-only once built; parsers are not, so each call gets its own (they cost microseconds).
    lang = get_language(language)  # type: ignore[arg-type]
    refs = " ".join(f"({node}) @ref" for node in REFERENCE_NODES[language])
    return lang, ts.Query(lang, DEFINITION_QUERIES[language]), ts.Query(lang, refs)


def extract(source: bytes, language: str) -> FileSymbols:
    """The definitions (in source order) and references of one file's text."""
    lang, def_query, ref_query = _queries(language)
    root = ts.Parser(lang).parse(source).root_node
    found: dict[int, tuple[ts.Node, ts.Node, ts.Node | None]] = {}
    for _, captures in ts.QueryCursor(def_query).matches(root):
        node, name = captures["def"][0], captures["name"][0]
        body = captures["body"][0] if "body" in captures else node.child_by_field_name("body")
        # One key per name node: a declaration holding two functions yields two definitions.
        found.setdefault(name.start_byte, (node, name, body))

    name_spans = {(name.start_byte, name.end_byte) for _, name, _ in found.values()}
    references = tuple(
        source[node.start_byte:node.end_byte].decode("utf-8", "replace")
        for node in ts.QueryCursor(ref_query).captures(root).get("ref", ())
        if (node.start_byte, node.end_byte) not in name_spans
    )
    comment = _LINE_COMMENT["#" if language in ("python", "ruby") else "//"]
    # Rust's ' opens a lifetime (Cfg<'static>) as often as a character: no string there.
    quotes = '"' if language == "rust" else "'\"`"
    return FileSymbols(_nest(source, sorted(found.values(), key=_order), comment, quotes),
                       references)


def _order(item: tuple[ts.Node, ts.Node, ts.Node | None]) -> tuple[int, int, int]:
    node, name, _ = item
    return node.start_byte, -node.end_byte, name.start_byte


def _nest(source: bytes, items: list[tuple[ts.Node, ts.Node, ts.Node | None]],
          comment: re.Pattern[str], quotes: str) -> tuple[Definition, ...]:
    definitions: list[Definition] = []
    enclosing: list[ts.Node] = []  # the definitions around the current one, outermost first
    for node, name, body in items:
        while enclosing and enclosing[-1].end_byte <= node.start_byte:
            enclosing.pop()
        if enclosing and enclosing[-1].type not in CONTAINERS:
            continue  # a function's local helper: no part of the file's interface
        definitions.append(Definition(
            name=source[name.start_byte:name.end_byte].decode("utf-8", "replace"),
            signature=signature(source, node, body, comment, quotes),
            line=node.start_point[0],
            depth=len(enclosing),
        ))
        enclosing.append(node)
    return tuple(definitions)


def _block_start(line: str, quotes: str = "'\"`") -> int:
    """Where the first `{` outside a string literal (opened by one of `quotes`) opens a
    block (a struct's, an object's), or the line's length: `re.compile(r'-{2,}')` keeps
    its pattern whole."""
    quote = ""
    escaped = False
    for at, char in enumerate(line):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
        elif char in quotes:
            quote = char
        elif char == "{":
            return at
    return len(line)


def signature(source: bytes, node: ts.Node, body: ts.Node | None,
              comment: re.Pattern[str] = _LINE_COMMENT["#"], quotes: str = "'\"`") -> str:
    """The definition's head on one line: its text up to the body, else its first line."""
    if body is not None and body.start_byte > node.start_byte:
        head = source[node.start_byte:body.start_byte].decode("utf-8", "replace")
    else:
        # No body node (a type, a constant, a declaration): its first line, up to any block.
        first = source[node.start_byte:node.end_byte].decode("utf-8", "replace").split("\n", 1)[0]
        head = first[:_block_start(first, quotes)]
    text = head.strip()
    if "\n" in text or "  " in text or "\t" in text or text.startswith("@"):  # rare: skip if not
        text = _ANNOTATIONS.sub("", _WHITESPACE.sub(" ", comment.sub("", text)))
        # A signature laid out one parameter a line, joined: `f( a, b, )` reads `f(a, b)`.
        text = _CLOSE.sub(r"\1", _OPEN.sub(r"\1", text))
    # What opens the body is noise once the body is gone.
    while text and text[-1] in "{([:=;":
        text = text[:-1].rstrip()
    text = text.removesuffix("=>").rstrip()
    text = _PREFIX.get(node.type, "") + text
    if len(text) > SIGNATURE_MAX_CHARS:
        text = text[:SIGNATURE_MAX_CHARS - 1] + "…"
    return text
