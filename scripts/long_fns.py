#!/usr/bin/env python3
"""The Rust functions longer than N lines (default 100), longest first, and the files longer
than 700 lines: the house rules' check (ARCHITECTURE.md, "a function longer than a screen
becomes named steps").

Usage: python3 scripts/long_fns.py [N] [DIR ...]   (default: 100 src)

A function's length runs from its `fn` line to the brace that closes its body, found by
counting braces outside strings, character literals and `//` comments; good enough for this
code base (no raw strings holding braces in function bodies), not a Rust parser.
"""

import os
import re
import sys

FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+(\w+)")
MAX_FILE_LINES = 700


def code_of(line: str) -> str:
    """The line without string contents, character literals and a trailing `//` comment."""
    out, i, in_string = [], 0, False
    while i < len(line):
        c = line[i]
        if in_string:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
            continue
        if c == '"':
            in_string = True
        elif c == "'" and i + 2 < len(line) and line[i + 2] == "'":
            i += 3
            continue
        elif c == "'" and i + 3 < len(line) and line[i + 1] == "\\" and line[i + 3] == "'":
            i += 4
            continue
        elif line.startswith("//", i):
            break
        else:
            out.append(c)
        i += 1
    return "".join(out)


def long_functions(path: str, limit: int) -> list[tuple[int, str, int, str]]:
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    found = []
    for start, line in enumerate(lines):
        m = FN.match(line)
        if not m:
            continue
        depth, opened, end = 0, False, start
        while end < len(lines):
            code = code_of(lines[end])
            if not opened and ";" in code and "{" not in code:
                break  # a declaration without a body
            for c in code:
                if c == "{":
                    depth += 1
                    opened = True
                elif c == "}":
                    depth -= 1
            if opened and depth == 0:
                break
            end += 1
        if opened and end - start + 1 > limit:
            found.append((end - start + 1, path, start + 1, m.group(6)))
    return found


def main() -> None:
    args = sys.argv[1:]
    limit = int(args.pop(0)) if args and args[0].isdigit() else 100
    roots = args or ["src"]
    functions, files = [], []
    for root in roots:
        for folder, _, names in os.walk(root):
            for name in sorted(names):
                if name.endswith(".rs"):
                    path = os.path.join(folder, name)
                    functions += long_functions(path, limit)
                    with open(path, encoding="utf-8") as f:
                        count = f.read().count("\n")
                    if count > MAX_FILE_LINES:
                        files.append((count, path))
    for length, path, line, name in sorted(functions, reverse=True):
        print(f"{length:5d} lines  {path}:{line}  fn {name}")
    for count, path in sorted(files, reverse=True):
        print(f"{count:5d} lines  {path}  (file over {MAX_FILE_LINES})")


if __name__ == "__main__":
    main()
