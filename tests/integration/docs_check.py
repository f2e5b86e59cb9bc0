#!/usr/bin/python3
"""Checks that the README, the man pages and the code name the same
commands, options, config keys and fuzz harnesses. Prints one "ok - ..."
or "FAIL - ...: why" line per check (test_docs.sh counts them); exits 1
if any failed.

    docs_check.py REPO_ROOT SHARDFS_BINARY

- every command of `shardfs --help` has a row in README.md's command table;
- every row of that table (its command and every option it shows) is in
  the SYNOPSIS of man/shardfs.8;
- every option of each command's usage line (`shardfs help CMD`) is in
  that command's SYNOPSIS entry of man/shardfs.8;
- every key of mount/config.c's key table (the source of truth) is
  documented under its section in man/shardfs.conf.5, and every key of
  mount/config_transform.c's under [transform NAME];
- every `[section] key` of README.md's ini examples is a key of that table;
- README.md names every fuzz harness of tests/fuzz/ (fuzz_NAME.c);
- every relative link of README.md, python/README.md and docs/**.md names
  a file that exists, and its #anchor a heading of it (GitHub's anchor
  rule); every `docs/NAME.md` those files and the man pages name exists;
  every "DESIGN.md §N" is a numbered section of docs/DESIGN.md;
  docs/OPERATIONS.md's table of contents links every ## and ### heading;
  every docs/backends/*.md has the backend template's ## sections, in order.

    docs_check.py --links ROOT

runs the link checks alone, on any tree with a README.md and docs/.
"""

import os
import re
import subprocess
import sys

results = []


def check(name, cond, why=""):
    results.append(bool(cond))
    print(("ok - %s" % name) if cond else ("FAIL - %s%s" % (name, ": " + why if why else "")))


# An option starts a word, or follows the "[" that starts one: not the
# "-of-W" of "K[-of-W]".
OPT = re.compile(r"(?:^|(?<=\s)|(?<=\s\[))(--?[a-zA-Z][a-zA-Z-]*)")


def options(text):
    return set(OPT.findall(text))


def roff_text(line):
    """A roff line as the words it shows: macros, font escapes and \\-
    undone."""
    line = re.sub(r"^\.(B|I|R|BR|RB|BI|IB|IR|RI)\s+", "", line)
    line = re.sub(r"\\f[BIRP]", "", line).replace("\\-", "-").replace('"', "")
    return line


def man_synopsis(path):
    """{command: entry text} of shardfs(8)'s SYNOPSIS; the command is the
    word after 'shardfs' ('CONFIG' for the `shardfs CONFIG MOUNTPOINT`
    form)."""
    text = open(path).read()
    m = re.search(r"^\.SH SYNOPSIS\n(.*?)^\.SH ", text, re.S | re.M)
    if not m:
        return {}
    out = {}
    for entry in m.group(1).split(".br\n"):
        words = " ".join(roff_text(ln) for ln in entry.splitlines()).split()
        if len(words) >= 2 and words[0] == "shardfs":
            out.setdefault(words[1], " ".join(words))
    return out


def readme_commands(text):
    """[(command, row text)] of README's command table."""
    m = re.search(r"^\| command \| what it does \|\n\|[-|]+\|\n((?:\|.*\n)+)", text, re.M)
    rows = []
    for line in (m.group(1).splitlines() if m else []):
        cell = re.match(r"\| `([^`]*)` \|", line)
        if not cell:
            rows.append(("?", line))
            continue
        words = cell.group(1).replace("\\|", "|").split()
        rows.append((words[1] if len(words) > 1 else "?", cell.group(1).replace("\\|", "|")))
    return rows


def help_commands(shardfs):
    out = subprocess.run([shardfs, "--help"], capture_output=True, text=True, timeout=30).stdout
    block = out.split("commands:", 1)[1].split("\n\n", 1)[0] if "commands:" in out else ""
    return [m.group(1) for m in re.finditer(r"^  ([a-z]+) ", block, re.M)]


def usage(shardfs, cmd):
    """The usage line(s) of `shardfs help CMD`."""
    out = subprocess.run([shardfs, "help", cmd], capture_output=True, text=True, timeout=30)
    text = out.stdout or out.stderr
    m = re.search(r"^usage: .*(?:\n[ \t]+\S.*)*", text, re.M)
    return m.group(0) if m else ""


def config_keys(path):
    """[(section, key)] of mount/config.c's key table, and the enum names
    that have no entry (should be none)."""
    src = open(path).read()
    entries = re.findall(r'\[(KEY_[A-Z0-9_]+)\]\s*=\s*\{\s*"([a-z_]+)",\s*"([a-z_0-9]+)"', src)
    enum = re.search(r"enum\s+\w*\s*\{([^}]*KEY_COUNT[^}]*)\}", src)
    names = re.findall(r"\b(KEY_[A-Z0-9_]+)\b", enum.group(1)) if enum else []
    missing = [n for n in names if n != "KEY_COUNT" and n not in {e[0] for e in entries}]
    keys = [(s, k) for _, s, k in entries]
    # A [transform NAME] section's keys: mount/config_transform.c's table.
    tpath = os.path.join(os.path.dirname(path), "config_transform.c")
    if os.path.exists(tpath):
        keys += [("transform", k) for k in
                 re.findall(r'^\t\{ "([a-z_0-9]+)", TV_[A-Z]+,', open(tpath).read(), re.M)]
    return keys, missing


def man_keys(path):
    """{(section, key)} documented in shardfs.conf(5): `.TP` then `.B key`
    under `.SS "[section]..."`."""
    out, sec = set(), None
    lines = open(path).read().splitlines()
    for i, line in enumerate(lines):
        m = re.match(r'^\.SS "?\[([a-z]+)(?: NAME)?\]', line)
        if m:
            sec = m.group(1)
        elif line.startswith(".SH"):
            sec = None
        elif sec and line == ".TP" and i + 1 < len(lines):
            m = re.match(r"^\.B ([a-z_0-9]+)$", lines[i + 1])
            if m:
                out.add((sec, m.group(1)))
    return out


def readme_ini_keys(text):
    """{(section, key)} of README's ini code blocks."""
    out = set()
    for block in re.findall(r"^```ini\n(.*?)^```", text, re.S | re.M):
        sec = None
        for line in block.splitlines():
            s = line.strip()
            m = re.match(r"^\[([a-z]+)(?:\s+[a-z0-9_-]+)?\]", s)
            if m:
                sec = m.group(1)
            elif sec and s and s[0] not in ";#":
                m = re.match(r"^([a-z_0-9]+)\s*=", s)
                if m:
                    out.add((sec, m.group(1)))
    return out


# Links. A relative link in README.md, docs/ (any depth) or python/README.md
# must name a file or folder that exists, and its #anchor a heading of the
# target .md file by GitHub's rule. Man pages name docs by path
# (`docs/NAME.md`): those paths must exist too. `DESIGN.md §N` (and a bare
# §N inside DESIGN.md) must be a numbered section of DESIGN.md.
LINK = re.compile(r"(?<!\\)\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$", re.M)
DOCPATH = re.compile(r"(?<![\w/.-])((?:\.\./)*docs/[\w./-]*?\.md)\b")


def md_prose(text):
    """The text of a Markdown file without fenced code blocks and inline code
    spans (links and headings there are not links or headings)."""
    out, fence = [], None
    for line in text.splitlines():
        m = re.match(r"^ {0,3}(`{3,}|~{3,})", line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            out.append("")
            continue
        if m:
            fence = m.group(1)
            out.append("")
            continue
        out.append(re.sub(r"(`+)(?:(?!\1).)+?\1", "``", line))
    return "\n".join(out)


def gh_slug(heading):
    """GitHub's anchor for a heading: the shown text lowercased, punctuation
    but '-' and '_' dropped, each space a '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    return "".join(c for c in text if c.isalnum() or c in "-_ ").replace(" ", "-")


_anchor_cache = {}


def md_anchors(path):
    """Every anchor of a Markdown file: its headings' slugs (a repeated one
    gets -1, -2, ... as GitHub numbers them) and <a name/id> tags."""
    if path in _anchor_cache:
        return _anchor_cache[path]
    raw = open(path, encoding="utf-8").read()
    # headings from the text with code blocks blanked, but their shown text
    # from the original line (inline code's words count in the slug)
    prose, lines = md_prose(raw).splitlines(), raw.splitlines()
    seen, out = {}, set()
    for i, line in enumerate(prose):
        if not re.match(r"^ {0,3}#{1,6}\s", line):
            continue
        text = re.sub(r"^ {0,3}#{1,6}\s+", "", lines[i])
        text = re.sub(r"\s+#+\s*$", "", text).replace("`", "")
        slug = gh_slug(text)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else "%s-%d" % (slug, n))
    out.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", raw))
    _anchor_cache[path] = out
    return out


def design_sections(root):
    path = os.path.join(root, "docs", "DESIGN.md")
    if not os.path.exists(path):
        return set()
    return set(re.findall(r"^## (\d+)\.", open(path, encoding="utf-8").read(), re.M))


def link_files(root):
    """README.md, python/README.md and every .md under docs/, as paths
    relative to root."""
    out = [f for f in ("README.md", "python/README.md") if os.path.exists(os.path.join(root, f))]
    for d, _, files in os.walk(os.path.join(root, "docs")):
        out += sorted(os.path.relpath(os.path.join(d, f), root) for f in files if f.endswith(".md"))
    return out


def broken_links(root, rel):
    """[why] for each link of file rel (under root) that does not resolve."""
    path = os.path.join(root, rel)
    text = md_prose(open(path, encoding="utf-8").read())
    bad = []
    targets = [(m.group(1), text.count("\n", 0, m.start()) + 1) for m in LINK.finditer(text)]
    targets += [(m.group(1), text.count("\n", 0, m.start()) + 1) for m in REFDEF.finditer(text)]
    for target, line in targets:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            continue  # http:, https:, mailto:: not checked here
        file, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        if not os.path.exists(dest):
            bad.append("%s:%d: %s: no such file" % (rel, line, target))
        elif anchor and dest.endswith(".md") and anchor not in md_anchors(dest):
            bad.append("%s:%d: %s: no heading with anchor #%s in %s"
                       % (rel, line, target, anchor, os.path.relpath(dest, root)))
    # docs named by path in the prose, from the repository's root
    for m in DOCPATH.finditer(text):
        p = m.group(1)
        while p.startswith("../"):
            p = p[3:]
        if not os.path.exists(os.path.join(root, p)):
            bad.append("%s:%d: %s: no such file" % (rel, text.count("\n", 0, m.start()) + 1, p))
    # DESIGN.md's numbered sections: "DESIGN.md §N", "[DESIGN.md](...) §N", and
    # inside DESIGN.md a bare "§N"
    sections = design_sections(root)
    refs = re.finditer(r"DESIGN\.md(?:\]\([^)]*\))?,?\s+§\s*(\d+)", text)
    if rel == os.path.join("docs", "DESIGN.md"):
        refs = re.finditer(r"§\s*(\d+)", text)
    for m in refs:
        if m.group(1) not in sections:
            bad.append("%s:%d: DESIGN.md §%s: DESIGN.md has no section %s"
                       % (rel, text.count("\n", 0, m.start()) + 1, m.group(1), m.group(1)))
    return bad


def toc_missing(path):
    """The ## and ### headings of a Markdown file that its table of contents
    (the links above its first ## heading) does not link to."""
    raw = open(path, encoding="utf-8").read()
    prose, lines = md_prose(raw).splitlines(), raw.splitlines()
    first = next((i for i, ln in enumerate(prose) if ln.startswith("## ")), len(prose))
    linked = set(re.findall(r"\]\(#([^)]+)\)", "\n".join(prose[:first])))
    out, seen = [], {}
    for i, line in enumerate(prose):
        m = re.match(r"^(#{1,6})\s", line)
        if not m:
            continue
        slug = gh_slug(re.sub(r"^#+\s+", "", lines[i]).replace("`", ""))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        slug = slug if n == 0 else "%s-%d" % (slug, n)
        if len(m.group(1)) in (2, 3) and slug not in linked:
            out.append(lines[i].strip())
    return out


BACKEND_TEMPLATE = ["URL form", "Credentials", "What is checked on every reply",
                    "Errors and deadlines", "Limits", "Testing against the local server"]


def check_links(root):
    files = link_files(root)
    check("the link check finds README.md and docs/*.md (%d files)" % len(files),
          "README.md" in files and len(files) >= 5)
    for rel in files:
        bad = broken_links(root, rel)
        check("%s: every relative link, #anchor and DESIGN.md §N resolves" % rel, not bad,
              "; ".join(bad))
    ops = os.path.join(root, "docs", "OPERATIONS.md")
    if os.path.exists(ops):
        miss = toc_missing(ops)
        check("docs/OPERATIONS.md's table of contents links every ## and ### section", not miss,
              "not in it: " + "; ".join(miss))
    # every backend page on one template: these ## sections, in this order
    bdir = os.path.join(root, "docs", "backends")
    for f in sorted(os.listdir(bdir)) if os.path.isdir(bdir) else []:
        if f.endswith(".md"):
            prose = md_prose(open(os.path.join(bdir, f), encoding="utf-8").read())
            got = re.findall(r"^## (.*)$", prose, re.M)
            check("docs/backends/%s has the backend template's sections" % f,
                  got == BACKEND_TEMPLATE, "has: %s" % " | ".join(got))
    # man pages name docs by their path from the repository's root
    for d in ("man",):
        for f in sorted(os.listdir(os.path.join(root, d))) if os.path.isdir(os.path.join(root, d)) else []:
            text = open(os.path.join(root, d, f), encoding="utf-8").read().replace("\\-", "-")
            bad = [p for p in DOCPATH.findall(text) if not os.path.exists(os.path.join(root, p))]
            check("man/%s: every docs/ path it names exists" % f, not bad,
                  "no such file: " + " ".join(bad))


def main():
    root, shardfs = sys.argv[1], sys.argv[2]
    readme = open(os.path.join(root, "README.md")).read()
    syn = man_synopsis(os.path.join(root, "man", "shardfs.8"))
    check("shardfs(8) has a SYNOPSIS with shardfs commands (%d)" % len(syn), len(syn) >= 5)

    rows = readme_commands(readme)
    check("README.md has a command table (%d rows)" % len(rows), len(rows) >= 5)
    cmds = help_commands(shardfs)
    check("shardfs --help lists commands (%s)" % " ".join(cmds), len(cmds) >= 5)
    in_table = {c for c, _ in rows}
    for c in cmds:
        if c == "help":
            continue  # `shardfs help COMMAND` is named in the text above the table
        check("README's command table has a row for `shardfs %s`" % c, c in in_table)
    for c, row in rows:
        entry = syn.get(c)
        check("README row `%s`: in shardfs(8)'s SYNOPSIS" % row, entry is not None)
        if entry is not None:
            miss = sorted(options(row) - options(entry))
            check("README row `%s`: its options are in the SYNOPSIS entry" % row, not miss,
                  "missing " + " ".join(miss) + " in: " + entry)
    for c in cmds:
        if c == "help":
            continue
        u = usage(shardfs, c)
        entry = syn.get(c)
        check("`shardfs help %s` has a usage line" % c, u)
        check("shardfs(8) SYNOPSIS has `shardfs %s`" % c, entry is not None)
        if u and entry is not None:
            miss = sorted(options(u) - options(entry))
            check("shardfs(8) SYNOPSIS of `%s` has every option of its usage line" % c,
                  not miss, "missing " + " ".join(miss) + " (%s)" % " ".join(u.split()))

    keys, unlisted = config_keys(os.path.join(root, "mount", "config.c"))
    check("mount/config.c's key table parses (%d keys)" % len(keys),
          len(keys) >= 30 and not unlisted, "enum names without an entry: %s" % unlisted)
    documented = man_keys(os.path.join(root, "man", "shardfs.conf.5"))
    miss = ["[%s] %s" % k for k in keys if k not in documented]
    check("shardfs.conf(5) documents every key of mount/config.c (%d)" % len(keys), not miss,
          "missing: " + ", ".join(miss))
    extra = ["[%s] %s" % k for k in sorted(documented - set(keys))]
    check("shardfs.conf(5) documents no key mount/config.c does not have", not extra,
          "unknown: " + ", ".join(extra))
    unknown = ["[%s] %s" % k for k in sorted(readme_ini_keys(readme) - set(keys))]
    check("README.md's ini examples use only keys of mount/config.c", not unknown,
          "unknown: " + ", ".join(unknown))

    harnesses = sorted(f[5:-2] for f in os.listdir(os.path.join(root, "tests", "fuzz"))
                       if f.startswith("fuzz_") and f.endswith(".c"))
    para = next((p for p in readme.split("\n\n") if "tests/fuzz/" in p), "")
    miss = [h for h in harnesses if "`%s`" % h not in para]
    check("README.md names every fuzz harness of tests/fuzz/ (%s)" % " ".join(harnesses),
          harnesses and not miss, "missing: " + " ".join(miss))

    check_links(root)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--links"]:
        check_links(sys.argv[2])  # docs_check.py --links ROOT: the links only
    else:
        main()
    sys.exit(0 if all(results) else 1)
