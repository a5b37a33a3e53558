#!/usr/bin/env python3
"""No key of a serialised type spelled twice (issue 48): a type whose JSON keys are written by a
hand-written to_json and read back by a hand-written from_json spells each key in both, and the two
drift apart. Types declare their keys once instead (base/json_record.hpp's field lists).

  check-keys-once.py REPO       exit 0: no type spells a key in both directions; 1: each one named
                                 with its keys and files
  check-keys-once.py --self-test  the check on a planted tree: a hand-written pair must be found (with
                                 its keys), a one-direction writer and a field list must not; exit 0/1

How it reads the code: every definition of `T::to_json(...)` / `T::from_json(...)` (members) and of
`to_json(nlohmann::json&, const T&)` / `from_json(const nlohmann::json&, T&)` (nlohmann's free
functions) under libcore/src and libcore/include, its body found by matching braces; the keys are
the string literals in the body that look like JSON keys (lower-case words with '_', or "/word" as
the last step of a JSON pointer). A key found in both bodies of one type is one spelled twice.
ALLOWED names the types that may keep both directions by hand, each with its reason.
"""
import pathlib
import re
import sys

# Type -> why its two directions are not one field list (empty: none allowed).
ALLOWED = {}

KEY = re.compile(r'"/?([a-z][a-z0-9_]*)"')
MEMBER = re.compile(r"\b([A-Z][A-Za-z0-9_]*)::(to_json|from_json)\s*\(")
FREE = re.compile(r"\b(to_json|from_json)\s*\(\s*(?:const\s+)?(?:nlohmann::)?json\s*&\s*\w*\s*,\s*(?:const\s+)?([A-Z][A-Za-z0-9_:]*)\s*&")


def body_after(text, start):
    """The text of the brace block that opens after `start` (inside the definition's parameter
    list, just past its '('), or None (a declaration)."""
    i = start
    depth_paren = 1
    while i < len(text):
        c = text[i]
        if c == "(":
            depth_paren += 1
        elif c == ")":
            depth_paren -= 1
        elif depth_paren == 0 and c == ";":
            return None
        elif depth_paren == 0 and c == "{":
            break
        i += 1
    else:
        return None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j + 1]
    return None


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def scan(repo):
    keys = {}  # (type, direction) -> {key: {files}}
    for path in sorted(list((repo / "libcore").rglob("*.cpp")) + list((repo / "libcore").rglob("*.hpp"))):
        text = strip_comments(path.read_text(errors="replace"))
        found = [(m.group(1), m.group(2), m.end()) for m in MEMBER.finditer(text)]
        found += [(m.group(2).split("::")[-1], m.group(1), m.end()) for m in FREE.finditer(text)]
        for type_name, direction, end in found:
            body = body_after(text, end)
            if body is None:
                continue
            entry = keys.setdefault((type_name, direction), {})
            for k in KEY.findall(body):
                entry.setdefault(k, set()).add(str(path.relative_to(repo)))
    return keys


PLANTED_PAIR = """
nlohmann::json Planted::to_json() const { return {{"alpha", a}, {"beta_s", b}, {"gamma", c}}; }
Planted Planted::from_json(const JsonFile& f, const std::string& at) {
  return {f.number(at + "/alpha"), f.number(field(at, "beta_s")), 0};  // "gamma" is derived
}
void to_json(nlohmann::json& j, const FreePair& x) { j = {{"left", x.l}}; }
void from_json(const nlohmann::json& j, FreePair& x) { x.l = j.at("left"); }
"""
PLANTED_CLEAN = """
nlohmann::json Report::to_json() const { return {{"written_only", 1}}; }  // no reader
struct Listed {
  static auto fields() { return std::tuple{key("once", &Listed::once)}; }
};
nlohmann::json Listed::to_json() const { return json_fields::write(*this); }
Listed Listed::from_json(const JsonFile& f, const std::string& at) { return json_fields::read<Listed>(f, at); }
"""


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / "libcore/src/x").mkdir(parents=True)
        (root / "libcore/src/x/pair.cpp").write_text(PLANTED_PAIR)
        (root / "libcore/src/x/clean.cpp").write_text(PLANTED_CLEAN)
        twice = spelled_twice(scan(root))
    names = {t: both for t, both, _ in twice}
    ok = names == {"Planted": ["alpha", "beta_s"], "FreePair": ["left"]}
    print(f"check-keys-once --self-test: {'found' if ok else 'WRONG:'} {names}")
    return 0 if ok else 1


def spelled_twice(keys):
    """(type, keys in both directions, files) for each type not in ALLOWED."""
    out = []
    for (type_name, direction), written in sorted(keys.items()):
        if direction != "to_json" or type_name in ALLOWED:
            continue
        read = keys.get((type_name, "from_json"), {})
        both = sorted(set(written) & set(read))
        if both:
            out.append((type_name, both, sorted(set().union(*(written[k] | read[k] for k in both)))))
    return out


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    repo = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    keys = scan(repo)
    twice = [f"  {t}: {len(both)} keys ({', '.join(both[:6])}{', ...' if len(both) > 6 else ''}) in {', '.join(files)}"
             for t, both, files in spelled_twice(keys)]
    types = len({t for t, _ in keys})
    if twice:
        print(f"check-keys-once: {len(twice)} of {types} hand-serialised types spell keys in both directions "
              "(declare them once: base/json_record.hpp):")
        print("\n".join(twice))
        return 1
    print(f"check-keys-once: none of the {types} types with a hand-written to_json or from_json spells a key in both")
    return 0


if __name__ == "__main__":
    sys.exit(main())
