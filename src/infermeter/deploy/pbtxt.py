"""A reader for protobuf text format, the syntax of Triton's `config.pbtxt`, without the protobuf schema.

`infermeter serve REPO` reads a model repository without needing `tritonclient` at run time, so this parser
knows the syntax only (fields, nested messages, lists, strings, numbers, enum names, `#` comments); which
fields exist and what they mean is checked by `deploy.repository`. The tests check the files we write against
Triton's real `ModelConfig` message instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TypeAlias

Scalar: TypeAlias = str | int | float
Value: TypeAlias = "Scalar | Message"

_TOKEN = re.compile(
    r"""(?P<space>[ \t\r\n]+|\#[^\n]*)
      | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
      | (?P<number>[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
      | (?P<ident>[A-Za-z_][\w.]*)
      | (?P<punct>[{}\[\]:,;<>])""",
    re.VERBOSE,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\"}


class PbtxtError(ValueError):
    """Malformed text: `line` is 1-based."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


@dataclass
class Message:
    """A parsed message: every field name with its values in order (repeated fields hold several)."""

    fields: dict[str, list[Value]] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)

    def all(self, name: str) -> list[Value]:
        """Every value of field `name` (empty when absent)."""
        return self.fields.get(name, [])

    def first(self, name: str, default: Value | None = None) -> Value | None:
        """The last value given for a singular field (protobuf keeps the last), or `default`."""
        values = self.fields.get(name)
        return values[-1] if values else default

    def messages(self, name: str) -> list[Message]:
        """The values of `name` that are messages."""
        return [v for v in self.all(name) if isinstance(v, Message)]


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    line: int


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    position, line = 0, 1
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise PbtxtError(line, f"unexpected character {text[position]!r}")
        kind = match.lastgroup or ""
        if kind != "space":
            out.append(_Token(kind, match.group(), line))
        line += match.group().count("\n")
        position = match.end()
    return out


def _unquote(token: _Token) -> str:
    body = token.text[1:-1]
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.index = 0

    def peek(self) -> _Token | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self) -> _Token:
        token = self.peek()
        if token is None:
            last = self.tokens[-1].line if self.tokens else 1
            raise PbtxtError(last, "unexpected end of file (a '}' or ']' is missing)")
        self.index += 1
        return token

    def message(self, closing: str | None) -> Message:
        result = Message()
        while True:
            token = self.peek()
            if token is None:
                if closing is not None:
                    self.take()  # raises: the message was never closed
                return result
            if closing is not None and token.text == closing:
                self.index += 1
                return result
            name = self.take()
            if name.kind != "ident":
                raise PbtxtError(name.line, f"expected a field name, found {name.text!r}")
            result.lines.setdefault(name.text, name.line)
            result.fields.setdefault(name.text, []).extend(self.field_values(name))
            if (after := self.peek()) is not None and after.text in ",;":
                self.index += 1

    def field_values(self, name: _Token) -> list[Value]:
        colon = self.peek() is not None and self.peek().text == ":"  # type: ignore[union-attr]
        if colon:
            self.index += 1
        token = self.take()
        if token.text in "{<":
            return [self.message("}" if token.text == "{" else ">")]
        if token.text == "[":
            return self.list_values()
        if not colon:
            raise PbtxtError(token.line, f"field {name.text!r}: expected ':' or '{{' after the name")
        return [self.scalar(token)]

    def list_values(self) -> list[Value]:
        values: list[Value] = []
        while True:
            token = self.take()
            if token.text == "]":
                return values
            if token.text in "{<":
                values.append(self.message("}" if token.text == "{" else ">"))
            else:
                values.append(self.scalar(token))
            after = self.take()
            if after.text == "]":
                return values
            if after.text != ",":
                raise PbtxtError(after.line, f"expected ',' or ']' in a list, found {after.text!r}")

    @staticmethod
    def scalar(token: _Token) -> Scalar:
        if token.kind == "string":
            return _unquote(token)
        if token.kind == "number":
            text = token.text
            return float(text) if any(c in text for c in ".eE") else int(text)
        if token.kind == "ident":
            return token.text
        raise PbtxtError(token.line, f"expected a value, found {token.text!r}")


def parse(text: str) -> Message:
    """Parse protobuf text format into a Message; PbtxtError names the line of the first mistake."""
    return _Parser(text).message(None)
